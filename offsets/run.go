package offsets

import (
	"context"
	"errors"
	"sync"
	"time"

	"narad.dev/consume/internal/realclock"
)

// Clock is the time Run ticks by: standard-library types only, so one host value satisfies
// the Clock of every package of the module.
type Clock interface {
	// Now never goes backwards.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed; stop cancels it, as
	// time.AfterFunc(d, f).Stop does.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Run calls Tick on clk until ctx is done or the committer is closed, and returns nil then:
// every tick period while there is work (a partition marked, written and not yet written
// out, being primed, or a Durable wait), at once when a Durable wait starts or a writeout
// batch ends with waits left, and not at all when there is none: it then sleeps until
// MarkDirty or Durable wakes it, or until the next levelling of a quiet partition falls due.
// A tick that overruns the period makes the next start at once and is
// warned about. Tick errors are logged at most once a minute; each is retried by
// the next tick. A nil clk means the system clock. Run must not be called twice at once.
func (c *Committer) Run(ctx context.Context, clk Clock) error {
	if clk == nil {
		clk = realclock.New()
	}
	stop := c.startBackground()
	defer c.stopBackground(stop)
	wake := make(chan struct{}, 1)
	fire := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	for {
		// A wake before the tick is served by it: the tick collects what was marked.
		c.urgent.Store(false)
		select {
		case <-c.kickC:
		default:
		}
		select {
		case <-wake:
		default:
		}
		start := clk.Now()
		rep, err := c.step(start, modeNormal)
		if errors.Is(err, ErrClosed) {
			return nil
		}
		end := clk.Now()
		c.afterTick(end, end.Sub(start), rep, err)
		if !c.sleep(ctx, clk, start, end, rep, wake, fire) {
			return nil
		}
	}
}

// sleep waits for the next tick: one period after start while there is work, at rep.wakeAt
// otherwise, sooner when kicked. It reports false when Run must return.
func (c *Committer) sleep(ctx context.Context, clk Clock, start, end time.Time, rep tickReport,
	wake <-chan struct{}, fire func()) bool {
	var at time.Time // zero: no timer, wait for a kick
	switch {
	case rep.busy:
		at = start.Add(c.period)
	case !rep.wakeAt.IsZero():
		at = rep.wakeAt
	}
	now, armed := end, false
	stop := func() bool { return false }
	for {
		if !armed && (c.urgent.Load() || (!at.IsZero() && !at.After(now))) {
			return c.running(ctx)
		}
		if !armed && !at.IsZero() {
			stop, armed = clk.AfterFunc(at.Sub(now), fire), true
		}
		select {
		case <-ctx.Done():
			stop()
			return false
		case <-c.done:
			stop()
			return false
		case <-wake:
			return true
		case <-c.kickC:
		}
		// Kicked: at once for a Durable wait, else at the cadence's next tick.
		next := start.Add(c.period)
		if !c.urgent.Load() && armed && !at.After(next) {
			continue // the timer armed comes soon enough
		}
		stop()
		armed = false
		if at.IsZero() || at.After(next) {
			at = next
		}
		now = clk.Now()
	}
}

// running reports whether Run goes on: neither ctx is done nor the committer closed.
func (c *Committer) running(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-c.done:
		return false
	default:
		return true
	}
}

// startBackground starts the writeout worker and the prime pool, and makes ticks hand them
// their work. stopBackground waits for the work in flight, stops them and goes back to inline
// ticks; the partitions still queued for the pool are primed by the next tick.
func (c *Committer) startBackground() *sync.WaitGroup {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	c.async, c.ranAsync = true, true
	c.primeMu.Lock()
	c.primeOff = false
	c.primeMu.Unlock()
	stop := make(chan struct{})
	c.bgStop = stop
	wg := &sync.WaitGroup{}
	wg.Go(func() { c.writeoutWorker(stop) })
	wg.Go(func() { c.primePool(stop) })
	return wg
}

func (c *Committer) stopBackground(wg *sync.WaitGroup) {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	c.primeMu.Lock()
	c.primeOff = true
	c.primeMu.Unlock()
	c.bg.Wait()
	close(c.bgStop)
	wg.Wait()
	c.async = false
	c.unqueuePrimes(c.retryNextTick)
}

// unqueuePrimes takes back the primes queued for the pool that it had not started, and hands
// each to mark, so that they are primed inline: by the next tick, or by Close's final pass.
func (c *Committer) unqueuePrimes(mark func(*partition)) {
	c.primeMu.Lock()
	left := c.primeQA
	c.primeQA = nil
	c.primeMu.Unlock()
	c.ioMu.Lock()
	for _, p := range left {
		p.priming = false
	}
	c.ioMu.Unlock()
	for _, p := range left {
		mark(p)
	}
}
