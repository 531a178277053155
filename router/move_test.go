package router_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// trio is three nodes on one in-memory network over one log: "a" owns partition 0 of
// orders, "b" partition 1, and "c" none (a gateway).
type trio struct {
	a, b, c *harness
	net     *routertest.Network
	logs    *routertest.MemLogs
}

func newTrio(t *testing.T, rtt time.Duration) *trio {
	t.Helper()
	return newTrioOf(t, rtt, router.TopicConfig{VisibilityTimeout: vt})
}

// newTrioOf is newTrio with the topic's settings cfg.
func newTrioOf(t *testing.T, rtt time.Duration, cfg router.TopicConfig) *trio {
	t.Helper()
	tr := &trio{net: &routertest.Network{RTT: rtt}, logs: &routertest.MemLogs{}}
	tr.logs.Log("orders", 0)
	tr.logs.Log("orders", 1)
	mk := func(id string) *harness {
		h := &harness{t: t, logs: tr.logs, routes: &routertest.Routes{}, fs: crashfs.New(), dir: "/state-" + id}
		h.cfg = router.Config{Logs: tr.logs, Routes: h.routes, Dir: h.dir, Transport: tr.net.Transport(id),
			Topic: func(string) router.TopicConfig { return cfg }}
		h.start()
		tr.net.Join(id, h.node.Serve)
		return h
	}
	tr.a, tr.b, tr.c = mk("a"), mk("b"), mk("c")
	tr.route(map[int32]string{0: "a", 1: "b"})
	return tr
}

// route sets every node's routes to owners (partition → owner).
func (tr *trio) route(owners map[int32]string) {
	for id, h := range map[string]*harness{"a": tr.a, "b": tr.b, "c": tr.c} {
		var local []int32
		remote := map[string][]int32{}
		for p, owner := range owners {
			if owner == id {
				local = append(local, p)
			} else {
				remote[owner] = append(remote[owner], p)
			}
		}
		h.routes.Set("orders", local...)
		for _, other := range []string{"a", "b", "c"} {
			if other != id {
				h.routes.SetRemote("orders", other, remote[other]...)
			}
		}
	}
}

func (tr *trio) close() {
	tr.a.close()
	tr.b.close()
	tr.c.close()
}

// move hands partition p off from one node to another and routes it there.
func (tr *trio) move(t *testing.T, p int32, from, to *harness, toID string, owners map[int32]string) {
	t.Helper()
	ctx := context.Background()
	state, err := from.node.HandOff(ctx, "orders", p)
	require.NoError(t, err)
	require.NoError(t, to.node.Adopt(ctx, "orders", p, state))
	owners[p] = toID
	tr.route(owners)
}

