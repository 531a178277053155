package offsets_test

import (
	"log/slog"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// tb is what the harness needs of a test: *testing.T and *rapid.T both have it.
type tb interface {
	require.TestingT
	Helper()
}

// memHarness drives a committer over crashfs with logical time, and restarts it after crashes.
type memHarness struct {
	t      tb
	fs     *crashfs.FS
	shards *offsets.Shards
	logs   *offsets.LogRecorder
	c      *offsets.Committer
	cfg    offsets.Config
	now    time.Time
	ops    []crashfs.Op // recorded by record
}

func dirOf(topic string, p int32) string { return "/data/" + topic + "/" + strconv.Itoa(int(p)) }

func newMemHarness(t tb, fsys *crashfs.FS, edit func(*offsets.Config)) *memHarness {
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

// createBound is create for a host that knows the topic's incarnation, host (0: it names
// none), and keeps the loaded state's identity with the shard.
func (h *memHarness) createBound(topic string, p int32, host uint64) offsets.State {
	st, err := h.c.LoadBound(topic, p, host)
	require.NoError(h.t, err)
	h.shards.SeedBound(topic, p, st)
	h.c.MarkDirty(topic, p)
	return st
}

func (h *memHarness) ack(topic string, p int32, offs ...int64) {
	for _, o := range offs {
		if h.shards.Ack(topic, p, o) {
			h.c.MarkDirty(topic, p)
		}
	}
}

// deliver, quarantine and requeue change the shard's other sets as the tracker would, and
// report the change as the tracker's Dirty hook does.
func (h *memHarness) deliver(topic string, p int32, off int64) {
	if h.shards.Deliver(topic, p, off) {
		h.c.MarkDirty(topic, p)
	}
}

func (h *memHarness) quarantine(topic string, p int32, off int64) {
	if h.shards.Quarantine(topic, p, off) {
		h.c.MarkDirty(topic, p)
	}
}

func (h *memHarness) requeue(topic string, p int32, off int64) {
	if h.shards.Requeue(topic, p, off) {
		h.c.MarkDirty(topic, p)
	}
}

// park and unpark defer an offset behind its key and end that, as an ordered topic's shard
// does (see Shards.Park).
func (h *memHarness) park(topic string, p int32, off int64) {
	if h.shards.Park(topic, p, off) {
		h.c.MarkDirty(topic, p)
	}
}

func (h *memHarness) unpark(topic string, p int32, off int64, ack bool) {
	if h.shards.Unpark(topic, p, off, ack) {
		h.c.MarkDirty(topic, p)
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
func (h *memHarness) record(fail crashfs.Injector) {
	h.ops = nil
	h.fs.Inject(func(op crashfs.Op) error {
		h.ops = append(h.ops, op)
		if fail != nil {
			return fail(op)
		}
		return nil
	})
}

// opsOn returns the recorded ops of kind k on path p, in order.
func (h *memHarness) opsOn(k crashfs.OpKind, p string) []crashfs.Op {
	var out []crashfs.Op
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
func recoverOn(t tb, fsys *crashfs.FS, topic string, p int32) offsets.State {
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
// recovered acked-ahead offset are settled in it, but those the recovered key tails name
// unsettled (a parked offset the tails do not name would be skipped: lost).
func requireSettledSubset(t tb, shards *offsets.Shards, topic string, p int32, st offsets.State, msg string) {
	t.Helper()
	if !st.Found {
		return
	}
	cur := shards.Snapshot(topic, p)
	require.LessOrEqual(t, st.Frontier, cur.Frontier, "I1 frontier past an ack: %s", msg)
	require.True(t, validTails(st.KeyTails, st.Frontier), "key tails %v: %s", st.KeyTails, msg)
	for _, o := range offsets.OffsetsOf(st.Ahead) {
		if offsets.InTails(st.KeyTails, o) {
			continue // unsettled after the restart: delivered again
		}
		require.True(t, shards.Settled(topic, p, o), "I1 acked-ahead %d never acked: %s", o, msg)
	}
	require.True(t, slices.IsSorted(offsets.OffsetsOf(st.Ahead)), msg)
}

// requireSetsRecovered checks the quarantine, requeued and attempt sets of a recovery, in the
// shape of I1 and I2 for acked-ahead offsets:
//   - I1: each recovered entry is one the shard held at some point before the crash (the
//     shard's history), requeued offsets are at or below the recovered frontier, and attempts
//     are above it and not acked ahead.
//   - I2: what the anchor (the record known durable when it froze, nil for none) held is
//     recovered, unless the shard changed it since in a way that takes it out: a quarantined
//     offset requeued (then in Requeued, unresolved again, or requeued and acked), a requeued
//     offset acked, an attempted offset settled, quarantined, requeued above the frontier or
//     parked (its attempts are counted afresh, as an offset acked ahead has none).
//     Attempts recovered for such an offset are at least the anchor's count.
func requireSetsRecovered(t tb, shards *offsets.Shards, topic string, p int32, st offsets.State,
	anchor *offsets.Record, msg string) {
	t.Helper()
	hist := shards.History(topic, p)
	require.True(t, slices.IsSorted(st.Quarantine) && slices.IsSorted(st.Requeued), msg)
	for _, o := range st.Quarantine {
		require.True(t, hist.Quarantined(o), "I1: quarantined %d never quarantined: %s", o, msg)
	}
	for _, o := range st.Requeued {
		require.True(t, hist.Requeued(o), "I1: requeued %d never requeued: %s", o, msg)
		require.LessOrEqual(t, o, st.Frontier, "requeued %d above the frontier: %s", o, msg)
	}
	prev := st.Frontier
	for _, a := range st.Attempts {
		require.Greater(t, a.Offset, prev, "attempts ascending above the frontier: %s", msg)
		prev = a.Offset
		require.True(t, hist.Attempt(a), "I1: attempts %v never held: %s", a, msg)
		require.False(t, offsets.RunsContain(st.Ahead, a.Offset), "attempts of acked-ahead %d: %s", a.Offset, msg)
	}
	if anchor == nil {
		return
	}
	for _, o := range anchor.Quarantine {
		kept := slices.Contains(st.Quarantine, o) || slices.Contains(st.Requeued, o)
		require.True(t, kept || hist.Released(o) || hist.RequeueSettled(o),
			"I2: anchor's quarantined %d lost: %s", o, msg)
	}
	for _, o := range anchor.Requeued {
		require.True(t, slices.Contains(st.Requeued, o) || hist.RequeueSettled(o),
			"I2: anchor's requeued %d lost: %s", o, msg)
	}
	for _, a := range anchor.Attempts {
		if a.Offset <= st.Frontier || offsets.RunsContain(st.Ahead, a.Offset) ||
			slices.Contains(st.Quarantine, a.Offset) || hist.Released(a.Offset) || hist.Parked(a.Offset) {
			continue
		}
		i := slices.IndexFunc(st.Attempts, func(b offsets.Attempt) bool { return b.Offset == a.Offset })
		require.True(t, i >= 0 && st.Attempts[i].Count >= a.Count, "I2: anchor's attempts %v lost: %s", a, msg)
	}
}

// requireSameState checks two states hold the same frontier and sets.
func requireSameState(t tb, want, got offsets.State, msg string) {
	t.Helper()
	require.Equal(t, want.Frontier, got.Frontier, msg)
	require.True(t, slices.Equal(want.Ahead, got.Ahead), "ahead %v, want %v: %s", got.Ahead, want.Ahead, msg)
	require.True(t, slices.Equal(want.Attempts, got.Attempts), "attempts %v, want %v: %s", got.Attempts, want.Attempts, msg)
	require.True(t, slices.Equal(want.Quarantine, got.Quarantine), "quarantine %v, want %v: %s", got.Quarantine, want.Quarantine, msg)
	require.True(t, slices.Equal(want.Requeued, got.Requeued), "requeued %v, want %v: %s", got.Requeued, want.Requeued, msg)
	require.True(t, slices.Equal(want.KeyTails, got.KeyTails), "key tails %v, want %v: %s", got.KeyTails, want.KeyTails, msg)
}

// requireOffsetFile checks that b is a valid consumer.offset of the partition holding frontier.
func requireOffsetFile(t require.TestingT, b []byte, topic string, partition int32, frontier int64) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	v, ok := offsets.OffsetFrontier(b, topic, partition)
	require.True(t, ok, "consumer.offset valid: % x", b)
	require.Equal(t, frontier, v)
}
