package inflight

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Parked records (parked.go): a key blocked for long keeps the acked-ahead runs whole, what is
// persisted names its records by one tail, and a restore verifies them before it serves past
// them.

// parkedLog is a log where every twentieth record is of the hung key 1 and the others of
// keys 2..101.
func parkedLog(n int) []uint64 {
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(2 + i%100)
		if i%20 == 0 {
			keys[i] = 1
		}
	}
	return keys
}

// consumeAll reserves up to max records, binds them by keyAt and returns the kept leases.
func consumeAll(t *testing.T, s *Shard, now time.Time, keyAt []uint64, max int) []Lease {
	t.Helper()
	leases, err := s.ReserveBatch(now, int64(len(keyAt)), 0, max, nil)
	if err != nil {
		return nil
	}
	keys := make([]uint64, len(leases))
	for i, l := range leases {
		keys[i] = keyAt[l.Offset]
	}
	return bindAll(t, s, now, leases, keys, false)
}

// verifyAll tells a restored shard the keys of what its tails may hold.
func verifyAll(s *Shard, now time.Time, keyAt []uint64) {
	for s.Verifying() {
		offs := s.Unverified(nil, 7)
		keys := make([]uint64, len(offs))
		for i, off := range offs {
			keys[i] = keyAt[off]
		}
		s.Verify(now, offs, keys)
	}
}

func TestParkedHungKey(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const runsCap = 10
	cfg := Config{Ordered: true, VisibilityTimeout: time.Hour, MaxAckedAheadRuns: runsCap, MaxInFlight: 1000, MaxDeferredPerKey: 1000} // (no spill: spill_test.go)
	s, _ := newTestShard(t, cfg, State{Frontier: -1})
	keyAt := parkedLog(4000) // 200 records of the hung key: 20 times the run cap
	hung := consumeAll(t, s, t0, keyAt, 1)
	require.Equal(t, int64(0), hung[0].Offset, "the hung key's first record, held for good")
	acked := map[int64]bool{}
	for range 400 {
		for _, l := range consumeAll(t, s, t0, keyAt, 16) {
			require.NotEqual(t, uint64(1), keyAt[l.Offset], "the hung key's later records wait")
			require.NoError(t, s.Ack(t0, l.Handle))
			acked[l.Offset] = true
		}
	}
	require.Len(t, acked, 3800, "every other key's record went: the hung key blocked only itself")
	st := s.Stats()
	require.Zero(t, s.counters.AckedAheadStalls.Load(), "no acked-ahead stall")
	require.Equal(t, 199, st.Keys.Parked, "the hung key's later records parked")
	require.Equal(t, 1, st.Keys.ParkedKeys)
	require.Equal(t, 1, st.AckedAheadRuns, "one run, whatever the hung key's records")
	require.Equal(t, 3800, st.AckedAhead, "parked records are not counted as acked")
	require.Equal(t, int64(-1), st.Frontier, "the frontier waits for the held record")

	var persisted State
	s.Snapshot(&persisted)
	require.Equal(t, []Run{{1, 3999}}, persisted.AckedAhead)
	require.Equal(t, []KeyTail{{Key: 1, From: 20}}, persisted.KeyTails)

	t.Run("a restart delivers the hung key's records in order and no acked one again", func(t *testing.T) {
		r, _ := newTestShard(t, cfg, persisted)
		head := consumeAll(t, r, t0, keyAt, 1)
		require.Equal(t, []int64{0}, offsetsOf(head), "below the tails, records go before they are verified")
		_, err := r.ReserveNext(t0, int64(len(keyAt)))
		require.ErrorIs(t, err, ErrUnverified, "nothing at or above them before")
		verifyAll(r, t0, keyAt)
		require.Equal(t, 199, r.Stats().Keys.Parked, "the hung key's records, parked again")
		order := []int64{0}
		require.NoError(t, r.Ack(t0, head[0].Handle))
		for len(order) < 200 {
			got := consumeAll(t, r, t0, keyAt, 50)
			require.NotEmpty(t, got, "records wait for nothing (after %v)", order)
			for _, l := range got {
				require.Equal(t, uint64(1), keyAt[l.Offset], "offset %d was acked before the restart", l.Offset)
				order = append(order, l.Offset)
				require.NoError(t, r.Ack(t0, l.Handle))
			}
		}
		for i, off := range order {
			require.Equal(t, int64(i*20), off, "the hung key's records in order")
		}
		require.Equal(t, int64(3999), r.Stats().Frontier)
		require.Zero(t, r.Stats().Keys.ParkedKeys)
	})

	t.Run("the frontier stops below a parked record", func(t *testing.T) {
		require.NoError(t, s.Ack(t0, hung[0].Handle))
		require.Equal(t, int64(19), s.Stats().Frontier, "the hung key's next record is unsettled")
	})
}

