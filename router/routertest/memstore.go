package routertest

import (
	"context"
	"slices"
	"sync"

	"narad.dev/consume/router"
)

// MemStore is an in-memory router.StateStore, for tests: a map from partition to the state
// Save last stored for it. A store shared by nodes that start and stop plays the host's
// replicated storage, which outlives any one machine. The zero value is ready to use; it is
// safe for concurrent use.
type MemStore struct {
	mu     sync.Mutex
	states map[storeKey][]byte
	saves  int
}

type storeKey struct {
	topic     string
	partition int32
}

var _ router.StateStore = (*MemStore)(nil)

// Load returns a copy of what Save last stored for the partition, nil when nothing.
func (s *MemStore) Load(ctx context.Context, topic string, partition int32) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.states[storeKey{topic, partition}]), nil
}

// Save stores every entry of batch, all at once.
func (s *MemStore) Save(ctx context.Context, batch []router.PartitionState) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.states == nil {
		s.states = map[storeKey][]byte{}
	}
	for _, e := range batch {
		s.states[storeKey{e.Topic, e.Partition}] = slices.Clone(e.State)
	}
	s.saves++
	return nil
}

// Delete removes every state of topic.
func (s *MemStore) Delete(ctx context.Context, topic string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.states {
		if k.topic == topic {
			delete(s.states, k)
		}
	}
	return nil
}

// Saves returns how many Save calls the store took.
func (s *MemStore) Saves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves
}

// Len returns how many partitions the store holds a state of.
func (s *MemStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.states)
}
