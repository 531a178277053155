package inflight

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reserved flag fits in pending's padding, beside the key a bound lease holds: the
// lease table's slots do not grow past 48 bytes.
func TestPendingStays40Bytes(t *testing.T) {
	assert.Equal(t, uintptr(40), unsafe.Sizeof(pending{}))
}

func reserveAhead(t *testing.T, s *Shard, now time.Time, hwm int64, max int) []Lease {
	t.Helper()
	leases, err := s.ReserveAhead(now, hwm, 0, max, nil)
	require.NoError(t, err)
	return leases
}

// ReserveAhead grants at most max(1, (MaxInFlight - leased)/2) leases, leased counted when
// the call starts; none at the in-flight cap.
func TestReserveAheadShareCap(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxInFlight int
		leased      int // live leases before the call (ReserveNext)
		max         int
		want        int
		wantErr     error
	}{
		{"half the room", 10, 0, 100, 5, nil},
		{"half of what is left", 10, 4, 100, 3, nil},
		{"one when little is left", 10, 8, 100, 1, nil},
		{"one at the last slot", 10, 9, 100, 1, nil},
		{"none at the cap", 10, 10, 100, 0, ErrInFlightCap},
		{"max below the share", 10, 0, 2, 2, nil},
		{"zero max tries one", 10, 0, 0, 1, nil},
		{"cap of one", 1, 0, 5, 1, nil},
		{"the default cap leaves room for 32", 0, 0, 32, 32, nil},
		{"log shorter than the share", 10, 0, 100, 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestShard(t, Config{VisibilityTimeout: vt, MaxInFlight: tc.maxInFlight}, State{Frontier: -1})
			for range tc.leased {
				reserve(t, s, epoch, 1000)
			}
			leases, err := s.ReserveAhead(epoch, 1000, 0, tc.max, nil)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Len(t, leases, tc.want)
			for i, l := range leases {
				assert.Equal(t, int64(tc.leased+i), l.Offset, "granted as ReserveBatch grants: in order")
				assert.Equal(t, uint32(1), l.Attempt, "the attempt it will be when delivered")
				assert.Equal(t, ReasonFirst, l.Reason)
				assert.Equal(t, epoch.Add(vt), l.Expiry)
				assert.NotZero(t, l.Nonce)
			}
			st := s.Stats()
			assert.Equal(t, tc.leased+tc.want, st.Leased)
			assert.Equal(t, tc.want, st.Reserved)
			c := s.counters.Load()
			assert.Equal(t, uint64(tc.want), c.Reserved)
			assert.Equal(t, uint64(tc.leased), c.Delivered, "a reservation is not a delivery")
		})
	}
}

// Two gateways and the owner's consumers share the room: each read-ahead takes half of what
// is left, and the owner's consumers still find room after both.
func TestReserveAheadLeavesRoomForOthers(t *testing.T) {
	s, _ := newTestShard(t, Config{MaxInFlight: 16}, State{Frontier: -1})
	assert.Len(t, reserveAhead(t, s, epoch, 1000, 100), 8, "gateway A")
	assert.Len(t, reserveAhead(t, s, epoch, 1000, 100), 4, "gateway B")
	lease := reserve(t, s, epoch, 1000)
	assert.Equal(t, int64(12), lease.Offset, "the owner's own consumer")
}

