package routertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
)

// LogUnderTest is a host's log as the conformance suite drives it: the router.Log the node
// reads, plus a way to append. Append may run while other goroutines read, one appender at
// a time, as it does in a host.
type LogUnderTest interface {
	router.Log
	Append(key, value []byte) (offset int64, err error)
}

// TimestampedAppender is an optional capability of a LogUnderTest whose log keeps the
// records' timestamps, found by type assertion: append a record produced at ts. With it the
// suite appends every record with a timestamp of its own (to the nanosecond) and checks that
// Read and ReadRange return it, as they do the key and value; without it, only that they
// agree.
type TimestampedAppender interface {
	AppendTimestamped(key, value []byte, ts time.Time) (offset int64, err error)
}

// RecordAppender is an optional capability of a LogUnderTest whose log keeps the records'
// headers and timestamps, found by type assertion: append rec, with its key, value,
// timestamp and headers. With it the suite appends records with headers of their own (none,
// one, several, a key repeated, an empty value) and timestamps, and checks that Read and
// ReadRange return them in order, as they do the key and value, in slices the caller owns,
// and that a node delivers them. Without it the suite appends no headers, and a record read
// back must carry none.
type RecordAppender interface {
	AppendRecord(rec router.Record) (offset int64, err error)
}

// LogHarness tells TestLog how to make and handle the host's log. New is required; each
// nil hook (and a zero Logs) skips the checks that need it.
type LogHarness struct {
	// New returns a new, empty log. It may start at any offset.
	New func(t *testing.T) LogUnderTest
	// Trim applies retention so that records below oldest are gone. A log that drops whole
	// segments may keep some of them: the suite checks against what Oldest reports after.
	// oldest may lie past the high watermark: every record may go, the high watermark
	// stays. Trim may run while other goroutines read and append, as retention does.
	Trim func(l LogUnderTest, oldest int64) error
	// Corrupt makes the record at offset permanently unreadable (a bit flip on disk).
	Corrupt func(l LogUnderTest, offset int64) error
	// Close closes the log.
	Close func(l LogUnderTest) error
	// Logs, when its New is set, hands over the host's router.Logs, whose Get (and
	// GetMany, when it offers router.ManyGetter) the suite checks too.
	Logs LogsHarness
}

// LogsHarness tells TestLog how to reach the host's router.Logs.
type LogsHarness struct {
	// New returns the host's Logs, holding at least the Known partitions. Give them
	// different contents (numbers of records), so that the suite can tell their logs apart.
	New func(t *testing.T) router.Logs
	// Known lists partitions New's Logs has: Get must answer their logs. At least one.
	Known []Partition
	// Unknown lists partitions New's Logs does not have: Get must answer an error. Nil
	// means, of each known topic, the partition after its highest known one, and
	// partition 0 of a topic no host has ("routertest: no such topic"); an empty slice,
	// none (a Logs that has every partition).
	Unknown []Partition
}

// Partition names one partition of a topic.
type Partition struct {
	Topic     string
	Partition int32
}

