package routertest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"pgregory.net/rapid"

	"narad.dev/consume/router"
)

// The rules of router.RangeReader, as the suite's failures name them.
const (
	ruleRangeMax          = "a range holds at most max records"
	ruleRangeHWM          = "a range stops at the high watermark"
	ruleRangeConsecutive  = "a range returns the records at consecutive offsets, as Read returns them"
	ruleRangeBytes        = "a range stops after the record that brings its keys, values and headers to maxBytes or more"
	ruleRangeCrossingKept = "the record that brings a range to maxBytes is kept: a range stops early only where it does without maxBytes"
	ruleRangeNonEmpty     = "a range whose first record reads returns at least one record"
	ruleRangeFirst        = "a range fails as Read does on its first record, and appends nothing"
	ruleRangeLater        = "a later record that would fail ends the range before it, with no error"
	ruleRangeErr          = "a range fails only when its first record fails Read; a later record that would fail ends it before that record, with no error"
	ruleRangeDst          = "ReadRange appends to dst and returns it, keeping what dst holds"
	ruleRangeClosed       = "once closed, every ReadRange answers ErrLogClosed and nothing else"
)

// Bounds of a range that bind nothing in the suite's logs.
const (
	unboundedMax   = 1 << 12
	unboundedBytes = 1 << 30
)

// testRange checks the router.RangeReader contract of a log that offers it: ranges agree
// with what was appended record by record, keep their bounds, fail as Read does on their
// first record and end before a failing later one.
func testRange(t suite, h LogHarness) {
	t.Run("bounds", func(t suite) {
		l := h.New(t.host())
		checkRangeBounds(t, l, appendN(t, l, 24))
	})
	t.Run("long ranges", func(t suite) {
		l := h.New(t.host())
		checkLongRanges(t, l, appendN(t, l, 600))
	})
	t.Run("the caller owns the records", func(t suite) {
		l := h.New(t.host())
		offs := appendN(t, l, 5)
		recs := checkRange(t, l, offs[0], len(offs), unboundedBytes, appendedExpect(l))
		checkOwned(t, l, fmt.Sprintf("ReadRange(%d, %d, %d)", offs[0], len(offs), unboundedBytes), recs)
	})
	if h.Trim != nil {
		t.Run("below retention", func(t suite) {
			l := h.New(t.host())
			offs := appendN(t, l, 50)
			if err := h.Trim(l, offs[30]); err != nil {
				t.Fatalf("Trim: %v", err)
			}
			if l.Oldest() == offs[0] {
				t.Skip("Trim removed nothing")
			}
			checkRangeFails(t, l, l.Oldest()-1, router.ErrNotFound, ruleRangeFirst)
			checkRangeFails(t, l, offs[0], router.ErrNotFound, ruleRangeFirst)
			checkRange(t, l, l.Oldest(), 100, unboundedBytes, appendedExpect(l))
		})
	}
	if h.Corrupt != nil {
		t.Run("corrupt", func(t suite) {
			l := h.New(t.host())
			offs := appendN(t, l, 10)
			if err := h.Corrupt(l, offs[4]); err != nil {
				t.Fatalf("Corrupt: %v", err)
			}
			for range 2 {
				checkRangeFails(t, l, offs[4], router.ErrCorrupt, ruleRangeFirst)
				checkRangeEndsBefore(t, l, offs[2], offs[4])
				checkRangeEndsBefore(t, l, offs[3], offs[4])
				checkRange(t, l, offs[5], 100, unboundedBytes, appendedExpect(l))
			}
		})
	}
	if h.Close != nil {
		t.Run("closed", func(t suite) {
			l := h.New(t.host())
			offs := appendN(t, l, 10)
			hwm := l.HighWatermark()
			if err := h.Close(l); err != nil {
				t.Fatalf("Close: %v", err)
			}
			for off := offs[0] - 1; off < hwm; off++ {
				checkRangeFails(t, l, off, router.ErrLogClosed, ruleRangeClosed)
			}
		})
	}
}

