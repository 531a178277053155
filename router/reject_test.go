package router_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// quarantineLog records what Config.OnQuarantine is told.
type quarantineLog struct {
	mu   sync.Mutex
	told []inflight.Attempt
}

func (q *quarantineLog) tell(_ string, _ int32, offset int64, attempts uint32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.told = append(q.told, inflight.Attempt{Offset: offset, Count: attempts})
}

func (q *quarantineLog) load() []inflight.Attempt {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]inflight.Attempt(nil), q.told...)
}

// A reject quarantines its record at once, whatever the topic's MaxDeliveries (none, or
// more deliveries than the record had), and tells OnQuarantine once; the record is listed,
// counted, passed by the frontier and not delivered again until Requeue brings it back.
func TestRejectQuarantinesAtOnce(t *testing.T) {
	for _, maxDeliveries := range []int{0, 5} {
		t.Run(map[int]string{0: "no delivery limit", 5: "first of five deliveries"}[maxDeliveries], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, 0)
				var told quarantineLog
				h.cfg.OnQuarantine = told.tell
				h.cfg.Topic = func(string) router.TopicConfig {
					return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: maxDeliveries}
				}
				h.close()
				h.start()
				defer h.close()
				ctx := context.Background()
				h.produce(0, 3)
				poison := h.one()
				require.Equal(t, uint32(1), poison.Attempt)
				require.NoError(t, h.node.Reject(ctx, "orders", poison.Receipt))
				assert.Equal(t, []inflight.Attempt{{Offset: poison.Offset, Count: 1}}, told.load(), "told once, at once")
				q, err := h.node.Quarantined("orders", 0)
				require.NoError(t, err)
				assert.Equal(t, []int64{poison.Offset}, q)
				shards := h.node.Stats().Shards
				assert.Equal(t, uint64(1), shards.Rejected)
				assert.Equal(t, uint64(1), shards.Quarantined, "counted as any quarantine")

				err = h.node.Reject(ctx, "orders", poison.Receipt)
				assert.ErrorIs(t, err, router.ErrAlreadySettled, "a second reject finds it settled")
				assert.Equal(t, 410, router.HTTPStatus(err))
				assert.ErrorIs(t, h.node.Ack(ctx, "orders", poison.Receipt), router.ErrAlreadySettled)

				rest := h.consume(router.ConsumeOptions{Max: 3})
				assert.Equal(t, []int64{1, 2}, offsetsOf(rest), "the rejected record is not delivered again")
				for _, m := range rest {
					require.NoError(t, h.ack(m))
				}
				status, err := h.node.PartitionStatus("orders", 0)
				require.NoError(t, err)
				assert.Equal(t, int64(2), status.Frontier, "the frontier passes the rejected record")

				ok, err := h.node.Requeue("orders", 0, poison.Offset)
				require.NoError(t, err)
				require.True(t, ok)
				again := h.one()
				assert.Equal(t, poison.Offset, again.Offset, "Requeue brings it back")
				assert.Equal(t, router.ReasonRequeued, again.Reason)
				require.NoError(t, h.ack(again))
				assert.Len(t, told.load(), 1)
			})
		})
	}
}

// A reject with a handle that names no live lease answers as an ack would and changes
// nothing: after the lease expired, once the record was leased again, a malformed handle.
func TestRejectStaleHandle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		var told quarantineLog
		h.cfg.OnQuarantine = told.tell
		h.close()
		h.start()
		defer h.close()
		ctx := context.Background()
		h.produce(0, 1)
		first := h.one()
		time.Sleep(vt) // the lease expires
		synctest.Wait()
		err := h.node.Reject(ctx, "orders", first.Receipt)
		assert.ErrorIs(t, err, router.ErrGone, "expired")
		assert.NotErrorIs(t, err, router.ErrAlreadySettled)
		second := h.one()
		require.Equal(t, first.Offset, second.Offset)
		assert.ErrorIs(t, h.node.Reject(ctx, "orders", first.Receipt), router.ErrGone, "superseded")
		err = h.node.Reject(ctx, "orders", router.Handle{})
		assert.ErrorIs(t, err, router.ErrMalformedHandle)
		assert.Equal(t, 400, router.HTTPStatus(err))
		assert.ErrorIs(t, h.node.Reject(ctx, "nope", second.Receipt), router.ErrUnknownTopic)

		assert.Empty(t, told.load())
		q, err := h.node.Quarantined("orders", 0)
		require.NoError(t, err)
		assert.Empty(t, q)
		assert.Equal(t, uint64(0), h.node.Stats().Shards.Rejected)
		require.NoError(t, h.ack(second), "the live lease is untouched")
	})
}

