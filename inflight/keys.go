package inflight

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"
)

// DefaultMaxDeferred is the most records an ordered partition keeps deferred behind their
// keys (Config.MaxDeferred) when the topic sets none: about 200 KiB of memory, and enough for
// a key that holds a few percent of the records to wait out a visibility timeout at
// thousands of records a second.
const DefaultMaxDeferred = 10_000

// KeyOf returns the identity Bind orders a record by: 0 for a record without a key, which
// is not ordered, and a hash of key otherwise (never 0). The hash is the same in every
// process and release (State.KeyTails persists it): a 64-bit multiply-mix over the key's
// 8-byte words with a final avalanche. It is not keyed, so a producer could choose keys whose
// identities collide; it gains nothing by it that writing the same key would not give it
// (the keys are then ordered as one).
func KeyOf(key []byte) uint64 {
	if len(key) == 0 {
		return 0
	}
	const (
		seed  = 0x9e3779b97f4a7c15
		prime = 0xff51afd7ed558ccd
	)
	h := uint64(seed) ^ uint64(len(key))*prime
	for len(key) >= 8 {
		h = bits.RotateLeft64((h^binary.LittleEndian.Uint64(key))*prime, 31)
		key = key[8:]
	}
	if len(key) > 0 {
		var tail [8]byte
		copy(tail[:], key)
		h = bits.RotateLeft64((h^binary.LittleEndian.Uint64(tail[:])^0x80)*prime, 31)
	}
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 29
	return max(h, 1)
}

// keyIndex is an ordered partition's memory of its keys: which live leases hold each key,
// and which offsets of it wait behind them. It is memory only, as leases are: after a restart
// the scan reads the records above the frontier again, in order, and the first record of a key
// it binds is the key's lowest unsettled one.
type keyIndex struct {
	// byKey holds the keys known: held, queued, parked or quarantined. A key held by one lease
	// and nothing else has no state there (keySlot).
	byKey keyTable
	// of holds the key of every queued offset (in a table as the shard's pending states are:
	// a map cost a third of a bind). The key a live lease holds is in its pending state.
	of offsetTable[uint64]
	// deferred counts the queued offsets that are deferred (pending.deferred): read, found
	// behind their key, and neither leased nor visible until the key frees.
	deferred int
	// holdings numbers Bind calls: the leases one call binds are one holding.
	holdings uint64
	// capped: a reserve found deferred at Config.MaxDeferred and has found it there since
	// (a stall episode of new records, counted once as it begins).
	capped bool
	// spare holds the states of keys forgotten, for the next keys that need one to reuse.
	spare []*keyState
	// parked holds the keys whose deferred records are parked in the acked-ahead runs (see
	// parked.go), at most MaxKeyTails; parkedOffsets counts those records, and parkedLow is
	// the lowest of them (math.MaxInt64 when none): the frontier stops below it.
	parked        []parkedKey
	parkedOffsets int
	parkedLow     int64
	// holdParkedLow: a key's release run is leaving the runs, and parkedLow is searched for
	// once it has (parkedLowStale: an offset of it was the lowest).
	holdParkedLow, parkedLowStale bool
	// spilled counts the parked keys' spilled records (spill.go); heldHigh is the highest
	// offset of the leases a move brought (-1: none), which bind to their keys only after
	// the restore: nothing spills below it.
	spilled  int
	heldHigh int64
	// parkFrom is the lowest offset a deferred record may be parked at: the index knows
	// nothing of the records acked below it, before a restart or while the topic was not
	// ordered (see parkLocked).
	parkFrom int64
	// verifying: a restore brought key tails whose records the scans have not verified
	// yet; verifyNext is the lowest offset of the runs still to verify.
	verifying  bool
	verifyNext int64
	// settledUnverified holds the offsets settled into the runs (acked, discarded) while
	// they waited to be verified: acked, whatever their key.
	settledUnverified map[int64]struct{}
	// awaiting holds verified keys with parked records above the cursor, made visible as
	// the cursor passes them (releaseAwaitingLocked).
	awaiting []parkedKey
	// quarantinedKey holds the key of each quarantined offset whose key is quarantined with
	// it (Config.QuarantineKeys); unkeyed, ascending, the quarantined and requeued offsets
	// whose keys are not known yet (restored: Verify learns them before anything is handed
	// out). See quarantinedkeys.go.
	quarantinedKey map[int64]uint64
	unkeyed        []int64
}

// keyState is one key of an ordered partition.
type keyState struct {
	holders int    // live leases bound to the key
	holding uint64 // the Bind call whose leases those are
	// queued holds, ascending, the key's offsets the shard knows to be unsettled and not
	// leased to a holder of the key: deferred ones (visible only once the key frees), and
	// released or delayed ones (nacked, expired, given back, lapsed), which come back by
	// themselves. The key is blocked for every offset above its lowest queued one.
	queued []int64
	// blockedSince is when the key last began to have queued offsets (Unix nanoseconds).
	blockedSince int64
	// deferred counts the queued offsets that are deferred; parked: they are parked in the
	// acked-ahead runs (parked.go). restoredFrom is the key's tail a restore brought (restored), until
	// the scans have verified it (0 otherwise).
	deferred     int
	parked       bool
	restoredFrom int64
	restored     bool
	// parkedOffsets counts the key's parked records; ackedHigh is the highest record of it
	// its holders settled (see parkLocked), and boundHigh the highest one bound to a holder
	// since the index knew the key (see spillLocked).
	parkedOffsets int
	ackedHigh     int64
	boundHigh     int64
	// room is how many records the consume that last bound the key could take (its reserve
	// asked for: Shard.asked), one for a gateway's (oneAKey): how many of the key's records
	// a free makes visible (see freeKeyLocked).
	room int
	// quarantined holds, ascending, the key's records in the quarantine under
	// Config.QuarantineKeys: its records above the lowest follow them there.
	quarantined []int64
	// spilled holds the key's deferred records past Config.MaxDeferredPerKey, parked in the
	// acked-ahead runs with no entry of their own, above boundHigh (spill.go).
	spilled spillSet
}