// TestLog runs the library's conformance suite against a host's log, and names the rule of
// the contract (router.Log, router.RangeReader, router.Logs, router.ManyGetter) that a
// failure breaks. It checks:
//   - appends and reads: Append writes at the high watermark; Read(off) returns the record
//     appended at off (an off-by-one is named as such), its key, value, timestamp and
//     headers as appended (timestamps when the log is a TimestampedAppender or a
//     RecordAppender, headers when it is a RecordAppender), into slices the caller owns
//     (changing or appending to one changes nothing stored, nor the other);
//   - the watermarks, at every step: never negative, Oldest <= HighWatermark, neither
//     decreasing;
//   - retention (Trim): Oldest moves up to the point asked at most, also when that lies
//     past the high watermark (Oldest stays at or below it), the high watermark stays,
//     Read below Oldest answers ErrNotFound and at or above it the record, appends go on;
//   - a corrupt record (Corrupt) answers ErrCorrupt on every Read, before and after ranges
//     over it and later appends, and damages no other;
//   - a closed log (Close) answers every Read with ErrLogClosed and nothing else, and still
//     answers Oldest and HighWatermark as before;
//   - a router.RangeReader, when the log offers one: at every start offset, ranges of
//     every bound (max of 1, 2, 3 and around the log's reach; maxBytes below, at and past
//     each record's end) hold at most max records, stop at the high watermark and after
//     the record that brings their keys, values and headers to maxBytes (that record kept, so at
//     least one), return the records at consecutive offsets as appended, append to dst
//     and keep what it holds; long ranges (hundreds of records, read end to end) skip
//     none; the first record fails as Read does, appending nothing; a later one that would
//     fail ends the range before it; a closed log answers ErrLogClosed;
//   - concurrent use: readers (Read, ReadRange) beside an appender and, with Trim,
//     retention, see only whole records as appended, ErrNotFound only below Oldest, and
//     watermarks that never decrease (run it under -race to catch data races too);
//   - the host's Logs (LogHarness.Logs): Get answers a usable log for a known partition
//     (never nil, nor a nil pointer, with no error), an error and no log for an unknown
//     one, and is safe for concurrent use; GetMany, when offered, fills into[i] with the
//     log of partitions[i] and answers an error when a partition is unknown;
//   - a model-based property test of appends, reads, retention, damage and ranges;
//   - end-to-end consumption through a router.Node with a restart: every record is
//     delivered, with its headers, and, once acked, never delivered again.
//
// The checks that need no hook run first, the property tests and the node last, so that a
// broken log fails on the plainest case that shows it.
func TestLog(t *testing.T, h LogHarness) {
	t.Helper()
	testLog(testingSuite{t}, h)
}

// The rules of the contracts, as the suite's failures name them.
const (
	ruleWatermarksNonNegative = "Oldest and HighWatermark are never negative"
	ruleOldestAtMostHWM       = "Oldest <= HighWatermark, also after retention reaches past the end"
	ruleNeverDecrease         = "HighWatermark and Oldest never decrease"
	ruleAppend                = "Append writes at the high watermark and moves it up by one"
	ruleRead                  = "Read(off) for Oldest <= off < HighWatermark returns the record appended at off"
	ruleReadAsAppended        = "Read returns the key, value, timestamp and headers as appended"
	ruleNotFoundBelow         = "Read below Oldest answers ErrNotFound"
	ruleNotFoundOnlyBelow     = "ErrNotFound is for offsets below Oldest only"
	ruleCallerOwns            = "a record's key, value and headers belong to the caller: changing or appending to them changes nothing else"
	ruleTrim                  = "retention removes records below the offset asked only, and leaves the high watermark"
	ruleCorrupt               = "a corrupt record answers ErrCorrupt on every later Read, and damages no other"
	ruleClosedRead            = "once closed, every Read answers ErrLogClosed and nothing else"
	ruleClosedWatermarks      = "a closed log still answers Oldest and HighWatermark as before"
)

// suite is the test a section of TestLog runs in: a *testing.T when a host runs the suite
// (testingSuite), and in the suite's own tests a recorder, which checks that the suite fails
// a broken log with the rule named.
type suite interface {
	rapid.TB
	Run(name string, f func(suite)) bool
	// host returns the *testing.T to hand the harness: it owns what New makes.
	host() *testing.T
}

// testingSuite is a *testing.T as a suite.
type testingSuite struct{ *testing.T }

func (s testingSuite) Run(name string, f func(suite)) bool {
	return s.T.Run(name, func(t *testing.T) { f(testingSuite{t}) })
}

func (s testingSuite) host() *testing.T { return s.T }

