package filelog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// openTestLog opens a log in dir (a fresh one when dir is empty), closed at the end of the
// test.
func openTestLog(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	opts, err := opts.withDefaults()
	require.NoError(t, err)
	l, err := openLog(dir, opts, nil)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func reopen(t *testing.T, l *Log) *Log {
	t.Helper()
	require.NoError(t, l.Close())
	return openTestLog(t, l.dir, l.opts)
}

func value(i int64) []byte { return fmt.Appendf(nil, "value-%04d", i) }

// appendN appends records until the high watermark reaches n.
func appendN(t *testing.T, l *Log, n int64) {
	t.Helper()
	for i := l.HighWatermark(); i < n; i++ {
		off, err := l.Append(fmt.Appendf(nil, "key-%04d", i), value(i), time.Unix(1000, i))
		require.NoError(t, err)
		require.Equal(t, i, off)
	}
}

func requireRecord(t *testing.T, l *Log, off int64) {
	t.Helper()
	rec, err := l.Read(off)
	require.NoError(t, err, "offset %d", off)
	require.Equal(t, fmt.Sprintf("key-%04d", off), string(rec.Key))
	require.Equal(t, string(value(off)), string(rec.Value))
	require.True(t, rec.Timestamp.Equal(time.Unix(1000, off)))
}

func segmentFiles(t *testing.T, dir string) []int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var bases []int64
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name()); ok {
			bases = append(bases, base)
		}
	}
	return bases
}

// testFrame is the size of a record appendN writes: 28 bytes of frame, 8 of key and 10 of
// value. 200-byte segments hold four of them.
var testFrame = frameSize([]byte("key-0000"), value(0), nil)

const smallSegments = 200

func TestAppendAndRead(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncNone, SyncEveryAppend} {
		t.Run(fmt.Sprint("policy ", policy), func(t *testing.T) {
			l := openTestLog(t, "", Options{SegmentBytes: smallSegments, Sync: policy})
			require.Equal(t, int64(0), l.HighWatermark())
			require.Equal(t, int64(0), l.Oldest())
			appendN(t, l, 30)
			require.Equal(t, int64(30), l.HighWatermark())
			require.Equal(t, int64(0), l.Oldest())
			for off := range int64(30) {
				requireRecord(t, l, off)
			}
			bases := segmentFiles(t, l.dir)
			require.Greater(t, len(bases), 5, "small segments roll")
			require.True(t, slices.IsSorted(bases))

			l = reopen(t, l)
			require.Equal(t, int64(30), l.HighWatermark())
			for off := range int64(30) {
				requireRecord(t, l, off)
			}
			appendN(t, l, 35)
			requireRecord(t, l, 34)
		})
	}
}

func TestRecordShapes(t *testing.T) {
	l := openTestLog(t, "", Options{SegmentBytes: 64})
	big := make([]byte, 1000) // larger than a segment: gets one of its own
	for i := range big {
		big[i] = byte(i)
	}
	tests := []struct {
		name       string
		key, value []byte
		ts         time.Time
	}{
		{"empty", nil, nil, time.Time{}},
		{"no timestamp", []byte("k"), []byte("v"), time.Time{}},
		{"larger than a segment", []byte("big"), big, time.Unix(5, 5)},
		{"after the large one", nil, []byte("small"), time.Unix(6, 6)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, err := l.Append(tt.key, tt.value, tt.ts)
			require.NoError(t, err)
			rec, err := l.Read(off)
			require.NoError(t, err)
			require.Equal(t, tt.key, rec.Key)
			require.Equal(t, string(tt.value), string(rec.Value))
			require.True(t, rec.Timestamp.Equal(tt.ts))
			require.Equal(t, tt.ts.IsZero(), rec.Timestamp.IsZero())
		})
	}
	_, err := l.Append(nil, make([]byte, MaxRecordBytes+1), time.Time{})
	require.ErrorIs(t, err, ErrTooLarge)
}

