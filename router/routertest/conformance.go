package routertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"narad.dev/consume/internal/memfs"
	"narad.dev/consume/router"
)

// LogUnderTest is a host's log as the conformance suite drives it: the router.Log the node
// reads, plus a way to append.
type LogUnderTest interface {
	router.Log
	Append(key, value []byte) (offset int64, err error)
}

// LogHarness tells TestLog how to make and handle the host's log. New is required; each
// nil hook skips the checks that need it.
type LogHarness struct {
	// New returns a new, empty log. It may start at any offset.
	New func(t *testing.T) LogUnderTest
	// Trim applies retention so that records below oldest are gone. A log that drops whole
	// segments may keep some of them: the suite checks against what Oldest reports after.
	Trim func(l LogUnderTest, oldest int64) error
	// Corrupt makes the record at offset permanently unreadable (a bit flip on disk).
	Corrupt func(l LogUnderTest, offset int64) error
	// Close closes the log.
	Close func(l LogUnderTest) error
}

// TestLog runs the library's conformance suite against a host's log: the contract of
// router.Log case by case, a model-based property test of appends, reads and retention,
// and end-to-end consumption through a router.Node with a restart, checking that every
// record is delivered and, once acked, never lost. A log that offers router.RangeReader
// has that checked too: ranges agree with Read record by record, keep their bounds (max,
// maxBytes with the crossing record kept, at least one record, nothing at or above the
// high watermark), fail as Read does on their first record, end before a corrupt record,
// and answer ErrLogClosed once the log is closed.
func TestLog(t *testing.T, h LogHarness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("routertest: LogHarness.New is required")
	}
	t.Run("contract", func(t *testing.T) { testContract(t, h) })
	if h.Trim != nil {
		t.Run("retention", func(t *testing.T) { testRetention(t, h) })
	}
	if h.Corrupt != nil {
		t.Run("corrupt", func(t *testing.T) { testCorrupt(t, h) })
	}
	if h.Close != nil {
		t.Run("closed", func(t *testing.T) { testClosed(t, h) })
	}
	t.Run("model", func(t *testing.T) { testModel(t, h) })
	t.Run("range", func(t *testing.T) {
		if _, ok := h.New(t).(router.RangeReader); !ok {
			t.Skip("the log does not implement router.RangeReader")
		}
		testRange(t, h)
	})
	t.Run("consume", func(t *testing.T) { testConsume(t, h) })
}

// failer is what the checks need of *testing.T and *rapid.T alike.
type failer interface {
	Helper()
	Fatalf(format string, args ...any)
}

func value(i int64) []byte { return []byte(fmt.Sprintf("record-%d", i)) }

func appendN(t failer, l LogUnderTest, n int) []int64 {
	t.Helper()
	var offs []int64
	for range n {
		hwm := l.HighWatermark()
		off, err := l.Append([]byte("k"), value(hwm))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if off != hwm || l.HighWatermark() != hwm+1 {
			t.Fatalf("Append returned offset %d with high watermark %d, want %d then %d", off, l.HighWatermark(), hwm, hwm+1)
		}
		offs = append(offs, off)
	}
	return offs
}

func readOK(t failer, l LogUnderTest, off int64) {
	t.Helper()
	rec, err := l.Read(off)
	if err != nil {
		t.Fatalf("Read(%d): %v", off, err)
	}
	if !bytes.Equal(rec.Value, value(off)) || !bytes.Equal(rec.Key, []byte("k")) {
		t.Fatalf("Read(%d) = key %q value %q, want %q %q", off, rec.Key, rec.Value, "k", value(off))
	}
}

func testContract(t *testing.T, h LogHarness) {
	l := h.New(t)
	if l.Oldest() > l.HighWatermark() {
		t.Fatalf("Oldest %d above HighWatermark %d", l.Oldest(), l.HighWatermark())
	}
	for _, off := range appendN(t, l, 20) {
		readOK(t, l, off)
	}
	rec, err := l.Read(l.HighWatermark() - 1)
	if err != nil {
		t.Fatal(err)
	}
	rec.Value[0] ^= 0xff // the caller owns the slices: changing them changes nothing stored
	readOK(t, l, l.HighWatermark()-1)
}

func testRetention(t *testing.T, h LogHarness) {
	l := h.New(t)
	offs := appendN(t, l, 50)
	if err := h.Trim(l, offs[30]); err != nil {
		t.Fatalf("Trim: %v", err)
	}
	oldest := l.Oldest()
	if oldest < offs[0] || oldest > offs[30] || l.HighWatermark() != offs[49]+1 {
		t.Fatalf("after Trim(%d): Oldest %d, HighWatermark %d", offs[30], oldest, l.HighWatermark())
	}
	for _, off := range offs {
		_, err := l.Read(off)
		if off < oldest && !errors.Is(err, router.ErrNotFound) {
			t.Fatalf("Read(%d) below Oldest %d: %v, want ErrNotFound", off, oldest, err)
		}
		if off >= oldest {
			readOK(t, l, off)
		}
	}
	if err := h.Trim(l, offs[10]); err != nil {
		t.Fatalf("Trim below Oldest: %v", err)
	}
	if l.Oldest() < oldest {
		t.Fatalf("Oldest moved back from %d to %d", oldest, l.Oldest())
	}
}

