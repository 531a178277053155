package offsets

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// LogRecorder is a slog.Handler that keeps what it is given, for checking the committer's log
// lines word for word.
type LogRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *LogRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *LogRecorder) WithGroup(string) slog.Handler            { return l }
func (l *LogRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

// Lines returns the attributes of every record logged with msg, by key.
func (l *LogRecorder) Lines(msg string) []map[string]slog.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range l.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// diskHarness drives a committer over the real file system in a temporary directory, with
// logical time.
type diskHarness struct {
	t      *testing.T
	root   string
	shards *Shards
	logs   *LogRecorder
	c      *Committer
	now    time.Time
}

func newDiskHarness(t *testing.T, edit func(*Config)) *diskHarness {
	h := &diskHarness{t: t, root: t.TempDir(), shards: NewShards(), logs: &LogRecorder{},
		now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := Config{Dir: h.dir, Source: h.shards, Logger: slog.New(h.logs)}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	h.c = c
	t.Cleanup(func() { _ = c.Close() })
	return h
}

func (h *diskHarness) dir(topic string, p int32) string {
	return filepath.Join(h.root, topic, strconv.Itoa(int(p)))
}

// create makes the partition directory (the host's job) and a shard seeded from Load.
func (h *diskHarness) create(topic string, p int32) {
	require.NoError(h.t, os.MkdirAll(h.dir(topic, p), 0o755))
	st, err := h.c.Load(topic, p)
	require.NoError(h.t, err)
	h.shards.Seed(topic, p, st)
	h.c.MarkDirty(topic, p) // the host's duty after installing a shard from Load
}

func (h *diskHarness) ack(topic string, p int32, offs ...int64) {
	for _, o := range offs {
		if h.shards.Ack(topic, p, o) {
			h.c.MarkDirty(topic, p)
		}
	}
}

func (h *diskHarness) tick() error {
	h.now = h.now.Add(h.c.TickPeriod())
	return h.c.Tick(h.now)
}

func (h *diskHarness) ticks(n int) {
	for range n {
		require.NoError(h.t, h.tick())
	}
}

// load reads a partition back with a fresh committer, as a restarted process would.
func (h *diskHarness) load(topic string, p int32) State {
	c, err := New(Config{Dir: h.dir, Source: NewShards()})
	require.NoError(h.t, err)
	defer c.Close()
	st, err := c.Load(topic, p)
	require.NoError(h.t, err)
	return st
}

func (h *diskHarness) readOffsetFile(topic string, p int32) []byte {
	b, err := os.ReadFile(filepath.Join(h.dir(topic, p), OffsetFile))
	require.NoError(h.t, err)
	return b
}
