package offsets_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// The upgrade from a release before consumer.id: its partitions hold legacy records only,
// naming no incarnation. Partition 0 has both slots (the anchor holding every set, an older
// record beside it) and an 8-byte consumer.offset trailing them, partition 1 the 8-byte
// consumer.offset alone, partition 2 a move's 4 KiB copy of one slot.
const upgradeParts = 3

// upgradeRecords are the legacy slots each partition starts from (slot 0, then slot 1).
var upgradeRecords = [upgradeParts][]offsets.Record{
	0: {{Seq: 3, Key: offsets.PartitionKey("u", 0), Frontier: 10, Ahead: offsets.RunsOf(12, 14),
		Attempts: []offsets.Attempt{{Offset: 11, Count: 2}}, Quarantine: []int64{4, 13}, Requeued: []int64{2}},
		{Seq: 2, Key: offsets.PartitionKey("u", 0), Frontier: 8, Ahead: offsets.RunsOf(10)}},
	2: {{Seq: 1, Key: offsets.PartitionKey("u", 2), Frontier: 5, Ahead: offsets.RunsOf(7)}},
}

// upgradeAdopted is the frontier each partition's legacy state gives: what the upgrade loads
// and adopts, and the floor of every recovery after it.
var upgradeAdopted = [upgradeParts]int64{10, 20, 5}

func upgradeSetup(t testing.TB, fsys *crashfs.FS) {
	for p := range int32(upgradeParts) {
		require.NoError(t, fsys.MkdirAll(dirOf("u", p)))
		var ahead []byte
		for _, r := range upgradeRecords[p] {
			ahead = append(ahead, slot(t, r)...)
		}
		if ahead != nil {
			require.NoError(t, fsys.WriteFile(aheadPath("u", p), ahead))
		}
	}
	require.NoError(t, fsys.WriteFile(offsetPath("u", 0), be64(7)))
	require.NoError(t, fsys.WriteFile(offsetPath("u", 1), be64(20)))
}

// upgradeRun is the first run of this release over the legacy files: each partition is
// loaded, primed (which writes consumer.id) and acked, in order and out of order, over
// enough ticks for its first writeouts, flips and levellings, then closed. It returns whether
// the file system froze (CrashAfter) before the end.
func upgradeRun(t testing.TB, h *memHarness) bool {
	offsets.SetLevelInterval(h.c, 300*time.Millisecond)
	for p := range int32(upgradeParts) {
		st := h.create("u", p)
		require.Equal(t, upgradeAdopted[p], st.Frontier, "the upgrade loads the legacy state")
	}
	for i := range 8 {
		for p := range int32(upgradeParts) {
			f := h.shards.Snapshot("u", p).Frontier
			if i%2 == 0 {
				h.ack("u", p, f+1)
			} else {
				h.ack("u", p, f+3)
			}
		}
		_ = h.tick()
		if h.fs.Crashed() {
			return true
		}
	}
	_ = h.c.Close()
	return h.fs.Crashed()
}

// TestUpgradeCrashAtEveryStep crashes the upgrade after each of its mutating ops (the primes'
// consumer.id, extensions and rewrites, the first windows, writeouts, flips' flushes,
// levellings, Close) and recovers from every crash kind. Each partition must come back with
// nothing that was not acked, and never behind the legacy state the upgrade adopted, nor what
// was durable when it froze: the consumer.id the prime writes names the legacy record and
// frontier it adopted, so they count under it until this incarnation's records replace them.
// A restart from what was recovered then primes, writes a window and loses power: what it
// observed stays.
func TestUpgradeCrashAtEveryStep(t *testing.T) {
	base := crashfs.New()
	upgradeSetup(t, base)
	start := base.MutatingOps()
	require.False(t, upgradeRun(t, newMemHarness(t, base, upgradeConfig)))
	total := base.MutatingOps() - start
	require.Greater(t, total, 30, "the upgrade does enough to be worth sweeping")
	recoveries := 0
	for k := 0; k <= total; k++ {
		fsys := crashfs.New()
		upgradeSetup(t, fsys)
		h := newMemHarness(t, fsys, upgradeConfig)
		h.record(nil)
		fsys.CrashAfter(k)
		froze := upgradeRun(t, h)
		require.Equal(t, k < total, froze, "k=%d", k)
		var floors [upgradeParts]offsets.Floor
		for p := range int32(upgradeParts) {
			floors[p] = offsets.Floors(h.c, "u", p)
		}
		for _, kind := range crashKinds(uint64(k), strings.HasSuffix(lastUnsyncedWrite(h.ops), offsets.AheadFile)) {
			var after *crashfs.FS
			if kind.process {
				after = fsys.ProcessCrash()
			} else {
				after = fsys.PowerCut(kind.cut)
			}
			where := fmt.Sprintf("crash after %d of %d ops, %s", k, total, kind.name)
			var observed [upgradeParts]offsets.State
			for p := range int32(upgradeParts) {
				observed[p] = checkUpgradeRecovery(t, h, after, p, floors[p], kind.process, where)
			}
			if kind.process || kind.cut.KeepUnsynced == 1 {
				restartUpgradedThenPowerLoss(t, h.shards, after, observed, where)
			}
			recoveries++
		}
		h.closeCommitter()
	}
	t.Logf("%d recoveries checked", recoveries)
}

