package routertest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/router"
)

// bugLog is a MemLog with a bug planted: each hook of bugs that is set replaces its method.
type bugLog struct {
	memLogUnderTest
	bugs logBugs

	mu    sync.Mutex
	asked int64          // the highest offset Trim was asked for
	seen  map[int64]bool // offsets a hook answered once already
}

// logBugs are the hooks of a bugLog.
type logBugs struct {
	read          func(l *bugLog, off int64) (router.Record, error)
	readRange     func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error)
	oldest        func(l *bugLog) int64
	highWatermark func(l *bugLog) int64
	trim          func(l *bugLog, oldest int64) // the harness's Trim
}

func (l *bugLog) Read(off int64) (router.Record, error) {
	if l.bugs.read != nil {
		return l.bugs.read(l, off)
	}
	return l.MemLog.Read(off)
}

func (l *bugLog) ReadRange(off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
	if l.bugs.readRange != nil {
		return l.bugs.readRange(l, off, max, maxBytes, dst)
	}
	return l.MemLog.ReadRange(off, max, maxBytes, dst)
}

func (l *bugLog) Oldest() int64 {
	if l.bugs.oldest != nil {
		return l.bugs.oldest(l)
	}
	return l.MemLog.Oldest()
}

func (l *bugLog) HighWatermark() int64 {
	if l.bugs.highWatermark != nil {
		return l.bugs.highWatermark(l)
	}
	return l.MemLog.HighWatermark()
}

// closed reports whether the log was closed.
func (l *bugLog) closed() bool {
	l.MemLog.mu.Lock()
	defer l.MemLog.mu.Unlock()
	return l.MemLog.closed
}

// firstTime reports whether off is asked for the first time, and remembers it.
func (l *bugLog) firstTime(off int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := !l.seen[off]
	l.seen[off] = true
	return first
}

// askedOldest returns the highest offset Trim was asked for.
func (l *bugLog) askedOldest() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asked
}

// bugHarness runs the suite on bugLogs with bugs planted, and MemLogs as the host's Logs.
func bugHarness(bugs logBugs) LogHarness {
	h := memHarness()
	h.New = func(*testing.T) LogUnderTest {
		return &bugLog{memLogUnderTest: memLogUnderTest{NewMemLog()}, bugs: bugs, seen: map[int64]bool{}}
	}
	h.Trim = func(l LogUnderTest, oldest int64) error {
		b := l.(*bugLog)
		b.mu.Lock()
		b.asked = max(b.asked, oldest)
		b.mu.Unlock()
		if b.bugs.trim != nil {
			b.bugs.trim(b, oldest)
		} else {
			b.MemLog.Trim(oldest)
		}
		return nil
	}
	h.Corrupt = func(l LogUnderTest, off int64) error { l.(*bugLog).MemLog.Corrupt(off); return nil }
	h.Close = func(l LogUnderTest) error { l.(*bugLog).MemLog.Close(); return nil }
	return h
}

// readSlots reads n records from off with Read, as a log with an index of preallocated slots
// might: a slot at or past the high watermark reads as an empty record. It ends before a
// later record that fails, and after the one that brings the bytes to maxBytes.
func readSlots(l *bugLog, off int64, n, maxBytes int, dst []router.Record) ([]router.Record, error) {
	total := 0
	for k := range int64(n) {
		if k > 0 && total >= maxBytes {
			break
		}
		if off+k >= l.MemLog.HighWatermark() {
			dst = append(dst, router.Record{})
			continue
		}
		rec, err := l.MemLog.Read(off + k)
		if err != nil {
			if k == 0 {
				return dst, err
			}
			break
		}
		total += rec.PayloadBytes()
		dst = append(dst, rec)
	}
	return dst, nil
}

// bugLogs is a MemLogs with a bug planted: each hook of bugs that is set replaces its
// method.
type bugLogs struct {
	*MemLogs
	bugs logsBugs

	mu     sync.Mutex
	opened map[Partition]bool
}

// logsBugs are the hooks of a bugLogs.
type logsBugs struct {
	get     func(m *bugLogs, topic string, partition int32) (router.Log, error)
	getMany func(m *bugLogs, topic string, partitions []int32, into []router.Log) error
}

