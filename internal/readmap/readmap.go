package readmap

import (
	"sync"
	"sync/atomic"
)

// Map is a table by name read on every call without a lock (a node's topics, its lanes to
// owners). It is a concurrent hash trie (sync.Map): adding a key costs the same at 100,000
// keys as at 1,000, where a map copied per change made reaching N keys cost O(N²). A read
// first looks in a small cache of the entries read lately, slotted by the key's length and a
// few of its bytes: a hit compares one string and takes no lock and no write, where a read of
// the trie hashes the whole key as an interface (a consume and an ack read a node's topics
// and lanes several times, and the trie's reads were a tenth of a crossed record's
// instructions). The zero value is empty and ready to use.
type Map[V any] struct {
	mu sync.Mutex // serialises adds and removes, so that add runs once per key
	m  sync.Map   // string → *entry[V]
	// recent holds entries read lately, one per slot (see recentSlot): a read that missed
	// puts the entry it found in its key's slot.
	recent [recentSlots]atomic.Pointer[entry[V]]
}

// entry is a key's value, made once when the key is added.
type entry[V any] struct {
	key string
	v   V
	// removed is set before the key leaves the trie: an entry left in recent is then
	// passed over, so that no read after Remove returned finds the key.
	removed atomic.Bool
}

const recentSlots = 64

// recentSlot is key's slot in recent: a mix of its length and its first, middle and last
// bytes (names that differ only in a number, as topics and nodes often do, fall apart). Keys
// that share a slot only miss the cache: each read of one then reads the trie.
func recentSlot(key string) int {
	h := uint(len(key))
	if n := len(key); n > 0 {
		h = (h*31+uint(key[0]))*31 + uint(key[n/2])
		h = h*31 + uint(key[n-1])
	}
	h ^= h >> 7
	return int(h & (recentSlots - 1))
}

// Load returns the value of key, if it has one.
func (r *Map[V]) Load(key string) (v V, ok bool) {
	slot := &r.recent[recentSlot(key)]
	if e := slot.Load(); e != nil && e.key == key && !e.removed.Load() {
		return e.v, true
	}
	x, found := r.m.Load(key)
	if !found {
		return v, false
	}
	e := x.(*entry[V])
	slot.Store(e)
	return e.v, true
}

// LoadOrAdd returns the value of key, adding the one add makes if it has none; add runs at
// most once per key, however many callers race.
func (r *Map[V]) LoadOrAdd(key string, add func() V) V {
	if v, ok := r.Load(key); ok {
		return v
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.Load(key); ok {
		return v
	}
	e := &entry[V]{key: key, v: add()}
	r.m.Store(key, e)
	return e.v
}

// Store makes v key's value, in place of the one it had, if any.
func (r *Map[V]) Store(key string, v V) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retireLocked(key)
	r.m.Store(key, &entry[V]{key: key, v: v})
}

// Remove takes key out of the table.
func (r *Map[V]) Remove(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retireLocked(key) {
		r.m.Delete(key)
	}
}

// retireLocked marks key's entry removed, if it has one (the caller then replaces or
// deletes it), and reports whether it had one.
func (r *Map[V]) retireLocked(key string) bool {
	x, ok := r.m.Load(key)
	if ok {
		x.(*entry[V]).removed.Store(true)
	}
	return ok
}

// Range calls f for each key and its value until f returns false, as sync.Map.Range does:
// a key added or removed meanwhile may or may not be seen.
func (r *Map[V]) Range(f func(key string, v V) bool) {
	r.m.Range(func(k, x any) bool { return f(k.(string), x.(*entry[V]).v) })
}
