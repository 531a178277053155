package offsets

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// openFDs counts the process's open descriptors where /proc says (Linux); -1 elsewhere.
func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries)
}

// Checklist items 61, 62, invariant I14: with the cap forced to 5 (2 held, 3 for one-shots and primes),
// no more than 2 consumer.ahead descriptors stay open between ticks; while no window is durable
// the committer writes through one-shot descriptors rather than evict; once windows are durable
// it evicts the least recently written of them and reopens by path.
func TestDescriptorCap(t *testing.T) {
	h := newDiskHarness(t, func(c *Config) { c.MaxDescriptors = 6; c.Interval = 10 * time.Second })
	const parts = 5
	for p := range int32(parts) {
		h.create("t", p)
	}
	base := openFDs(t)
	next := int64(0)
	ackAll := func() {
		for p := range int32(parts) {
			h.ack("t", p, next)
		}
		next++
	}

	// Phase 1: every window pending (D = 10 s = 100 ticks, so no writeout for a while).
	ackAll()
	h.ticks(1)
	for range 5 {
		ackAll()
		h.ticks(1)
		s := h.c.Stats()
		require.LessOrEqual(t, s.Descriptors, int64(2))
		if base >= 0 {
			require.LessOrEqual(t, openFDs(t), base+2, "descriptors held between ticks")
		}
	}
	s := h.c.Stats()
	require.Zero(t, s.Evictions, "no durable window to evict")
	require.NotZero(t, s.OneShotWrites, "partitions over the cap write through one-shot descriptors")

	// Phase 2: a whole interval later every partition is written out, so all are durable.
	h.ticks(101)
	require.Zero(t, h.c.Stats().LateWriteouts)
	for p := range int32(parts) {
		require.Equal(t, next-1, Floors(h.c, "t", p).Durable)
	}
	// Every window is durable now. A partition without a descriptor evicts the least recently
	// written durable one and reopens by path; once both held windows are pending again, a
	// third writes through a one-shot descriptor instead.
	before := h.c.Stats()
	x := notHolding(t, h.c, parts)
	h.ack("t", x, next)
	h.ticks(1)
	y := notHolding(t, h.c, parts)
	h.ack("t", y, next)
	h.ticks(1)
	z := notHolding(t, h.c, parts)
	h.ack("t", z, next)
	h.ticks(1)
	s = h.c.Stats()
	require.Equal(t, before.Evictions+2, s.Evictions)
	require.Equal(t, before.Reopens+3, s.Reopens)
	require.Equal(t, before.OneShotWrites+1, s.OneShotWrites)
	require.LessOrEqual(t, s.Descriptors, int64(2))
	touched := map[int32]bool{x: true, y: true, z: true}

	require.NoError(t, h.c.Close())
	require.Zero(t, h.c.Stats().Descriptors)
	for p := range int32(parts) {
		want := next - 1
		if touched[p] {
			want = next
		}
		require.Equal(t, want, h.load("t", p).Frontier)
	}
}

// notHolding returns a partition that holds no descriptor between ticks.
func notHolding(t *testing.T, c *Committer, parts int32) int32 {
	c.markMu.Lock()
	defer c.markMu.Unlock()
	for p := range parts {
		if q := c.lookup(key{"t", p}); q != nil && q.f == nil {
			return p
		}
	}
	t.Fatal("every partition holds a descriptor")
	return -1
}
