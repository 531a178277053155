package filelog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/router"
)

// Errors of the file log, besides the router's (router.ErrNotFound, router.ErrCorrupt,
// router.ErrLogClosed). Test them with errors.Is.
var (
	// ErrOutOfRange: Read of an offset at or past the high watermark (nothing is there yet).
	ErrOutOfRange = errors.New("filelog: offset at or past the high watermark")
	// ErrTooLarge: Append of a record whose key and value exceed MaxRecordBytes.
	ErrTooLarge = errors.New("filelog: record too large")
	// ErrUnknownPartition: the store has no such topic or partition.
	ErrUnknownPartition = errors.New("filelog: unknown topic or partition")
	// ErrInvalidName: a topic name the store cannot keep in a directory name.
	ErrInvalidName = errors.New("filelog: invalid topic name")
)

// A Log is one partition: an append-only sequence of records numbered from 0, kept in
// segment files in its own directory. It implements router.Log. It is safe for concurrent
// use: appends are serialized, reads run in parallel with each other, and HighWatermark and
// Oldest never wait.
type Log struct {
	dir  string
	opts Options
	// notify is called after each append with the new high watermark (Options.OnAppend
	// bound to this partition), outside the lock.
	notify func(hwm int64)

	// hwm is what readers see: with SyncEveryAppend, the offset after the last durable
	// record, so that nothing is read (and acked) that a power cut could take back.
	hwm    atomic.Int64
	oldest atomic.Int64

	mu       sync.RWMutex
	segs     []*segment // by base; the last one is active
	bytes    int64      // sum of the segments' end
	closed   bool
	failed   error       // a write whose damage could not be undone: no more appends
	refusing atomic.Bool // failed is set: Store.AppendAny passes the log by
	dirDirty bool        // segment files created or removed since the directory was synced
	buf      []byte

	// Group commit (SyncEveryAppend): an append writes its frame under mu, then waits for
	// an fsync begun after its write. One waiter at a time runs the fsync, with mu let go,
	// for every frame written before it began; appends meanwhile write theirs, and the next
	// fsync covers them all. The frames awaiting an fsync are all in the active segment: a
	// roll waits for them first.
	// next is the offset the next append writes (hwm plus the frames awaiting an fsync),
	// written under mu; atomic so that Store.AppendAny can weigh partitions without it.
	next    atomic.Int64
	syncing bool      // an fsync runs with mu let go
	synced  sync.Cond // broadcast when it ends; L is &mu
	// waiting counts the appends awaiting an fsync (one of them may be running it): while
	// it is above zero, an append here shares an fsync with them (Store.AppendAny).
	waiting atomic.Int32
}

var _ router.Log = (*Log)(nil)

// openLog opens the log in dir, creating the directory and a first segment if needed. It
// scans every segment file to index its frames (4 bytes of memory per record), cuts a torn
// tail off the last one, and applies retention.
func openLog(dir string, opts Options, notify func(int64)) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases) // ReadDir sorts by name already; the order matters, so say it
	l := &Log{dir: dir, opts: opts, notify: notify}
	l.synced.L = &l.mu
	for i, base := range bases {
		seg, err := openSegment(dir, base, i == len(bases)-1)
		if err != nil {
			l.closeFiles()
			return nil, err
		}
		if i > 0 {
			prev := l.segs[i-1]
			prev.count = base - prev.base
			if int64(len(prev.pos)) > prev.count {
				// More frames than offsets up to the next segment: the rest are not its.
				l.bytes -= prev.end
				prev.end = int64(prev.pos[prev.count])
				prev.pos = prev.pos[:prev.count]
				l.bytes += prev.end
			}
		}
		l.segs = append(l.segs, seg)
		l.bytes += seg.end
	}
	if len(l.segs) == 0 {
		seg, err := createSegment(dir, 0)
		if err != nil {
			return nil, err
		}
		l.segs = []*segment{seg}
		l.dirDirty = true
	}
	active := l.segs[len(l.segs)-1]
	l.next.Store(active.base + active.count)
	l.hwm.Store(l.next.Load())
	l.oldest.Store(l.segs[0].base)
	if err := l.enforceRetention(); err != nil {
		l.closeFiles()
		return nil, err
	}
	if opts.Sync == SyncEveryAppend {
		if err := l.syncLocked(); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	return l, nil
}

