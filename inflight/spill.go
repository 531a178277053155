package inflight

import "math/bits"

// A key blocked for long with a steady share of the records (a hot key whose one holder at a
// time cannot keep up, or a key whose holder hangs) defers every later record of it: each kept
// as an entry, a queue slot and an index entry (about 70 bytes), they would reach MaxDeferred,
// and the whole partition would hand out nothing new until the key caught up. So a parked key
// keeps at most Config.MaxDeferredPerKey deferred records that way; the ones the scan defers
// past that bound are spilled: kept in the acked-ahead runs, parked as the others, and named
// by one bit each in a bitmap over the span they lie in (spillSet), with no entry of their
// own. Once the key's deferred records run low (half the bound), the lowest spilled ones come
// back as entries, in order, with no read: the shard knows they are the key's. The key's tail
// names the spilled records in what is persisted, as it names the parked ones, and a restore
// spills again past the bound as it verifies them.
//
// The bitmap is bounded by the span, and the span by the acked-ahead runs it lies in
// (MaxAckedAhead, at most MaxAckedAheadCeiling offsets: 128 KiB a key at worst).
//
// Spilled records lie above every record of the key ever bound (keyState.boundHigh): an ack
// of the key never lands above one (which a restart's tail would take for spilled). A discard
// of a record whose key the index may not know (quarantined unread) may: the spilled records
// below it come back as entries first, and leave the runs as the parked ones do
// (unparkBelowLocked).
//
// Order holds because a spilled record is never handed out from the bitmap: every record of
// the key above its lowest spilled one waits (Bind defers it, freeKeyLocked releases nothing
// from there) until it came back. Only a record with no attempt counted spills (a first lease,
// or a reservation never handed over, withdrawn by Bind), so a spilled record has no attempts
// to remember; a settle naming one answers ErrGone, as for any record without a live lease.

// spillSet is the offsets a key spilled, ascending: a bitmap from base, a multiple of 64.
type spillSet struct {
	base  int64
	words []uint64
	count int
	// low and high are the lowest and highest offsets in the set, when count > 0.
	low, high int64
}

// add adds off, which must lie above every offset in the set (a scan's deferrals, and a
// restore's verification, come in ascending order).
func (b *spillSet) add(off int64) {
	if b.count == 0 {
		b.base, b.words, b.low = off&^63, b.words[:0], off
	}
	i := int((off - b.base) >> 6)
	for len(b.words) <= i {
		b.words = append(b.words, 0)
	}
	b.words[i] |= 1 << (off & 63)
	b.count++
	b.high = off
}

// contains reports whether off is in the set.
func (b *spillSet) contains(off int64) bool {
	if b.count == 0 || off < b.low || off > b.high {
		return false
	}
	return b.words[(off-b.base)>>6]&(1<<(off&63)) != 0
}

// popLow removes and returns the lowest offset of a set that is not empty.
func (b *spillSet) popLow() int64 {
	off := b.low
	b.words[(off-b.base)>>6] &^= 1 << (off & 63)
	b.count--
	b.seekLow(off + 1)
	return off
}

// dropThrough removes the offsets at or below off, and returns how many there were.
func (b *spillSet) dropThrough(off int64) int {
	dropped := 0
	for b.count > 0 && b.low <= off {
		b.popLow()
		dropped++
	}
	return dropped
}

// seekLow sets low to the lowest offset at or above from (the set holds nothing below it),
// and gives back the words wholly below it once they are half the bitmap.
func (b *spillSet) seekLow(from int64) {
	if b.count == 0 {
		b.words = b.words[:0]
		return
	}
	i := int((from - b.base) >> 6)
	w := b.words[i] &^ (1<<(from&63) - 1)
	for w == 0 {
		i++
		w = b.words[i]
	}
	b.low = b.base + int64(i)<<6 + int64(bits.TrailingZeros64(w))
	if i > len(b.words)/2 {
		b.words = b.words[:copy(b.words, b.words[i:])]
		b.base += int64(i) << 6
	}
}

