package offsets_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/testflags"
	"narad.dev/consume/offsets"
)

// The standard crash workload W1 of RELIABILITY.md: 4 partitions, 30 ticks of mixed in-order
// and out-of-order acks, with deliveries counted, offsets quarantined (at the frontier hole and
// above it), requeued (at or below the frontier, and above it) and requeued ones acked,
// offsets parked behind their key as on an ordered topic (key tails) and parked ones acked or
// given back; one
// fresh prime, one upgrade prime (consumer.offset only), one partition with a durable
// consumer.ahead from an earlier run holding every set and one with a move's 4 KiB copy, D = 10
// ticks, consumer.offset levelled every 10 ticks, then a graceful Close.
const (
	w1Parts = 4
	w1Ticks = 30
)

// w1Initial is the durable state the workload starts from, per partition: the floor every
// recovery must reach before the committer has made anything else durable (invariant I2).
var w1Initial = [w1Parts]int64{-1, 99, 10, 50}

func w1Setup(t testing.TB, fsys *crashfs.FS) {
	for p := range int32(w1Parts) {
		require.NoError(t, fsys.MkdirAll(dirOf("w", p)))
	}
	require.NoError(t, fsys.WriteFile(offsetPath("w", 1), be64(99)))
	s2 := slot(t, w1InitialRecord[2])
	require.NoError(t, fsys.WriteFile(aheadPath("w", 2), append(s2, make([]byte, offsets.SlotSize)...)))
	require.NoError(t, fsys.WriteFile(offsetPath("w", 2), be64(5)))
	require.NoError(t, fsys.WriteFile(aheadPath("w", 3), slot(t, w1InitialRecord[3])))
}

// w1InitialRecord is the durable consumer.ahead record a partition starts from, if any: the
// anchor every recovery must keep before the committer has made anything else durable.
var w1InitialRecord = [w1Parts]offsets.Record{
	2: {Seq: 3, Key: offsets.PartitionKey("w", 2), Frontier: 10, Ahead: offsets.RunsOf(12, 14),
		Attempts: []offsets.Attempt{{Offset: 11, Count: 2}, {Offset: 13, Count: 1}}, Quarantine: []int64{4, 9, 16},
		Requeued: []int64{6}},
	3: {Seq: 1, Key: offsets.PartitionKey("w", 3), Frontier: 50, Ahead: offsets.RunsOf(52), Quarantine: []int64{30}},
}

// w1Run runs the workload until it ends or the file system freezes (CrashAfter). It returns
// whether it froze; the committer is left as the crash left it.
func w1Run(t testing.TB, h *memHarness, seed uint64) bool {
	offsets.SetLevelInterval(h.c, time.Second)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	for p := range int32(w1Parts) {
		h.create("w", p)
	}
	for range w1Ticks {
		for p := range int32(w1Parts) {
			snap := h.shards.Snapshot("w", p)
			f := snap.Frontier
			for range rng.IntN(4) {
				if rng.IntN(3) == 0 {
					h.ack("w", p, f+2+int64(rng.IntN(6))) // out of order
				} else {
					f++
					h.ack("w", p, f)
				}
			}
			w1Redelivery(h, rng, p, snap)
		}
		_ = h.tick()
		if h.fs.Crashed() {
			return true
		}
	}
	_ = h.c.Close()
	return h.fs.Crashed()
}

