package offsets_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/testflags"
	"narad.dev/consume/offsets"
)

// Issue item 9 (the tail of a run): with every sync taking 500 ms, an ack is in the page cache
// (what a process crash keeps) one tick after it was made, whatever sync is in flight, for
// the acks of a long run and for a sparse tail of acks after it: a window write never waits
// for a sync. Two ways a sync in flight used to hold the window back are run: writes that
// waited more than 2·D for their writeout (acks alone), and a Durable wait on the partition
// (acks beside durable acks, which share one sync each). Time is synctest's: each check
// comes one tick and a millisecond after the ack it looks for.
func TestPageCacheWritesDoNotWaitForSyncs(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "acks", true: "beside durable acks"}[durable], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testPageCacheDuringSyncs(t, durable) })
		})
	}
}

func testPageCacheDuringSyncs(t *testing.T, durable bool) {
	w := &wrapFS{FS: crashfs.New(), syncDelay: 500 * time.Millisecond}
	r := newCadenceRig(t, w, nil)
	r.create("s", 0)
	ctx, cancel := context.WithCancel(context.Background())
	r.start(ctx)
	if durable {
		// A durable acker: a Durable wait on the partition whenever a sync runs.
		r.wg.Go(func() {
			for ctx.Err() == nil {
				_ = r.c.Durable(ctx, "s", 0)
			}
		})
	}
	tick := r.c.TickPeriod()
	type ack struct {
		off int64
		at  time.Time
	}
	var acks []ack
	next := int64(0)
	worst, worstAge := int64(-1), time.Duration(0) // the oldest ack a process crash would forget
	check := func() {
		synctest.Wait()
		kept := recoverOn(t, r.fs, "s", 0).Frontier // the page cache: what a process crash keeps
		for _, a := range acks {
			if age := time.Since(a.at); a.off > kept && age > tick && age > worstAge {
				worst, worstAge = a.off, age
			}
		}
	}
	ackOne := func() {
		require.True(t, r.shards.Ack("s", 0, next))
		r.c.MarkDirty("s", 0)
		acks = append(acks, ack{next, time.Now()})
		next++
	}
	// A run of acks 10 ms apart, long enough for writes to wait more than 2·D.
	for range 600 {
		ackOne()
		time.Sleep(10 * time.Millisecond)
		check()
	}
	// Its tail: a few acks, sparse, each looked for one tick after it was made.
	for _, gap := range []time.Duration{30, 170, 60, 240, 90, 310, 20, 130} {
		time.Sleep(gap * time.Millisecond)
		ackOne()
		time.Sleep(tick + time.Millisecond)
		check()
	}
	crashed := r.fs.ProcessCrash()
	got := recoverOn(t, crashed, "s", 0).Frontier
	cancel()
	r.wg.Wait()
	_ = r.c.Close() // the frozen file system fails it

	t.Logf("oldest ack missing from the page cache one tick on: %d, %v old; after the tail: %d of %d kept", worst, worstAge, got, next-1)
	require.Equal(t, next-1, got, "a process crash one tick after the last ack keeps every ack")
	require.Equal(t, int64(-1), worst, "ack %d was not in the page cache %v after it was made (tick %v)", worst, worstAge, tick)
	s := r.c.Stats()
	require.NotZero(t, s.Writeouts, "syncs slower than T still flip")
	require.NotZero(t, s.SlowWriteouts)
	if durable {
		require.NotZero(t, s.Durables)
	}
	t.Logf("%d acks, %d windows, %d writeouts, %d durable waits answered", next, s.Windows, s.Writeouts, s.Durables)
}

// slotsOf decodes the page-cache image of each slot of the partition's consumer.ahead (nil
// for one that holds no valid record).
func slotsOf(t *testing.T, fsys *crashfs.FS, topic string, p int32) [offsets.AheadSlots]*offsets.Record {
	t.Helper()
	b, err := fsys.ReadFile(aheadPath(topic, p))
	require.NoError(t, err)
	require.Len(t, b, offsets.AheadFileSize)
	var out [offsets.AheadSlots]*offsets.Record
	for i := range out {
		var r offsets.Record
		if offsets.DecodeSlot(b[i*offsets.SlotSize:(i+1)*offsets.SlotSize], &r) == nil {
			out[i] = &r
		}
	}
	return out
}

