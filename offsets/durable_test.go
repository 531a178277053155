package offsets_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// durableCall is a Durable call running in its own goroutine (the caller's, in a host).
type durableCall struct {
	done chan struct{}
	err  error
}

func startDurable(ctx context.Context, c *offsets.Committer, topic string, p int32) *durableCall {
	d := &durableCall{done: make(chan struct{})}
	go func() {
		defer close(d.done)
		d.err = c.Durable(ctx, topic, p)
	}()
	return d
}

func (d *durableCall) returned() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// wait waits for the call to return (the tick that answers it has returned already).
func (d *durableCall) wait(t tb) error {
	t.Helper()
	select {
	case <-d.done:
		return d.err
	case <-time.After(10 * time.Second):
		require.Fail(t, "Durable did not return")
		return nil
	}
}

// waitWaiters waits until n Durable calls wait on the partition.
func waitWaiters(t tb, c *offsets.Committer, topic string, p, n int32) {
	t.Helper()
	require.Eventually(t, func() bool { return offsets.Waiters(c, topic, p) == int(n) }, 10*time.Second,
		time.Millisecond, "%d waiters", n)
}

// durableHarness is a partition created, primed and written out, so later ticks are steady.
func durableHarness(t *testing.T, edit func(*offsets.Config)) *memHarness {
	h := newMemHarness(t, crashfs.New(), edit)
	t.Cleanup(h.closeCommitter)
	h.mkdir("t", 0)
	h.create("t", 0)
	h.ack("t", 0, 0, 1)
	h.ticks(11)
	return h
}

// tickUntilTurnIsFar ticks until the partition's own writeout turn is not the next tick's, so a
// writeout on the next tick can only be Durable's doing.
func tickUntilTurnIsFar(t *testing.T, h *memHarness, topic string, p int32) {
	for range 20 {
		turn, next := offsets.Turn(h.c, topic, p)
		if turn != next && turn != next+1 {
			return
		}
		require.NoError(t, h.tick())
	}
	t.Fatal("no tick off the partition's turn")
}

// Issue 5, durable ack: Durable returns once the next tick has written a window taken after
// the call and written it out (the sync, then the flip), not before the sync, and whatever the
// partition's writeout turn: about one tick, not up to D.
func TestDurableReturnsAfterTheNextTicksWriteout(t *testing.T) {
	h := durableHarness(t, nil) // D = 1 s: ten ticks per interval
	tickUntilTurnIsFar(t, h, "t", 0)
	h.ack("t", 0, 2, 3)
	h.quarantine("t", 0, 4)
	want := h.shards.Snapshot("t", 0)
	d := startDurable(context.Background(), h.c, "t", 0)
	waitWaiters(t, h.c, "t", 0, 1)

	var returnedAtSync atomic.Bool
	syncs := 0
	h.fs.Inject(func(op crashfs.Op) error {
		if op.Kind == crashfs.OpSyncData && op.Path == aheadPath("t", 0) {
			syncs++
			returnedAtSync.Store(d.returned())
		}
		return nil
	})
	require.NoError(t, h.tick())
	require.NoError(t, d.wait(t))
	require.Equal(t, 1, syncs, "one writeout")
	require.False(t, returnedAtSync.Load(), "not returned before the sync")
	require.Equal(t, want.Frontier, offsets.Floors(h.c, "t", 0).Durable, "the flip happened")
	require.Equal(t, uint64(1), h.c.Stats().EarlyWriteouts, "before the partition's turn")
	require.Equal(t, uint64(1), h.c.Stats().Durables)
	require.Zero(t, offsets.Waiters(h.c, "t", 0))

	// The state the call covered survives a power cut right after it returned.
	cut := h.fs.PowerCut(crashfs.PowerCut{})
	requireSameState(t, want, recoverOn(t, cut, "t", 0), "durable before the power cut")
}

// A Durable call with nothing changed still waits for a window taken after it and its
// writeout, and gets them on the next tick.
func TestDurableWithoutChanges(t *testing.T) {
	h := durableHarness(t, nil)
	before := h.c.Stats()
	d := startDurable(context.Background(), h.c, "t", 0)
	waitWaiters(t, h.c, "t", 0, 1)
	require.False(t, d.returned())
	require.NoError(t, h.tick())
	require.NoError(t, d.wait(t))
	s := h.c.Stats()
	require.Equal(t, before.Windows+1, s.Windows)
	require.Equal(t, before.Writeouts+1, s.Writeouts)
}

