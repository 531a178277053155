package inflight

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestBackoffDelay(t *testing.T) {
	list := Backoff{Delays: []time.Duration{time.Second, 5 * time.Second}}
	expo := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		b       Backoff
		attempt uint32
		want    time.Duration
	}{
		{Backoff{}, 3, 0},
		{list, 0, 0},
		{list, 1, time.Second},
		{list, 2, 5 * time.Second},
		{list, 9, 5 * time.Second},
		{expo, 1, 100 * time.Millisecond},
		{expo, 2, 200 * time.Millisecond},
		{expo, 4, 800 * time.Millisecond},
		{expo, 5, time.Second},
		{expo, math.MaxUint32, time.Second},
		{Backoff{Initial: time.Hour}, 200, time.Duration(math.MaxInt64/2) + 1},
	} {
		got := tc.b.Delay(tc.attempt, 0)
		if tc.b.Initial == time.Hour {
			assert.Positive(t, got, "no overflow without a cap")
			continue
		}
		assert.Equal(t, tc.want, got, "%+v attempt %d", tc.b, tc.attempt)
	}
	jittered := Backoff{Delays: []time.Duration{time.Second}, Jitter: 0.5}
	assert.Equal(t, time.Second, jittered.Delay(1, 0))
	assert.Equal(t, 500*time.Millisecond, jittered.Delay(1, math.MaxUint64).Round(time.Millisecond))
	rapid.Check(t, func(t *rapid.T) {
		d := jittered.Delay(1, rapid.Uint64().Draw(t, "random"))
		if d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("jittered delay %v outside [0.5s, 1s]", d)
		}
	})
}

// A record that never succeeds is quarantined after MaxDeliveries: the frontier passes over
// it, the hook reports it, and the quarantine persists.
func TestMaxDeliveriesQuarantines(t *testing.T) {
	var reported []Attempt
	hooks := Hooks{Quarantine: func(_ string, _ int32, off int64, n uint32) {
		reported = append(reported, Attempt{Offset: off, Count: n})
	}}
	s := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: vt, MaxDeliveries: 3}, Hooks: hooks}, State{Frontier: -1})
	now := epoch
	poison := reserve(t, s, now, 2)
	require.NoError(t, s.Nack(now, poison.Handle, 0))
	poison = reserve(t, s, now, 2)
	now = poison.Expiry // the second delivery's consumer dies
	poison = reserve(t, s, now, 2)
	assert.Equal(t, uint32(3), poison.Attempt)
	assert.Equal(t, int64(0), poison.Offset)
	require.NoError(t, s.Nack(now, poison.Handle, time.Hour), "an explicit delay does not beat the limit")
	assert.Equal(t, []Attempt{{Offset: 0, Count: 3}}, reported)
	assert.Equal(t, int64(0), s.Stats().Frontier, "the frontier passes the quarantined record")
	assert.Equal(t, []int64{0}, s.Quarantined())
	assert.Equal(t, uint64(1), s.counters.Load().Quarantined)
	next := reserve(t, s, now, 2)
	assert.Equal(t, int64(1), next.Offset)
	assert.ErrorIs(t, s.Ack(now, poison.Handle), ErrAlreadySettled)

	var snap State
	s.Snapshot(&snap)
	assert.Equal(t, []int64{0}, snap.Quarantined)
	s.Restore(snap)
	assert.Equal(t, []int64{0}, s.Quarantined(), "the quarantine survives a restart")
}