// keepsSlot reports whether a parked key keeps its parking slot: it has records parked, as
// entries or spilled, or a restored tail not verified yet.
func (ks *keyState) keepsSlot() bool {
	return ks.parkedOffsets > 0 || ks.restored || ks.spilled.count > 0
}

func newKeyIndex() *keyIndex {
	return &keyIndex{parkedLow: math.MaxInt64, heldHigh: -1}
}

// Bind binds the leases of handles, whose records the caller has just read (in the order it
// reserved them, keys[i] being KeyOf of handles[i]'s record key), to their keys, on a topic
// whose Config.Ordered is set, and reports in kept which of them the caller may deliver. On
// any other topic it keeps every lease and changes nothing.
//
// A lease is kept when its record has no key, or when its key is free: held by no live lease
// (or only by leases this same call binds, so one holder takes consecutive records of a key
// in one batch, in order), and with no lower offset of the key waiting for delivery again.
// Otherwise the lease is withdrawn, uncounted as a GiveBack is, and the offset is deferred:
// neither leased nor visible, nor counted against the in-flight cap, until the key frees,
// when the lowest of the key's deferred offsets is made visible again (with a wake). So at
// any moment at most one Bind's leases hold a key, and a key's records are delivered in
// offset order, a record nacked, expired, given back or lapsed again before any later one.
// With oneAKey (a gateway reading ahead, whose records go to several consumers) the call
// keeps at most one record of a key.
//
// The caller must bind every lease it delivers, and reserve, read and bind one partition's
// records one scan at a time (keys are learnt by reading, so a scan that bound a later
// record of a key before an earlier scan bound an earlier one would reorder them). A handle
// that names no live lease is kept as it is: its settles fail anyway. A requeued record
// below the frontier is kept unbound (a requeue breaks order knowingly), unless
// Config.QuarantineKeys keeps requeued records in order. Under Config.QuarantineKeys a lease
// of a key one of whose lower records is quarantined is not kept either: it is withdrawn
// uncounted and quarantined after it (unless it was requeued). It returns how many leases it
// did not keep, deferred or quarantined. kept must be at least as long as handles.
func (s *Shard) Bind(now time.Time, handles []Handle, keys []uint64, oneAKey bool, kept []bool) int {
	kept = kept[:len(handles)]
	var fx effects
	s.mu.Lock()
	if s.keys == nil || s.handedOff || s.dropped {
		// Not ordered; or no lease is live (liveLease's tests of the shard, once for the
		// call), so nothing binds.
		s.mu.Unlock()
		for i := range kept {
			kept[i] = true
		}
		return 0
	}
	s.keys.holdings++
	holding := s.keys.holdings
	room := s.asked // the scan's reserve asked for this many: what its consume can take
	if oneAKey {
		room = 1
	}
	deferred, dropped := 0, 0
	unbound := false // a requeued record's lease left unbound: its key's queue may have changed
	at := now.UnixNano()
	var farEntry pending
	for i := range handles {
		kept[i] = true
		h := &handles[i]
		if keys[i] == 0 || h.Partition != s.partition {
			continue
		}
		// liveLease's lookup, inlined: every record's path. The entry in its ring slot, the
		// usual place, is read and written in place (valid until the table is written); one
		// in far is read into farEntry, and stored back if the lease binds.
		entry := s.liveEntry(*h)
		if entry == nil {
			var ok bool
			if farEntry, ok = s.pending.get(h.Offset); !ok || farEntry.nonce == 0 || farEntry.nonce != h.Nonce {
				continue
			}
			entry = &farEntry
		}
		if h.Offset <= s.frontier && !(s.cfg.QuarantineKeys && s.quarantine[h.Offset]) {
			// Requeued, and not kept in order (see Config.QuarantineKeys): out of its key's
			// queue if it waited there (requeued while the setting was on), or the key would
			// wait for it still once it is quarantined again.
			s.unqueueUnboundLocked(h.Offset, &fx)
			unbound = true
			continue
		}
		key := keys[i]
		slot, known := s.keys.byKey.slotFor(key)
		if !known {
			// A key the index did not know is free: nothing holds, queues or quarantines it
			// (the usual case: a key is forgotten at its holder's ack). Held by this lease
			// alone, it needs no state.
			slot.holding, slot.held, slot.room = holding, h.Offset, room
			s.bindLeaseLocked(h.Offset, entry, entry != &farEntry, key)
			continue
		}
		switch s.bindKnownLocked(s.keys.fullState(slot), h.Offset, entry, entry != &farEntry, key, holding, room, oneAKey, at, &fx) {
		case bindDeferred:
			kept[i] = false
			deferred++
		case bindQuarantined:
			kept[i] = false
			dropped++
		}
	}
	s.mu.Unlock()
	if deferred+dropped == 0 && !unbound {
		return 0 // every lease kept: only a deferral, a quarantine or an unqueue has effects
	}
	if deferred > 0 {
		s.counters.Deferred.Add(uint64(deferred))
	}
	s.report(&fx)
	return deferred + dropped
}