// TestParkedSlots: at most MaxKeyTails keys park; the records of another blocked key are
// holes in the runs, as before, and what is persisted still names every unsettled record.
func TestParkedSlots(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := Config{Ordered: true, VisibilityTimeout: time.Hour, MaxInFlight: 10_000}
	s, _ := newTestShard(t, cfg, State{Frontier: -1})
	const keys = MaxKeyTails + 4
	// Round after round of one record per key, then a record without a key.
	var keyAt []uint64
	for range 4 {
		for k := range keys {
			keyAt = append(keyAt, uint64(k+1))
		}
		keyAt = append(keyAt, 0)
	}
	first := consumeAll(t, s, t0, keyAt[:keys], keys) // the first round: every key held
	require.Len(t, first, keys)
	later := consumeAll(t, s, t0, keyAt, len(keyAt))
	require.Len(t, later, 4, "only the records without a key go")
	for _, l := range later {
		require.NoError(t, s.Ack(t0, l.Handle))
	}
	st := s.Stats()
	require.Equal(t, MaxKeyTails, st.Keys.ParkedKeys)
	require.Equal(t, 3*MaxKeyTails, st.Keys.Parked)
	require.Equal(t, 3*keys, st.Keys.Deferred)

	var persisted State
	s.Snapshot(&persisted)
	require.Len(t, persisted.KeyTails, MaxKeyTails)
	r, _ := newTestShard(t, cfg, persisted)
	verifyAll(r, t0, keyAt)
	var got []int64
	for {
		leases := consumeAll(t, r, t0, keyAt, len(keyAt))
		if len(leases) == 0 {
			break
		}
		for _, l := range leases {
			got = append(got, l.Offset)
			require.NoError(t, r.Ack(t0, l.Handle))
		}
	}
	require.Len(t, got, 4*keys, "every record of a key, none without one (acked before)")
	require.Equal(t, int64(len(keyAt)-1), r.Stats().Frontier)
}

// TestParkedBatchAckedOutOfOrder: a record given back by a batch that still holds its key, and
// deferred behind it, is not parked below an ack of the batch: a restart must not take the
// acked record for a parked one.
func TestParkedBatchAckedOutOfOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := Config{Ordered: true, VisibilityTimeout: time.Hour}
	s, _ := newTestShard(t, cfg, State{Frontier: -1})
	keyAt := []uint64{1, 1, 1, 1}
	batch := consumeAll(t, s, t0, keyAt[:3], 3)
	require.Len(t, batch, 3)
	require.NoError(t, s.Ack(t0, batch[2].Handle))      // 2, out of order
	require.NoError(t, s.GiveBack(t0, batch[0].Handle)) // 0 waits behind 1, still held
	require.Empty(t, consumeAll(t, s, t0, keyAt[:3], 4), "0 deferred behind the batch")
	require.Equal(t, KeyStats{HeldKeys: 1, BlockedKeys: 1, Deferred: 1, OldestBlockedSince: t0}, s.Stats().Keys,
		"0 is not parked, and its key takes no slot")
	require.Empty(t, consumeAll(t, s, t0, keyAt, 4), "3 deferred behind the batch too")
	require.Equal(t, 2, s.Stats().Keys.Deferred)
	var persisted State
	s.Snapshot(&persisted)
	require.Equal(t, []KeyTail{{Key: 1, From: 3}}, persisted.KeyTails, "0 is a hole, 3 parked")
	r, _ := newTestShard(t, cfg, persisted)
	verifyAll(r, t0, keyAt)
	var got []int64
	for range 8 {
		for _, l := range consumeAll(t, r, t0, keyAt, 4) {
			got = append(got, l.Offset)
			require.NoError(t, r.Ack(t0, l.Handle))
		}
	}
	require.Equal(t, []int64{0, 1, 3}, got, "2 was acked")
}