func TestRequeue(t *testing.T) {
	s := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: vt, MaxDeliveries: 1}}, State{Frontier: -1})
	now := epoch
	for range 3 {
		require.NoError(t, s.Nack(now, reserve(t, s, now, 3).Handle, 0))
	}
	assert.Equal(t, []int64{0, 1, 2}, s.Quarantined())
	assert.Equal(t, int64(2), s.Stats().Frontier)

	assert.False(t, s.Requeue(now, 7), "not quarantined")
	assert.True(t, s.Requeue(now, 1))
	assert.False(t, s.Requeue(now, 1), "already requeued")
	again := reserve(t, s, now, 3)
	assert.Equal(t, int64(1), again.Offset, "delivered below the frontier, first")
	assert.Equal(t, ReasonRequeued, again.Reason)
	assert.Equal(t, uint32(1), again.Attempt, "attempts counted afresh")
	assert.Equal(t, int64(2), s.Stats().Frontier, "the frontier never moves back")
	require.NoError(t, s.Ack(now, again.Handle))
	assert.Equal(t, []int64{0, 2}, s.Quarantined())
	assert.ErrorIs(t, s.Ack(now, again.Handle), ErrAlreadySettled)

	assert.Equal(t, 2, s.RequeueAll(now))
	var snap State
	s.Snapshot(&snap)
	assert.Equal(t, []int64{0, 2}, snap.Requeued)
	s.Restore(snap)
	l0 := reserve(t, s, now, 3)
	l2 := reserve(t, s, now, 3)
	assert.Equal(t, []int64{0, 2}, []int64{l0.Offset, l2.Offset}, "requeued offsets survive a restart")
	_, err := s.ReserveNext(now, 3)
	assert.ErrorIs(t, err, ErrEmpty)
	require.NoError(t, s.Nack(now, l0.Handle, 0))
	assert.Equal(t, []int64{0}, s.Quarantined(), "past the limit again: back in quarantine")
	require.NoError(t, s.Ack(now, l2.Handle))
	assert.Equal(t, Stats{Frontier: 2, Quarantined: 1}, s.Stats())
}