// spillLocked spills the deferred offset off of key ks (p, its entry, whose lease Bind has
// just withdrawn), if the key is parked, the record has no attempt counted, and the key
// keeps as many deferred records as the bound allows or spills already; it reports whether it
// did. A spill begins only above every record of the key that waits.
func (s *Shard) spillLocked(off int64, p pending, ks *keyState, fx *effects) bool {
	if !ks.parked || p.attempts != 0 || p.reason != ReasonFirst || p.delayed {
		return false
	}
	if off <= ks.boundHigh || off < max(s.keys.parkFrom, s.frontier+1) {
		return false // below a record of the key bound before, or not parkable (see parkLocked)
	}
	if !s.spillsAt(ks, off) || ks.spilled.count == 0 && len(ks.queued) > 0 && ks.queued[len(ks.queued)-1] > off {
		return false
	}
	s.pending.remove(off)
	s.ahead.insert(off)
	s.settledAbove = max(s.settledAbove, off)
	s.checkCapLocked()
	s.addSpilledLocked(ks, off)
	fx.spilled++
	return true
}

// spillsAt reports whether key ks's deferral of off goes past its bound: the key spills
// already (and off lies above its spilled records), or keeps as many entries as the bound.
func (s *Shard) spillsAt(ks *keyState, off int64) bool {
	if ks.spilled.count > 0 {
		return off > ks.spilled.high
	}
	return ks.deferred >= s.cfg.MaxDeferredPerKey
}

// addSpilledLocked adds off, a record of key ks in the acked-ahead runs with no entry, to the
// key's spilled records.
func (s *Shard) addSpilledLocked(ks *keyState, off int64) {
	ks.spilled.add(off)
	s.keys.spilled++
	s.keys.parkedLow = min(s.keys.parkedLow, ks.spilled.low)
}

// spillVerifiedLocked spills off, a record of the restored tail of key ks that Verify just
// found, when the key keeps as many deferred records as the bound allows or spills already,
// and the restore brought no attempts for it; it reports whether it did.
func (s *Shard) spillVerifiedLocked(off int64, ks *keyState, fx *effects) bool {
	if p, ok := s.pending.get(off); ok && (p.attempts != 0 || p.nonce != 0 || p.deferred) {
		return false
	}
	if !s.spillsAt(ks, off) || off <= max(ks.boundHigh, s.keys.heldHigh) {
		return false
	}
	s.pending.remove(off) // acked, as far as the entries tell: the bitmap names it
	s.addSpilledLocked(ks, off)
	fx.spilled++
	return true
}

// spilledAt reports whether off, an offset of the acked-ahead runs, is a spilled record.
func (s *Shard) spilledAt(off int64) bool {
	if s.keys.spilled == 0 {
		return false
	}
	for _, pk := range s.keys.parked {
		if pk.state.spilled.contains(off) {
			return true
		}
	}
	return false
}

// spilledBelow reports whether a spilled record of key ks lies below off: off waits for it.
func (ks *keyState) spilledBelow(off int64) bool {
	return ks.spilled.count > 0 && ks.spilled.low < off
}

// refillLocked brings the lowest spilled records of key ks back as deferred, parked entries,
// in order, once fewer than half the bound wait as entries (or all of them, when the topic is
// no longer ordered: their deferral is about to end), and always the key's next record. The
// key has been blocked since its records spilled: its blockedSince stands.
func (s *Shard) refillLocked(key uint64, ks *keyState, fx *effects) {
	// The key's next record is a spilled one (its entries all lie above: records that could
	// not spill, a restore's with attempts, say): it comes back whatever the bound, or the
	// entries, which wait for it, would never go.
	for ks.spilled.count > 0 && (len(ks.queued) == 0 || ks.spilled.low < ks.queued[0]) {
		s.unspillLowLocked(key, ks, fx)
	}
	if ks.spilled.count == 0 || (ks.deferred > s.cfg.MaxDeferredPerKey/2 && s.cfg.Ordered) {
		return
	}
	for ks.spilled.count > 0 && (ks.deferred < s.cfg.MaxDeferredPerKey || !s.cfg.Ordered) {
		s.unspillLowLocked(key, ks, fx)
	}
}

// unspillLowLocked makes the key's lowest spilled record a deferred, parked entry again, queued
// behind the key.
func (s *Shard) unspillLowLocked(key uint64, ks *keyState, fx *effects) {
	s.keys.spilled--
	s.parkEntryLocked(ks.spilled.popLow(), pending{}, key, ks, ks.blockedSince)
	fx.refilled++
}
