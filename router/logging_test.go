package router_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// recordingHandler keeps every log record, for tests that check the lines a node logs.
type recordingHandler struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	line := logLine{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool {
		line.attrs[a.Key] = a.Value.Resolve().Any()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, line)
	return nil
}

// matching returns the lines whose message is msg, as partition, offset and one more attr.
func (h *recordingHandler) matching(msg, attr string) [][3]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out [][3]int64
	for _, l := range h.lines {
		if l.msg == msg {
			out = append(out, [3]int64{num(l.attrs["partition"]), num(l.attrs["offset"]), num(l.attrs[attr])})
		}
	}
	return out
}

// num is an integer attribute's value, -1 when it is missing.
func num(v any) int64 {
	if n, ok := v.(int64); ok {
		return n
	}
	return -1
}

const (
	corruptLine = "consume: skipping a permanently unreadable record; it will not be delivered"
	jumpLine    = "consume: retention outran the consumer; the frontier jumped to the oldest retained offset"
)

// newLoggedHarness is a node over partitions 0 and 1 of orders, on a fake clock, logging to
// a recording handler.
func newLoggedHarness(t *testing.T) (*harness, *routertest.Clock, *recordingHandler) {
	t.Helper()
	clock := routertest.NewClock(time.Unix(1_000_000, 0))
	rec := &recordingHandler{}
	h := &harness{t: t, logs: &routertest.MemLogs{}, routes: &routertest.Routes{}, fs: crashfs.New(), dir: "/state"}
	h.routes.Set("orders", 0, 1)
	h.logs.Log("orders", 0)
	h.logs.Log("orders", 1)
	h.cfg = router.Config{Logs: h.logs, Routes: h.routes, Dir: h.dir, Clock: clock, Logger: slog.New(rec),
		Topic: func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: time.Hour} }}
	h.start()
	return h, clock, rec
}

// consumePinned takes one record of partition p and acks it.
func (h *harness) consumePinned(p int32) router.Message {
	h.t.Helper()
	msgs := h.consume(router.ConsumeOptions{Pinned: true, Partition: p})
	require.Len(h.t, msgs, 1)
	require.NoError(h.t, h.ack(msgs[0]))
	return msgs[0]
}

// Checklist: a corrupt record skipped is logged at most once a minute per partition, the
// line counting the skips held back since the previous one; the counter counts every skip.
func TestCorruptSkipLogIsRateLimited(t *testing.T) {
	h, clock, rec := newLoggedHarness(t)
	defer h.close()
	corrupt := func(p int32, n int, bad ...int64) {
		h.produce(p, n)
		for _, off := range bad {
			h.logs.Log("orders", p).Corrupt(off)
		}
	}
	corrupt(0, 4, 0, 1, 2)
	corrupt(1, 2, 0)
	assert.Equal(t, int64(3), h.consumePinned(0).Offset)
	assert.Equal(t, int64(1), h.consumePinned(1).Offset)
	clock.Advance(time.Minute - time.Nanosecond)
	corrupt(0, 2, 4)
	assert.Equal(t, int64(5), h.consumePinned(0).Offset)
	clock.Advance(time.Nanosecond)
	corrupt(0, 2, 6)
	assert.Equal(t, int64(7), h.consumePinned(0).Offset)

	assert.Equal(t, [][3]int64{{0, 0, 0}, {1, 0, 0}, {0, 6, 3}}, rec.matching(corruptLine, "suppressed"),
		"partition, offset, skips held back")
	assert.Equal(t, uint64(6), h.node.Stats().Shards.CorruptSkipped)
}

// Checklist: a retention jump is logged at most once a minute per partition.
func TestRetentionJumpLogIsRateLimited(t *testing.T) {
	h, clock, rec := newLoggedHarness(t)
	defer h.close()
	jump := func(p int32, n int) int64 {
		log := h.logs.Log("orders", p)
		h.produce(p, n)
		oldest := log.HighWatermark() - 1
		log.Trim(oldest)
		assert.Equal(t, oldest, h.consumePinned(p).Offset)
		return oldest
	}
	for _, p := range []int32{0, 1} {
		h.produce(p, 1)
		h.consumePinned(p) // loaded: the frontier starts at offset 0
	}
	jump(0, 3) // offsets 1 to 3
	jump(1, 3)
	clock.Advance(time.Minute - time.Nanosecond)
	jump(0, 3) // offsets 4 to 6: held back
	clock.Advance(time.Nanosecond)
	jump(0, 3) // offsets 7 to 9

	assert.Equal(t, [][3]int64{{0, 1, 3}, {1, 1, 3}, {0, 7, 9}}, rec.matching(jumpLine, "oldest"),
		"partition, offset, oldest")
	assert.Equal(t, uint64(4), h.node.Stats().Shards.RetentionJumps)
}
