package filelog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/router"
)

// rangeOffsets reads a range and returns the offsets it holds, checking each record
// against requireRecord's shape.
func rangeOffsets(t *testing.T, l *Log, offset int64, max, maxBytes int) []int64 {
	t.Helper()
	recs, err := l.ReadRange(offset, max, maxBytes, nil)
	require.NoError(t, err)
	var offs []int64
	for k, rec := range recs {
		off := offset + int64(k)
		require.Equal(t, fmt.Sprintf("key-%04d", off), string(rec.Key))
		require.Equal(t, string(value(off)), string(rec.Value))
		require.True(t, rec.Timestamp.Equal(time.Unix(1000, off)))
		offs = append(offs, off)
	}
	return offs
}

func span(from, to int64) []int64 {
	var s []int64
	for off := from; off < to; off++ {
		s = append(s, off)
	}
	return s
}

// Every record of appendN carries 8 bytes of key and 10 of value: 18 bytes, a 46-byte
// frame; 240-byte segments hold 5 of them.
const rangeSegments = 5 * (minFrameSize + 18)

func TestReadRange(t *testing.T) {
	l := openTestLog(t, "", Options{SegmentBytes: rangeSegments})
	appendN(t, l, 23) // segments at 0, 5, 10, 15, 20; the last holds 20 to 22
	require.Equal(t, []int64{0, 5, 10, 15, 20}, segmentFiles(t, l.dir))

	tests := []struct {
		name          string
		offset        int64
		max, maxBytes int
		want          []int64
	}{
		{"one", 0, 1, 1 << 20, span(0, 1)},
		{"max below zero counts as one", 0, -3, 1 << 20, span(0, 1)},
		{"max", 1, 3, 1 << 20, span(1, 4)},
		{"stops at the end of its segment", 1, 100, 1 << 20, span(1, 5)},
		{"from a segment's first record", 5, 100, 1 << 20, span(5, 10)},
		{"stops at the high watermark", 21, 100, 1 << 20, span(21, 23)},
		{"the last record", 22, 100, 1 << 20, span(22, 23)},
		{"bytes: the first always comes", 0, 100, 0, span(0, 1)},
		{"bytes: one short of a record", 0, 100, 17, span(0, 1)},
		{"bytes: exactly one record", 0, 100, 18, span(0, 1)},
		{"bytes: the crossing record is kept", 0, 100, 19, span(0, 2)},
		{"bytes: exactly three", 0, 100, 54, span(0, 3)},
		{"bytes and max: max first", 0, 2, 54, span(0, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, rangeOffsets(t, l, tt.offset, tt.max, tt.maxBytes))
		})
	}

	t.Run("appends to dst", func(t *testing.T) {
		dst := []router.Record{{Value: []byte("already there")}}
		dst, err := l.ReadRange(3, 2, 1<<20, dst)
		require.NoError(t, err)
		require.Len(t, dst, 3)
		require.Equal(t, "already there", string(dst[0].Value))
		require.Equal(t, string(value(4)), string(dst[2].Value))
	})
	t.Run("the caller owns the slices", func(t *testing.T) {
		recs, err := l.ReadRange(0, 2, 1<<20, nil)
		require.NoError(t, err)
		recs[0].Key = append(recs[0].Key, "more"...)     // capped: cannot grow into the value
		recs[0].Value = append(recs[0].Value, "more"...) // nor into the next record
		require.Equal(t, fmt.Sprintf("key-%04d", 1), string(recs[1].Key))
		recs[1].Value[0] ^= 0xff
		requireRecord(t, l, 1)
	})
	t.Run("empty keys", func(t *testing.T) {
		l := openTestLog(t, "", Options{})
		for i := range 3 {
			_, err := l.Append(nil, []byte{byte(i)}, time.Time{})
			require.NoError(t, err)
		}
		recs, err := l.ReadRange(0, 10, 1<<20, nil)
		require.NoError(t, err)
		require.Equal(t, []router.Record{{Value: []byte{0}}, {Value: []byte{1}}, {Value: []byte{2}}}, recs)
	})
}

