package offsets_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

const rapidParts = 3

// rapidModel is a committer over crashfs whose schedule rapid draws: acks in and out of order,
// deliveries counted, quarantines, requeues, ticks (some with the clock jumping), crashes
// between or inside ticks, and graceful restarts. The shards are the oracle: everything they
// hold was acked, counted, quarantined or requeued, and they remember what they held.
type rapidModel struct {
	h        *memHarness
	interval time.Duration
}

func newRapidModel(t *rapid.T) *rapidModel {
	d := rapid.SampledFrom([]time.Duration{100 * time.Millisecond, 300 * time.Millisecond, time.Second}).Draw(t, "D")
	m := &rapidModel{interval: d}
	fsys := crashfs.New()
	for p := range int32(rapidParts) {
		require.NoError(t, fsys.MkdirAll(dirOf("r", p)))
	}
	if rapid.Bool().Draw(t, "upgrade") {
		require.NoError(t, fsys.WriteFile(offsetPath("r", 0), be64(20)))
	}
	m.start(t, fsys)
	return m
}

func (m *rapidModel) start(t *rapid.T, fsys *crashfs.FS) {
	prev := m.h
	m.h = newMemHarness(t, fsys, func(c *offsets.Config) { c.Interval = m.interval })
	if prev != nil {
		m.h.shards.Inherit(prev.shards)
	}
	offsets.SetLevelInterval(m.h.c, 2*m.interval)
	for p := range int32(rapidParts) {
		m.h.create("r", p)
	}
}

func (m *rapidModel) ack(t *rapid.T) {
	p := rapid.Int32Range(0, rapidParts-1).Draw(t, "partition")
	f := m.h.shards.Snapshot("r", p).Frontier
	n := rapid.IntRange(1, 6).Draw(t, "acks")
	for range n {
		m.h.ack("r", p, f+1+int64(rapid.IntRange(0, 4).Draw(t, "gap")))
	}
}

// deliver counts leases of unresolved offsets near the frontier.
func (m *rapidModel) deliver(t *rapid.T) {
	p := rapid.Int32Range(0, rapidParts-1).Draw(t, "partition")
	open := m.h.shards.Unresolved("r", p, m.h.shards.Snapshot("r", p).Frontier+6)
	if len(open) == 0 {
		return
	}
	for range rapid.IntRange(1, 3).Draw(t, "deliveries") {
		m.h.deliver("r", p, rapid.SampledFrom(open).Draw(t, "delivered"))
	}
}

// quarantine sets an unresolved offset aside: often the frontier hole, which the frontier
// then passes.
func (m *rapidModel) quarantine(t *rapid.T) {
	p := rapid.Int32Range(0, rapidParts-1).Draw(t, "partition")
	open := m.h.shards.Unresolved("r", p, m.h.shards.Snapshot("r", p).Frontier+6)
	if len(open) == 0 {
		return
	}
	m.h.quarantine("r", p, rapid.SampledFrom(open).Draw(t, "quarantined"))
}

// requeue brings a quarantined offset back, and acks requeued ones now and then.
func (m *rapidModel) requeue(t *rapid.T) {
	p := rapid.Int32Range(0, rapidParts-1).Draw(t, "partition")
	st := m.h.shards.Snapshot("r", p)
	if len(st.Quarantine) > 0 && rapid.Bool().Draw(t, "requeue") {
		m.h.requeue("r", p, rapid.SampledFrom(st.Quarantine).Draw(t, "requeued"))
	}
	if len(st.Requeued) > 0 && rapid.Bool().Draw(t, "ack requeued") {
		m.h.ack("r", p, rapid.SampledFrom(st.Requeued).Draw(t, "acked"))
	}
}

// park defers unresolved offsets near the frontier behind their keys (an ordered topic's
// blocked keys: the key tails), and ends parked ones, acked or given back.
func (m *rapidModel) park(t *rapid.T) {
	p := rapid.Int32Range(0, rapidParts-1).Draw(t, "partition")
	open := m.h.shards.Unresolved("r", p, m.h.shards.Snapshot("r", p).Frontier+8)
	if len(open) > 0 && rapid.Bool().Draw(t, "park") {
		m.h.park("r", p, rapid.SampledFrom(open).Draw(t, "parked"))
	}
	if parked := m.h.shards.Parked("r", p); len(parked) > 0 && rapid.Bool().Draw(t, "unpark") {
		m.h.unpark("r", p, rapid.SampledFrom(parked).Draw(t, "unparked"), rapid.Bool().Draw(t, "acked"))
	}
}

