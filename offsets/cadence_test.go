package offsets_test

import (
	"context"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// wrapFS is an offsets.FS over crashfs that counts the descriptors open (roots and files) and can
// make syncs slow: SyncData and directory syncs sleep first (on synctest's clock in a bubble).
// It counts the SyncData calls too, and the most in progress at once.
type wrapFS struct {
	*crashfs.FS
	syncDelay, dirDelay time.Duration
	open, maxOpen       atomic.Int64
	syncing, maxSyncing atomic.Int64 // SyncData calls in progress, and the most at once
	syncs               atomic.Int64 // SyncData calls made
}

// raise sets m to n if n is larger.
func raise(m *atomic.Int64, n int64) {
	for {
		if old := m.Load(); n <= old || m.CompareAndSwap(old, n) {
			return
		}
	}
}

func (w *wrapFS) opened() { raise(&w.maxOpen, w.open.Add(1)) }

func (w *wrapFS) OpenRoot(dir string) (offsets.Root, error) {
	r, err := w.FS.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	w.opened()
	return &wrapRoot{Root: r, w: w}, nil
}

type wrapRoot struct {
	offsets.Root
	w *wrapFS
}

func (r *wrapRoot) OpenFile(name string, flag int, perm fs.FileMode) (offsets.File, error) {
	f, err := r.Root.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	r.w.opened()
	return &wrapFile{File: f, w: r.w}, nil
}

func (r *wrapRoot) Sync() error {
	time.Sleep(r.w.dirDelay)
	return r.Root.Sync()
}

func (r *wrapRoot) Close() error {
	r.w.open.Add(-1)
	return r.Root.Close()
}

type wrapFile struct {
	offsets.File
	w *wrapFS
}

func (f *wrapFile) SyncData() error {
	f.w.syncs.Add(1)
	raise(&f.w.maxSyncing, f.w.syncing.Add(1))
	defer f.w.syncing.Add(-1)
	time.Sleep(f.w.syncDelay)
	return f.File.SyncData()
}

func (f *wrapFile) Close() error {
	f.w.open.Add(-1)
	return f.File.Close()
}

// cadenceRig runs a committer under Run in a synctest bubble, with hot partitions acked every
// 10 ms by their own goroutine.
type cadenceRig struct {
	t      *testing.T
	fs     *crashfs.FS
	w      *wrapFS
	shards *offsets.Shards
	logs   *offsets.LogRecorder
	c      *offsets.Committer
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newCadenceRig(t *testing.T, w *wrapFS, edit func(*offsets.Config)) *cadenceRig {
	r := &cadenceRig{t: t, fs: w.FS, w: w, shards: offsets.NewShards(), logs: &offsets.LogRecorder{}}
	cfg := offsets.Config{FS: w, Dir: dirOf, Source: r.shards, Logger: slog.New(r.logs)}
	if edit != nil {
		edit(&cfg)
	}
	c, err := offsets.New(cfg)
	require.NoError(t, err)
	r.c = c
	return r
}

func (r *cadenceRig) create(topic string, p int32) {
	require.NoError(r.t, r.fs.MkdirAll(dirOf(topic, p)))
	st, err := r.c.Load(topic, p)
	require.NoError(r.t, err)
	r.shards.Seed(topic, p, st)
	r.c.MarkDirty(topic, p)
}

func (r *cadenceRig) start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.wg.Go(func() { _ = r.c.Run(ctx, nil) })
}

// ackEvery acks the next offset of each hot partition every 10 ms until ctx ends.
func (r *cadenceRig) ackEvery(ctx context.Context, topic string, parts int32) {
	r.wg.Go(func() {
		for next := int64(0); ctx.Err() == nil; next++ {
			for p := range parts {
				if r.shards.Ack(topic, p, next) {
					r.c.MarkDirty(topic, p)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// lag is how many acks of the partition a process crash now would forget: the live frontier
// less the one recovery finds in the page cache.
func (r *cadenceRig) lag(topic string, p int32) int64 {
	return r.shards.Snapshot(topic, p).Frontier - recoverOn(r.t, r.fs, topic, p).Frontier
}

func (r *cadenceRig) stop() {
	r.cancel()
	r.wg.Wait()
	require.NoError(r.t, r.c.Close())
}

// Issue 9 item 4: with every sync taking 5·T, a process crash at any moment forgets at most
// about one tick of acks (the tick's window write trails acks by up to T, plus the ack racing
// the write): page-cache writes keep their cadence, a window whose sync is in flight being
// written into the spare slot; syncs still land and their overrun is counted and logged.
func TestSlowSyncKeepsProcessCrashWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hot = 4
		w := &wrapFS{FS: crashfs.New(), syncDelay: 500 * time.Millisecond}
		r := newCadenceRig(t, w, nil)
		for p := range int32(hot) {
			r.create("s", p)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r.start(ctx)
		r.ackEvery(ctx, "s", hot)

		time.Sleep(time.Second)
		maxLag := int64(0)
		for range 200 { // 10 s, sampled every 50 ms
			time.Sleep(50 * time.Millisecond)
			synctest.Wait()
			for p := range int32(hot) {
				maxLag = max(maxLag, r.lag("s", p))
			}
		}
		synctest.Wait()
		crashed := r.fs.ProcessCrash()
		for p := range int32(hot) {
			live := r.shards.Snapshot("s", p).Frontier
			require.LessOrEqual(t, live-recoverOn(t, crashed, "s", p).Frontier, int64(20),
				"a process crash forgets at most about one tick of acks")
		}
		cancel()
		r.cancel()
		r.wg.Wait()
		_ = r.c.Close() // the frozen file system fails it

		// About one tick of acks 10 ms apart (T = 100 ms), whatever sync is in flight: before
		// the spare slot, a window held back so that a sync could flip trailed acks by up to
		// that sync (500 ms) and a tick.
		require.LessOrEqual(t, maxLag, int64(20), "page-cache lag, in acks 10 ms apart (T = 100 ms)")
		s := r.c.Stats()
		require.NotZero(t, s.Writeouts, "syncs slower than T still flip")
		require.NotZero(t, s.SlowWriteouts)
		require.NotZero(t, s.WrittenToSpareSlots, "windows written while their sync ran")
		require.NotEmpty(t, r.logs.Lines("consumer offset commits cannot keep to their interval: "+
			"persisted offsets lag acks by about the flush time"))
	})
}

// Issue 9 item 5, and issue 25 item 2: 2,000 new partitions whose syncs are slow do not hold
// back the windows of partitions already primed, and no more descriptors than the cap are
// ever open meanwhile. Partitions whose directories were blank get their first windows
// within a tick, their syncs owed to their first writeout; 2,000 whose directories hold
// state wait for their primes' syncs, which is counted and logged.
func TestFreshPartitionsKeepPrimedCadence(t *testing.T) {
	for _, withState := range []bool{false, true} {
		t.Run(map[bool]string{false: "blank", true: "with state"}[withState], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testFreshCadence(t, withState) })
		})
	}
}

func testFreshCadence(t *testing.T, withState bool) {
	const hot, fresh = 2, 2000
	w := &wrapFS{FS: crashfs.New(), syncDelay: 20 * time.Millisecond, dirDelay: 20 * time.Millisecond}
	r := newCadenceRig(t, w, func(c *offsets.Config) { c.MaxDescriptors = 64 })
	for p := range int32(hot) {
		r.create("hot", p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.start(ctx)
	r.ackEvery(ctx, "hot", hot)
	time.Sleep(time.Second) // the hot partitions are primed
	synctest.Wait()
	require.Equal(t, uint64(hot), r.c.Stats().Primes)

	acked := func(p int32) int64 { return 0 } // the first offset of a new partition
	if withState {
		acked = func(p int32) int64 { return int64(p) + 1 } // past its frontier on disk
	}
	for p := range int32(fresh) {
		if withState {
			require.NoError(t, w.FS.MkdirAll(dirOf("new", p)))
			require.NoError(t, w.FS.WriteFile(offsetPath("new", p), be64(int64(p))))
		}
		r.create("new", p)
		r.shards.Ack("new", p, acked(p))
	}
	maxLag := int64(0)
	for i := 0; r.c.Stats().Primes < hot+fresh; i++ {
		require.Less(t, i, 1200, "primes done within a minute: %+v", r.c.Stats())
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		for p := range int32(hot) {
			maxLag = max(maxLag, r.lag("hot", p))
		}
	}
	time.Sleep(200 * time.Millisecond)
	synctest.Wait()
	for p := range int32(fresh) {
		require.Equal(t, acked(p), recoverOn(t, r.fs, "new", p).Frontier, "partition %d", p)
	}
	cancel()
	r.stop()

	require.LessOrEqual(t, maxLag, int64(20), "primed partitions' page-cache lag, in acks 10 ms apart")
	require.LessOrEqual(t, w.maxOpen.Load(), int64(64), "descriptors open at once")
	s := r.c.Stats()
	lines := r.logs.Lines("consumer offsets: priming new partitions holds back their first window: " +
		"a process crash would redeliver more than a tick of their acks")
	if !withState {
		require.Equal(t, uint64(fresh+hot), s.BlankPrimes)
		require.Zero(t, s.SlowPrimes, "a blank partition's first window waits for no sync")
		require.Empty(t, lines)
		return
	}
	require.Equal(t, uint64(hot), s.BlankPrimes)
	require.NotZero(t, s.SlowPrimes)
	require.NotEmpty(t, lines)
	require.Greater(t, lines[0]["waited"].Duration(), 100*time.Millisecond)
}

// Issue 9 item 6: every descriptor counts against the cap, one-shot ones (closed right after
// their write) and those of primes and levellings included, driven inline by Tick.
func TestDescriptorCapCountsEveryDescriptor(t *testing.T) {
	w := &wrapFS{FS: crashfs.New()}
	h := newMemHarness(t, w.FS, nil)
	cfg := offsets.Config{FS: w, Dir: dirOf, Source: h.shards, MaxDescriptors: 8, Interval: 300 * time.Millisecond}
	c, err := offsets.New(cfg)
	require.NoError(t, err)
	h.c = c
	offsets.SetLevelInterval(c, 300*time.Millisecond)
	const parts = 40
	for p := range int32(parts) {
		h.mkdir("d", p)
		h.create("d", p)
	}
	for i := range int64(30) {
		for p := range int32(parts) {
			h.ack("d", p, i)
		}
		h.ticks(1)
		require.LessOrEqual(t, w.open.Load(), int64(8), "between ticks")
	}
	require.NoError(t, c.Close())
	require.LessOrEqual(t, w.maxOpen.Load(), int64(8), "at any moment")
	require.Zero(t, w.open.Load(), "Close closes everything")
	s := c.Stats()
	require.NotZero(t, s.OneShotWrites)
	require.NotZero(t, s.Levels)
	cut := w.FS.PowerCut(crashfs.PowerCut{})
	for p := range int32(parts) {
		require.Equal(t, int64(29), recoverOn(t, cut, "d", p).Frontier)
	}
}

// Durable waits whose syncs take a few milliseconds are no overrun: a wait wakes Run at once,
// and the tick it runs finds the previous writeout still in flight a moment after it left,
// which is not a writeout outliving its interval. Before, each such tick counted a slow
// writeout and logged "consumer offset commits cannot keep to their interval" with
// flush_took of about a millisecond and partitions=-1.
func TestQuickDurableWaitsAreNoOverrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &wrapFS{FS: crashfs.New(), syncDelay: 2 * time.Millisecond}
		r := newCadenceRig(t, w, nil)
		r.create("s", 0)
		ctx, cancel := context.WithCancel(context.Background())
		r.start(ctx)
		for next := int64(0); next < 200; next++ {
			require.True(t, r.shards.Ack("s", 0, next))
			r.c.MarkDirty("s", 0)
			require.NoError(t, r.c.Durable(ctx, "s", 0))
		}
		cancel()
		r.stop()
		require.Zero(t, r.c.Stats().SlowWriteouts)
		require.Empty(t, r.logs.Lines("consumer offset commits cannot keep to their interval: "+
			"persisted offsets lag acks by about the flush time"))
	})
}

// A writeout batch of many partitions syncs them four at a time, not one after another: with
// every sync taking 20 ms, 64 new partitions acked at once (a prime's sync, a window's and a
// levelling's each) are all durable in about a quarter of their syncs' sum, and Close's final
// pass, after Run, writes out and levels as many at once too.
func TestWriteoutsSyncPartitionsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &wrapFS{FS: crashfs.New(), syncDelay: 20 * time.Millisecond}
		r := newCadenceRig(t, w, nil)
		const parts = 64
		for p := range int32(parts) {
			r.create("t", p)
		}
		r.start(context.Background())
		synctest.Wait()
		start := time.Now()
		var wg sync.WaitGroup
		for p := range int32(parts) {
			require.True(t, r.shards.Ack("t", p, 0))
			r.c.MarkDirty("t", p)
			wg.Go(func() { require.NoError(t, r.c.Durable(context.Background(), "t", p)) })
		}
		wg.Wait()
		took, sum := time.Since(start), time.Duration(w.syncs.Load())*w.syncDelay
		require.Equal(t, int64(4), w.maxSyncing.Load(), "four syncs at once")
		require.Less(t, took, sum/3, "durable in about a quarter of the syncs' sum %v: %v", sum, took)

		// Close after Run: the final pass has every partition to write out, at once.
		for p := range int32(parts) {
			require.True(t, r.shards.Ack("t", p, 1))
			r.c.MarkDirty("t", p)
		}
		w.maxSyncing.Store(0)
		r.stop()
		require.Equal(t, int64(4), w.maxSyncing.Load(), "Close syncs four at once")
		for p := range int32(parts) {
			require.Equal(t, int64(1), recoverOn(t, r.fs, "t", p).Frontier)
		}
	})
}

