package router

import (
	"sync/atomic"
	"time"
)

// HistogramBuckets is how many bounded buckets each of the node's latency histograms has;
// one more bucket counts what lies above the last bound.
const HistogramBuckets = 18

// histogramBounds are the upper bounds of the buckets, the same for every histogram: from
// 100 µs (a round trip within a host) to a minute (a long-poll), three to a decade, as a
// dashboard reads them.
var histogramBounds = [HistogramBuckets]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 20 * time.Second, time.Minute,
}

// HistogramBounds returns the upper bounds of a Histogram's buckets, ascending (a copy: the
// node's own cannot be changed through it).
func HistogramBounds() [HistogramBuckets]time.Duration { return histogramBounds }

// Histogram is a snapshot of one of the node's latency histograms (see Stats), as its
// exporters need it: Counts[i] is how many observations lay at or below HistogramBounds()[i]
// and above the bound before it, and Counts[HistogramBuckets] how many lay above the last
// bound; Sum is the total of the observations. The counts are not cumulative (a Prometheus
// bucket is the running total of them).
type Histogram struct {
	Counts [HistogramBuckets + 1]uint64
	Sum    time.Duration
}

// Count is how many observations the histogram holds.
func (h Histogram) Count() uint64 {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	return total
}

// histogram is a latency histogram kept with atomic counters: an observation takes no lock
// and allocates nothing, so the paths that observe pay two atomic adds. The sum is in
// nanoseconds, unsigned: 584 years of observed time before it wraps.
type histogram struct {
	counts [HistogramBuckets + 1]atomic.Uint64
	sum    atomic.Uint64
}

// observe counts one observation of d; a negative d (a clock that went back) counts as 0.
func (h *histogram) observe(d time.Duration) { h.observeMany(d, 1) }

// observeMany counts k observations of d at the price of one: a batch of records that
// waited alike.
func (h *histogram) observeMany(d time.Duration, k int) {
	d = max(d, 0)
	i := 0
	for i < HistogramBuckets && d > histogramBounds[i] {
		i++
	}
	h.counts[i].Add(uint64(k))
	h.sum.Add(uint64(k) * uint64(d))
}

// load returns a snapshot. Each counter is read atomically; the snapshot as a whole is not
// one instant, so Sum may hold an observation Counts does not yet, or the other way round.
func (h *histogram) load() Histogram {
	var s Histogram
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	s.Sum = time.Duration(h.sum.Load())
	return s
}
