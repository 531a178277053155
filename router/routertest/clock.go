package routertest

import (
	"sort"
	"sync"
	"time"

	"narad.dev/consume/router"
)

// Clock is a fake clock implementing router.Clock. Time moves only when Advance or Set is
// called; timers that come due run then, synchronously, in order of their deadline, in the
// goroutine that moved the clock (time.AfterFunc would use a goroutine of their own). It is
// safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	seq    int
}

type fakeTimer struct {
	at   time.Time
	seq  int // orders timers with the same deadline by creation
	f    func()
	done bool
}

var _ router.Clock = (*Clock)(nil)

// NewClock returns a clock that reads start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now implements router.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements router.Clock.
func (c *Clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		stopped := !t.done
		t.done = true
		return stopped
	}
}

// Timers returns how many timers are pending.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// Advance moves the clock forward by d, running every timer that comes due.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never backwards), running every timer that comes due, each
// with the clock reading its own deadline.
func (c *Clock) Set(t time.Time) {
	for {
		c.mu.Lock()
		due := c.nextDue(t)
		if due == nil {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		due.done = true
		if due.at.After(c.now) {
			c.now = due.at
		}
		c.mu.Unlock()
		due.f()
	}
}

// nextDue returns the earliest timer due at or before t, dropping finished ones.
func (c *Clock) nextDue(t time.Time) *fakeTimer {
	live := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.done {
			live = append(live, tm)
		}
	}
	c.timers = live
	sort.Slice(live, func(i, j int) bool {
		if !live[i].at.Equal(live[j].at) {
			return live[i].at.Before(live[j].at)
		}
		return live[i].seq < live[j].seq
	})
	if len(live) == 0 || live[0].at.After(t) {
		return nil
	}
	return live[0]
}
