package router_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// countingClock is the system clock (synctest's, in a bubble) that counts the timers that fire.
type countingClock struct{ fired atomic.Int64 }

func (c *countingClock) Now() time.Time { return time.Now() }

func (c *countingClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, func() {
		c.fired.Add(1)
		f()
	}).Stop
}

// Issue 12, idle means asleep: once a node's work is done (records consumed, acked, nacked with
// a delay, a lease expired, everything written out and consumer.offset levelled), its goroutines
// arm no timer that fires: over an idle minute nothing wakes. Work afterwards is served as
// before: a new lease still expires on time.
func TestIdleNodeSleeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &countingClock{}
		h := newHarness(t, 0)
		h.node.Close()
		h.cfg.Clock = clk
		h.start()
		defer h.close()

		h.produce(0, 4)
		msgs := h.consume(router.ConsumeOptions{Max: 4})
		require.Len(t, msgs, 4)
		require.NoError(t, h.ack(msgs[0]))
		require.NoError(t, h.node.AckDurable(context.Background(), "orders", msgs[1].Receipt))
		require.NoError(t, h.node.Nack(context.Background(), "orders", msgs[2].Receipt, time.Second))
		// msgs[3]'s lease expires (visibility timeout vt), then msgs[2]'s delay ends: both are
		// delivered again and acked.
		time.Sleep(2 * vt)
		again := h.consume(router.ConsumeOptions{Max: 4})
		require.Len(t, again, 2)
		for _, m := range again {
			require.NoError(t, h.ack(m))
		}
		time.Sleep(2 * time.Minute) // writeouts, then the levelling of consumer.offset 30 s on
		synctest.Wait()

		before := clk.fired.Load()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Zero(t, clk.fired.Load()-before, "timers fired over an idle minute")

		h.produce(0, 1)
		late := h.consume(router.ConsumeOptions{Max: 1})
		require.Len(t, late, 1)
		start := time.Now()
		redelivered := h.consume(router.ConsumeOptions{Max: 1, Wait: time.Hour})
		require.Len(t, redelivered, 1, "the lease expired while the node was otherwise idle")
		require.Equal(t, late[0].Offset, redelivered[0].Offset)
		require.LessOrEqual(t, time.Since(start), vt+10*time.Millisecond, "on time")
	})
}
