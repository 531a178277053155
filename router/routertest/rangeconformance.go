package routertest

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"

	"narad.dev/consume/router"
)

// testRange checks the router.RangeReader contract of a log that offers it: ranges agree
// with Read record by record, keep their bounds, fail as Read does on their first record
// and end before a failing later one.
func testRange(t *testing.T, h LogHarness) {
	t.Run("agrees with Read", func(t *testing.T) { testRangeModel(t, h) })
	t.Run("bounds", func(t *testing.T) {
		l := h.New(t)
		checkRangeBounds(t, l, appendN(t, l, 20))
	})
	t.Run("the caller owns the records", func(t *testing.T) {
		l := h.New(t)
		offs := appendN(t, l, 5)
		for _, rec := range checkRange(t, l, offs[0], len(offs), 1<<20) {
			for _, b := range [][]byte{rec.Key, rec.Value} {
				for i := range b {
					b[i] ^= 0xff // changing them changes nothing stored
				}
			}
		}
		for _, off := range offs {
			readOK(t, l, off)
		}
	})
	if h.Trim != nil {
		t.Run("below retention", func(t *testing.T) {
			l := h.New(t)
			offs := appendN(t, l, 50)
			if err := h.Trim(l, offs[30]); err != nil {
				t.Fatalf("Trim: %v", err)
			}
			if l.Oldest() == offs[0] {
				t.Skip("Trim removed nothing")
			}
			checkRangeFails(t, l, l.Oldest()-1, router.ErrNotFound)
			checkRangeFails(t, l, offs[0], router.ErrNotFound)
			checkRange(t, l, l.Oldest(), 100, 1<<20)
		})
	}
	if h.Corrupt != nil {
		t.Run("corrupt", func(t *testing.T) {
			l := h.New(t)
			offs := appendN(t, l, 10)
			if err := h.Corrupt(l, offs[4]); err != nil {
				t.Fatalf("Corrupt: %v", err)
			}
			checkRangeFails(t, l, offs[4], router.ErrCorrupt)
			checkRangeEndsBefore(t, l, offs[2], offs[4])
			checkRangeEndsBefore(t, l, offs[3], offs[4])
			checkRange(t, l, offs[5], 100, 1<<20)
		})
	}
	if h.Close != nil {
		t.Run("closed", func(t *testing.T) {
			l := h.New(t)
			offs := appendN(t, l, 10)
			hwm := l.HighWatermark()
			if err := h.Close(l); err != nil {
				t.Fatalf("Close: %v", err)
			}
			for off := offs[0] - 1; off < hwm; off++ {
				checkRangeFails(t, l, off, router.ErrLogClosed)
			}
		})
	}
}

// testRangeModel draws appends, damage, retention and ranges with rapid, and checks every
// range against Read.
func testRangeModel(t *testing.T, h LogHarness) {
	rapid.Check(t, func(rt *rapid.T) {
		l := h.New(t)
		corrupt := map[int64]bool{}
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				for range rapid.IntRange(1, 8).Draw(rt, "n") {
					key := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(rt, "key")
					val := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(rt, "value")
					if _, err := l.Append(key, val); err != nil {
						rt.Fatalf("Append: %v", err)
					}
				}
			},
			"corrupt": func(rt *rapid.T) {
				if h.Corrupt == nil || l.Oldest() == l.HighWatermark() {
					rt.Skip("no damage to do")
				}
				off := rapid.Int64Range(l.Oldest(), l.HighWatermark()-1).Draw(rt, "offset")
				if corrupt[off] {
					rt.Skip("damaged already")
				}
				corrupt[off] = true
				if err := h.Corrupt(l, off); err != nil {
					rt.Fatalf("Corrupt(%d): %v", off, err)
				}
			},
			"trim": func(rt *rapid.T) {
				if h.Trim == nil {
					rt.Skip("no retention")
				}
				if err := h.Trim(l, rapid.Int64Range(l.Oldest(), l.HighWatermark()).Draw(rt, "oldest")); err != nil {
					rt.Fatalf("Trim: %v", err)
				}
			},
			"range": func(rt *rapid.T) {
				if l.Oldest() == l.HighWatermark() {
					rt.Skip("empty")
				}
				off := rapid.Int64Range(l.Oldest()-1, l.HighWatermark()-1).Draw(rt, "offset")
				checkRange(rt, l, off,
					rapid.IntRange(1, 20).Draw(rt, "max"),
					rapid.IntRange(0, 200).Draw(rt, "maxBytes"))
			},
		})
	})
}

func rangeReader(t failer, l LogUnderTest) router.RangeReader {
	t.Helper()
	rr, ok := l.(router.RangeReader)
	if !ok {
		t.Fatalf("%T does not implement router.RangeReader", l)
	}
	return rr
}

// readRange calls ReadRange with a dst that already holds a record, checks that record is
// left alone, and returns what was appended.
func readRange(t failer, l LogUnderTest, off int64, max, maxBytes int) ([]router.Record, error) {
	t.Helper()
	dst := make([]router.Record, 1, 4)
	dst[0] = router.Record{Value: []byte("dst")}
	got, err := rangeReader(t, l).ReadRange(off, max, maxBytes, dst)
	if len(got) == 0 || string(got[0].Value) != "dst" {
		t.Fatalf("ReadRange(%d, %d, %d) did not append to dst: %d records, first %q", off, max, maxBytes, len(got), firstValue(got))
	}
	return got[1:], err
}

func firstValue(recs []router.Record) []byte {
	if len(recs) == 0 {
		return nil
	}
	return recs[0].Value
}