func TestReadRangeErrors(t *testing.T) {
	l := openTestLog(t, "", Options{SegmentBytes: rangeSegments, MaxSegments: 3})
	appendN(t, l, 23)
	oldest := l.Oldest()
	require.Equal(t, int64(10), oldest)
	closed := openTestLog(t, "", Options{})
	appendN(t, closed, 3)
	require.NoError(t, closed.Close())

	damaged := openTestLog(t, "", Options{SegmentBytes: rangeSegments})
	appendN(t, damaged, 23)
	require.NoError(t, corruptRecord(damaged, 2))
	require.NoError(t, corruptRecord(damaged, 11))
	require.NoError(t, corruptRecord(damaged, 21))

	tests := []struct {
		name   string
		log    *Log
		offset int64
		want   error
	}{
		{"below retention", l, oldest - 1, router.ErrNotFound},
		{"negative", l, -1, router.ErrNotFound},
		{"at the high watermark", l, 23, ErrOutOfRange},
		{"past it", l, 1 << 50, ErrOutOfRange},
		{"closed", closed, 1, router.ErrLogClosed},
		{"closed, below retention too", closed, -1, router.ErrLogClosed},
		{"corrupt first record", damaged, 2, router.ErrCorrupt},
		{"corrupt first record of a sealed segment", damaged, 11, router.ErrCorrupt},
		{"corrupt first record of the active segment", damaged, 21, router.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []router.Record{{Value: []byte("kept")}}
			got, err := tt.log.ReadRange(tt.offset, 10, 1<<20, dst)
			require.ErrorIs(t, err, tt.want)
			require.Equal(t, dst, got, "nothing appended")
			_, readErr := tt.log.Read(tt.offset)
			require.ErrorIs(t, readErr, tt.want, "Read answers the same")
		})
	}

	t.Run("a corrupt record ends the range before it", func(t *testing.T) {
		require.Equal(t, span(0, 2), rangeOffsets(t, damaged, 0, 10, 1<<20))
		require.Equal(t, span(1, 2), rangeOffsets(t, damaged, 1, 10, 1<<20))
		require.Equal(t, span(3, 5), rangeOffsets(t, damaged, 3, 10, 1<<20))
		require.Equal(t, span(10, 11), rangeOffsets(t, damaged, 10, 10, 1<<20))
		require.Equal(t, span(20, 21), rangeOffsets(t, damaged, 20, 10, 1<<20))
		require.Equal(t, span(22, 23), rangeOffsets(t, damaged, 22, 10, 1<<20))
	})

	t.Run("frames a sealed segment cannot delimit", func(t *testing.T) {
		l := openTestLog(t, "", Options{SegmentBytes: rangeSegments})
		appendN(t, l, 12)
		// Damage the length of offset 2's frame: the scan at open delimits 0 and 1 only,
		// and 2 to 4 are owned by the segment but have no frame.
		start, _, ok := l.segs[0].frameBounds(2)
		require.True(t, ok)
		flipByte(t, filepath.Join(l.dir, segmentName(0)), start+3)
		l = reopen(t, l)
		require.Equal(t, span(0, 2), rangeOffsets(t, l, 0, 10, 1<<20))
		for off := int64(2); off < 5; off++ {
			_, err := l.ReadRange(off, 10, 1<<20, nil)
			require.ErrorIs(t, err, router.ErrCorrupt, "offset %d", off)
		}
		require.Equal(t, span(5, 10), rangeOffsets(t, l, 5, 10, 1<<20))
	})
}