// NextFresh returns the offset an ordered partition's scan may read before it reserves it,
// to reserve and bind it in one step with ReserveKeyed: the shard's cursor as its last
// reserve of a fresh offset left it, read without the shard's lock; or -1 once a record was
// released or requeued since (due again, it comes first, and a scan reserves it before it
// reads it). It is a hint: by the time the caller reserves, another scan may have taken the
// offset or a record may have fallen due before it, and ReserveKeyed then answers
// ErrNotNext.
func (s *Shard) NextFresh() int64 { return s.nextFresh.Load() }

// ReserveKeyed reserves the record at off and binds it to key, KeyOf of its record key, in
// one step, for an ordered partition's scan that read the record before reserving it (at
// NextFresh): the lease ReserveNextFor would grant, bound as a Bind of it alone would bind
// it. A scan that reads under ScanLock holds every other scan of the partition up while it
// reads (and while it is descheduled, in a busy process); this one holds the lock only
// inside the call.
//
// It reserves only when off is the offset ReserveNextFor would take now, a fresh one with
// nothing due before it (no record released, requeued or awaiting, no cap reached, no
// restored key tail to verify), and no other scan holds ScanLock (one between its reserve
// and its Bind, whose unbound records could be off's key's lower ones). Otherwise it
// changes nothing and answers ErrNotNext: reserve, read and bind under ScanLock instead. A
// record behind its key is deferred (or quarantined with it) with no lease granted, as Bind
// leaves a lease it withdraws but for the nonce, the expiry-queue entry and the fencing
// token it never took, and the answer is ErrBehindKey. On a shard that is not ordered it
// answers ErrNotNext. Its errors are the sentinels themselves, never wrapped: a caller on
// the hot path may compare them.
func (s *Shard) ReserveKeyed(now time.Time, hwm int64, visibility time.Duration, off int64, key uint64) (Lease, error) {
	if visibility < 0 || visibility > MaxVisibility {
		return Lease{}, ErrInvalidDuration
	}
	at := now.UnixNano()
	var lease Lease
	var fx effects
	if !s.lockFresh(at, hwm, off, &fx) {
		return Lease{}, ErrNotNext
	}
	s.passCursorLocked(off)
	s.keys.holdings++
	outcome := s.takeFreshLocked(at, int64(visibility), off, key, s.keys.holdings, 1, &lease, &fx)
	granted, deferred := 0, 0
	switch outcome {
	case bindKept:
		granted = 1
	case bindDeferred:
		deferred = 1
	}
	s.unlockFresh(hwm, 1, granted, grantCounted, deferred, &fx)
	if outcome != bindKept {
		s.report(&fx)
		return Lease{}, ErrBehindKey
	}
	fx.deadline = lease.Expiry.UnixNano()
	s.report(&fx)
	return lease, nil
}

// ReserveKeyedBatch is ReserveKeyed for a run of records, for an ordered partition's batch
// scan that read them before reserving them: keys[i] is KeyOf of the record key at off+i,
// off being NextFresh. Under one acquisition of the shard's lock it takes the records
// ReserveBatch(now, hwm, visibility, asked) would lease, as far as keys goes (consecutive
// fresh offsets from off, up to the in-flight cap and hwm), and treats each as Bind would
// treat their leases in one call: a record whose key is free, or held by a record this call
// took (one holder takes consecutive records of a key, in order; a free of the key makes as
// many of its later records visible as asked), is leased and bound, and its lease appended
// to into; one behind its key is deferred, or quarantined after a lower record of its key
// (Config.QuarantineKeys), with no lease granted: no nonce, no expiry-queue entry, no
// fencing token. The shard is then left as ReserveBatch and Bind leave it, but for those and
// the nonces of the later leases (Counters.Delivered counts every record taken, as it counts
// the leases Bind withdraws). taken is how many records of the run it took, at least one:
// the next fresh offset is off+taken.
//
// It refuses, changing nothing, with ErrNotNext, wherever ReserveKeyed refuses off (keys
// empty too); the caller then reserves, reads and binds under ScanLock. Its errors are the
// sentinels themselves, never wrapped.
func (s *Shard) ReserveKeyedBatch(now time.Time, hwm int64, visibility time.Duration, asked int, off int64, keys []uint64, into []Lease) (_ []Lease, taken int, err error) {
	if visibility < 0 || visibility > MaxVisibility {
		return into, 0, ErrInvalidDuration
	}
	at := now.UnixNano()
	var fx effects
	if len(keys) == 0 || !s.lockFresh(at, hwm, off, &fx) {
		return into, 0, ErrNotNext
	}
	// takesFreshLocked found room under the in-flight cap and off below hwm: one at least.
	taken = int(min(int64(len(keys)), int64(s.cfg.MaxInFlight-s.leased), hwm-off))
	// The cursor passes the run first, as ReserveBatch leaves it before Bind: a key freed
	// below (a quarantine's) releases below it.
	s.passCursorLocked(off + int64(taken) - 1)
	s.keys.holdings++
	holding := s.keys.holdings
	first := len(into)
	into = slices.Grow(into, taken)
	deferred := 0
	for i, key := range keys[:taken] {
		into = into[:len(into)+1]
		switch s.takeFreshLocked(at, int64(visibility), off+int64(i), key, holding, asked, &into[len(into)-1], &fx) {
		case bindKept:
			continue
		case bindDeferred:
			deferred++
		}
		into = into[:len(into)-1]
	}
	s.endFresh(hwm, taken, into[first:], grantCounted, deferred, &fx)
	return into, taken, nil
}