// A reservation's attempt counts only once it is confirmed, explicitly or by an Extend,
// Nack, Reject or Ack. Under MaxDeliveries 1, a confirmed reservation that ends unsettled is
// quarantined; one that lapses or is given back unconfirmed is not, and is leased again as
// the same attempt.
func TestReservationCountsOnlyWhenConfirmed(t *testing.T) {
	type outcome struct {
		quarantined                []int64
		frontier                   int64
		delivered, unused, expired uint64
		givenBack                  uint64
		wakes                      int
	}
	for _, tc := range []struct {
		name string
		act  func(t *testing.T, s *Shard, l Lease) (now time.Time)
		want outcome
	}{
		{"lapses unconfirmed", func(t *testing.T, s *Shard, l Lease) time.Time {
			return l.Expiry
		}, outcome{frontier: -1, unused: 1, wakes: 1}},
		{"given back", func(t *testing.T, s *Shard, l Lease) time.Time {
			require.NoError(t, s.GiveBack(epoch, l.Handle))
			return epoch
		}, outcome{frontier: -1, unused: 1, givenBack: 1}},
		{"confirmed, then lapses", func(t *testing.T, s *Shard, l Lease) time.Time {
			require.NoError(t, s.Confirm(epoch, l.Handle))
			return l.Expiry
		}, outcome{quarantined: []int64{0}, frontier: 0, delivered: 1, expired: 1, wakes: 1}},
		{"confirmed twice, then lapses", func(t *testing.T, s *Shard, l Lease) time.Time {
			require.NoError(t, s.Confirm(epoch, l.Handle))
			require.NoError(t, s.Confirm(epoch, l.Handle))
			return l.Expiry
		}, outcome{quarantined: []int64{0}, frontier: 0, delivered: 1, expired: 1, wakes: 1}},
		{"extended, then lapses", func(t *testing.T, s *Shard, l Lease) time.Time {
			expiry, err := s.Extend(epoch, l.Handle, time.Minute)
			require.NoError(t, err)
			return expiry
		}, outcome{quarantined: []int64{0}, frontier: 0, delivered: 1, expired: 1, wakes: 1}},
		{"nacked", func(t *testing.T, s *Shard, l Lease) time.Time {
			require.NoError(t, s.Nack(epoch, l.Handle, 0))
			return epoch
		}, outcome{quarantined: []int64{0}, frontier: 0, delivered: 1, wakes: 1}},
		{"rejected", func(t *testing.T, s *Shard, l Lease) time.Time {
			require.NoError(t, s.Reject(epoch, l.Handle))
			return epoch
		}, outcome{quarantined: []int64{0}, frontier: 0, delivered: 1, wakes: 1}},
		{"acked", func(t *testing.T, s *Shard, l Lease) time.Time {
			require.NoError(t, s.Ack(epoch, l.Handle))
			return epoch
		}, outcome{frontier: 0, delivered: 1}},
		{"acked in a batch", func(t *testing.T, s *Shard, l Lease) time.Time {
			errs := make([]error, 1)
			s.AckMany(epoch, []Handle{l.Handle}, errs)
			require.NoError(t, errs[0])
			return epoch
		}, outcome{frontier: 0, delivered: 1}},
		{"skipped as corrupt", func(t *testing.T, s *Shard, l Lease) time.Time {
			require.NoError(t, s.SkipCorrupt(epoch, l.Handle))
			return epoch
		}, outcome{frontier: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A backoff of an hour: an expiry that counts would delay the record.
			cfg := Config{VisibilityTimeout: vt, MaxDeliveries: 1, Backoff: Backoff{Delays: []time.Duration{time.Hour}}}
			s, hooks := newTestShard(t, cfg, State{Frontier: -1})
			leases := reserveAhead(t, s, epoch, 1, 8)
			require.Len(t, leases, 1)
			assert.Equal(t, 1, s.Stats().Reserved)
			now := tc.act(t, s, leases[0])
			s.Purge(now)
			st := s.Stats()
			assert.Equal(t, 0, st.Reserved)
			assert.Equal(t, tc.want.frontier, st.Frontier)
			if q := s.Quarantined(); len(tc.want.quarantined) > 0 || len(q) > 0 {
				assert.Equal(t, tc.want.quarantined, q)
			}
			c := s.counters.Load()
			assert.Equal(t, uint64(1), c.Reserved)
			assert.Equal(t, tc.want.delivered, c.Delivered, "Delivered")
			assert.Equal(t, tc.want.unused, c.Unused, "Unused")
			assert.Equal(t, tc.want.expired, c.Expired, "Expired")
			assert.Equal(t, tc.want.givenBack, c.GivenBack, "GivenBack")
			wakes, _ := hooks.counts()
			assert.Equal(t, tc.want.wakes, wakes, "wakes")
			if tc.want.frontier == -1 {
				// Uncounted: visible at once (no backoff), and leased again as the same attempt.
				assert.Equal(t, 0, st.Delayed)
				again := reserve(t, s, now, 1)
				assert.Equal(t, int64(0), again.Offset)
				assert.Equal(t, uint32(1), again.Attempt)
				assert.Equal(t, ReasonFirst, again.Reason)
			}
		})
	}
}