// A rejected record stays quarantined across a power loss once the durability interval has
// passed, and across a graceful restart at once, as a quarantine after MaxDeliveries does.
func TestRejectSurvivesRestart(t *testing.T) {
	for _, powerCut := range []bool{true, false} {
		t.Run(map[bool]string{true: "power cut", false: "graceful"}[powerCut], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, 0)
				h.produce(0, 4)
				msgs := h.consume(router.ConsumeOptions{Max: 4})
				require.Len(t, msgs, 4)
				// Reject the frontier hole and one above an unsettled gap.
				require.NoError(t, h.node.Reject(context.Background(), "orders", msgs[0].Receipt))
				require.NoError(t, h.node.Reject(context.Background(), "orders", msgs[2].Receipt))
				if powerCut {
					time.Sleep(3 * time.Second) // more than the durability interval
					synctest.Wait()
					cut := h.fs.PowerCut(crashfs.PowerCut{})
					h.node.Close()
					h.fs = cut
				} else {
					h.close()
				}
				h.start()
				defer h.close()
				q, err := h.node.Quarantined("orders", 0)
				require.NoError(t, err)
				assert.Equal(t, []int64{0, 2}, q)
				again := h.consume(router.ConsumeOptions{Max: 4})
				assert.Equal(t, []int64{1, 3}, offsetsOf(again), "the rejected records are not delivered after the restart")
			})
		})
	}
}

// A reject on a gateway is forwarded to the partition's owner, which quarantines the record
// and tells its OnQuarantine; a stale handle forwarded answers as it does there.
func TestForwardedReject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var told quarantineLog
		p := newPairWith(t, time.Millisecond, 0, func(id string, cfg *router.Config) {
			if id == "a" {
				cfg.OnQuarantine = told.tell
			}
		})
		defer p.close()
		ctx := context.Background()
		p.a.produce(0, 2)
		msgs := p.a.consume(router.ConsumeOptions{Max: 2})
		require.Len(t, msgs, 2)

		require.NoError(t, p.b.node.Reject(ctx, "orders", msgs[0].Receipt), "rejected through b")
		assert.Equal(t, []inflight.Attempt{{Offset: msgs[0].Offset, Count: 1}}, told.load(), "the owner is told")
		q, err := p.a.node.Quarantined("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, []int64{msgs[0].Offset}, q)
		assert.Equal(t, uint64(1), p.a.node.Stats().Shards.Rejected)
		assert.Equal(t, uint64(0), p.b.node.Stats().Shards.Rejected)
		assert.ErrorIs(t, p.b.node.Reject(ctx, "orders", msgs[0].Receipt), router.ErrAlreadySettled)

		stale := msgs[1].Receipt
		stale.Nonce++
		assert.ErrorIs(t, p.b.node.Reject(ctx, "orders", stale), router.ErrGone)
		require.NoError(t, p.b.node.Ack(ctx, "orders", msgs[1].Receipt), "the live lease is untouched")
		assert.Len(t, told.load(), 1)
	})
}

// Rejects queued behind a busy slot leave in an AckBatch with the acks queued beside them,
// and each is answered as the owner answers it.
func TestForwardedRejectInABatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 10*time.Millisecond, 1) // one slot: every settle but one queues
		defer p.close()
		frames := countFrames(p.net, "a", p.a.node.Serve)
		p.a.produce(0, 8)
		msgs := p.a.consume(router.ConsumeOptions{Max: 8})
		require.Len(t, msgs, 8)
		var wg sync.WaitGroup
		for i, m := range msgs {
			wg.Go(func() {
				if i%2 == 0 {
					assert.NoError(t, p.b.node.Reject(context.Background(), "orders", m.Receipt))
				} else {
					assert.NoError(t, p.b.node.Ack(context.Background(), "orders", m.Receipt))
				}
			})
		}
		wg.Wait()
		q, err := p.a.node.Quarantined("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, []int64{0, 2, 4, 6}, q)
		assert.Positive(t, frames.count(wire.OpAckBatch), "some settles shared a frame")
		assert.Equal(t, uint64(4), p.a.node.Stats().Shards.Acked)
	})
}