// ReserveDueKeyed is ReserveKeyedBatch for the records of an ordered partition that are due
// before its fresh ones, for a scan that reserves them before it reads them but holds no
// ScanLock while it reads: released as their key freed, nacked, expired, lapsed, or given
// back once bound. Each of these waits in its key's queue, so the index knows its key
// without a read: under one acquisition of the shard's lock the call leases them, lowest
// first, up to asked (and the in-flight cap), and binds each as it leases it, as Bind would
// bind the leases of one call: a record behind its key is deferred again, its lease
// withdrawn, and not appended to into. No other scan can then bind a lower record of one of
// those keys after it. taken is how many records it leased, those it deferred again too.
// Once nothing is due before the cursor, NextFresh names the cursor again. The caller reads
// the records after, and hands over (Handed) what it delivers, as after ReserveBatch.
//
// It refuses, changing nothing, with ErrNotNext when the lowest due record is not of that
// kind (released before a read bound it; requeued below the frontier; at MaxDeliveries
// after a restart), when the shard's next reserve would not take it (the acked-ahead cap,
// restored key tails to verify, the in-flight cap), or when another scan holds ScanLock: the
// caller then reserves, reads and binds under ScanLock. When nothing is due (other scans
// took it) it answers no lease and no error. On a shard that is not ordered it answers
// ErrNotNext. Its errors are the sentinels themselves, never wrapped.
func (s *Shard) ReserveDueKeyed(now time.Time, hwm int64, visibility time.Duration, asked int, into []Lease) (_ []Lease, taken int, err error) {
	if visibility < 0 || visibility > MaxVisibility {
		return into, 0, ErrInvalidDuration
	}
	at := now.UnixNano()
	var fx effects
	if !s.lockKeyed(at, &fx) {
		return into, 0, ErrNotNext
	}
	if !s.bindsAsItLeasesLocked(at) {
		s.unlockKeyed(&fx)
		return into, 0, ErrNotNext
	}
	k := s.keys
	k.holdings++
	holding := k.holdings
	first := len(into)
	deferred := 0
	grant := s.scanGrantLocked() // read after, and maybe given back: see Handed
	for taken < asked && s.leased < s.cfg.MaxInFlight {
		off, ok := s.lowestReleased()
		if !ok || off >= hwm {
			break
		}
		key, known := k.of.get(off)
		ks := k.byKey.get(key) // (a key with queued records has a state)
		if !known || ks == nil {
			break // released before a read bound it: the locked scan learns its key
		}
		if s.cfg.MaxDeliveries > 0 && int(s.pending.lookup(off).attempts) >= s.cfg.MaxDeliveries {
			break // quarantined as the locked scan reserves it (see reserveLocked)
		}
		s.released.pop()
		taken++
		into = append(into, Lease{})
		s.grantLocked(at, int64(visibility), off, false, grant, 0, &into[len(into)-1])
		entry, inRing := s.pending.ref(off), true
		var farEntry pending
		if entry == nil {
			farEntry, inRing = s.pending.lookup(off), false
			entry = &farEntry
		}
		if s.bindKnownLocked(ks, off, entry, inRing, key, holding, asked, false, at, &fx) != bindKept {
			into = into[:len(into)-1]
			deferred++
		}
	}
	_, due := s.lowestReleased()
	if !due {
		s.nextFresh.Store(s.cursor) // nothing due first: a scan may read at the cursor
	}
	if taken == 0 {
		s.unlockKeyed(&fx)
		if !due {
			return into, 0, nil // taken by other scans already
		}
		return into, 0, ErrNotNext
	}
	s.endFresh(hwm, taken, into[first:], grant, deferred, &fx)
	return into, taken, nil
}

// lockFresh takes the shard's lock and ScanLock for a scan that read the record at off
// before reserving it, purged at now, and reports whether the shard takes off next
// (takesFreshLocked); when not, it unlocks and reports fx, having changed nothing but what
// the purge did.
func (s *Shard) lockFresh(at, hwm, off int64, fx *effects) bool {
	if !s.lockKeyed(at, fx) {
		return false
	}
	if !s.takesFreshLocked(at, hwm, off) {
		s.unlockKeyed(fx)
		return false
	}
	s.keys.capped = false // below the deferred cap: a stall episode, if any, is over
	return true
}

// lockKeyed takes the shard's lock and ScanLock for a call that reserves and binds in one
// step (ReserveKeyed, ReserveKeyedBatch, ReserveDueKeyed), and purges at now; it reports
// false, holding nothing, when another scan holds ScanLock. The scan lock is tried under the
// shard's lock (a scan takes them the other way round, but a TryLock never waits): it is
// held only while the shard's is, never by a call parked on the shard's lock, which would
// hold every other scan up.
func (s *Shard) lockKeyed(at int64, fx *effects) bool {
	s.mu.Lock()
	if !s.scanMu.TryLock() {
		s.mu.Unlock()
		return false
	}
	s.purgeLocked(at, fx)
	return true
}

// unlockKeyed ends what lockKeyed began for a call that took nothing, and reports fx.
func (s *Shard) unlockKeyed(fx *effects) {
	s.scanMu.Unlock()
	s.mu.Unlock()
	s.report(fx)
}