func (m *bugLogs) Get(topic string, partition int32) (router.Log, error) {
	if m.bugs.get != nil {
		return m.bugs.get(m, topic, partition)
	}
	return m.MemLogs.Get(topic, partition)
}

func (m *bugLogs) GetMany(topic string, partitions []int32, into []router.Log) error {
	if m.bugs.getMany != nil {
		return m.bugs.getMany(m, topic, partitions, into)
	}
	return m.MemLogs.GetMany(topic, partitions, into)
}

// open reports whether p was opened before, and marks it opened.
func (m *bugLogs) open(p Partition) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.opened[p]
	m.opened[p] = true
	return was
}

// logsBugHarness runs the suite on MemLog, with a bugLogs as the host's Logs.
func logsBugHarness(bugs logsBugs) LogHarness {
	h := memHarness()
	h.Logs = memLogsHarness(func(mem *MemLogs) router.Logs {
		return &bugLogs{MemLogs: mem, bugs: bugs, opened: map[Partition]bool{}}
	})
	return h
}

// plantedBug is a realistic way for a host's log to break its contract, and the rule the
// suite must name when it fails it.
type plantedBug struct {
	name    string
	harness LogHarness
	section func(suite, LogHarness) // nil: the whole suite, as TestLog runs it
	rule    string
	detail  string // more of the failure, where the rule alone does not tell the bug
}