func TestReadErrors(t *testing.T) {
	l := openTestLog(t, "", Options{SegmentBytes: smallSegments, MaxSegments: 2})
	appendN(t, l, 40)
	oldest := l.Oldest()
	require.Greater(t, oldest, int64(0))
	closed := openTestLog(t, "", Options{})
	appendN(t, closed, 3)
	require.NoError(t, closed.Close())

	tests := []struct {
		name   string
		log    *Log
		offset int64
		want   error
	}{
		{"below retention", l, oldest - 1, router.ErrNotFound},
		{"offset zero, retained no more", l, 0, router.ErrNotFound},
		{"negative", l, -1, router.ErrNotFound},
		{"at the high watermark", l, 40, ErrOutOfRange},
		{"past it", l, 1 << 50, ErrOutOfRange},
		{"closed", closed, 1, router.ErrLogClosed},
		{"closed, below retention too", closed, -1, router.ErrLogClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.log.Read(tt.offset)
			require.ErrorIs(t, err, tt.want)
		})
	}
	requireRecord(t, l, oldest)

	// A closed log still answers its bounds, and refuses appends.
	require.Equal(t, int64(3), closed.HighWatermark())
	require.Equal(t, int64(0), closed.Oldest())
	_, err := closed.Append(nil, nil, time.Time{})
	require.ErrorIs(t, err, router.ErrLogClosed)
	require.ErrorIs(t, closed.Sync(), router.ErrLogClosed)
	require.NoError(t, closed.Close(), "closing twice")
}

func TestRetention(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		// wantSegments is how many segments stay after 40 records (4 to a segment).
		wantSegments int
	}{
		{"none", Options{SegmentBytes: smallSegments}, 10},
		{"by count", Options{SegmentBytes: smallSegments, MaxSegments: 3}, 3},
		{"one segment", Options{SegmentBytes: smallSegments, MaxSegments: 1}, 1},
		{"by bytes", Options{SegmentBytes: smallSegments, MaxBytes: 2*smallSegments + 1}, 2},
		{"by bytes, below one segment", Options{SegmentBytes: smallSegments, MaxBytes: 10}, 1},
		{"by bytes, three segments", Options{SegmentBytes: smallSegments, MaxBytes: 3 * 4 * int64(testFrame)}, 3},
		{"both", Options{SegmentBytes: smallSegments, MaxSegments: 5, MaxBytes: 2*smallSegments + 1}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openTestLog(t, "", tt.opts)
			prevOldest := int64(0)
			for i := range int64(40) {
				appendN(t, l, i+1)
				require.GreaterOrEqual(t, l.Oldest(), prevOldest, "Oldest never decreases")
				require.LessOrEqual(t, l.Oldest(), l.HighWatermark())
				prevOldest = l.Oldest()
			}
			bases := segmentFiles(t, l.dir)
			require.Len(t, bases, tt.wantSegments)
			require.Equal(t, bases[0], l.Oldest(), "Oldest is the first segment's base")
			for off := range int64(40) {
				if off < l.Oldest() {
					_, err := l.Read(off)
					require.ErrorIs(t, err, router.ErrNotFound)
				} else {
					requireRecord(t, l, off)
				}
			}
		})
	}
}

func TestRetentionAppliesAtOpen(t *testing.T) {
	l := openTestLog(t, "", Options{SegmentBytes: smallSegments})
	appendN(t, l, 40)
	require.NoError(t, l.Close())
	l = openTestLog(t, l.dir, Options{SegmentBytes: smallSegments, MaxSegments: 2})
	require.Len(t, segmentFiles(t, l.dir), 2)
	require.Equal(t, int64(32), l.Oldest())
	require.Equal(t, int64(40), l.HighWatermark())
	requireRecord(t, l, 32)
}

// lastSegment returns the path of a log's last segment file.
func lastSegment(t *testing.T, l *Log) string {
	bases := segmentFiles(t, l.dir)
	return filepath.Join(l.dir, segmentName(bases[len(bases)-1]))
}