// frameCounter counts the frames a node is sent, by op.
type frameCounter struct {
	mu    sync.Mutex
	byOp  map[byte]int
	serve func(ctx context.Context, from string, frame []byte) ([]byte, error)
}

// countFrames puts a counter in front of node id's Serve on net.
func countFrames(net *routertest.Network, id string, serve func(context.Context, string, []byte) ([]byte, error)) *frameCounter {
	c := &frameCounter{byOp: map[byte]int{}, serve: serve}
	net.Join(id, func(ctx context.Context, from string, frame []byte) ([]byte, error) {
		if len(frame) > 0 {
			c.mu.Lock()
			c.byOp[frame[0]]++
			c.mu.Unlock()
		}
		return c.serve(ctx, from, frame)
	})
	return c
}

func (c *frameCounter) count(op byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byOp[op]
}

// An owner on a release before version 10 (pinned to 8 or 9) refuses a reject: the gateway
// answers ErrUnsupportedOp (a 501), never a nack or an ack in its place, so the lease lives
// on untouched; it remembers the owner for two minutes, in which no reject is sent it, and
// asks again after.
func TestRejectToAnOlderOwner(t *testing.T) {
	for _, version := range []uint8{8, 9} {
		t.Run(map[uint8]string{8: "v8", 9: "v9"}[version], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPairWith(t, time.Millisecond, 0, atVersion("a", version))
				defer p.close()
				frames := countFrames(p.net, "a", p.a.node.Serve)
				ctx := context.Background()
				p.a.produce(0, 3)
				msgs := p.a.consume(router.ConsumeOptions{Max: 3})
				require.Len(t, msgs, 3)

				err := p.b.node.Reject(ctx, "orders", msgs[0].Receipt)
				require.ErrorIs(t, err, router.ErrUnsupportedOp)
				assert.NotErrorIs(t, err, router.ErrInvalidArgument, "the caller's request was well formed")
				assert.Equal(t, 501, router.HTTPStatus(err))
				assert.Equal(t, 1, frames.count(wire.OpReject), "sent once, refused")
				assert.Zero(t, frames.count(wire.OpNack)+frames.count(wire.OpAck)+frames.count(wire.OpAckBatch), "nothing sent in its place")

				err = p.b.node.Reject(ctx, "orders", msgs[1].Receipt)
				require.ErrorIs(t, err, router.ErrUnsupportedOp)
				assert.Equal(t, 1, frames.count(wire.OpReject), "remembered: not sent again")

				shards := p.a.node.Stats().Shards
				assert.Zero(t, shards.Nacked+shards.Acked+shards.Quarantined+shards.Rejected, "the owner applied nothing")
				_, err = p.b.node.Extend(ctx, "orders", msgs[0].Receipt, time.Minute)
				require.NoError(t, err, "the lease lives on")
				assert.Equal(t, 1, frames.count(wire.OpExtendLeft), "the owner is not taken for one before version 7")
				assert.Zero(t, frames.count(wire.OpExtend))

				time.Sleep(2*time.Minute + time.Second) // past the memory of the refusal
				synctest.Wait()
				err = p.b.node.Reject(ctx, "orders", msgs[0].Receipt)
				require.ErrorIs(t, err, router.ErrUnsupportedOp)
				assert.Equal(t, 2, frames.count(wire.OpReject), "asked again once the memory lapsed")
				assert.Zero(t, p.a.node.Stats().Shards.Quarantined)
			})
		})
	}
}