// Discard settles a quarantined record for good: below the frontier it leaves the
// quarantine, above a hole it is acked ahead; either way it is persisted and never delivered
// again. An offset that is not quarantined (never was, requeued, leased after a requeue,
// discarded already) answers false and changes nothing.
func TestDiscard(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup brings the shard to where the case starts and returns the offset to
		// discard; leases it leaves stay live.
		setup func(t *testing.T, s *Shard) int64
		want  bool
		// after is the state wanted after the discard, with no lease held.
		after Stats
		// snap is the persisted state wanted after the discard.
		snap State
		// redelivered is what a restart delivers again, ascending, below hwm 4.
		redelivered []int64
	}{{
		name: "quarantined below the frontier",
		setup: func(t *testing.T, s *Shard) int64 {
			quarantineNext(t, s) // 0
			return 0
		},
		want:        true,
		after:       Stats{Frontier: 0},
		snap:        State{Frontier: 0},
		redelivered: []int64{1, 2, 3},
	}, {
		name: "quarantined above a hole: acked ahead",
		setup: func(t *testing.T, s *Shard) int64 {
			hole := reserve(t, s, epoch, 4) // 0, leased
			quarantineNext(t, s)            // 1
			require.NoError(t, s.GiveBack(epoch, hole.Handle))
			return 1
		},
		want:        true,
		after:       Stats{Frontier: -1, AckedAhead: 1, AckedAheadRuns: 1},
		snap:        State{Frontier: -1, AckedAhead: []Run{{1, 1}}},
		redelivered: []int64{0, 2, 3},
	}, {
		name: "between two acked-ahead runs: they join",
		setup: func(t *testing.T, s *Shard) int64 {
			hole := reserve(t, s, epoch, 4) // 0
			a := reserve(t, s, epoch, 4)    // 1
			quarantineNext(t, s)            // 2
			b := reserve(t, s, epoch, 4)    // 3
			require.NoError(t, s.Ack(epoch, a.Handle))
			require.NoError(t, s.Ack(epoch, b.Handle))
			require.Equal(t, 2, s.Stats().AckedAheadRuns)
			require.NoError(t, s.GiveBack(epoch, hole.Handle))
			return 2
		},
		want:        true,
		after:       Stats{Frontier: -1, AckedAhead: 3, AckedAheadRuns: 1},
		snap:        State{Frontier: -1, AckedAhead: []Run{{1, 3}}},
		redelivered: []int64{0},
	}, {
		name: "never quarantined",
		setup: func(t *testing.T, s *Shard) int64 {
			quarantineNext(t, s) // 0
			return 2
		},
		after:       Stats{Frontier: 0, Quarantined: 1},
		snap:        State{Frontier: 0, Quarantined: []int64{0}},
		redelivered: []int64{1, 2, 3},
	}, {
		name: "requeued below the frontier, waiting",
		setup: func(t *testing.T, s *Shard) int64 {
			quarantineNext(t, s) // 0
			require.True(t, s.Requeue(epoch, 0))
			return 0
		},
		after:       Stats{Frontier: 0, Quarantined: 1, Requeued: 1},
		snap:        State{Frontier: 0, Requeued: []int64{0}},
		redelivered: []int64{0, 1, 2, 3},
	}, {
		name: "requeued above a hole: unresolved again",
		setup: func(t *testing.T, s *Shard) int64 {
			hole := reserve(t, s, epoch, 4) // 0
			quarantineNext(t, s)            // 1
			require.True(t, s.Requeue(epoch, 1))
			require.NoError(t, s.GiveBack(epoch, hole.Handle))
			return 1
		},
		after:       Stats{Frontier: -1},
		snap:        State{Frontier: -1},
		redelivered: []int64{0, 1, 2, 3},
	}, {
		name: "requeued and leased again",
		setup: func(t *testing.T, s *Shard) int64 {
			quarantineNext(t, s) // 0
			require.True(t, s.Requeue(epoch, 0))
			l := reserve(t, s, epoch, 4)
			require.Equal(t, int64(0), l.Offset)
			assert.False(t, s.Discard(epoch, 0), "a live lease of a requeued record")
			require.NoError(t, s.GiveBack(epoch, l.Handle))
			return 0
		},
		after:       Stats{Frontier: 0, Quarantined: 1, Requeued: 1},
		snap:        State{Frontier: 0, Requeued: []int64{0}},
		redelivered: []int64{0, 1, 2, 3},
	}, {
		name: "discarded already",
		setup: func(t *testing.T, s *Shard) int64 {
			quarantineNext(t, s) // 0
			require.True(t, s.Discard(epoch, 0))
			return 0
		},
		after:       Stats{Frontier: 0},
		snap:        State{Frontier: 0},
		redelivered: []int64{1, 2, 3},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dirty := 0
			hooks := Hooks{Dirty: func(string, int32) { dirty++ }}
			s := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: vt, MaxDeliveries: 1}, Hooks: hooks}, State{Frontier: -1})
			off := tc.setup(t, s)
			var before State
			s.Snapshot(&before) // clears the dirty report
			dirty = 0
			discarded := s.counters.Discarded.Load()

			assert.Equal(t, tc.want, s.Discard(epoch, off))
			assert.Equal(t, tc.after, s.Stats())
			var snap State
			s.Snapshot(&snap)
			assert.Equal(t, tc.snap.Frontier, snap.Frontier)
			assert.Equal(t, tc.snap.AckedAhead, snap.AckedAhead)
			assert.Equal(t, tc.snap.Quarantined, snap.Quarantined)
			assert.Equal(t, tc.snap.Requeued, snap.Requeued)
			assert.NotContains(t, s.Quarantined(), off, "never listed as quarantined after a discard")
			if tc.want {
				assert.Equal(t, 1, dirty, "reported dirty, for the committer")
				assert.Equal(t, discarded+1, s.counters.Discarded.Load())
			} else {
				assert.Zero(t, dirty, "nothing changed")
				assert.Equal(t, discarded, s.counters.Discarded.Load())
				assert.Equal(t, before.Quarantined, snap.Quarantined)
				assert.Equal(t, before.AckedAhead, snap.AckedAhead)
			}

			s.Restore(snap)
			now := epoch.Add(time.Hour)
			var got []int64
			for {
				l, err := s.ReserveNext(now, 4)
				if err != nil {
					break
				}
				got = append(got, l.Offset)
			}
			slices.Sort(got)
			assert.Equal(t, tc.redelivered, got, "delivered after a restart")
		})
	}
}