func TestTornTailIsCut(t *testing.T) {
	frame := int64(testFrame)
	tests := []struct {
		name string
		tear func(t *testing.T, path string)
		// wantHWM is the high watermark after the reopen (10 records were appended).
		wantHWM int64
	}{
		{"nothing torn", func(*testing.T, string) {}, 10},
		{"last frame cut short", func(t *testing.T, path string) { truncateBy(t, path, 3) }, 9},
		{"only a header left", func(t *testing.T, path string) { truncateBy(t, path, frame-headerSize) }, 9},
		{"part of a header", func(t *testing.T, path string) { truncateBy(t, path, frame-3) }, 9},
		{"zeros after the last frame", func(t *testing.T, path string) { appendBytes(t, path, make([]byte, 100)) }, 10},
		{"junk after the last frame", func(t *testing.T, path string) { appendBytes(t, path, []byte("not a frame at all, not at all")) }, 10},
		{"last frame damaged", func(t *testing.T, path string) { flipByte(t, path, -1) }, 9},
		{"last two frames damaged", func(t *testing.T, path string) { flipByte(t, path, -1); flipByte(t, path, -frame-1) }, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One big segment, so every record is in the last one.
			l := openTestLog(t, "", Options{})
			appendN(t, l, 10)
			require.NoError(t, l.Close())
			path := lastSegment(t, l)
			tt.tear(t, path)

			l = openTestLog(t, l.dir, l.opts)
			require.Equal(t, tt.wantHWM, l.HighWatermark())
			info, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, tt.wantHWM*frame, info.Size(), "the tail is cut off the file")
			for off := range tt.wantHWM {
				requireRecord(t, l, off)
			}
			// Appends go on from the cut, and survive another reopen.
			appendN(t, l, 12)
			l = reopen(t, l)
			require.Equal(t, int64(12), l.HighWatermark())
			for off := range int64(12) {
				requireRecord(t, l, off)
			}
		})
	}
}

func TestCorruptRecords(t *testing.T) {
	frame := int64(testFrame)
	tests := []struct {
		name string
		// damage damages the segment files of a log of 12 records in segments of 4.
		damage      func(t *testing.T, dir string)
		wantCorrupt []int64
	}{
		{
			"a value in a sealed segment",
			func(t *testing.T, dir string) { flipByte(t, filepath.Join(dir, segmentName(4)), frame+frame-1) },
			[]int64{5},
		},
		{
			"a checksum in a sealed segment",
			func(t *testing.T, dir string) { flipByte(t, filepath.Join(dir, segmentName(0)), 4) },
			[]int64{0},
		},
		{
			"a length in a sealed segment: the rest of it is lost",
			func(t *testing.T, dir string) { flipByte(t, filepath.Join(dir, segmentName(4)), frame+3) },
			[]int64{5, 6, 7},
		},
		{
			"a sealed segment cut short",
			func(t *testing.T, dir string) { truncateBy(t, filepath.Join(dir, segmentName(0)), frame+1) },
			[]int64{2, 3},
		},
		{
			"a sealed segment emptied",
			func(t *testing.T, dir string) { truncateBy(t, filepath.Join(dir, segmentName(4)), 4*frame) },
			[]int64{4, 5, 6, 7},
		},
		{
			"the last segment, before an intact frame: kept",
			func(t *testing.T, dir string) { flipByte(t, filepath.Join(dir, segmentName(8)), frame+10) },
			[]int64{9},
		},
		{
			"a frame with another offset",
			func(t *testing.T, dir string) {
				path := filepath.Join(dir, segmentName(4))
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				wrong := appendFrame(nil, 99, time.Unix(1000, 5), []byte("key-0005"), value(5), nil)
				copy(b[frame:], wrong)
				require.NoError(t, os.WriteFile(path, b, 0o644))
			},
			[]int64{5, 6, 7},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openTestLog(t, "", Options{SegmentBytes: 4 * frame})
			appendN(t, l, 12)
			require.Equal(t, []int64{0, 4, 8}, segmentFiles(t, l.dir))
			require.NoError(t, l.Close())
			tt.damage(t, l.dir)

			for range 2 { // the same answers after another reopen
				l = openTestLog(t, l.dir, l.opts)
				require.Equal(t, int64(12), l.HighWatermark())
				for off := range int64(12) {
					if slices.Contains(tt.wantCorrupt, off) {
						for range 2 { // permanently
							_, err := l.Read(off)
							require.ErrorIs(t, err, router.ErrCorrupt, "offset %d", off)
						}
					} else {
						requireRecord(t, l, off)
					}
				}
				require.NoError(t, l.Close())
			}
		})
	}
}