// w1Redelivery is W1's share of issue 5: leases counted on unresolved offsets, a quarantine
// now and then (often the frontier hole, so the frontier passes over it), requeues of
// quarantined offsets, and acks of requeued ones.
func w1Redelivery(h *memHarness, rng *rand.Rand, p int32, snap offsets.State) {
	cur := h.shards.Snapshot("w", p)
	open := h.shards.Unresolved("w", p, cur.Frontier+8)
	for range rng.IntN(3) {
		if len(open) > 0 {
			h.deliver("w", p, open[rng.IntN(len(open))])
		}
	}
	if len(open) > 0 && rng.IntN(5) == 0 {
		off := open[0]
		if rng.IntN(2) == 0 {
			off = open[rng.IntN(len(open))]
		}
		h.quarantine("w", p, off)
	}
	if len(snap.Quarantine) > 0 && rng.IntN(6) == 0 {
		h.requeue("w", p, snap.Quarantine[rng.IntN(len(snap.Quarantine))])
	}
	if len(snap.Requeued) > 0 && rng.IntN(3) == 0 {
		h.ack("w", p, snap.Requeued[rng.IntN(len(snap.Requeued))])
	}
	// As on an ordered topic: offsets parked behind their blocked key (in the acked-ahead
	// runs, named by the key tails, never settled), and parked ones acked or given back.
	if len(open) > 1 && rng.IntN(4) == 0 {
		h.park("w", p, open[1+rng.IntN(len(open)-1)])
	}
	if parked := h.shards.Parked("w", p); len(parked) > 0 && rng.IntN(4) == 0 {
		h.unpark("w", p, parked[rng.IntN(len(parked))], rng.IntN(2) == 0)
	}
}

// crashKind is one way of coming back from a frozen file system.
type crashKind struct {
	name    string
	process bool // the page cache survives
	cut     crashfs.PowerCut
}

// crashKinds are the recoveries tried at every crash point: a process crash, a strict power
// loss, random survival of unsynced sectors and entries, and the newest unsynced write torn at
// sector boundaries (and, for a 4 KiB slot, at arbitrary bytes; an 8-byte consumer.offset
// write sits in one sector, which does not tear: gap G1 is out of this model).
func crashKinds(seed uint64, slotTear bool) []crashKind {
	r := func(s uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, s)) }
	kinds := []crashKind{
		{name: "process crash", process: true},
		{name: "power loss", cut: crashfs.PowerCut{}},
		{name: "power loss, half the unsynced", cut: crashfs.PowerCut{Rand: r(1), KeepUnsynced: 0.5}},
		{name: "power loss, half the unsynced (2)", cut: crashfs.PowerCut{Rand: r(2), KeepUnsynced: 0.5}},
	}
	for _, at := range []int{0, 512, 1536, 3584} {
		kinds = append(kinds,
			crashKind{name: "torn at " + strconv.Itoa(at), cut: crashfs.PowerCut{TearLastWrite: true, TearAt: at}},
			crashKind{name: "all kept, torn at " + strconv.Itoa(at),
				cut: crashfs.PowerCut{KeepUnsynced: 1, TearLastWrite: true, TearAt: at}})
	}
	if slotTear {
		for _, at := range []int{1, 37, 100 + int(seed%3000)} {
			kinds = append(kinds, crashKind{name: "all kept, torn at byte " + strconv.Itoa(at),
				cut: crashfs.PowerCut{KeepUnsynced: 1, TearLastWrite: true, TearAt: at}})
		}
	}
	return kinds
}

// lastUnsyncedWrite returns the path of the newest write not synced since, as crashfs tears it.
func lastUnsyncedWrite(ops []crashfs.Op) string {
	last := map[string]int{}
	for i, op := range ops {
		switch op.Kind {
		case crashfs.OpWrite:
			last[op.Path] = i
		case crashfs.OpSyncData:
			delete(last, op.Path)
		}
	}
	best, at := "", -1
	for p, i := range last {
		if i > at {
			best, at = p, i
		}
	}
	return best
}

