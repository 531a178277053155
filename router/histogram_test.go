package router

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Each observation lands in the first bucket whose bound it does not pass: a value equal to
// a bound is in that bound's bucket (Prometheus' le, "less or equal").
func TestHistogramBucketOfAnObservation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      time.Duration
		bucket int
	}{
		{"zero", 0, 0},
		{"negative: a clock that went back", -time.Second, 0},
		{"at the first bound", 100 * time.Microsecond, 0},
		{"just above the first bound", 100*time.Microsecond + 1, 1},
		{"one millisecond", time.Millisecond, 3},
		{"between 1 and 2.5 ms", 2 * time.Millisecond, 4},
		{"at the last bound", time.Minute, HistogramBuckets - 1},
		{"above the last bound", time.Hour, HistogramBuckets},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h histogram
			h.observe(tc.d)
			s := h.load()
			var want Histogram
			want.Counts[tc.bucket] = 1
			want.Sum = max(tc.d, 0)
			assert.Equal(t, want, s)
			assert.Equal(t, uint64(1), s.Count())
		})
	}
}

func TestHistogramBoundsAscendAndAreACopy(t *testing.T) {
	bounds := HistogramBounds()
	for i := 1; i < len(bounds); i++ {
		assert.Less(t, bounds[i-1], bounds[i])
	}
	bounds[0] = time.Hour
	assert.Equal(t, 100*time.Microsecond, HistogramBounds()[0], "the node's bounds changed through the copy")
}

// The histogram against a model: a list of the observations, bucketed by a scan of the
// bounds at the end.
func TestHistogramMatchesAModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var h histogram
		var seen []time.Duration
		for _, d := range rapid.SliceOf(rapid.Int64Range(-int64(time.Second), int64(2*time.Minute))).Draw(t, "observations") {
			h.observe(time.Duration(d))
			seen = append(seen, time.Duration(d))
		}
		var want Histogram
		for _, d := range seen {
			d = max(d, 0)
			bucket := HistogramBuckets
			for i := HistogramBuckets - 1; i >= 0; i-- {
				if d <= histogramBounds[i] {
					bucket = i
				}
			}
			want.Counts[bucket]++
			want.Sum += d
		}
		require.Equal(t, want, h.load())
	})
}

// Observations from many goroutines at once are all counted (run under -race).
func TestHistogramConcurrentObservations(t *testing.T) {
	var h histogram
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				h.observe(time.Duration(g*1000+i) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	s := h.load()
	assert.Equal(t, uint64(8000), s.Count())
	// The sum of 0..7999 µs.
	assert.Equal(t, time.Duration(7999*8000/2)*time.Microsecond, s.Sum)
}

func BenchmarkHistogramObserve(b *testing.B) {
	var h histogram
	b.ReportAllocs()
	d := 3 * time.Millisecond
	for b.Loop() {
		h.observe(d)
	}
}