// unlockFresh ends what lockFresh began, once taken records were taken, granted of them
// leased as grant says and deferred of them deferred: it counts them, and notes that a
// counted grant's attempt is persisted state under MaxDeliveries (a scan's is, once handed
// over: see Handed).
func (s *Shard) unlockFresh(hwm int64, taken, granted int, grant grantKind, deferred int, fx *effects) {
	s.noteEmptyLocked(hwm, nil)
	fx.dirty = fx.dirty || granted > 0 && grant == grantCounted && s.cfg.MaxDeliveries > 0
	s.scanMu.Unlock()
	s.mu.Unlock()
	// As ReserveBatch counts every lease it grants, the ones Bind withdraws too.
	s.counters.Delivered.Add(uint64(taken))
	if deferred > 0 {
		s.counters.Deferred.Add(uint64(deferred))
	}
}

// endFresh is unlockFresh for a call that took a run of records and leased granted of them:
// their expiry, one for them all (the same now), goes to the host's deadline hook with the
// rest of fx.
func (s *Shard) endFresh(hwm int64, taken int, granted []Lease, grant grantKind, deferred int, fx *effects) {
	s.unlockFresh(hwm, taken, len(granted), grant, deferred, fx)
	if len(granted) > 0 {
		fx.deadline = granted[0].Expiry.UnixNano()
	}
	s.report(fx)
}

// takeFreshLocked takes off, the fresh offset at the cursor whose record's key is key (the
// cursor past it already), for a scan that read it first, as one record of the Bind call
// holding, whose consume can take room records: leased and bound when its key is free (see
// Bind), lease filled; otherwise deferred behind its key or quarantined with it, with no
// lease granted.
func (s *Shard) takeFreshLocked(at, visibility, off int64, key, holding uint64, room int, lease *Lease, fx *effects) bindOutcome {
	if key != 0 {
		if slot, known := s.keys.byKey.slotFor(key); !known {
			// Free (see Bind): held by this lease alone, it needs no state.
			slot.holding, slot.held, slot.room = holding, off, room
		} else {
			// A fresh offset waits in no key's queue: there is nothing to take out of it.
			ks := s.keys.fullState(slot)
			switch outcome := s.keyVerdictLocked(ks, off, false, holding, false); outcome {
			case bindDeferred:
				s.deferLocked(off, pending{}, key, ks, at, fx)
				return outcome
			case bindQuarantined:
				s.quarantineWithKeyLocked(off, pending{}, key, ks, fx)
				return outcome
			}
			ks.hold(off, holding, room)
		}
	}
	s.grantLocked(at, visibility, off, true, grantCounted, key, lease)
	return bindKept
}

// takesFreshLocked reports whether the shard's next reserve at now would lease off, a
// fresh offset at the cursor, and bind it: chooseLocked would return the cursor with no
// side effect (nothing requeued, released or awaiting; no cap; no restored tails to
// verify; no settled run to pass), reserveLocked would grant it as fresh, and Bind would
// bind on this shard.
func (s *Shard) takesFreshLocked(now, hwm, off int64) bool {
	if !s.bindsAsItLeasesLocked(now) || s.leased >= s.cfg.MaxInFlight || s.keys.deferred >= s.cfg.MaxDeferred {
		return false
	}
	if off != s.cursor || off >= hwm || off <= s.settledAbove || off <= s.pendingAbove || off <= s.frontier {
		return false
	}
	lowest, ok := s.lowestReleased()
	return !ok || lowest >= hwm
}

// bindsAsItLeasesLocked reports whether a call that leases and binds in one step may take
// anything at now (see lockKeyed): the shard is ordered and served, and its next reserve has
// nothing to do first that only the locked scan does (restored key tails to verify, records
// requeued or awaiting, records whose keys are not known yet, the acked-ahead cap).
func (s *Shard) bindsAsItLeasesLocked(now int64) bool {
	k := s.keys
	return k != nil && !s.handedOff && !s.dropped && !s.lapsedAt(now) && !k.verifying &&
		len(k.unkeyed) == 0 && len(k.awaiting) == 0 && s.requeued == 0 && !s.atAckedAheadCap()
}

// bindOutcome is what binding one lease to its key did.
type bindOutcome uint8

const (
	bindKept        bindOutcome = iota // bound: the caller delivers it
	bindDeferred                       // withdrawn, deferred behind its key
	bindQuarantined                    // withdrawn, quarantined after its key's lower record
)

// bindKnownLocked binds the live lease of off (entry, in its ring slot when inRing) to key,
// a key the index knows (ks), as one lease of the Bind call holding, whose consume can take
// room records (see Bind); or withdraws it, deferred behind the key or quarantined with it.
func (s *Shard) bindKnownLocked(ks *keyState, off int64, entry *pending, inRing bool, key, holding uint64, room int, oneAKey bool, at int64, fx *effects) bindOutcome {
	queued := len(ks.queued) > 0
	if queued {
		ks.unqueue(off) // a queued offset leased again: its turn, if nothing is below it
	}
	outcome := s.keyVerdictLocked(ks, off, entry.reason == ReasonRequeued, holding, oneAKey)
	if outcome != bindKept {
		p := *entry
		s.withdrawLocked(&p, fx)
		if outcome == bindDeferred {
			s.deferLocked(off, p, key, ks, at, fx)
		} else {
			s.quarantineWithKeyLocked(off, p, key, ks, fx)
		}
		return outcome
	}
	ks.hold(off, holding, room)
	if queued {
		s.keys.of.remove(off) // bound now: its key is in its lease's entry
	}
	s.bindLeaseLocked(off, entry, inRing, key)
	return bindKept
}

