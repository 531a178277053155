package routertest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"narad.dev/consume/router"
)

// rangeLog is a MemLog with a ReadRange built on Read, and knobs that break the contract
// in the ways the suite must catch.
type rangeLog struct {
	memLogUnderTest
	pastHWM      bool // returns one record past the high watermark
	dropCrossing bool // stops before the record that crosses maxBytes
	failMidway   bool // fails (ErrCorrupt) on a corrupt record after the first
	ignoreMax    bool // reads up to max+1 records
	appendOnFail bool // appends an empty record with the first record's error
}

var _ router.RangeReader = (*rangeLog)(nil)

func (l *rangeLog) ReadRange(offset int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
	hwm := l.HighWatermark()
	if l.ignoreMax {
		max++
	}
	if l.pastHWM {
		hwm++
	}
	total := 0
	for k := int64(0); k < int64(max) && offset+k < hwm && (k == 0 || total < maxBytes); k++ {
		var rec router.Record
		var err error
		if offset+k < l.HighWatermark() {
			rec, err = l.Read(offset + k)
		} else {
			rec = router.Record{Value: []byte("invented")}
		}
		if err != nil {
			if k == 0 || l.failMidway {
				if l.appendOnFail {
					dst = append(dst, router.Record{})
				}
				return dst, err
			}
			break
		}
		size := len(rec.Key) + len(rec.Value)
		if l.dropCrossing && k > 0 && total+size >= maxBytes {
			break
		}
		total += size
		dst = append(dst, rec)
	}
	return dst, nil
}

func rangeHarness(knobs rangeLog) LogHarness {
	return LogHarness{
		New: func(*testing.T) LogUnderTest {
			l := knobs
			l.memLogUnderTest = memLogUnderTest{NewMemLog()}
			return &l
		},
		Trim:    func(l LogUnderTest, oldest int64) error { l.(*rangeLog).Trim(oldest); return nil },
		Corrupt: func(l LogUnderTest, off int64) error { l.(*rangeLog).Corrupt(off); return nil },
		Close:   func(l LogUnderTest) error { l.(*rangeLog).Close(); return nil },
	}
}

// A log with a correct ReadRange passes the whole suite, its range section included.
func TestRangeReaderConformance(t *testing.T) {
	TestLog(t, rangeHarness(rangeLog{}))
}

// recorder is a failer that keeps the first failure and ends its goroutine, as
// testing.T.Fatalf does.
type recorder struct{ failed string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// check runs f against a fresh log of h, with r as its failer, on a goroutine of its own.
func (r *recorder) check(h LogHarness, t *testing.T, f func(failer, LogUnderTest)) string {
	l := h.New(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r, l)
	}()
	<-done
	return r.failed
}

// The range section catches each way of breaking the contract.
func TestRangeChecksCatchBrokenLogs(t *testing.T) {
	bounds := func(t failer, l LogUnderTest) { checkRangeBounds(t, l, appendN(t, l, 20)) }
	corruptMid := func(t failer, l LogUnderTest) {
		offs := appendN(t, l, 10)
		l.(*rangeLog).Corrupt(offs[4])
		checkRangeEndsBefore(t, l, offs[2], offs[4])
	}
	corruptFirst := func(t failer, l LogUnderTest) {
		offs := appendN(t, l, 10)
		l.(*rangeLog).Corrupt(offs[4])
		checkRangeFails(t, l, offs[4], router.ErrCorrupt)
	}
	tests := []struct {
		name  string
		knobs rangeLog
		check func(failer, LogUnderTest)
		want  string
	}{
		{"past the high watermark", rangeLog{pastHWM: true}, bounds, "past the high watermark"},
		{"the crossing record dropped", rangeLog{dropCrossing: true}, bounds, "the crossing record is kept"},
		{"more than max", rangeLog{ignoreMax: true}, bounds, "records"},
		{"an error for a corrupt record midway", rangeLog{failMidway: true}, corruptMid, "but Read"},
		{"a record appended with the error", rangeLog{appendOnFail: true}, corruptFirst, "want none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			got := r.check(rangeHarness(tt.knobs), t, tt.check)
			if !strings.Contains(got, tt.want) {
				t.Fatalf("failure %q, want one mentioning %q", got, tt.want)
			}
		})
	}
	t.Run("a correct log passes the same checks", func(t *testing.T) {
		for _, check := range []func(failer, LogUnderTest){bounds, corruptMid, corruptFirst} {
			var r recorder
			if got := r.check(rangeHarness(rangeLog{}), t, check); got != "" {
				t.Fatal(got)
			}
		}
	})
}