// testRangeModel draws appends, damage, retention and ranges with rapid, and checks every
// range against Read.
func testRangeModel(t suite, h LogHarness) {
	check(t, func(rt *rapid.T) {
		l := h.New(t.host())
		var w watermarks
		w.check(rt, l, "New")
		corrupt := map[int64]bool{}
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				for range rapid.IntRange(1, 8).Draw(rt, "n") {
					key := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(rt, "key")
					val := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(rt, "value")
					var err error
					if ra, ok := l.(RecordAppender); ok {
						headers := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) router.Header {
							return router.Header{Key: rapid.StringN(0, 4, -1).Draw(rt, "header key"), Value: rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(rt, "header value")}
						}), 0, 3).Draw(rt, "headers")
						_, err = ra.AppendRecord(router.Record{Key: key, Value: val, Headers: headers})
					} else {
						_, err = l.Append(key, val)
					}
					if err != nil {
						rt.Fatalf("Append: %v", err)
					}
				}
			},
			"corrupt": func(rt *rapid.T) {
				oldest, hwm := w.check(rt, l, "the last action")
				if h.Corrupt == nil || oldest == hwm {
					rt.Skip("no damage to do")
				}
				off := drawOffset(rt, oldest, hwm-1, "offset")
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
				oldest, hwm := w.check(rt, l, "the last action")
				if err := h.Trim(l, drawOffset(rt, oldest, hwm+2, "oldest")); err != nil {
					rt.Fatalf("Trim: %v", err)
				}
			},
			"range": func(rt *rapid.T) {
				oldest, hwm := w.check(rt, l, "the last action")
				if oldest == hwm {
					rt.Skip("empty")
				}
				off := drawOffset(rt, oldest-1, hwm-1, "offset")
				checkRange(rt, l, off,
					rapid.IntRange(1, 20).Draw(rt, "max"),
					rapid.IntRange(0, 200).Draw(rt, "maxBytes"),
					readExpect(l))
			},
			"": func(rt *rapid.T) { w.check(rt, l, "the last action") },
		})
	})
}

// expect answers what the suite expects a range to hold at off: the record, whether its
// timestamp is known, or the error Read answers there.
type expect func(off int64) (rec router.Record, stamped bool, err error)

// readExpect expects of a range what Read answers.
func readExpect(l LogUnderTest) expect {
	return func(off int64) (router.Record, bool, error) {
		rec, err := l.Read(off)
		return rec, true, err
	}
}

// appendedExpect expects of a range the records the suite appended, all readable: it costs
// no Read, and a wrong record names the offset it was appended at.
func appendedExpect(l LogUnderTest) expect {
	return func(off int64) (router.Record, bool, error) {
		rec, stamped := expected(l, off)
		return rec, stamped, nil
	}
}

func rangeReader(t failer, l LogUnderTest) router.RangeReader {
	t.Helper()
	rr, ok := l.(router.RangeReader)
	if !ok {
		t.Fatalf("%T does not implement router.RangeReader", l)
	}
	return rr
}

// dstRecords is what readRange puts in dst before a range: a range appends after them.
var dstRecords = []router.Record{{Value: []byte("dst-0")}, {Key: []byte("dst-1")}}

// readRange calls ReadRange with a dst that already holds records and no spare capacity,
// checks they are kept, and returns what was appended.
func readRange(t failer, l LogUnderTest, off int64, max, maxBytes int) ([]router.Record, error) {
	t.Helper()
	dst := slices.Clip(slices.Clone(dstRecords))
	got, err := rangeReader(t, l).ReadRange(off, max, maxBytes, dst)
	if len(got) < len(dstRecords) || string(got[0].Value) != "dst-0" || string(got[1].Key) != "dst-1" {
		broke(t, ruleRangeDst, "ReadRange(%d, %d, %d) answered %d records, dst held %d (first value %q)",
			off, max, maxBytes, len(got), len(dstRecords), firstValue(got))
	}
	return got[len(dstRecords):], err
}

