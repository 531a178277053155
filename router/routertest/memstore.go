package routertest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"narad.dev/consume/router"
)

// MemStore is an in-memory router.StateStore, for tests: a map from partition to the state
// Save last stored for it. A store shared by nodes that start and stop plays the host's
// replicated storage, which outlives any one machine. It fences as a shared store must: it
// refuses, with router.ErrFenced, a save whose ownership epoch is below the one it holds for
// the partition (the newest saved, or set by Fence when the host grants the partition anew).
// The zero value is ready to use; it is safe for concurrent use.
type MemStore struct {
	mu     sync.Mutex
	states map[storeKey][]byte
	epochs map[storeKey]uint64
	saves  int
	fenced int
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
		s.states, s.epochs = map[storeKey][]byte{}, map[storeKey]uint64{}
	}
	for _, e := range batch { // all or nothing, as a transaction that compares the epochs
		if held := s.epochs[storeKey{e.Topic, e.Partition}]; e.Epoch < held {
			s.fenced++
			return fmt.Errorf("%w: %s/%d saved under epoch %d, the store holds epoch %d", router.ErrFenced, e.Topic, e.Partition, e.Epoch, held)
		}
	}
	for _, e := range batch {
		k := storeKey{e.Topic, e.Partition}
		s.states[k] = slices.Clone(e.State)
		s.epochs[k] = max(s.epochs[k], e.Epoch)
	}
	s.saves++
	return nil
}

// Fence raises the epoch the store holds for a partition to epoch, as a host's failover
// does when it grants the partition to a new owner: from then on a save under an older epoch
// is refused.
func (s *MemStore) Fence(topic string, partition int32, epoch uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epochs == nil {
		s.states, s.epochs = map[storeKey][]byte{}, map[storeKey]uint64{}
	}
	k := storeKey{topic, partition}
	s.epochs[k] = max(s.epochs[k], epoch)
}

// Fenced returns how many saves the store refused as fenced.
func (s *MemStore) Fenced() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fenced
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
	for k := range s.epochs {
		if k.topic == topic {
			delete(s.epochs, k)
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
