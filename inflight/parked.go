package inflight

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// MaxKeyTails is the most keys whose deferred records an ordered partition parks in its
// acked-ahead runs (State.KeyTails): what one persisted record holds beside the runs.
const MaxKeyTails = 32

// A key blocked for long (its holder hung, or its head record backing off) defers every later
// record of it, each a hole below the acks of the other keys: the acked-ahead runs would split
// into one run per record, and at MaxAckedAheadRuns the whole partition would stall behind one
// key. So the deferred records of up to MaxKeyTails keys are parked: kept inside the runs, as
// if acked, and named by one (key, lowest parked offset) pair each in what is persisted. The
// frontier stops below the lowest parked offset (a parked record is unsettled), and a parked
// record made visible leaves the runs again. A key parks at a deferral while fewer than
// MaxKeyTails keys are parked, and unparks when it has no parked record left; the records of
// a key deferred while every slot was taken stay holes, as before.
//
// A shard restored from a state with key tails does not know which records of the runs above
// the lowest tail belong to the tails' keys until it reads them: until Verify has seen them
// all (Unverified lists them), it hands out nothing at or above them, and the frontier stays
// below them. A verified record of a tail's key is deferred and parked again; any other is
// acked. Since a key's records below the ones the scan has not passed may still be unread
// holes, a verified record is made visible only once every record below it has been read.

// parkedKey is a key whose deferred records are parked.
type parkedKey struct {
	key   uint64
	state *keyState
}

// parkLocked parks the deferred offset off of key ks, parking the key first if a slot is free.
// A record below an acked record of its key is not parked (a tail names the key's records
// from its lowest parked one: an acked one above would look unsettled after a restart): one
// of a batch, given back while the batch held the key, or one below what the index knows of
// (keyIndex.parkFrom); nor a requeued one, back from the quarantine below records of its key
// acked meanwhile, which the index may have forgotten with the key.
func (s *Shard) parkLocked(off int64, key uint64, ks *keyState) {
	x := s.keys
	// (Nor one at or below the frontier: a requeued record, deferred behind its key under
	// Config.QuarantineKeys, is no hole under the runs.)
	floor := max(ks.ackedHigh+1, x.parkFrom, s.frontier+1)
	if !ks.parked {
		if len(x.parked) >= MaxKeyTails {
			return
		}
		ks.parked = true
		x.parked = append(x.parked, parkedKey{key, ks})
		for _, q := range ks.queued {
			if p := s.pending.lookup(q); q != off && p.deferred && q >= floor && p.reason != ReasonRequeued {
				s.parkOffsetLocked(q, p, ks)
			}
		}
	}
	if p := s.pending.lookup(off); off >= floor && p.reason != ReasonRequeued {
		s.parkOffsetLocked(off, p, ks)
	}
	if !ks.keepsSlot() {
		s.unparkKeyLocked(ks) // nothing of it could park: the slot is another key's to take
	}
}

// parkOffsetLocked puts the deferred offset off (p its entry), unsettled, into the acked-ahead
// runs.
func (s *Shard) parkOffsetLocked(off int64, p pending, ks *keyState) {
	p.setParked(true)
	ks.parkedOffsets++
	s.pending.set(off, p)
	s.ahead.insert(off)
	s.settledAbove = max(s.settledAbove, off)
	x := s.keys
	x.parkedOffsets++
	x.parkedLow = min(x.parkedLow, off)
	s.checkCapLocked()
}

// parkEntryLocked makes off, an offset of the acked-ahead runs that is a record of key ks
// (p its entry, with what it remembers), a deferred, parked entry queued behind the key (a
// restore's verified record, a spilled one brought back), and returns the entry stored.
func (s *Shard) parkEntryLocked(off int64, p pending, key uint64, ks *keyState, now int64) pending {
	x := s.keys
	p.deferred = true
	p.setParked(true)
	s.pending.set(off, p)
	// Above the cursor, possibly (a restore): a reserve that reaches it once it leaves the
	// runs (unparked as a hole) must look it up.
	s.pendingAbove = max(s.pendingAbove, off)
	x.deferred++
	ks.deferred++
	ks.parkedOffsets++
	ks.queue(off, now)
	x.of.set(off, key)
	x.parkedOffsets++
	x.parkedLow = min(x.parkedLow, off)
	return p
}

// undeferLocked ends the deferral of off, a deferred offset of key ks (p is its entry), taking
// it out of the runs if it was parked there. The caller stores p.
func (s *Shard) undeferLocked(off int64, p *pending, ks *keyState) {
	if p.parked() {
		s.unparkOffsetLocked(off, p, ks)
	}
	p.deferred = false
	s.keys.deferred--
	ks.deferred--
}