func firstValue(recs []router.Record) []byte {
	if len(recs) == 0 {
		return nil
	}
	return recs[0].Value
}

// checkRange reads a range from off and checks it against want: the error of Read(off) and
// nothing appended when that fails; otherwise 1 to max records, those want holds, none at
// or above the high watermark, none after the record that brought the keys, values and headers to
// maxBytes. It returns the records.
func checkRange(t failer, l LogUnderTest, off int64, max, maxBytes int, want expect) []router.Record {
	t.Helper()
	call := fmt.Sprintf("ReadRange(%d, %d, %d)", off, max, maxBytes)
	recs, err := readRange(t, l, off, max, maxBytes)
	hwm := l.HighWatermark()
	first, stamped, wantErr := want(off)
	if wantErr != nil {
		for _, sentinel := range []error{router.ErrNotFound, router.ErrCorrupt, router.ErrLogClosed} {
			if errors.Is(wantErr, sentinel) != errors.Is(err, sentinel) {
				broke(t, ruleRangeFirst, "%s answered %v, Read(%d) %v", call, err, off, wantErr)
			}
		}
		if len(recs) != 0 {
			broke(t, ruleRangeFirst, "%s answered %v and appended %d records", call, err, len(recs))
		}
		return nil
	}
	switch {
	case err != nil:
		broke(t, ruleRangeErr, "%s answered %v, but Read(%d) reads", call, err, off)
	case len(recs) == 0:
		broke(t, ruleRangeNonEmpty, "%s answered no record and no error", call)
	case len(recs) > max:
		broke(t, ruleRangeMax, "%s answered %d records", call, len(recs))
	case off+int64(len(recs)) > hwm:
		broke(t, ruleRangeHWM, "%s answered %d records, up to offset %d, with the high watermark at %d", call, len(recs), off+int64(len(recs))-1, hwm)
	}
	total := 0
	for k, rec := range recs {
		at := off + int64(k)
		if k > 0 {
			if total >= maxBytes {
				broke(t, ruleRangeBytes, "%s went on to offset %d after %d bytes", call, at, total)
			}
			if first, stamped, err = want(at); err != nil {
				broke(t, ruleRangeLater, "%s answered offset %d, which Read answers %v", call, at, err)
			}
		}
		checkRangeRecord(t, call, off, k, rec, first, stamped)
		total += rec.PayloadBytes()
	}
	return recs
}

// checkRangeRecord checks the record a range from off answered k-th against want.
func checkRangeRecord(t failer, call string, off int64, k int, got, want router.Record, stamped bool) {
	t.Helper()
	if bytes.Equal(got.Key, want.Key) && bytes.Equal(got.Value, want.Value) &&
		(!stamped || got.Timestamp.Equal(want.Timestamp)) && equalHeaders(got.Headers, want.Headers) {
		return
	}
	at := off + int64(k)
	if was, ok := appendedAt(got); ok && was != at {
		if k == 0 {
			broke(t, ruleRangeConsecutive, "%s answered the record of offset %d first", call, was)
		}
		broke(t, ruleRangeConsecutive, "%s answered the record of offset %d after that of %d", call, was, at-1)
	}
	broke(t, ruleRangeConsecutive, "%s answered %q=%q at %v with headers %q for offset %d, where Read answers %q=%q at %v with %q",
		call, got.Key, got.Value, got.Timestamp, got.Headers, at, want.Key, want.Value, want.Timestamp, want.Headers)
}

