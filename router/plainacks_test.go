package router_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
)

// plainAcksFrame is an Acks frame of handles, of one budget.
func plainAcksFrame(t *testing.T, handles []router.Handle, budget time.Duration) []byte {
	t.Helper()
	records := make([]wire.Record, len(handles))
	for i, h := range handles {
		records[i] = wire.Record{Op: wire.OpAck, Handle: wire.Handle(h), Budget: budget}
	}
	frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpAcks, Topic: "orders", Records: records})
	require.NoError(t, err)
	return frame
}

// An owner applies the plain acks of an Acks frame (wire version 16), runs of one partition
// in the frame's order, and answers the count applied with the answers of exactly those it
// did not apply: a nacked lease's (gone), a settled one's, one of a partition it does not
// own. Every ack it counts applied was applied.
func TestServeAcksAnswersTheFailuresAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 0, 0)
		defer p.close()
		p.a.produce(0, 5)
		msgs := p.a.consume(router.ConsumeOptions{Max: 5})
		require.Len(t, msgs, 5)
		ctx := context.Background()
		require.NoError(t, p.a.node.Nack(ctx, "orders", msgs[1].Receipt, time.Hour))
		require.NoError(t, p.a.ack(msgs[2]))
		handles := []router.Handle{msgs[0].Receipt, msgs[1].Receipt, msgs[2].Receipt,
			{Partition: 1, Offset: 0, Nonce: 1}, msgs[4].Receipt, msgs[3].Receipt}
		reply, err := p.a.node.Serve(ctx, "b", plainAcksFrame(t, handles, time.Second))
		require.NoError(t, err)
		got, err := wire.DecodeAcksReply(nil, reply, len(handles))
		require.NoError(t, err)
		require.False(t, got.Refused)
		assert.Empty(t, got.Rest)
		var failed []int
		for i, a := range got.Answers {
			if a.Status != wire.StatusOK {
				failed = append(failed, i)
			}
		}
		assert.Equal(t, []int{1, 2, 3}, failed)
		assert.Equal(t, wire.StatusGone, got.Answers[1].Status)
		assert.Equal(t, wire.StatusSettled, got.Answers[2].Status)
		assert.NotEmpty(t, got.Answers[3].Message)
		assert.Equal(t, uint64(1+3), p.a.node.Stats().Shards.Acked, "the three answered applied, and the one acked before")
		assert.Empty(t, p.a.consume(router.ConsumeOptions{Max: 5}), "each applied: none delivered again")
	})
}

// Plain acks whose requester gave up before the owner reached them are answered 503, not
// applied; a node pinned below version 16 refuses the op, applying none of it, as a release
// before it does.
func TestServeAcksUnapplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, 0, 0, nil)
		defer p.close()
		p.a.produce(0, 2)
		msgs := p.a.consume(router.ConsumeOptions{Max: 2})
		frame := plainAcksFrame(t, receipts(msgs), time.Second)
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		reply, err := p.a.node.Serve(gone, "b", frame)
		require.NoError(t, err)
		got, err := wire.DecodeAcksReply(nil, reply, 2)
		require.NoError(t, err)
		for _, a := range got.Answers {
			assert.Equal(t, wire.StatusUnavailable, a.Status)
		}
		assert.Zero(t, p.a.node.Stats().Shards.Acked)
	})
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, 0, 0, atVersion("a", 15))
		defer p.close()
		p.a.produce(0, 2)
		msgs := p.a.consume(router.ConsumeOptions{Max: 2})
		reply, err := p.a.node.Serve(context.Background(), "b", plainAcksFrame(t, receipts(msgs), time.Second))
		require.NoError(t, err)
		got, err := wire.DecodeAcksReply(nil, reply, 2)
		require.NoError(t, err)
		assert.True(t, got.Refused)
		assert.Equal(t, wire.StatusUnsupported, got.Refusal.Status)
		assert.Zero(t, p.a.node.Stats().Shards.Acked)
	})
}

