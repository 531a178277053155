package inflight

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const vt = 30 * time.Second

// hookLog records the hooks a shard calls. Like a committer, it snapshots the shard on
// each Dirty, so that the next change reports again.
type hookLog struct {
	mu           sync.Mutex
	wakes, dirty int
	shard        *Shard
}

func (l *hookLog) hooks() Hooks {
	return Hooks{
		Wake: func(string, int32) { l.mu.Lock(); l.wakes++; l.mu.Unlock() },
		Dirty: func(string, int32) {
			l.mu.Lock()
			l.dirty++
			shard := l.shard
			l.mu.Unlock()
			if shard != nil {
				shard.Snapshot(&State{})
			}
		},
	}
}

func (l *hookLog) counts() (wakes, dirty int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wakes, l.dirty
}

func newTestShard(t *testing.T, cfg Config, state State) (*Shard, *hookLog) {
	t.Helper()
	log := new(hookLog)
	s := NewShard("orders", 3, Options{Config: cfg, Seed: [32]byte{7}, Hooks: log.hooks()}, state)
	log.shard = s
	return s, log
}

// Dirty reports the first change after a snapshot only: the changes after it, until the next
// snapshot, are in that snapshot.
func TestDirtyReportsOncePerSnapshot(t *testing.T) {
	var dirty int
	s := NewShard("orders", 3, Options{Hooks: Hooks{Dirty: func(string, int32) { dirty++ }}}, State{Frontier: -1})
	leases := []Lease{reserve(t, s, epoch, 10), reserve(t, s, epoch, 10), reserve(t, s, epoch, 10)}
	require.NoError(t, s.Ack(epoch, leases[2].Handle))
	require.NoError(t, s.Ack(epoch, leases[1].Handle))
	assert.Equal(t, 1, dirty, "two changes, no snapshot between: one report")
	var snap State
	s.Snapshot(&snap)
	assert.Equal(t, []Run{{1, 2}}, snap.AckedAhead, "the snapshot holds both, as one run")
	require.NoError(t, s.Ack(epoch, leases[0].Handle))
	assert.Equal(t, 2, dirty, "the first change after the snapshot reports")
	s.SnapshotCapped(&snap, 0)
	assert.Equal(t, int64(2), snap.Frontier)
	lease := reserve(t, s, epoch, 10)
	require.NoError(t, s.Ack(epoch, lease.Handle))
	assert.Equal(t, 3, dirty, "a capped snapshot clears it too")
}

func reserve(t *testing.T, s *Shard, now time.Time, hwm int64) Lease {
	t.Helper()
	lease, err := s.ReserveNext(now, hwm)
	require.NoError(t, err)
	return lease
}

func TestReserveAckAdvancesFrontier(t *testing.T) {
	s, hooks := newTestShard(t, Config{}, State{Frontier: -1})
	l0 := reserve(t, s, epoch, 10)
	l1 := reserve(t, s, epoch, 10)
	l2 := reserve(t, s, epoch, 10)
	assert.Equal(t, []int64{0, 1, 2}, []int64{l0.Offset, l1.Offset, l2.Offset}, "lowest first (checklist 8)")
	assert.Equal(t, epoch.Add(vt), l0.Expiry, "expiry = now + visibility (checklist 9)")

	assert.Equal(t, uint32(1), l0.Attempt)
	assert.Equal(t, ReasonFirst, l0.Reason)
	assert.NotEqual(t, l0.Nonce, l1.Nonce)

	// Out of order: 2 is parked ahead, then 1, then 0 closes the gap (checklist 5, 11).
	require.NoError(t, s.Ack(epoch, l2.Handle))
	assert.Equal(t, Stats{Frontier: -1, Leased: 2, AckedAhead: 1, AckedAheadRuns: 1}, s.Stats())
	require.NoError(t, s.Ack(epoch, l1.Handle))
	require.NoError(t, s.Ack(epoch, l0.Handle))
	assert.Equal(t, Stats{Frontier: 2}, s.Stats())
	_, dirty := hooks.counts()
	assert.Equal(t, 3, dirty, "every settle that changes persisted state reports dirty; without MaxDeliveries a grant does not")

	var snap State
	s.Snapshot(&snap)
	assert.Equal(t, int64(2), snap.Frontier)
	assert.Empty(t, snap.AckedAhead)

	own, err := s.ReserveNextFor(epoch, 10, time.Second)
	require.NoError(t, err)
	assert.Equal(t, epoch.Add(time.Second), own.Expiry, "a consume may ask for its own visibility")
}