// plantedBugs are the bugs of issue 27's newcomer, numbered as the issue lists them, and
// some more.
func plantedBugs() []plantedBug {
	errStale := errors.New("stale")
	return []plantedBug{
		{
			name: "1: retention past the end moves Oldest beyond the high watermark",
			harness: bugHarness(logBugs{
				oldest: func(l *bugLog) int64 { return max(l.MemLog.Oldest(), l.askedOldest()) }, // the offset asked, not what went
			}),
			rule: ruleOldestAtMostHWM,
		},
		{
			name: "2: ReadRange clamps max to the high watermark off by one",
			harness: bugHarness(logBugs{
				readRange: func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
					if hwm := l.HighWatermark(); off+int64(max) > hwm+1 { // > hwm is meant
						max = int(hwm - off)
					}
					return readSlots(l, off, max, maxBytes, dst)
				},
			}),
			rule: ruleRangeHWM,
		},
		{
			name: "3: ReadRange skips a record between batches of 32",
			harness: bugHarness(logBugs{
				readRange: func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
					total := 0
					for k := range int64(max) {
						at := off + k + k/32 // each batch starts one past where the last ended
						if at >= l.HighWatermark() || (k > 0 && total >= maxBytes) {
							break
						}
						rec, err := l.Read(at)
						if err != nil {
							if k == 0 {
								return dst, err
							}
							break
						}
						total += rec.PayloadBytes()
						dst = append(dst, rec)
					}
					return dst, nil
				},
			}),
			rule:   ruleRangeConsecutive,
			detail: "ReadRange(0, 4096, 1073741824) answered the record of offset 33 after that of 31",
		},
		// 4, a data race between Read and Append: TestSuiteCatchesDataRace.
		{
			name: "5: Get answers nil, nil for a partition it has not opened yet",
			harness: logsBugHarness(logsBugs{get: func(m *bugLogs, topic string, partition int32) (router.Log, error) {
				if !m.open(Partition{topic, partition}) {
					return nil, nil // opens it in the background
				}
				return m.MemLogs.Get(topic, partition)
			}}),
			rule:   ruleGetKnown,
			detail: "a nil Log and no error",
		},
		{
			name: "5: Get answers a nil *MemLog for a partition it has not opened yet",
			harness: logsBugHarness(logsBugs{get: func(m *bugLogs, topic string, partition int32) (router.Log, error) {
				var l *MemLog
				if m.open(Partition{topic, partition}) {
					l = m.MemLogs.Log(topic, partition)
				}
				return l, nil
			}}),
			rule:   ruleGetKnown,
			detail: "a nil *routertest.MemLog and no error",
		},
		{
			name: "6: Get creates a log for any partition asked",
			harness: logsBugHarness(logsBugs{get: func(m *bugLogs, topic string, partition int32) (router.Log, error) {
				return m.MemLogs.Log(topic, partition), nil
			}}),
			rule: ruleGetUnknown,
		},
		{
			name: "6: Get answers a nil *MemLog and no error for an unknown partition",
			harness: logsBugHarness(logsBugs{get: func(m *bugLogs, topic string, partition int32) (router.Log, error) {
				l, _ := m.MemLogs.lookup(topic, partition)
				return l, nil
			}}),
			rule:   ruleGetUnknown,
			detail: "a nil *routertest.MemLog and no error",
		},
		{
			name: "6: Get answers a log with its error for an unknown partition",
			harness: logsBugHarness(logsBugs{get: func(m *bugLogs, topic string, partition int32) (router.Log, error) {
				l, err := m.MemLogs.Get(topic, partition)
				if err != nil {
					return NewMemLog(), err
				}
				return l, nil
			}}),
			rule: ruleGetUnknown,
		},
		{
			name: "6: GetMany leaves an unknown partition's entry nil, with no error",
			harness: logsBugHarness(logsBugs{getMany: func(m *bugLogs, topic string, partitions []int32, into []router.Log) error {
				for i, p := range partitions {
					if l, ok := m.MemLogs.lookup(topic, p); ok {
						into[i] = l
					}
				}
				return nil
			}}),
			rule: ruleGetManyUnknown,
		},
		{
			name: "6: GetMany fills into in reverse order",
			harness: logsBugHarness(logsBugs{getMany: func(m *bugLogs, topic string, partitions []int32, into []router.Log) error {
				for i, p := range partitions {
					l, err := m.MemLogs.Get(topic, p)
					if err != nil {
						return err
					}
					into[len(partitions)-1-i] = l
				}
				return nil
			}}),
			rule:   ruleGetMany,
			detail: "a log unlike",
		},
		{
			name: "6: GetMany leaves the last entry nil",
			harness: logsBugHarness(logsBugs{getMany: func(m *bugLogs, topic string, partitions []int32, into []router.Log) error {
				return m.MemLogs.GetMany(topic, partitions[:len(partitions)-1], into)
			}}),
			rule:   ruleGetMany,
			detail: "left into[",
		},
		{
			name: "7: HighWatermark counts the records retained, and drops at a trim",
			harness: bugHarness(logBugs{
				highWatermark: func(l *bugLog) int64 { return l.MemLog.HighWatermark() - l.MemLog.Oldest() },
			}),
			rule:   ruleNeverDecrease,
			detail: "HighWatermark went from 50 down to 20",
		},
		{
			name: "8: retention only moves Oldest, and Read still answers the records below it",
			harness: bugHarness(logBugs{
				oldest: func(l *bugLog) int64 { return min(max(l.MemLog.Oldest(), l.askedOldest()), l.MemLog.HighWatermark()) },
				trim:   func(*bugLog, int64) {}, // the records go later, lazily
			}),
			rule: ruleNotFoundBelow,
		},
		{
			name: "9: a closed log answers ErrNotFound below Oldest",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				if off < l.MemLog.Oldest() {
					return router.Record{}, router.ErrNotFound // checked before closed
				}
				return l.MemLog.Read(off)
			}}),
			rule: ruleClosedRead,
		},
		{
			name: "9: a closed log answers 0 for Oldest and HighWatermark",
			harness: bugHarness(logBugs{
				oldest: func(l *bugLog) int64 {
					if l.closed() {
						return 0
					}
					return l.MemLog.Oldest()
				},
				highWatermark: func(l *bugLog) int64 {
					if l.closed() {
						return 0
					}
					return l.MemLog.HighWatermark()
				},
			}),
			rule: ruleClosedWatermarks,
		},
		{
			name: "10: ReadRange ignores maxBytes",
			harness: bugHarness(logBugs{readRange: func(l *bugLog, off int64, max, _ int, dst []router.Record) ([]router.Record, error) {
				return l.MemLog.ReadRange(off, max, unboundedBytes, dst)
			}}),
			rule: ruleRangeBytes,
		},
		{
			name: "10: ReadRange answers nothing when the first record alone passes maxBytes",
			harness: bugHarness(logBugs{readRange: func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
				total := 0
				for k := range int64(max) {
					if off+k >= l.HighWatermark() {
						break
					}
					rec, err := l.Read(off + k)
					if err != nil {
						if k == 0 {
							return dst, err
						}
						break
					}
					if total += rec.PayloadBytes(); total > maxBytes {
						break // never more than maxBytes, not even the first record
					}
					dst = append(dst, rec)
				}
				return dst, nil
			}}),
			rule: ruleRangeNonEmpty,
		},
		{
			name: "10: ReadRange drops the record that crosses maxBytes",
			harness: bugHarness(logBugs{readRange: func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
				total := 0
				for k := range int64(max) {
					if off+k >= l.HighWatermark() {
						break
					}
					rec, err := l.Read(off + k)
					if err != nil {
						if k == 0 {
							return dst, err
						}
						break
					}
					if total += rec.PayloadBytes(); k > 0 && total >= maxBytes {
						break
					}
					dst = append(dst, rec)
				}
				return dst, nil
			}}),
			rule: ruleRangeCrossingKept,
		},
		{
			name: "11: ReadRange reads max+1 records",
			harness: bugHarness(logBugs{readRange: func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
				return l.MemLog.ReadRange(off, max+1, maxBytes, dst)
			}}),
			rule: ruleRangeMax,
		},
		{
			name: "12: a corrupt record answers ErrCorrupt once, then a stale copy",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				rec, err := l.MemLog.Read(off)
				if errors.Is(err, router.ErrCorrupt) && !l.firstTime(off) {
					key, _ := recordAt(off)
					return router.Record{Key: key, Value: []byte(errStale.Error())}, nil // the retry read the replica
				}
				return rec, err
			}}),
			rule: ruleCorrupt,
		},
		{
			name: "12: ReadRange hands out a corrupt record midway",
			harness: bugHarness(logBugs{readRange: func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
				got, err := rangeByRead(l, off, max, maxBytes, dst)
				if err != nil || len(got)-len(dst) == max {
					return got, err
				}
				if at := off + int64(len(got)-len(dst)); at < l.HighWatermark() {
					if _, err := l.Read(at); errors.Is(err, router.ErrCorrupt) {
						got = append(got, router.Record{Value: []byte("damaged bytes")})
					}
				}
				return got, nil
			}}),
			rule: ruleRangeLater,
		},
		{
			name: "13: Read is off by one once retention has run",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				if l.MemLog.Oldest() > 0 {
					off++ // the index counts from the segment before the oldest
				}
				return l.MemLog.Read(off)
			}}),
			rule:   ruleRead,
			detail: "Read(30) answered the record appended at 31 for offset 30",
		},
		{
			name: "13: Read drops the key",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				rec, err := l.MemLog.Read(off)
				rec.Key = nil
				return rec, err
			}}),
			rule: ruleReadAsAppended,
		},
		{
			name: "13: Read rounds timestamps to the millisecond",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				rec, err := l.MemLog.Read(off)
				rec.Timestamp = rec.Timestamp.Truncate(time.Millisecond)
				return rec, err
			}}),
			rule:   ruleReadAsAppended,
			detail: "timestamp",
		},
		{
			name: "Read answers a key that shares its capacity with the value",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				rec, err := l.MemLog.Read(off)
				buf := append(append([]byte(nil), rec.Key...), rec.Value...)
				return router.Record{Key: buf[:len(rec.Key)], Value: buf[len(rec.Key):], Timestamp: rec.Timestamp, Headers: rec.Headers}, err
			}}),
			rule: ruleCallerOwns,
		},
		{
			name: "13: Read drops the headers",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				rec, err := l.MemLog.Read(off)
				rec.Headers = nil
				return rec, err
			}}),
			rule:   ruleReadAsAppended,
			detail: "headers",
		},
		{
			name: "13: Read answers the headers in reverse order",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				rec, err := l.MemLog.Read(off)
				slices.Reverse(rec.Headers)
				return rec, err
			}}),
			rule: ruleReadAsAppended,
		},
		{
			name: "13: Read keeps one header of a repeated key",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				rec, err := l.MemLog.Read(off)
				seen := map[string]bool{}
				rec.Headers = slices.DeleteFunc(rec.Headers, func(h router.Header) bool {
					dup := seen[h.Key]
					seen[h.Key] = true
					return dup
				})
				return rec, err
			}}),
			rule: ruleReadAsAppended,
		},
		{
			name: "ReadRange drops the headers",
			harness: bugHarness(logBugs{readRange: func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
				got, err := l.MemLog.ReadRange(off, max, maxBytes, dst)
				for i := len(dst); i < len(got); i++ {
					got[i].Headers = nil
				}
				return got, err
			}}),
			rule:   ruleRangeConsecutive,
			detail: "headers",
		},
		{
			name: "Read answers the header values the log holds, not copies",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				rec, err := l.MemLog.Read(off)
				if err == nil {
					l.MemLog.mu.Lock()
					rec.Headers = l.MemLog.headersOf(off - l.MemLog.oldest)
					l.MemLog.mu.Unlock()
				}
				return rec, err
			}}),
			rule: ruleCallerOwns,
		},
		{
			name: "Trim removes one record more than asked",
			harness: bugHarness(logBugs{
				trim: func(l *bugLog, oldest int64) { l.MemLog.Trim(oldest + 1) },
			}),
			rule: ruleTrim,
		},
		{
			name: "ReadRange discards what dst holds",
			harness: bugHarness(logBugs{readRange: func(l *bugLog, off int64, max, maxBytes int, _ []router.Record) ([]router.Record, error) {
				return l.MemLog.ReadRange(off, max, maxBytes, nil)
			}}),
			rule: ruleRangeDst,
		},
		{
			name: "ReadRange appends a record with the first record's error",
			harness: bugHarness(logBugs{readRange: func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
				got, err := l.MemLog.ReadRange(off, max, maxBytes, dst)
				if err != nil {
					got = append(got, router.Record{})
				}
				return got, err
			}}),
			rule: ruleRangeFirst,
		},
		{
			name: "ReadRange fails on a corrupt record after the first",
			harness: bugHarness(logBugs{readRange: func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
				got, err := rangeByRead(l, off, max, maxBytes, dst)
				if at := off + int64(len(got)-len(dst)); err == nil && at < l.HighWatermark() && len(got)-len(dst) < max {
					if _, err := l.Read(at); errors.Is(err, router.ErrCorrupt) {
						return got, err
					}
				}
				return got, err
			}}),
			rule: ruleRangeErr,
		},
		{
			name: "concurrent readers: Read answers torn values",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				rec, err := l.MemLog.Read(off)
				rec.Value = rec.Value[:len(rec.Value)/2]
				return rec, err
			}}),
			section: testConcurrent,
			rule:    ruleConcurrent,
		},
		{
			name: "concurrent readers: ReadRange reads past the high watermark",
			harness: bugHarness(logBugs{readRange: func(l *bugLog, off int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
				return readSlots(l, off, max, maxBytes, dst)
			}}),
			section: testConcurrent,
			rule:    ruleRangeHWM,
		},
		{
			name: "concurrent readers: Read answers ErrNotFound for the newest record",
			harness: bugHarness(logBugs{read: func(l *bugLog, off int64) (router.Record, error) {
				if off == l.MemLog.HighWatermark()-1 {
					return router.Record{}, router.ErrNotFound
				}
				return l.MemLog.Read(off)
			}}),
			section: testConcurrent,
			rule:    ruleNotFoundOnlyBelow,
		},
		// The property tests draw offsets from the log's watermarks: a log that breaks
		// their rules fails with the rule named, never a panic of a generator.
		{
			name:    "property test: retention past the end",
			harness: bugHarness(logBugs{oldest: func(l *bugLog) int64 { return max(l.MemLog.Oldest(), l.askedOldest()) }}),
			section: testModel,
			rule:    ruleOldestAtMostHWM,
		},
		{
			name:    "range property test: retention past the end",
			harness: bugHarness(logBugs{oldest: func(l *bugLog) int64 { return max(l.MemLog.Oldest(), l.askedOldest()) }}),
			section: testRangeModel,
			rule:    ruleOldestAtMostHWM,
		},
		{
			name:    "property test: HighWatermark drops at a trim",
			harness: bugHarness(logBugs{highWatermark: func(l *bugLog) int64 { return l.MemLog.HighWatermark() - l.MemLog.Oldest() }}),
			section: testModel,
			rule:    ruleNeverDecrease,
		},
		{
			name:    "range property test: HighWatermark drops at a trim",
			harness: bugHarness(logBugs{highWatermark: func(l *bugLog) int64 { return l.MemLog.HighWatermark() - l.MemLog.Oldest() }}),
			section: testRangeModel,
			rule:    ruleNeverDecrease,
		},
	}
}

