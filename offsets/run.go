package offsets

import (
	"context"
	"errors"
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
// returns nil then. A tick that overruns the period makes the next start at once (checklist
// item 70) and is warned about (item 69). Tick errors are logged at most once a minute; each
// is retried by the next tick. A nil clk means the system clock. Run must not be called twice
// at once.
func (c *Committer) Run(ctx context.Context, clk Clock) error {
	if clk == nil {
		clk = realclock.Clock{}
	}
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