// A call that lands while the tick holds the snapshot it is about to write is not covered by
// that window: the next tick's window and writeout answer it.
func TestDurableDuringTheSnapshot(t *testing.T) {
	fsys := crashfs.New()
	require.NoError(t, fsys.MkdirAll(dirOf("t", 0)))
	src := &durableDuringState{Shards: offsets.NewShards()}
	c, err := offsets.New(offsets.Config{FS: fsys, Dir: dirOf, Source: src})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	src.c = c
	src.Seed("t", 0, offsets.State{Frontier: -1})
	now := time.Unix(0, 0)
	tick := func() error {
		now = now.Add(c.TickPeriod())
		return c.Tick(now)
	}
	c.MarkDirty("t", 0)
	require.NoError(t, tick()) // prime, first window
	src.Ack("t", 0, 0)
	c.MarkDirty("t", 0)
	src.arm = true
	require.NoError(t, tick())
	require.NotNil(t, src.call)
	require.Equal(t, 1, offsets.Waiters(c, "t", 0))
	require.False(t, src.call.returned(), "registered after the tick's snapshot: not covered by it")
	require.NoError(t, tick())
	require.NoError(t, src.call.wait(t))
}

// durableDuringState starts a Durable call from inside the Source, once armed: a call that
// lands while the tick holds the snapshot it is about to write.
type durableDuringState struct {
	*offsets.Shards
	c    *offsets.Committer
	arm  bool
	call *durableCall
}

func (s *durableDuringState) State(topic string, p int32, into *offsets.State) bool {
	ok := s.Shards.State(topic, p, into)
	if s.arm {
		s.arm = false
		s.call = startDurable(context.Background(), s.c, topic, p)
		for offsets.Waiters(s.c, topic, p) == 0 {
			runtime.Gosched() // until the call has registered: it blocks on nothing else
		}
	}
	return ok
}

// Gap G4 with a waiter: a failed sync (which dropped the window's pages) keeps the call
// waiting; the next tick rewrites the window in full and syncs it, and only then does the
// call return, with the state durable.
func TestDurableKeepsWaitingThroughAFailedSync(t *testing.T) {
	h := durableHarness(t, nil)
	h.fs.SetSyncFailureMode(crashfs.SyncDropDirty)
	h.ack("t", 0, 2, 3)
	h.deliver("t", 0, 5)
	want := h.shards.Snapshot("t", 0)
	d := startDurable(context.Background(), h.c, "t", 0)
	waitWaiters(t, h.c, "t", 0, 1)

	fail := true
	h.record(failOn(crashfs.OpSyncData, aheadPath("t", 0), crashfs.ErrInjected, &fail))
	require.ErrorIs(t, h.tick(), crashfs.ErrInjected)
	require.False(t, d.returned(), "a failed sync answers nothing")
	require.Equal(t, 1, offsets.Waiters(h.c, "t", 0))

	require.ErrorIs(t, h.tick(), crashfs.ErrInjected, "still failing")
	require.False(t, d.returned())

	fail = false
	h.record(nil)
	require.NoError(t, h.tick())
	require.NoError(t, d.wait(t))
	writes, syncs := h.opsOn(crashfs.OpWrite, aheadPath("t", 0)), h.opsOn(crashfs.OpSyncData, aheadPath("t", 0))
	require.Len(t, writes, 1, "the window rewritten in full")
	require.Len(t, syncs, 1)
	require.Less(t, writes[0].Index, syncs[0].Index, "rewrite, then sync")

	cut := h.fs.PowerCut(crashfs.PowerCut{})
	requireSameState(t, want, recoverOn(t, cut, "t", 0), "durable once Durable returned")
}