// unparkOffsetLocked takes the parked offset off (p its entry, which the caller stores) out of
// the acked-ahead runs, and frees the key's slot once nothing of it is parked.
func (s *Shard) unparkOffsetLocked(off int64, p *pending, ks *keyState) {
	p.setParked(false)
	s.ahead.delete(off)
	x := s.keys
	x.parkedOffsets--
	ks.parkedOffsets--
	if !ks.keepsSlot() {
		s.unparkKeyLocked(ks)
	}
	if off == x.parkedLow {
		s.pending.set(off, *p) // no longer parked, for the search
		if x.holdParkedLow {
			x.parkedLowStale = true // the caller searches once it is done (freeKeyLocked)
		} else {
			x.parkedLow = s.lowestParkedLocked()
		}
	}
	s.checkCapLocked()
}

// settledKeyLocked notes that a record of key ks at off was settled by its holder: parked
// records of the key below it leave the runs (see parkLocked), as holes.
func (s *Shard) settledKeyLocked(off int64, ks *keyState) {
	ks.ackedHigh = max(ks.ackedHigh, off)
	s.unparkThroughLocked(ks, off)
}

// unparkThroughLocked takes the parked records of key ks at or below off out of the runs, as
// holes.
func (s *Shard) unparkThroughLocked(ks *keyState, off int64) {
	if ks.parkedOffsets == 0 {
		return
	}
	for _, q := range ks.queued {
		if q > off {
			break
		}
		if p := s.pending.lookup(q); p.parked() {
			s.unparkOffsetLocked(q, &p, ks)
			s.pending.set(q, p)
		}
	}
}

// unparkBelowLocked takes every parked record below off out of the runs, as holes, the spilled
// ones brought back as entries first: off, of a key the index may not know (a quarantined
// record discarded, perhaps never read), is about to join the runs, and a tail below it of its
// key would take it for parked after a restart.
func (s *Shard) unparkBelowLocked(off int64, fx *effects) {
	if off <= s.keys.parkedLow {
		return
	}
	for _, pk := range slices.Clone(s.keys.parked) {
		for ks := pk.state; ks.spilled.count > 0 && ks.spilled.low < off; {
			s.unspillLowLocked(pk.key, ks, fx)
		}
		s.unparkThroughLocked(pk.state, off)
	}
}

// unparkKeyLocked frees the key's parking slot: it has no parked record left.
func (s *Shard) unparkKeyLocked(ks *keyState) {
	ks.parked = false
	x := s.keys
	x.parked = slices.DeleteFunc(x.parked, func(p parkedKey) bool { return p.state == ks })
}

// lowestParkedLocked returns the lowest parked offset, math.MaxInt64 when none.
func (s *Shard) lowestParkedLocked() int64 {
	low := int64(math.MaxInt64)
	for _, pk := range s.keys.parked {
		if off, ok := s.lowestQueuedLocked(pk.state, true); ok {
			low = min(low, off)
		}
		if pk.state.spilled.count > 0 {
			low = min(low, pk.state.spilled.low)
		}
	}
	return low
}

// lowestQueuedLocked returns the key's lowest deferred offset, or its lowest parked one.
func (s *Shard) lowestQueuedLocked(ks *keyState, parked bool) (int64, bool) {
	if ks.deferred == 0 || (parked && ks.parkedOffsets == 0) {
		return 0, false
	}
	for _, off := range ks.queued {
		if p := s.pending.lookup(off); p.deferred && (p.parked() || !parked) {
			return off, true
		}
	}
	return 0, false
}

// parkedFloor returns the lowest offset of the acked-ahead runs that may be unsettled: the
// lowest parked one, or the lowest not verified yet after a restore. The frontier stays below
// it; math.MaxInt64 when nothing is parked.
func (x *keyIndex) parkedFloor() int64 {
	if x.verifying {
		return min(x.parkedLow, x.verifyNext)
	}
	return x.parkedLow
}

// parkedAt reports whether off, an offset of the acked-ahead runs, is unsettled: parked, or
// not verified yet.
func (s *Shard) parkedAt(off int64) bool {
	x := s.keys
	if off < x.parkedFloor() {
		return false
	}
	return (x.verifying && off >= x.verifyNext) || s.pending.lookup(off).parked() || s.spilledAt(off)
}

// unverifiedAt reports whether off lies at or above the lowest offset a restore's key tails
// left to verify.
func (s *Shard) unverifiedAt(off int64) bool {
	return s.keys != nil && s.keys.verifying && off >= s.keys.verifyNext
}

