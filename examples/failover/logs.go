package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"

	"narad.dev/consume/examples/filelog"
	"narad.dev/consume/router"
)

// The shared log. Every node reaches one directory, cfg.LogDir, which stands for the host's
// replicated log: what a broker's replication gives every machine, the example gets from
// the three processes sharing one machine's disk. Each partition is its own
// filelog.Store, LogDir/p<N>, holding the topic with partition 0 only.
//
// filelog is one process at a time per directory: a Store indexes its segments in memory
// when it opens and nothing locks the files, so another process's appends would be invisible
// to it, or interleaved with its own. So a partition's Store is open only on the node that
// owns the partition, which alone appends to it and reads it:
//
//   - a node opens a partition's Store when it is about to own it: before its Adopt (a move
//     or a failover), or when the routes first name it (the first assignment);
//   - the produce path goes to the owner only (POST /produce answers 409 elsewhere), and
//     fence stops its appends before the owner's HandOff, so a new owner opens the files
//     after the old owner's last append;
//   - the old owner closes its Store once the routes no longer name it there;
//   - a node killed with SIGKILL appends nothing more: its appends are in the page cache
//     (SyncNone), which the new owner reads when it opens the Store, cutting a torn tail.
//
// A real host's log fences a deposed writer itself (an epoch, a leader lease); here a node
// whose etcd lease lapses exits at once (see runNode).
type sharedLogs struct {
	dir      string
	topic    string
	onAppend func(p int32, hwm int64)

	mu    sync.Mutex
	parts map[int32]*sharedPartition
}

// sharedPartition is one partition's Store on this node, while it is open here.
type sharedPartition struct {
	mu      sync.RWMutex // appends hold it shared; fence and close hold it alone
	store   *filelog.Store
	appends bool // this node may append: it owns the partition and has not fenced it
}

// errNotHere: the partition's log is not open for appends on this node.
var errNotHere = errors.New("the partition is not owned here")

func newSharedLogs(dir, topic string, onAppend func(p int32, hwm int64)) *sharedLogs {
	return &sharedLogs{dir: dir, topic: topic, onAppend: onAppend, parts: map[int32]*sharedPartition{}}
}

func (l *sharedLogs) part(p int32) *sharedPartition {
	l.mu.Lock()
	defer l.mu.Unlock()
	sp := l.parts[p]
	if sp == nil {
		sp = &sharedPartition{}
		l.parts[p] = sp
	}
	return sp
}

// open opens partition p's Store here, for reads and appends, unless it is open already.
func (l *sharedLogs) open(p int32) error {
	sp := l.part(p)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.store == nil {
		// No OnAppend: append tells the node itself, after it lets go of sp.mu (the node's
		// Appended resolves the log again, through Get).
		store, err := filelog.Open(filepath.Join(l.dir, "p"+strconv.Itoa(int(p))), filelog.Options{SegmentBytes: 256 << 10})
		if err != nil {
			return fmt.Errorf("open the shared log of partition %d: %w", p, err)
		}
		if err := store.CreateTopic(l.topic, 1); err != nil {
			store.Close()
			return err
		}
		sp.store = store
	}
	sp.appends = true
	return nil
}

// fence stops appends to p here and returns once the appends in progress are done.
func (l *sharedLogs) fence(p int32) {
	sp := l.part(p)
	sp.mu.Lock()
	sp.appends = false
	sp.mu.Unlock()
}

// close closes p's Store here: the routes no longer name this node its owner.
func (l *sharedLogs) close(p int32) error {
	sp := l.part(p)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.appends = false
	if sp.store == nil {
		return nil
	}
	err := sp.store.Close()
	sp.store = nil
	return err
}

// closeAll closes every Store open here.
func (l *sharedLogs) closeAll() error {
	l.mu.Lock()
	ps := make([]int32, 0, len(l.parts))
	for p := range l.parts {
		ps = append(ps, p)
	}
	l.mu.Unlock()
	var errs []error
	for _, p := range ps {
		errs = append(errs, l.close(p))
	}
	return errors.Join(errs...)
}

// append appends value to p, if this node may, and tells the node.
func (l *sharedLogs) append(p int32, value []byte) (int64, error) {
	sp := l.part(p)
	sp.mu.RLock()
	if sp.store == nil || !sp.appends {
		sp.mu.RUnlock()
		return 0, errNotHere
	}
	offset, err := sp.store.Append(l.topic, 0, nil, value)
	sp.mu.RUnlock()
	if err == nil {
		l.onAppend(p, offset+1)
	}
	return offset, err
}

// Get implements router.Logs: the log of a partition open here.
func (l *sharedLogs) Get(topic string, partition int32) (router.Log, error) {
	if topic != l.topic {
		return nil, fmt.Errorf("no topic %q", topic)
	}
	sp := l.part(partition)
	sp.mu.RLock()
	defer sp.mu.RUnlock()
	if sp.store == nil {
		return nil, fmt.Errorf("%s/%d: %w", topic, partition, errNotHere)
	}
	return sp.store.Get(topic, 0)
}