// TestParkedRestoredUnordered: a state with key tails restored on a topic no longer ordered is
// verified all the same before it serves, then serves unordered.
func TestParkedRestoredUnordered(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s, _ := newTestShard(t, Config{Ordered: true, VisibilityTimeout: time.Hour}, State{Frontier: -1})
	keyAt := []uint64{1, 2, 1, 2, 1}
	held := consumeAll(t, s, t0, keyAt, 1) // 0: key 1
	require.Len(t, held, 1)
	for _, l := range consumeAll(t, s, t0, keyAt, 5) {
		require.NoError(t, s.Ack(t0, l.Handle)) // 1 and 3
	}
	var persisted State
	s.Snapshot(&persisted)
	require.Equal(t, []KeyTail{{Key: 1, From: 2}}, persisted.KeyTails)
	r, _ := newTestShard(t, Config{VisibilityTimeout: time.Hour}, persisted)
	require.True(t, r.Ordered(), "ordered until verified")
	verifyAll(r, t0, keyAt)
	require.False(t, r.Ordered(), "then as configured")
	leases, err := r.ReserveBatch(t0, 5, 0, 5, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 2, 4}, offsetsOf(leases))
}

// TestParkedNotBelowAMovedAck: a lease a move brought lies above the next owner's cursor; once
// acked there, a record of its key read later below it is not parked (a tail from it would
// take the ack for a parked record after a restart).
func TestParkedNotBelowAMovedAck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := Config{Ordered: true, VisibilityTimeout: time.Hour}
	keyAt := []uint64{1, 1, 1}
	batch, next := movedBatch(t, cfg, keyAt, 3, 2)
	next.Bind(t0, []Handle{batch[2].Handle}, []uint64{1}, false, make([]bool, 1))
	require.NoError(t, next.Ack(t0, batch[2].Handle)) // 2, acked above the cursor
	leases, err := next.ReserveAhead(t0, 3, 0, 2, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, offsetsOf(bindAll(t, next, t0, leases, []uint64{1, 1}, false)), "one batch: both")
	require.NoError(t, next.GiveBack(t0, leases[0].Handle)) // 0 waits behind 1
	require.Empty(t, consumeAll(t, next, t0, keyAt, 3))
	var persisted State
	next.Snapshot(&persisted)
	require.Empty(t, persisted.KeyTails, "0 lies below the moved ack of 2: a hole, not parked")
	r, _ := newTestShard(t, cfg, persisted)
	verifyAll(r, t0, keyAt)
	got := consumeAll(t, r, t0, keyAt, 3)
	require.Equal(t, []int64{0, 1}, offsetsOf(got), "2 was acked")
}