// A graceful move changes no consumer's lease: the handles handed out by the old owner ack,
// extend and nack on the new one, directly, through the old owner and through a gateway;
// the records they hold go to nobody else while their leases live; what was acked before
// the move is never delivered again.
func TestHandOffMovesLeasesAndAcks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTrio(t, time.Millisecond)
		defer tr.close()
		ctx := context.Background()
		tr.a.produce(0, 6)
		msgs := tr.a.consume(router.ConsumeOptions{Max: 5})
		require.Len(t, msgs, 5)
		require.NoError(t, tr.a.node.Ack(ctx, "orders", msgs[0].Receipt))
		require.NoError(t, tr.a.node.Ack(ctx, "orders", msgs[2].Receipt), "acked ahead of a gap")
		require.NoError(t, tr.a.node.Nack(ctx, "orders", msgs[4].Receipt, time.Minute), "delayed a minute")

		handedAt := time.Now()
		tr.move(t, 0, tr.a, tr.b, "b", map[int32]string{0: "a", 1: "b"})

		// The new owner serves what nobody holds (offset 5), and nothing a live lease or the
		// delay keeps.
		got := tr.b.consume(router.ConsumeOptions{Max: 10, Pinned: true, Partition: 0})
		require.Len(t, got, 1)
		assert.Equal(t, int64(5), got[0].Offset)
		assert.Equal(t, router.ReasonFirst, got[0].Reason)

		// The old handles settle on the new owner, whichever node they come through.
		require.NoError(t, tr.a.node.Ack(ctx, "orders", msgs[1].Receipt), "through the old owner, forwarded")
		expiry, err := tr.c.node.Extend(ctx, "orders", msgs[3].Receipt, 2*time.Minute)
		require.NoError(t, err, "through the gateway")
		assert.True(t, expiry.After(handedAt.Add(2*time.Minute-time.Second)))
		assert.ErrorIs(t, tr.b.node.Ack(ctx, "orders", msgs[0].Receipt), router.ErrAlreadySettled, "acked before the move")
		assert.ErrorIs(t, tr.b.node.Ack(ctx, "orders", msgs[2].Receipt), router.ErrAlreadySettled, "acked ahead before the move")
		status, err := tr.b.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, int64(2), status.Frontier, "0, 1 and 2 settled")

		// The nack's delay came with the state: offset 4 stays invisible until its minute
		// is up, then comes back as nacked, its second attempt.
		time.Sleep(time.Minute - time.Since(handedAt) - time.Second)
		for _, m := range tr.b.consume(router.ConsumeOptions{Max: 10, Pinned: true, Partition: 0}) {
			assert.Equal(t, int64(5), m.Offset, "only the record b leased itself, once its lease lapsed")
		}
		time.Sleep(2 * time.Second)
		again := tr.b.consume(router.ConsumeOptions{Max: 10, Pinned: true, Partition: 0})
		offsets := []int64{}
		for _, m := range again {
			offsets = append(offsets, m.Offset)
			if m.Offset == 4 {
				assert.Equal(t, router.ReasonNacked, m.Reason)
				assert.Equal(t, uint32(2), m.Attempt)
			}
		}
		assert.Contains(t, offsets, int64(4))
		assert.NotContains(t, offsets, int64(3), "extended for two minutes")
		assert.Zero(t, tr.a.node.Stats().Shards.Acked-2, "the old owner applied only the two acks before the move")
	})
}

// Every settle racing a hand-off either lands in the state the new owner adopts or is
// refused with ErrMoved: a handle acked with success on the old owner is settled on the new
// one, and a refused one still holds its lease there.
func TestSettleRacingHandOff(t *testing.T) {
	for round := range 20 {
		tr := newTrio(t, 0)
		ctx := context.Background()
		const n = 200
		tr.a.produce(0, n)
		msgs := tr.a.consume(router.ConsumeOptions{Max: n})
		require.Len(t, msgs, n)
		answers := make([]error, n)
		var wg sync.WaitGroup
		var state []byte
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < n; i += 4 {
					answers[i] = tr.a.node.Ack(ctx, "orders", msgs[i].Receipt)
				}
			})
		}
		wg.Go(func() {
			var err error
			state, err = tr.a.node.HandOff(ctx, "orders", 0)
			require.NoError(t, err)
		})
		wg.Wait()
		require.NoError(t, tr.b.node.Adopt(ctx, "orders", 0, state))
		for i, err := range answers {
			again := tr.b.node.Ack(ctx, "orders", msgs[i].Receipt)
			switch {
			case err == nil:
				require.ErrorIsf(t, again, router.ErrAlreadySettled, "round %d: offset %d acked on the old owner", round, i)
			case errors.Is(err, router.ErrMoved):
				require.NoErrorf(t, again, "round %d: offset %d refused on the old owner keeps its lease", round, i)
				assert.Equal(t, 503, router.HTTPStatus(err))
			default:
				t.Fatalf("round %d: offset %d: %v", round, i, err)
			}
		}
		tr.close()
	}
}

// While the routes still name the old owner, a consume there serves nothing of a partition
// it handed off, and its settles answer ErrMoved; once they name the new owner the settles
// are forwarded. The fence holds across a reload: DropPartition is what ends it.
func TestHandedOffPartitionServesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTrio(t, time.Millisecond)
		defer tr.close()
		ctx := context.Background()
		tr.a.produce(0, 3)
		m := tr.a.one()
		state, err := tr.a.node.HandOff(ctx, "orders", 0)
		require.NoError(t, err)
		again, err := tr.a.node.HandOff(ctx, "orders", 0)
		require.NoError(t, err, "a retried hand-off")
		assert.Equal(t, len(state), len(again), "the same state")

		assert.Empty(t, tr.a.consume(router.ConsumeOptions{}), "unpinned: the partition is skipped")
		_, err = tr.a.node.Consume(ctx, "orders", router.ConsumeOptions{Pinned: true, Partition: 0})
		assert.ErrorIs(t, err, router.ErrMoved, "pinned")
		err = tr.a.node.Ack(ctx, "orders", m.Receipt)
		assert.ErrorIs(t, err, router.ErrMoved)
		assert.Equal(t, 503, router.HTTPStatus(err))
		assert.ErrorIs(t, tr.a.node.Persist(ctx, "orders", 0), router.ErrMoved)

		require.NoError(t, tr.b.node.Adopt(ctx, "orders", 0, state))
		tr.route(map[int32]string{0: "b", 1: "b"})
		require.NoError(t, tr.a.node.Ack(ctx, "orders", m.Receipt), "forwarded to the new owner")
		assert.Equal(t, uint64(1), tr.b.node.Stats().Shards.Acked)
	})
}