// check runs a rapid property test in s: on the *testing.T itself when there is one, so that
// rapid keeps to the test's deadline.
func check(s suite, prop func(*rapid.T)) {
	s.Helper()
	if t, ok := s.(testingSuite); ok {
		rapid.Check(t.T, prop)
		return
	}
	rapid.Check(s, prop)
}

func testLog(t suite, h LogHarness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("routertest: LogHarness.New is required")
	}
	t.Run("contract", func(t suite) { testContract(t, h) })
	if h.Trim != nil {
		t.Run("retention", func(t suite) { testRetention(t, h) })
	}
	if h.Corrupt != nil {
		t.Run("corrupt", func(t suite) { testCorrupt(t, h) })
	}
	if h.Close != nil {
		t.Run("closed", func(t suite) { testClosed(t, h) })
	}
	t.Run("range", func(t suite) {
		if _, ok := h.New(t.host()).(router.RangeReader); !ok {
			t.Skip("the log does not implement router.RangeReader")
		}
		testRange(t, h)
	})
	t.Run("concurrent", func(t suite) { testConcurrent(t, h) })
	if h.Logs.New != nil {
		t.Run("logs", func(t suite) { testLogs(t, h.Logs) })
	}
	t.Run("model", func(t suite) { testModel(t, h) })
	t.Run("range model", func(t suite) {
		if _, ok := h.New(t.host()).(router.RangeReader); !ok {
			t.Skip("the log does not implement router.RangeReader")
		}
		testRangeModel(t, h)
	})
	t.Run("consume", func(t suite) { testConsume(t, h) })
}

// failer is what the checks need of *testing.T, *rapid.T and the suite's workers alike.
type failer interface {
	Helper()
	Fatalf(format string, args ...any)
}

// broke fails t with what the log did and the rule that forbids it.
func broke(t failer, rule, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s: %s", fmt.Sprintf(format, args...), rule)
}

// recordAt returns the key and value the suite appends at off: both name off, so that a
// record read back tells which offset it was appended at, and the value's length varies with
// off, so that byte bounds fall at different places in a range.
func recordAt(off int64) (key, value []byte) {
	return []byte("key-" + strconv.FormatInt(off, 10)),
		[]byte("record-" + strconv.FormatInt(off, 10) + strings.Repeat(".", int(off%5)))
}

// value returns the value the suite appends at off.
func value(off int64) []byte {
	_, v := recordAt(off)
	return v
}

// stampAt returns the timestamp the suite appends the record at off with, for a log that
// keeps them: one of its own to the nanosecond, so that a log rounding them is caught.
func stampAt(off int64) time.Time {
	return time.Unix(1_700_000_000, 0).Add(time.Duration(off)*time.Millisecond + time.Duration(off%997))
}

// appendedAt returns the offset a record the suite appended names in its value.
func appendedAt(rec router.Record) (int64, bool) {
	digits, ok := bytes.CutPrefix(rec.Value, []byte("record-"))
	if !ok {
		return 0, false
	}
	off, err := strconv.ParseInt(string(bytes.TrimRight(digits, ".")), 10, 64)
	return off, err == nil
}

// headersAt returns the headers the suite appends at off to a log that keeps them: none,
// one, or several with a key repeated, an empty key and an empty value, naming off, so
// that headers read back tell which record they were appended with.
func headersAt(off int64) []router.Header {
	n := strconv.FormatInt(off, 10)
	switch off % 4 {
	case 1:
		return []router.Header{{Key: "trace", Value: []byte("t-" + n)}}
	case 2:
		return []router.Header{{Key: "retry", Value: []byte(n)}, {Key: "", Value: []byte{0xff, 0}}, {Key: "retry", Value: nil}}
	case 3:
		return []router.Header{{Key: "h-" + n, Value: []byte(strings.Repeat("v", int(off%7)))}, {Key: "h-" + n, Value: []byte("again")}}
	}
	return nil
}

// keepsHeaders reports whether the suite appends headers to l.
func keepsHeaders(l LogUnderTest) bool {
	_, ok := l.(RecordAppender)
	return ok
}

