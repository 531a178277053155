// Package realclock is the system clock in the shape every package of the module declares
// its Clock seam with (Now, and AfterFunc returning a stop function), for the packages that
// fall back to it when the host gives no clock.
package realclock

import "time"

// Clock reads the system clock. The zero value is ready to use.
type Clock struct{}

// Now returns time.Now().
func (Clock) Now() time.Time { return time.Now() }

// AfterFunc calls f in its own goroutine after d, as time.AfterFunc does, and returns the
// timer's Stop.
func (Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	return time.AfterFunc(d, f).Stop
}