// A reject queued in a batch for an owner before version 10 is answered ErrUnsupportedOp, and
// the settles beside it are applied: the batch the owner refused goes again without it.
func TestRejectInABatchToAnOlderOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, msgs, errs := settleEightAtAnOlderOwner(t, 8, func(b *router.Node, i int, h router.Handle) error {
			if i == 3 {
				return b.Reject(context.Background(), "orders", h)
			}
			return b.Ack(context.Background(), "orders", h)
		})
		defer p.close()
		for i, err := range errs {
			if i == 3 {
				assert.ErrorIs(t, err, router.ErrUnsupportedOp)
				continue
			}
			assert.NoError(t, err, "settle %d", i)
		}
		shards := p.a.node.Stats().Shards
		assert.Equal(t, uint64(7), shards.Acked)
		assert.Zero(t, shards.Nacked+shards.Quarantined)
		require.NoError(t, p.a.ack(msgs[3]), "the rejected record's lease lives on")
	})
}

// A gateway pinned below version 10 sends no reject at all: its callers get ErrUnsupportedOp,
// with no RPC, even for an owner that would apply it. A partition it owns itself is rejected
// here, whatever its wire version.
func TestRejectFromAnOlderGateway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, time.Millisecond, 0, atVersion("b", 8))
		defer p.close()
		frames := countFrames(p.net, "a", p.a.node.Serve)
		p.a.produce(0, 1)
		p.b.produce(1, 1)
		m := p.a.one()
		err := p.b.node.Reject(context.Background(), "orders", m.Receipt)
		require.ErrorIs(t, err, router.ErrUnsupportedOp)
		assert.Zero(t, frames.count(wire.OpReject))
		require.NoError(t, p.a.ack(m))

		own := p.b.consume(router.ConsumeOptions{Pinned: true, Partition: 1})
		require.Len(t, own, 1)
		require.NoError(t, p.b.node.Reject(context.Background(), "orders", own[0].Receipt))
		q, err := p.b.node.Quarantined("orders", 1)
		require.NoError(t, err)
		assert.Equal(t, []int64{own[0].Offset}, q)
	})
}

// A node pinned to version 8 or 9 refuses a reject frame as those releases do: alone as an
// unknown op, in a batch as a malformed frame; version 10 applies it.
func TestServeRefusesRejectBelowV10(t *testing.T) {
	requireServeRefusesOpBelow(t, wire.OpReject, 10, 8, 9)
}

// requireServeRefusesOpBelow checks that a node pinned to each version of older refuses a
// frame of op (introduced in node wire version since) as those releases do: alone as an
// unknown op, in a batch as a malformed frame; and that version since applies it.
func requireServeRefusesOpBelow(t *testing.T, op byte, since uint8, older ...uint8) {
	t.Helper()
	for _, version := range append(older, since) {
		routes := &routertest.Routes{}
		routes.Set("orders", 0)
		logs := &routertest.MemLogs{}
		logs.Log("orders", 0)
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New(), Transport: unreachable{}, WireVersion: version})
		require.NoError(t, err)
		h := wire.Handle{Partition: 0, Offset: 0, Nonce: 1}
		single := wire.Request{Op: op, Topic: "orders", Records: []wire.Record{{Op: op, Handle: h}}}
		batch := wire.Request{Op: wire.OpAckBatch, Topic: "orders", Records: []wire.Record{{Op: wire.OpAck, Handle: h, Budget: time.Second}, {Op: op, Handle: h, Budget: time.Second}}}
		wantSingle, wantBatch := []byte{wire.StatusUnsupported}, []byte{wire.StatusBadRequest}
		if version == since {
			wantSingle, wantBatch = []byte{wire.StatusGone}, []byte{wire.StatusGone, wire.StatusGone}
		}
		for _, tc := range []struct {
			req  wire.Request
			want []byte
		}{{single, wantSingle}, {batch, wantBatch}} {
			frame, err := wire.EncodeRequest(tc.req)
			require.NoError(t, err)
			reply, err := node.Serve(context.Background(), "b", frame)
			require.NoError(t, err)
			assert.Equal(t, tc.want, replyStatuses(t, reply), "v%d, op %d", version, tc.req.Op)
		}
		require.NoError(t, node.Close())
	}
}
