package router

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A partition whose persisted state cannot be loaded (a state file that is a directory or a
// symbolic link out of its directory, a partition directory that is a file or cannot be
// created, unreadable state) is set aside: logged once, counted (Stats.SetAsideNow,
// Stats.SetAsides), listed by Health, and retried with backoff, from 100 ms doubling to 30 s
// on the node's clock. Nothing runs for it in between: a scan that reaches it before its
// retry time skips it, and the first scan after retries the load. An unpinned consume
// serves and parks on the topic's other partitions meanwhile; a pinned consume, an ack or
// another call naming the partition answers a *SetAsideError. Once a retry loads the state
// the partition rejoins, logged once as recovered.
//
// Only failures of the state are set aside. A host error resolving the partition's log, and
// the log's own errors (ErrLogClosed and the rest), keep their behaviour.
const (
	setAsideFirstRetry = 100 * time.Millisecond
	setAsideMaxRetry   = 30 * time.Second
)

// SetAsideError is what a call naming a set-aside partition answers: Err is why its state
// could not be loaded, and RetryAt when the node tries again.
type SetAsideError struct {
	Topic     string
	Partition int32
	RetryAt   time.Time
	Err       error
}

func (e *SetAsideError) Error() string {
	return fmt.Sprintf("router: partition %s/%d set aside until %s: %v", e.Topic, e.Partition, e.RetryAt.Format(time.RFC3339Nano), e.Err)
}

func (e *SetAsideError) Unwrap() error { return e.Err }

// SetAsidePartition describes a set-aside partition (Health).
type SetAsidePartition struct {
	Topic     string
	Partition int32
	Err       error     // the last failure to load its state
	Since     time.Time // when it was set aside
	RetryAt   time.Time // when the next scan that reaches it retries
	Failures  int       // failed loads so far, the first included
}

// Health is what a host shows on a status page or answers a health check with.
type Health struct {
	// SetAside lists the partitions set aside because their state could not be loaded,
	// by topic and partition. The node serves the other partitions of their topics.
	SetAside []SetAsidePartition
}

// Health returns the node's health.
func (n *Node) Health() Health {
	return Health{SetAside: n.setAside.list()}
}

type setAsideEntry struct {
	SetAsidePartition
	backoff  time.Duration
	retrying bool // a retry is loading now: others skip
}

// setAsideTable holds the set-aside partitions. count lets the scan skip the table with one
// atomic load while nothing is set aside.
type setAsideTable struct {
	count     atomic.Int64
	total     atomic.Uint64
	recovered atomic.Uint64

	mu    sync.Mutex
	parts map[shardKey]*setAsideEntry
}

type shardKey struct {
	topic     string
	partition int32
}

// admit says whether a load of key may go ahead: not set aside (false, nil), due for its
// retry and claimed by this caller (true, nil), or not yet (the *SetAsideError).
func (t *setAsideTable) admit(key shardKey, now time.Time) (retry bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.parts[key]
	switch {
	case !ok:
		return false, nil
	case e.retrying || now.Before(e.RetryAt):
		return false, e.errorOf()
	}
	e.retrying = true
	return true, nil
}

func (e *setAsideEntry) errorOf() error {
	return &SetAsideError{Topic: e.Topic, Partition: e.Partition, RetryAt: e.RetryAt, Err: e.Err}
}

// fail records a failed load of key: a partition set aside now is logged and counted; a
// failed retry doubles its backoff.
func (t *setAsideTable) fail(n *Node, key shardKey, err error, now time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.parts[key]
	switch {
	case !ok:
		e = &setAsideEntry{backoff: setAsideFirstRetry, SetAsidePartition: SetAsidePartition{
			Topic: key.topic, Partition: key.partition, Since: now}}
		if t.parts == nil {
			t.parts = map[shardKey]*setAsideEntry{}
		}
		t.parts[key] = e
		t.count.Add(1)
		t.total.Add(1)
		n.logger.Error("consume: partition state cannot be loaded; the partition is set aside and retried with backoff, its topic's other partitions serve",
			"topic", key.topic, "partition", key.partition, "err", err)
	case e.retrying:
		e.retrying = false
		e.backoff = min(2*e.backoff, setAsideMaxRetry)
	default:
		// Another first load failed alongside: set aside already.
		return e.errorOf()
	}
	e.Err = err
	e.Failures++
	e.RetryAt = now.Add(e.backoff)
	return e.errorOf()
}

func (t *setAsideTable) rejoin(key shardKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.parts[key]; ok {
		delete(t.parts, key)
		t.count.Add(-1)
		t.recovered.Add(1)
	}
}

func (t *setAsideTable) unclaim(key shardKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.parts[key]; ok {
		e.retrying = false
	}
}

// forget drops the entries of a partition (partition >= 0) or of a whole topic (-1): the
// partition was dropped, so its next touch loads afresh at once.
func (t *setAsideTable) forget(topic string, partition int32) {
	if t.count.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, e := range t.parts {
		if key.topic == topic && (partition < 0 || key.partition == partition) && !e.retrying {
			delete(t.parts, key)
			t.count.Add(-1)
		}
	}
}

func (t *setAsideTable) list() []SetAsidePartition {
	t.mu.Lock()
	out := make([]SetAsidePartition, 0, len(t.parts))
	for _, e := range t.parts {
		out = append(out, e.SetAsidePartition)
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b SetAsidePartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return out
}