// equalHeaders reports whether two records' headers are the same: in order, keys and
// values equal (an empty value and a nil one alike).
func equalHeaders(a, b []router.Header) bool {
	return slices.EqualFunc(a, b, func(x, y router.Header) bool { return x.Key == y.Key && bytes.Equal(x.Value, y.Value) })
}

// expected returns the record the suite appended at off, and whether the log keeps its
// timestamp.
func expected(l LogUnderTest, off int64) (router.Record, bool) {
	key, val := recordAt(off)
	if keepsHeaders(l) {
		return router.Record{Key: key, Value: val, Timestamp: stampAt(off), Headers: headersAt(off)}, true
	}
	if _, ok := l.(TimestampedAppender); ok {
		return router.Record{Key: key, Value: val, Timestamp: stampAt(off)}, true
	}
	return router.Record{Key: key, Value: val}, false
}

// cloneHeaders returns a deep copy of headers.
func cloneHeaders(headers []router.Header) []router.Header {
	if headers == nil {
		return nil
	}
	copies := make([]router.Header, len(headers))
	for i, h := range headers {
		copies[i] = router.Header{Key: h.Key, Value: bytes.Clone(h.Value)}
	}
	return copies
}

// appendOne appends the suite's record at the high watermark and returns its offset.
func appendOne(t failer, l LogUnderTest) int64 {
	t.Helper()
	hwm := l.HighWatermark()
	key, val := recordAt(hwm)
	var off int64
	var err error
	if ra, ok := l.(RecordAppender); ok {
		off, err = ra.AppendRecord(router.Record{Key: key, Value: val, Timestamp: stampAt(hwm), Headers: headersAt(hwm)})
	} else if ta, ok := l.(TimestampedAppender); ok {
		off, err = ta.AppendTimestamped(key, val, stampAt(hwm))
	} else {
		off, err = l.Append(key, val)
	}
	if err != nil {
		t.Fatalf("Append at %d: %v", hwm, err)
	}
	if after := l.HighWatermark(); off != hwm || after != hwm+1 {
		broke(t, ruleAppend, "Append returned offset %d and left the high watermark at %d, from %d", off, after, hwm)
	}
	return off
}

// appendN appends n of the suite's records and returns their offsets.
func appendN(t failer, l LogUnderTest, n int) []int64 {
	t.Helper()
	offs := make([]int64, 0, n)
	for range n {
		offs = append(offs, appendOne(t, l))
	}
	return offs
}

// watermarks follows a log's Oldest and HighWatermark through a check: each reading must
// keep their rules, against the reading before too.
type watermarks struct {
	oldest, hwm int64
	read        bool
}

// check reads Oldest, then HighWatermark, and fails on an answer that breaks their rules;
// after says what the suite did last. Oldest is read first so that retention and appends
// running meanwhile cannot make a correct log look as if Oldest passed HighWatermark.
func (w *watermarks) check(t failer, l router.Log, after string) (oldest, hwm int64) {
	t.Helper()
	oldest = l.Oldest()
	hwm = l.HighWatermark()
	switch {
	case oldest < 0 || hwm < 0:
		broke(t, ruleWatermarksNonNegative, "after %s, Oldest answered %d and HighWatermark %d", after, oldest, hwm)
	case w.read && hwm < w.hwm:
		broke(t, ruleNeverDecrease, "after %s, HighWatermark went from %d down to %d", after, w.hwm, hwm)
	case w.read && oldest < w.oldest:
		broke(t, ruleNeverDecrease, "after %s, Oldest went from %d down to %d", after, w.oldest, oldest)
	case oldest > hwm:
		broke(t, ruleOldestAtMostHWM, "after %s, Oldest answered %d, above HighWatermark %d", after, oldest, hwm)
	}
	w.oldest, w.hwm, w.read = oldest, hwm, true
	return oldest, hwm
}