// keyVerdictLocked decides what becomes of off, a record of key ks (a key the index knows,
// off out of its queue) taken by the Bind call holding (requeued: a requeued record):
// quarantined after a lower record of its key, deferred behind the key (a holder of another
// call, or of this one under oneAKey; a lower record of it waiting or spilled), or kept.
func (s *Shard) keyVerdictLocked(ks *keyState, off int64, requeued bool, holding uint64, oneAKey bool) bindOutcome {
	// Records of the key spilled below it come first, into the quarantine too: it waits.
	spilledBelow := ks.spilledBelow(off)
	if !spilledBelow && !requeued && s.quarantinedKeyLocked(ks, off) {
		return bindQuarantined
	}
	ours := ks.holders > 0 && ks.holding == holding
	if (ks.holders > 0 && (!ours || oneAKey)) || (len(ks.queued) > 0 && ks.queued[0] < off) || spilledBelow {
		return bindDeferred
	}
	return bindKept
}

// hold notes that a lease of the Bind call holding, whose consume can take room records,
// holds the key with off's record.
func (ks *keyState) hold(off int64, holding uint64, room int) {
	ks.holders++
	ks.holding, ks.room = holding, room
	ks.boundHigh = max(ks.boundHigh, off)
}

// bindLeaseLocked notes in entry, the live lease of off, that it holds key: entry is off's
// entry in its ring slot (inRing), or a copy of its entry in far, stored back.
func (s *Shard) bindLeaseLocked(off int64, entry *pending, inRing bool, key uint64) {
	entry.key = key
	if !inRing {
		s.pending.set(off, *entry)
	}
}

// QueueKeys tells an ordered shard the keys of offsets it holds unleased and unsettled (a
// move's delayed and released records: the move carries no keys), so that a later record of
// those keys waits for them as it would have where they were nacked; keys[i] is KeyOf of
// offsets[i]'s record key. An offset leased, settled, unknown to the shard or known to the
// index already is left as it is; so is every offset of a shard that is not ordered.
func (s *Shard) QueueKeys(now time.Time, offsets []int64, keys []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		return
	}
	at := now.UnixNano()
	for i, off := range offsets {
		if p, ok := s.pending.get(off); ok && p.nonce == 0 && !p.deferred {
			s.queueKeyLocked(off, keys[i], at)
		}
	}
}

// queueKeyLocked queues the unleased, unsettled offset off under key, unless it has no key,
// lies at or below the frontier or is known to the index already.
func (s *Shard) queueKeyLocked(off int64, key uint64, now int64) {
	if key == 0 || off <= s.frontier {
		return
	}
	if _, known := s.keys.of.get(off); known {
		return
	}
	ks, _ := s.keys.stateOf(key)
	ks.queue(off, now)
	s.keys.of.set(off, key)
}

// Ordered reports whether the shard orders records by key (Config.Ordered): its scans must
// bind what they read (Bind) under ScanLock.
func (s *Shard) Ordered() bool { return s.ordered.Load() }

// ScanLock returns the lock under which a caller reserves, reads and binds the records of an
// ordered partition, one scan at a time (see Bind). An unordered partition's scans need none.
// A caller with other partitions to look at may TryLock it and pass over a busy one.
func (s *Shard) ScanLock() *sync.Mutex { return &s.scanMu }

// deferLocked queues off behind key, its record read and holding no lease (p its entry: a
// lease withdrawn, or none granted).
func (s *Shard) deferLocked(off int64, p pending, key uint64, ks *keyState, now int64, fx *effects) {
	if s.spillLocked(off, p, ks, fx) {
		return
	}
	p.deferred = true
	s.pending.set(off, p)
	s.keys.deferred++
	ks.deferred++
	ks.queue(off, now)
	s.keys.of.set(off, key)
	s.parkLocked(off, key, ks)
}

// unbindLocked is called as the live lease of off, holding key (its pending.key, 0: none),
// ends: settled, or (queued) released, delayed or lapsed, so that it waits for delivery again
// as the key's next record. The key frees once no lease holds it: its lowest queued offset,
// if deferred, is made visible. It reports whether the lease was bound.
func (s *Shard) unbindLocked(off int64, key uint64, queued bool, now int64, fx *effects) bool {
	if key == 0 {
		return false // not bound: no key, or given back before its record was bound
	}
	if !queued {
		if ks := s.keys.byKey.forgetLight(key); ks != nil {
			s.settledHolderLocked(off, key, ks, fx)
		} // else its key, held by this lease alone, went with it
		return true
	}
	ks, _ := s.keys.stateOf(key)
	ks.holders--
	ks.queue(off, now)
	s.keys.of.set(off, key)
	s.freeKeyLocked(key, ks, fx)
	return true
}

// settledHolderLocked ends the hold on key ks of off's lease, settled, when the key has a
// state (byKey.forgetLight found one: the key held by more than this lease, or with records
// waiting).
func (s *Shard) settledHolderLocked(off int64, key uint64, ks *keyState, fx *effects) {
	ks.holders--
	s.settledKeyLocked(off, ks)
	s.freeKeyLocked(key, ks, fx)
}

