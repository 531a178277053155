package routertest

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/internal/partitionmap"
	"narad.dev/consume/router"
)

// MemLog is an in-memory log of one partition that keeps the router.Log contract and offers
// router.RangeReader, keeping each record's key, value, timestamp and headers, with knobs for the cases the contract names: retention (Trim),
// permanently unreadable records (Corrupt) and closing (Close). It is safe for concurrent
// use.
type MemLog struct {
	mu     sync.Mutex // one lock for reads too: each records what it read
	oldest int64
	// low and high are oldest and oldest+len(entries), set under mu and read without it:
	// Oldest and HighWatermark, which a node asks on every consume, take no lock.
	low, high atomic.Int64
	// entries[i] is offset oldest+i: where its key and value lie in the arena. Neither
	// holds a pointer, so a log of millions of records costs the garbage collector nothing
	// to scan, and benchmarks over it measure the node rather than the log.
	entries []memEntry
	arena   [][]byte    // chunks of the records' bytes, each arenaChunk long or one record's
	stamps  []time.Time // the records' timestamps, once one is not zero; stamps[i] is entries[i]'s
	// headers[i] is entries[i]'s headers (copies), once a record has some: a log of records
	// without headers holds no pointer per record.
	headers [][]router.Header
	corrupt map[int64]bool
	closed  bool
	readErr error              // every read fails with it while it is set (FailReads)
	onRead  func(offset int64) // called before each read, outside the lock
	read    []readRun          // the offsets read, in order, consecutive ones as one run
}

// memEntry places one record's key and value in its log's arena: chunk, then the key at
// [at, at+keyLen) and the value right after it. keyLen or valueLen -1 is a nil slice.
type memEntry struct {
	chunk            int32
	at               int32
	keyLen, valueLen int32
}

// readRun is n offsets read one after the other from first.
type readRun struct{ first, n int64 }

// arenaChunk is the size of the arena's chunks; a bigger record gets a chunk of its own.
const arenaChunk = 1 << 20

var (
	_ router.Log         = (*MemLog)(nil)
	_ router.RangeReader = (*MemLog)(nil)
)

// NewMemLog returns an empty log whose first offset is 0.
func NewMemLog() *MemLog { return &MemLog{corrupt: map[int64]bool{}} }

// Append appends a record and returns its offset.
func (l *MemLog) Append(key, value []byte, at time.Time) int64 {
	return l.AppendRecord(router.Record{Key: key, Value: value, Timestamp: at})
}

// AppendRecord appends rec, its headers too (copied, in order), and returns its offset.
func (l *MemLog) AppendRecord(rec router.Record) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	key, value, at := rec.Key, rec.Value, rec.Timestamp
	size := len(key) + len(value)
	last := len(l.arena) - 1
	if last < 0 || len(l.arena[last])+size > cap(l.arena[last]) {
		l.arena = append(l.arena, make([]byte, 0, max(arenaChunk, size)))
		last++
	}
	e := memEntry{chunk: int32(last), at: int32(len(l.arena[last])), keyLen: int32(len(key)), valueLen: int32(len(value))}
	if key == nil {
		e.keyLen = -1
	}
	if value == nil {
		e.valueLen = -1
	}
	l.arena[last] = append(append(l.arena[last], key...), value...)
	if !at.IsZero() && l.stamps == nil {
		l.stamps = make([]time.Time, len(l.entries), cap(l.entries))
	}
	if l.stamps != nil {
		l.stamps = append(l.stamps, at)
	}
	if len(rec.Headers) > 0 && l.headers == nil {
		l.headers = make([][]router.Header, len(l.entries), cap(l.entries))
	}
	if l.headers != nil {
		var kept []router.Header
		if len(rec.Headers) > 0 {
			_, kept = appendHeaders(nil, rec.Headers)
		}
		l.headers = append(l.headers, kept)
	}
	l.entries = append(l.entries, e)
	l.high.Store(l.oldest + int64(len(l.entries)))
	return l.oldest + int64(len(l.entries)) - 1
}