func TestBadFilesAreHarmless(t *testing.T) {
	frame := int64(testFrame)
	tests := []struct {
		name    string
		files   map[string][]byte // written into the partition directory before the open
		wantHWM int64
		wantOld int64
	}{
		{"an empty directory", nil, 0, 0},
		{"files that are not segments", map[string][]byte{
			"notes.txt": []byte("hello"), "1.log": []byte("short name"),
			"0000000000000000000x.log": nil, "-0000000000000000001.log": nil,
		}, 0, 0},
		{"one empty segment", map[string][]byte{segmentName(7): nil}, 7, 7},
		{"a segment of junk", map[string][]byte{segmentName(0): []byte("junk junk junk junk junk junk junk")}, 0, 0},
		{"a segment of ones", map[string][]byte{segmentName(0): slices.Repeat([]byte{0xff}, 100)}, 0, 0},
		{"a gap between segments", map[string][]byte{
			segmentName(3): frames(3, 2), segmentName(10): frames(10, 1),
		}, 11, 3},
		{"segments that overlap", map[string][]byte{
			segmentName(0): frames(0, 5), segmentName(2): frames(2, 2),
		}, 4, 0},
		{"frames with the wrong offsets", map[string][]byte{segmentName(0): frames(5, 3)}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
			}
			require.NoError(t, os.Mkdir(filepath.Join(dir, segmentName(1000)), 0o755), "a directory named like a segment")
			l := openTestLog(t, dir, Options{SegmentBytes: 10 * frame})
			require.Equal(t, tt.wantHWM, l.HighWatermark())
			require.Equal(t, tt.wantOld, l.Oldest())
			for off := l.Oldest(); off < l.HighWatermark(); off++ {
				if _, err := l.Read(off); err != nil {
					require.ErrorIs(t, err, router.ErrCorrupt)
				}
			}
			appendN(t, l, tt.wantHWM+3)
			requireRecord(t, l, tt.wantHWM+2)
		})
	}
}

// frames returns the frames of n records from offset first, as appendN writes them.
func frames(first, n int64) []byte {
	var b []byte
	for off := first; off < first+n; off++ {
		b = appendFrame(b, off, time.Unix(1000, off), fmt.Appendf(nil, "key-%04d", off), value(off), nil)
	}
	return b
}

func TestConcurrentAppendsAndReads(t *testing.T) {
	l := openTestLog(t, "", Options{SegmentBytes: 1024, MaxSegments: 50})
	var wg sync.WaitGroup
	const writers, each = 4, 200
	for range writers {
		wg.Go(func() {
			for range each {
				off, err := l.Append([]byte("k"), []byte("v"), time.Now())
				require.NoError(t, err)
				require.Less(t, off, l.HighWatermark())
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for range each {
				hwm, oldest := l.HighWatermark(), l.Oldest()
				require.LessOrEqual(t, oldest, hwm)
				for off := oldest; off < hwm; off += 17 {
					rec, err := l.Read(off)
					if errors.Is(err, router.ErrNotFound) {
						continue // retention moved past it meanwhile
					}
					require.NoError(t, err)
					require.Equal(t, "v", string(rec.Value))
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(writers*each), l.HighWatermark())
}

func truncateBy(t *testing.T, path string, n int64) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, info.Size()-n))
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// flipByte flips the bits of the byte at, counted from the end when negative.
func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	if at < 0 {
		at += int64(len(b))
	}
	b[at] ^= 0xff
	require.NoError(t, os.WriteFile(path, b, 0o644))
}