// checkRange reads a range from off and checks it against Read: the error of Read(off) and
// nothing appended when that fails; otherwise 1 to max records, the ones Read returns, none
// at or above the high watermark, none after the record that brought the keys and values to
// maxBytes. It returns the records.
func checkRange(t failer, l LogUnderTest, off int64, max, maxBytes int) []router.Record {
	t.Helper()
	hwm := l.HighWatermark()
	recs, err := readRange(t, l, off, max, maxBytes)
	first, readErr := l.Read(off)
	if readErr != nil {
		for _, sentinel := range []error{router.ErrNotFound, router.ErrCorrupt, router.ErrLogClosed} {
			if errors.Is(readErr, sentinel) != errors.Is(err, sentinel) {
				t.Fatalf("ReadRange(%d) failed with %v, Read with %v", off, err, readErr)
			}
		}
		if len(recs) != 0 {
			t.Fatalf("ReadRange(%d) failed with %v and appended %d records", off, err, len(recs))
		}
		return nil
	}
	switch {
	case err != nil:
		t.Fatalf("ReadRange(%d, %d, %d): %v, but Read(%d) reads", off, max, maxBytes, err, off)
	case len(recs) == 0:
		t.Fatalf("ReadRange(%d, %d, %d) returned no record and no error", off, max, maxBytes)
	case len(recs) > max:
		t.Fatalf("ReadRange(%d, %d, %d) returned %d records", off, max, maxBytes, len(recs))
	case off+int64(len(recs)) > hwm:
		t.Fatalf("ReadRange(%d) returned %d records, past the high watermark %d", off, len(recs), hwm)
	}
	total := 0
	for k, rec := range recs {
		at := off + int64(k)
		want := first
		if k > 0 {
			if want, err = l.Read(at); err != nil {
				t.Fatalf("ReadRange(%d) returned offset %d, which Read fails with %v", off, at, err)
			}
			if total >= maxBytes {
				t.Fatalf("ReadRange(%d, %d, %d) went on to offset %d after %d bytes", off, max, maxBytes, at, total)
			}
		}
		if !bytes.Equal(rec.Key, want.Key) || !bytes.Equal(rec.Value, want.Value) || !rec.Timestamp.Equal(want.Timestamp) {
			t.Fatalf("offset %d: ReadRange has %q=%q at %v, Read %q=%q at %v",
				at, rec.Key, rec.Value, rec.Timestamp, want.Key, want.Value, want.Timestamp)
		}
		total += len(rec.Key) + len(rec.Value)
	}
	return recs
}

// checkRangeFails checks that a range from off fails with want, as Read does, and appends
// nothing.
func checkRangeFails(t failer, l LogUnderTest, off int64, want error) {
	t.Helper()
	recs, err := readRange(t, l, off, 10, 1<<20)
	if !errors.Is(err, want) || len(recs) != 0 {
		t.Fatalf("ReadRange(%d): %d records, %v; want none and %v", off, len(recs), err, want)
	}
	if want == router.ErrLogClosed && (errors.Is(err, router.ErrNotFound) || errors.Is(err, router.ErrCorrupt)) {
		t.Fatalf("ReadRange(%d) of a closed log: %v, want ErrLogClosed and nothing else", off, err)
	}
}

// checkRangeEndsBefore checks that a range from off, below the unreadable record bad,
// returns records below bad only, and no error.
func checkRangeEndsBefore(t failer, l LogUnderTest, off, bad int64) {
	t.Helper()
	recs := checkRange(t, l, off, 100, 1<<20)
	if off+int64(len(recs)) > bad {
		t.Fatalf("ReadRange(%d) went past the unreadable record %d", off, bad)
	}
}

// checkRangeBounds checks max, maxBytes and the high watermark on the records of offs, all
// readable and consecutive.
func checkRangeBounds(t failer, l LogUnderTest, offs []int64) {
	t.Helper()
	n := len(offs)
	for _, max := range []int{1, 2, 5, n} {
		checkRange(t, l, offs[0], max, 1<<20)
	}
	if recs := checkRange(t, l, offs[0], 1, 1<<20); len(recs) != 1 {
		t.Fatalf("ReadRange with max 1: %d records", len(recs))
	}
	// The byte bound: at least one record, however small the bound, and the record that
	// crosses it is kept (when the log reads that far in one range at all).
	for _, maxBytes := range []int{-1, 0, 1} {
		if recs := checkRange(t, l, offs[0], n, maxBytes); len(recs) != 1 {
			t.Fatalf("ReadRange(%d, %d, %d): %d records, want exactly one", offs[0], n, maxBytes, len(recs))
		}
	}
	first, err := l.Read(offs[0])
	if err != nil {
		t.Fatalf("Read(%d): %v", offs[0], err)
	}
	size := len(first.Key) + len(first.Value)
	if two := checkRange(t, l, offs[0], 2, 1<<20); len(two) == 2 {
		for _, maxBytes := range []int{size, size + 1} {
			recs := checkRange(t, l, offs[0], n, maxBytes)
			want := 1
			if maxBytes > size {
				want = 2
			}
			if len(recs) != want {
				t.Fatalf("ReadRange(%d, %d, %d) with a first record of %d bytes: %d records, want %d (the crossing record is kept)",
					offs[0], n, maxBytes, size, len(recs), want)
			}
		}
	}
	// Never a record at or above the high watermark.
	for k := range min(n, 3) {
		checkRange(t, l, offs[n-1-k], 100, 1<<20)
	}
}