// HandOff of a partition this node has no state for: ErrNotLocal for one its Routes name
// elsewhere (or not at all), ErrUnknownTopic for a topic they do not know.
func TestHandOffOfNothingHere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTrio(t, time.Millisecond)
		defer tr.close()
		ctx := context.Background()
		_, err := tr.a.node.HandOff(ctx, "orders", 1) // b's
		assert.ErrorIs(t, err, router.ErrNotLocal)
		_, err = tr.a.node.HandOff(ctx, "orders", 7) // no node's
		assert.ErrorIs(t, err, router.ErrNotLocal)
		_, err = tr.a.node.HandOff(ctx, "no-such-topic", 0)
		assert.ErrorIs(t, err, router.ErrUnknownTopic)
	})
}

// Adopt refuses damaged, foreign and stale state with a typed error, and changes nothing.
func TestAdoptRefusesBadState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTrio(t, 0)
		defer tr.close()
		ctx := context.Background()
		tr.a.produce(0, 4)
		for range 2 {
			require.NoError(t, tr.a.node.Ack(ctx, "orders", tr.a.one().Receipt))
		}
		first, err := tr.a.node.HandOff(ctx, "orders", 0)
		require.NoError(t, err)

		tr.b.produce(1, 2)
		before := tr.b.node.Stats().Shards
		for i := range len(first) * 8 {
			damaged := slices.Clone(first)
			damaged[i/8] ^= 1 << (i % 8)
			err := tr.b.node.Adopt(ctx, "orders", 0, damaged)
			require.ErrorIs(t, err, router.ErrInvalidArgument, "bit %d", i)
			require.Equal(t, 400, router.HTTPStatus(err))
		}
		assert.ErrorIs(t, tr.b.node.Adopt(ctx, "orders", 0, first[:len(first)-1]), router.ErrDamagedState)
		assert.ErrorIs(t, tr.b.node.Adopt(ctx, "orders", 1, first), router.ErrForeignState)
		assert.ErrorIs(t, tr.b.node.Adopt(ctx, "other", 0, first), router.ErrForeignState)
		assert.Equal(t, before, tr.b.node.Stats().Shards, "nothing changed")

		// Moved on to b, acked further there, and back to a: the first state is stale now.
		require.NoError(t, tr.b.node.Adopt(ctx, "orders", 0, first))
		tr.route(map[int32]string{0: "b", 1: "b"})
		require.NoError(t, tr.b.node.Ack(ctx, "orders", tr.b.consume(router.ConsumeOptions{Pinned: true, Partition: 0})[0].Receipt))
		second, err := tr.b.node.HandOff(ctx, "orders", 0)
		require.NoError(t, err)
		require.NoError(t, tr.a.node.Adopt(ctx, "orders", 0, second))
		tr.route(map[int32]string{0: "a", 1: "b"})
		err = tr.a.node.Adopt(ctx, "orders", 0, first)
		assert.ErrorIs(t, err, router.ErrStaleState)
		status, err := tr.a.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, int64(2), status.Frontier, "the newer state stays")
		require.NoError(t, tr.a.node.Adopt(ctx, "orders", 0, second), "the same bytes again: nothing installed")
	})
}