// settledAheadLocked notes an offset just settled into the acked-ahead runs (an ack, a
// discard): one a restore's tails leave to verify is acked, whatever its key.
func (s *Shard) settledAheadLocked(off int64) {
	if s.unverifiedAt(off) {
		if s.keys.settledUnverified == nil {
			s.keys.settledUnverified = map[int64]struct{}{}
		}
		s.keys.settledUnverified[off] = struct{}{}
	}
}

// restoreTailsLocked installs the key tails of a restored state: each tail's key parks (its
// slot taken until Verify has seen the runs), and the runs above the lowest tail wait to be
// verified.
func (s *Shard) restoreTailsLocked(tails []KeyTail) {
	x := s.keys
	for _, t := range tails {
		if t.Key == 0 || t.From <= s.frontier || len(x.parked) >= MaxKeyTails {
			continue
		}
		ks, _ := x.stateOf(t.Key)
		if ks.parked {
			ks.restoredFrom = min(ks.restoredFrom, t.From)
			continue
		}
		ks.parked, ks.restored, ks.restoredFrom = true, true, t.From
		x.parked = append(x.parked, parkedKey{t.Key, ks})
		if !x.verifying || t.From < x.verifyNext {
			x.verifying, x.verifyNext = true, t.From
			s.verifying.Store(true)
		}
	}
}

// Verifying reports whether the shard was restored with key tails (State.KeyTails) that its
// scans have not verified yet: a caller lists the offsets to verify (Unverified), reads their
// records and tells the shard their keys (Verify), under ScanLock, before it reserves. Until
// then a reserve hands out nothing at or above them (ErrUnverified). A state a move brought,
// whose live leases may be settled here, is verified before they can be: a record settled
// before it is verified would be taken for a parked one by a later restore. Under
// Config.QuarantineKeys a shard also learns the keys of the quarantined records it holds
// (restored, or quarantined before they were read) the same way, before it hands out anything.
func (s *Shard) Verifying() bool { return s.verifying.Load() }

// Unverified appends to into, ascending, up to max offsets whose records the shard must learn
// the keys of (Verify) before it hands out anything at or above them: the offsets of the
// acked-ahead runs at or above the lowest restored key tail not verified yet; before those,
// under Config.QuarantineKeys, the quarantined and requeued offsets whose keys the shard does
// not know (never in one call with the runs'). It appends nothing when there is nothing
// (left) to verify.
func (s *Shard) Unverified(into []int64, max int) []int64 {
	var fx effects
	s.mu.Lock()
	into = s.unverifiedLocked(into, max, &fx)
	s.mu.Unlock()
	s.report(&fx)
	return into
}

func (s *Shard) unverifiedLocked(into []int64, limit int, fx *effects) []int64 {
	x := s.keys
	if x != nil && len(x.unkeyed) > 0 {
		// The quarantined records' keys first (quarantinedkeys.go), in a list of their own.
		return append(into, x.unkeyed[:min(len(x.unkeyed), limit)]...)
	}
	if x == nil || !x.verifying {
		return into
	}
	from := len(into)
	for off := max(x.verifyNext, s.frontier+1); len(into)-from < limit; {
		r, ok := s.ahead.from(off)
		if !ok {
			break
		}
		for o := max(r.First, off); o <= r.Last && len(into)-from < limit; o++ {
			into = append(into, o)
		}
		off = r.Last + 1
	}
	if len(into) == from {
		s.verifiedLocked(fx)
	}
	return into
}

// Verify tells the shard the keys of offsets Unverified listed (keys[i] is KeyOf of
// offsets[i]'s record key, 0 for a record without a key or one that cannot be read): a record
// of a restored tail's key at or above its tail is deferred and parked again; any other is
// acked; a quarantined record's key is quarantined with it (Config.QuarantineKeys), a requeued
// one's waits for it. Offsets must ascend; one not listed (already verified, or not in the
// runs) is passed over. Once every listed offset is verified the shard serves as before the
// restore.
func (s *Shard) Verify(now time.Time, offsets []int64, keys []uint64) {
	var fx effects
	s.mu.Lock()
	x := s.keys
	at := now.UnixNano()
	if x != nil && len(x.unkeyed) > 0 {
		for i, off := range offsets {
			s.learnQuarantinedKeyLocked(off, keys[i], at, &fx)
		}
		s.syncVerifyingLocked()
	} else if x != nil && x.verifying {
		for i, off := range offsets {
			if off < x.verifyNext || off <= s.frontier || !s.ahead.contains(off) {
				continue
			}
			x.verifyNext = off + 1
			if _, acked := x.settledUnverified[off]; acked {
				delete(x.settledUnverified, off)
				continue
			}
			ks := x.byKey.get(keys[i])
			if keys[i] == 0 || ks == nil || !ks.restored || off < ks.restoredFrom {
				s.pending.remove(off) // acked: the attempts Restore brought for it are moot
				continue
			}
			if len(x.settledUnverified) == 0 && s.spillVerifiedLocked(off, ks, &fx) {
				continue
			}
			p := s.parkEntryLocked(off, s.pending.lookup(off), keys[i], ks, at)
			if len(x.settledUnverified) > 0 {
				// Below a record settled into the runs while the shard was unverified (every
				// one left lies above: Verify passes them in order), whose key may be this
				// one (a discard of a quarantined record it never read): a tail from here
				// would take that record for parked after the next restart or move.
				// Deferred all the same, but out of the runs, as a hole.
				s.unparkOffsetLocked(off, &p, ks)
				s.pending.set(off, p)
			}
		}
		s.verifiedIfDoneLocked(&fx)
	}
	s.mu.Unlock()
	s.report(&fx)
}

