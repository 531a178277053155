package filelog

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// gatedSyncs is a syncFile that counts fsyncs and holds each one until the test lets it
// go, failing those the test says.
type gatedSyncs struct {
	calls   atomic.Int32
	release chan error // one value a sync: its result
}

func newGatedSyncs() *gatedSyncs { return &gatedSyncs{release: make(chan error)} }

func (g *gatedSyncs) sync(f *os.File) error {
	g.calls.Add(1)
	if err := <-g.release; err != nil {
		return err
	}
	return f.Sync()
}

// appendAsync appends the record of offset i's shape in a goroutine and reports its result.
func appendAsync(l *Log, i int64) <-chan error {
	done := make(chan error, 1)
	go func() {
		off, err := l.Append(fmt.Appendf(nil, "key-%04d", i), value(i), time.Unix(1000, i))
		if err == nil && off != i {
			err = fmt.Errorf("appended at %d, not %d", off, i)
		}
		done <- err
	}()
	return done
}

func answered(done <-chan error) bool {
	select {
	case err := <-done:
		panic(fmt.Sprintf("answered before its fsync: %v", err))
	default:
		return false
	}
}

// TestGroupCommitSharesFsyncs: appends made while an fsync runs wait, unanswered and
// unreadable, and then share one fsync; none is answered before an fsync begun after its
// write has returned.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGatedSyncs()
		l := openTestLog(t, "", Options{Sync: SyncEveryAppend, syncFile: g.sync})
		first := appendAsync(l, 0)
		synctest.Wait() // the first append's fsync runs
		require.Equal(t, int32(1), g.calls.Load())
		var rest []<-chan error
		for i := int64(1); i <= 3; i++ {
			rest = append(rest, appendAsync(l, i))
			synctest.Wait() // it wrote its frame and waits
		}
		require.False(t, answered(first))
		for _, done := range rest {
			require.False(t, answered(done))
		}
		require.Equal(t, int64(0), l.HighWatermark(), "nothing is readable before it is durable")
		_, err := l.Read(0)
		require.ErrorIs(t, err, ErrOutOfRange)

		g.release <- nil // the first fsync ends: only the first append is answered
		require.NoError(t, <-first)
		synctest.Wait() // one of the others runs the next fsync, for all three
		require.Equal(t, int32(2), g.calls.Load())
		require.Equal(t, int64(1), l.HighWatermark())
		for _, done := range rest {
			require.False(t, answered(done))
		}
		g.release <- nil
		for _, done := range rest {
			require.NoError(t, <-done)
		}
		require.Equal(t, int32(2), g.calls.Load(), "three appends, one fsync")
		require.Equal(t, int64(4), l.HighWatermark())
		for off := range int64(4) {
			requireRecord(t, l, off)
		}
		close(g.release) // Close syncs nothing: everything is synced
		require.NoError(t, l.Close())
		require.Equal(t, int32(2), g.calls.Load())
	})
}

// TestGroupCommitFailedFsync: an fsync that fails fails every append waiting for it, takes
// their records back (the file and the index), and fails every later append; the records
// made durable before stay, also across a reopen.
func TestGroupCommitFailedFsync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGatedSyncs()
		dir := t.TempDir()
		l := openTestLog(t, dir, Options{Sync: SyncEveryAppend, syncFile: g.sync})
		first := appendAsync(l, 0)
		synctest.Wait()
		second := appendAsync(l, 1)
		synctest.Wait()
		third := appendAsync(l, 2)
		synctest.Wait()
		g.release <- nil
		require.NoError(t, <-first)
		synctest.Wait()
		errDisk := errors.New("disk gone")
		g.release <- errDisk
		require.ErrorIs(t, <-second, errDisk)
		require.ErrorIs(t, <-third, errDisk)

		require.Equal(t, int64(1), l.HighWatermark())
		requireRecord(t, l, 0)
		_, err := l.Read(1)
		require.ErrorIs(t, err, ErrOutOfRange)
		_, err = l.Append([]byte("k"), []byte("v"), time.Time{})
		require.ErrorIs(t, err, errDisk, "no append sits on top of records taken back")
		info, err := os.Stat(filepath.Join(dir, segmentName(0)))
		require.NoError(t, err)
		require.Equal(t, int64(testFrame), info.Size(), "the frames not durable are cut off the file")
		require.NoError(t, l.Close(), "the failure was the appends' to report")

		l = openTestLog(t, dir, Options{Sync: SyncEveryAppend})
		require.Equal(t, int64(1), l.HighWatermark())
		requireRecord(t, l, 0)
	})
}