// checkRecord checks a record a call (Read, ReadRange) answered for off, which the suite
// appended: offsetRule is the rule a record of another offset breaks, contentRule the one
// another key, value or timestamp breaks.
func checkRecord(t failer, l LogUnderTest, call string, off int64, got router.Record, offsetRule, contentRule string) {
	t.Helper()
	want, stamped := expected(l, off)
	if bytes.Equal(got.Key, want.Key) && bytes.Equal(got.Value, want.Value) && (!stamped || got.Timestamp.Equal(want.Timestamp)) &&
		equalHeaders(got.Headers, want.Headers) {
		return
	}
	if at, ok := appendedAt(got); ok && at != off {
		broke(t, offsetRule, "%s answered the record appended at %d for offset %d", call, at, off)
	}
	broke(t, contentRule, "%s answered key %q, value %q, timestamp %v, headers %q for offset %d, appended with %q, %q, %v, %q",
		call, got.Key, got.Value, got.Timestamp, got.Headers, off, want.Key, want.Value, want.Timestamp, want.Headers)
}

// readOK reads off, at or above Oldest and below the high watermark, and checks it answers
// the record the suite appended there.
func readOK(t failer, l LogUnderTest, off int64) router.Record {
	t.Helper()
	rec, err := l.Read(off)
	call := fmt.Sprintf("Read(%d)", off)
	switch {
	case errors.Is(err, router.ErrNotFound):
		broke(t, ruleNotFoundOnlyBelow, "%s answered %v with Oldest at %d", call, err, l.Oldest())
	case err != nil:
		broke(t, ruleRead, "%s answered %v (Oldest %d, HighWatermark %d)", call, err, l.Oldest(), l.HighWatermark())
	}
	checkRecord(t, l, call, off, rec, ruleRead, ruleReadAsAppended)
	return rec
}

// readNotFound reads off, below Oldest, and checks it answers ErrNotFound.
func readNotFound(t failer, l LogUnderTest, off int64) {
	t.Helper()
	rec, err := l.Read(off)
	if !errors.Is(err, router.ErrNotFound) {
		broke(t, ruleNotFoundBelow, "Read(%d) answered %s with Oldest at %d", off, describeRead(rec, err), l.Oldest())
	}
}

// describeRead says what a Read that should have failed answered, for a failure.
func describeRead(rec router.Record, err error) string {
	switch at, ok := appendedAt(rec); {
	case err != nil:
		return err.Error()
	case ok:
		return fmt.Sprintf("the record appended at %d, and no error", at)
	}
	return fmt.Sprintf("a record (value %q) and no error", rec.Value)
}

