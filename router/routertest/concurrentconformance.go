package routertest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"narad.dev/consume/router"
)

// ruleConcurrent is the rule of router.Log that concurrent use breaks.
const ruleConcurrent = "a Log is safe for concurrent use: beside an appender and retention, readers see whole records as appended"

// The least work of testConcurrent: the appender goes on appending until it has appended
// concurrentAppends records and the readers have read concurrentReads times, so that they
// read while it appends however the goroutines are scheduled.
const (
	concurrentAppends = 400
	concurrentReads   = 400
)

// workers runs the goroutines of a check. It is their failer: the first failure of any is
// kept for the test's goroutine to report, and ends its goroutine as Fatalf ends a test's.
type workers struct {
	wg    sync.WaitGroup
	stop  atomic.Bool // set once the work is done or a worker failed
	mu    sync.Mutex
	first string
}

func (w *workers) Helper() {}

func (w *workers) Fatalf(format string, args ...any) {
	w.mu.Lock()
	if w.first == "" {
		w.first = fmt.Sprintf(format, args...)
	}
	w.mu.Unlock()
	w.stop.Store(true)
	runtime.Goexit()
}

// goCheck runs f on a goroutine of its own.
func (w *workers) goCheck(f func(t failer)) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f(w)
	}()
}

// wait waits for the workers and fails t with the first failure among them.
func (w *workers) wait(t failer) {
	t.Helper()
	w.wg.Wait()
	if w.first != "" {
		t.Fatalf("%s", w.first)
	}
}

// testConcurrent reads the log from two goroutines while a third appends and, with Trim, a
// fourth applies retention: every record read is whole and as appended, ErrNotFound comes
// only below Oldest, the watermarks never decrease. The interleavings differ from run to
// run, but reads and appends always overlap; under -race, a data race between them fails
// the test too.
func testConcurrent(t suite, h LogHarness) {
	l := h.New(t.host())
	appendN(t, l, 10)
	var w workers
	var reads atomic.Int64
	_, ranges := l.(router.RangeReader)
	// The appender starts once both readers have read: the reads counter it checks after
	// its first concurrentAppends orders the reads before its later appends, so under -race
	// only those first appends can show a data race between Read and Append, and they must
	// not all come before the readers run (on a loaded machine, they did).
	var started sync.WaitGroup
	started.Add(2)
	for reader := range 2 {
		w.goCheck(func(t failer) {
			begun := sync.OnceFunc(started.Done)
			defer begun() // a reader that fails at once still lets the appender go
			var marks watermarks
			rng := rand.New(rand.NewPCG(uint64(reader), 27))
			for i := 0; ; i++ {
				done := w.stop.Load() // one more round once the appender is done
				oldest, hwm := marks.check(t, l, "reads beside appends")
				if hwm > oldest {
					off := oldest + rng.Int64N(hwm-oldest)
					switch i % 3 {
					case 0:
						off = hwm - 1 // the newest record, the one being written a moment ago
					case 1:
						off = oldest // the oldest, the one retention takes next
					}
					readConcurrent(t, l, off)
					if ranges {
						rangeConcurrent(t, l, off)
					}
				}
				reads.Add(1) // a round, read or not: the appender waits for rounds, never for records
				begun()
				if done {
					return
				}
			}
		})
	}
	w.goCheck(func(t failer) {
		defer w.stop.Store(true)
		started.Wait()
		for i := 0; i < concurrentAppends || reads.Load() < concurrentReads; i++ {
			if w.stop.Load() {
				return
			}
			appendOne(t, l)
			if i < concurrentAppends {
				// Let the readers run between these appends, the only ones a read may race
				// with (see above): on a loaded machine the appender otherwise made all of
				// them in one time slice while the readers waited, and the race detector saw
				// no read between two appends.
				runtime.Gosched()
			}
		}
	})
	if h.Trim != nil {
		w.goCheck(func(t failer) {
			var marks watermarks
			for !w.stop.Load() {
				if oldest, hwm := marks.check(t, l, "retention beside appends"); hwm-oldest > 40 {
					if err := h.Trim(l, oldest+10); err != nil {
						t.Fatalf("Trim(%d) beside appends: %v", oldest+10, err)
					}
				}
				runtime.Gosched() // retention is occasional: let the readers and the appender run
			}
		})
	}
	w.wait(t)
	var marks watermarks
	oldest, hwm := marks.check(t, l, "the concurrent appends")
	for off := oldest; off < hwm; off++ {
		readOK(t, l, off)
	}
}

// readConcurrent reads off, which was at or above Oldest and below the high watermark a
// moment ago, while others append and trim.
func readConcurrent(t failer, l LogUnderTest, off int64) {
	t.Helper()
	call := fmt.Sprintf("Read(%d) beside appends", off)
	rec, err := l.Read(off)
	switch {
	case errors.Is(err, router.ErrNotFound):
		if oldest := l.Oldest(); oldest <= off {
			broke(t, ruleNotFoundOnlyBelow, "%s answered %v with Oldest at %d", call, err, oldest)
		}
		return // retention got there first
	case err != nil:
		broke(t, ruleConcurrent, "%s answered %v", call, err)
	}
	checkRecord(t, l, call, off, rec, ruleConcurrent, ruleConcurrent)
}

// rangeConcurrent reads a range from off, as readConcurrent reads one record.
func rangeConcurrent(t failer, l LogUnderTest, off int64) {
	t.Helper()
	const max = 8
	call := fmt.Sprintf("ReadRange(%d, %d, %d) beside appends", off, max, unboundedBytes)
	recs, err := readRange(t, l, off, max, unboundedBytes)
	hwm := l.HighWatermark()
	switch {
	case errors.Is(err, router.ErrNotFound):
		if oldest := l.Oldest(); oldest <= off {
			broke(t, ruleNotFoundOnlyBelow, "%s answered %v with Oldest at %d", call, err, oldest)
		}
		return
	case err != nil:
		broke(t, ruleConcurrent, "%s answered %v", call, err)
	case len(recs) == 0:
		broke(t, ruleRangeNonEmpty, "%s answered no record and no error", call)
	case len(recs) > max:
		broke(t, ruleRangeMax, "%s answered %d records", call, len(recs))
	case off+int64(len(recs)) > hwm:
		broke(t, ruleRangeHWM, "%s answered %d records, up to offset %d, with the high watermark at %d", call, len(recs), off+int64(len(recs))-1, hwm)
	}
	for k, rec := range recs {
		checkRecord(t, l, call, off+int64(k), rec, ruleRangeConsecutive, ruleConcurrent)
	}
}