// quarantineNext reserves the next record and nacks it into the quarantine (MaxDeliveries 1).
func quarantineNext(t *testing.T, s *Shard) {
	t.Helper()
	l := reserve(t, s, epoch, 4)
	require.NoError(t, s.Nack(epoch, l.Handle, 0))
	require.Contains(t, s.Quarantined(), l.Offset)
}

// A discard of a dropped or handed-off shard changes nothing.
func TestDiscardFrozen(t *testing.T) {
	s := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: vt, MaxDeliveries: 1}}, State{Frontier: -1})
	quarantineNext(t, s)
	var st State
	s.HandOff(epoch, &st)
	assert.False(t, s.Discard(epoch, 0))
	assert.Equal(t, []int64{0}, st.Quarantined)
	dropped := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: vt, MaxDeliveries: 1}}, st)
	dropped.drop(false)
	assert.False(t, dropped.Discard(epoch, 0))
	assert.Equal(t, []int64{0}, dropped.Quarantined())
	next := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: vt, MaxDeliveries: 1}}, st)
	assert.True(t, next.Discard(epoch, 0), "the next owner's shard discards it")
}

// A lease expiry and a nack without a delay wait what the backoff policy says.
func TestBackoffOnExpiryAndNack(t *testing.T) {
	cfg := Config{VisibilityTimeout: vt, Backoff: Backoff{Delays: []time.Duration{time.Second, 4 * time.Second}}}
	s := NewShard("t", 0, Options{Config: cfg}, State{Frontier: -1})
	l := reserve(t, s, epoch, 1)
	_, err := s.ReserveNext(l.Expiry.Add(time.Second-1), 1)
	assert.ErrorIs(t, err, ErrAllReserved, "expired at Expiry, invisible for the first backoff step")
	l = reserve(t, s, l.Expiry.Add(time.Second), 1)
	assert.Equal(t, ReasonExpired, l.Reason)
	now := l.Expiry.Add(-time.Second)
	require.NoError(t, s.Nack(now, l.Handle, 0))
	_, err = s.ReserveNext(now.Add(4*time.Second-1), 1)
	assert.ErrorIs(t, err, ErrAllReserved, "a nack without a delay takes the policy's second step")
	l = reserve(t, s, now.Add(4*time.Second), 1)
	require.NoError(t, s.Nack(now, l.Handle, time.Millisecond))
	assert.Equal(t, int64(0), reserve(t, s, now.Add(time.Millisecond), 1).Offset, "an explicit delay wins")
}

// NackNow makes the record visible at once, whatever the backoff policy, with a wake; the
// delivery counts as an attempt, so the next lease is the next attempt and MaxDeliveries
// quarantines the record instead once it is reached. A stale handle changes nothing.
func TestNackNowSkipsBackoff(t *testing.T) {
	cfg := Config{VisibilityTimeout: vt, MaxDeliveries: 3, Backoff: Backoff{Delays: []time.Duration{time.Hour}}}
	s, hooks := newTestShard(t, cfg, State{Frontier: -1})
	l := reserve(t, s, epoch, 1)
	wakes, _ := hooks.counts()
	require.NoError(t, s.NackNow(epoch, l.Handle))
	after, _ := hooks.counts()
	assert.Equal(t, wakes+1, after, "a wake is reported")
	again := reserve(t, s, epoch, 1)
	assert.Equal(t, l.Offset, again.Offset, "visible at once, the hour of backoff skipped")
	assert.Equal(t, uint32(2), again.Attempt, "the nacked delivery counted")
	assert.Equal(t, ReasonNacked, again.Reason)
	assert.ErrorIs(t, s.NackNow(epoch, l.Handle), ErrGone, "the first lease is gone")
	require.NoError(t, s.Nack(epoch, again.Handle, 0))
	_, err := s.ReserveNext(epoch.Add(time.Hour-1), 1)
	assert.ErrorIs(t, err, ErrAllReserved, "a plain nack waits the backoff")
	third := reserve(t, s, epoch.Add(time.Hour), 1)
	require.Equal(t, uint32(3), third.Attempt)
	require.NoError(t, s.NackNow(epoch.Add(time.Hour), third.Handle))
	assert.Equal(t, []int64{l.Offset}, s.Quarantined(), "the third attempt reached MaxDeliveries")
}

