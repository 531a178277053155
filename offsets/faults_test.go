package offsets_test

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// failOn fails ops of kind k on path p while *on is true.
func failOn(k crashfs.OpKind, p string, err error, on *bool) crashfs.Injector {
	return func(op crashfs.Op) error {
		if *on && op.Kind == k && op.Path == p {
			return err
		}
		return nil
	}
}

// Checklist item 50, invariant I9, gap G4, RELIABILITY row 3 (fsyncgate): a failed sync whose
// dirty data the kernel dropped leaves the anchor alone; the next tick rewrites the window in
// full although nothing new was acked; only that rewrite followed by a successful sync flips,
// and then the flipped record really is durable.
func TestFsyncgate(t *testing.T) {
	// failedSync runs to just after a writeout whose sync failed and dropped the window.
	failedSync := func(t *testing.T) (*memHarness, *bool) {
		h := newMemHarness(t, crashfs.New(), func(c *offsets.Config) { c.Interval = 100 * time.Millisecond })
		h.fs.SetSyncFailureMode(crashfs.SyncDropDirty)
		h.mkdir("t", 0)
		h.create("t", 0)
		h.ack("t", 0, 0, 1)
		h.ticks(1)
		require.Equal(t, int64(1), offsets.Floors(h.c, "t", 0).Durable)
		fail := true
		h.record(failOn(crashfs.OpSyncData, aheadPath("t", 0), crashfs.ErrInjected, &fail))
		h.ack("t", 0, 2, 3)
		err := h.tick()
		require.ErrorIs(t, err, syscall.EIO)
		var pe *offsets.PartitionError
		require.True(t, errors.As(err, &pe))
		require.Equal(t, "write out", pe.Op)
		require.Equal(t, int64(1), offsets.Floors(h.c, "t", 0).Durable, "no flip after a failed sync")
		require.Equal(t, uint64(1), h.c.Stats().SyncFailures)
		fail = false
		return h, &fail
	}

	t.Run("the window was dropped", func(t *testing.T) {
		h, _ := failedSync(t)
		cut := h.fs.PowerCut(crashfs.PowerCut{})
		h.closeCommitter()
		require.Equal(t, int64(1), recoverOn(t, cut, "t", 0).Frontier)
	})

	t.Run("rewrite, then sync, then flip", func(t *testing.T) {
		h, _ := failedSync(t)
		h.record(nil)
		h.ticks(1) // no new ack
		writes := h.opsOn(crashfs.OpWrite, aheadPath("t", 0))
		syncs := h.opsOn(crashfs.OpSyncData, aheadPath("t", 0))
		require.Len(t, writes, 1, "the window is rewritten in full without a new ack")
		require.Len(t, syncs, 1)
		require.Less(t, writes[0].Index, syncs[0].Index, "rewrite, then sync")
		require.Equal(t, int64(3), offsets.Floors(h.c, "t", 0).Durable, "flipped after rewrite + sync")

		cut := h.fs.PowerCut(crashfs.PowerCut{})
		h.closeCommitter()
		require.Equal(t, int64(3), recoverOn(t, cut, "t", 0).Frontier, "the flipped record is durable")
	})
}

// Fsyncgate for a new partition: its prime writes consumer.id and owes its sync to the first
// writeout, and a sync that fails drops the bytes from the page cache. The writeout that
// retries writes them again before it syncs, so the state the flip counts on names its
// incarnation after a power cut. Before, the retry synced nothing, the window flipped, and
// after a power cut consumer.id held zeros: the partition's state was ignored as foreign and
// its acked records delivered again (found by the cluster simulation, seed 1727).
func TestFsyncgateOnANewPartitionsID(t *testing.T) {
	for _, host := range []uint64{0, 0xb0b} { // unbound, and bound to a host's incarnation
		t.Run(fmt.Sprintf("host=%x", host), func(t *testing.T) { fsyncgateOnANewPartitionsID(t, host) })
	}
}

func fsyncgateOnANewPartitionsID(t *testing.T, host uint64) {
	h := newMemHarness(t, crashfs.New(), func(c *offsets.Config) { c.Interval = 100 * time.Millisecond })
	h.fs.SetSyncFailureMode(crashfs.SyncDropDirty)
	h.mkdir("t", 0)
	h.createBound("t", 0, host)
	h.ack("t", 0, 0, 1)
	fail := true
	h.record(failOn(crashfs.OpSyncData, path.Join(dirOf("t", 0), offsets.IDFile), crashfs.ErrInjected, &fail))
	require.ErrorIs(t, h.tick(), syscall.EIO)
	require.Equal(t, int64(-1), offsets.Floors(h.c, "t", 0).Durable, "no flip before consumer.id is durable")
	fail = false
	h.ticks(1)
	require.Equal(t, int64(1), offsets.Floors(h.c, "t", 0).Durable)
	cut := h.fs.PowerCut(crashfs.PowerCut{})
	h.closeCommitter()
	got := recoverOn(t, cut, "t", 0)
	require.Equal(t, int64(1), got.Frontier, "the flipped frontier is durable")
	require.Equal(t, host, got.HostIncarnation, "and consumer.id written again keeps its binding")
}