// A cancelled context withdraws the wait: Durable returns ctx.Err(), leaves no waiter behind,
// and a later tick answers nothing twice.
func TestDurableContextCancel(t *testing.T) {
	h := durableHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	d := startDurable(ctx, h.c, "t", 0)
	waitWaiters(t, h.c, "t", 0, 1)
	cancel()
	require.ErrorIs(t, d.wait(t), context.Canceled)
	require.Zero(t, offsets.Waiters(h.c, "t", 0))
	h.ticks(2)

	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, h.c.Durable(ctx, "t", 0), context.DeadlineExceeded)
	require.Zero(t, offsets.Waiters(h.c, "t", 0))

	// Already done: no registration at all.
	require.ErrorIs(t, h.c.Durable(ctx, "t", 0), context.DeadlineExceeded)
	require.Zero(t, offsets.Waiters(h.c, "t", 0))

	// Many cancelled beside many answered: each gets its own answer.
	ctx2, cancel2 := context.WithCancel(context.Background())
	var calls []*durableCall
	for i := range 40 {
		c := context.Background()
		if i%2 == 0 {
			c = ctx2
		}
		calls = append(calls, startDurable(c, h.c, "t", 0))
	}
	waitWaiters(t, h.c, "t", 0, 40)
	cancel2()
	for i := 0; i < 40; i += 2 {
		require.ErrorIs(t, calls[i].wait(t), context.Canceled)
	}
	waitWaiters(t, h.c, "t", 0, 20)
	require.NoError(t, h.tick())
	for i := 1; i < 40; i += 2 {
		require.NoError(t, calls[i].wait(t))
	}
	require.Zero(t, offsets.Waiters(h.c, "t", 0))
}

// Forget fails the partition's waits (its shard is gone), and so does a tick that finds the
// shard gone before a Forget; a partition with no shard at all fails at the next tick.
func TestDurableShardGone(t *testing.T) {
	requireGone := func(t *testing.T, err error, p int32) {
		t.Helper()
		require.ErrorIs(t, err, offsets.ErrShardGone)
		var pe *offsets.PartitionError
		require.True(t, errors.As(err, &pe))
		require.Equal(t, "durable", pe.Op)
		require.Equal(t, p, pe.Partition)
	}
	t.Run("Forget", func(t *testing.T) {
		h := durableHarness(t, nil)
		h.ack("t", 0, 2)
		d := startDurable(context.Background(), h.c, "t", 0)
		waitWaiters(t, h.c, "t", 0, 1)
		h.c.Forget("t", 0)
		requireGone(t, d.wait(t), 0)
		require.Zero(t, offsets.Waiters(h.c, "t", 0))
	})
	t.Run("shard dropped, not yet forgotten", func(t *testing.T) {
		h := durableHarness(t, nil)
		d := startDurable(context.Background(), h.c, "t", 0)
		waitWaiters(t, h.c, "t", 0, 1)
		h.shards.Drop("t", 0)
		require.NoError(t, h.tick())
		requireGone(t, d.wait(t), 0)
	})
	t.Run("no shard at all", func(t *testing.T) {
		h := durableHarness(t, nil)
		h.mkdir("t", 5)
		d := startDurable(context.Background(), h.c, "t", 5)
		waitWaiters(t, h.c, "t", 5, 1)
		require.NoError(t, h.tick())
		requireGone(t, d.wait(t), 5)
		require.False(t, offsets.Known(h.c, "t", 5), "nothing left behind")
	})
}

// A stranded partition (its directory removed or replaced) fails its waits with ErrStranded,
// and a later call at once, until its Forget.
func TestDurableStranded(t *testing.T) {
	h := durableHarness(t, nil)
	h.shards.Seed("t", 1, offsets.State{Frontier: -1}) // its directory was never created
	h.ack("t", 1, 0)
	d := startDurable(context.Background(), h.c, "t", 1)
	waitWaiters(t, h.c, "t", 1, 1)
	require.NoError(t, h.tick(), "a strand is not a tick error")
	err := d.wait(t)
	require.ErrorIs(t, err, offsets.ErrStranded)
	var pe *offsets.PartitionError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, "durable", pe.Op)
	require.True(t, offsets.Stranded(h.c, "t", 1))
	require.ErrorIs(t, h.c.Durable(context.Background(), "t", 1), offsets.ErrStranded, "at once")

	// Forget clears the strand; with the directory there the next call succeeds.
	h.c.Forget("t", 1)
	h.mkdir("t", 1)
	d = startDurable(context.Background(), h.c, "t", 1)
	waitWaiters(t, h.c, "t", 1, 1)
	require.NoError(t, h.tick())
	require.NoError(t, d.wait(t))
}