// The spare slot, step by step: while the window's sync runs, a tick writes the third slot
// (with a sequence number above the synced one's), leaves the synced slot as the sync found
// it, and the sync still flips; the spare, now the window, is written out in its turn, and a
// tick during a later sync writes whichever slot is neither the anchor nor being synced. A
// power cut at the end keeps what Durable answered for.
func TestSpareSlotTakesTicksDuringSyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &wrapFS{FS: crashfs.New(), syncDelay: 500 * time.Millisecond}
		r := newCadenceRig(t, w, nil)
		r.create("s", 0)
		ctx, cancel := context.WithCancel(context.Background())
		r.start(ctx)
		tick := r.c.TickPeriod()
		ack := func(o int64) {
			require.True(t, r.shards.Ack("s", 0, o))
			r.c.MarkDirty("s", 0)
		}
		// durableAck acks o and waits for it durably. The Durable call's own mark reports the
		// ack, so that exactly one tick, the one the call starts at once, writes it.
		durableAck := func(o int64) chan error {
			require.True(t, r.shards.Ack("s", 0, o))
			done := make(chan error, 1)
			go func() { done <- r.c.Durable(ctx, "s", 0) }()
			return done
		}
		frontiers := func() (out [offsets.AheadSlots]int64) {
			for i, rec := range slotsOf(t, w.FS, "s", 0) {
				out[i] = -2 // no record
				if rec != nil {
					out[i] = rec.Frontier
				}
			}
			return out
		}

		require.NoError(t, <-durableAck(0)) // slot 0 is the anchor, slot 1 the window
		time.Sleep(time.Second)             // the batch's levelling of consumer.offset
		synctest.Wait()
		require.Equal(t, [3]int64{0, -2, -2}, frontiers())

		first := durableAck(1) // writes slot 1 and starts its sync at once
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, [3]int64{0, 1, -2}, frontiers())
		ack(2)
		time.Sleep(tick + time.Millisecond)
		synctest.Wait()
		slots := slotsOf(t, w.FS, "s", 0)
		require.Equal(t, [3]int64{0, 1, 2}, frontiers(), "the tick wrote the spare, not the slot being synced")
		require.Greater(t, slots[2].Seq, slots[1].Seq, "the spare outranks the slot being synced")
		require.Equal(t, int64(2), recoverOn(t, w.FS, "s", 0).Frontier, "a process crash keeps the spare's acks")
		require.NoError(t, <-first, "the sync flipped: nothing wrote its slot meanwhile")
		require.Equal(t, uint64(2), r.c.Stats().Writeouts)

		// The spare, now the window, is written out in its turn (within D) and flips; the old
		// anchor, slot 1, becomes the window.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, uint64(3), r.c.Stats().Writeouts)
		second := durableAck(3) // writes slot 1 and starts its sync at once
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, [3]int64{0, 3, 2}, frontiers())
		ack(4)
		time.Sleep(tick + time.Millisecond)
		synctest.Wait()
		slots = slotsOf(t, w.FS, "s", 0)
		require.Equal(t, [3]int64{4, 3, 2}, frontiers(), "slot 0, neither the anchor (2) nor synced (1), took the tick")
		require.Greater(t, slots[0].Seq, slots[1].Seq)
		require.NoError(t, <-second)

		cut := w.FS.PowerCut(crashfs.PowerCut{})
		cancel()
		r.wg.Wait()
		_ = r.c.Close() // on the frozen file system
		got := recoverOn(t, cut, "s", 0).Frontier
		require.GreaterOrEqual(t, got, int64(3), "what Durable answered for survives the power cut")
		require.LessOrEqual(t, got, int64(4))
		s := r.c.Stats()
		require.Equal(t, uint64(2), s.WrittenToSpareSlots)
		require.Equal(t, uint64(4), s.Writeouts)
	})
}

// The crash workload W1 (crash_test.go) under Run, with every sync taking 250 ms and durable
// acks on partition 0, frozen at moments spread over the run (syncs in flight, ticks writing
// spare slots): every crash kind recovers nothing unacked (I1), nothing below the durable
// floor, and after a process crash nothing below the page-cache floor (I2), a process crash
// keeps every ack older than a tick, and a restart that primes and writes loses nothing it
// observed to a power loss (I3), the newest record in the spare slot included.
func TestCrashesWhileSyncsRun(t *testing.T) {
	cuts := 24
	if testflags.Race {
		cuts = 6
	}
	for i := range cuts {
		at := time.Second + time.Duration(i)*131*time.Millisecond
		t.Run(at.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { crashWhileSyncsRun(t, uint64(i), at) })
		})
	}
}