// TestCrashSweep is RELIABILITY rows 1 and 2 (checklist items 52, 55, 74, 76; invariants I1,
// I2, I3, I9): W1 is run once to count its mutating ops (primes, window writes, writeouts,
// flips' flushes, levellings, Close), then again for each k, freezing the file system after k
// of them; every crash kind is recovered from, and each partition must come back with a
// frontier and acked-ahead set that were acked (I1), no older than what was durable (or, after
// a process crash, in the page cache) when it froze (I2). Then a restart primes and writes a
// window and loses power again: nothing it observed may be lost (I3).
//
// OFFSETS_SWEEP_SEEDS sets how many ack schedules are swept (default 4, RELIABILITY row 1;
// about 12,000 recoveries, row 2; one under the race detector, which makes four take two
// minutes; CI sweeps all four without it).
func TestCrashSweep(t *testing.T) {
	seeds := 4
	if testflags.Race {
		seeds = 1
	}
	if v, err := strconv.Atoi(os.Getenv("OFFSETS_SWEEP_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	recoveries := 0
	for seed := range uint64(seeds) {
		base := crashfs.New()
		w1Setup(t, base)
		start := base.MutatingOps()
		h := newMemHarness(t, base, nil)
		require.False(t, w1Run(t, h, seed))
		total := base.MutatingOps() - start
		require.Greater(t, total, 100, "W1 does enough to be worth sweeping")
		for k := 0; k <= total; k++ {
			recoveries += sweepPoint(t, seed, k, total)
		}
	}
	t.Logf("%d recoveries checked", recoveries)
}

func sweepPoint(t *testing.T, seed uint64, k, total int) int {
	fsys := crashfs.New()
	w1Setup(t, fsys)
	h := newMemHarness(t, fsys, nil)
	h.record(nil)
	fsys.CrashAfter(k)
	froze := w1Run(t, h, seed)
	require.Equal(t, k < total, froze, "k=%d", k)
	if !froze {
		requireExactAfterClose(t, h)
		return 1
	}
	var floors [w1Parts]offsets.Floor
	var anchors [w1Parts]*offsets.Record
	for p := range int32(w1Parts) {
		floors[p] = offsets.Floors(h.c, "w", p)
		anchors[p] = anchorRecord(t, fsys, "w", p, floors[p])
		if !floors[p].Primed && w1InitialRecord[p].Seq != 0 {
			anchors[p] = &w1InitialRecord[p] // not primed yet: the record it starts from
		}
	}
	lastWrite := lastUnsyncedWrite(h.ops)
	n := 0
	for _, kind := range crashKinds(seed+uint64(k), strings.HasSuffix(lastWrite, offsets.AheadFile)) {
		var after *crashfs.FS
		if kind.process {
			after = fsys.ProcessCrash()
		} else {
			after = fsys.PowerCut(kind.cut)
		}
		where := fmt.Sprintf("seed %d, crash after %d of %d ops, %s", seed, k, total, kind.name)
		observed := checkRecovery(t, h, after, floors, anchors, kind.process, where)
		if kind.process || kind.cut.KeepUnsynced == 1 {
			restartThenPowerLoss(t, h.shards, after, observed, where)
		}
		n++
	}
	return n
}

// anchorRecord reads the anchor record from the page cache (the anchor is durable and not
// written while it is the anchor, so the page cache holds its durable bytes); nil when the
// anchor holds nothing.
func anchorRecord(t tb, frozen *crashfs.FS, topic string, p int32, fl offsets.Floor) *offsets.Record {
	if fl.AnchorSlot < 0 {
		return nil
	}
	b, err := frozen.ProcessCrash().ReadFile(aheadPath(topic, p))
	require.NoError(t, err)
	var r offsets.Record
	at := fl.AnchorSlot * offsets.SlotSize
	require.NoError(t, offsets.DecodeSlot(b[at:at+offsets.SlotSize], &r), "the anchor is a valid record")
	return &r
}

// checkRecovery recovers every partition from after and checks I1 and I2; it returns what was
// recovered.
func checkRecovery(t *testing.T, h *memHarness, after *crashfs.FS, floors [w1Parts]offsets.Floor,
	anchors [w1Parts]*offsets.Record, process bool, where string) [w1Parts]offsets.State {
	var got [w1Parts]offsets.State
	for p := range int32(w1Parts) {
		st := recoverOn(t, after, "w", p)
		got[p] = st
		msg := fmt.Sprintf("partition %d, %s", p, where)
		requireSettledSubset(t, h.shards, "w", p, st, msg)
		floor := max(w1Initial[p], floors[p].Durable)
		if process {
			floor = max(floor, floors[p].PageCache)
		}
		if floor >= 0 {
			require.True(t, st.Found, "I2: %s", msg)
		}
		require.GreaterOrEqual(t, st.Frontier, floor, "I2 frontier below the durable floor: %s", msg)
		if a := anchors[p]; a != nil {
			for _, o := range offsets.OffsetsOf(a.Ahead) {
				// A parked offset (the anchor's tails name it) may leave the runs since.
				if o > st.Frontier && !offsets.InTails(a.KeyTails, o) {
					require.True(t, offsets.RunsContain(st.Ahead, o), "I2: anchor's acked-ahead %d lost: %s", o, msg)
				}
			}
		}
		requireSetsRecovered(t, h.shards, "w", p, st, anchors[p], msg)
	}
	return got
}

// restartAndAckOne is a restart over fsys after before's shards: it observes what recovery
// reads (which must be observed), primes, acks one more offset per partition and writes its
// window in a tick, with no writeout.
func restartAndAckOne(t *testing.T, before *offsets.Shards, fsys *crashfs.FS, observed [w1Parts]offsets.State) *memHarness {
	h := newMemHarness(t, fsys, nil)
	h.shards.Inherit(before)
	for p := range int32(w1Parts) {
		st := h.create("w", p)
		requireSameState(t, observed[p], st, "the restart observes what recovery read")
		if next := st.Frontier + 1; slices.Contains(h.shards.Parked("w", p), next) {
			h.unpark("w", p, next, true) // parked: acked so
		} else {
			h.ack("w", p, next)
		}
	}
	_ = h.tick()
	return h
}

// restartThenPowerLoss is I3: a restart observes a state, primes, acks one more offset per
// partition and writes its window without a writeout; a power loss then must not take back
// what the restart observed.
func restartThenPowerLoss(t *testing.T, before *offsets.Shards, fsys *crashfs.FS, observed [w1Parts]offsets.State, where string) {
	h := restartAndAckOne(t, before, fsys, observed)
	cut := fsys.PowerCut(crashfs.PowerCut{})
	h.closeCommitter()
	for p := range int32(w1Parts) {
		st := recoverOn(t, cut, "w", p)
		require.GreaterOrEqual(t, st.Frontier, observed[p].Frontier,
			"I3: partition %d lost what the restart observed, %s", p, where)
		for _, o := range offsets.OffsetsOf(observed[p].Ahead) {
			if o > st.Frontier {
				require.True(t, offsets.RunsContain(st.Ahead, o), "I3: acked-ahead %d lost, partition %d, %s", o, p, where)
			}
		}
		for _, k := range observed[p].KeyTails { // nothing was unparked since: the tails stay
			if k.From > st.Frontier {
				require.Contains(t, st.KeyTails, k, "I3: key tail lost, partition %d, %s", p, where)
			}
		}
		// Nothing was requeued or delivered since: the sets the restart observed are all there.
		requireSetsRecovered(t, h.shards, "w", p, st, &offsets.Record{Quarantine: observed[p].Quarantine,
			Requeued: observed[p].Requeued, Attempts: observed[p].Attempts},
			fmt.Sprintf("I3: partition %d, %s", p, where))
	}
}

// requireExactAfterClose is checklist item 59 after a power loss: a graceful Close left both
// files exact and durable.
func requireExactAfterClose(t *testing.T, h *memHarness) {
	cut := h.fs.PowerCut(crashfs.PowerCut{})
	for p := range int32(w1Parts) {
		want := h.shards.Snapshot("w", p)
		got := recoverOn(t, cut, "w", p)
		requireSameState(t, want, got, fmt.Sprintf("exact after Close, partition %d", p))
		b, err := cut.ReadFile(offsetPath("w", p))
		require.NoError(t, err)
		requireOffsetFile(t, b, "w", p, want.Frontier)
	}
}