// A gateway's AckAsync acks that share a frame leave as plain acks in their compact form, each answered as the owner answered it: those it applied succeed, a repeated one
// is answered already settled.
func TestAckAsyncGoesAsPlainAcks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 10*time.Millisecond, 1)
		defer p.close()
		r := p.record(nil)
		p.a.produce(0, 6)
		msgs := p.a.consume(router.ConsumeOptions{Max: 6})
		require.Len(t, msgs, 6)
		results := make(chan error, 7)
		for _, m := range msgs {
			p.b.node.AckAsync("orders", m.Receipt, func(err error) { results <- err })
		}
		p.b.node.AckAsync("orders", msgs[5].Receipt, func(err error) { results <- err })
		settled := 0
		for range 7 {
			if err := <-results; err != nil {
				require.ErrorIs(t, err, router.ErrAlreadySettled)
				settled++
			}
		}
		assert.Equal(t, 1, settled, "the repeated ack")
		frames := r.Frames()
		batched := 0
		for _, f := range frames {
			if f[1] > 1 {
				assert.Equal(t, wireAcks, f[0], "%v", frames)
				batched++
			}
		}
		assert.Positive(t, batched, "%v", frames)
		assert.Equal(t, uint64(6), p.a.node.Stats().Shards.Acked)
	})
}

// replyMarks records the first byte of each consume reply an owner sends.
type replyMarks struct {
	serve func(ctx context.Context, from string, frame []byte) ([]byte, error)
	mu    sync.Mutex
	marks []byte
}

func (r *replyMarks) Serve(ctx context.Context, from string, frame []byte) ([]byte, error) {
	reply, err := r.serve(ctx, from, frame)
	if len(frame) > 0 && frame[0] == wire.OpConsume && len(reply) > 0 {
		r.mu.Lock()
		r.marks = append(r.marks, reply[0])
		r.mu.Unlock()
	}
	return reply, err
}

func (r *replyMarks) Marks() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.marks...)
}

// A gateway asks an owner of version 16 for its deliveries in the compact form, and reads
// them as it read the others: values, headers, leases that ack. An owner before version 16
// refuses the flag once (status 3), and answers in the form before it from then on; a
// gateway before it never asks, and gets the form before it.
func TestCompactDeliveriesAcrossNodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tune  func(string, *router.Config)
		marks []byte
	}{
		{"both newest", nil, []byte{0xCB}},
		{"owner at version 15", atVersion("b", 15), []byte{0, 0xC7}},
		{"gateway at version 15", atVersion("g", 15), []byte{0xC7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, probesOnly(tc.tune))
				defer c.close()
				log := c.logs.Log("orders", 0)
				for range 8 {
					off := log.HighWatermark()
					log.AppendRecord(router.Record{Value: []byte(fmt.Sprintf("v%d", off)), Headers: headersOf(0, off)})
					c.nodes["b"].node.Appended("orders", 0, off+1)
				}
				marks := &replyMarks{serve: c.nodes["b"].node.Serve}
				c.net.Join("b", marks.Serve)
				g := c.nodes["g"]
				msgs := g.consume(context.Background(), router.ConsumeOptions{Max: 8})
				require.Len(t, msgs, 8)
				assert.Equal(t, tc.marks, marks.Marks())
				checkHeaders(t, msgs, false)
				for i, m := range msgs {
					assert.Equal(t, int64(i), m.Offset)
					assert.Equal(t, fmt.Sprintf("v%d", i), string(m.Value))
					assert.Equal(t, uint32(1), m.Attempt)
					assert.True(t, m.Expiry.After(time.Now()), "a lease ahead")
				}
				for _, err := range g.node.AckBatch(context.Background(), "orders", receipts(msgs)) {
					require.NoError(t, err)
				}
				assert.Equal(t, uint64(8), c.nodes["b"].node.Stats().Shards.Acked)
			})
		})
	}
}