// unqueueUnboundLocked forgets the queued offset off, leased again from its key's queue by a
// lease that is not bound: settled before its read bound it (a corrupt skip), or a requeued
// record delivered out of its key's order. The key's next records may go.
func (s *Shard) unqueueUnboundLocked(off int64, fx *effects) {
	key, ok := s.keys.of.get(off)
	if !ok {
		return
	}
	ks := s.keys.byKey.get(key) // queued: the key has its state
	ks.unqueue(off)
	s.keys.of.remove(off)
	s.freeKeyLocked(key, ks, fx)
}

// freeKeyLocked makes the key's lowest queued offset visible when no lease holds the key and
// that offset is deferred (a released or delayed one comes back by itself), and forgets a
// key with nothing left.
func (s *Shard) freeKeyLocked(key uint64, ks *keyState, fx *effects) {
	s.refillLocked(key, ks, fx)
	if ks.holders > 0 {
		return
	}
	if len(ks.queued) == 0 {
		if ks.parked || len(ks.quarantined) > 0 {
			return // a restored tail's key until its records are verified; a quarantined key
		}
		s.keys.byKey.delete(key)
		s.keys.recycle(ks)
		return
	}
	// The key's next records are made visible together, so that one consume may take them
	// in one batch (one at a time, a hot key's backlog would go one record a consume), as
	// many as its last holder's consume could take (a consume of one record at a time takes
	// one: the others would go to other consumes, which would read them and defer them
	// again). Up to a delayed one, which the later ones wait behind; released ones are
	// visible already.
	run := keyReleaseRun
	if ks.room > 0 {
		run = min(run, ks.room)
	}
	// The run's records leave the acked-ahead runs lowest first: the lowest parked offset
	// is searched for once, after them (each search walks the key's queue from its front,
	// past the records released before it).
	x := s.keys
	x.holdParkedLow = true
	for _, off := range ks.queued[:min(len(ks.queued), run)] {
		p, ok := s.pending.get(off)
		if !ok || p.delayed || ks.spilledBelow(off) {
			break // (a spilled record may lie below: see spill.go)
		}
		if p.deferred {
			if !s.readBelow(off) {
				break // verified after a restore, above holes not read yet: see releaseAwaitingLocked
			}
			s.undeferLocked(off, &p, ks)
			s.releaseLocked(off, p, fx)
		}
	}
	x.holdParkedLow = false
	if x.parkedLowStale {
		x.parkedLowStale = false
		x.parkedLow = s.lowestParkedLocked()
	}
}

// keyReleaseRun is the most of a key's deferred records a free makes visible at once: a
// batch's worth. A consume that takes the first binds the consecutive ones it finds with it;
// another consume that takes one of the rest defers it again (one read more).
const keyReleaseRun = 32

// heldKey is a live lease's offset and the key it holds.
type heldKey struct {
	off int64
	key uint64
}

// forgetKeysThroughLocked drops what the index knows at or below frontier (a jump took those
// offsets, and the leases of held), freeing the keys they held.
func (s *Shard) forgetKeysThroughLocked(frontier int64, held []heldKey, fx *effects) {
	touched := map[uint64]*keyState{}
	for _, h := range held {
		ks, _ := s.keys.stateOf(h.key)
		ks.holders--
		touched[h.key] = ks
	}
	for off, key := range s.keys.of.all {
		if off > frontier {
			continue
		}
		ks, _ := s.keys.stateOf(key)
		ks.unqueue(off)
		s.keys.of.remove(off)
		touched[key] = ks
	}
	x := s.keys
	x.deferred, x.parkedOffsets = 0, 0
	for _, ks := range x.byKey.all() {
		ks.deferred, ks.parkedOffsets = 0, 0
		for _, off := range ks.queued {
			p := s.pending.lookup(off)
			if p.deferred {
				ks.deferred++
			}
			if p.parked() {
				ks.parkedOffsets++
			}
		}
		x.deferred += ks.deferred
		x.parkedOffsets += ks.parkedOffsets
		if ks.parked {
			if ks.restored && ks.restoredFrom <= frontier {
				ks.restoredFrom = frontier + 1 // the jump took the tail's lower records
			}
			x.spilled -= ks.spilled.dropThrough(frontier) // the jump took them
			if !ks.keepsSlot() {
				s.unparkKeyLocked(ks)
			}
		}
	}
	if x.verifying {
		x.verifyNext = max(x.verifyNext, frontier+1)
	}
	x.parkedLow = s.lowestParkedLocked()
	for key, ks := range touched {
		s.freeKeyLocked(key, ks, fx)
	}
}

// orderLocked makes the key index follow Config.Ordered: a topic made ordered starts an
// empty index (the leases live then hold no key: order holds from the records bound after),
// and one made unordered releases every deferred record, with a wake.
func (s *Shard) orderLocked(fx *effects) {
	defer func() {
		s.ordered.Store(s.keys != nil)
		s.syncVerifyingLocked()
	}()
	switch {
	case s.cfg.Ordered && s.keys == nil:
		s.keys = newKeyIndex()
		// Nothing is parked below an ack the index does not know of: acked before, or of a
		// lease live now, which holds no key of it (one a move brought lies above the cursor,
		// at most pendingAbove).
		s.keys.parkFrom = max(s.cursor, s.settledAbove+1, s.pendingAbove+1)
	case !s.cfg.Ordered && s.keys != nil && !s.keys.verifying:
		// (While a restore's key tails are verified, the index stays: the runs hold records
		// only it can tell from acked ones.)
		for key, ks := range s.keys.byKey.all() {
			s.refillLocked(key, ks, fx) // every spilled record, the topic being unordered
			for _, off := range ks.queued {
				if p, ok := s.pending.get(off); ok && p.deferred {
					s.undeferLocked(off, &p, ks)
					s.releaseLocked(off, p, fx)
				}
			}
		}
		// The live leases hold no key any more: none may free one of a later index.
		var held []int64
		for off, p := range s.pending.all {
			if p.key != 0 {
				held = append(held, off)
			}
		}
		for _, off := range held {
			p := s.pending.lookup(off)
			p.key = 0
			s.pending.set(off, p)
		}
		s.keys = nil
	}
}

