package routertest

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"narad.dev/consume/router"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memLogUnderTest adapts MemLog to the suite.
type memLogUnderTest struct{ *MemLog }

var (
	_ TimestampedAppender = memLogUnderTest{}
	_ RecordAppender      = memLogUnderTest{}
)

func (m memLogUnderTest) Append(key, value []byte) (int64, error) {
	return m.MemLog.Append(key, value, time.Time{}), nil
}

func (m memLogUnderTest) AppendTimestamped(key, value []byte, ts time.Time) (int64, error) {
	return m.MemLog.Append(key, value, ts), nil
}

func (m memLogUnderTest) AppendRecord(rec router.Record) (int64, error) {
	return m.MemLog.AppendRecord(rec), nil
}

// memHarness runs the suite on MemLog, and on MemLogs as the host's Logs.
func memHarness() LogHarness {
	return LogHarness{
		New:     func(*testing.T) LogUnderTest { return memLogUnderTest{NewMemLog()} },
		Trim:    func(l LogUnderTest, oldest int64) error { l.(memLogUnderTest).Trim(oldest); return nil },
		Corrupt: func(l LogUnderTest, off int64) error { l.(memLogUnderTest).Corrupt(off); return nil },
		Close:   func(l LogUnderTest) error { l.(memLogUnderTest).Close(); return nil },
		Logs:    memLogsHarness(func(m *MemLogs) router.Logs { return m }),
	}
}

// memLogsKnown are the partitions memLogsHarness fills; the i-th holds i records, so that
// the suite can tell their logs apart.
var memLogsKnown = []Partition{{"orders", 0}, {"orders", 1}, {"orders", 3}, {"audit", 7}}

// memLogsHarness hands the suite the Logs wrap makes of MemLogs filled with memLogsKnown:
// the MemLogs itself, or a Logs built on it.
func memLogsHarness(wrap func(*MemLogs) router.Logs) LogsHarness {
	return LogsHarness{
		New: func(*testing.T) router.Logs {
			mem := &MemLogs{}
			for i, p := range memLogsKnown {
				l := mem.Log(p.Topic, p.Partition)
				for range i {
					l.Append(nil, []byte(p.Topic), time.Time{})
				}
			}
			return wrap(mem)
		},
		Known: memLogsKnown,
	}
}

// MemLog keeps the contract it stands in for, and MemLogs the router.Logs and
// router.ManyGetter contract.
func TestMemLogConformance(t *testing.T) {
	TestLog(t, memHarness())
}

func TestClockRunsTimersInOrder(t *testing.T) {
	c := NewClock(time.Unix(0, 0))
	var fired []int
	c.AfterFunc(2*time.Second, func() { fired = append(fired, 2) })
	stop := c.AfterFunc(time.Second, func() { fired = append(fired, 1) })
	c.AfterFunc(time.Second, func() { fired = append(fired, 11) })
	if !stop() {
		t.Fatal("stop of a pending timer reports true")
	}
	c.AfterFunc(3*time.Second, func() {
		fired = append(fired, 3)
		if got := c.Now(); got != time.Unix(3, 0) {
			t.Errorf("a timer runs with the clock at its deadline, got %v", got)
		}
	})
	c.Advance(2500 * time.Millisecond)
	if len(fired) != 2 || fired[0] != 11 || fired[1] != 2 || c.Timers() != 1 {
		t.Fatalf("fired %v, %d pending", fired, c.Timers())
	}
	c.Advance(time.Second)
	if len(fired) != 3 || c.Now() != time.Unix(3, 500_000_000) {
		t.Fatalf("fired %v at %v", fired, c.Now())
	}
}
