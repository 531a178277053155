package filelog

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/router"
)

// SyncPolicy says when appended records are made durable (fsync).
type SyncPolicy int

const (
	// SyncNone writes each record to the page cache only: it survives a crash of the
	// process, not a power loss. Sync and Close fsync everything; call Store.Sync from a
	// ticker of your own for a periodic policy. The default.
	SyncNone SyncPolicy = iota
	// SyncEveryAppend fsyncs the segment after every append (and the directory when a
	// segment is created or removed): an acknowledged append survives a power loss.
	// Concurrent appends to a partition share an fsync (group commit).
	SyncEveryAppend
)

// DefaultSegmentBytes is the segment size when Options.SegmentBytes is zero.
const DefaultSegmentBytes = 1 << 20

// maxSegmentBytes keeps every frame's position within the 4 bytes the index gives it.
const maxSegmentBytes = 1 << 30

// Options configure a Store. The zero value is usable: 1 MiB segments, no fsync per append,
// no retention, no callback.
type Options struct {
	// SegmentBytes is the size at which a segment is sealed and a new one started. A
	// record larger than that gets a segment of its own. Zero means DefaultSegmentBytes; at
	// most 1 GiB.
	SegmentBytes int64
	// Sync is the fsync policy.
	Sync SyncPolicy
	// Retention drops whole segments, oldest first, while a partition holds more than
	// MaxSegments segments or more than MaxBytes bytes; the segment being appended to is
	// never dropped. Zero means no limit. It is applied when a log opens and at each append.
	MaxSegments int
	MaxBytes    int64
	// OnAppend, if set, is called after every append with the partition's new high
	// watermark, from the appending goroutine and outside any lock. Wire it to
	// router.Node.Appended so parked consumers wake. Under concurrent appends to one
	// partition the calls may arrive out of order; each is only a wake-up.
	OnAppend func(topic string, partition int32, hwm int64)

	// syncFile, if set, replaces a segment file's fsync: tests watch and fail it.
	syncFile func(*os.File) error
}

func (o Options) withDefaults() (Options, error) {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	switch {
	case o.SegmentBytes < 0 || o.SegmentBytes > maxSegmentBytes:
		return o, fmt.Errorf("filelog: SegmentBytes %d out of range (1 to %d)", o.SegmentBytes, maxSegmentBytes)
	case o.MaxSegments < 0 || o.MaxBytes < 0:
		return o, errors.New("filelog: negative retention")
	case o.Sync != SyncNone && o.Sync != SyncEveryAppend:
		return o, fmt.Errorf("filelog: unknown sync policy %d", o.Sync)
	}
	return o, nil
}

// A Store is a set of partitioned topics in a directory: Dir/<topic>/<partition>/, each
// partition a Log of segment files (<base offset>.log). The topic's directory name is its
// name path-escaped. It implements router.Logs, router.ManyGetter and router.Routes (every
// partition is local), so one Store is what a single-node router.Config needs besides a
// directory for the consumer state. It is safe for concurrent use.
type Store struct {
	dir  string
	opts Options

	mu     sync.RWMutex
	topics map[string]*topic
	closed bool
}

type topic struct {
	partitions []int32 // sorted; replaced, never modified, when partitions are added
	ordered    []*Log  // the logs of partitions, in its order; replaced with it
	logs       map[int32]*Log
	turn       atomic.Uint32 // AppendAny's round robin
}

var (
	_ router.Logs       = (*Store)(nil)
	_ router.ManyGetter = (*Store)(nil)
	_ router.Routes     = (*Store)(nil)
)

// Open opens the store in dir, creating dir if needed, and opens every partition found
// there (recovering each as a Log opens: see the package documentation). Entries that are
// not a topic's or partition's directory or a segment file are left alone.
func Open(dir string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &Store{dir: dir, opts: opts, topics: map[string]*topic{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name, err := url.PathUnescape(e.Name())
		if err != nil || !e.IsDir() || validTopic(name) != nil || url.PathEscape(name) != e.Name() {
			continue
		}
		parts, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			s.Close()
			return nil, err
		}
		for _, pe := range parts {
			p, err := strconv.ParseInt(pe.Name(), 10, 32)
			if err != nil || p < 0 || strconv.FormatInt(p, 10) != pe.Name() || !pe.IsDir() {
				continue
			}
			if _, err := s.openPartition(name, int32(p)); err != nil {
				s.Close()
				return nil, err
			}
		}
	}
	return s, nil
}