// stateOf returns key's state, made if it has none, and whether the index knew the key.
func (x *keyIndex) stateOf(key uint64) (ks *keyState, known bool) {
	slot, known := x.byKey.slotFor(key)
	return x.fullState(slot), known
}

// fullState returns the state of slot's key, made (a spare one if there is one) if it has
// none: a key held by one lease alone gets a state that says so, for what comes next to add
// to it (a second lease, a queued offset, a quarantined record).
func (x *keyIndex) fullState(slot *keySlot) *keyState {
	if slot.state != nil {
		return slot.state
	}
	var ks *keyState
	if n := len(x.spare); n > 0 {
		ks = x.spare[n-1]
		x.spare = x.spare[:n-1]
	} else {
		ks = &keyState{ackedHigh: -1, boundHigh: -1}
	}
	if slot.holding != 0 {
		ks.holders, ks.holding, ks.boundHigh, ks.room = 1, slot.holding, slot.held, slot.room
		slot.holding, slot.held, slot.room = 0, 0, 0
	}
	slot.state = ks
	return ks
}

// recycle keeps the state of a key just forgotten for newState, a bounded number of them.
func (x *keyIndex) recycle(ks *keyState) {
	if len(x.spare) < 1024 {
		*ks = keyState{queued: ks.queued[:0], ackedHigh: -1, boundHigh: -1, spilled: spillSet{words: ks.spilled.words[:0]}}
		x.spare = append(x.spare, ks)
	}
}

// queue adds off to the key's queued offsets, in order.
func (ks *keyState) queue(off int64, now int64) {
	if len(ks.queued) == 0 {
		ks.blockedSince = now
	}
	ks.queued = insertSorted(ks.queued, off)
}

// unqueue removes off from the key's queued offsets.
func (ks *keyState) unqueue(off int64) {
	if len(ks.queued) > 0 && ks.queued[0] == off {
		ks.queued = ks.queued[1:] // the head, the usual case: no copy of a long queue
		return
	}
	ks.queued, _ = deleteSorted(ks.queued, off)
}

// insertSorted inserts off into the ascending offs, unless it holds it already.
func insertSorted(offs []int64, off int64) []int64 {
	if i, found := slices.BinarySearch(offs, off); !found {
		offs = slices.Insert(offs, i, off)
	}
	return offs
}

// deleteSorted deletes off from the ascending offs, and reports whether it held it.
func deleteSorted(offs []int64, off int64) ([]int64, bool) {
	i, found := slices.BinarySearch(offs, off)
	if found {
		offs = slices.Delete(offs, i, i+1)
	}
	return offs, found
}

// KeyStats is what Stats reports of an ordered partition's keys.
type KeyStats struct {
	// HeldKeys is how many keys live leases hold.
	HeldKeys int
	// BlockedKeys is how many keys have records waiting behind a holder, a delay or a
	// record to be delivered again first.
	BlockedKeys int
	// Deferred is how many records wait behind their keys, read once and neither leased nor
	// visible (at most Config.MaxDeferred, plus one batch).
	Deferred int
	// ParkedKeys is how many keys have their deferred records parked in the acked-ahead runs
	// (at most MaxKeyTails), and Parked how many records that is (in memory: not counting
	// the spilled ones).
	ParkedKeys, Parked int
	// SpilledKeys is how many parked keys have records spilled past
	// Config.MaxDeferredPerKey (a bit each, rather than an entry), and Spilled how many
	// records that is: deferred records, not counted in Deferred.
	SpilledKeys, Spilled int
	// QuarantinedKeys is how many keys are quarantined with a record of theirs
	// (Config.QuarantineKeys): their later records follow it into the quarantine.
	QuarantinedKeys int
	// OldestBlockedSince is when the key blocked longest began to be blocked; zero when none.
	OldestBlockedSince time.Time
}

// keyStatsLocked counts the key index for Stats.
func (s *Shard) keyStatsLocked() KeyStats {
	var st KeyStats
	if s.keys == nil {
		return st
	}
	st.Deferred = s.keys.deferred
	st.ParkedKeys, st.Parked = len(s.keys.parked), s.keys.parkedOffsets
	st.Spilled = s.keys.spilled
	st.HeldKeys = s.keys.byKey.lightKeys()
	oldest := int64(0)
	for _, ks := range s.keys.byKey.all() {
		if ks.holders > 0 {
			st.HeldKeys++
		}
		if len(ks.quarantined) > 0 {
			st.QuarantinedKeys++
		}
		if ks.spilled.count > 0 {
			st.SpilledKeys++
		}
		if len(ks.queued) > 0 {
			st.BlockedKeys++
			if oldest == 0 || ks.blockedSince < oldest {
				oldest = ks.blockedSince
			}
		}
	}
	if oldest != 0 {
		st.OldestBlockedSince = time.Unix(0, oldest)
	}
	return st
}
