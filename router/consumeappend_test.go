package router_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/testflags"
	"narad.dev/consume/router"
)

// sentinel is what a dst holds before ConsumeAppend: it must come back untouched, first.
var sentinel = router.Message{Topic: "kept", Offset: -7}

// ConsumeAppend appends what Consume returns: after what dst holds, into dst's spare
// capacity when it has room (the same array comes back), and a slice passed back with [:0]
// is reused batch after batch.
func TestConsumeAppendReusesDst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		defer h.close()
		h.produce(0, 4)
		h.produce(1, 4)
		ctx := context.Background()

		dst := append(make([]router.Message, 0, 8), sentinel)
		got, err := h.node.ConsumeAppend(ctx, dst, "orders", router.ConsumeOptions{Max: 3})
		require.NoError(t, err)
		require.Len(t, got, 4)
		assert.Equal(t, sentinel, got[0])
		assert.Same(t, &dst[:2][1], &got[1], "written into dst's spare capacity")
		assert.Equal(t, []int64{0, 1, 2}, offsetsOf(got[1:]))

		again, err := h.node.ConsumeAppend(ctx, got[:0], "orders", router.ConsumeOptions{Max: 5})
		require.NoError(t, err)
		require.Len(t, again, 5)
		assert.Same(t, &got[0], &again[0], "the slice passed back is reused")
		for _, m := range again {
			require.NoError(t, h.ack(m), "each message is a live lease")
		}

		// A batch consume into a reused slice allocates one object less than Consume: the
		// messages' slice (what is left is the log's read buffer). Each phase starts from
		// the same state: the shard's tables grown by a first phase, and empty again.
		h.produce(0, 3*11*5) // three phases of AllocsPerRun: 11 batches of 5 each
		var buf []router.Message
		held := make([]router.Handle, 0, 60)
		batch := func(reuse bool) func() {
			return func() {
				if !reuse {
					buf = nil
				}
				buf, err = h.node.ConsumeAppend(ctx, buf[:0], "orders", router.ConsumeOptions{Max: 5, Pinned: true})
				if err != nil || len(buf) != 5 {
					t.Fatalf("%d messages, %v", len(buf), err)
				}
				for _, m := range buf {
					held = append(held, m.Receipt)
				}
			}
		}
		phase := func(reuse bool) float64 {
			allocs := testing.AllocsPerRun(10, batch(reuse))
			for _, handle := range held {
				require.NoError(t, h.node.Ack(ctx, "orders", handle))
			}
			held = held[:0]
			return allocs
		}
		phase(false)
		fresh, reused := phase(false), phase(true)
		if !testflags.Race {
			assert.Equal(t, fresh-1, reused, "%v allocations per batch into a new slice", fresh)
		}

		full := []router.Message{sentinel} // no spare capacity: appended elsewhere
		got, err = h.node.ConsumeAppend(ctx, full, "orders", router.ConsumeOptions{})
		require.NoError(t, err)
		require.Len(t, got, 1, "every record is acked or held")

		h.produce(1, 1)
		got, err = h.node.ConsumeAppend(ctx, full, "orders", router.ConsumeOptions{Pinned: true, Partition: 1})
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.Equal(t, sentinel, got[0])
		assert.Equal(t, int32(1), got[1].Partition)
	})
}

// Errors leave dst as it was, and nothing is leased.
func TestConsumeAppendErrorsKeepDst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.produce(0, 1)
		ctx := context.Background()
		dst := []router.Message{sentinel}

		got, err := h.node.ConsumeAppend(ctx, dst, "nope", router.ConsumeOptions{})
		assert.ErrorIs(t, err, router.ErrUnknownTopic)
		assert.Equal(t, dst, got)
		got, err = h.node.ConsumeAppend(ctx, dst, "orders", router.ConsumeOptions{Max: -1})
		assert.ErrorIs(t, err, router.ErrInvalidArgument)
		assert.Equal(t, dst, got)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		got, err = h.node.ConsumeAppend(cancelled, dst, "orders", router.ConsumeOptions{})
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, dst, got)
		assert.Zero(t, h.node.Stats().Shards.Delivered, "nothing leased")

		h.close()
		got, err = h.node.ConsumeAppend(ctx, dst, "orders", router.ConsumeOptions{})
		assert.ErrorIs(t, err, router.ErrClosed)
		assert.Equal(t, dst, got)
	})
}

// A record the wait delivers, and a batch an owner answers, are appended after dst too.
func TestConsumeAppendAfterWaitAndFromOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		done := make(chan []router.Message, 1)
		go func() {
			got, err := h.node.ConsumeAppend(context.Background(), []router.Message{sentinel}, "orders",
				router.ConsumeOptions{Max: 3, Wait: time.Minute})
			assert.NoError(t, err)
			done <- got
		}()
		synctest.Wait()
		// Both records are in the log before the node hears of them: the wait delivers the
		// first, and the top-up finds the second (telling the node of each in turn raced the
		// top-up against the second append).
		log := h.logs.Log("orders", 0)
		log.Append(nil, []byte("v"), time.Now())
		log.Append(nil, []byte("v"), time.Now())
		h.node.Appended("orders", 0, 2)
		got := <-done
		require.Len(t, got, 3)
		assert.Equal(t, sentinel, got[0])
		assert.Equal(t, []int64{0, 1}, offsetsOf(got[1:]))
	})
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, time.Millisecond, 0)
		defer p.close()
		p.a.produce(0, 2) // a's partition: b has none of its own to give
		got, err := p.b.node.ConsumeAppend(context.Background(), append(make([]router.Message, 0, 4), sentinel), "orders",
			router.ConsumeOptions{Max: 2})
		require.NoError(t, err)
		require.Len(t, got, 3)
		assert.Equal(t, sentinel, got[0])
		assert.Equal(t, []int64{0, 1}, offsetsOf(got[1:]))
		for _, m := range got[1:] {
			require.NoError(t, p.b.ack(m), "forwarded to the owner")
		}
	})
}