// movedBatch leases n records of keyAt in one batch on a new shard of cfg, gives the first
// givenBack of them back and moves the shard: it returns the batch and the next owner.
func movedBatch(t *testing.T, cfg Config, keyAt []uint64, n, givenBack int) ([]Lease, *Shard) {
	t.Helper()
	t0 := time.Unix(1000, 0)
	s, _ := newTestShard(t, cfg, State{Frontier: -1})
	batch := consumeAll(t, s, t0, keyAt, n)
	require.Len(t, batch, n)
	for _, l := range batch[:givenBack] {
		require.NoError(t, s.GiveBack(t0, l.Handle))
	}
	var moved State
	s.HandOff(t0, &moved)
	next, _ := newTestShard(t, cfg, moved)
	return batch, next
}

// TestParkedNotBelowAMovedAckOrderedAgain: as TestParkedNotBelowAMovedAck, with the key index
// made afresh after the move (the topic made unordered, then ordered again): the moved leases
// lie above the cursor and hold no key of the new index, so once one is acked there, a record
// of its key read later below it is not parked either. Found by the ordered model (seeds 1, 2
// and 3 at 20,000 checks, once it changed the topic's settings): an acked record delivered
// again after a crash.
func TestParkedNotBelowAMovedAckOrderedAgain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := Config{Ordered: true, VisibilityTimeout: time.Hour}
	keyAt := []uint64{1, 1, 1}
	batch, next := movedBatch(t, cfg, keyAt, 2, 0)
	next.Bind(t0, []Handle{batch[0].Handle, batch[1].Handle}, []uint64{1, 1}, false, make([]bool, 2))
	next.SetConfig(Config{VisibilityTimeout: time.Hour})
	next.SetConfig(cfg) // a new index: the moved leases hold no key of it
	holder := consumeAll(t, next, t0, keyAt, 1)
	require.Equal(t, []int64{2}, offsetsOf(holder), "the moved leases lie above the cursor")
	require.NoError(t, next.GiveBack(t0, batch[0].Handle))
	require.NoError(t, next.Ack(t0, batch[1].Handle)) // 1, acked above the cursor, unbound
	require.Empty(t, consumeAll(t, next, t0, keyAt, 1), "0 waits behind 2's holder")
	require.Equal(t, 1, next.Stats().Keys.Deferred)
	requireRestartSkips(t, cfg, next, keyAt, 1, "0 lies below the moved ack of 1: a hole, not parked")
}

// requireRestartSkips snapshots s, which parks nothing (why), restarts a shard from the
// snapshot and drains its log of keyAt, acking what it delivers: the record at acked, acked
// before the restart, is never delivered.
func requireRestartSkips(t *testing.T, cfg Config, s *Shard, keyAt []uint64, acked int64, why string) {
	t.Helper()
	t0 := time.Unix(1000, 0)
	var st State
	s.Snapshot(&st)
	require.Empty(t, st.KeyTails, why)
	r, _ := newTestShard(t, cfg, st)
	verifyAll(r, t0, keyAt)
	for range keyAt {
		for _, l := range consumeAll(t, r, t0, keyAt, len(keyAt)) {
			require.NotEqual(t, acked, l.Offset, "offset %d was acked before the restart", acked)
			require.NoError(t, r.Ack(t0, l.Handle))
		}
	}
	require.Equal(t, int64(len(keyAt)-1), r.Stats().Frontier)
}

