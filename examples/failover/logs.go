package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

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
// to it, or interleaved with its own. So a partition's Store is open for appends only on the
// node the partition is granted to, and a deposed owner never appends again: the log fences
// its writers by ownership epoch, as a replicated log does (a leader epoch):
//
//   - beside each partition's directory, LogDir/p<N>.owner holds the epoch of the newest
//     grant under which a node opened the partition's Store. A node opens the Store under
//     its grant's epoch, holding an exclusive flock on that file: it refuses if the file
//     names a newer epoch, and writes its own;
//   - every append takes the same flock and appends only if the file still names the epoch
//     the Store was opened under and the node's grant of that epoch is still valid on its
//     clock (etcdOwnership). So no append of a node paused or cut off lands after its grant
//     lapsed; the new owner opens the Store after the controller waited out that grant, and
//     an append that checked the grant before a pause (SIGSTOP) and writes after it holds
//     the flock meanwhile, so the new owner opens the Store after that append, and sees it;
//   - the produce path goes to the owner (POST /produce answers 409 elsewhere), and fence
//     stops the owner's appends before its HandOff;
//   - a node closes its Store once the routes no longer name it, and opens it afresh under
//     a new grant (its index would be stale);
//   - a node killed with SIGKILL appends nothing more: its appends are in the page cache
//     (SyncNone), which the new owner reads when it opens the Store, cutting a torn tail.
type sharedLogs struct {
	dir      string
	topic    string
	onAppend func(p int32, hwm int64)
	holds    func(p int32, epoch uint64) bool // whether this node holds p's grant of epoch now

	mu    sync.Mutex
	parts map[int32]*sharedPartition
}

// sharedPartition is one partition's Store on this node, while it is open here.
type sharedPartition struct {
	mu      sync.RWMutex // appends hold it shared; open, fence and close hold it alone
	store   *filelog.Store
	epoch   uint64 // the grant the Store was opened under
	appends bool   // this node may append: it holds the grant and has not fenced it
	owner   *os.File
	ownerMu sync.Mutex // the flock is per open file: this orders the node's own appends
}

// errNotHere: the partition's log is not open for appends on this node.
var errNotHere = errors.New("the partition is not owned here")

// ownerLockWait bounds how long an open waits for the flock: an append of a node paused
// while it held it holds it until the node runs again.
const ownerLockWait = 8 * time.Second

func newSharedLogs(dir, topic string, onAppend func(p int32, hwm int64), holds func(p int32, epoch uint64) bool) *sharedLogs {
	return &sharedLogs{dir: dir, topic: topic, onAppend: onAppend, holds: holds, parts: map[int32]*sharedPartition{}}
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

// open opens partition p's Store here under the grant of epoch, for reads and appends,
// unless it is open under that grant already. A Store open under another grant is closed
// first.
func (l *sharedLogs) open(p int32, epoch uint64) error {
	sp := l.part(p)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.store != nil && sp.epoch == epoch {
		sp.appends = true
		return nil
	}
	if sp.store != nil {
		sp.store.Close()
		sp.store, sp.appends = nil, false
	}
	if sp.owner == nil {
		if err := os.MkdirAll(l.dir, 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(l.dir, "p"+strconv.Itoa(int(p))+".owner"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		sp.owner = f
	}
	sp.ownerMu.Lock()
	defer sp.ownerMu.Unlock()
	if err := lockWait(sp.owner, ownerLockWait); err != nil {
		return fmt.Errorf("the shared log of partition %d: %w", p, err)
	}
	defer unlock(sp.owner)
	held, err := readEpoch(sp.owner)
	if err != nil {
		return err
	}
	if held > epoch {
		return fmt.Errorf("the shared log of partition %d was opened under epoch %d, newer than this node's %d", p, held, epoch)
	}
	if err := writeEpoch(sp.owner, epoch); err != nil {
		return err
	}
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
	sp.store, sp.epoch, sp.appends = store, epoch, true
	return nil
}

func readEpoch(f *os.File) (uint64, error) {
	var b [32]byte
	n, err := f.ReadAt(b[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	s := strings.TrimSpace(string(b[:n]))
	if s == "" {
		return 0, nil // a new file: nobody opened the partition under a grant yet
	}
	return strconv.ParseUint(s, 10, 64)
}

func writeEpoch(f *os.File, epoch uint64) error {
	b := fmt.Appendf(nil, "%020d\n", epoch)
	_, err := f.WriteAt(b, 0)
	return err
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
		sp := l.part(p)
		sp.mu.Lock()
		if sp.owner != nil {
			sp.owner.Close()
			sp.owner = nil
		}
		sp.mu.Unlock()
	}
	return errors.Join(errs...)
}

// append appends value to p, if this node may: it holds the grant the Store was opened
// under, and no newer owner has opened it. It tells the node.
func (l *sharedLogs) append(p int32, value []byte) (int64, error) {
	sp := l.part(p)
	sp.mu.RLock()
	offset, err := sp.appendLocked(p, value, l.topic, l.holds)
	sp.mu.RUnlock()
	if err == nil {
		l.onAppend(p, offset+1)
	}
	return offset, err
}

func (sp *sharedPartition) appendLocked(p int32, value []byte, topic string, holds func(int32, uint64) bool) (int64, error) {
	if sp.store == nil || !sp.appends {
		return 0, errNotHere
	}
	sp.ownerMu.Lock()
	defer sp.ownerMu.Unlock()
	if err := lockWait(sp.owner, ownerLockWait); err != nil {
		return 0, err
	}
	defer unlock(sp.owner)
	held, err := readEpoch(sp.owner)
	if err != nil {
		return 0, err
	}
	if held != sp.epoch || !holds(p, sp.epoch) {
		return 0, fmt.Errorf("%w: its grant of epoch %d lapsed or was replaced (the log names epoch %d)", errNotHere, sp.epoch, held)
	}
	return sp.store.Append(topic, 0, nil, value)
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
