package inflight

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// hookTrace records every hook call of a shard as text, in order.
type hookTrace struct{ events []string }

func (h *hookTrace) hooks() Hooks {
	return Hooks{
		Wake:  func(string, int32) { h.events = append(h.events, "wake") },
		Dirty: func(string, int32) { h.events = append(h.events, "dirty") },
		Deadline: func(_ string, _ int32, at time.Time) {
			h.events = append(h.events, fmt.Sprint("deadline ", at.UnixNano()))
		},
		Quarantine: func(_ string, _ int32, off int64, attempts uint32) {
			h.events = append(h.events, fmt.Sprint("quarantine ", off, " ", attempts))
		},
	}
}

// distinct returns the events without repeats, sorted, and the quarantine events in order.
func (h *hookTrace) distinct() (kinds, quarantines []string) {
	for _, e := range h.events {
		if len(e) > 10 && e[:10] == "quarantine" {
			quarantines = append(quarantines, e)
		} else if !slices.Contains(kinds, e) {
			kinds = append(kinds, e)
		}
	}
	slices.Sort(kinds)
	return kinds, quarantines
}

func (h *hookTrace) reset() { h.events = h.events[:0] }

// batchPair is two shards built alike (same settings, state and nonce seed) and driven
// through the same history, so that a batch call on one can be compared with single calls
// on the other.
type batchPair struct {
	a, b           *Shard
	traceA, traceB *hookTrace
	now            time.Time
	hwm            int64
	held           []Handle
}

func newBatchPair(t *rapid.T) *batchPair {
	cfg := Config{
		VisibilityTimeout: 10 * time.Second,
		MaxInFlight:       rapid.IntRange(1, 12).Draw(t, "inFlightCap"),
		MaxAckedAhead:     rapid.IntRange(1, 8).Draw(t, "ackedAheadCap"),
		MaxAckedAheadRuns: rapid.IntRange(1, 4).Draw(t, "ackedAheadRunsCap"),
		MaxDeliveries:     rapid.IntRange(0, 3).Draw(t, "maxDeliveries"),
		Backoff: Backoff{Delays: rapid.SampledFrom([][]time.Duration{
			nil, {time.Second},
		}).Draw(t, "backoff")},
		MaxLeaseLifetime: rapid.SampledFrom([]time.Duration{0, 5 * time.Second}).Draw(t, "maxLifetime"),
	}
	frontier := rapid.Int64Range(-1, 5).Draw(t, "frontier")
	state := State{Frontier: frontier}
	ahead := rapid.SliceOfNDistinct(rapid.Int64Range(frontier+2, frontier+20), 0, 5, rapid.ID).Draw(t, "ahead")
	slices.Sort(ahead)
	state.AckedAhead = runsOf(ahead...)
	for _, off := range rapid.SliceOfNDistinct(rapid.Int64Range(frontier+1, frontier+20), 0, 4, rapid.ID).Draw(t, "attempts") {
		if !slices.Contains(ahead, off) {
			state.Attempts = append(state.Attempts, Attempt{Offset: off, Count: uint32(rapid.IntRange(1, 3).Draw(t, "count"))})
		}
	}
	slices.SortFunc(state.Attempts, func(x, y Attempt) int { return int(x.Offset - y.Offset) })
	seed := [32]byte{byte(rapid.IntRange(1, 255).Draw(t, "seed"))} // not zero: that is crypto/rand
	p := &batchPair{traceA: new(hookTrace), traceB: new(hookTrace), now: epoch, hwm: frontier + 1}
	p.a = NewShard("batch", 1, Options{Config: cfg, Seed: seed, Hooks: p.traceA.hooks()}, state)
	p.b = NewShard("batch", 1, Options{Config: cfg, Seed: seed, Hooks: p.traceB.hooks()}, state)
	return p
}

// step applies one random operation to both shards alike.
func (p *batchPair) step(t *rapid.T) {
	switch rapid.IntRange(0, 4).Draw(t, "op") {
	case 0:
		p.hwm += int64(rapid.IntRange(1, 8).Draw(t, "produce"))
	case 1:
		p.now = p.now.Add(rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second, 10 * time.Second}).Draw(t, "advance"))
	case 2:
		la, errA := p.a.ReserveNext(p.now, p.hwm)
		lb, errB := p.b.ReserveNext(p.now, p.hwm)
		require.Equal(t, errA, errB)
		require.Equal(t, la, lb)
		if errA == nil {
			p.held = append(p.held, la.Handle)
		}
	case 3, 4:
		if len(p.held) == 0 {
			return
		}
		i := rapid.IntRange(0, len(p.held)-1).Draw(t, "held")
		h := p.held[i]
		p.held = slices.Delete(p.held, i, i+1)
		if rapid.Bool().Draw(t, "nack") {
			require.Equal(t, p.a.Nack(p.now, h, 0), p.b.Nack(p.now, h, 0))
		} else {
			require.Equal(t, p.a.Ack(p.now, h), p.b.Ack(p.now, h))
		}
	}
}