// TestGroupCommitCloseAnswersWaiters: Close waits for a running fsync, then syncs the
// records still waiting and answers their appends.
func TestGroupCommitCloseAnswersWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGatedSyncs()
		dir := t.TempDir()
		l := openTestLog(t, dir, Options{Sync: SyncEveryAppend, syncFile: g.sync})
		first := appendAsync(l, 0)
		synctest.Wait()
		second := appendAsync(l, 1)
		synctest.Wait()
		closed := make(chan error, 1)
		go func() { closed <- l.Close() }()
		synctest.Wait()
		g.release <- nil // the first append's fsync
		require.NoError(t, <-first)
		// Close or the second append runs the next fsync (Close holds the lock for it, so
		// no synctest.Wait here: an append waiting for the lock is not durably blocked);
		// either answers the second.
		g.release <- nil
		require.NoError(t, <-second)
		require.NoError(t, <-closed)

		l = openTestLog(t, dir, Options{})
		require.Equal(t, int64(2), l.HighWatermark())
		requireRecord(t, l, 1)
	})
}

// powerCutDisk models what a power cut leaves of the segment files under root (a log's or
// a store's directory): each file as it was when its last fsync began (what was written
// later may be lost), files never fsynced not at all. It records, under the same lock, the
// appends answered, so that a cut sees every append answered before it.
type powerCutDisk struct {
	root   string
	mu     sync.Mutex
	images map[string][]byte // by path under root
	acked  map[placed]string // where each answered append is: its value
}

// placed is where an append went: its partition (0 for a lone log) and offset.
type placed struct {
	partition int32
	offset    int64
}

// appendAcrossCut runs writers goroutines, each appending each values through appendOne
// (which answers where its value landed) and telling d of every append answered, and cuts
// the power on d halfway through the first writer's appends, while the others go on. It
// returns the directory the cut left and what had been answered by then.
func appendAcrossCut(t *testing.T, d *powerCutDisk, writers, each int, appendOne func(v string) (placed, error)) (string, map[placed]string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	cutDir := t.TempDir()
	var cutAcked map[placed]string
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if w == 0 && i == each/2 {
					var err error
					if cutAcked, err = d.cut(cutDir); err != nil { // the power goes while the others append
						errs <- err
					}
				}
				v := fmt.Sprintf("w%d-%03d", w, i)
				at, err := appendOne(v)
				if err != nil {
					errs <- err
					return
				}
				d.ack(at, v)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return cutDir, cutAcked
}

func newPowerCutDisk(root string) *powerCutDisk {
	return &powerCutDisk{root: root, images: map[string][]byte{}, acked: map[placed]string{}}
}

func (d *powerCutDisk) sync(f *os.File) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	image := make([]byte, info.Size())
	if _, err := f.ReadAt(image, 0); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	name, err := filepath.Rel(d.root, f.Name())
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.images[name] = image
	d.mu.Unlock()
	return nil
}

func (d *powerCutDisk) ack(at placed, v string) {
	d.mu.Lock()
	d.acked[at] = v
	d.mu.Unlock()
}

// cut writes what the power cut leaves into dir and returns the answered appends.
func (d *powerCutDisk) cut(dir string) (map[placed]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, image := range d.images {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, image, 0o644); err != nil {
			return nil, err
		}
	}
	return maps.Clone(d.acked), nil
}

// TestGroupCommitPowerCut: concurrent appends, some rolling segments, and a power cut while
// they run. Every append answered before the cut is in what the cut leaves, at its offset
// with its value: no append is answered before an fsync that covers it.
func TestGroupCommitPowerCut(t *testing.T) {
	for _, segmentBytes := range []int64{DefaultSegmentBytes, 4 * int64(testFrame)} {
		t.Run(fmt.Sprintf("segment=%d", segmentBytes), func(t *testing.T) {
			dir := t.TempDir()
			d := newPowerCutDisk(dir)
			l := openTestLog(t, dir, Options{Sync: SyncEveryAppend, SegmentBytes: segmentBytes, syncFile: d.sync})
			const writers, each = 4, 60
			cutDir, cutAcked := appendAcrossCut(t, d, writers, each, func(v string) (placed, error) {
				off, err := l.Append(nil, []byte(v), time.Time{})
				return placed{0, off}, err
			})
			require.NotEmpty(t, cutAcked)
			after := openTestLog(t, cutDir, Options{})
			for at, v := range cutAcked {
				rec, err := after.Read(at.offset)
				require.NoError(t, err, "offset %d was answered before the cut", at.offset)
				require.Equal(t, v, string(rec.Value), "offset %d", at.offset)
			}
			// Without the cut, everything is there, offsets dense.
			final := t.TempDir()
			all, err := d.cut(final)
			require.NoError(t, err)
			require.Len(t, all, writers*each)
			after = openTestLog(t, final, Options{})
			require.Equal(t, int64(writers*each), after.HighWatermark())
			for at, v := range all {
				rec, err := after.Read(at.offset)
				require.NoError(t, err)
				require.Equal(t, v, string(rec.Value))
			}
		})
	}
}
