package readmap

import "sync"

// Map is a table by name read on every call without a lock (a node's topics, its lanes to
// owners). It is a concurrent hash trie (sync.Map): a read costs a few pointer hops, and
// adding a key costs the same at 100,000 keys as at 1,000, where a map copied per change made
// reaching N keys cost O(N²). The zero value is empty and ready to use.
type Map[V any] struct {
	mu sync.Mutex // serialises adds, so that add runs once per key
	m  sync.Map   // string → V
}

// Load returns the value of key, if it has one.
func (r *Map[V]) Load(key string) (v V, ok bool) {
	if x, found := r.m.Load(key); found {
		return x.(V), true
	}
	return v, false
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
	v := add()
	r.m.Store(key, v)
	return v
}

// Remove takes key out of the table.
func (r *Map[V]) Remove(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m.Delete(key)
}

// Range calls f for each key and its value until f returns false, as sync.Map.Range does:
// a key added or removed meanwhile may or may not be seen.
func (r *Map[V]) Range(f func(key string, v V) bool) {
	r.m.Range(func(k, v any) bool { return f(k.(string), v.(V)) })
}