// HighWatermark returns the next offset to be written. It implements router.Log.
func (l *Log) HighWatermark() int64 { return l.hwm.Load() }

// Oldest returns the oldest retained offset (the high watermark when the log is empty).
// It implements router.Log.
func (l *Log) Oldest() int64 { return l.oldest.Load() }

// Read returns the record at offset. It implements router.Log: router.ErrNotFound below
// Oldest, ErrOutOfRange at or past the high watermark, router.ErrCorrupt (wrapped, with the
// reason) for a record whose frame is damaged, router.ErrLogClosed once the log is closed,
// and a wrapped I/O error if the file cannot be read. The record's slices belong to the
// caller.
func (l *Log) Read(offset int64) (router.Record, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch {
	case l.closed:
		return router.Record{}, router.ErrLogClosed
	case offset < l.oldest.Load():
		return router.Record{}, router.ErrNotFound
	case offset >= l.hwm.Load():
		return router.Record{}, ErrOutOfRange
	}
	// The segment holding offset: the last one whose base is at or below it.
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	seg := l.segs[i]
	start, end, ok := seg.frameBounds(offset - seg.base)
	if !ok {
		return router.Record{}, l.corrupt(offset, errShortFrame)
	}
	buf := make([]byte, end-start)
	if _, err := seg.f.ReadAt(buf, start); err != nil {
		return router.Record{}, fmt.Errorf("filelog: read offset %d in %s: %w", offset, l.dir, err)
	}
	f, n, err := decodeFrame(buf)
	switch {
	case err != nil:
		return router.Record{}, l.corrupt(offset, err)
	case n != len(buf) || f.offset != offset:
		return router.Record{}, l.corrupt(offset, errBadLength)
	}
	return f.record(), nil
}

func (l *Log) corrupt(offset int64, why error) error {
	return fmt.Errorf("%w: offset %d in %s: %w", router.ErrCorrupt, offset, l.dir, why)
}

// Append writes a record at the high watermark and returns its offset. ts is kept as the
// record's timestamp (the zero time: none). With SyncEveryAppend the record is on disk when
// Append returns, and readable only then (concurrent appends share an fsync); otherwise it
// is in the page cache, which a crash of the process does not lose. Errors: ErrTooLarge, router.ErrLogClosed, and I/O errors; a failed append leaves
// nothing behind, or, if it cannot undo a partial write, fails every later append.
func (l *Log) Append(key, value []byte, ts time.Time) (int64, error) {
	return l.AppendRecord(router.Record{Key: key, Value: value, Timestamp: ts})
}

// AppendRecord is Append of rec: its key, value, timestamp and headers, which Read and
// ReadRange return in order. ErrTooLarge bounds the key, value and headers together
// (MaxRecordBytes).
func (l *Log) AppendRecord(rec router.Record) (int64, error) {
	if frameSize(rec.Key, rec.Value, rec.Headers)-minFrameSize > MaxRecordBytes {
		return 0, ErrTooLarge
	}
	l.mu.Lock()
	offset, err := l.appendLocked(&rec)
	if err == nil && l.opts.Sync == SyncEveryAppend {
		l.waiting.Add(1)
		err = l.awaitDurableLocked(offset + 1)
		l.waiting.Add(-1)
	}
	hwm, notify := l.hwm.Load(), l.notify
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if notify != nil {
		notify(hwm)
	}
	return offset, nil
}