// Close answers the waits it makes durable with nil, the others with ErrClosed; after Close,
// Durable answers ErrClosed at once.
func TestDurableClose(t *testing.T) {
	t.Run("Close's writeout answers", func(t *testing.T) {
		h := durableHarness(t, nil)
		h.ack("t", 0, 2, 3)
		want := h.shards.Snapshot("t", 0)
		d := startDurable(context.Background(), h.c, "t", 0)
		waitWaiters(t, h.c, "t", 0, 1)
		require.NoError(t, h.c.Close())
		require.NoError(t, d.wait(t))
		requireSameState(t, want, recoverOn(t, h.fs.PowerCut(crashfs.PowerCut{}), "t", 0), "after Close")
	})
	t.Run("Close's writeout fails", func(t *testing.T) {
		h := durableHarness(t, nil)
		h.ack("t", 0, 2)
		d := startDurable(context.Background(), h.c, "t", 0)
		waitWaiters(t, h.c, "t", 0, 1)
		fail := true
		h.record(failOn(crashfs.OpSyncData, aheadPath("t", 0), crashfs.ErrInjected, &fail))
		require.Error(t, h.c.Close())
		err := d.wait(t)
		require.ErrorIs(t, err, offsets.ErrClosed)
		require.ErrorIs(t, err, crashfs.ErrInjected, "with Close's error")
	})
	t.Run("after Close", func(t *testing.T) {
		h := durableHarness(t, nil)
		require.NoError(t, h.c.Close())
		require.ErrorIs(t, h.c.Durable(context.Background(), "t", 0), offsets.ErrClosed)
		require.Zero(t, offsets.Waiters(h.c, "t", 0))
	})
}

// Group commit: many concurrent waiters of one partition share one writeout (one SyncData),
// and waiters of several partitions need one writeout each, all in the same tick.
func TestDurableGroupCommit(t *testing.T) {
	const n = 64
	h := durableHarness(t, nil)
	h.mkdir("t", 1)
	h.create("t", 1)
	h.ticks(1)
	var syncs [2]atomic.Int32
	h.fs.Inject(func(op crashfs.Op) error {
		for p := range int32(2) {
			if op.Kind == crashfs.OpSyncData && op.Path == aheadPath("t", p) {
				syncs[p].Add(1)
			}
		}
		return nil
	})
	var calls []*durableCall
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := int32(i % 2)
			h.shards.Ack("t", p, int64(2+i)) // acks from many goroutines, then their waits
			h.c.MarkDirty("t", p)
		}()
	}
	wg.Wait()
	for i := range n {
		calls = append(calls, startDurable(context.Background(), h.c, "t", int32(i%2)))
	}
	waitWaiters(t, h.c, "t", 0, n/2)
	waitWaiters(t, h.c, "t", 1, n/2)
	require.NoError(t, h.tick())
	for _, d := range calls {
		require.NoError(t, d.wait(t))
	}
	require.Equal(t, int32(1), syncs[0].Load(), "one writeout for all the partition's waiters")
	require.Equal(t, int32(1), syncs[1].Load())
	require.Equal(t, uint64(n), h.c.Stats().Durables)
}

// Durable beside Run, acks and Forget from many goroutines (run it with -race): every call
// returns, and a power cut after the calls returned keeps every ack they covered.
func TestDurableConcurrent(t *testing.T) {
	fsys := crashfs.New()
	require.NoError(t, fsys.MkdirAll(dirOf("c", 0)))
	require.NoError(t, fsys.MkdirAll(dirOf("c", 1)))
	shards := offsets.NewShards()
	c, err := offsets.New(offsets.Config{FS: fsys, Dir: dirOf, Source: shards, Interval: 10 * time.Millisecond})
	require.NoError(t, err)
	for p := range int32(2) {
		st, err := c.Load("c", p)
		require.NoError(t, err)
		shards.Seed("c", p, st)
		c.MarkDirty("c", p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Add(1)
	go func() {
		defer run.Done()
		_ = c.Run(ctx, nil)
	}()

	const workers, rounds = 8, 15
	var mu sync.Mutex
	next := [2]int64{}
	var covered [2][]int64 // offsets acked before a Durable that returned nil
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := int32(w % 2)
			for range rounds {
				mu.Lock()
				off := next[p]
				next[p]++
				mu.Unlock()
				shards.Ack("c", p, off)
				c.MarkDirty("c", p)
				if err := c.Durable(context.Background(), "c", p); err != nil {
					t.Errorf("Durable: %v", err)
					return
				}
				mu.Lock()
				covered[p] = append(covered[p], off)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	cut := fsys.PowerCut(crashfs.PowerCut{})
	cancel()
	run.Wait()
	_ = c.Close()
	for p := range int32(2) {
		st := recoverOn(t, cut, "c", p)
		require.Len(t, covered[p], workers/2*rounds)
		for _, o := range covered[p] {
			require.True(t, o <= st.Frontier || offsets.RunsContain(st.Ahead, o), "offset %d of partition %d lost", o, p)
		}
	}
	require.Equal(t, uint64(workers*rounds), c.Stats().Durables)
}