// The suite fails each planted bug, with the rule it breaks named, and no panic.
func TestSuiteCatchesPlantedBugs(t *testing.T) {
	quietRapid(t)
	for _, bug := range plantedBugs() {
		t.Run(bug.name, func(t *testing.T) {
			section := bug.section
			if section == nil {
				section = testLog
			}
			got := runRecorded(t, func(s suite) { section(s, bug.harness) })
			switch {
			case got == "":
				t.Fatalf("the suite passed the log")
			case strings.Contains(got, "panic"):
				t.Fatalf("the suite panicked on the log: %s", got)
			case !strings.Contains(got, bug.rule) || !strings.Contains(got, bug.detail):
				t.Fatalf("failure %q, want one naming the rule %q (and %q)", got, bug.rule, bug.detail)
			}
		})
	}
}

// racyLog appends under a lock but reads without one: planted bug 4, a data race between
// Read and Append that only the race detector sees.
type racyLog struct {
	mu   sync.Mutex
	recs []router.Record
	hwm  atomic.Int64
}

func (l *racyLog) Append(key, value []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, router.Record{Key: bytes.Clone(key), Value: bytes.Clone(value)})
	l.hwm.Store(int64(len(l.recs)))
	return int64(len(l.recs)) - 1, nil
}

func (l *racyLog) Read(off int64) (router.Record, error) {
	switch {
	case off < 0:
		return router.Record{}, router.ErrNotFound
	case off >= l.hwm.Load():
		return router.Record{}, fmt.Errorf("offset %d at or above the high watermark", off)
	}
	rec := l.recs[off] // the slice without the lock: Append may be replacing it
	return router.Record{Key: bytes.Clone(rec.Key), Value: bytes.Clone(rec.Value)}, nil
}