// However often a reservation lapses unconfirmed, MaxDeliveries never quarantines the record,
// and its redelivery keeps the attempt and the reason it had before the reservations.
func TestLapsedReservationsNeverQuarantine(t *testing.T) {
	for _, maxDeliveries := range []int{0, 1, 2, 3} {
		s, _ := newTestShard(t, Config{VisibilityTimeout: vt, MaxDeliveries: maxDeliveries}, State{Frontier: -1})
		now := epoch
		first := reserve(t, s, now, 1)
		require.NoError(t, s.Nack(now, first.Handle, 0))
		if maxDeliveries == 1 {
			assert.Equal(t, []int64{0}, s.Quarantined(), "the one real delivery counts")
			continue
		}
		for range 5 {
			leases := reserveAhead(t, s, now, 1, 4)
			require.Len(t, leases, 1)
			assert.Equal(t, uint32(2), leases[0].Attempt, "MaxDeliveries %d", maxDeliveries)
			assert.Equal(t, ReasonNacked, leases[0].Reason)
			now = leases[0].Expiry
			assert.Equal(t, 1, s.Purge(now), "released at its expiry")
		}
		assert.Empty(t, s.Quarantined(), "MaxDeliveries %d", maxDeliveries)
		again := reserve(t, s, now, 1)
		assert.Equal(t, uint32(2), again.Attempt, "MaxDeliveries %d", maxDeliveries)
		assert.Equal(t, ReasonNacked, again.Reason, "the reason from before the reservations")
		assert.Equal(t, uint64(5), s.counters.Load().Unused)
		assert.Equal(t, uint64(0), s.counters.Load().Expired)
	}
}

// Snapshot leaves an unconfirmed reservation's attempt out (an offset whose only attempt it
// is has no entry), on the ordered walk and on the map walk alike, so an owner crash does not
// count it; ReserveAhead reports no Dirty for it, a Confirm does.
func TestSnapshotLeavesReservationsOut(t *testing.T) {
	s, hooks := newTestShard(t, Config{VisibilityTimeout: vt, MaxDeliveries: 3}, State{Frontier: -1})
	first := reserve(t, s, epoch, 3)
	require.NoError(t, s.Nack(epoch, first.Handle, 0))
	_, dirty := hooks.counts()
	leases := reserveAhead(t, s, epoch, 2, 8) // 0 (its second attempt) and 1 (its first)
	require.Len(t, leases, 2)
	assert.Equal(t, []uint32{2, 1}, []uint32{leases[0].Attempt, leases[1].Attempt})
	_, after := hooks.counts()
	assert.Equal(t, dirty, after, "a reservation changes nothing persisted")
	s.Handed([]Lease{reserve(t, s, epoch, 3)}) // 2, an ordinary lease handed over: counted

	var snap State
	s.Snapshot(&snap)
	assert.Equal(t, []Attempt{{0, 1}, {2, 1}}, snap.Attempts)
	omitted := s.SnapshotCapped(&snap, 1)
	assert.Equal(t, []Attempt{{0, 1}}, snap.Attempts, "the map walk leaves it out too")
	assert.Equal(t, 1, omitted)

	_, dirty = hooks.counts()
	require.NoError(t, s.Confirm(epoch, leases[1].Handle))
	_, after = hooks.counts()
	assert.Equal(t, dirty+1, after, "a confirm under MaxDeliveries is persisted")
	s.Snapshot(&snap)
	assert.Equal(t, []Attempt{{0, 1}, {1, 1}, {2, 1}}, snap.Attempts)

	// A crash: the unconfirmed reservation of 0 did not count.
	s.Restore(snap)
	again := reserve(t, s, epoch, 3)
	assert.Equal(t, int64(0), again.Offset)
	assert.Equal(t, uint32(2), again.Attempt)
	assert.Equal(t, ReasonRestart, again.Reason)
}