// checkOwned checks that the records' keys, values and header values are the caller's:
// appending to each (writing its spare capacity, if the log left any) and then overwriting
// them, and overwriting the headers themselves, changes no other record of recs, nor another
// part of one, nor anything the log holds (records the suite appended, all readable). call
// names what answered recs.
func checkOwned(t failer, l LogUnderTest, call string, recs []router.Record) {
	t.Helper()
	copies := make([]router.Record, len(recs))
	for i, rec := range recs {
		copies[i] = router.Record{Key: bytes.Clone(rec.Key), Value: bytes.Clone(rec.Value), Headers: cloneHeaders(rec.Headers)}
	}
	same := func(j int) bool {
		return bytes.Equal(recs[j].Key, copies[j].Key) && bytes.Equal(recs[j].Value, copies[j].Value) && equalHeaders(recs[j].Headers, copies[j].Headers)
	}
	for i := range recs {
		parts := map[string][]byte{"key": recs[i].Key, "value": recs[i].Value}
		for k, h := range recs[i].Headers {
			parts[fmt.Sprintf("header %d", k)] = h.Value
		}
		for part, b := range parts {
			for k, spare := len(b), b[:cap(b)]; k < len(spare); k++ {
				spare[k] ^= 0xff // what an append writes in place
			}
			for j := range recs {
				if !same(j) {
					broke(t, ruleCallerOwns, "appending to the %s of record %d that %s answered changed record %d to %q=%q %q",
						part, i, call, j, recs[j].Key, recs[j].Value, recs[j].Headers)
				}
			}
		}
	}
	for _, rec := range recs {
		parts := [][]byte{rec.Key, rec.Value}
		for _, h := range rec.Headers {
			parts = append(parts, h.Value)
		}
		for _, b := range parts {
			for i := range b {
				b[i] ^= 0xff
			}
		}
		for k := range rec.Headers {
			rec.Headers[k].Key += "~" // the caller's to change too
		}
	}
	for off := l.Oldest(); off < l.HighWatermark(); off++ {
		rec, err := l.Read(off)
		if err != nil {
			t.Fatalf("Read(%d) after the caller changed what %s answered: %v", off, call, err)
		}
		if want, _ := expected(l, off); !bytes.Equal(rec.Key, want.Key) || !bytes.Equal(rec.Value, want.Value) || !equalHeaders(rec.Headers, want.Headers) {
			broke(t, ruleCallerOwns, "after the caller changed what %s answered, Read(%d) answers %q=%q %q, appended as %q=%q %q",
				call, off, rec.Key, rec.Value, rec.Headers, want.Key, want.Value, want.Headers)
		}
	}
}

func testContract(t suite, h LogHarness) {
	l := h.New(t.host())
	var w watermarks
	w.check(t, l, "New")
	for range 20 {
		off := appendOne(t, l)
		w.check(t, l, fmt.Sprintf("Append at %d", off))
		readOK(t, l, off)
	}
	_, hwm := w.check(t, l, "20 appends")
	for off := l.Oldest(); off < hwm; off++ {
		readOK(t, l, off) // again, and the first ones after the later appends
	}
	oldest, _ := w.check(t, l, "reads")
	for _, off := range []int64{oldest + (hwm-oldest)/2, hwm - 1} {
		checkOwned(t, l, fmt.Sprintf("Read(%d)", off), []router.Record{readOK(t, l, off)})
	}
}

func testRetention(t suite, h LogHarness) {
	l := h.New(t.host())
	var w watermarks
	offs := appendN(t, l, 50)
	trim := func(target int64) (oldest int64) {
		t.Helper()
		before, hwm := w.check(t, l, "the last step")
		if err := h.Trim(l, target); err != nil {
			t.Fatalf("Trim(%d): %v", target, err)
		}
		what := fmt.Sprintf("Trim(%d) with the high watermark at %d", target, hwm)
		oldest, after := w.check(t, l, what)
		if oldest > max(target, before) {
			broke(t, ruleTrim, "%s moved Oldest from %d to %d", what, before, oldest)
		}
		if after != hwm {
			broke(t, ruleTrim, "%s moved the high watermark to %d", what, after)
		}
		for off := max(oldest, offs[0]); off < hwm; off++ {
			readOK(t, l, off)
		}
		for off := offs[0]; off < min(oldest, hwm); off++ {
			readNotFound(t, l, off)
		}
		return oldest
	}
	trim(offs[30])
	trim(offs[10]) // below Oldest: nothing moves
	offs = append(offs, appendN(t, l, 5)...)
	trim(offs[len(offs)-3])
	// Everything, then past the end: the high watermark stays, appends go on from it.
	trim(l.HighWatermark())
	trim(l.HighWatermark() + 10)
	for _, off := range appendN(t, l, 3) {
		readOK(t, l, off)
	}
	w.check(t, l, "appends after retention past the end")
}

