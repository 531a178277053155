package offsets_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// Checklist items 53 to 55, invariant I3: after a process crash the newest slot may sit only in
// the page cache; the next prime makes it durable before the first window write overwrites the
// other slot, so a power loss after that write cannot take back what the restart observed.
func TestPrimeMakesNewestSlotDurableBeforeWindow(t *testing.T) {
	long := func(c *offsets.Config) { c.Interval = offsets.MaxInterval } // no writeout in this test
	h := newMemHarness(t, crashfs.New(), long)
	h.mkdir("t", 0)
	h.create("t", 0)
	h.ack("t", 0, 0, 1, 2)
	h.ticks(1) // prime + window (page cache only)

	fs2 := h.fs.ProcessCrash()
	h.closeCommitter()
	h2 := newMemHarness(t, fs2, long)
	observed := h2.create("t", 0)
	require.Equal(t, int64(2), observed.Frontier, "the page-cache window is what a restart sees")
	h2.record(nil)
	h2.ack("t", 0, 3)
	h2.ticks(1)

	// The prime's sync of consumer.ahead comes before any write of the window.
	var firstSync, firstWindow int = -1, -1
	for i, op := range h2.ops {
		if op.Path != aheadPath("t", 0) {
			continue
		}
		if op.Kind == crashfs.OpSyncData && firstSync < 0 {
			firstSync = i
		}
		if op.Kind == crashfs.OpWrite && firstWindow < 0 && i > firstSync && firstSync >= 0 {
			firstWindow = i
		}
	}
	require.GreaterOrEqual(t, firstSync, 0)
	require.Greater(t, firstWindow, firstSync)
	require.NotEmpty(t, h2.opsOn(crashfs.OpSyncDir, dirOf("t", 0)), "the directory entry is synced too")

	cut := fs2.PowerCut(crashfs.PowerCut{})
	h2.closeCommitter()
	st := recoverOn(t, cut, "t", 0)
	require.GreaterOrEqual(t, st.Frontier, observed.Frontier, "I3: never below what a restart observed")
}

// Checklist item 54: a consumer.ahead shorter than 12 KiB (a move's copy, slot 0 only) is
// extended, anchored on its valid slot 0, and the first window goes to slot 1.
func TestPrimeExtendsMoveCopy(t *testing.T) {
	h := newMemHarness(t, crashfs.New(), nil)
	h.mkdir("t", 0)
	k := offsets.PartitionKey("t", 0)
	copySlot := slot(t, offsets.Record{Seq: 7, Key: k, Frontier: 40, Ahead: offsets.RunsOf(42)})
	require.NoError(t, h.fs.WriteFile(aheadPath("t", 0), copySlot))
	require.Equal(t, int64(40), h.create("t", 0).Frontier)
	h.ack("t", 0, 41)
	h.ticks(1)

	b, err := h.fs.ReadFile(aheadPath("t", 0))
	require.NoError(t, err)
	require.Len(t, b, offsets.AheadFileSize)
	require.Equal(t, copySlot, b[:offsets.SlotSize], "the anchor is not written while it is the anchor")
	var window offsets.Record
	require.NoError(t, offsets.DecodeSlot(b[offsets.SlotSize:2*offsets.SlotSize], &window))
	require.Equal(t, uint64(8), window.Seq)
	require.Equal(t, int64(42), window.Frontier)

	cut := h.fs.PowerCut(crashfs.PowerCut{})
	h.closeCommitter()
	d, err := cut.ReadFile(aheadPath("t", 0))
	require.NoError(t, err)
	require.Len(t, d, offsets.AheadFileSize, "the extension was written out by the prime")
}

// A consumer.ahead whose newest record is in the third slot (a spare a tick wrote during a
// sync, then a crash): recovery takes it, the prime anchors on it and makes it durable, the
// first window goes to slot 0 with a sequence number above it, and slots 1 and 2 are left
// alone; a power cut then keeps what the restart loaded, and a process crash the window.
func TestPrimeAnchorsOnTheSpareSlot(t *testing.T) {
	h := newMemHarness(t, crashfs.New(), func(c *offsets.Config) { c.Interval = offsets.MaxInterval })
	h.mkdir("t", 0)
	k := offsets.PartitionKey("t", 0)
	recs := []offsets.Record{{Seq: 5, Key: k, Frontier: 10}, {Seq: 6, Key: k, Frontier: 11}, {Seq: 7, Key: k, Frontier: 12}}
	var file []byte
	for _, r := range recs {
		file = append(file, slot(t, r)...)
	}
	require.NoError(t, h.fs.WriteFile(aheadPath("t", 0), file))
	require.Equal(t, int64(12), h.create("t", 0).Frontier, "the newest record, in slot 2")
	h.ack("t", 0, 13)
	h.ticks(1)

	slots := [3]offsets.Record{}
	b, err := h.fs.ReadFile(aheadPath("t", 0))
	require.NoError(t, err)
	for i := range slots {
		require.NoError(t, offsets.DecodeSlot(b[i*offsets.SlotSize:(i+1)*offsets.SlotSize], &slots[i]))
	}
	require.Equal(t, int64(13), slots[0].Frontier, "the window")
	require.Equal(t, uint64(8), slots[0].Seq, "above the anchor's")
	require.Equal(t, file[offsets.SlotSize:], b[offsets.SlotSize:], "slots 1 and 2 untouched")
	require.Equal(t, 2, offsets.Floors(h.c, "t", 0).AnchorSlot)
	require.Equal(t, int64(13), recoverOn(t, h.fs.ProcessCrash(), "t", 0).Frontier)
	cut := h.fs.PowerCut(crashfs.PowerCut{})
	h.closeCommitter()
	require.Equal(t, int64(12), recoverOn(t, cut, "t", 0).Frontier, "what the restart loaded is durable")
}