func TestExtensionCaps(t *testing.T) {
	cfg := Config{VisibilityTimeout: time.Minute, MaxExtension: 10 * time.Second, MaxLeaseLifetime: 45 * time.Second}
	s := NewShard("t", 0, Options{Config: cfg}, State{Frontier: -1})
	l := reserve(t, s, epoch, 1)
	assert.Equal(t, epoch.Add(45*time.Second), l.Expiry, "the lifetime caps the first lease too")
	expiry, err := s.Extend(epoch.Add(time.Second), l.Handle, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, epoch.Add(11*time.Second), expiry, "one extension is capped")
	for at := 10 * time.Second; at <= 40*time.Second; at += 9 * time.Second {
		expiry, err = s.Extend(epoch.Add(at), l.Handle, 0)
		require.NoError(t, err)
	}
	assert.Equal(t, epoch.Add(45*time.Second), expiry, "the whole lease is capped")
	_, err = s.Extend(epoch.Add(45*time.Second), l.Handle, 0)
	assert.ErrorIs(t, err, ErrGone, "a stuck consumer cannot hold a record forever")
}

func TestFenceGrowsAcrossLeasesAndRestarts(t *testing.T) {
	s := NewShard("t", 0, Options{}, State{Frontier: -1})
	var last uint64
	now := epoch
	for i := range 10 {
		l := reserve(t, s, now, 1)
		assert.Greater(t, l.Fence, last)
		assert.GreaterOrEqual(t, l.Fence, uint64(now.UnixNano()))
		last = l.Fence
		require.NoError(t, s.Nack(now, l.Handle, 0))
		if i == 5 {
			var snap State
			s.Snapshot(&snap)
			s = NewShard("t", 0, Options{}, snap) // a new process
			now = now.Add(time.Millisecond)
		}
	}
}

// Issue "Poison messages": the frontier is never held longer than MaxDeliveries ×
// (visibility timeout + backoff) by one record that always fails.
func TestPoisonRecordHoldsTheFrontierBoundedly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 6).Draw(t, "maxDeliveries")
		visibility := time.Duration(rapid.IntRange(1, 60).Draw(t, "visibilitySeconds")) * time.Second
		steps := rapid.SliceOfN(rapid.IntRange(0, 30), 0, 4).Draw(t, "backoffSeconds")
		var delays []time.Duration
		var maxDelay time.Duration
		for _, sec := range steps {
			delays = append(delays, time.Duration(sec)*time.Second)
			maxDelay = max(maxDelay, time.Duration(sec)*time.Second)
		}
		cfg := Config{VisibilityTimeout: visibility, MaxDeliveries: limit, Backoff: Backoff{Delays: delays}}
		s := NewShard("t", 0, Options{Config: cfg}, State{Frontier: -1})
		start := epoch
		now := start
		nacks := rapid.Bool().Draw(t, "nackInsteadOfDying")
		for s.Stats().Frontier < 0 {
			lease, err := s.ReserveNext(now, 1)
			if err != nil {
				now = now.Add(time.Second) // waiting for the backoff to end
				continue
			}
			if nacks {
				require.NoError(t, s.Nack(now, lease.Handle, 0))
			} else {
				now = lease.Expiry // the consumer dies holding it
				s.Purge(now)
			}
			if bound := time.Duration(limit) * (visibility + maxDelay); now.Sub(start) > bound {
				t.Fatalf("frontier held %v by one record, bound %v", now.Sub(start), bound)
			}
		}
	})
}