// Confirm of a lease that is not a reservation, or of one confirmed already, changes nothing;
// a handle that names no live lease gets what the other settles answer.
func TestConfirmAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, s *Shard) Handle
		want error
	}{
		{"a reservation", func(t *testing.T, s *Shard) Handle {
			return reserveAhead(t, s, epoch, 10, 1)[0].Handle
		}, nil},
		{"a confirmed reservation", func(t *testing.T, s *Shard) Handle {
			h := reserveAhead(t, s, epoch, 10, 1)[0].Handle
			require.NoError(t, s.Confirm(epoch, h))
			return h
		}, nil},
		{"an extended reservation", func(t *testing.T, s *Shard) Handle {
			h := reserveAhead(t, s, epoch, 10, 1)[0].Handle
			_, err := s.Extend(epoch, h, 0)
			require.NoError(t, err)
			return h
		}, nil},
		{"an ordinary lease", func(t *testing.T, s *Shard) Handle {
			l := reserve(t, s, epoch, 10)
			s.Handed([]Lease{l})
			return l.Handle
		}, nil},
		{"an acked reservation", func(t *testing.T, s *Shard) Handle {
			h := reserveAhead(t, s, epoch, 10, 1)[0].Handle
			require.NoError(t, s.Ack(epoch, h))
			return h
		}, ErrAlreadySettled},
		{"a lapsed reservation", func(t *testing.T, s *Shard) Handle {
			l := reserveAhead(t, s, epoch, 10, 1)[0]
			s.Purge(l.Expiry)
			return l.Handle
		}, ErrGone},
		{"a reservation given back", func(t *testing.T, s *Shard) Handle {
			h := reserveAhead(t, s, epoch, 10, 1)[0].Handle
			require.NoError(t, s.GiveBack(epoch, h))
			return h
		}, ErrGone},
		{"a forged nonce", func(t *testing.T, s *Shard) Handle {
			h := reserveAhead(t, s, epoch, 10, 1)[0].Handle
			h.Nonce++
			return h
		}, ErrGone},
		{"a handed-off shard", func(t *testing.T, s *Shard) Handle {
			h := reserveAhead(t, s, epoch, 10, 1)[0].Handle
			s.HandOff(epoch, &State{})
			return h
		}, ErrMoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, hooks := newTestShard(t, Config{VisibilityTimeout: vt, MaxDeliveries: 5}, State{Frontier: -1})
			h := tc.do(t, s)
			before := s.counters.Load()
			_, dirtyBefore := hooks.counts()
			st := s.Stats()
			err := s.Confirm(epoch, h)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
			after := s.counters.Load()
			_, dirtyAfter := hooks.counts()
			if tc.name == "a reservation" {
				assert.Equal(t, before.Delivered+1, after.Delivered, "the confirm counts the delivery")
				assert.Equal(t, dirtyBefore+1, dirtyAfter, "and is persisted under MaxDeliveries")
				assert.Equal(t, st.Reserved-1, s.Stats().Reserved)
				return
			}
			assert.Equal(t, before.Delivered, after.Delivered, "nothing delivered")
			assert.Equal(t, dirtyBefore, dirtyAfter, "nothing persisted")
			assert.Equal(t, st, s.Stats(), "nothing changed")
		})
	}
}

