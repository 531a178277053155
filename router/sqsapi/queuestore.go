package sqsapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrQueueNotFound is what a QueueStore's DeleteQueue returns for a queue it does not have
// (wrapped is fine): answered QueueDoesNotExist.
var ErrQueueNotFound = errors.New("sqsapi: no such queue")

// A QueueRecord is what a QueueStore keeps of one queue. The handler builds every record it
// stores, and neither it nor the store modifies a record's maps once stored: a change is a
// new record with new maps.
type QueueRecord struct {
	// Topic is the topic of the host's log whose records are the queue's messages.
	Topic string
	// Attributes are the queue's attributes by SQS's names, each as GetQueueAttributes
	// answers it ("VisibilityTimeout": "30", ...): those a queue keeps (see Queue management
	// in the package doc), checked and written out by the handler (MaxDeliveries reads a
	// record's RedrivePolicy); other names are not answered.
	Attributes map[string]string
	// Tags are the queue's cost allocation tags.
	Tags map[string]string
	// Created is when the queue was created, Modified when its attributes last changed
	// (CreatedTimestamp, LastModifiedTimestamp), on the handler's clock.
	Created, Modified time.Time
}

// A QueueStore is the host's catalogue of queues, which the handler's queue management
// (Config.Store) creates, changes, lists and deletes queues through: where queues and their
// attributes live, and how a queue becomes a topic of the host's log. Every method must be
// safe for concurrent use. MemQueueStore is one, in memory.
type QueueStore interface {
	// Queue returns queue name's record; ok false when there is no such queue
	// (QueueDoesNotExist). It is asked on every request naming a queue: it must be fast.
	Queue(name string) (rec QueueRecord, ok bool)
	// PutQueue creates or changes queue name, atomically with respect to the store's other
	// writes: change is called once, with the queue's record (exists false: there is none,
	// and rec is zero), and returns the record to store, or an error to store nothing, which
	// PutQueue returns as it is. When exists was false, PutQueue creates the queue: it names
	// its topic if change left Topic empty (after the queue, as the host names topics),
	// creates the topic in the host's log (partitions, routes) if it does not exist, and
	// stores the record; an error doing so is returned, and nothing is stored. It returns
	// the record stored.
	PutQueue(ctx context.Context, name string, change func(rec QueueRecord, exists bool) (QueueRecord, error)) (QueueRecord, error)
	// DeleteQueue deletes queue name and its topic: the host removes the topic from its log
	// and its routes and calls router.Node.DeleteTopic on each node, so that a queue created
	// again under the name starts empty. ErrQueueNotFound for a queue it does not have.
	DeleteQueue(ctx context.Context, name string) error
	// ListQueues returns the names of the queues beginning with prefix, in ascending order.
	ListQueues(prefix string) []string
}

// A QueuePurger is a QueueStore that serves PurgeQueue itself, found by type assertion: it
// deletes every message of queue name's topic below the topic's high watermarks, durably, so
// that none is delivered again (a host whose log can empty a topic empties it, and calls
// router.Node.DeleteTopic on each node so that their state starts afresh; a host of a
// cluster calls router.Node.Purge on each node that owns a partition of the topic). An error
// matching errors.ErrUnsupported leaves the purge to the handler's node, as a store that is
// no QueuePurger does (see Purger).
type QueuePurger interface {
	PurgeQueue(ctx context.Context, name string, rec QueueRecord) error
}

// MemQueueStore is a QueueStore in memory, for tests and for a host of one process whose
// queues need not outlive it. Its hooks reach the host's log; set them before its first use,
// and leave them nil where there is nothing to do. A zero MemQueueStore is an empty store
// whose queues' topics are named after them and created by nobody.
type MemQueueStore struct {
	// CreateTopic, when set, is called as a queue is created, with its name and the topic
	// PutQueue's change gave it ("" for none): it creates the topic in the host's log (if it
	// does not exist) and returns its name. Nil means the topic is the given one, or the
	// queue's name. An error creates nothing.
	CreateTopic func(ctx context.Context, queue, topic string) (string, error)
	// DeleteTopic, when set, is called as a queue is deleted, with its topic, once it is out
	// of the store: it removes the topic from the host's log and routes (and
	// router.Node.DeleteTopic). An error is returned by DeleteQueue; the queue is gone
	// regardless.
	DeleteTopic func(ctx context.Context, topic string) error
	// PurgeTopic, when set, serves PurgeQueue (MemQueueStore is a QueuePurger): it deletes
	// every message of the topic, durably. Nil means the handler's node purges the topic
	// (see Purger).
	PurgeTopic func(ctx context.Context, topic string) error
	// Changed, when set, is called with a queue's topic once PutQueue has stored a change of
	// an existing queue: the host calls router.Node.ReloadTopic on each node, so that a
	// RedrivePolicy set on a queue in use (its MaxDeliveries) acts at once.
	Changed func(topic string)

	writes sync.Mutex // serializes PutQueue and DeleteQueue
	mu     sync.RWMutex
	queues map[string]QueueRecord
}

var (
	_ QueueStore  = (*MemQueueStore)(nil)
	_ QueuePurger = (*MemQueueStore)(nil)
)

// Queue implements QueueStore.
func (s *MemQueueStore) Queue(name string) (QueueRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rec, ok := s.queues[name]
	return rec, ok
}

// PutQueue implements QueueStore.
func (s *MemQueueStore) PutQueue(ctx context.Context, name string, change func(rec QueueRecord, exists bool) (QueueRecord, error)) (QueueRecord, error) {
	s.writes.Lock()
	defer s.writes.Unlock()
	old, exists := s.Queue(name)
	rec, err := change(old, exists)
	if err != nil {
		return QueueRecord{}, err
	}
	if !exists {
		switch {
		case s.CreateTopic != nil:
			if rec.Topic, err = s.CreateTopic(ctx, name, rec.Topic); err != nil {
				return QueueRecord{}, err
			}
		case rec.Topic == "":
			rec.Topic = name
		}
	}
	s.mu.Lock()
	if s.queues == nil {
		s.queues = map[string]QueueRecord{}
	}
	s.queues[name] = rec
	s.mu.Unlock()
	if exists && s.Changed != nil {
		s.Changed(rec.Topic)
	}
	return rec, nil
}

// DeleteQueue implements QueueStore.
func (s *MemQueueStore) DeleteQueue(ctx context.Context, name string) error {
	s.writes.Lock()
	defer s.writes.Unlock()
	s.mu.Lock()
	rec, ok := s.queues[name]
	delete(s.queues, name)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrQueueNotFound, name)
	}
	if s.DeleteTopic != nil {
		return s.DeleteTopic(ctx, rec.Topic)
	}
	return nil
}

// ListQueues implements QueueStore.
func (s *MemQueueStore) ListQueues(prefix string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var names []string
	for name := range s.queues {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// PurgeQueue implements QueuePurger through PurgeTopic.
func (s *MemQueueStore) PurgeQueue(ctx context.Context, name string, rec QueueRecord) error {
	if s.PurgeTopic == nil {
		return fmt.Errorf("sqsapi: MemQueueStore has no PurgeTopic: %w", errors.ErrUnsupported)
	}
	return s.PurgeTopic(ctx, rec.Topic)
}

// cloneRecord is rec with maps of its own, to change.
func cloneRecord(rec QueueRecord) QueueRecord {
	rec.Attributes = maps.Clone(rec.Attributes)
	rec.Tags = maps.Clone(rec.Tags)
	if rec.Attributes == nil {
		rec.Attributes = map[string]string{}
	}
	if rec.Tags == nil {
		rec.Tags = map[string]string{}
	}
	return rec
}
