package offsets

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewValidatesConfig(t *testing.T) {
	src, dir := NewShards(), func(string, int32) string { return "" }
	tests := []struct {
		name       string
		cfg        Config
		ok         bool
		wantPeriod time.Duration
	}{
		{"defaults: D=1s, T=100ms (item 38)", Config{Dir: dir, Source: src}, true, 100 * time.Millisecond},
		{"D=10ms: T=D (items 38, 41)", Config{Dir: dir, Source: src, Interval: 10 * time.Millisecond}, true, 10 * time.Millisecond},
		{"D=60s (item 41)", Config{Dir: dir, Source: src, Interval: 60 * time.Second}, true, 100 * time.Millisecond},
		{"D below 10ms (item 41)", Config{Dir: dir, Source: src, Interval: 9 * time.Millisecond}, false, 0},
		{"D above 60s (item 41)", Config{Dir: dir, Source: src, Interval: 61 * time.Second}, false, 0},
		{"negative D", Config{Dir: dir, Source: src, Interval: -time.Second}, false, 0},
		{"no Dir", Config{Source: src}, false, 0},
		{"no Source", Config{Dir: dir}, false, 0},
		{"negative descriptor cap", Config{Dir: dir, Source: src, MaxDescriptors: -1}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if !tt.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantPeriod, c.TickPeriod())
			require.NoError(t, c.Close())
		})
	}
}

// Checklist item 61: the default cap is min(4096, soft RLIMIT_NOFILE / 4), at least five.
func TestDefaultDescriptorCap(t *testing.T) {
	tests := []struct {
		soft uint64
		want int
	}{{0, 4096}, {1, 5}, {4, 5}, {1024, 256}, {16384, 4096}, {1 << 40, 4096}}
	for _, tt := range tests {
		require.Equal(t, tt.want, defaultMaxOpen(tt.soft), "soft limit %d", tt.soft)
	}
}

// Checklist item 37: the ack path does no I/O and allocates nothing for a known partition.
func TestMarkDirtyAllocatesNothing(t *testing.T) {
	h := newDiskHarness(t, nil)
	h.c.MarkDirty("t", 1)
	allocs := testing.AllocsPerRun(1000, func() { h.c.MarkDirty("t", 1) })
	require.Zero(t, allocs)
	require.NoError(t, h.tick())
	allocs = testing.AllocsPerRun(1000, func() { h.c.MarkDirty("t", 1) })
	require.Zero(t, allocs)
}

// Checklist item 59, invariant 5: after a graceful Close both files of every partition are
// exact and durable, and a restart recovers every ack.
func TestCloseThenLoadIsExact(t *testing.T) {
	h := newDiskHarness(t, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	const parts = 6
	for p := range int32(parts) {
		h.create("events", p)
	}
	for range 57 {
		for p := range int32(parts) {
			for range rng.IntN(4) {
				h.ack("events", p, int64(rng.IntN(300)))
			}
		}
		h.ticks(1)
	}
	require.NoError(t, h.c.Close())
	for p := range int32(parts) {
		want := h.shards.Snapshot("events", p)
		got := h.load("events", p)
		require.True(t, got.Found)
		require.Equal(t, want.Frontier, got.Frontier, "partition %d", p)
		require.True(t, slices.Equal(want.Ahead, got.Ahead), "partition %d", p)
		if want.Frontier < 0 {
			_, err := os.Stat(filepath.Join(h.dir("events", p), OffsetFile))
			require.ErrorIs(t, err, os.ErrNotExist, "no consumer.offset is created for frontier -1 (partition %d)", p)
			continue
		}
		require.Equal(t, want.Frontier, mustFrontier(t, h.readOffsetFile("events", p), "events", p),
			"consumer.offset is level (partition %d)", p)
	}
	require.ErrorIs(t, h.c.Tick(h.now), ErrClosed)
	require.NoError(t, h.c.Close(), "a second Close")
	h.c.MarkDirty("events", 0) // does nothing after Close
}

// Checklist item 40: a partition whose shard is gone gets nothing written, not even a prime.
func TestGoneShardWritesNothing(t *testing.T) {
	h := newDiskHarness(t, nil)
	h.create("t", 0)
	h.ack("t", 0, 0, 1, 2)
	h.shards.Drop("t", 0)
	h.ticks(12)
	_, err := os.Stat(filepath.Join(h.dir("t", 0), AheadFile))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.False(t, Known(h.c, "t", 0), "a never-primed partition with no shard leaves nothing behind")
	require.NoError(t, h.c.Close())
	_, err = os.Stat(filepath.Join(h.dir("t", 0), OffsetFile))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// Checklist item 63: once Forget returns, no snapshot taken before it is written; the next ack
// primes afresh.
func TestForgetThenReinstall(t *testing.T) {
	h := newDiskHarness(t, nil)
	h.create("t", 0)
	h.ack("t", 0, 0, 1, 2, 5)
	h.ticks(11)
	// A move: drop, install a copy whose state is older, create the shard from it.
	h.c.Forget("t", 0)
	h.shards.Drop("t", 0)
	require.NoError(t, os.RemoveAll(h.dir("t", 0)))
	require.NoError(t, os.MkdirAll(h.dir("t", 0), 0o755))
	copySlot := encode(t, Record{Seq: 1, Key: PartitionKey("t", 0), Frontier: 0})
	require.NoError(t, os.WriteFile(filepath.Join(h.dir("t", 0), AheadFile), copySlot, 0o644))
	h.c.Forget("t", 0)
	h.create("t", 0)
	require.Equal(t, int64(0), h.shards.Snapshot("t", 0).Frontier)
	h.ticks(11)
	st := h.load("t", 0)
	require.Equal(t, int64(0), st.Frontier, "nothing of the old shard reached the new directory")
	h.ack("t", 0, 1)
	require.NoError(t, h.c.Close())
	st = h.load("t", 0)
	require.Equal(t, int64(1), st.Frontier)
	require.Zero(t, h.c.Stats().Stranded)
}

// Checklist item 60 (derived): consumer.offset is levelled at a writeout or a quiet turn at
// most every 30 s, never leads the anchor, and trails it by no more than about 30 s + D.
func TestLevellingCadence(t *testing.T) {
	h := newDiskHarness(t, nil)
	h.create("t", 0)
	next := int64(0)
	var levelled []int64
	last := int64(-2)
	for i := range 800 { // 80 s of ticks
		if i < 400 {
			h.ack("t", 0, next)
			next++
		}
		h.ticks(1)
		if b, err := os.ReadFile(filepath.Join(h.dir("t", 0), OffsetFile)); err == nil {
			v := mustFrontier(t, b, "t", 0)
			if v != last {
				levelled, last = append(levelled, int64(i)), v
			}
			require.LessOrEqual(t, v, h.shards.Snapshot("t", 0).Frontier, "never leads")
		}
	}
	require.GreaterOrEqual(t, len(levelled), 2)
	for i := 1; i < len(levelled); i++ {
		require.GreaterOrEqual(t, levelled[i]-levelled[i-1], int64(300), "at most every 30 s")
	}
	// The quiet partition was levelled within 30 s + D of its last ack (tick 399).
	require.Equal(t, h.shards.Snapshot("t", 0).Frontier, last)
	require.LessOrEqual(t, levelled[len(levelled)-1], int64(399+300+10+1))
}

// mustFrontier decodes a consumer.offset of the partition, failing the test if it is not valid.
func mustFrontier(t *testing.T, b []byte, topic string, partition int32) int64 {
	t.Helper()
	o, err := decodeOffset(b, PartitionKey(topic, partition))
	require.NoError(t, err)
	return o.frontier
}