// A reject quarantines its record at once, whatever its attempts and MaxDeliveries (none at
// all included): the frontier passes it, the hook reports it once, the quarantine persists,
// and Requeue brings it back. A handle that names no live lease changes nothing.
func TestReject(t *testing.T) {
	for _, tc := range []struct {
		name          string
		maxDeliveries int
		firstOffset   int64 // the rejected record: the frontier hole, or above it
	}{
		{"no delivery limit, at the frontier hole", 0, 0},
		{"no delivery limit, above the hole", 0, 1},
		{"first of five deliveries", 5, 0},
		{"first of five deliveries, above the hole", 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reported []Attempt
			hooks := Hooks{Quarantine: func(_ string, _ int32, off int64, n uint32) {
				reported = append(reported, Attempt{Offset: off, Count: n})
			}}
			s := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: vt, MaxDeliveries: tc.maxDeliveries}, Hooks: hooks}, State{Frontier: -1})
			now := epoch
			first := reserve(t, s, now, 3)
			second := reserve(t, s, now, 3)
			rejected, other := first, second
			if tc.firstOffset == 1 {
				rejected, other = second, first
			}
			require.NoError(t, s.Reject(now, rejected.Handle))
			assert.Equal(t, []Attempt{{Offset: rejected.Offset, Count: 1}}, reported, "told once, with its one attempt")
			assert.Equal(t, []int64{rejected.Offset}, s.Quarantined())
			c := s.counters.Load()
			assert.Equal(t, uint64(1), c.Rejected)
			assert.Equal(t, uint64(1), c.Quarantined, "counted as a quarantine too")
			assert.Equal(t, 1, s.Stats().Leased, "the other lease is untouched")

			// Every later settle of the rejected handle finds the offset settled, and changes nothing.
			assert.ErrorIs(t, s.Reject(now, rejected.Handle), ErrAlreadySettled)
			assert.ErrorIs(t, s.Ack(now, rejected.Handle), ErrAlreadySettled)
			assert.ErrorIs(t, s.Nack(now, rejected.Handle, 0), ErrAlreadySettled)
			assert.Len(t, reported, 1)
			assert.Equal(t, uint64(1), s.counters.Load().Rejected)

			// The frontier passes the rejected record once everything below it is settled.
			require.NoError(t, s.Ack(now, other.Handle))
			assert.Equal(t, int64(1), s.Stats().Frontier)
			third := reserve(t, s, now, 3)
			assert.Equal(t, int64(2), third.Offset, "not delivered again")

			var snap State
			s.Snapshot(&snap)
			assert.Equal(t, []int64{rejected.Offset}, snap.Quarantined, "persisted as a quarantine")
			s.Restore(snap)
			assert.Equal(t, []int64{rejected.Offset}, s.Quarantined(), "the quarantine survives a restart")

			assert.True(t, s.Requeue(now, rejected.Offset))
			again := reserve(t, s, now, 3)
			assert.Equal(t, rejected.Offset, again.Offset, "Requeue brings it back")
			assert.Equal(t, ReasonRequeued, again.Reason)
			assert.Equal(t, uint32(1), again.Attempt)
			require.NoError(t, s.Reject(now, again.Handle), "a requeued record can be rejected again")
			assert.Equal(t, []int64{rejected.Offset}, s.Quarantined())
			assert.Len(t, reported, 2)
		})
	}
}