func (m *rapidModel) tick(t *rapid.T) {
	if rapid.IntRange(0, 9).Draw(t, "jump") == 0 {
		m.h.now = m.h.now.Add(m.interval) // an overrunning tick: the next starts late
	}
	require.NoError(t, m.h.tick())
}

// crash freezes the file system, between ticks or after k mutating ops of the next tick, and
// recovers from a process crash or a power loss (strict, partial or torn at a sector).
func (m *rapidModel) crash(t *rapid.T) {
	h := m.h
	if k := rapid.IntRange(-1, 12).Draw(t, "crash after ops"); k >= 0 {
		h.fs.CrashAfter(k)
		_ = h.tick()
	}
	var floors [rapidParts]offsets.Floor
	var anchors [rapidParts]*offsets.Record
	for p := range int32(rapidParts) {
		floors[p] = offsets.Floors(h.c, "r", p)
		anchors[p] = anchorRecord(t, h.fs, "r", p, floors[p])
	}
	process := rapid.Bool().Draw(t, "process crash")
	var after *crashfs.FS
	if process {
		after = h.fs.ProcessCrash()
	} else {
		cut := crashfs.PowerCut{}
		switch rapid.IntRange(0, 3).Draw(t, "cut") {
		case 1:
			seed := rapid.Uint64().Draw(t, "cut seed")
			cut.Rand, cut.KeepUnsynced = rand.New(rand.NewPCG(seed, seed)), 0.5
		case 2:
			cut.TearLastWrite, cut.TearAt = true, 512*rapid.IntRange(0, 8).Draw(t, "tear sector")
		case 3:
			cut.KeepUnsynced, cut.TearLastWrite = 1, true
			cut.TearAt = 512 * rapid.IntRange(0, 8).Draw(t, "tear sector")
		}
		after = h.fs.PowerCut(cut)
	}
	h.closeCommitter()
	for p := range int32(rapidParts) {
		st := recoverOn(t, after, "r", p)
		msg := fmt.Sprintf("partition %d, process crash %v", p, process)
		requireSettledSubset(t, h.shards, "r", p, st, msg)
		floor := floors[p].Durable
		if process {
			floor = floors[p].PageCache
		}
		require.GreaterOrEqual(t, st.Frontier, floor, "I2: %s", msg)
		if a := anchors[p]; a != nil {
			for _, o := range offsets.OffsetsOf(a.Ahead) {
				// A parked offset (the anchor's tails name it) may leave the runs since.
				if o > st.Frontier && !offsets.InTails(a.KeyTails, o) {
					require.True(t, offsets.RunsContain(st.Ahead, o), "I2: anchor's acked-ahead %d lost: %s", o, msg)
				}
			}
		}
		requireSetsRecovered(t, h.shards, "r", p, st, anchors[p], msg)
	}
	m.start(t, after)
}

// restart closes gracefully and restarts: nothing acked is lost (invariant 5, checklist 59).
func (m *rapidModel) restart(t *rapid.T) {
	h := m.h
	want := make([]offsets.State, rapidParts)
	for p := range int32(rapidParts) {
		want[p] = h.shards.Snapshot("r", p)
	}
	require.NoError(t, h.c.Close())
	after := h.fs.PowerCut(crashfs.PowerCut{})
	m.start(t, after)
	for p := range int32(rapidParts) {
		requireSameState(t, want[p], m.h.shards.Snapshot("r", p), "exact after a graceful restart")
	}
}

// TestRapidSchedules checks I1 and I2 at every crash, for the frontier, the acked-ahead offsets
// (a parked one only with the key tail that names it) and the attempts, quarantined and
// requeued sets, and exactness at every graceful restart, over random schedules of acks,
// deliveries, quarantines, requeues, parkings, ticks, crashes and restarts.
func TestRapidSchedules(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newRapidModel(t)
		t.Repeat(map[string]func(*rapid.T){
			"ack":        m.ack,
			"deliver":    m.deliver,
			"quarantine": m.quarantine,
			"requeue":    m.requeue,
			"park":       m.park,
			"tick":       m.tick,
			"crash":      m.crash,
			"restart":    m.restart,
		})
		m.h.closeCommitter()
	})
}
