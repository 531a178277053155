package filelog

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// openTestStore opens a store in dir (a new one when empty) with topic "q" of 4 partitions.
func openTestStore(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.CreateTopic("q", 4))
	return s
}

// anyAnswer is the answer to an AppendAny.
type anyAnswer struct {
	partition int32
	offset    int64
	err       error
}

func appendAnyAsync(s *Store, v string) <-chan anyAnswer {
	done := make(chan anyAnswer, 1)
	go func() {
		p, off, err := s.AppendAny("q", router.Record{Value: []byte(v)})
		done <- anyAnswer{p, off, err}
	}()
	return done
}

// TestAppendAnySharesFsyncs: appends made while a partition's fsync runs go to that
// partition and share its next fsync, rather than each running one of its own elsewhere
// (appends spread round robin over 4 partitions would run 4 fsyncs here, not 2).
func TestAppendAnySharesFsyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGatedSyncs()
		s := openTestStore(t, "", Options{Sync: SyncEveryAppend, syncFile: g.sync})
		first := appendAnyAsync(s, "v0")
		synctest.Wait() // its fsync runs
		require.Equal(t, int32(1), g.calls.Load())
		var rest []<-chan anyAnswer
		for i := 1; i <= 3; i++ {
			rest = append(rest, appendAnyAsync(s, fmt.Sprint("v", i)))
			synctest.Wait()
			require.Equal(t, int32(1), g.calls.Load(), "append %d runs an fsync of its own", i)
		}
		g.release <- nil
		got := <-first
		require.NoError(t, got.err)
		require.Equal(t, int64(0), got.offset)
		synctest.Wait() // one of the three runs the next fsync, for all
		require.Equal(t, int32(2), g.calls.Load())
		g.release <- nil
		offsets := map[int64]bool{}
		for _, done := range rest {
			a := <-done
			require.NoError(t, a.err)
			require.Equal(t, got.partition, a.partition)
			offsets[a.offset] = true
		}
		require.Equal(t, map[int64]bool{1: true, 2: true, 3: true}, offsets)
		require.Equal(t, int32(2), g.calls.Load(), "four appends, two fsyncs")
		l, err := s.Log("q", got.partition)
		require.NoError(t, err)
		require.Equal(t, int64(4), l.HighWatermark())
		close(g.release)
	})
}

// TestAppendAnySpread: however long a partition's group commit stays open, AppendAny moves
// on once that partition is anySlack records ahead of the emptiest, so the partitions stay
// within anySlack of each other; each still shares its fsyncs (one running, one for all the
// appends that waited on it).
func TestAppendAnySpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var calls atomic.Int32
		held := func(f *os.File) error {
			calls.Add(1)
			<-gate
			return f.Sync()
		}
		s := openTestStore(t, "", Options{Sync: SyncEveryAppend, syncFile: held})
		const n = 4*anySlack + 10
		var answers []<-chan anyAnswer
		for i := range n {
			answers = append(answers, appendAnyAsync(s, fmt.Sprint("v", i)))
			synctest.Wait() // written, and waiting for an fsync that does not end
		}
		require.Equal(t, int32(4), calls.Load(), "one fsync running a partition")
		close(gate)
		per := map[int32]int64{}
		for _, done := range answers {
			a := <-done
			require.NoError(t, a.err)
			per[a.partition]++
		}
		require.Equal(t, int32(8), calls.Load(), "and one more a partition, for the appends that waited")
		require.Len(t, per, 4)
		least, most := int64(n), int64(0)
		for p, count := range per {
			l, err := s.Log("q", p)
			require.NoError(t, err)
			require.Equal(t, count, l.HighWatermark())
			least, most = min(least, count), max(most, count)
		}
		require.LessOrEqual(t, most-least, int64(anySlack), "records a partition: %v", per)
	})
}

// TestAppendAnySyncNoneSpreads: without SyncEveryAppend no group commit is open, and
// AppendAny fills the emptiest partition, turning among equals: one after another, appends
// go round the partitions.
func TestAppendAnySyncNoneSpreads(t *testing.T) {
	s := openTestStore(t, "", Options{})
	per := map[int32]int64{}
	for i := range 4 * 5 {
		p, off, err := s.AppendAny("q", router.Record{Value: []byte(fmt.Sprint("v", i))})
		require.NoError(t, err)
		require.Equal(t, per[p], off)
		per[p]++
		require.Equal(t, int64(i/4+1), per[p], "append %d went to partition %d: %v", i, p, per)
	}
	_, _, err := s.AppendAny("nope", router.Record{Value: []byte("v")})
	require.ErrorIs(t, err, ErrUnknownPartition)
}

