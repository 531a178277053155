package routertest

import (
	"slices"
	"sync"

	"narad.dev/consume/router"
)

// Routes is a static, mutable ownership table implementing router.Routes. The zero value
// knows no topic.
type Routes struct {
	mu     sync.RWMutex
	topics map[string][]int32
	remote map[string]map[string][]int32 // topic → owner → partitions
}

var _ router.Routes = (*Routes)(nil)

// Set makes this node the owner of exactly the given partitions of topic.
func (r *Routes) Set(topic string, local ...int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.topics == nil {
		r.topics = map[string][]int32{}
	}
	r.topics[topic] = slices.Clone(local)
}

// SetRemote records that node owner owns the given partitions of topic.
func (r *Routes) SetRemote(topic, owner string, partitions ...int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.remote == nil {
		r.remote = map[string]map[string][]int32{}
	}
	if r.remote[topic] == nil {
		r.remote[topic] = map[string][]int32{}
	}
	r.remote[topic][owner] = slices.Clone(partitions)
	if r.topics == nil {
		r.topics = map[string][]int32{}
	}
	if _, ok := r.topics[topic]; !ok {
		r.topics[topic] = nil
	}
}

// Delete forgets topic.
func (r *Routes) Delete(topic string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.topics, topic)
	delete(r.remote, topic)
}

// Partitions implements router.Routes.
func (r *Routes) Partitions(topic string) ([]int32, map[string][]int32, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	local, ok := r.topics[topic]
	return local, r.remote[topic], ok
}
