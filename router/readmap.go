package router

import (
	"maps"
	"sync"
	"sync/atomic"
)

// readMap is a table by name read on every call without a lock: a change copies the map
// under mu and replaces it, so it suits tables whose keys change rarely (a node's topics, its
// lanes to owners). The zero value is empty and ready to use.
type readMap[V any] struct {
	mu sync.Mutex                   // serialises changes
	m  atomic.Pointer[map[string]V] // never changed once stored; nil: empty
}

// load returns the value of key, if it has one.
func (r *readMap[V]) load(key string) (v V, ok bool) {
	if m := r.m.Load(); m != nil {
		v, ok = (*m)[key]
	}
	return v, ok
}

// loadOrAdd returns the value of key, adding the one add makes if it has none.
func (r *readMap[V]) loadOrAdd(key string, add func() V) V {
	if v, ok := r.load(key); ok {
		return v
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.load(key); ok {
		return v
	}
	v := add()
	r.store(key, v, true)
	return v
}

// remove takes key out of the table.
func (r *readMap[V]) remove(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.load(key); ok {
		var zero V
		r.store(key, zero, false)
	}
}

// store publishes a copy of the table with key set to v (keep) or removed. The caller holds
// r.mu.
func (r *readMap[V]) store(key string, v V, keep bool) {
	next := map[string]V{}
	if m := r.m.Load(); m != nil {
		next = maps.Clone(*m)
	}
	if keep {
		next[key] = v
	} else {
		delete(next, key)
	}
	r.m.Store(&next)
}
