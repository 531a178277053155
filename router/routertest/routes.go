package routertest

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"narad.dev/consume/router"
)

// Routes is a static, mutable ownership table implementing router.Routes. The zero value
// knows no topic.
//
// A change copies the table and replaces it whole, and Partitions reads it without a lock:
// a node asks for the routes on every consume, and a lock shared by every consumer would
// cost them more than the lookup.
type Routes struct {
	mu     sync.Mutex                              // serialises the changes
	topics atomic.Pointer[map[string]*topicRoutes] // never changed once stored; nil: none
}

// topicRoutes is the ownership of one topic's partitions.
type topicRoutes struct {
	local  []int32
	remote map[string][]int32 // owner → partitions; nil when no other node owns any
	owners map[int32]string   // partition → its owner in remote
}

var (
	_ router.Routes      = (*Routes)(nil)
	_ router.OwnerFinder = (*Routes)(nil)
)

// Set makes this node the owner of exactly the given partitions of topic.
func (r *Routes) Set(topic string, local ...int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := &topicRoutes{local: slices.Clone(local)}
	if old, ok := r.load(topic); ok {
		next.remote, next.owners = old.remote, old.owners
	}
	r.store(topic, next)
}

// SetRemote records that node owner owns the given partitions of topic.
func (r *Routes) SetRemote(topic, owner string, partitions ...int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := &topicRoutes{}
	if old, ok := r.load(topic); ok {
		next.local = old.local
		next.remote = maps.Clone(old.remote)
	}
	if next.remote == nil {
		next.remote = map[string][]int32{}
	}
	next.remote[owner] = slices.Clone(partitions)
	next.owners = map[int32]string{}
	for _, o := range slices.Sorted(maps.Keys(next.remote)) { // a partition named twice: the last owner in name order
		for _, p := range next.remote[o] {
			next.owners[p] = o
		}
	}
	r.store(topic, next)
}

// Delete forgets topic.
func (r *Routes) Delete(topic string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.store(topic, nil)
}

// load returns the routes of topic.
func (r *Routes) load(topic string) (*topicRoutes, bool) {
	if topics := r.topics.Load(); topics != nil {
		routes, ok := (*topics)[topic]
		return routes, ok
	}
	return nil, false
}

// store publishes a copy of the table with topic's routes replaced (removed when nil). The
// caller holds r.mu.
func (r *Routes) store(topic string, routes *topicRoutes) {
	var next map[string]*topicRoutes
	if topics := r.topics.Load(); topics != nil {
		next = maps.Clone(*topics)
	}
	if next == nil {
		next = map[string]*topicRoutes{}
	}
	if routes == nil {
		delete(next, topic)
	} else {
		next[topic] = routes
	}
	r.topics.Store(&next)
}

// Partitions implements router.Routes. What it returns is never changed afterwards: a later
// change stores new slices and maps.
func (r *Routes) Partitions(topic string) ([]int32, map[string][]int32, bool) {
	routes, ok := r.load(topic)
	if !ok {
		return nil, nil, false
	}
	return routes.local, routes.remote, true
}

// Owner implements router.OwnerFinder.
func (r *Routes) Owner(topic string, partition int32) (string, bool) {
	routes, ok := r.load(topic)
	if !ok {
		return "", false
	}
	owner, ok := routes.owners[partition]
	return owner, ok
}
