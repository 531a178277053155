package router_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
)

// backoffTopic is a topic whose nacks and expiries wait an hour before redelivery, and whose
// third delivery is its last.
func backoffTopic(string) router.TopicConfig {
	return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 3, Backoff: router.Backoff{Delays: []time.Duration{time.Hour}}}
}

// withBackoff gives every node of a pair backoffTopic.
func withBackoff(_ string, cfg *router.Config) { cfg.Topic = backoffTopic }

// A NackNow makes the record visible at once whatever the topic's Backoff, and a parked
// consumer gets it; the delivery counted, the next is the next attempt, and MaxDeliveries
// quarantines the record at its last. A plain Nack of no delay waits the Backoff. A stale
// or malformed handle changes nothing.
func TestNackNowSkipsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.close()
		h.cfg.Topic = backoffTopic
		h.start()
		defer h.close()
		ctx := context.Background()
		h.produce(0, 1)
		first := h.one()
		parked := h.async(router.ConsumeOptions{Wait: time.Minute})
		synctest.Wait()
		require.NoError(t, h.node.NackNow(ctx, "orders", first.Receipt))
		got := <-parked
		require.Len(t, got, 1, "the parked consumer gets it at once")
		second := got[0]
		assert.Equal(t, first.Offset, second.Offset)
		assert.Equal(t, uint32(2), second.Attempt, "the nacked delivery counted")
		assert.Equal(t, router.ReasonNacked, second.Reason)

		assert.ErrorIs(t, h.node.NackNow(ctx, "orders", first.Receipt), router.ErrGone, "superseded")
		assert.ErrorIs(t, h.node.NackNow(ctx, "orders", router.Handle{}), router.ErrMalformedHandle)
		assert.ErrorIs(t, h.node.NackNow(ctx, "nope", second.Receipt), router.ErrUnknownTopic)

		require.NoError(t, h.node.Nack(ctx, "orders", second.Receipt, 0))
		assert.Empty(t, h.consume(router.ConsumeOptions{}), "a plain nack waits the Backoff")
		time.Sleep(time.Hour)
		synctest.Wait()
		third := h.one()
		require.Equal(t, uint32(3), third.Attempt)
		require.NoError(t, h.node.NackNow(ctx, "orders", third.Receipt))
		q, err := h.node.Quarantined("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, []int64{first.Offset}, q, "the last delivery quarantines it")
		assert.Equal(t, uint64(3), h.node.Stats().Shards.Nacked)
	})
}

// A NackNow on a gateway is forwarded to the partition's owner as a NackNow, alone or in a
// batch beside acks, and the owner makes the record visible at once.
func TestForwardedNackNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, 10*time.Millisecond, 1, withBackoff) // one slot: the settles but one queue
		defer p.close()
		frames := countFrames(p.net, "a", p.a.node.Serve)
		ctx := context.Background()
		p.a.produce(0, 8)
		msgs := p.a.consume(router.ConsumeOptions{Max: 8})
		require.Len(t, msgs, 8)

		require.NoError(t, p.b.node.NackNow(ctx, "orders", msgs[0].Receipt))
		assert.Equal(t, 1, frames.count(wire.OpNackNow))
		again := p.a.one()
		assert.Equal(t, msgs[0].Offset, again.Offset, "visible at once at the owner")
		assert.Equal(t, uint32(2), again.Attempt)
		stale := msgs[0].Receipt
		assert.ErrorIs(t, p.b.node.NackNow(ctx, "orders", stale), router.ErrGone, "answered as the owner answers")

		var wg sync.WaitGroup
		for i, m := range msgs[1:] {
			wg.Go(func() {
				if i%2 == 0 {
					assert.NoError(t, p.b.node.NackNow(ctx, "orders", m.Receipt))
				} else {
					assert.NoError(t, p.b.node.Ack(ctx, "orders", m.Receipt))
				}
			})
		}
		wg.Wait()
		assert.Positive(t, frames.count(wire.OpAckBatch), "some settles shared a frame")
		back := p.a.consume(router.ConsumeOptions{Max: 8})
		assert.Equal(t, []int64{1, 3, 5, 7}, offsetsOf(back), "the nacked-now records, visible at once")
		assert.Equal(t, uint64(3), p.a.node.Stats().Shards.Acked)
		assert.Zero(t, p.b.node.Stats().Shards.Nacked)
	})
}

// An owner on a release before version 14 (pinned to 13) refuses a NackNow, alone or in a
// batch: the gateway sends it again at once as a Nack of no delay, which that owner applies
// (counted, but after the topic's Backoff there), remembers the owner for two minutes, in
// which it sends plain nacks, and asks again after.
func TestNackNowToAnOlderOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, time.Millisecond, 0, func(id string, cfg *router.Config) {
			withBackoff(id, cfg)
			atVersion("a", 13)(id, cfg)
		})
		defer p.close()
		frames := countFrames(p.net, "a", p.a.node.Serve)
		ctx := context.Background()
		p.a.produce(0, 3)
		msgs := p.a.consume(router.ConsumeOptions{Max: 3})
		require.Len(t, msgs, 3)

		require.NoError(t, p.b.node.NackNow(ctx, "orders", msgs[0].Receipt))
		assert.Equal(t, 1, frames.count(wire.OpNackNow), "sent once, refused")
		assert.Equal(t, 1, frames.count(wire.OpNack), "then sent as a nack")
		assert.Empty(t, p.a.consume(router.ConsumeOptions{}), "the owner's Backoff holds it back")

		require.NoError(t, p.b.node.NackNow(ctx, "orders", msgs[1].Receipt))
		assert.Equal(t, 1, frames.count(wire.OpNackNow), "remembered: no nack-now sent")
		assert.Equal(t, 2, frames.count(wire.OpNack))
		assert.Equal(t, uint64(2), p.a.node.Stats().Shards.Nacked)

		time.Sleep(time.Hour) // past the memory of the refusal, and the Backoff
		synctest.Wait()
		back := p.a.consume(router.ConsumeOptions{Max: 2})
		assert.Equal(t, []int64{0, 1}, offsetsOf(back))
		for _, m := range back {
			assert.Equal(t, uint32(2), m.Attempt, "the nacks counted")
		}
		require.NoError(t, p.b.node.NackNow(ctx, "orders", back[0].Receipt))
		assert.Equal(t, 2, frames.count(wire.OpNackNow), "asked again once the memory lapsed")
		assert.Equal(t, 3, frames.count(wire.OpNack))
	})
}