// bytesOf returns the key and value of the entry at index i, in the arena (not copies).
func (l *MemLog) bytesOf(i int64) (key, value []byte) {
	e := l.entries[i]
	chunk := l.arena[e.chunk]
	at := int(e.at)
	if e.keyLen >= 0 {
		key = chunk[at : at+int(e.keyLen) : at+int(e.keyLen)]
		at += int(e.keyLen)
	}
	if e.valueLen >= 0 {
		value = chunk[at : at+int(e.valueLen) : at+int(e.valueLen)]
	}
	return key, value
}

// headersOf returns the headers of the entry at index i, as stored (not copies).
func (l *MemLog) headersOf(i int64) []router.Header {
	if l.headers == nil {
		return nil
	}
	return l.headers[i]
}

// headerBytes is what the headers of the entry at index i count in a byte bound.
func (l *MemLog) headerBytes(i int64) int {
	n := 0
	for _, h := range l.headersOf(i) {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// appendHeaders copies the values of headers after what buf holds and returns headers
// naming those copies (nil for none): the headers a log returns are the caller's.
func appendHeaders(buf []byte, headers []router.Header) (_ []byte, copies []router.Header) {
	if len(headers) == 0 {
		return buf, nil
	}
	copies = make([]router.Header, len(headers))
	for i, h := range headers {
		start := len(buf)
		buf = append(buf, h.Value...)
		copies[i] = router.Header{Key: h.Key, Value: buf[start:len(buf):len(buf)]}
		if h.Value == nil {
			copies[i].Value = nil
		}
	}
	return buf, copies
}

// stampOf returns the timestamp of the entry at index i.
func (l *MemLog) stampOf(i int64) time.Time {
	if l.stamps == nil {
		return time.Time{}
	}
	return l.stamps[i]
}

// Trim drops every record below oldest, as retention does.
func (l *MemLog) Trim(oldest int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if oldest <= l.oldest {
		return
	}
	drop := min(oldest-l.oldest, int64(len(l.entries)))
	l.entries = slices.Delete(l.entries, 0, int(drop))
	if l.stamps != nil {
		l.stamps = slices.Delete(l.stamps, 0, int(drop))
	}
	if l.headers != nil {
		l.headers = slices.Delete(l.headers, 0, int(drop))
	}
	// Chunks below the first record kept hold only dropped records: let them go (their
	// indexes stay, so the entries still name theirs).
	below := len(l.arena) - 1
	if len(l.entries) > 0 {
		below = int(l.entries[0].chunk)
	}
	clear(l.arena[:max(below, 0)])
	l.oldest += drop
	l.low.Store(l.oldest)
}

// Corrupt makes the record at offset permanently unreadable.
func (l *MemLog) Corrupt(offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.corrupt[offset] = true
}

// Close closes the log: every Read answers router.ErrLogClosed from now on.
func (l *MemLog) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

// FailReads makes every later read fail with err, a transient failure of the log's storage,
// until FailReads(nil).
func (l *MemLog) FailReads(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readErr = err
}

// Reads returns how many times Read was called.
func (l *MemLog) Reads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, run := range l.read {
		n += int(run.n)
	}
	return n
}

// ReadOffsets returns the offsets Read was called with, in order.
func (l *MemLog) ReadOffsets() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var offsets []int64
	for _, run := range l.read {
		for off := run.first; off < run.first+run.n; off++ {
			offsets = append(offsets, off)
		}
	}
	return offsets
}

// countLocked records reads of the n offsets from offset.
func (l *MemLog) countLocked(offset int64, n int) {
	if last := len(l.read) - 1; last >= 0 && l.read[last].first+l.read[last].n == offset {
		l.read[last].n += int64(n)
	} else {
		l.read = append(l.read, readRun{offset, int64(n)})
	}
}

// OnRead has f called with the offset of every later Read, before the read and without the
// log's lock held, so that a test can check what the reader holds at that moment. Nil
// removes it.
func (l *MemLog) OnRead(f func(offset int64)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onRead = f
}