// TestCreatePartitions: a store given some of a topic's partitions holds those alone, across
// a reopen, and AppendAny picks among them; a negative partition creates none.
func TestCreatePartitions(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	require.ErrorContains(t, s.CreatePartitions("q", []int32{1, -1}), "negative")
	_, _, ok := s.Partitions("q")
	require.False(t, ok, "nothing created")
	require.NoError(t, s.CreatePartitions("q", []int32{4, 1}))
	require.NoError(t, s.CreatePartitions("q", []int32{1}), "kept")
	for i := range 8 {
		p, _, err := s.AppendAny("q", router.Record{Value: []byte(fmt.Sprint("v", i))})
		require.NoError(t, err)
		require.Contains(t, []int32{1, 4}, p)
	}
	require.NoError(t, s.Close())
	s, err = Open(dir, Options{})
	require.NoError(t, err)
	defer s.Close()
	local, _, ok := s.Partitions("q")
	require.True(t, ok)
	require.Equal(t, []int32{1, 4}, local)
}

// TestAppendAnyPowerCut: writers append to a topic's partitions through AppendAny at once
// (sharing fsyncs), and the power goes while they run. Every append answered before the cut
// is in what the cut leaves, in its partition at its offset with its value.
func TestAppendAnyPowerCut(t *testing.T) {
	dir := t.TempDir()
	d := newPowerCutDisk(dir)
	s := openTestStore(t, dir, Options{Sync: SyncEveryAppend, SegmentBytes: 16 * int64(testFrame), syncFile: d.sync})
	const writers, each = 8, 60
	cutDir, cutAcked := appendAcrossCut(t, d, writers, each, func(v string) (placed, error) {
		p, off, err := s.AppendAny("q", router.Record{Value: []byte(v)})
		return placed{p, off}, err
	})
	require.NotEmpty(t, cutAcked)
	requireAcked := func(dir string, acked map[placed]string) {
		t.Helper()
		after, err := Open(dir, Options{})
		require.NoError(t, err)
		defer after.Close()
		for at, v := range acked {
			l, err := after.Log("q", at.partition)
			require.NoError(t, err, "partition %d had appends answered before the cut", at.partition)
			rec, err := l.Read(at.offset)
			require.NoError(t, err, "%+v was answered before the cut", at)
			require.Equal(t, v, string(rec.Value), "%+v", at)
		}
	}
	requireAcked(cutDir, cutAcked)
	// Without the cut, everything is there.
	final := t.TempDir()
	all, err := d.cut(final)
	require.NoError(t, err)
	require.Len(t, all, writers*each)
	requireAcked(final, all)
}

// TestAppendAnyPassesFailedPartition: a partition whose fsync failed refuses appends from
// then on; AppendAny appends elsewhere rather than fail sends the other partitions would
// take (that partition, left behind, is the emptiest).
func TestAppendAnyPassesFailedPartition(t *testing.T) {
	errDisk := errors.New("disk gone")
	var calls atomic.Int32
	failFirst := func(f *os.File) error {
		if calls.Add(1) == 1 {
			return errDisk
		}
		return f.Sync()
	}
	s := openTestStore(t, "", Options{Sync: SyncEveryAppend, syncFile: failFirst})
	failed, _, err := s.AppendAny("q", router.Record{Value: []byte("lost")})
	require.ErrorIs(t, err, errDisk)
	for i := range 8 {
		p, _, err := s.AppendAny("q", router.Record{Value: []byte(fmt.Sprint("v", i))})
		require.NoError(t, err, "append %d", i)
		require.NotEqual(t, failed, p, "append %d", i)
	}
	l, err := s.Log("q", failed)
	require.NoError(t, err)
	_, err = l.Append(nil, []byte("v"), time.Time{})
	require.ErrorIs(t, err, errDisk, "the failed partition still refuses appends")
}