func TestReserveOutcomes(t *testing.T) {
	s, _ := newTestShard(t, Config{MaxInFlight: 2}, State{Frontier: 4})
	_, err := s.ReserveNext(epoch, 5)
	assert.ErrorIs(t, err, ErrEmpty, "nothing above the frontier")
	l5 := reserve(t, s, epoch, 7)
	_ = reserve(t, s, epoch, 7)
	_, err = s.ReserveNext(epoch, 7)
	assert.ErrorIs(t, err, ErrInFlightCap, "checklist 22")
	require.NoError(t, s.Ack(epoch, l5.Handle))
	_, err = s.ReserveNext(epoch, 7)
	assert.ErrorIs(t, err, ErrAllReserved, "offsets exist but all are taken (checklist 31)")
}

// Checklist 17-19, 21 and the pinned cases of DESIGN "Decisions".
func TestAckValidation(t *testing.T) {
	t.Run("wrong nonce is gone and changes nothing", func(t *testing.T) {
		s, _ := newTestShard(t, Config{}, State{Frontier: -1})
		l := reserve(t, s, epoch, 10)
		forged := l.Handle
		forged.Nonce++
		assert.ErrorIs(t, s.Ack(epoch, forged), ErrGone)
		_, err := s.Extend(epoch, forged, 0)
		assert.ErrorIs(t, err, ErrGone)
		assert.ErrorIs(t, s.Nack(epoch, forged, 0), ErrGone)
		assert.Equal(t, Stats{Frontier: -1, Leased: 1}, s.Stats())
		require.NoError(t, s.Ack(epoch, l.Handle), "the real handle still works")
	})
	t.Run("other partition is gone", func(t *testing.T) {
		s, _ := newTestShard(t, Config{}, State{Frontier: -1})
		l := reserve(t, s, epoch, 10)
		other := l.Handle
		other.Partition++
		assert.ErrorIs(t, s.Ack(epoch, other), ErrGone)
	})
	t.Run("ack after expiry is gone, not re-leased", func(t *testing.T) {
		s, _ := newTestShard(t, Config{}, State{Frontier: -1})
		l := reserve(t, s, epoch, 10)
		assert.ErrorIs(t, s.Ack(l.Expiry, l.Handle), ErrGone, "live only while now < expiry")
		assert.Equal(t, Stats{Frontier: -1}, s.Stats())
	})
	t.Run("ack after expiry and re-lease is gone, new lease untouched", func(t *testing.T) {
		s, _ := newTestShard(t, Config{}, State{Frontier: -1})
		old := reserve(t, s, epoch, 10)
		later := old.Expiry.Add(time.Second)
		fresh := reserve(t, s, later, 10)
		require.Equal(t, old.Offset, fresh.Offset)
		assert.Equal(t, uint32(2), fresh.Attempt)
		assert.Equal(t, ReasonExpired, fresh.Reason)
		assert.ErrorIs(t, s.Ack(later, old.Handle), ErrGone)
		_, err := s.Extend(later, old.Handle, 0)
		assert.ErrorIs(t, err, ErrGone)
		assert.ErrorIs(t, s.Nack(later, old.Handle, 0), ErrGone)
		require.NoError(t, s.Ack(later, fresh.Handle))
	})
	t.Run("repeated ack is already settled", func(t *testing.T) {
		s, _ := newTestShard(t, Config{}, State{Frontier: -1})
		l0 := reserve(t, s, epoch, 10)
		l1 := reserve(t, s, epoch, 10)
		require.NoError(t, s.Ack(epoch, l1.Handle))
		assert.ErrorIs(t, s.Ack(epoch, l1.Handle), ErrAlreadySettled, "acked ahead")
		require.NoError(t, s.Ack(epoch, l0.Handle))
		assert.ErrorIs(t, s.Ack(epoch, l0.Handle), ErrAlreadySettled, "below the frontier")
		assert.ErrorIs(t, s.Nack(epoch, l0.Handle, 0), ErrAlreadySettled)
		assert.Equal(t, Stats{Frontier: 1}, s.Stats())
		c := s.counters.Load()
		assert.Equal(t, uint64(2), c.Acked)
		assert.Equal(t, uint64(3), c.AlreadySettled)
	})
	t.Run("handle from before a restart never matches", func(t *testing.T) {
		s, _ := newTestShard(t, Config{}, State{Frontier: -1})
		before := reserve(t, s, epoch, 10)
		s.Restore(State{Frontier: -1})
		after := reserve(t, s, epoch, 10)
		require.Equal(t, before.Offset, after.Offset)
		assert.ErrorIs(t, s.Ack(epoch, before.Handle), ErrGone)
		require.NoError(t, s.Ack(epoch, after.Handle))
	})
}