func upgradeConfig(c *offsets.Config) { c.Interval = 200 * time.Millisecond }

// checkUpgradeRecovery recovers partition p from after and checks it, returning what it
// recovered.
func checkUpgradeRecovery(t *testing.T, h *memHarness, after *crashfs.FS, p int32, floor offsets.Floor,
	process bool, where string) offsets.State {
	msg := fmt.Sprintf("partition %d, %s", p, where)
	st := recoverOn(t, after, "u", p)
	requireSettledSubset(t, h.shards, "u", p, st, msg)
	least := max(upgradeAdopted[p], floor.Durable)
	if process {
		least = max(least, floor.PageCache)
	}
	require.True(t, st.Found, "the adopted legacy state counts: %s", msg)
	require.GreaterOrEqual(t, st.Frontier, least, "behind the adopted or durable frontier: %s", msg)
	var anchor *offsets.Record
	if recs := upgradeRecords[p]; len(recs) > 0 {
		anchor = &recs[0]
	}
	if floor.Primed && floor.AnchorSlot >= 0 {
		anchor = anchorRecord(t, h.fs, "u", p, floor)
	}
	if anchor != nil {
		for _, o := range offsets.OffsetsOf(anchor.Ahead) {
			if o > st.Frontier {
				require.True(t, offsets.RunsContain(st.Ahead, o), "anchor's acked-ahead %d lost: %s", o, msg)
			}
		}
	}
	requireSetsRecovered(t, h.shards, "u", p, st, anchor, msg)
	if id, err := after.ReadFile(dirOf("u", p) + "/" + offsets.IDFile); err == nil {
		if ok, frontier := offsets.IDAdoptsLegacy(id, "u", p); ok {
			require.Equal(t, upgradeAdopted[p], frontier, "consumer.id names the frontier adopted: %s", msg)
		}
	}
	return st
}

// restartUpgradedThenPowerLoss restarts from fsys after a crash of the upgrade: each
// partition is loaded (it must observe what recovery read), acked once more and written in a
// window without a writeout; a power loss then must not take back what the restart observed.
func restartUpgradedThenPowerLoss(t *testing.T, before *offsets.Shards, fsys *crashfs.FS,
	observed [upgradeParts]offsets.State, where string) {
	h := newMemHarness(t, fsys, upgradeConfig)
	h.shards.Inherit(before)
	for p := range int32(upgradeParts) {
		st := h.create("u", p)
		requireSameState(t, observed[p], st, "the restart observes what recovery read")
		h.ack("u", p, st.Frontier+1)
	}
	_ = h.tick()
	cut := fsys.PowerCut(crashfs.PowerCut{})
	h.closeCommitter()
	for p := range int32(upgradeParts) {
		st := recoverOn(t, cut, "u", p)
		require.GreaterOrEqual(t, st.Frontier, observed[p].Frontier,
			"the restart's observed state lost, partition %d, %s", p, where)
		for _, o := range offsets.OffsetsOf(observed[p].Ahead) {
			if o > st.Frontier {
				require.True(t, offsets.RunsContain(st.Ahead, o), "acked-ahead %d lost, partition %d, %s", o, p, where)
			}
		}
	}
}