// A power cut while a batch's writeouts sync four partitions at once loses no ack a Durable
// answered for and gives back no frontier past what was acked, whichever of the concurrent
// syncs had finished: each partition's window is synced on its own, so a cut between them
// leaves each at its last synced window. The cut falls at moments across the batch (its syncs
// take 20 ms each, four at a time, 64 partitions: about 320 ms).
func TestPowerCutDuringParallelWriteouts(t *testing.T) {
	for _, cutAt := range []time.Duration{0, 5 * time.Millisecond, 25 * time.Millisecond, 110 * time.Millisecond, 250 * time.Millisecond, time.Second} {
		t.Run(cutAt.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &wrapFS{FS: crashfs.New(), syncDelay: 20 * time.Millisecond}
				r := newCadenceRig(t, w, nil)
				const parts, rounds = 64, 3
				for p := range int32(parts) {
					r.create("t", p)
				}
				ctx, cancel := context.WithCancel(context.Background())
				r.wg.Go(func() { _ = r.c.Run(ctx, nil) })
				synctest.Wait()
				durable := make([]int64, parts) // the frontier each partition's last Durable answered for
				for p := range durable {
					durable[p] = -1
				}
				for round := range int64(rounds) {
					var wg sync.WaitGroup
					for p := range int32(parts) {
						require.True(t, r.shards.Ack("t", p, round))
						r.c.MarkDirty("t", p)
						wg.Go(func() {
							if r.c.Durable(context.Background(), "t", p) == nil {
								durable[p] = round
							}
						})
					}
					wg.Wait()
				}
				// The last round's acks, then the cut while their writeouts run.
				for p := range int32(parts) {
					require.True(t, r.shards.Ack("t", p, rounds))
					r.c.MarkDirty("t", p)
				}
				time.Sleep(100*time.Millisecond + cutAt) // a tick, then into the batch
				syncing := w.syncing.Load()
				cut := w.FS.PowerCut(crashfs.PowerCut{})
				cancel()
				r.wg.Wait()
				_ = r.c.Close() // on the frozen file system: its errors are the cut's
				newest := 0
				for p := range int32(parts) {
					st := recoverOn(t, cut, "t", p)
					if st.Frontier == rounds {
						newest++
					}
					require.GreaterOrEqual(t, st.Frontier, durable[p], "partition %d lost an ack Durable answered for (%d syncs in flight at the cut)", p, syncing)
					require.LessOrEqual(t, st.Frontier, int64(rounds), "partition %d recovered past its acks", p)
				}
				require.Equal(t, int64(4), w.maxSyncing.Load(), "the writeouts ran four at once")
				t.Logf("cut at %v: %d syncs in flight, %d of %d partitions had their last window on disk, max at once %d", cutAt, syncing, newest, parts, w.maxSyncing.Load())
			})
		})
	}
}