// A move carries a reservation as an ordinary, counted lease: at the next owner its lapse
// counts an attempt (MaxDeliveries 1 quarantines it), while a give-back is uncounted.
func TestHandOffCarriesReservationsCounted(t *testing.T) {
	cfg := Config{VisibilityTimeout: vt, MaxDeliveries: 1}
	s, _ := newTestShard(t, cfg, State{Frontier: -1})
	leases := reserveAhead(t, s, epoch, 2, 8)
	require.Len(t, leases, 2)
	var st State
	s.HandOff(epoch, &st)
	require.Len(t, st.Held, 2)
	for i, h := range st.Held {
		assert.Equal(t, leases[i].Nonce, h.Nonce)
		assert.Equal(t, uint32(1), h.Attempts, "carried counted")
	}
	assert.Empty(t, st.Attempts, "what Snapshot persists still leaves them out")

	next := NewShard("orders", 3, Options{Config: cfg, Seed: [32]byte{8}}, st)
	assert.Equal(t, 2, next.Stats().Leased)
	assert.Equal(t, 0, next.Stats().Reserved, "no reservation at the next owner")
	require.NoError(t, next.GiveBack(epoch, leases[1].Handle))
	next.Purge(leases[0].Expiry)
	assert.Equal(t, []int64{0}, next.Quarantined(), "the lapse at the next owner counts")
	again := reserve(t, next, leases[0].Expiry, 2)
	assert.Equal(t, int64(1), again.Offset)
	assert.Equal(t, uint32(1), again.Attempt, "the give-back did not count")
}

// The counters of a read-ahead: Reserved for every reservation, Delivered for those a
// consumer got, Unused for those released unconfirmed; ReserveBatch still counts Delivered.
func TestReservationCounters(t *testing.T) {
	s, _ := newTestShard(t, Config{VisibilityTimeout: vt}, State{Frontier: -1})
	leases := reserveAhead(t, s, epoch, 100, 6)
	require.Len(t, leases, 6)
	require.NoError(t, s.Confirm(epoch, leases[0].Handle))
	require.NoError(t, s.Ack(epoch, leases[0].Handle))
	require.NoError(t, s.Ack(epoch, leases[1].Handle))
	_, err := s.Extend(epoch, leases[2].Handle, 0)
	require.NoError(t, err)
	require.NoError(t, s.GiveBack(epoch, leases[3].Handle))
	assert.False(t, s.SkipRetention(epoch, leases[4].Handle, 0), "a give-back of a live lease above oldest")
	batch, err := s.ReserveBatch(epoch, 100, 0, 3, nil)
	require.NoError(t, err)
	require.Len(t, batch, 3)
	s.Purge(leases[5].Expiry) // the reservation of 5 lapses; the others, confirmed or ordinary, expire
	assert.Equal(t, CounterValues{
		Delivered: 3 + 3, // 0, 1, 2 confirmed; the batch of 3
		Reserved:  6,
		Unused:    3, // 3 given back, 4 given back by SkipRetention, 5 lapsed
		Acked:     2,
		Extended:  1,
		GivenBack: 1,     // SkipRetention's give-back is not counted there, as before
		Expired:   1 + 3, // 2, and the batch
	}, s.counters.Load())
	assert.Equal(t, Stats{Frontier: 1}, s.Stats())
}

// ReserveAhead refuses a visibility ReserveBatch refuses, and honours one it accepts.
func TestReserveAheadVisibility(t *testing.T) {
	s, _ := newTestShard(t, Config{VisibilityTimeout: vt}, State{Frontier: -1})
	_, err := s.ReserveAhead(epoch, 10, -time.Second, 1, nil)
	assert.ErrorIs(t, err, ErrInvalidDuration)
	leases, err := s.ReserveAhead(epoch, 10, 50*time.Millisecond, 2, nil)
	require.NoError(t, err)
	require.Len(t, leases, 2)
	assert.Equal(t, epoch.Add(50*time.Millisecond), leases[1].Expiry)
	_, err = s.ReserveAhead(epoch, 2, 0, 2, nil)
	assert.ErrorIs(t, err, ErrAllReserved)
}