func testCorrupt(t suite, h LogHarness) {
	l := h.New(t.host())
	offs := appendN(t, l, 10)
	bad := offs[4]
	if err := h.Corrupt(l, bad); err != nil {
		t.Fatalf("Corrupt: %v", err)
	}
	readCorrupt := func(when string) {
		t.Helper()
		for range 3 {
			rec, err := l.Read(bad)
			if !errors.Is(err, router.ErrCorrupt) || errors.Is(err, router.ErrNotFound) || errors.Is(err, router.ErrLogClosed) {
				broke(t, ruleCorrupt, "Read(%d) of the corrupt record, %s, answered %s", bad, when, describeRead(rec, err))
			}
		}
		for _, off := range offs {
			if off != bad {
				readOK(t, l, off)
			}
		}
	}
	readCorrupt("right after Corrupt")
	if rr, ok := l.(router.RangeReader); ok {
		for _, from := range []int64{offs[0], offs[3], bad} {
			_, _ = rr.ReadRange(from, 10, 1<<20, nil) // checked in the range section; here, only what it leaves
		}
		readCorrupt("after ranges over it")
	}
	offs = append(offs, appendN(t, l, 5)...)
	readCorrupt("after later appends")
}

func testClosed(t suite, h LogHarness) {
	l := h.New(t.host())
	offs := appendN(t, l, 10)
	if h.Trim != nil {
		if err := h.Trim(l, offs[5]); err != nil {
			t.Fatal(err)
		}
	}
	if h.Corrupt != nil {
		if err := h.Corrupt(l, offs[7]); err != nil {
			t.Fatal(err)
		}
	}
	var w watermarks
	oldest, hwm := w.check(t, l, "the appends")
	if err := h.Close(l); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if l.Oldest() != oldest || l.HighWatermark() != hwm {
		broke(t, ruleClosedWatermarks, "after Close, Oldest answered %d (was %d) and HighWatermark %d (was %d)",
			l.Oldest(), oldest, l.HighWatermark(), hwm)
	}
	for off := offs[0] - 1; off <= hwm; off++ {
		if _, err := l.Read(off); !errors.Is(err, router.ErrLogClosed) || errors.Is(err, router.ErrNotFound) || errors.Is(err, router.ErrCorrupt) {
			broke(t, ruleClosedRead, "Read(%d) of a closed log answered %v", off, err)
		}
	}
	w.check(t, l, "Close and reads")
}

// drawOffset draws an offset in [lo, hi] for an action of a property test. The watermarks
// were checked before, so lo > hi is the log breaking a rule between two of its answers:
// that is a failure naming it, never a panic of the generator.
func drawOffset(rt *rapid.T, lo, hi int64, label string) int64 {
	rt.Helper()
	if lo > hi {
		broke(rt, ruleNeverDecrease, "the log's watermarks moved back while the suite drew a %s in [%d, %d]", label, lo, hi)
	}
	return rapid.Int64Range(lo, hi).Draw(rt, label)
}

// testModel checks appends, reads and retention against a map, with rapid.
func testModel(t suite, h LogHarness) {
	check(t, func(rt *rapid.T) {
		l := h.New(t.host())
		var w watermarks
		_, first := w.check(rt, l, "New")
		appended := int64(0)
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				appended += int64(len(appendN(rt, l, rapid.IntRange(1, 5).Draw(rt, "n"))))
			},
			"read": func(rt *rapid.T) {
				oldest, hwm := w.check(rt, l, "the last action")
				if hwm == first {
					rt.Skip("empty")
				}
				off := drawOffset(rt, first, hwm-1, "offset")
				if off < oldest {
					readNotFound(rt, l, off)
					return
				}
				readOK(rt, l, off)
			},
			"trim": func(rt *rapid.T) {
				if h.Trim == nil {
					rt.Skip("no retention")
				}
				before, hwm := w.check(rt, l, "the last action")
				target := drawOffset(rt, before, hwm+2, "oldest") // past the end too
				if err := h.Trim(l, target); err != nil {
					rt.Fatal(err)
				}
				what := fmt.Sprintf("Trim(%d) with the high watermark at %d", target, hwm)
				if oldest, after := w.check(rt, l, what); oldest > max(target, before) || after != hwm {
					broke(rt, ruleTrim, "%s moved Oldest from %d to %d and the high watermark to %d", what, before, oldest, after)
				}
			},
			"": func(rt *rapid.T) {
				if _, hwm := w.check(rt, l, "the last action"); hwm-first != appended {
					broke(rt, ruleAppend, "high watermark %d after %d appends from %d", hwm, appended, first)
				}
			},
		})
	})
}

