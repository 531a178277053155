package inflight

import (
	"iter"
	"math/bits"
	"math/rand/v2"
)

// keyTable maps the keys an ordered partition knows of (KeyOf identities, never 0) to their
// states. It is an open-addressed table with linear probing and backward-shift deletion: a
// key is usually held for one lease, so most binds insert and most settles delete, and a Go
// map's insert and delete were a fifth of an ordered consume's CPU at batch 100. Slots hash
// the key with a seed drawn per table, so that a producer choosing keys cannot make them
// collide into one long probe sequence.
type keyTable struct {
	slots []keySlot // power-of-two length, or nil when empty
	count int
	seed  uint64
	shift uint8 // 64 - log2(len(slots))
}

// keySlot is one slot: empty when key is 0.
type keySlot struct {
	key   uint64
	state *keyState
}

const (
	minKeyTable = 16
	// keyTableKept is the size a table keeps however few keys are left (16 KiB): the keys of
	// a batch come and go together, and a table that shrank as they went would grow again
	// for the next batch.
	keyTableKept = 1024
)

func (t *keyTable) home(key uint64) int {
	return int(((key ^ t.seed) * 0x9e3779b97f4a7c15) >> t.shift)
}

// get returns key's state, nil when it has none.
func (t *keyTable) get(key uint64) *keyState {
	if t.count == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		switch t.slots[i].key {
		case key:
			return t.slots[i].state
		case 0:
			return nil
		}
	}
}

// set makes ks key's state; key must not be 0.
func (t *keyTable) set(key uint64, ks *keyState) { t.slotFor(key).state = ks }

// slotFor returns key's slot, claimed for it with a nil state when key had none (the caller
// sets one before anything else looks at the table): a bind's lookup and insert in one probe.
// key must not be 0.
func (t *keyTable) slotFor(key uint64) *keySlot {
	if (t.count+1)*4 > len(t.slots)*3 {
		t.resize(max(minKeyTable, 2*len(t.slots)))
	}
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		switch s := &t.slots[i]; s.key {
		case key:
			return s
		case 0:
			s.key = key
			t.count++
			return s
		}
	}
}

// delete removes key's state, if it has one. The entries after it in its probe run move back
// over the hole, so that no lookup stops early and no tombstone is left.
func (t *keyTable) delete(key uint64) {
	if t.count == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.home(key)
	for ; t.slots[i].key != key; i = (i + 1) & mask {
		if t.slots[i].key == 0 {
			return
		}
	}
	for j := (i + 1) & mask; t.slots[j].key != 0; j = (j + 1) & mask {
		// The entry at j may move to the hole at i unless its home lies cyclically in (i, j]:
		// then a lookup from its home never passes i.
		if home := t.home(t.slots[j].key); (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = keySlot{}
	t.count--
	if n := len(t.slots); n > keyTableKept && t.count*8 < n {
		t.resize(n / 2) // a burst of keys gone: give the memory back
	}
}

// resize rehashes every entry into n slots (a power of two), with a fresh seed.
func (t *keyTable) resize(n int) {
	old := t.slots
	t.slots = make([]keySlot, n)
	t.shift = uint8(64 - bits.TrailingZeros(uint(n)))
	t.seed = rand.Uint64()
	t.count = 0
	for _, s := range old {
		if s.key != 0 {
			t.set(s.key, s.state)
		}
	}
}

// len returns how many keys have a state.
func (t *keyTable) len() int { return t.count }

// all yields every key and its state, in no particular order. The table must not change
// while it yields.
func (t *keyTable) all() iter.Seq2[uint64, *keyState] {
	return func(yield func(uint64, *keyState) bool) {
		for _, s := range t.slots {
			if s.key != 0 && !yield(s.key, s.state) {
				return
			}
		}
	}
}