// verifiedIfDoneLocked ends a restore's verification once the runs hold no record left to
// verify.
func (s *Shard) verifiedIfDoneLocked(fx *effects) {
	if !s.aheadFrom(max(s.keys.verifyNext, s.frontier+1)) {
		s.verifiedLocked(fx)
	}
}

// verifiedLocked ends a restore's verification: the tails' keys keep their slots while they
// have parked records, each waiting for the cursor to pass its lowest one (see
// releaseAwaitingLocked), and the frontier moves over what was verified as acked.
func (s *Shard) verifiedLocked(fx *effects) {
	x := s.keys
	x.verifying = false
	x.settledUnverified = nil
	s.syncVerifyingLocked()
	for _, pk := range slices.Clone(x.parked) {
		pk.state.restored = false
		if !pk.state.keepsSlot() {
			s.unparkKeyLocked(pk.state)
			if _, deferred := s.lowestQueuedLocked(pk.state, false); !deferred {
				s.freeKeyLocked(pk.key, pk.state, fx) // forgotten, unless it holds or queues
				continue
			}
			// Records Verify deferred out of the runs (below a record settled while the shard
			// was unverified): they wait for the cursor as parked ones do.
		}
		x.awaiting = append(x.awaiting, pk)
	}
	s.releaseAwaitingLocked(fx)
	s.advanceDirtyLocked(fx)
	if !s.cfg.Ordered {
		s.orderLocked(fx) // ordered only until the tails were verified
	}
}

// releaseAwaitingLocked makes visible, for each verified key with no holder whose lowest
// deferred record has no unread record below it (readBelow), its next records (freeKeyLocked
// releases only those), and forgets the keys with nothing deferred, or nothing the cursor has
// not passed.
func (s *Shard) releaseAwaitingLocked(fx *effects) {
	x := s.keys
	x.awaiting = slices.DeleteFunc(x.awaiting, func(pk parkedKey) bool {
		low, ok := s.lowestQueuedLocked(pk.state, false)
		if !ok && pk.state.spilled.count == 0 {
			return true
		}
		if !ok || s.readBelow(low) {
			s.freeKeyLocked(pk.key, pk.state, fx) // (spilled records come back first)
		}
		// Kept until the cursor has passed every record of the key: readBelow can turn
		// false again (a record unparked below the cursor's run), and then only this call
		// frees the key once the cursor moves on. Past that, the key is as any other.
		ks := pk.state
		return (len(ks.queued) == 0 || ks.queued[len(ks.queued)-1] < s.cursor) && (ks.spilled.count == 0 || ks.spilled.high < s.cursor)
	})
}

// readBelow reports whether every record below off, an offset the shard read or verified, has
// been read: the cursor reached off, or everything from the cursor up to off lies in the
// acked-ahead runs (acked, or parked and verified).
func (s *Shard) readBelow(off int64) bool {
	if off <= s.cursor {
		return true
	}
	r, ok := s.ahead.runAt(s.cursor)
	return ok && r.Last >= off-1
}

// keyTailsLocked appends the parked keys' tails to dst, ascending by From.
func (s *Shard) keyTailsLocked(dst []KeyTail) []KeyTail {
	dst = dst[:0]
	if s.keys == nil {
		return dst
	}
	for _, pk := range s.keys.parked {
		from, ok := s.lowestQueuedLocked(pk.state, true)
		if r := pk.state.restoredFrom; pk.state.restored && (!ok || r < from) {
			from, ok = r, true
		}
		if r := pk.state.spilled.low; pk.state.spilled.count > 0 && (!ok || r < from) {
			from, ok = r, true
		}
		if ok {
			dst = append(dst, KeyTail{Key: pk.key, From: from})
		}
	}
	slices.SortFunc(dst, func(a, b KeyTail) int { return cmp.Compare(a.From, b.From) })
	return dst
}