// Gap G4, checklist item 71: under a persistent sync failure acks are still accepted and
// windows still written; after 2·D the lagging-durability warning is logged, at most once a
// minute, with the spec's fields; once syncs work again the partition flips.
func TestPersistentSyncFailureWarns(t *testing.T) {
	h := newMemHarness(t, crashfs.New(), nil)
	h.mkdir("t", 0)
	h.create("t", 0)
	h.ack("t", 0, 0)
	h.ticks(11)
	fail := true
	h.record(failOn(crashfs.OpSyncData, aheadPath("t", 0), crashfs.ErrInjected, &fail))
	next := int64(1)
	for range 60 { // 6 s: 3·D and more
		h.ack("t", 0, next)
		next++
		_ = h.tick()
	}
	require.Equal(t, int64(0), offsets.Floors(h.c, "t", 0).Durable)
	require.Equal(t, next-1, offsets.Floors(h.c, "t", 0).PageCache, "windows kept being written")
	lines := h.logs.Lines("consumer offsets wait longer than their durability interval for a device flush: " +
		"a power loss would redeliver more acks than it promises")
	require.Len(t, lines, 1, "at most once a minute")
	require.Equal(t, int64(1), lines[0]["partitions"].Int64())
	require.Equal(t, time.Second, lines[0]["durability_interval"].Duration())
	require.Greater(t, lines[0]["oldest"].Duration(), 2*time.Second)
	require.NotZero(t, h.c.Stats().LateWriteouts)

	fail = false
	h.ticks(11)
	require.Equal(t, next-1, offsets.Floors(h.c, "t", 0).Durable)
	h.closeCommitter()
}

// A failed device flush (F_FULLFSYNC on macOS) counts as a failed sync for every partition
// that depended on it: no flip, a full rewrite, then a flip.
func TestDeviceFlushFailure(t *testing.T) {
	h := newMemHarness(t, crashfs.New(), func(c *offsets.Config) { c.Interval = 100 * time.Millisecond })
	h.mkdir("t", 0)
	h.mkdir("t", 1)
	h.create("t", 0)
	h.create("t", 1)
	h.ack("t", 0, 0)
	h.ack("t", 1, 0)
	h.ticks(1)
	fail := true
	h.record(func(op crashfs.Op) error {
		if fail && op.Kind == crashfs.OpFullSync {
			return crashfs.ErrInjected
		}
		return nil
	})
	h.ack("t", 0, 1)
	h.ack("t", 1, 1)
	err := h.tick()
	require.ErrorIs(t, err, syscall.EIO)
	require.Equal(t, int64(0), offsets.Floors(h.c, "t", 0).Durable)
	require.Equal(t, int64(0), offsets.Floors(h.c, "t", 1).Durable)
	fail = false
	h.ticks(1)
	require.Equal(t, int64(1), offsets.Floors(h.c, "t", 0).Durable)
	require.Equal(t, int64(1), offsets.Floors(h.c, "t", 1).Durable)
	h.closeCommitter()
}

// RELIABILITY row 4: ENOSPC while priming (extending a move's copy) leaves the half-primed file
// unused: no window is written, the sole durable slot is untouched, the error is retried on
// the next tick, and once space is free the prime completes.
func TestENOSPCDuringPrime(t *testing.T) {
	h := newMemHarness(t, crashfs.New(), nil)
	h.mkdir("t", 0)
	k := offsets.PartitionKey("t", 0)
	copySlot := slot(t, offsets.Record{Seq: 3, Key: k, Frontier: 9})
	require.NoError(t, h.fs.WriteFile(aheadPath("t", 0), copySlot))
	h.create("t", 0)
	h.fs.SetFreeBytes(0)
	h.record(nil)
	h.ack("t", 0, 10)
	for range 3 {
		err := h.tick()
		require.ErrorIs(t, err, syscall.ENOSPC)
	}
	require.Empty(t, h.opsOn(crashfs.OpWrite, aheadPath("t", 0)), "no window write before the prime completes")
	b, err := h.fs.ReadFile(aheadPath("t", 0))
	require.NoError(t, err)
	require.Equal(t, copySlot, b)
	require.False(t, offsets.Floors(h.c, "t", 0).Primed)

	h.fs.SetFreeBytes(-1)
	h.ticks(11)
	require.Equal(t, int64(10), offsets.Floors(h.c, "t", 0).Durable)
	require.NoError(t, h.c.Close())
	require.Equal(t, int64(10), recoverOn(t, h.fs.PowerCut(crashfs.PowerCut{}), "t", 0).Frontier)
}