// A record quarantined unread (its last delivery died with the previous process), so of a key
// the index does not know, and discarded into the runs above a key's spilled records, takes
// them out of the runs as it takes the parked ones, or the key's tail, from its lowest spilled
// record, would name the discarded record too. Found by the ordered model (seed 71 at 20,000
// checks): a discarded record spilled again after a move.
func TestParkedNotBelowADiscardAboveSpilled(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const a = 1
	keyAt := []uint64{a, a, a, a}
	cfg := Config{Ordered: true, VisibilityTimeout: time.Hour, MaxDeferredPerKey: 1, MaxDeliveries: 1}
	// 3 was delivered once before a restart, and is quarantined when reserved.
	s, _ := newTestShard(t, cfg, State{Frontier: -1, Attempts: []Attempt{{Offset: 3, Count: 1}}})
	require.Equal(t, []int64{0}, offsetsOf(consumeAll(t, s, t0, keyAt, 1)), "held for good")
	require.Empty(t, consumeAll(t, s, t0, keyAt, 1), "1 deferred, parked")
	require.Empty(t, consumeAll(t, s, t0, keyAt, 1), "2 spilled past the bound")
	require.Equal(t, 1, s.Stats().Keys.Spilled)
	require.Empty(t, consumeAll(t, s, t0, keyAt, 1), "3 quarantined unread")
	require.Equal(t, []int64{3}, s.Quarantined())
	require.True(t, s.Discard(t0, 3))
	requireRestartSkips(t, cfg, s, keyAt, 3, "1 and 2 lie below the discarded 3: holes, not parked")
}

// requireTailsKeepTheirRules checks what State.KeyTails promises, and what a persisted record
// and a move's encoding require: every From above the frontier, ascending strictly (an offset
// is one record, of one key), keys nonzero and distinct.
func requireTailsKeepTheirRules(t require.TestingT, st State) {
	prev := st.Frontier
	keys := map[uint64]bool{}
	for _, k := range st.KeyTails {
		require.Greater(t, k.From, prev, "key tails %v above the frontier %d, ascending", st.KeyTails, st.Frontier)
		require.False(t, k.Key == 0 || keys[k.Key], "key tails %v: keys nonzero and distinct", st.KeyTails)
		prev, keys[k.Key] = k.From, true
	}
}

// A purge of a shard restored with key tails and not verified yet: one that settles every
// record of the runs ends the verification (nothing is left to verify, and the tails of the
// keys it passed, at its end all, would share their From); one that leaves records of the runs
// above it to verify is refused, changing nothing, until the shard is verified. Found by the
// ordered model (seeds 33 and 34 at 20,000 checks): a restored tail passed by a purge named its
// key's records from below the frontier, and a restart from that state took an unsettled
// record for an acked one.
func TestParkedRestoredPurged(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const a, b, c = 1, 2, 3
	keyAt := []uint64{c, c, a, c, c, b, a, c, b, c}
	// 0 is a hole; the runs hold 1 (acked) and the tails' records from 2.
	restored := State{Frontier: -1, AckedAhead: []Run{{1, 9}}, KeyTails: []KeyTail{{Key: a, From: 2}, {Key: b, From: 5}}}
	cfg := Config{Ordered: true, VisibilityTimeout: time.Hour}

	t.Run("past every record of the runs", func(t *testing.T) {
		s, _ := newTestShard(t, cfg, restored)
		moved, err := s.SettleBelow(t0, 10)
		require.NoError(t, err)
		require.Equal(t, int64(10), moved)
		require.False(t, s.Verifying(), "nothing left to verify")
		var st State
		s.Snapshot(&st)
		requireTailsKeepTheirRules(t, st)
		require.Empty(t, st.KeyTails)
		require.Equal(t, int64(9), st.Frontier)
	})

	t.Run("leaving records of the runs to verify", func(t *testing.T) {
		s, _ := newTestShard(t, cfg, restored)
		_, err := s.SettleBelow(t0, 7)
		require.ErrorIs(t, err, ErrUnverified)
		require.Equal(t, int64(-1), s.Stats().Frontier, "nothing settled")
		var st State
		s.Snapshot(&st)
		require.Equal(t, restored.KeyTails, st.KeyTails)
		verifyAll(s, t0, keyAt)
		moved, err := s.SettleBelow(t0, 7)
		require.NoError(t, err)
		require.Equal(t, int64(7), moved)
		s.Snapshot(&st)
		requireTailsKeepTheirRules(t, st)
		require.Equal(t, []KeyTail{{Key: b, From: 8}}, st.KeyTails)
	})

	t.Run("below the records to verify", func(t *testing.T) {
		s, _ := newTestShard(t, cfg, restored)
		moved, err := s.SettleBelow(t0, 2)
		require.NoError(t, err)
		require.Equal(t, int64(2), moved)
		var st State
		s.Snapshot(&st)
		require.Equal(t, restored.KeyTails, st.KeyTails)
		require.True(t, s.Verifying())
	})
}