// TestReadRangeAgreesWithRead checks ReadRange against Read record by record over logs
// with random segment sizes, records, damage and retention: a range is the records
// consecutive Reads return, up to the first failing one, and it ends only where the
// contract (or the segment's end) lets it.
func TestReadRangeAgreesWithRead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "filelog-range-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		opts, err := Options{SegmentBytes: rapid.Int64Range(minFrameSize, 400).Draw(t, "segmentBytes")}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		l, err := openLog(dir, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { l.Close() }()

		t.Repeat(map[string]func(*rapid.T){
			"append": func(t *rapid.T) {
				for range rapid.IntRange(1, 10).Draw(t, "n") {
					key := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "key")
					val := rapid.SliceOfN(rapid.Byte(), 0, 60).Draw(t, "value")
					if _, err := l.Append(key, val, time.Unix(0, rapid.Int64Range(0, 5).Draw(t, "ts"))); err != nil {
						t.Fatal(err)
					}
				}
			},
			"corrupt": func(t *rapid.T) {
				if l.HighWatermark() == l.Oldest() {
					t.Skip("empty")
				}
				off := rapid.Int64Range(l.Oldest(), l.HighWatermark()-1).Draw(t, "offset")
				if err := corruptRecord(l, off); err != nil {
					t.Skip(err.Error()) // a frame the log cannot delimit any more
				}
			},
			"trim": func(t *rapid.T) {
				if err := trimBelow(l, rapid.Int64Range(l.Oldest(), l.HighWatermark()).Draw(t, "oldest")); err != nil {
					t.Fatal(err)
				}
			},
			"reopen": func(t *rapid.T) {
				l.closeFiles() // no fsync: the page cache is enough here
				if l, err = openLog(dir, opts, nil); err != nil {
					t.Fatal(err)
				}
			},
			"range": func(t *rapid.T) {
				off := rapid.Int64Range(l.Oldest()-2, l.HighWatermark()+1).Draw(t, "offset")
				max := rapid.IntRange(1, 20).Draw(t, "max")
				maxBytes := rapid.IntRange(0, 300).Draw(t, "maxBytes")
				checkRangeAgainstRead(t, l, off, max, maxBytes)
			},
		})
	})
}

func checkRangeAgainstRead(t *rapid.T, l *Log, off int64, max, maxBytes int) {
	recs, err := l.ReadRange(off, max, maxBytes, nil)
	first, readErr := l.Read(off)
	if readErr != nil {
		for _, sentinel := range []error{router.ErrNotFound, router.ErrCorrupt, router.ErrLogClosed, ErrOutOfRange} {
			if errors.Is(readErr, sentinel) != errors.Is(err, sentinel) {
				t.Fatalf("ReadRange(%d): %v, Read: %v", off, err, readErr)
			}
		}
		if len(recs) != 0 {
			t.Fatalf("ReadRange(%d) failed with %v and returned %d records", off, err, len(recs))
		}
		return
	}
	if err != nil || len(recs) == 0 || len(recs) > max {
		t.Fatalf("ReadRange(%d, %d, %d): %d records, %v", off, max, maxBytes, len(recs), err)
	}
	bytes := 0
	for k, rec := range recs {
		want := first
		if k > 0 {
			if want, err = l.Read(off + int64(k)); err != nil {
				t.Fatalf("ReadRange(%d) returned offset %d, which Read fails: %v", off, off+int64(k), err)
			}
		}
		if !slices.Equal(rec.Key, want.Key) || !slices.Equal(rec.Value, want.Value) || !rec.Timestamp.Equal(want.Timestamp) {
			t.Fatalf("offset %d: range has %q=%q@%v, Read %q=%q@%v", off+int64(k), rec.Key, rec.Value, rec.Timestamp, want.Key, want.Value, want.Timestamp)
		}
		if k > 0 && bytes >= maxBytes {
			t.Fatalf("ReadRange(%d) went on past %d bytes of %d", off, bytes, maxBytes)
		}
		bytes += len(rec.Key) + len(rec.Value)
	}
	// Why it ended: a bound, the high watermark, the segment's end, or a failing record.
	next := off + int64(len(recs))
	if len(recs) == max || bytes >= maxBytes || next == l.HighWatermark() {
		return
	}
	for _, seg := range l.segs {
		if seg.base == next {
			return
		}
	}
	if _, err := l.Read(next); err == nil {
		t.Fatalf("ReadRange(%d, %d, %d) stopped before %d, which reads fine", off, max, maxBytes, next)
	}
}