// Read implements router.Log.
func (l *MemLog) Read(offset int64) (router.Record, error) {
	l.mu.Lock()
	if onRead := l.onRead; onRead != nil {
		l.mu.Unlock()
		onRead(offset)
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	l.countLocked(offset, 1)
	return l.readLocked(offset)
}

// ReadRange implements router.RangeReader. Each offset of the range counts as one read
// (Reads, ReadOffsets, OnRead). The records' keys, values and header values are copied into
// one buffer the caller owns.
func (l *MemLog) ReadRange(offset int64, limit, maxBytes int, dst []router.Record) ([]router.Record, error) {
	l.mu.Lock()
	n, size := l.rangeLocked(offset, limit, maxBytes)
	if onRead := l.onRead; onRead != nil {
		l.mu.Unlock()
		for i := range max(n, 1) {
			onRead(offset + int64(i))
		}
		l.mu.Lock()
		// What the log holds may have changed since the range was measured: take what is
		// still readable of it.
		n = l.readableLocked(offset, n)
	}
	defer l.mu.Unlock()
	if n == 0 { // the first record fails, as Read answers
		l.countLocked(offset, 1)
		_, err := l.readLocked(offset)
		if err == nil {
			err = fmt.Errorf("offset %d: the range changed while it was read", offset)
		}
		return dst, err
	}
	l.countLocked(offset, n)
	buf := make([]byte, 0, size)
	for i := range n {
		index := offset + int64(i) - l.oldest
		k, v := l.bytesOf(index)
		var key, value []byte
		var headers []router.Header
		buf, key, value = appendRecord(buf, k, v)
		buf, headers = appendHeaders(buf, l.headersOf(index))
		dst = append(dst, router.Record{Key: key, Value: value, Timestamp: l.stampOf(index), Headers: headers})
	}
	return dst, nil
}

// rangeLocked measures the range ReadRange returns from offset: how many records, and their
// bytes. Zero means the first record fails.
func (l *MemLog) rangeLocked(offset int64, limit, maxBytes int) (n, size int) {
	if l.closed || l.readErr != nil || offset < l.oldest {
		return 0, 0
	}
	hwm := l.oldest + int64(len(l.entries))
	for off := offset; off < hwm && n < limit && !l.corrupt[off]; off++ {
		e := l.entries[off-l.oldest]
		n++
		size += int(max(e.keyLen, 0)+max(e.valueLen, 0)) + l.headerBytes(off-l.oldest)
		if size >= maxBytes {
			break
		}
	}
	return n, size
}

// readableLocked returns how many of the n records from offset can be read now.
func (l *MemLog) readableLocked(offset int64, n int) int {
	if l.closed || l.readErr != nil || offset < l.oldest {
		return 0
	}
	readable := 0
	for off := offset; readable < n && off < l.oldest+int64(len(l.entries)) && !l.corrupt[off]; off++ {
		readable++
	}
	return readable
}

// readLocked reads one record as Read does, without counting it.
func (l *MemLog) readLocked(offset int64) (router.Record, error) {
	switch {
	case l.closed:
		return router.Record{}, router.ErrLogClosed
	case l.readErr != nil:
		return router.Record{}, l.readErr
	case offset < l.oldest:
		return router.Record{}, fmt.Errorf("offset %d below %d: %w", offset, l.oldest, router.ErrNotFound)
	case offset >= l.oldest+int64(len(l.entries)):
		return router.Record{}, fmt.Errorf("offset %d at or above the high watermark", offset)
	case l.corrupt[offset]:
		return router.Record{}, fmt.Errorf("offset %d: checksum mismatch: %w", offset, router.ErrCorrupt)
	}
	index := offset - l.oldest
	k, v := l.bytesOf(index)
	buf, key, value := appendRecord(make([]byte, 0, len(k)+len(v)+l.headerBytes(index)), k, v) // one allocation for all
	_, headers := appendHeaders(buf, l.headersOf(index))
	return router.Record{Key: key, Value: value, Timestamp: l.stampOf(index), Headers: headers}, nil
}

// appendRecord copies a record's key and value after what buf holds and returns them as
// slices of it, a nil key or value staying nil: the records a log returns are the caller's.
func appendRecord(buf, k, v []byte) (_, key, value []byte) {
	start := len(buf)
	buf = append(buf, k...)
	key = buf[start:len(buf):len(buf)]
	buf = append(buf, v...)
	value = buf[start+len(key) : len(buf) : len(buf)]
	if k == nil {
		key = nil
	}
	if v == nil {
		value = nil
	}
	return buf, key, value
}

// HighWatermark implements router.Log.
func (l *MemLog) HighWatermark() int64 { return l.high.Load() }

// Oldest implements router.Log.
func (l *MemLog) Oldest() int64 { return l.low.Load() }

// MemLogs is a set of MemLogs by (topic, partition), implementing router.Logs and
// router.ManyGetter. The zero value is empty and ready to use. Get and GetMany take no lock,
// since a node resolves a log on every consume: a change copies the topic's table (and, for
// a new topic, the table of topics) and replaces it.
type MemLogs struct {
	mu       sync.Mutex                            // serialises Log and Replace
	logs     atomic.Pointer[map[string]*topicLogs] // never changed once stored; nil: none
	gets     atomic.Int64
	getManys atomic.Int64
}

// topicLogs holds the logs of one topic by partition; never changed once stored.
type topicLogs = partitionmap.Map[MemLog]

var (
	_ router.Logs       = (*MemLogs)(nil)
	_ router.ManyGetter = (*MemLogs)(nil)
)

// Log returns the log of (topic, partition), creating an empty one if needed.
func (m *MemLogs) Log(topic string, partition int32) *MemLog {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.lookup(topic, partition); ok {
		return l
	}
	l := NewMemLog()
	m.store(topic, partition, l)
	return l
}

// Replace installs l as the log of (topic, partition), as a move or a recreate does.
func (m *MemLogs) Replace(topic string, partition int32, l *MemLog) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.store(topic, partition, l)
}