// A NackNow queued in a batch for an owner before version 14 is applied as a nack, and the
// acks beside it are applied too: the refused batch goes again with a nack in its place.
func TestNackNowInABatchToAnOlderOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, errs := settleEightAtAnOlderOwner(t, 13, func(b *router.Node, i int, h router.Handle) error {
			if i == 3 {
				return b.NackNow(context.Background(), "orders", h)
			}
			return b.Ack(context.Background(), "orders", h)
		})
		defer p.close()
		for i, err := range errs {
			assert.NoError(t, err, "settle %d", i)
		}
		shards := p.a.node.Stats().Shards
		assert.Equal(t, uint64(7), shards.Acked)
		assert.Equal(t, uint64(1), shards.Nacked)
		assert.Empty(t, p.a.consume(router.ConsumeOptions{}), "nacked with the owner's Backoff")
	})
}

// A gateway pinned below version 14 sends no NackNow at all: a Nack of no delay goes in its
// place, with no refused frame first. A partition it owns itself is nacked now here,
// whatever its wire version.
func TestNackNowFromAnOlderGateway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, time.Millisecond, 0, func(id string, cfg *router.Config) {
			withBackoff(id, cfg)
			atVersion("b", 13)(id, cfg)
		})
		defer p.close()
		frames := countFrames(p.net, "a", p.a.node.Serve)
		p.a.produce(0, 1)
		p.b.produce(1, 1)
		m := p.a.one()
		require.NoError(t, p.b.node.NackNow(context.Background(), "orders", m.Receipt))
		assert.Zero(t, frames.count(wire.OpNackNow))
		assert.Equal(t, 1, frames.count(wire.OpNack))

		own := p.b.consume(router.ConsumeOptions{Pinned: true, Partition: 1})
		require.Len(t, own, 1)
		require.NoError(t, p.b.node.NackNow(context.Background(), "orders", own[0].Receipt))
		again := p.b.consume(router.ConsumeOptions{Pinned: true, Partition: 1})
		require.Len(t, again, 1, "visible at once")
		assert.Equal(t, uint32(2), again[0].Attempt)
	})
}

// A node pinned to version 13 refuses a NackNow frame as that release does: alone as an
// unknown op, in a batch as a malformed frame; version 14 applies it.
func TestServeRefusesNackNowBelowV14(t *testing.T) {
	requireServeRefusesOpBelow(t, wire.OpNackNow, 14, 13)
}

// A batch carrying a NackNow and a Reject to an owner on version 8 is refused once for each
// (the newest op first), and converges: the NackNow applied as a nack, the reject answered
// ErrUnsupportedOp, unapplied, and the acks beside them applied.
func TestNackNowAndRejectInABatchToAnOlderOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, msgs, errs := settleEightAtAnOlderOwner(t, 8, func(b *router.Node, i int, h router.Handle) error {
			switch i {
			case 2:
				return b.NackNow(context.Background(), "orders", h)
			case 5:
				return b.Reject(context.Background(), "orders", h)
			}
			return b.Ack(context.Background(), "orders", h)
		})
		defer p.close()
		for i, err := range errs {
			if i == 5 {
				assert.ErrorIs(t, err, router.ErrUnsupportedOp)
				continue
			}
			assert.NoError(t, err, "settle %d", i)
		}
		shards := p.a.node.Stats().Shards
		assert.Equal(t, uint64(6), shards.Acked)
		assert.Equal(t, uint64(1), shards.Nacked)
		assert.Zero(t, shards.Quarantined+shards.Rejected)
		require.NoError(t, p.a.ack(msgs[5]), "the rejected record's lease lives on")
	})
}

// settleEightAtAnOlderOwner consumes 8 records of partition 0 on owner a (pinned to node wire
// version, a topic Backoff on both nodes) and settles each from b at once, settle(i) for the
// i-th, so that they share batches to a; it returns the pair, the records and each settle's
// error.
func settleEightAtAnOlderOwner(t *testing.T, version uint8, settle func(b *router.Node, i int, h router.Handle) error) (*pair, []router.Message, []error) {
	t.Helper()
	p := newPairWith(t, 10*time.Millisecond, 1, func(id string, cfg *router.Config) {
		withBackoff(id, cfg)
		atVersion("a", version)(id, cfg)
	})
	p.a.produce(0, 8)
	msgs := p.a.consume(router.ConsumeOptions{Max: 8})
	require.Len(t, msgs, 8)
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Go(func() { errs[i] = settle(p.b.node, i, m.Receipt) })
	}
	wg.Wait()
	return p, msgs, errs
}