// appendLocked writes rec's frame at the end of the active segment and returns its offset.
// Without SyncEveryAppend the record is readable at once; with it, once awaitDurableLocked
// has seen it synced. It may let mu go (a roll waits for the frames awaiting an fsync).
func (l *Log) appendLocked(rec *router.Record) (int64, error) {
	size := int64(frameSize(rec.Key, rec.Value, rec.Headers))
	for {
		switch {
		case l.closed:
			return 0, router.ErrLogClosed
		case l.failed != nil:
			return 0, l.failed
		}
		active := l.segs[len(l.segs)-1]
		if active.end == 0 || active.end+size <= l.opts.SegmentBytes {
			break
		}
		if next := l.next.Load(); l.hwm.Load() < next {
			if err := l.awaitDurableLocked(next); err != nil {
				return 0, err
			}
			continue // mu was let go: look again
		}
		if err := l.roll(); err != nil {
			return 0, err
		}
		break
	}
	if err := l.enforceRetention(); err != nil {
		return 0, err
	}
	seg := l.segs[len(l.segs)-1]
	offset := l.next.Load()
	l.buf = appendFrame(l.buf[:0], offset, rec.Timestamp, rec.Key, rec.Value, rec.Headers)
	if _, err := seg.f.WriteAt(l.buf, seg.end); err != nil {
		return 0, l.undo(seg, fmt.Errorf("filelog: append to %s: %w", l.dir, err))
	}
	seg.dirty = true
	seg.pos = append(seg.pos, uint32(seg.end))
	seg.end += size
	seg.count++
	l.bytes += size
	l.next.Store(offset + 1)
	if l.opts.Sync != SyncEveryAppend {
		l.hwm.Store(offset + 1)
	}
	if len(l.buf) > 64<<10 {
		l.buf = nil // do not keep one huge record's buffer
	}
	return offset, nil
}

// awaitDurableLocked waits until the records below upto are durable (and readable), running
// the fsync itself when none is running: the group commit of SyncEveryAppend. A failed fsync
// takes back every record not yet durable and fails the log.
func (l *Log) awaitDurableLocked(upto int64) error {
	for l.hwm.Load() < upto {
		switch {
		case l.failed != nil:
			return l.failed
		case l.closed:
			return router.ErrLogClosed
		case l.syncing:
			l.synced.Wait()
			continue
		}
		target := l.next.Load()
		var files []*os.File
		for _, seg := range l.segs {
			if seg.dirty {
				files = append(files, seg.f)
				seg.dirty = false
			}
		}
		l.syncing = true
		l.mu.Unlock()
		var err error
		for _, f := range files {
			if err = l.syncFile(f); err != nil {
				break
			}
		}
		l.mu.Lock()
		l.syncing = false
		if err != nil {
			l.takeBack(fmt.Errorf("filelog: sync %s: %w", l.dir, err))
		} else {
			l.hwm.Store(target)
		}
		l.synced.Broadcast()
	}
	return nil
}

// takeBack cuts the frames not yet durable off the active segment after a failed fsync, and
// refuses further appends: the page cache is not to be trusted, and they would sit on top
// of those frames.
func (l *Log) takeBack(err error) {
	l.fail(err)
	seg := l.segs[len(l.segs)-1]
	if keep := l.hwm.Load() - seg.base; keep < int64(len(seg.pos)) {
		end := int64(seg.pos[keep])
		l.bytes -= seg.end - end
		seg.pos, seg.end, seg.count = seg.pos[:keep], end, keep
	}
	l.next.Store(l.hwm.Load())
	l.undo(seg, err)
}

// syncFile fsyncs a segment file: Options.syncFile, which tests set, or the file's Sync.
func (l *Log) syncFile(f *os.File) error {
	if l.opts.syncFile != nil {
		return l.opts.syncFile(f)
	}
	return f.Sync()
}