func crashWhileSyncsRun(t *testing.T, seed uint64, at time.Duration) {
	fsys := crashfs.New()
	w1Setup(t, fsys)
	h := newMemHarness(t, fsys, nil)
	h.closeCommitter() // replaced by one over the slow file system, under Run
	w := &wrapFS{FS: fsys, syncDelay: 250 * time.Millisecond}
	c, err := offsets.New(offsets.Config{FS: w, Dir: dirOf, Source: h.shards, Interval: 300 * time.Millisecond})
	require.NoError(t, err)
	h.c = c
	offsets.SetLevelInterval(c, time.Second)
	for p := range int32(w1Parts) {
		h.create("w", p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var bg []chan struct{}
	goBG := func(f func()) {
		done := make(chan struct{})
		bg = append(bg, done)
		go func() { defer close(done); f() }()
	}
	goBG(func() { _ = c.Run(ctx, nil) })
	goBG(func() {
		for ctx.Err() == nil {
			_ = c.Durable(ctx, "w", 0)
		}
	})

	type ack struct {
		p   int32
		off int64
		at  time.Time
	}
	var acks []ack
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	start := time.Now()
	for time.Since(start) < at {
		for p := range int32(w1Parts) {
			snap := h.shards.Snapshot("w", p)
			f := snap.Frontier
			for range rng.IntN(3) {
				o := f + 1
				if rng.IntN(3) == 0 {
					o = f + 2 + int64(rng.IntN(6)) // out of order
				} else {
					f++
				}
				if h.shards.Ack("w", p, o) {
					h.c.MarkDirty("w", p)
					acks = append(acks, ack{p, o, time.Now()})
				}
			}
			w1Redelivery(h, rng, p, snap)
		}
		time.Sleep(10 * time.Millisecond)
	}
	synctest.Wait()
	fsys.CrashAfter(0) // frozen as it is now
	frozeAt := time.Now()
	cancel()
	for _, done := range bg {
		<-done
	}
	var floors [w1Parts]offsets.Floor
	var anchors [w1Parts]*offsets.Record
	for p := range int32(w1Parts) {
		floors[p] = offsets.Floors(c, "w", p)
		require.True(t, floors[p].Primed)
		anchors[p] = anchorRecord(t, fsys, "w", p, floors[p])
	}
	spares := c.Stats().WrittenToSpareSlots
	_ = c.Close() // on the frozen file system

	for _, kind := range crashKinds(seed, true) {
		var after *crashfs.FS
		if kind.process {
			after = fsys.ProcessCrash()
		} else {
			after = fsys.PowerCut(kind.cut)
		}
		where := fmt.Sprintf("frozen at %v, %s", at, kind.name)
		observed := checkRecovery(t, h, after, floors, anchors, kind.process, where)
		if kind.process {
			for _, a := range acks {
				if a.at.Before(start.Add(time.Second)) || frozeAt.Sub(a.at) <= c.TickPeriod() {
					continue // a prime's syncs (partitions with state) or the last tick's acks
				}
				st := observed[a.p]
				require.True(t, a.off <= st.Frontier || offsets.RunsContain(st.Ahead, a.off),
					"partition %d: ack %d, %v old, lost to a process crash: %s", a.p, a.off, frozeAt.Sub(a.at), where)
			}
			restartThenProcessCrash(t, h.shards, fsys.ProcessCrash(), observed, where)
		}
		if kind.process || kind.cut.KeepUnsynced == 1 {
			restartThenPowerLoss(t, h.shards, after, observed, where)
		}
	}
	require.NotZero(t, spares, "ticks met syncs in flight")
}

// restartThenProcessCrash: a restart observes a state (its newest record perhaps in the spare
// slot), primes, acks one more offset per partition and writes its window; a process crash
// then keeps that ack: the window's record outranks every slot the restart found.
func restartThenProcessCrash(t *testing.T, before *offsets.Shards, fsys *crashfs.FS, observed [w1Parts]offsets.State, where string) {
	h := restartAndAckOne(t, before, fsys, observed)
	crashed := fsys.ProcessCrash()
	h.closeCommitter()
	for p := range int32(w1Parts) {
		st := recoverOn(t, crashed, "w", p)
		require.GreaterOrEqual(t, st.Frontier, observed[p].Frontier+1,
			"partition %d: the restart's window lost to a process crash, %s", p, where)
	}
}
