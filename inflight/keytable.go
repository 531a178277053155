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
	// lowDeletes counts the deletes since the table was last a quarter full or more (or
	// resized): it shrinks only once that reaches its size, so that keys that come and go
	// in waves (a partition's batches, taken and acked) never make it shrink at each ebb and
	// grow again at the next flood, rehashing its keys twice a wave.
	lowDeletes int
}

// keySlot is one slot: empty when key is 0. A key held by one lease and by nothing else (no
// queued offsets, nothing parked, spilled or quarantined: the usual key, bound at a read and
// forgotten at its ack) has no state: holding names the Bind call whose lease holds it and
// room how many records that call's consume could take (as keyState's fields do), and held
// is that lease's offset (the state's boundHigh). A bind and its settle then take no state,
// read it and give it back. Any other key has its state, and the other fields 0 (see
// keyIndex.fullState).
type keySlot struct {
	key     uint64
	holding uint64
	held    int64
	room    int
	state   *keyState
}

const (
	minKeyTable = 16
	// keyTableKept is the size a table keeps however few keys are left (40 KiB): the keys of
	// a batch come and go together, and a table that shrank as they went would grow again
	// for the next batch.
	keyTableKept = 1024
)

func (t *keyTable) home(key uint64) int {
	return int(((key ^ t.seed) * 0x9e3779b97f4a7c15) >> (t.shift & 63)) // (& 63: no test of a shift past 63)
}

// get returns key's state: nil when it has none (unknown, or held by one lease alone).
func (t *keyTable) get(key uint64) *keyState {
	if i, ok := t.find(key); ok {
		return t.slots[i].state
	}
	return nil
}

// find returns the index of key's slot, and whether it has one.
func (t *keyTable) find(key uint64) (int, bool) {
	if t.count == 0 {
		return 0, false
	}
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		switch t.slots[i].key {
		case key:
			return i, true
		case 0:
			return 0, false
		}
	}
}

// slotFor returns key's slot and whether key had one; one it had not is claimed for it, empty
// but for the key (the caller fills it before anything else looks at the table): a bind's
// lookup and insert in one probe. key must not be 0.
func (t *keyTable) slotFor(key uint64) (*keySlot, bool) {
	if (t.count+1)*4 > len(t.slots)*3 {
		t.resize(max(minKeyTable, 2*len(t.slots)))
	}
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		switch s := &t.slots[i]; s.key {
		case key:
			return s, true
		case 0:
			s.key = key
			t.count++
			return s, false
		}
	}
}

// delete removes key's slot, if it has one.
func (t *keyTable) delete(key uint64) {
	if i, ok := t.find(key); ok {
		t.deleteAt(i)
	}
}

// forgetLight ends the hold of a lease bound to key: a key held by that lease alone goes, in
// the probe that found it, and nil is returned; any other key's state is returned, for the
// caller to update.
func (t *keyTable) forgetLight(key uint64) *keyState {
	i, ok := t.find(key)
	if !ok {
		return nil
	}
	if ks := t.slots[i].state; ks != nil {
		return ks
	}
	t.deleteAt(i)
	return nil
}

// deleteAt empties slot i. The entries after it in its probe run move back over the hole, so
// that no lookup stops early and no tombstone is left.
func (t *keyTable) deleteAt(i int) {
	mask := len(t.slots) - 1
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
	n := len(t.slots)
	if t.count*4 >= n {
		t.lowDeletes = 0
		return
	}
	t.lowDeletes++
	if n > keyTableKept && t.count*8 < n && t.lowDeletes >= n {
		t.resize(n / 2) // a burst of keys long gone: give the memory back
	}
}

// resize rehashes every entry into n slots (a power of two), with a fresh seed.
func (t *keyTable) resize(n int) {
	old := t.slots
	t.slots = make([]keySlot, n)
	t.shift = uint8(64 - bits.TrailingZeros(uint(n)))
	t.seed = rand.Uint64()
	t.count, t.lowDeletes = 0, 0
	for _, s := range old {
		if s.key != 0 {
			slot, _ := t.slotFor(s.key)
			*slot = s
		}
	}
}

// len returns how many keys the table has.
func (t *keyTable) len() int { return t.count }

// all yields every key that has a state and its state (not the keys held by one lease alone),
// in no particular order. The table must not change while it yields.
func (t *keyTable) all() iter.Seq2[uint64, *keyState] {
	return func(yield func(uint64, *keyState) bool) {
		for _, s := range t.slots {
			if s.key != 0 && s.state != nil && !yield(s.key, s.state) {
				return
			}
		}
	}
}

// lightKeys returns how many keys are held by one lease alone, with no state.
func (t *keyTable) lightKeys() int {
	n := 0
	for _, s := range t.slots {
		if s.key != 0 && s.state == nil {
			n++
		}
	}
	return n
}