func validTopic(name string) error {
	if name == "" || name == "." || name == ".." || len(url.PathEscape(name)) > 255 {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	return nil
}

// openPartition opens (creating) the log of a partition and adds it to the store. The
// caller holds s.mu or has the store to itself.
func (s *Store) openPartition(name string, partition int32) (*Log, error) {
	t := s.topics[name]
	if t == nil {
		t = &topic{logs: map[int32]*Log{}}
	}
	if l, ok := t.logs[partition]; ok {
		return l, nil
	}
	topicDir := filepath.Join(s.dir, url.PathEscape(name))
	var notify func(int64)
	if on := s.opts.OnAppend; on != nil {
		notify = func(hwm int64) { on(name, partition, hwm) }
	}
	dir := filepath.Join(topicDir, strconv.Itoa(int(partition)))
	_, statErr := os.Stat(dir)
	l, err := openLog(dir, s.opts, notify)
	if err != nil {
		return nil, err
	}
	if s.opts.Sync == SyncEveryAppend && os.IsNotExist(statErr) {
		// The new directory's entry, and the topic's if that is new too.
		err := errors.Join(SyncDir(topicDir), SyncDir(s.dir))
		if err != nil {
			l.Close()
			return nil, err
		}
	}
	t.logs[partition] = l
	ps := append(slices.Clone(t.partitions), partition)
	slices.Sort(ps)
	ordered := make([]*Log, len(ps))
	for i, p := range ps {
		ordered[i] = t.logs[p]
	}
	t.partitions, t.ordered = ps, ordered
	s.topics[name] = t
	return l, nil
}

// CreateTopic makes sure topic has partitions 0 to partitions-1, creating the missing ones.
// It never removes a partition. Errors: ErrInvalidName, router.ErrLogClosed after Close,
// and I/O errors.
func (s *Store) CreateTopic(name string, partitions int) error {
	if partitions < 1 || partitions > math.MaxInt32 {
		return fmt.Errorf("filelog: %d partitions", partitions)
	}
	all := make([]int32, partitions)
	for p := range all {
		all[p] = int32(p)
	}
	return s.CreatePartitions(name, all)
}

// CreatePartitions makes sure topic has the partitions named, creating the missing ones, and
// no others: for a host whose node owns some of a topic's partitions, the others' records
// living in other nodes' logs (and AppendAny picking among these alone). It never removes a
// partition. Errors as for CreateTopic; a negative partition is an error, and creates none.
func (s *Store) CreatePartitions(name string, partitions []int32) error {
	if err := validTopic(name); err != nil {
		return err
	}
	if slices.ContainsFunc(partitions, func(p int32) bool { return p < 0 }) {
		return fmt.Errorf("filelog: a negative partition of %s", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return router.ErrLogClosed
	}
	for _, p := range partitions {
		if _, err := s.openPartition(name, p); err != nil {
			return err
		}
	}
	return nil
}

// Log returns the log of a partition, or ErrUnknownPartition.
func (s *Store) Log(topic string, partition int32) (*Log, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.logLocked(topic, partition)
}

func (s *Store) logLocked(topic string, partition int32) (*Log, error) {
	if t, ok := s.topics[topic]; ok {
		if l, ok := t.logs[partition]; ok {
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: %s/%d", ErrUnknownPartition, topic, partition)
}

// Append appends a record, timestamped now, to a partition and returns its offset. It is
// Log(topic, partition) followed by Log.Append.
func (s *Store) Append(topic string, partition int32, key, value []byte) (int64, error) {
	l, err := s.Log(topic, partition)
	if err != nil {
		return 0, err
	}
	return l.Append(key, value, time.Now())
}

// AppendRecord appends rec, its headers too, to a partition and returns its offset; a zero
// Timestamp is now. It is Log(topic, partition) followed by Log.AppendRecord.
func (s *Store) AppendRecord(topic string, partition int32, rec router.Record) (int64, error) {
	l, err := s.Log(topic, partition)
	if err != nil {
		return 0, err
	}
	if rec.Timestamp.IsZero() {
		rec.Timestamp = time.Now()
	}
	return l.AppendRecord(rec)
}

// anySlack bounds how far AppendAny lets a partition run ahead of the topic's emptiest one
// to share an fsync: far enough for groups of appends, near enough that consumers find
// records in every partition.
const anySlack = 64

// AppendAny appends rec, its headers too, to a partition of topic of the store's choosing
// and returns the partition and the offset; a zero Timestamp is now. It is for records
// whose order across partitions matters to no one (a key's order needs Append to the
// key's partition). With SyncEveryAppend it picks a partition where appends await an
// fsync, so that concurrent appends share one (an fsync is a partition's: appends spread
// over partitions would each run their own), unless that partition is anySlack records
// or more ahead of the topic's emptiest; otherwise, and with SyncNone, it picks the
// emptiest (the next round robin among equals), so the topic's partitions stay within a
// few dozen records of each other as far as AppendAny alone fills them. A partition that
// refuses appends after a failed fsync is passed by while another takes them. Errors as for
// AppendRecord.
func (s *Store) AppendAny(topic string, rec router.Record) (int32, int64, error) {
	s.mu.RLock()
	t, ok := s.topics[topic]
	var p int32
	var l *Log
	if ok {
		i := t.pick()
		p, l = t.partitions[i], t.ordered[i]
	}
	s.mu.RUnlock()
	if !ok {
		return 0, 0, fmt.Errorf("%w: %s", ErrUnknownPartition, topic)
	}
	if rec.Timestamp.IsZero() {
		rec.Timestamp = time.Now()
	}
	off, err := l.AppendRecord(rec)
	return p, off, err
}

// pick returns the index, in t.ordered, of the partition AppendAny appends to: never one
// that refuses appends (a failed fsync) while another takes them. The caller holds the
// store's lock (read).
func (t *topic) pick() int {
	logs := t.ordered
	start := int(t.turn.Add(1) % uint32(len(logs)))
	emptiest, least := -1, int64(0)
	for k := range logs {
		i := (start + k) % len(logs)
		if n := logs[i].next.Load(); !logs[i].refusing.Load() && (emptiest < 0 || n < least) {
			emptiest, least = i, n
		}
	}
	if emptiest < 0 {
		return start // every one refuses: its append says why
	}
	for k := range logs {
		i := (start + k) % len(logs)
		if logs[i].waiting.Load() > 0 && logs[i].next.Load()-least < anySlack && !logs[i].refusing.Load() {
			return i
		}
	}
	return emptiest
}

// Get implements router.Logs. After Close it still returns the (closed) logs, whose reads
// answer router.ErrLogClosed.
func (s *Store) Get(topic string, partition int32) (router.Log, error) {
	l, err := s.Log(topic, partition)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// GetMany implements router.ManyGetter: it resolves the partitions under one read lock.
func (s *Store) GetMany(topic string, partitions []int32, into []router.Log) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i, p := range partitions {
		l, err := s.logLocked(topic, p)
		if err != nil {
			return err
		}
		into[i] = l
	}
	return nil
}

// Partitions implements router.Routes: every partition of a topic in the store is local.
// The slice returned is never modified afterwards.
func (s *Store) Partitions(topic string) (local []int32, remote map[string][]int32, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.topics[topic]
	if !ok {
		return nil, nil, false
	}
	return t.partitions, nil, true
}

// Topics returns the names of the store's topics, sorted.
func (s *Store) Topics() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.topics))
	for name := range s.topics {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Sync syncs every partition (see Log.Sync).
func (s *Store) Sync() error {
	var errs []error
	for _, l := range s.logs() {
		if err := l.Sync(); err != nil && !errors.Is(err, router.ErrLogClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close syncs and closes every partition. Close the router.Node that reads the store
// first. Closing twice is a no-op.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	var errs []error
	for _, l := range s.logs() {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

func (s *Store) logs() []*Log {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var all []*Log
	for _, t := range s.topics {
		for _, l := range t.logs {
			all = append(all, l)
		}
	}
	return all
}
