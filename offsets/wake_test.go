package offsets_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// countingClock is the system clock (synctest's, in a bubble) counting the timers that fire.
type countingClock struct{ fired atomic.Int64 }

func (c *countingClock) Now() time.Time { return time.Now() }

func (c *countingClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, func() {
		c.fired.Add(1)
		f()
	}).Stop
}

// Issue 12 item 2: under Run a Durable wait starts its partition's writeout at once, so one
// waiter waits one sync, not a tick; waits that come while a sync runs share the next one.
func TestDurableGroupCommitUnderRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const syncTook = 5 * time.Millisecond
		w := &wrapFS{FS: crashfs.New(), syncDelay: syncTook}
		r := newCadenceRig(t, w, nil)
		r.create("d", 0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r.start(ctx)
		time.Sleep(5 * time.Second) // primed, written out, levelled: quiet
		synctest.Wait()

		// The first durable frontier also brings consumer.offset level (one more sync in the
		// same batch): let it pass, then time the next acks.
		r.shards.Ack("d", 0, 0)
		r.c.MarkDirty("d", 0)
		require.NoError(t, r.c.Durable(ctx, "d", 0))
		time.Sleep(time.Second)
		for i := int64(1); i < 5; i++ {
			r.shards.Ack("d", 0, i)
			r.c.MarkDirty("d", 0)
			start := time.Now()
			require.NoError(t, r.c.Durable(ctx, "d", 0))
			require.Equal(t, syncTook, time.Since(start), "ack %d: one sync, no tick", i)
			require.Equal(t, i, offsets.Floors(r.c, "d", 0).Durable)
		}

		const waiters, rounds = 64, 20
		before := r.c.Stats()
		var wg sync.WaitGroup
		var next atomic.Int64
		next.Store(5)
		for range waiters {
			wg.Go(func() {
				for range rounds {
					r.shards.Ack("d", 0, next.Add(1)-1)
					r.c.MarkDirty("d", 0)
					if err := r.c.Durable(ctx, "d", 0); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		s := r.c.Stats()
		require.Equal(t, uint64(waiters*rounds), s.Durables-before.Durables)
		syncs := s.Writeouts - before.Writeouts
		require.LessOrEqual(t, float64(syncs)/(waiters*rounds), 0.1, "%d writeouts for %d waits", syncs, waiters*rounds)
		r.stop()
	})
}

// Issue 12 item 3: with nothing marked, nothing to write out or level and no Durable wait,
// Run arms no timer; a MarkDirty wakes it, and the partition's window follows within a tick
// and its writeout within the durability interval, as before.
func TestIdleCommitterSleeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCadenceRig(t, &wrapFS{FS: crashfs.New()}, nil)
		r.create("i", 0)
		clk := &countingClock{}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r.wg.Go(func() { _ = r.c.Run(ctx, clk) })
		r.cancel = cancel
		for i := range int64(20) { // a busy second, then quiet
			r.shards.Ack("i", 0, i)
			r.c.MarkDirty("i", 0)
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Minute) // written out; consumer.offset levelled 30 s after the last
		synctest.Wait()
		require.Equal(t, int64(19), offsets.Floors(r.c, "i", 0).Durable)

		fired, ticks := clk.fired.Load(), r.c.Stats().Ticks
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		require.Zero(t, clk.fired.Load()-fired, "timers fired while idle")
		require.Zero(t, r.c.Stats().Ticks-ticks, "ticks while idle")

		r.shards.Ack("i", 0, 20)
		r.c.MarkDirty("i", 0)
		time.Sleep(offsets.MaxTickPeriod)
		synctest.Wait()
		require.Zero(t, r.lag("i", 0), "the window follows within a tick")
		time.Sleep(offsets.DefaultInterval)
		synctest.Wait()
		require.Equal(t, int64(20), offsets.Floors(r.c, "i", 0).Durable, "written out within the durability interval")
		r.stop()
	})
}
