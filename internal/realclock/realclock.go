// Package realclock is the system clock in the shape every package of the module declares
// its Clock seam with (Now, and AfterFunc returning a stop function), for the packages that
// fall back to it when the host gives no clock.
package realclock

import "time"

// Clock reads the system clock. The zero value reads the wall clock, time.Now, on every
// call. A Clock from New reads the wall clock once, at New, and moves on from there by the
// monotonic clock: its times never jump when the system's wall clock is stepped (a lease
// deadline set before a step is neither cut short nor stretched by it), and a reading costs
// one clock read instead of time.Now's two (wall and monotonic), which a node makes on every
// consume and settle. Its times stay as far from the wall clock as the steps since New put
// them.
type Clock struct {
	anchor time.Time // zero: time.Now
}

// New returns a Clock anchored to the wall clock now.
func New() Clock { return Clock{anchor: time.Now()} }

// Now returns the time: time.Now() for the zero Clock; the anchor plus the monotonic time
// since, otherwise.
func (c Clock) Now() time.Time {
	if c.anchor.IsZero() {
		return time.Now()
	}
	return c.anchor.Add(time.Since(c.anchor))
}

// AfterFunc calls f in its own goroutine after d, as time.AfterFunc does, and returns the
// timer's Stop.
func (Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	return time.AfterFunc(d, f).Stop
}