// A failover adopts the last durable state from the dead owner's files: what was durable is
// not delivered again, what was leased is delivered again at once, nothing is lost.
func TestFailoverFromDurableState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTrio(t, 0)
		defer tr.b.close()
		defer tr.c.close()
		ctx := context.Background()
		tr.a.produce(0, 5)
		msgs := tr.a.consume(router.ConsumeOptions{Max: 4})
		require.Len(t, msgs, 4)
		for _, m := range msgs[:2] {
			require.NoError(t, tr.a.node.AckDurable(ctx, "orders", m.Receipt))
		}
		require.NoError(t, tr.a.node.Ack(ctx, "orders", msgs[3].Receipt))
		// The owner's machine loses power: what was not synced is gone.
		disk := tr.a.fs.PowerCut(crashfs.PowerCut{})
		tr.net.SetDown("a", true)
		_ = tr.a.node.Close() // its goroutines stop; its frozen disk takes nothing more

		state, err := router.ReadState(disk, tr.a.dir, "orders", 0)
		require.NoError(t, err)
		require.NoError(t, tr.b.node.Adopt(ctx, "orders", 0, state))
		tr.route(map[int32]string{0: "b", 1: "b"})
		got := tr.b.consume(router.ConsumeOptions{Max: 10, Pinned: true, Partition: 0})
		var offsets []int64
		for _, m := range got {
			offsets = append(offsets, m.Offset)
		}
		assert.Subset(t, offsets, []int64{2, 4}, "the lease that died with the owner, and the record nobody had")
		assert.NotContains(t, offsets, int64(0), "durable before the loss")
		assert.NotContains(t, offsets, int64(1), "durable before the loss")
		assert.ErrorIs(t, tr.b.node.Ack(ctx, "orders", msgs[2].Receipt), router.ErrGone, "a dead owner's lease")
	})
}

// A hand-off whose state cannot be made durable here (its ctx ended first) returns the state
// with the error: the partition is fenced, and adopting the state elsewhere loses nothing.
func TestHandOffNotDurableStillReturnsTheState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTrio(t, 0)
		defer tr.close()
		ctx := context.Background()
		tr.a.produce(0, 3)
		acked := tr.a.one()
		require.NoError(t, tr.a.node.Ack(ctx, "orders", acked.Receipt))
		held := tr.a.one()
		done, cancel := context.WithCancel(ctx)
		cancel()
		state, err := tr.a.node.HandOff(done, "orders", 0)
		require.ErrorIs(t, err, context.Canceled)
		require.NotNil(t, state, "the state comes with the error")
		assert.ErrorIs(t, tr.a.node.Ack(ctx, "orders", held.Receipt), router.ErrMoved, "fenced all the same")

		require.NoError(t, tr.b.node.Adopt(ctx, "orders", 0, state))
		tr.route(map[int32]string{0: "b", 1: "b"})
		assert.ErrorIs(t, tr.b.node.Ack(ctx, "orders", acked.Receipt), router.ErrAlreadySettled)
		require.NoError(t, tr.b.node.Ack(ctx, "orders", held.Receipt))
		again, err := tr.a.node.HandOff(ctx, "orders", 0)
		require.NoError(t, err, "called again, it waits for the durability")
		assert.Equal(t, len(state), len(again))
	})
}

// The fence outlives a restart of the old owner: a node restarted with routes that still name
// the partition serves nothing of it and refuses its settles, ReadState of its directory
// answers ErrMoved, and DropPartition ends the fence.
func TestHandOffFenceOutlivesARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTrio(t, 0)
		defer tr.b.close()
		defer tr.c.close()
		ctx := context.Background()
		tr.a.produce(0, 3)
		m := tr.a.one()
		_, err := tr.a.node.HandOff(ctx, "orders", 0)
		require.NoError(t, err)
		tr.a.close()
		tr.a.start() // the same directory; its routes still name partition 0 here
		defer tr.a.close()

		assert.Empty(t, tr.a.consume(router.ConsumeOptions{Max: 10}), "nothing of the handed-off partition")
		assert.ErrorIs(t, tr.a.node.Ack(ctx, "orders", m.Receipt), router.ErrMoved)
		_, err = router.ReadState(tr.a.fs, tr.a.dir, "orders", 0)
		assert.ErrorIs(t, err, router.ErrMoved, "its state lives on elsewhere")

		tr.a.node.DropPartition("orders", 0)
		got := tr.a.consume(router.ConsumeOptions{Max: 10, Pinned: true, Partition: 0})
		assert.Len(t, got, 3, "the fence ended: the durable state as handed off, its lease gone with the restart")
	})
}