// Checklist item 54, as issue 25 changes it for a partition with no state files: the prime
// of a blank directory waits for no sync, so the first tick writes the window into the page
// cache at once (a process crash keeps it); the directory entries and consumer.id are made
// durable by the partition's first writeout, before its flip, and a power cut before that
// leaves nothing recovery would take for state (the partition is delivered again).
func TestBlankPrimeOwesItsSyncsToTheFirstWriteout(t *testing.T) {
	blank := func() *memHarness {
		h := newMemHarness(t, crashfs.New(), nil)
		h.mkdir("t", 0)
		h.create("t", 0)
		h.ack("t", 0, 0)
		h.ticks(1)
		return h
	}
	h := blank()
	st := h.c.Stats()
	require.Equal(t, uint64(1), st.BlankPrimes)
	require.Equal(t, uint64(1), st.Windows, "the first tick writes the window")
	require.Zero(t, st.Writeouts)
	crashed := h.fs.ProcessCrash()
	got := recoverOn(t, crashed, "t", 0)
	require.True(t, got.Found, "a process crash keeps the window")
	require.Equal(t, int64(0), got.Frontier)
	got = recoverOn(t, h.fs.PowerCut(crashfs.PowerCut{}), "t", 0)
	require.False(t, got.Found, "before its first writeout a power cut leaves no state to take")
	h.closeCommitter()

	// Partly kept unsynced writes never make recovery take a record it should not.
	for seed := range uint64(32) {
		h := blank()
		cut := h.fs.PowerCut(crashfs.PowerCut{Rand: rand.New(rand.NewPCG(seed, 1)), KeepUnsynced: 0.5})
		if got := recoverOn(t, cut, "t", 0); got.Found {
			require.Equal(t, int64(0), got.Frontier, "seed %d", seed)
		}
		h.closeCommitter()
	}

	h = blank()
	h.ticks(int(offsets.DefaultInterval / h.c.TickPeriod()))
	require.Equal(t, uint64(1), h.c.Stats().Writeouts)
	cut := h.fs.PowerCut(crashfs.PowerCut{})
	h.closeCommitter()
	b, err := cut.ReadFile(aheadPath("t", 0))
	require.NoError(t, err, "the entry survived the power cut")
	require.Len(t, b, offsets.AheadFileSize)
	got = recoverOn(t, cut, "t", 0)
	require.True(t, got.Found, "the first writeout made the files and their entries durable")
	require.Equal(t, int64(0), got.Frontier)
}

// Checklist item 56: the first tick after an upgrade from consumer.offset creates consumer.ahead
// for every partition acked, in-order acks included, and primes them all with one device flush
// before any window write.
func TestUpgradePrimesTogether(t *testing.T) {
	h := newMemHarness(t, crashfs.New(), nil)
	const parts = 8
	for p := range int32(parts) {
		h.mkdir("t", p)
		require.NoError(t, h.fs.WriteFile(offsetPath("t", p), be64(int64(100+p))))
		st := h.create("t", p)
		require.True(t, st.Found && st.Unverified, "a legacy consumer.offset is read, unverified")
		require.Equal(t, int64(100+p), st.Frontier)
	}
	h.record(nil)
	for p := range int32(parts) {
		h.ack("t", p, int64(101+p)) // in order
	}
	h.ticks(1)

	fullSyncsBeforeWindows, creates := 0, 0
	for _, op := range h.ops {
		if op.Kind == crashfs.OpWrite && op.Path != "" && isWindowWrite(h, op) {
			break
		}
		switch op.Kind {
		case crashfs.OpFullSync:
			fullSyncsBeforeWindows++
		case crashfs.OpCreate:
			creates++
		}
	}
	require.Equal(t, 2*parts, creates, "consumer.id and consumer.ahead of each partition")
	for p := range int32(parts) {
		id, err := h.fs.ReadFile(dirOf("t", p) + "/" + offsets.IDFile)
		require.NoError(t, err)
		adopts, frontier := offsets.IDAdoptsLegacy(id, "t", p)
		require.True(t, adopts, "consumer.id says the incarnation adopted the legacy state")
		require.Equal(t, int64(100+p), frontier)
	}
	require.Equal(t, 1, fullSyncsBeforeWindows, "one device flush for all the primes")
	require.Equal(t, uint64(parts), h.c.Stats().Primes)

	require.NoError(t, h.c.Close())
	cut := h.fs.PowerCut(crashfs.PowerCut{})
	for p := range int32(parts) {
		st := recoverOn(t, cut, "t", p)
		require.Equal(t, int64(101+p), st.Frontier)
		b, err := cut.ReadFile(offsetPath("t", p))
		require.NoError(t, err)
		requireOffsetFile(t, b, "t", p, int64(101+p)) // level after Close
	}
}