// Checklist 12, 20: an extend re-arms; the superseded heap entry never evicts it.
func TestExtend(t *testing.T) {
	s, hooks := newTestShard(t, Config{}, State{Frontier: -1})
	l := reserve(t, s, epoch, 10)
	_, err := s.Extend(epoch.Add(20*time.Second), l.Handle, 0)
	require.NoError(t, err)
	assert.Zero(t, s.Purge(l.Expiry), "the old deadline is stale")
	require.NoError(t, s.Ack(l.Expiry.Add(time.Second), l.Handle), "still live after its first expiry")

	l = reserve(t, s, epoch, 10)
	_, err = s.Extend(epoch, l.Handle, time.Minute)
	require.NoError(t, err)
	assert.Zero(t, s.Purge(epoch.Add(time.Minute-1)))
	assert.Equal(t, 1, s.Purge(epoch.Add(time.Minute)))
	wakes, _ := hooks.counts()
	assert.Equal(t, 1, wakes, "expiry wakes (checklist 14)")
}

// Checklist 13, 14, and the nack delay.
func TestNack(t *testing.T) {
	s, hooks := newTestShard(t, Config{}, State{Frontier: -1})
	l := reserve(t, s, epoch, 10)
	require.NoError(t, s.Nack(epoch, l.Handle, 0))
	wakes, _ := hooks.counts()
	assert.Equal(t, 1, wakes)
	again := reserve(t, s, epoch, 10)
	assert.Equal(t, l.Offset, again.Offset, "visible again at once")
	assert.Equal(t, ReasonNacked, again.Reason)
	assert.Equal(t, uint32(2), again.Attempt)

	require.NoError(t, s.Nack(epoch, again.Handle, 5*time.Second))
	next := reserve(t, s, epoch, 10)
	assert.Equal(t, int64(1), next.Offset, "a delayed offset stays invisible")
	assert.Equal(t, Stats{Frontier: -1, Leased: 1, Delayed: 1}, s.Stats())
	assert.Equal(t, 1, s.Purge(epoch.Add(5*time.Second)), "the delay ends through the expiry heap")
	wakes, _ = hooks.counts()
	assert.Equal(t, 2, wakes)
	third := reserve(t, s, epoch.Add(5*time.Second), 10)
	assert.Equal(t, int64(0), third.Offset)
	assert.Equal(t, uint32(3), third.Attempt)
}

// Checklist 23, 24: at the acked-ahead cap only the frontier hole is handed out, and acks of
// leases already out are always accepted.
func TestAckedAheadCap(t *testing.T) {
	s, _ := newTestShard(t, Config{MaxInFlight: 4, MaxAckedAhead: 2}, State{Frontier: -1})
	var leases []Lease
	for range 4 {
		leases = append(leases, reserve(t, s, epoch, 100))
	}
	for _, l := range leases[1:] {
		require.NoError(t, s.Ack(epoch, l.Handle), "accepted past the cap")
	}
	assert.Equal(t, 3, s.Stats().AckedAhead)
	_, err := s.ReserveNext(epoch, 100)
	assert.ErrorIs(t, err, ErrAckedAheadCap, "the hole (offset 0) is leased")
	require.NoError(t, s.Nack(epoch, leases[0].Handle, 0))
	hole := reserve(t, s, epoch, 100)
	assert.Equal(t, int64(0), hole.Offset, "only the frontier hole")
	require.NoError(t, s.Ack(epoch, hole.Handle))
	assert.Equal(t, Stats{Frontier: 3}, s.Stats())
	assert.Equal(t, int64(4), reserve(t, s, epoch, 100).Offset)
}