// lookup returns the log of (topic, partition).
func (m *MemLogs) lookup(topic string, partition int32) (*MemLog, bool) {
	if topics := m.logs.Load(); topics != nil {
		if logs := (*topics)[topic]; logs != nil {
			l := logs.Get(partition)
			return l, l != nil
		}
	}
	return nil, false
}

// store publishes copies of the tables with l as the log of (topic, partition). The caller
// holds m.mu.
func (m *MemLogs) store(topic string, partition int32, l *MemLog) {
	topics := map[string]*topicLogs{}
	if old := m.logs.Load(); old != nil {
		topics = maps.Clone(*old)
	}
	logs := topics[topic].Clone()
	logs.Set(partition, l)
	topics[topic] = logs
	m.logs.Store(&topics)
}

// Lookups returns how many Get and GetMany calls were made.
func (m *MemLogs) Lookups() (gets, getManys int) {
	return int(m.gets.Load()), int(m.getManys.Load())
}

// Get implements router.Logs. An unknown partition is an error.
func (m *MemLogs) Get(topic string, partition int32) (router.Log, error) {
	m.gets.Add(1)
	l, ok := m.lookup(topic, partition)
	if !ok {
		return nil, fmt.Errorf("routertest: no log for %s/%d", topic, partition)
	}
	return l, nil
}

// GetMany implements router.ManyGetter, from one version of the tables.
func (m *MemLogs) GetMany(topic string, partitions []int32, into []router.Log) error {
	m.getManys.Add(1)
	var logs *topicLogs
	if topics := m.logs.Load(); topics != nil {
		logs = (*topics)[topic]
	}
	for i, p := range partitions {
		var l *MemLog
		if logs != nil {
			l = logs.Get(p)
		}
		if l == nil {
			return fmt.Errorf("routertest: no log for %s/%d", topic, p)
		}
		into[i] = l
	}
	return nil
}