// isWindowWrite tells a window write from the prime's writes: the prime writes only the anchor
// slot of an existing record (none here, the files being new) and consumer.offset.
func isWindowWrite(h *memHarness, op crashfs.Op) bool {
	for p := range int32(8) {
		if op.Path == aheadPath("t", p) {
			return true
		}
	}
	return false
}

// Checklist items 39, 42 to 46: windows every tick, each partition written out once per
// interval at its hash-spread turn, one device flush per tick, and D = T writing every changed
// partition out on every tick.
func TestCadences(t *testing.T) {
	tests := []struct {
		name       string
		interval   time.Duration
		turns      int
		parts      int32
		ticks      int
		maxPerTick int // writeouts in one tick, at most (no burst)
	}{
		{"D=1s: once per 10 ticks, spread", time.Second, 10, 40, 40, 15},
		{"D=T=100ms: every tick (item 46)", 100 * time.Millisecond, 1, 6, 10, 6},
		{"D=10ms: T=10ms (item 38)", 10 * time.Millisecond, 1, 3, 10, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newMemHarness(t, crashfs.New(), func(c *offsets.Config) { c.Interval = tt.interval })
			for p := range tt.parts {
				h.mkdir("t", p)
				h.create("t", p)
			}
			next := int64(0)
			ackAll := func() {
				for p := range tt.parts {
					h.ack("t", p, next)
				}
				next++
			}
			ackAll()
			h.ticks(tt.turns + 1) // primed, and every partition had its first turn
			for i := range tt.ticks {
				ackAll()
				h.record(nil)
				h.ticks(1)
				writes, syncs, flushes := 0, 0, 0
				for _, op := range h.ops {
					switch op.Kind {
					case crashfs.OpWrite:
						writes++
					case crashfs.OpSyncData:
						syncs++
					case crashfs.OpFullSync:
						flushes++
					}
				}
				require.GreaterOrEqual(t, writes, int(tt.parts), "tick %d: a window for every acked partition", i)
				require.LessOrEqual(t, syncs-countOffsetSyncs(h), tt.maxPerTick, "tick %d: no burst", i)
				if syncs > 0 {
					require.Equal(t, 1, flushes, "tick %d: one device flush", i)
				}
			}
			s := h.c.Stats()
			perPartition := float64(s.Writeouts) / float64(tt.parts)
			wantPer := float64(tt.turns+1+tt.ticks) / float64(tt.turns)
			require.InDelta(t, wantPer, perPartition, 1.01, "about one writeout per interval each")
			h.closeCommitter()
		})
	}
}

func countOffsetSyncs(h *memHarness) int {
	n := 0
	for _, op := range h.ops {
		if op.Kind == crashfs.OpSyncData && len(op.Path) > len(offsets.OffsetFile) &&
			op.Path[len(op.Path)-len(offsets.OffsetFile):] == offsets.OffsetFile {
			n++
		}
	}
	return n
}

// Checklist item 44: a partition whose writes waited a whole interval is written out on the
// next tick whatever its turn (here the clock jumps past the interval between two ticks).
func TestOverdueWriteout(t *testing.T) {
	h := newMemHarness(t, crashfs.New(), nil)
	const parts = 10
	for p := range int32(parts) {
		h.mkdir("t", p)
		h.create("t", p)
		h.ack("t", p, 0)
	}
	h.ticks(1)
	before := h.c.Stats().Writeouts
	h.now = h.now.Add(time.Second)
	require.NoError(t, h.c.Tick(h.now))
	require.Equal(t, before+parts, h.c.Stats().Writeouts)
	h.closeCommitter()
}

// A consumer.ahead holding a newer release's record is neither extended nor overwritten: the
// prime fails (retried, reported) and Load refuses it, so a rollback cannot destroy it.
func TestPrimeRefusesNewerRecord(t *testing.T) {
	h := newMemHarness(t, crashfs.New(), nil)
	h.mkdir("t", 0)
	newer := slot(t, offsets.Record{Seq: 1, Key: offsets.PartitionKey("t", 0), Frontier: 5})
	newer[4] = offsets.SlotVersion + 1
	require.NoError(t, h.fs.WriteFile(aheadPath("t", 0), sealedSlot(newer)))
	_, err := h.c.Load("t", 0)
	require.ErrorIs(t, err, offsets.ErrNewerSlot)
	h.shards.Seed("t", 0, offsets.State{Frontier: 5})
	h.ack("t", 0, 6)
	for range 3 {
		require.ErrorIs(t, h.tick(), offsets.ErrNewerSlot)
	}
	b, err := h.fs.ReadFile(aheadPath("t", 0))
	require.NoError(t, err)
	require.Equal(t, sealedSlot(newer), b, "untouched")
	h.closeCommitter()
}

func sealedSlot(b []byte) []byte { return sealed(trim(b)) }