// Checklist 32, 33: a lease stranded at the frontier holds the partition quiet for exactly
// the rest of its visibility timeout, then the run clears at once; nothing is lost.
func TestQuietPartitionAfterOutage(t *testing.T) {
	s, _ := newTestShard(t, Config{MaxInFlight: 8, MaxAckedAhead: 4}, State{Frontier: -1})
	stranded := reserve(t, s, epoch, 5)
	for range 4 {
		require.NoError(t, s.Ack(epoch, reserve(t, s, epoch, 5).Handle))
	}
	for _, at := range []time.Time{epoch, stranded.Expiry.Add(-1)} {
		_, err := s.ReserveNext(at, 5)
		assert.ErrorIs(t, err, ErrAckedAheadCap)
	}
	again := reserve(t, s, stranded.Expiry, 5)
	assert.Equal(t, int64(0), again.Offset)
	require.NoError(t, s.Ack(stranded.Expiry, again.Handle))
	assert.Equal(t, Stats{Frontier: 4}, s.Stats(), "the whole run clears at once")
}

// Checklist 25, 26, RELIABILITY row 14.
func TestRetentionJump(t *testing.T) {
	s, hooks := newTestShard(t, Config{}, State{Frontier: -1})
	winner := reserve(t, s, epoch, 100)
	loser := reserve(t, s, epoch, 100)
	ahead := reserve(t, s, epoch, 100)
	beyond := []Lease{reserve(t, s, epoch, 100), reserve(t, s, epoch, 100)}
	require.NoError(t, s.Ack(epoch, ahead.Handle))
	_, dirtyBefore := hooks.counts()

	assert.True(t, s.SkipRetention(epoch, winner.Handle, 3), "one step to oldest-1")
	assert.Equal(t, int64(2), s.Stats().Frontier)
	assert.Equal(t, 2, s.Stats().Leased, "leases below oldest dropped, above kept")
	_, dirty := hooks.counts()
	assert.Equal(t, dirtyBefore+1, dirty, "the jump is persisted")

	assert.False(t, s.SkipRetention(epoch, loser.Handle, 3), "the loser finds the jump done")
	next := reserve(t, s, epoch, 100)
	assert.Equal(t, int64(5), next.Offset, "and simply reserves again above the new frontier")
	assert.ErrorIs(t, s.Ack(epoch, loser.Handle), ErrAlreadySettled, "never a 410 for the loser")
	for _, l := range beyond {
		require.NoError(t, s.Ack(epoch, l.Handle))
	}
	assert.Equal(t, int64(4), s.Stats().Frontier)
	assert.Equal(t, uint64(1), s.counters.Load().RetentionJumps)

	// A log that reports a retained offset missing: no jump, the lease is given back.
	assert.False(t, s.SkipRetention(epoch, next.Handle, 3))
	assert.Equal(t, Stats{Frontier: 4}, s.Stats())
	assert.Equal(t, int64(5), reserve(t, s, epoch, 100).Offset)
}

// Checklist 28, 29: a corrupt record is skipped and the frontier moves over it; the skip is
// memory only.
func TestSkipCorrupt(t *testing.T) {
	s, _ := newTestShard(t, Config{}, State{Frontier: -1})
	l0 := reserve(t, s, epoch, 10)
	l1 := reserve(t, s, epoch, 10)
	require.NoError(t, s.SkipCorrupt(epoch, l1.Handle))
	assert.Equal(t, Stats{Frontier: -1, Leased: 1, Corrupt: 1}, s.Stats())
	var snap State
	s.Snapshot(&snap)
	assert.Empty(t, snap.AckedAhead, "the corrupt-skip set is not persisted")
	require.NoError(t, s.Ack(epoch, l0.Handle))
	assert.Equal(t, Stats{Frontier: 1}, s.Stats(), "the frontier passes the corrupt offset")
	assert.Equal(t, uint64(1), s.counters.Load().CorruptSkipped)
	assert.ErrorIs(t, s.SkipCorrupt(epoch, l1.Handle), ErrAlreadySettled)
}