// checkRangeFails checks that a range from off fails with want, as Read does, appending
// nothing; rule is the one it breaks otherwise.
func checkRangeFails(t failer, l LogUnderTest, off int64, want error, rule string) {
	t.Helper()
	recs, err := readRange(t, l, off, 10, unboundedBytes)
	if !errors.Is(err, want) || len(recs) != 0 {
		broke(t, rule, "ReadRange(%d) answered %d records and %v, want none and %v", off, len(recs), err, want)
	}
	if want == router.ErrLogClosed && (errors.Is(err, router.ErrNotFound) || errors.Is(err, router.ErrCorrupt)) {
		broke(t, rule, "ReadRange(%d) of a closed log answered %v", off, err)
	}
}

// checkRangeEndsBefore checks that a range from off, below the unreadable record bad,
// returns records below bad only, and no error.
func checkRangeEndsBefore(t failer, l LogUnderTest, off, bad int64) {
	t.Helper()
	recs := checkRange(t, l, off, 100, unboundedBytes, readExpect(l))
	if off+int64(len(recs)) > bad {
		broke(t, ruleRangeLater, "ReadRange(%d) went past the unreadable record %d", off, bad)
	}
}

// checkRangeBounds checks max, maxBytes and the high watermark from every offset of offs,
// records the suite appended, all readable and consecutive: max of 1, 2, 3 and around how
// far the log reads from there in one range (its reach, which may end early, at a segment's
// end say), and maxBytes at and around the end of each of the first and last records of
// that reach, so that each record is the one crossing the bound.
func checkRangeBounds(t failer, l LogUnderTest, offs []int64) {
	t.Helper()
	want := appendedExpect(l)
	for _, start := range offs {
		reach := len(checkRange(t, l, start, unboundedMax, unboundedBytes, want))
		for _, max := range []int{1, 2, 3, reach - 1, reach, reach + 1} {
			if max >= 1 {
				checkRange(t, l, start, max, unboundedBytes, want)
			}
		}
		// ends[j] is the keys', values' and headers' total of the reach's first j records.
		ends := make([]int, reach+1)
		for j := range reach {
			rec, _ := expected(l, start+int64(j))
			ends[j+1] = ends[j] + rec.PayloadBytes()
		}
		// A bound the first record reaches: that record alone.
		for _, maxBytes := range []int{-1, 0, 1, ends[1] - 1, ends[1]} {
			checkRange(t, l, start, unboundedMax, maxBytes, want)
		}
		// A bound record j+1 crosses: records up to it, when the log reads that far.
		for _, j := range []int{1, 2, reach - 2, reach - 1} {
			if j < 1 || j >= reach {
				continue
			}
			for _, maxBytes := range []int{ends[j] + 1, ends[j+1]} {
				if n := len(checkRange(t, l, start, unboundedMax, maxBytes, want)); n < j+1 {
					broke(t, ruleRangeCrossingKept, "ReadRange(%d, %d, %d) answered %d records, %d bytes, where ReadRange(%d, %d, %d) reads %d",
						start, unboundedMax, maxBytes, n, ends[n], start, unboundedMax, unboundedBytes, reach)
				}
			}
		}
	}
}

// checkLongRanges reads the records of offs, hundreds of them, end to end in ranges as long
// as the log answers, and in ranges bound by max and by maxBytes alone, from the start and
// from the middle: no record skipped, none repeated, wherever the log's own boundaries
// (segments, buffers, batches) fall.
func checkLongRanges(t failer, l LogUnderTest, offs []int64) {
	t.Helper()
	want := appendedExpect(l)
	end := offs[len(offs)-1] + 1
	for _, bound := range []struct{ max, maxBytes int }{
		{unboundedMax, unboundedBytes},
		{len(offs), unboundedBytes},
		{100, unboundedBytes},
		{unboundedMax, 2000},
	} {
		for _, from := range []int64{offs[0], offs[len(offs)/2] + 1} {
			for off := from; off < end; {
				off += int64(len(checkRange(t, l, off, bound.max, bound.maxBytes, want)))
			}
		}
	}
}
