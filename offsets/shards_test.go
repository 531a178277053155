package offsets

import (
	"slices"
	"sync"
)

// Shards is the tests' model of the in-flight tracker behind Source: per partition a frontier
// and an acked-ahead set. Everything it holds counts as acked, so a recovery must never come
// back with more (invariant I1). Exported so the external test package uses it too.
type Shards struct {
	mu    sync.Mutex
	parts map[key]*shard
}

type shard struct {
	frontier int64
	ahead    map[int64]bool
}

func NewShards() *Shards { return &Shards{parts: map[key]*shard{}} }

// Seed installs a shard with the given state (what a host does with Load's result).
func (s *Shards) Seed(topic string, partition int32, st State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := &shard{frontier: st.Frontier, ahead: map[int64]bool{}}
	if !st.Found {
		sh.frontier = -1
	}
	for _, o := range st.Ahead {
		sh.ahead[o] = true
	}
	s.parts[key{topic, partition}] = sh
}

// Drop removes the shard: State answers ok=false for it from now on.
func (s *Shards) Drop(topic string, partition int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.parts, key{topic, partition})
}

// Ack settles off and reports whether the state changed.
func (s *Shards) Ack(topic string, partition int32, off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	if sh == nil || off <= sh.frontier || sh.ahead[off] {
		return false
	}
	if off != sh.frontier+1 {
		sh.ahead[off] = true
		return true
	}
	sh.frontier = off
	for sh.ahead[sh.frontier+1] {
		delete(sh.ahead, sh.frontier+1)
		sh.frontier++
	}
	return true
}

// Snapshot is the shard's state (Found false when there is no shard).
func (s *Shards) Snapshot(topic string, partition int32) State {
	f, a, ok := s.State(topic, partition, nil)
	return State{Found: ok, Frontier: f, Ahead: a}
}

// Settled reports whether off is settled in the shard.
func (s *Shards) Settled(topic string, partition int32, off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	return sh != nil && (off <= sh.frontier || sh.ahead[off])
}

// State implements Source.
func (s *Shards) State(topic string, partition int32, ahead []int64) (int64, []int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	if sh == nil {
		return -1, ahead[:0], false
	}
	ahead = ahead[:0]
	for o := range sh.ahead {
		ahead = append(ahead, o)
	}
	slices.Sort(ahead)
	return sh.frontier, ahead, true
}