// requireSame checks that both shards hold the same state and grant the same next lease.
func (p *batchPair) requireSame(t *rapid.T) {
	var sa, sb State
	p.a.Snapshot(&sa)
	p.b.Snapshot(&sb)
	require.Equal(t, sa, sb, "persisted state")
	require.Equal(t, p.a.Stats(), p.b.Stats(), "counts")
	require.Equal(t, p.a.counters.Load(), p.b.counters.Load(), "counters")
	// NextDeadline is a wake-up hint: the expiry queue drops stale entries lazily, so the
	// two may report different stale entries, never a wake later than the earliest live
	// deadline, which both hold alike.
	liveA, okA := earliestLiveDeadline(p.a)
	liveB, okB := earliestLiveDeadline(p.b)
	require.Equal(t, okA, okB)
	require.Equal(t, liveA, liveB, "earliest live deadline")
	for _, s := range []*Shard{p.a, p.b} {
		next, ok := s.NextDeadline()
		require.Equal(t, okA || ok, ok, "a live deadline and no wake")
		if okA {
			require.LessOrEqual(t, next.UnixNano(), liveA, "a wake after the earliest live deadline")
		}
	}
}

// earliestLiveDeadline returns the earliest deadline of s that is live.
func earliestLiveDeadline(s *Shard) (at int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range append(slices.Clone(s.deadlines.run[s.deadlines.runHead:]), s.deadlines.heap...) {
		if s.isLiveDeadline(d) && (!ok || d.at < at) {
			at, ok = d.at, true
		}
	}
	return at, ok
}

// A batch of n reservations grants exactly what n single reserves grant on an identical
// shard (the same nonce stream): the same leases in the same order, the same state after,
// and the same hook reports, once each for the batch.
func TestReserveBatchIsSingleReserves(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := newBatchPair(t)
		for range rapid.IntRange(0, 40).Draw(t, "history") {
			p.step(t)
		}
		p.requireSame(t)
		p.traceA.reset()
		p.traceB.reset()
		n := rapid.IntRange(1, 16).Draw(t, "n")
		vis := rapid.SampledFrom([]time.Duration{0, 3 * time.Second}).Draw(t, "visibility")

		batch, batchErr := p.a.ReserveBatch(p.now, p.hwm, vis, n, nil)
		var singles []Lease
		var firstErr error
		for range n {
			l, err := p.b.ReserveNextFor(p.now, p.hwm, vis)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			require.NoError(t, firstErr, "a single reserve succeeded after one failed")
			singles = append(singles, l)
		}
		require.Len(t, batch, len(singles))
		if len(singles) > 0 {
			require.Equal(t, singles, batch, "leases")
		}
		if len(singles) == 0 {
			require.Equal(t, firstErr, batchErr)
		} else {
			require.NoError(t, batchErr)
		}
		p.requireSame(t)
		kindsA, quarantinesA := p.traceA.distinct()
		kindsB, quarantinesB := p.traceB.distinct()
		require.Equal(t, kindsB, kindsA, "hooks")
		require.Equal(t, quarantinesB, quarantinesA, "quarantines")
		require.Equal(t, len(kindsA)+len(quarantinesA), len(p.traceA.events), "one report of each kind per batch")

		// Settling the batch with AckMany equals acking each lease on its own, repeats and
		// stale handles included.
		var handles []Handle
		for _, l := range batch {
			handles = append(handles, l.Handle)
		}
		handles = append(handles, p.held...)
		if len(handles) > 0 {
			handles = append(handles, handles[rapid.IntRange(0, len(handles)-1).Draw(t, "repeat")])
		}
		p.now = p.now.Add(rapid.SampledFrom([]time.Duration{0, 4 * time.Second, 10 * time.Second}).Draw(t, "before ack"))
		p.traceA.reset()
		p.traceB.reset()
		errs := make([]error, len(handles))
		p.a.AckMany(p.now, handles, errs)
		for i, h := range handles {
			require.Equal(t, p.b.Ack(p.now, h), errs[i], "answer %d", i)
		}
		p.requireSame(t)
		kindsA, quarantinesA = p.traceA.distinct()
		kindsB, quarantinesB = p.traceB.distinct()
		require.Equal(t, kindsB, kindsA, "hooks of the acks")
		require.Equal(t, quarantinesB, quarantinesA, "quarantines of the acks' purge")
		require.Equal(t, len(kindsA)+len(quarantinesA), len(p.traceA.events), "one report of each kind for the acks")
	})
}

func TestReserveBatchRefusesBadVisibility(t *testing.T) {
	s, _ := newTestShard(t, Config{}, State{Frontier: -1})
	leases, err := s.ReserveBatch(epoch, 10, -time.Second, 3, nil)
	assert.ErrorIs(t, err, ErrInvalidDuration)
	assert.Empty(t, leases)
	leases, err = s.ReserveBatch(epoch, 0, 0, 3, nil)
	assert.ErrorIs(t, err, ErrEmpty)
	assert.Empty(t, leases)
}

// Once the cursor has passed every offset Restore brought acked ahead, a fresh offset is not
// looked up in the settled sets: the watermark stays below the cursor.
func TestSettledWatermark(t *testing.T) {
	s, _ := newTestShard(t, Config{}, State{Frontier: -1, AckedAhead: runsOf(2, 4)})
	leases, err := s.ReserveBatch(epoch, 10, 0, 10, nil)
	require.NoError(t, err)
	var offs []int64
	for _, l := range leases {
		offs = append(offs, l.Offset)
	}
	assert.Equal(t, []int64{0, 1, 3, 5, 6, 7, 8, 9}, offs, "the restored acked-ahead offsets are passed over")
	assert.Equal(t, int64(4), s.settledAbove)
	assert.Greater(t, s.cursor, s.settledAbove)
}