// Under MaxDeliveries the attempt a reservation counted is persisted state, and so is a
// corrupt skip's end of it: else the snapshot a committer took between the two keeps the
// attempt, and a restart quarantines the record unread rather than skip it (found by the
// cluster simulation, TestStoreSeeds seed 19).
func TestSkipCorruptDropsItsPersistedAttempt(t *testing.T) {
	s, hooks := newTestShard(t, Config{MaxDeliveries: 1}, State{Frontier: -1})
	l0 := reserve(t, s, epoch, 10)
	l1 := reserve(t, s, epoch, 10)
	s.Handed([]Lease{l0, l1})
	var snap State
	s.Snapshot(&snap)
	require.Len(t, snap.Attempts, 2, "the handed-over grants' attempts are persisted")
	_, dirtyBefore := hooks.counts()
	require.NoError(t, s.SkipCorrupt(epoch, l1.Handle))
	_, dirty := hooks.counts()
	assert.Greater(t, dirty, dirtyBefore, "the skip changed persisted state")
	s.Snapshot(&snap)
	assert.Equal(t, []Attempt{{Offset: l0.Offset, Count: 1}}, snap.Attempts, "the skipped offset's attempt is gone")
}

// Checklist 30: a closed log gives the reservation back, no jump, no attempt counted.
func TestGiveBack(t *testing.T) {
	s, hooks := newTestShard(t, Config{}, State{Frontier: -1})
	l := reserve(t, s, epoch, 10)
	_, dirtyBefore := hooks.counts()
	require.NoError(t, s.GiveBack(epoch, l.Handle))
	assert.Equal(t, Stats{Frontier: -1}, s.Stats())
	again := reserve(t, s, epoch, 10)
	assert.Equal(t, l.Offset, again.Offset)
	assert.Equal(t, uint32(1), again.Attempt, "a give-back is not an attempt")
	assert.Equal(t, ReasonFirst, again.Reason)
	wakes, dirty := hooks.counts()
	assert.Zero(t, wakes, "a give-back wakes nobody")
	assert.Equal(t, dirtyBefore, dirty, "without MaxDeliveries no grant is persisted state")

	// Under MaxDeliveries a handed-over lease's attempt is persisted state, and so is a
	// give-back's uncounting of it: else the count persisted comes back at the next start.
	s, hooks = newTestShard(t, Config{MaxDeliveries: 3}, State{Frontier: -1})
	l = reserve(t, s, epoch, 10)
	s.Handed([]Lease{l})
	_, dirtyBefore = hooks.counts()
	require.Equal(t, 1, dirtyBefore, "the hand-over")
	require.NoError(t, s.GiveBack(epoch, l.Handle))
	_, dirty = hooks.counts()
	assert.Equal(t, dirtyBefore+1, dirty, "the give-back is persisted state")
	var st State
	s.Snapshot(&st)
	assert.Empty(t, st.Attempts, "and the state to write holds no attempt for it")
}