// A requeued record deferred behind its key is not parked: it comes back from the quarantine
// below records of its key acked meanwhile, which the index forgot with the key, and a tail
// from it would take them for unsettled after a restart. Found by the ordered model (seed
// 404 at 20,000 checks): an acked record delivered again after a move.
func TestParkedNotARequeuedRecord(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const a = 1
	keyAt := []uint64{0, a, a, a}
	cfg := Config{Ordered: true, VisibilityTimeout: time.Hour}
	s, _ := newTestShard(t, cfg, State{Frontier: -1})
	require.Equal(t, []int64{0}, offsetsOf(consumeAll(t, s, t0, keyAt, 1)), "held: the frontier stays below")
	poison := consumeAll(t, s, t0, keyAt, 1)
	require.Equal(t, []int64{1}, offsetsOf(poison))
	require.NoError(t, s.Reject(t0, poison[0].Handle))
	next := consumeAll(t, s, t0, keyAt, 1)
	require.Equal(t, []int64{2}, offsetsOf(next), "the key goes on past its quarantined record")
	require.NoError(t, s.Ack(t0, next[0].Handle)) // the key, free, is forgotten
	require.Equal(t, []int64{3}, offsetsOf(consumeAll(t, s, t0, keyAt, 1)))
	require.True(t, s.Requeue(t0, 1))
	require.Empty(t, consumeAll(t, s, t0, keyAt, 1), "the requeued record waits behind its key")
	require.Equal(t, 1, s.Stats().Keys.Deferred)

	requireRestartSkips(t, cfg, s, keyAt, 2, "no tail from the requeued record, over the acked 2")
}

// TestParkedLowAfterAReleaseRun: a key that frees makes a run of its parked records visible
// at once; the lowest parked offset, below which the frontier stays, is then the key's first
// record past the run.
func TestParkedLowAfterAReleaseRun(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := Config{Ordered: true, VisibilityTimeout: time.Hour, MaxInFlight: 1000, MaxDeferredPerKey: 1000}
	s, _ := newTestShard(t, cfg, State{Frontier: -1})
	keyAt := parkedLog(2000) // key 1 at every twentieth offset
	first := consumeAll(t, s, t0, keyAt, 50)
	var holder []Lease // key 1's 0, 20 and 40, held by the batch of fifty
	for _, l := range first {
		if keyAt[l.Offset] == 1 {
			holder = append(holder, l)
			continue
		}
		require.NoError(t, s.Ack(t0, l.Handle))
	}
	require.Len(t, holder, 3)
	for {
		got := consumeAll(t, s, t0, keyAt, 50)
		if len(got) == 0 {
			break
		}
		for _, l := range got {
			require.NoError(t, s.Ack(t0, l.Handle))
		}
	}
	require.Equal(t, 97, s.Stats().Keys.Parked, "60 to 1980")
	for _, l := range holder {
		require.NoError(t, s.Ack(t0, l.Handle))
	}
	// The free makes min(keyReleaseRun, 50) of them visible: 60 to 680.
	s.mu.Lock()
	low := s.keys.parkedLow
	s.mu.Unlock()
	require.Equal(t, int64(60+20*keyReleaseRun), low)
	require.Equal(t, int64(59), s.Stats().Frontier)
	run := consumeAll(t, s, t0, keyAt, 50)
	require.Len(t, run, keyReleaseRun)
	for _, l := range run {
		require.NoError(t, s.Ack(t0, l.Handle))
	}
	require.Equal(t, low-1, s.Stats().Frontier, "up to the next parked record")
}