// A reject with a handle that names no live lease answers as an ack would and changes
// nothing: an expired lease, one leased again since, a forged nonce, another partition.
func TestRejectStaleHandle(t *testing.T) {
	var reported int
	hooks := Hooks{Quarantine: func(string, int32, int64, uint32) { reported++ }}
	s := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: vt}, Hooks: hooks}, State{Frontier: -1})
	old := reserve(t, s, epoch, 2)
	now := old.Expiry // it expired
	for _, tc := range []struct {
		name string
		h    Handle
	}{
		{"expired", old.Handle},
		{"forged nonce", Handle{Offset: old.Offset, Nonce: old.Nonce + 1}},
		{"another partition", Handle{Partition: 1, Offset: old.Offset, Nonce: old.Nonce}},
		{"never leased", Handle{Offset: 1, Nonce: 7}},
	} {
		assert.ErrorIs(t, s.Reject(now, tc.h), ErrGone, tc.name)
	}
	current := reserve(t, s, now, 2)
	assert.Equal(t, old.Offset, current.Offset)
	assert.ErrorIs(t, s.Reject(now, old.Handle), ErrGone, "superseded by a new lease")
	assert.Zero(t, reported)
	assert.Empty(t, s.Quarantined())
	assert.Equal(t, uint64(0), s.counters.Load().Rejected)
	require.NoError(t, s.Ack(now, current.Handle), "the new lease is untouched")
}

// A drained shard answers a reserve at the high watermark it was drained at without its lock
// (emptyAt); whatever brings a record below it back (a requeue, a restore to a lower frontier)
// is served at that same high watermark, and a lapsed grant still answers ErrMoved.
func TestDrainedShardServesWhatComesBack(t *testing.T) {
	now := epoch
	s := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: vt, MaxDeliveries: 1}},
		State{Frontier: -1, GrantUntil: now.Add(time.Hour)})
	for range 3 {
		require.NoError(t, s.Nack(now, reserve(t, s, now, 3).Handle, 0))
	}
	drained := func() {
		t.Helper()
		_, err := s.ReserveNext(now, 3)
		require.ErrorIs(t, err, ErrEmpty)
		_, err = s.ReserveNext(now, 3) // the answer without the lock
		require.ErrorIs(t, err, ErrEmpty)
		leases, err := s.ReserveBatch(now, 3, 0, 10, nil)
		require.ErrorIs(t, err, ErrEmpty)
		require.Empty(t, leases)
		leases, err = s.ReserveAhead(now, 3, 0, 10, nil)
		require.ErrorIs(t, err, ErrEmpty)
		require.Empty(t, leases)
	}
	drained()
	require.True(t, s.Requeue(now, 1))
	again := reserve(t, s, now, 3)
	require.Equal(t, int64(1), again.Offset, "a requeued record, at the high watermark the shard was drained at")
	require.NoError(t, s.Ack(now, again.Handle))
	drained()

	l3 := reserve(t, s, now, 4) // a record appended: a high watermark of its own
	require.Equal(t, int64(3), l3.Offset)
	require.NoError(t, s.Ack(now, l3.Handle))
	_, err := s.ReserveNext(now, 4)
	require.ErrorIs(t, err, ErrEmpty)

	require.Equal(t, 2, s.RequeueAll(now))
	leases, err := s.ReserveBatch(now, 4, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, leases, 2, "both requeued records")
	for _, l := range leases {
		require.NoError(t, s.Ack(now, l.Handle))
	}
	_, err = s.ReserveNext(now, 4)
	require.ErrorIs(t, err, ErrEmpty)

	s.Restore(State{Frontier: 1, GrantUntil: now.Add(time.Hour)})
	l2 := reserve(t, s, now, 4)
	require.Equal(t, int64(2), l2.Offset, "a restore to a lower frontier serves what lies above it")
	require.NoError(t, s.Ack(now, l2.Handle))
	l3 = reserve(t, s, now, 4)
	require.NoError(t, s.Ack(now, l3.Handle))
	_, err = s.ReserveNext(now, 4)
	require.ErrorIs(t, err, ErrEmpty)
	_, err = s.ReserveNext(now.Add(2*time.Hour), 4)
	require.ErrorIs(t, err, ErrMoved, "a lapsed grant, drained or not")
}