// undo cuts a partly written frame off the active segment, so the next append starts on a
// frame boundary. If it cannot, the log takes no more appends.
func (l *Log) undo(seg *segment, err error) error {
	if terr := seg.f.Truncate(seg.end); terr != nil {
		l.fail(errors.Join(err, fmt.Errorf("filelog: undo: %w", terr)))
		return l.failed
	}
	return err
}

// fail makes the log refuse every later append with err.
func (l *Log) fail(err error) {
	l.failed = err
	l.refusing.Store(true)
}

// roll seals the active segment and starts a new one at the high watermark.
func (l *Log) roll() error {
	seg, err := createSegment(l.dir, l.next.Load())
	if err != nil {
		return fmt.Errorf("filelog: roll %s: %w", l.dir, err)
	}
	l.segs = append(l.segs, seg)
	return l.dirChanged()
}

// dirChanged records that segment files were created or removed, and makes the directory
// durable at once when every append must be.
func (l *Log) dirChanged() error {
	l.dirDirty = true
	if l.opts.Sync == SyncEveryAppend {
		if err := SyncDir(l.dir); err != nil {
			return fmt.Errorf("filelog: sync %s: %w", l.dir, err)
		}
		l.dirDirty = false
	}
	return nil
}

// enforceRetention removes the oldest segments while the log holds more than MaxSegments
// segments or more than MaxBytes bytes. The active segment always stays.
func (l *Log) enforceRetention() error {
	removed := false
	for len(l.segs) > 1 && (l.opts.MaxSegments > 0 && len(l.segs) > l.opts.MaxSegments ||
		l.opts.MaxBytes > 0 && l.bytes > l.opts.MaxBytes) {
		seg := l.segs[0]
		if err := os.Remove(filepath.Join(l.dir, segmentName(seg.base))); err != nil {
			return fmt.Errorf("filelog: retention in %s: %w", l.dir, err)
		}
		seg.f.Close()
		l.segs[0] = nil
		l.segs = l.segs[1:]
		l.bytes -= seg.end
		l.oldest.Store(l.segs[0].base)
		removed = true
	}
	if removed {
		return l.dirChanged()
	}
	return nil
}

// Sync makes every record appended so far durable: it fsyncs each segment written since its
// last sync, and the directory if segments were created or removed. With SyncNone, call it
// from a ticker of your own for a periodic policy.
func (l *Log) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.syncing { // its files are no longer marked dirty
		l.synced.Wait()
	}
	if l.closed {
		return router.ErrLogClosed
	}
	return l.commitLocked()
}

// commitLocked syncs everything written (no fsync may be running) and makes the records
// awaiting an fsync durable, or, if the fsync fails, takes them back.
func (l *Log) commitLocked() error {
	err := l.syncLocked()
	switch {
	case err == nil:
		l.hwm.Store(l.next.Load())
	case l.hwm.Load() < l.next.Load():
		err = fmt.Errorf("filelog: sync %s: %w", l.dir, err)
		l.takeBack(err)
	}
	l.synced.Broadcast()
	return err
}

func (l *Log) syncLocked() error {
	for _, seg := range l.segs {
		if seg.dirty {
			if err := l.syncFile(seg.f); err != nil {
				return err
			}
			seg.dirty = false
		}
	}
	if l.dirDirty {
		if err := SyncDir(l.dir); err != nil {
			return err
		}
		l.dirDirty = false
	}
	return nil
}

// Close syncs the log and closes its files. Afterwards Read and Append answer
// router.ErrLogClosed, while HighWatermark and Oldest still answer. Closing twice is a
// no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.syncing { // it fsyncs the files Close closes
		l.synced.Wait()
	}
	if l.closed {
		return nil
	}
	l.closed = true
	var err error
	if l.failed == nil {
		err = l.commitLocked() // appends awaiting it are answered: durable, or failed
	}
	return errors.Join(err, l.closeFiles())
}

func (l *Log) closeFiles() error {
	var errs []error
	for _, seg := range l.segs {
		errs = append(errs, seg.f.Close())
	}
	return errors.Join(errs...)
}