// oneLog serves the log under test as partition 0 of topic "conformance".
type oneLog struct{ log LogUnderTest }

func (o oneLog) Get(topic string, partition int32) (router.Log, error) {
	if topic != "conformance" || partition != 0 {
		return nil, fmt.Errorf("routertest: no log %s/%d", topic, partition)
	}
	return o.log, nil
}

// testConsume drives a node over the log: records produced, consumed, some nacked, some
// left to expire, one rejected, a graceful restart in the middle; every record ends acked
// but the rejected one, which stays quarantined across the restart, and none is delivered
// again after its ack or its reject.
func testConsume(t suite, h LogHarness) {
	l := h.New(t.host())
	routes := &Routes{}
	routes.Set("conformance", 0)
	clock := NewClock(time.Unix(1_700_000_000, 0))
	fsys := crashfs.New()
	cfg := router.Config{Logs: oneLog{l}, Routes: routes, Dir: "/state", FS: fsys, Clock: clock}
	node, err := router.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := l.HighWatermark()
	appendN(t, l, 100)
	node.Appended("conformance", 0, l.HighWatermark())
	acked := map[int64]bool{}
	rejected := int64(-1)
	consumeAll := func(round int) {
		for i := 0; ; i++ {
			msgs, err := node.Consume(ctx, "conformance", router.ConsumeOptions{Max: 7})
			if err != nil {
				t.Fatalf("Consume: %v", err)
			}
			if len(msgs) == 0 {
				return
			}
			for j, m := range msgs {
				if !bytes.Equal(m.Value, value(m.Offset)) {
					t.Fatalf("delivered %d with value %q", m.Offset, m.Value)
				}
				if want, _ := expected(l, m.Offset); !equalHeaders(m.Headers, want.Headers) {
					t.Fatalf("delivered %d with headers %q, appended with %q", m.Offset, m.Headers, want.Headers)
				}
				if acked[m.Offset] {
					t.Fatalf("offset %d delivered again after its ack", m.Offset)
				}
				if m.Offset == rejected {
					t.Fatalf("offset %d delivered again after its reject", m.Offset)
				}
				switch {
				case round == 0 && rejected < 0 && j == 2:
					if err := node.Reject(ctx, "conformance", m.Receipt); err != nil {
						t.Fatalf("Reject: %v", err)
					}
					rejected = m.Offset
				case round == 0 && j == 0 && i%3 == 0:
					// left to expire: delivered again after the visibility timeout
				case round == 0 && j == 1:
					if err := node.Nack(ctx, "conformance", m.Receipt, 0); err != nil {
						t.Fatalf("Nack: %v", err)
					}
				default:
					if err := node.Ack(ctx, "conformance", m.Receipt); err != nil {
						t.Fatalf("Ack %d: %v", m.Offset, err)
					}
					acked[m.Offset] = true
				}
			}
		}
	}
	consumeAll(0)
	if err := node.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	node, err = router.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	consumeAll(1)
	if q, err := node.Quarantined("conformance", 0); err != nil || len(q) != 1 || q[0] != rejected {
		t.Fatalf("Quarantined after the restart: %v, %v; want the rejected offset %d", q, err, rejected)
	}
	for off := first; off < l.HighWatermark(); off++ {
		if !acked[off] && off != rejected {
			t.Fatalf("offset %d never delivered and acked", off)
		}
	}
}
