package inflight

import "math"

// leaseTable maps the offsets a shard has touched above its frontier to their pending state.
// A partition's leases are granted in offset order and mostly settled near it, so the live
// offsets fill a window only a little wider than the leases held: the table keeps each
// entry in a ring slot chosen by its offset (offset modulo the ring's length), where a
// lookup is one index and one comparison and an insert or removal touches one slot. An
// entry whose slot another offset holds goes to a map, far; the ring doubles (its entries
// and far's placed again) when that happens with the table over half full, so that a window
// of leases that outgrew it fits again. A Go map in its place cost a hash and a probe
// per operation, and a fifth of a batch's consume-and-ack.
//
// Invariant: an offset's entry is in its ring slot or in far, never in both.
//
// get and remove test the slot themselves rather than through a shared helper, which kept
// them inlinable into the shard's hot paths while the table was for pending states alone
// (through a helper, reserve → ack took 20% longer). Generic, they are not inlined any more:
// a call in a generic method's body goes through its dictionary, and their shape
// instantiation costs 110 to 140 against the inliner's budget of 80; each call costs 10 to
// 25 instructions at its site. ref, which calls nothing, is inlined.
type leaseTable = offsetTable[pending]

// offsetTable is the table, for entries of any type: a shard's pending states, and an
// ordered shard's keys (keyIndex).
type offsetTable[V any] struct {
	ring  []offsetSlot[V] // power-of-two length
	count int             // entries in ring
	far   map[int64]V
	// farMax bounds the offsets far holds from above (never lowered but by emptying far):
	// a lookup above it, the live window over a few old entries stuck in far (a hung lease,
	// a blocked key's records), pays no map access.
	farMax int64
	// farHit is the entry of farHitOff that far gave last, while farHitOK: a lease held for
	// long sits below the window, in far, at the head of the expiry queue, and every purge
	// looks it up again. Any write to far forgets it.
	farHitOff int64
	farHit    V
	farHitOK  bool
}

// offsetSlot is a ring slot: empty when off is vacant.
type offsetSlot[V any] struct {
	off int64
	p   V
}

// vacant is the offset of an empty slot; an entry for that offset itself lives in far.
const vacant = math.MinInt64

const (
	minLeaseRing = 16
	// maxLeaseRing bounds the ring's growth (at 48 bytes a slot, 3 MiB): the leases of a
	// window wider than that spill to far.
	maxLeaseRing = 1 << 16
)

// get returns off's entry, and whether there is one.
func (t *offsetTable[V]) get(off int64) (V, bool) {
	if len(t.ring) > 0 {
		if s := &t.ring[t.slot(off)]; s.off == off && off != vacant {
			return s.p, true
		}
	}
	if len(t.far) == 0 || off > t.farMax {
		var zero V
		return zero, false
	}
	return t.getFar(off)
}

// getFar returns off's entry in far, and whether there is one. It stays out of line, so that
// get and lookup stay small enough to be inlined.
//
//go:noinline
func (t *offsetTable[V]) getFar(off int64) (V, bool) {
	if t.farHitOK && off == t.farHitOff {
		return t.farHit, true
	}
	p, ok := t.far[off]
	if ok {
		t.farHitOff, t.farHit, t.farHitOK = off, p, true
	}
	return p, ok
}

// ref returns off's entry in its ring slot, where it usually is, for the caller to read or
// change in place until the table's next set (nil: off's entry is in far, or there is none;
// get tells which). With no call in it, it is inlined, where get, generic, is not.
func (t *offsetTable[V]) ref(off int64) *V {
	if len(t.ring) > 0 {
		if s := &t.ring[t.slot(off)]; s.off == off && off != vacant {
			return &s.p
		}
	}
	return nil
}

// lookup returns off's entry, or the zero value when there is none. It repeats get's
// lookups rather than call it, which keeps it small enough to be inlined.
func (t *offsetTable[V]) lookup(off int64) (p V) {
	if len(t.ring) > 0 {
		if s := &t.ring[t.slot(off)]; s.off == off && off != vacant {
			return s.p
		}
	}
	if len(t.far) > 0 && off <= t.farMax {
		p, _ = t.getFar(off)
	}
	return p
}