func testCorrupt(t *testing.T, h LogHarness) {
	l := h.New(t)
	offs := appendN(t, l, 10)
	if err := h.Corrupt(l, offs[4]); err != nil {
		t.Fatalf("Corrupt: %v", err)
	}
	for range 3 {
		if _, err := l.Read(offs[4]); !errors.Is(err, router.ErrCorrupt) {
			t.Fatalf("Read of a corrupt record: %v, want ErrCorrupt every time", err)
		}
	}
	readOK(t, l, offs[3])
	readOK(t, l, offs[5])
}

func testClosed(t *testing.T, h LogHarness) {
	l := h.New(t)
	offs := appendN(t, l, 10)
	if h.Trim != nil {
		if err := h.Trim(l, offs[5]); err != nil {
			t.Fatal(err)
		}
	}
	oldest, hwm := l.Oldest(), l.HighWatermark()
	if err := h.Close(l); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for off := offs[0] - 1; off <= hwm; off++ {
		if _, err := l.Read(off); !errors.Is(err, router.ErrLogClosed) || errors.Is(err, router.ErrNotFound) || errors.Is(err, router.ErrCorrupt) {
			t.Fatalf("Read(%d) of a closed log: %v, want ErrLogClosed and nothing else", off, err)
		}
	}
	if l.Oldest() != oldest || l.HighWatermark() != hwm {
		t.Fatalf("a closed log must still answer Oldest and HighWatermark")
	}
}

// testModel checks appends, reads and retention against a map, with rapid.
func testModel(t *testing.T, h LogHarness) {
	rapid.Check(t, func(rt *rapid.T) {
		l := h.New(t)
		written := map[int64]bool{}
		first := l.HighWatermark()
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				for _, off := range appendN(rt, l, rapid.IntRange(1, 5).Draw(rt, "n")) {
					written[off] = true
				}
			},
			"read": func(rt *rapid.T) {
				hwm := l.HighWatermark()
				if hwm == first {
					rt.Skip("empty")
				}
				off := rapid.Int64Range(first, hwm-1).Draw(rt, "offset")
				if off < l.Oldest() {
					if _, err := l.Read(off); !errors.Is(err, router.ErrNotFound) {
						rt.Fatalf("Read(%d) below Oldest %d: %v", off, l.Oldest(), err)
					}
					return
				}
				readOK(rt, l, off)
			},
			"trim": func(rt *rapid.T) {
				if h.Trim == nil {
					rt.Skip("no retention")
				}
				before := l.Oldest()
				target := rapid.Int64Range(before, l.HighWatermark()).Draw(rt, "oldest")
				if err := h.Trim(l, target); err != nil {
					rt.Fatal(err)
				}
				if l.Oldest() < before || l.Oldest() > target {
					rt.Fatalf("Trim(%d): Oldest went from %d to %d", target, before, l.Oldest())
				}
			},
			"": func(rt *rapid.T) {
				if l.Oldest() > l.HighWatermark() {
					rt.Fatalf("Oldest %d above HighWatermark %d", l.Oldest(), l.HighWatermark())
				}
				if int64(len(written)) != l.HighWatermark()-first {
					rt.Fatalf("high watermark %d after %d appends from %d", l.HighWatermark(), len(written), first)
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
// left to expire, a graceful restart in the middle; every record ends acked, none twice
// after its ack.
func testConsume(t *testing.T, h LogHarness) {
	l := h.New(t)
	routes := &Routes{}
	routes.Set("conformance", 0)
	clock := NewClock(time.Unix(1_700_000_000, 0))
	fsys := memfs.New()
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
				if acked[m.Offset] {
					t.Fatalf("offset %d delivered again after its ack", m.Offset)
				}
				switch {
				case round == 0 && j == 0 && i%3 == 0:
					// left to expire: delivered again after the visibility timeout
				case round == 0 && j == 1:
					if err := node.Nack(ctx, "conformance", m.Receipt.String(), 0); err != nil {
						t.Fatalf("Nack: %v", err)
					}
				default:
					if err := node.Ack(ctx, "conformance", m.Receipt.String()); err != nil {
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
	for off := first; off < l.HighWatermark(); off++ {
		if !acked[off] {
			t.Fatalf("offset %d never delivered and acked", off)
		}
	}
}