// Under MaxDeliveries a scan's lease counts its attempt in what is persisted only once the
// scan hands its record over: a snapshot taken between the grant and a give-back, a
// postpone or a deferral of it (the scan's read failed, its batch's byte bound was
// reached, Config.NotBefore said later), then a crash, would otherwise bring the attempt
// back, and the record would be quarantined a delivery early, or unread under
// MaxDeliveries 1. Each of the scan's grants is checked: ReserveNext, ReserveBatch.
func TestScanLeaseCountsOnceHanded(t *testing.T) {
	grants := map[string]func(s *Shard) []Lease{
		"ReserveNext": func(s *Shard) []Lease { return []Lease{reserve(t, s, epoch, 10)} },
		"ReserveBatch": func(s *Shard) []Lease {
			leases, err := s.ReserveBatch(epoch, 10, 0, 3, nil)
			require.NoError(t, err)
			return leases
		},
	}
	withdraws := map[string]func(s *Shard, l Lease) error{
		"GiveBack": func(s *Shard, l Lease) error { return s.GiveBack(epoch, l.Handle) },
		"Postpone": func(s *Shard, l Lease) error { return s.Postpone(epoch, l.Handle, epoch.Add(time.Minute), 0) },
	}
	for grantName, grant := range grants {
		for withdrawName, withdraw := range withdraws {
			t.Run(grantName+"/"+withdrawName, func(t *testing.T) {
				s, hooks := newTestShard(t, Config{MaxDeliveries: 1}, State{Frontier: -1})
				leases := grant(s)
				_, dirty := hooks.counts()
				assert.Zero(t, dirty, "nothing to persist before the hand-over")
				var snap State
				s.Snapshot(&snap) // a commit tick between the grant and the withdrawal
				assert.Empty(t, snap.Attempts, "no attempt persisted before the hand-over")
				for _, l := range leases {
					require.NoError(t, withdraw(s, l))
				}
				s.Handed(leases) // withdrawn: passed over
				s.Snapshot(&snap)
				assert.Empty(t, snap.Attempts, "nothing counted")

				// A crash now restores what the first snapshot held: the records come back
				// unquarantined, on their first delivery.
				restored, _ := newTestShard(t, Config{MaxDeliveries: 1}, snap)
				l, err := restored.ReserveNext(epoch.Add(time.Hour), 10)
				require.NoError(t, err)
				assert.Equal(t, int64(0), l.Offset)
				assert.Equal(t, uint32(1), l.Attempt)
				assert.Zero(t, restored.Stats().Quarantined)

				// Handed over, the attempts are persisted.
				leases = grant(s)
				s.Handed(leases)
				_, dirtyAfter := hooks.counts()
				assert.Greater(t, dirtyAfter, dirty, "the hand-over is persisted state")
				s.Snapshot(&snap)
				assert.Len(t, snap.Attempts, len(leases))
			})
		}
	}
	t.Run("a settle or an expiry counts it too", func(t *testing.T) {
		s, hooks := newTestShard(t, Config{MaxDeliveries: 3, VisibilityTimeout: time.Second}, State{Frontier: -1})
		extended := reserve(t, s, epoch, 10)
		nacked := reserve(t, s, epoch, 10)
		expired := reserve(t, s, epoch, 10)
		_, err := s.Extend(epoch, extended.Handle, time.Hour)
		require.NoError(t, err)
		require.NoError(t, s.Nack(epoch, nacked.Handle, time.Hour))
		_, dirtyBefore := hooks.counts()
		s.Available(epoch.Add(2*time.Second), 10) // a touch purges: expired's lease ran out
		_, dirty := hooks.counts()
		assert.Greater(t, dirty, dirtyBefore, "the expiry is persisted state")
		var snap State
		s.Snapshot(&snap)
		assert.ElementsMatch(t, []Attempt{{Offset: extended.Offset, Count: 1}, {Offset: nacked.Offset, Count: 1}, {Offset: expired.Offset, Count: 1}}, snap.Attempts)
	})
	t.Run("without MaxDeliveries it is a no-op", func(t *testing.T) {
		s, hooks := newTestShard(t, Config{}, State{Frontier: -1})
		l := reserve(t, s, epoch, 10)
		s.Handed([]Lease{l})
		_, dirty := hooks.counts()
		assert.Zero(t, dirty)
	})
}

// Checklist 7: restored state has no leases and redelivers everything not acked ahead.
func TestRestore(t *testing.T) {
	s, _ := newTestShard(t, Config{}, State{
		Frontier:   9,
		AckedAhead: runsOf(3, 11, 12, 14),
		Attempts:   []Attempt{{Offset: 10, Count: 2}, {Offset: 11, Count: 5}},
	})
	assert.Equal(t, Stats{Frontier: 9, AckedAhead: 3, AckedAheadRuns: 2}, s.Stats(), "entries at or below the frontier are ignored")
	l := reserve(t, s, epoch, 20)
	assert.Equal(t, int64(10), l.Offset)
	assert.Equal(t, uint32(3), l.Attempt, "attempts survive a restart")
	assert.Equal(t, ReasonRestart, l.Reason)
	assert.Equal(t, int64(13), reserve(t, s, epoch, 20).Offset, "acked-ahead offsets are skipped")
	assert.Equal(t, int64(15), reserve(t, s, epoch, 20).Offset)
	require.NoError(t, s.Ack(epoch, l.Handle))
	assert.Equal(t, int64(12), s.Stats().Frontier)

	// An acked-ahead set that starts at the hole is folded into the frontier.
	s.Restore(State{Frontier: 1, AckedAhead: runsOf(2, 3, 5)})
	assert.Equal(t, Stats{Frontier: 3, AckedAhead: 1, AckedAheadRuns: 1}, s.Stats())
}

// Checklist 34: hooks run after the lock is released, so they may call back into the shard.
func TestHooksRunOutsideTheLock(t *testing.T) {
	var s *Shard
	var seen []Stats
	hooks := Hooks{
		Wake:  func(string, int32) { seen = append(seen, s.Stats()) },
		Dirty: func(string, int32) { seen = append(seen, s.Stats()) },
	}
	s = NewShard("t", 0, Options{Hooks: hooks}, State{Frontier: -1})
	l := reserve(t, s, epoch, 10)
	require.NoError(t, s.Ack(epoch, l.Handle))
	l = reserve(t, s, epoch, 10)
	require.NoError(t, s.Nack(epoch, l.Handle, 0))
	l = reserve(t, s, epoch, 10)
	s.Purge(l.Expiry)
	assert.Len(t, seen, 3, "the ack, the nack's wake and the expiry's wake (grants are not persisted without MaxDeliveries)")
}

