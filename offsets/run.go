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

// Run calls Tick every tick period on clk until ctx is done or the committer is closed, and
// returns nil then. A tick that overruns the period makes the next start at once and
// is warned about. Tick errors are logged at most once a minute; each
// is retried by the next tick. A nil clk means the system clock. Run must not be called twice
// at once.
func (c *Committer) Run(ctx context.Context, clk Clock) error {
	if clk == nil {
		clk = realclock.Clock{}
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
		start := clk.Now()
		rep, err := c.step(start, modeNormal)
		if errors.Is(err, ErrClosed) {
			return nil
		}
		end := clk.Now()
		c.afterTick(end, end.Sub(start), rep, err)
		wait := c.period - end.Sub(start)
		if wait <= 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-c.done:
				return nil
			default:
				continue
			}
		}
		stop := clk.AfterFunc(wait, fire)
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-c.done:
			stop()
			return nil
		case <-wake:
		}
	}
}

// startBackground starts the writeout worker and the prime pool, and makes ticks hand them
// their work. stopBackground waits for the work in flight, stops them and goes back to inline
// ticks; the partitions still queued for the pool are primed by the next tick.
func (c *Committer) startBackground() *sync.WaitGroup {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	c.async = true
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
