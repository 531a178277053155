package router_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// Issue 9 item 8: Close while forwarded acks are in flight and queued behind a window of one.
// Close waits for the calls in progress (their forwarding goroutines start inside them, so
// their WaitGroup.Add never races Close's Wait), every ack answers as the owner answered or
// ErrClosed, and each one answered nil was applied. Before the fence Close returned with the
// acks still in flight and forwarding goroutines started after it (under -race, -count=3,
// the Add raced the Wait).
func TestCloseWaitsForForwardedAcks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, time.Millisecond, 1)
		defer p.a.close()
		const acks = 32
		p.a.produce(0, acks)
		msgs := p.a.consume(router.ConsumeOptions{Max: acks})
		require.Len(t, msgs, acks)
		errs := make([]error, acks)
		var wg sync.WaitGroup
		for i, m := range msgs {
			wg.Go(func() {
				errs[i] = p.b.node.Ack(context.Background(), "orders", m.Receipt)
			})
		}
		time.Sleep(time.Millisecond / 4) // the first ack is on the wire, the rest queue
		require.NoError(t, p.b.node.Close())
		calls := p.net.Calls()
		synctest.Wait() // everything the acks in progress were going to do, they have done
		wg.Wait()
		assert.Equal(t, calls, p.net.Calls(), "no forwarding RPC started after Close returned")
		applied := 0
		for _, err := range errs {
			if err == nil {
				applied++
				continue
			}
			assert.ErrorIs(t, err, router.ErrClosed)
		}
		assert.Equal(t, uint64(applied), p.a.node.Stats().Shards.Acked, "every ack answered nil was applied")
		assert.ErrorIs(t, p.b.node.Ack(context.Background(), "orders", msgs[0].Receipt), router.ErrClosed)
	})
}

// Issue 9 item 8: every call that starts once Close began answers ErrClosed and does nothing;
// a long-poll in progress on a topic with no assigned partition is woken by Close.
func TestCallsAfterCloseAnswerErrClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.produce(0, 2)
		m := h.one()
		require.NoError(t, h.ack(m))
		h.routes.Set("fresh")
		held := make(chan error, 1)
		go func() {
			_, err := h.node.Consume(context.Background(), "fresh", router.ConsumeOptions{Wait: time.Hour})
			held <- err
		}()
		synctest.Wait()
		h.close()
		assert.ErrorIs(t, <-held, router.ErrClosed, "woken by Close, not held for its wait")

		ctx := context.Background()
		handle := m.Receipt
		_, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{})
		assert.ErrorIs(t, err, router.ErrClosed)
		_, err = h.node.Replay(ctx, "orders", 0, 0, 1)
		assert.ErrorIs(t, err, router.ErrClosed)
		assert.ErrorIs(t, h.node.Ack(ctx, "orders", handle), router.ErrClosed)
		assert.ErrorIs(t, h.node.AckDurable(ctx, "orders", handle), router.ErrClosed)
		_, err = h.node.Extend(ctx, "orders", handle, time.Minute)
		assert.ErrorIs(t, err, router.ErrClosed)
		assert.ErrorIs(t, h.node.Nack(ctx, "orders", handle, 0), router.ErrClosed)
		assert.ErrorIs(t, h.node.Release(ctx, "orders", handle), router.ErrClosed)
		for _, err := range h.node.AckBatch(ctx, "orders", []router.Handle{handle, {}}) {
			assert.ErrorIs(t, err, router.ErrClosed)
		}
		assert.ErrorIs(t, h.node.Persist(ctx, "orders", 0), router.ErrClosed)
		_, err = h.node.Quarantined("orders", 0)
		assert.ErrorIs(t, err, router.ErrClosed)
		_, err = h.node.Requeue("orders", 0, 0)
		assert.ErrorIs(t, err, router.ErrClosed)
		_, err = h.node.RequeueAll("orders", 0)
		assert.ErrorIs(t, err, router.ErrClosed)
		_, err = h.node.Discard("orders", 0, 0)
		assert.ErrorIs(t, err, router.ErrClosed)
		assert.ErrorIs(t, h.node.Work(ctx, "orders", func(context.Context, router.Message) error { return nil }, router.WorkOptions{}), router.ErrClosed)
		reply, err := h.node.Serve(ctx, "b", forwardFrame(t, m))
		require.NoError(t, err)
		assert.NotEmpty(t, reply)

		assert.ErrorIs(t, h.node.DeleteTopic("orders"), router.ErrClosed)
		_, err = h.fs.Stat("/state/orders/0")
		assert.NoError(t, err, "a closed node removes nothing: the directory may be another node's now")
	})
}