func TestStaleDeadlinesStayBounded(t *testing.T) {
	s, _ := newTestShard(t, Config{MaxAckedAhead: 20_000}, State{Frontier: -1})
	l := reserve(t, s, epoch, 1<<40)
	for i := range 10_000 {
		_, err := s.Extend(epoch.Add(time.Duration(i)), l.Handle, 0)
		require.NoError(t, err)
		other := reserve(t, s, epoch, 1<<40)
		require.NoError(t, s.Ack(epoch, other.Handle))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.LessOrEqual(t, s.deadlines.len(), 2*(s.leased+s.delayed)+64)
}

// A lease held for long and extended now and then sits at the head of the expiry queue's
// run; the leases granted after it and acked in the order they were granted take their
// spent entries out from behind it, one by one (Ack and AckMany alike), with those of leases
// withdrawn before them, rather than leave them for a compaction.
func TestHeldLeaseLeavesNoSpentDeadlinesBehindIt(t *testing.T) {
	for _, many := range []bool{false, true} {
		t.Run(map[bool]string{false: "Ack", true: "AckMany"}[many], func(t *testing.T) {
			s, _ := newTestShard(t, Config{MaxAckedAhead: 20_000}, State{Frontier: -1})
			held := reserve(t, s, epoch, 1<<40)
			now := epoch
			for i := range 1_000 {
				if i%10 == 0 {
					now = now.Add(time.Millisecond)
					_, err := s.Extend(now, held.Handle, 0)
					require.NoError(t, err)
				}
				other := reserve(t, s, now, 1<<40)
				if i%20 == 5 {
					// Withdrawn, as a record deferred behind its key is: its entry is spent,
					// and the next ack takes it out from behind the held lease as well.
					require.NoError(t, s.GiveBack(now, other.Handle))
					other = reserve(t, s, now, 1<<40)
				}
				if many {
					errs := make([]error, 1)
					s.AckMany(now, []Handle{other.Handle}, errs)
					require.NoError(t, errs[0])
				} else {
					require.NoError(t, s.Ack(now, other.Handle))
				}
				s.mu.Lock()
				n := s.deadlines.len()
				s.mu.Unlock()
				require.LessOrEqual(t, n, 2, "round %d: the held lease's entry (an extension drops the one before), and at most the entry of a record given back and leased again", i)
			}
		})
	}
}

func TestDroppedShardSettlesNothing(t *testing.T) {
	s, _ := newTestShard(t, Config{}, State{Frontier: -1})
	l := reserve(t, s, epoch, 10)
	s.drop(false)
	assert.ErrorIs(t, s.Ack(epoch, l.Handle), ErrGone)
	_, err := s.ReserveNext(epoch, 10)
	assert.ErrorIs(t, err, ErrEmpty)
}

func TestReasonString(t *testing.T) {
	assert.Equal(t, "expired", ReasonExpired.String())
	assert.Equal(t, "unknown", Reason(200).String())
}

// RELIABILITY row 7: forged handles never settle, and nonces never repeat across restarts
// (each incarnation seeds its stream from crypto/rand).
func TestForgedHandlesAndRestartNonces(t *testing.T) {
	s := NewShard("t", 0, Options{Config: Config{MaxInFlight: 64}}, State{Frontier: -1})
	var live []Lease
	for range 64 {
		live = append(live, reserve(t, s, epoch, 1000))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		l := live[rng.IntN(len(live))]
		forged := Handle{Partition: 0, Offset: l.Offset, Nonce: rng.Uint64() | 1}
		if forged.Nonce == l.Nonce {
			continue
		}
		require.ErrorIs(t, s.Ack(epoch, forged), ErrGone)
	}
	assert.Equal(t, 64, s.Stats().Leased, "no forged handle settled anything")

	seen := map[uint64]bool{}
	for range 2_000 {
		restarted := NewShard("t", 0, Options{}, State{Frontier: -1})
		n := reserve(t, restarted, epoch, 1).Nonce
		require.False(t, seen[n], "a nonce repeated across restarts")
		seen[n] = true
	}
}