// set makes p off's entry.
func (t *offsetTable[V]) set(off int64, p V) {
	if len(t.ring) == 0 {
		t.resize(minLeaseRing)
	}
	s := &t.ring[t.slot(off)]
	switch {
	case s.off == off && off != vacant:
		s.p = p
		return
	case s.off == vacant && off != vacant:
		if len(t.far) > 0 && off <= t.farMax {
			if _, ok := t.far[off]; ok {
				t.far[off] = p
				t.farHitOK = false
				return
			}
		}
		s.off, s.p = off, p
		t.count++
		return
	}
	if _, ok := t.far[off]; !ok && off != vacant && 2*(t.len()+1) > len(t.ring) && len(t.ring) < maxLeaseRing {
		// Another offset holds the slot and the table is over half full: the window of
		// leases outgrew the ring. Double it, and place off again. (A collision in a ring
		// mostly empty is offsets far apart, as a lease stuck at the frontier and the
		// window far above it: one of them goes to far.)
		t.resize(2 * len(t.ring))
		t.set(off, p)
		return
	}
	if _, ok := t.far[off]; !ok && off != vacant && s.off < off {
		// The lower offset goes to far: the one stuck below the window, rarely touched,
		// while the window's offsets keep their slots (and farMax stays below them).
		t.setFar(s.off, s.p)
		s.off, s.p = off, p
		return
	}
	t.setFar(off, p)
}

// remove drops off's entry, if any.
func (t *offsetTable[V]) remove(off int64) {
	if len(t.ring) > 0 {
		if s := &t.ring[t.slot(off)]; s.off == off && off != vacant {
			var zero V
			s.off, s.p = vacant, zero
			t.count--
			return
		}
	}
	if len(t.far) > 0 && off <= t.farMax {
		delete(t.far, off)
		t.farHitOK = false
		if len(t.far) == 0 {
			t.farMax = vacant
		}
	}
}

// len returns the number of entries.
func (t *offsetTable[V]) len() int { return t.count + len(t.far) }

// reset drops every entry, keeping the ring's memory.
func (t *offsetTable[V]) reset() {
	for i := range t.ring {
		t.ring[i] = offsetSlot[V]{off: vacant}
	}
	t.count = 0
	clear(t.far)
	t.farMax, t.farHitOK = vacant, false
}

// all yields every entry, in no particular order. The caller may remove the entry it is
// given, and no other, and may not set any while it ranges.
func (t *offsetTable[V]) all(yield func(off int64, p V) bool) {
	for i := range t.ring {
		if s := &t.ring[i]; s.off != vacant {
			if !yield(s.off, s.p) {
				return
			}
		}
	}
	for off, p := range t.far {
		if !yield(off, p) {
			return
		}
	}
}

func (t *offsetTable[V]) slot(off int64) int { return int(uint64(off) & uint64(len(t.ring)-1)) }

// resize places every entry again in a ring of n slots: those whose slot is taken stay in
// (or go to) far.
func (t *offsetTable[V]) resize(n int) {
	old, far := t.ring, t.far
	t.ring, t.count, t.far, t.farMax, t.farHitOK = make([]offsetSlot[V], n), 0, nil, vacant, false
	for i := range t.ring {
		t.ring[i].off = vacant
	}
	for i := range old {
		if old[i].off != vacant {
			t.place(old[i].off, old[i].p)
		}
	}
	for off, p := range far {
		t.place(off, p)
	}
}

// place stores p as the entry of off, which has none: in its ring slot when that is empty,
// in far otherwise.
func (t *offsetTable[V]) place(off int64, p V) {
	if s := &t.ring[t.slot(off)]; s.off == vacant && off != vacant {
		s.off, s.p = off, p
		t.count++
		return
	}
	t.setFar(off, p)
}

// setFar makes p off's entry in far.
func (t *offsetTable[V]) setFar(off int64, p V) {
	if t.far == nil {
		t.far = make(map[int64]V)
	}
	if len(t.far) == 0 || off > t.farMax {
		t.farMax = off
	}
	t.far[off] = p
	t.farHitOK = false
}
