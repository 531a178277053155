// Package latency summarises the durations the examples measure as percentiles, for their
// reports.
package latency

import (
	"slices"
	"time"
)

// Percentiles of a set of durations; the zero value is an empty set.
type Percentiles struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// Of returns the percentiles of d (d itself is left as it was).
func Of(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	d = slices.Clone(d)
	slices.Sort(d)
	at := func(p float64) time.Duration { return d[int(p*float64(len(d)-1))] }
	return Percentiles{N: len(d), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: d[len(d)-1]}
}

// Round shortens d for a report: to 10 ms above a second, to 10 µs above a millisecond,
// else to a microsecond.
func Round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