// RELIABILITY row 4: ENOSPC on a window write, on the creation of consumer.offset and on its
// write is an ordinary error, retried; memory state is unaffected and nothing is lost.
func TestENOSPCByOpKind(t *testing.T) {
	tests := []struct {
		name string
		kind crashfs.OpKind
		path func() string
	}{
		{"window write", crashfs.OpWrite, func() string { return aheadPath("t", 0) }},
		{"consumer.offset create", crashfs.OpCreate, func() string { return offsetPath("t", 0) }},
		{"consumer.offset write", crashfs.OpWrite, func() string { return offsetPath("t", 0) }},
		{"create consumer.ahead", crashfs.OpCreate, func() string { return aheadPath("t", 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newMemHarness(t, crashfs.New(), func(c *offsets.Config) { c.Interval = 100 * time.Millisecond })
			h.mkdir("t", 0)
			h.create("t", 0)
			fail := true
			h.record(failOn(tt.kind, tt.path(), syscall.ENOSPC, &fail))
			h.ack("t", 0, 0, 1, 2)
			require.ErrorIs(t, h.tick(), syscall.ENOSPC)
			h.ack("t", 0, 3)
			_ = h.tick()
			fail = false
			h.ticks(2)
			require.NoError(t, h.c.Close())
			cut := h.fs.PowerCut(crashfs.PowerCut{})
			require.Equal(t, int64(3), recoverOn(t, cut, "t", 0).Frontier)
			b, err := cut.ReadFile(offsetPath("t", 0))
			require.NoError(t, err)
			requireOffsetFile(t, b, "t", 0, 3)
		})
	}
}

// Checklist item 68, RELIABILITY row 5: a stat that fails for a reason other than "gone"
// (ESTALE, EIO, EACCES) is an ordinary error, reported and retried; it never strands.
func TestStatErrorsAreRetriedNotStranded(t *testing.T) {
	tests := []struct {
		name string
		err  error
		path func() string // which stat fails
	}{
		{"ESTALE on the directory check", syscall.ESTALE, func() string { return dirOf("t", 0) }},
		{"EIO on the directory check", syscall.EIO, func() string { return dirOf("t", 0) }},
		{"EACCES on the directory check", syscall.EACCES, func() string { return dirOf("t", 0) }},
		{"ESTALE on the file", syscall.ESTALE, func() string { return aheadPath("t", 0) }},
		{"ESTALE on the pinned root", syscall.ESTALE, func() string { return dirOf("t", 0) + "/." }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newMemHarness(t, crashfs.New(), func(c *offsets.Config) { c.Interval = 100 * time.Millisecond })
			h.mkdir("t", 0)
			h.create("t", 0)
			fail := true
			h.record(func(op crashfs.Op) error {
				if fail && op.Kind == crashfs.OpStat && (op.Path == tt.path() || op.Path+"/." == tt.path()) {
					return tt.err
				}
				return nil
			})
			h.ack("t", 0, 0)
			err := h.tick()
			require.ErrorIs(t, err, tt.err)
			require.False(t, offsets.Stranded(h.c, "t", 0))
			require.Empty(t, h.logs.Lines("consumer offsets: partition directory removed or replaced under its "+
				"persisted state; its acks are not persisted until the partition is dropped"))
			fail = false
			h.ticks(1)
			require.Equal(t, int64(0), offsets.Floors(h.c, "t", 0).Durable)
			require.Zero(t, h.c.Stats().Stranded)
			h.closeCommitter()
		})
	}
}

// A consumer.offset is never created to hold frontier -1: a power loss can keep the new file's
// size without its bytes, eight zeros that read as frontier 0, an offset never acked (found by
// TestRapidSchedules). The frontier stays in consumer.ahead until it reaches 0; then the file
// is created and levelled, and a torn levelling of a file that held a frontier stays within
// its one sector.
func TestNoConsumerOffsetForFrontierMinusOne(t *testing.T) {
	h := newMemHarness(t, crashfs.New(), func(c *offsets.Config) { c.Interval = 100 * time.Millisecond })
	offsets.SetLevelInterval(h.c, 100*time.Millisecond)
	h.mkdir("t", 0)
	h.create("t", 0)
	h.ack("t", 0, 3) // acked ahead: the frontier stays -1
	h.ticks(5)
	_, err := h.fs.ReadFile(offsetPath("t", 0))
	require.ErrorIs(t, err, fs.ErrNotExist, "no consumer.offset for frontier -1")
	cut := h.fs.PowerCut(crashfs.PowerCut{KeepUnsynced: 1, TearLastWrite: true})
	st := recoverOn(t, cut, "t", 0)
	require.Equal(t, int64(-1), st.Frontier)
	require.Equal(t, []offsets.Run{{First: 3, Last: 3}}, st.Ahead)
	h.closeCommitter()

	h = newMemHarness(t, cut, func(c *offsets.Config) { c.Interval = 100 * time.Millisecond })
	offsets.SetLevelInterval(h.c, 100*time.Millisecond)
	h.create("t", 0)
	h.ack("t", 0, 0)
	h.ticks(3)
	b, err := h.fs.ReadFile(offsetPath("t", 0))
	require.NoError(t, err)
	requireOffsetFile(t, b, "t", 0, 0) // levelled once the frontier is 0
	require.NoError(t, h.c.Close())
}