func (l *racyLog) HighWatermark() int64 { return l.hwm.Load() }
func (l *racyLog) Oldest() int64        { return 0 }

// racyChildEnv set runs TestRacyLogChild, in the process TestSuiteCatchesDataRace starts.
const racyChildEnv = "ROUTERTEST_RACY_LOG_CHILD"

// TestRacyLogChild runs the suite on racyLog. The race detector fails the test a race
// happens in, whatever the test checks, so TestSuiteCatchesDataRace runs it in a process of
// its own and reads the outcome.
func TestRacyLogChild(t *testing.T) {
	if os.Getenv(racyChildEnv) == "" {
		t.Skip("run by TestSuiteCatchesDataRace")
	}
	TestLog(t, LogHarness{New: func(*testing.T) LogUnderTest { return &racyLog{} }})
}

// Under -race, the suite's concurrent section catches planted bug 4, a data race between
// Read and Append, and nothing else fails racyLog.
func TestSuiteCatchesDataRace(t *testing.T) {
	if !raceDetector {
		t.Skip("the data race shows only under -race")
	}
	// The race detector reports a race only between accesses it saw unordered, so a run
	// whose reads the system scheduled clear of the racing appends finds none (it happened,
	// rarely, in full race runs on a busy machine): a child that passes is run again, up to
	// three times in all.
	var out []byte
	for run := 1; ; run++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRacyLogChild$", "-test.count=1")
		// Four processors, so that the readers and the appender run in parallel (threads the
		// system interleaves) even on a machine with one CPU.
		cmd.Env = append(os.Environ(), racyChildEnv+"=1", "GOMAXPROCS=4")
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			break
		}
		if run == 3 {
			t.Fatalf("the suite passed a log that reads without its lock, three times:\n%s", out)
		}
	}
	for _, want := range []string{"WARNING: DATA RACE", "race detected during execution of test", "--- FAIL: TestRacyLogChild/concurrent"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Fatalf("no %q in the output of the suite on racyLog:\n%s", want, out)
		}
	}
	if n := bytes.Count(out, []byte("--- FAIL:")); n != 2 {
		t.Fatalf("%d tests failed, want TestRacyLogChild and its concurrent section:\n%s", n, out)
	}
}
