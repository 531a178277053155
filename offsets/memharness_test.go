package offsets_test

import (
	"log/slog"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/memfs"
	"narad.dev/consume/offsets"
)

// tb is what the harness needs of a test: *testing.T and *rapid.T both have it.
type tb interface {
	require.TestingT
	Helper()
}

// memHarness drives a committer over memfs with logical time, and restarts it after crashes.
type memHarness struct {
	t      tb
	fs     *memfs.FS
	shards *offsets.Shards
	logs   *offsets.LogRecorder
	c      *offsets.Committer
	cfg    offsets.Config
	now    time.Time
	ops    []memfs.Op // recorded by record
}

func dirOf(topic string, p int32) string { return "/data/" + topic + "/" + strconv.Itoa(int(p)) }

func newMemHarness(t tb, fsys *memfs.FS, edit func(*offsets.Config)) *memHarness {
	h := &memHarness{t: t, fs: fsys, logs: &offsets.LogRecorder{},
		now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.cfg = offsets.Config{Dir: dirOf, Logger: slog.New(h.logs)}
	if edit != nil {
		edit(&h.cfg)
	}
	h.start()
	return h
}

// start makes a fresh committer and empty shards on h.fs.
func (h *memHarness) start() {
	h.shards = offsets.NewShards()
	cfg := h.cfg
	cfg.FS, cfg.Source = h.fs, h.shards
	c, err := offsets.New(cfg)
	require.NoError(h.t, err)
	h.c = c
}

// mkdir creates a partition directory durably (the host's job).
func (h *memHarness) mkdir(topic string, p int32) {
	require.NoError(h.t, h.fs.MkdirAll(dirOf(topic, p)))
}

// create loads a partition and seeds its shard, as the host does on first touch.
func (h *memHarness) create(topic string, p int32) offsets.State {
	st, err := h.c.Load(topic, p)
	require.NoError(h.t, err)
	h.shards.Seed(topic, p, st)
	h.c.MarkDirty(topic, p) // the host's duty after installing a shard from Load
	return st
}

func (h *memHarness) ack(topic string, p int32, offs ...int64) {
	for _, o := range offs {
		if h.shards.Ack(topic, p, o) {
			h.c.MarkDirty(topic, p)
		}
	}
}

func (h *memHarness) tick() error {
	h.now = h.now.Add(h.c.TickPeriod())
	return h.c.Tick(h.now)
}

func (h *memHarness) ticks(n int) {
	h.t.Helper()
	for range n {
		require.NoError(h.t, h.tick())
	}
}

// record installs an injector that keeps every op (and fails the ones fail says to).
func (h *memHarness) record(fail memfs.Injector) {
	h.ops = nil
	h.fs.Inject(func(op memfs.Op) error {
		h.ops = append(h.ops, op)
		if fail != nil {
			return fail(op)
		}
		return nil
	})
}

// opsOn returns the recorded ops of kind k on path p, in order.
func (h *memHarness) opsOn(k memfs.OpKind, p string) []memfs.Op {
	var out []memfs.Op
	for _, op := range h.ops {
		if op.Kind == k && op.Path == p {
			out = append(out, op)
		}
	}
	return out
}

// closeCommitter closes the committer, ignoring errors (after a crash every op fails).
func (h *memHarness) closeCommitter() { _ = h.c.Close() }

// recoverOn reads a partition from fsys the way a restarted host does.
func recoverOn(t tb, fsys *memfs.FS, topic string, p int32) offsets.State {
	t.Helper()
	c, err := offsets.New(offsets.Config{FS: fsys, Dir: dirOf, Source: offsets.NewShards()})
	require.NoError(t, err)
	defer c.Close()
	st, err := c.Load(topic, p)
	require.NoError(t, err)
	return st
}

func aheadPath(topic string, p int32) string  { return path.Join(dirOf(topic, p), offsets.AheadFile) }
func offsetPath(topic string, p int32) string { return path.Join(dirOf(topic, p), offsets.OffsetFile) }

func slot(t tb, r offsets.Record) []byte {
	b := make([]byte, offsets.SlotSize)
	_, err := offsets.EncodeSlot(b, &r)
	require.NoError(t, err)
	return b
}

func be64(v int64) []byte {
	b := make([]byte, 8)
	for i := range 8 {
		b[7-i] = byte(v >> (8 * i))
	}
	return b
}

// requireSettledSubset checks invariant I1 against a shard: the recovered frontier and every
// recovered acked-ahead offset are settled in it.
func requireSettledSubset(t tb, shards *offsets.Shards, topic string, p int32, st offsets.State, msg string) {
	t.Helper()
	if !st.Found {
		return
	}
	cur := shards.Snapshot(topic, p)
	require.LessOrEqual(t, st.Frontier, cur.Frontier, "I1 frontier past an ack: %s", msg)
	for _, o := range st.Ahead {
		require.True(t, shards.Settled(topic, p, o), "I1 acked-ahead %d never acked: %s", o, msg)
	}
	require.True(t, slices.IsSorted(st.Ahead), msg)
}
