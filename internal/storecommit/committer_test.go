package storecommit

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/handoff"
	"narad.dev/consume/internal/realclock"
	"narad.dev/consume/offsets"
)

var errStore = errors.New("store unavailable")

// requireStoredAsSource checks that the store holds the source's state of each partition.
func requireStoredAsSource(t *testing.T, h *harness, topic string, ps ...int32) {
	t.Helper()
	for _, p := range ps {
		f, ok := h.store.stored(t, topic, p)
		require.True(t, ok, "%s/%d stored", topic, p)
		require.Equal(t, h.src.frontier(topic, p), f, "%s/%d stored as the source holds it", topic, p)
	}
}

// Marks within one interval make one Save; the first mark after idle is saved at once; marks
// without pause make one Save per interval, on the interval.
func TestCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Interval: time.Second})
		for p := range int32(3) {
			h.src.setFrontier("t", p, 0)
		}
		h.run(realclock.Clock{})
		start := time.Now()
		h.c.MarkDirty("t", 0)
		synctest.Wait()
		calls := h.store.saves()
		require.Len(t, calls, 1, "the first mark after idle is saved at once")
		require.Equal(t, start, calls[0].start)

		for i := range 9 {
			time.Sleep(100 * time.Millisecond)
			p := int32(i % 3)
			h.src.bump("t", p)
			h.c.MarkDirty("t", p)
		}
		time.Sleep(100*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		require.Len(t, h.store.saves(), 1, "marks within the interval wait for its end")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		calls = h.store.saves()
		require.Len(t, calls, 2, "one Save for the marks of one interval")
		require.Equal(t, start.Add(time.Second), calls[1].start)
		require.ElementsMatch(t, []int32{0, 1, 2}, calls[1].partitions())
		requireStoredAsSource(t, h, "t", 0, 1, 2)

		// Marks every 10 ms for 10 s (off the second, so that no mark ties with a save).
		time.Sleep(5 * time.Millisecond)
		for i := range 1000 {
			p := int32(i % 3)
			h.src.bump("t", p)
			h.c.MarkDirty("t", p)
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		calls = h.store.saves()
		require.Len(t, calls, 12, "one Save per interval")
		for i := 2; i < len(calls); i++ {
			require.Equal(t, time.Second, calls[i].start.Sub(calls[i-1].start), "Save %d", i)
			require.Len(t, calls[i].entries, 3, "Save %d: each partition once", i)
		}
		requireStoredAsSource(t, h, "t", 0, 1, 2)

		// Idle for a while, then a mark: saved at once.
		time.Sleep(5 * time.Second)
		now := time.Now()
		h.src.bump("t", 1)
		h.c.MarkDirty("t", 1)
		synctest.Wait()
		calls = h.store.saves()
		require.Len(t, calls, 13)
		require.Equal(t, now, calls[12].start, "the first mark after idle is saved at once")
		require.Equal(t, []int32{1}, calls[12].partitions())
		st := h.c.Stats()
		require.EqualValues(t, 13, st.Writeouts)
		require.Zero(t, st.EarlyWriteouts)
		require.Zero(t, st.Overruns)
	})
}

// While nothing is marked, nothing is saved and no timer is armed: not before the first
// mark, not after a save that left nothing marked (an early one for a Durable wait
// included), not after a Forget of the only partition marked. Over an idle minute, no timer
// fires.
func TestIdleArmsNoTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &countingClock{}
		h := newHarness(t, Config{Interval: time.Second})
		h.src.setFrontier("t", 0, 0)
		h.src.setFrontier("t", 1, 0)
		h.run(clk)
		synctest.Wait()
		require.Zero(t, clk.live.Load(), "a timer armed before the first mark")

		h.c.MarkDirty("t", 0)
		synctest.Wait()
		require.Len(t, h.store.saves(), 1)
		require.Zero(t, clk.live.Load(), "a timer armed with nothing marked, after a save")

		time.Sleep(100 * time.Millisecond)
		h.c.MarkDirty("t", 1)
		synctest.Wait()
		require.EqualValues(t, 1, clk.live.Load(), "a mark within the interval arms one timer")
		time.Sleep(100 * time.Millisecond)
		w := goDurable(h.c, "t", 1)
		synctest.Wait()
		done, err := w.answered()
		require.True(t, done)
		require.NoError(t, err)
		require.Len(t, h.store.saves(), 2)
		require.Zero(t, clk.live.Load(), "a timer armed with nothing marked, after an early save")

		time.Sleep(100 * time.Millisecond)
		h.c.MarkDirty("t", 0)
		synctest.Wait()
		require.EqualValues(t, 1, clk.live.Load())
		h.c.Forget("t", 0)
		synctest.Wait()
		require.Zero(t, clk.live.Load(), "a timer armed with nothing marked, after a Forget")

		fired := clk.fired.Load()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, fired, clk.fired.Load(), "a timer fired over an idle minute")
		require.Len(t, h.store.saves(), 2, "a Save with nothing marked")
		require.Zero(t, h.c.Stats().SyncFailures)
	})
}

// 2,500 marked partitions with MaxBatch 1,000 are saved in three Saves of 1,000, 1,000 and
// 500, in the order they were marked, one after the other.
func TestBatching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Interval: time.Second, MaxBatch: 1000})
		h.store.delay = 10 * time.Millisecond // a Save takes time, so overlapping ones would show
		for p := range int32(2500) {
			h.src.setFrontier("t", p, int64(p))
			h.c.MarkDirty("t", p)
		}
		h.run(realclock.Clock{})
		time.Sleep(time.Second)
		synctest.Wait()
		calls := h.store.saves()
		require.Equal(t, 3, len(calls))
		var all []int32
		for i, c := range calls {
			require.Len(t, c.entries, []int{1000, 1000, 500}[i], "Save %d", i)
			require.True(t, c.done)
			require.NoError(t, c.err)
			if i > 0 {
				require.Equal(t, calls[i-1].end, c.start, "Save %d starts when the one before returns", i)
			}
			all = append(all, c.partitions()...)
		}
		want := make([]int32, 2500)
		for i := range want {
			want[i] = int32(i)
		}
		require.Equal(t, want, all, "each partition once, in the order marked")
		require.Zero(t, h.store.overlaps.Load(), "Saves overlapped")
		for _, p := range []int32{0, 999, 1000, 2499} {
			requireStoredAsSource(t, h, "t", p)
		}
		st := h.c.Stats()
		require.EqualValues(t, 3, st.Writeouts)
		require.EqualValues(t, 2500, st.Windows)
	})
}

func TestDurable(t *testing.T) {
	// A wait registered while a Save is in flight, after a change its snapshot does not
	// hold, is answered by the next Save, whose snapshot holds the change.
	t.Run("AnsweredByALaterSnapshot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			h.src.setFrontier("t", 0, 1)
			gate := h.store.setGate()
			h.run(realclock.Clock{})
			h.c.MarkDirty("t", 0)
			synctest.Wait()
			require.Len(t, h.store.saves(), 1, "the Save of frontier 1 is in flight")

			h.src.setFrontier("t", 0, 2)
			w := goDurable(h.c, "t", 0)
			synctest.Wait()
			gate <- struct{}{} // the first Save returns
			synctest.Wait()
			done, _ := w.answered()
			require.False(t, done, "answered by a Save whose snapshot was taken before the wait")
			calls := h.store.saves()
			require.Len(t, calls, 2, "the wait makes its partition due at once")
			require.True(t, calls[0].done)
			require.EqualValues(t, 1, decodeFrontier(t, calls[0].entries[0].State))
			require.EqualValues(t, 2, decodeFrontier(t, calls[1].entries[0].State))

			gate <- struct{}{}
			synctest.Wait()
			done, err := w.answered()
			require.True(t, done)
			require.NoError(t, err)
			requireStoredAsSource(t, h, "t", 0)
			require.EqualValues(t, 1, h.c.Stats().Durables)
			require.EqualValues(t, 1, h.c.Stats().EarlyWriteouts)
		})
	})

	// A lone Durable within the interval does not wait for it: its Save starts at once.
	t.Run("DoesNotWaitForTheInterval", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			h.src.setFrontier("t", 0, 1)
			h.run(realclock.Clock{})
			h.c.MarkDirty("t", 0)
			synctest.Wait()
			time.Sleep(100 * time.Millisecond)
			h.src.setFrontier("t", 0, 2)
			start := time.Now()
			require.NoError(t, h.c.Durable(context.Background(), "t", 0))
			require.Equal(t, start, time.Now(), "the wait took time")
			requireStoredAsSource(t, h, "t", 0)
			st := h.c.Stats()
			require.EqualValues(t, 2, st.Writeouts)
			require.EqualValues(t, 1, st.EarlyWriteouts)
			require.EqualValues(t, 1, st.Durables)
		})
	})

	// A wait whose ctx ends answers ctx.Err() and is withdrawn: neither kept by the partition
	// nor counted when a later Save succeeds, whether it ended while waiting for a retry or
	// while a Save holding it was in flight.
	t.Run("ContextEnds", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			h.src.setFrontier("t", 0, 1)
			h.store.setFail(errStore)
			h.run(realclock.Clock{})
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := h.c.Durable(ctx, "t", 0)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Equal(t, start.Add(500*time.Millisecond), time.Now())
			require.Zero(t, h.waiters("t", 0), "the wait was not withdrawn")

			time.Sleep(600 * time.Millisecond) // past the retry, one interval after the first Save
			synctest.Wait()
			require.Len(t, h.store.saves(), 2)
			gate := h.store.setGate()
			w := goDurable(h.c, "t", 0)
			synctest.Wait()
			require.Len(t, h.store.saves(), 3, "the Save holding the wait is in flight")
			w.cancel()
			synctest.Wait()
			done, err := w.answered()
			require.True(t, done)
			require.ErrorIs(t, err, context.Canceled)
			gate <- struct{}{} // the Save fails
			synctest.Wait()
			require.Zero(t, h.waiters("t", 0), "a failed Save gave back a withdrawn wait")

			h.store.openGate()
			h.store.setFail(nil)
			time.Sleep(1500 * time.Millisecond) // past the retry
			synctest.Wait()
			require.Len(t, h.store.saves(), 4)
			requireStoredAsSource(t, h, "t", 0)
			require.Zero(t, h.c.Stats().Durables, "a withdrawn wait counted as answered")
		})
	})

	// Forget answers the partition's waits with ErrShardGone.
	t.Run("Forget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			h.src.setFrontier("t", 3, 1)
			h.store.setFail(errStore)
			h.run(realclock.Clock{})
			w := goDurable(h.c, "t", 3)
			synctest.Wait()
			done, _ := w.answered()
			require.False(t, done)
			h.c.Forget("t", 3)
			synctest.Wait()
			done, err := w.answered()
			require.True(t, done)
			require.ErrorIs(t, err, offsets.ErrShardGone)
			var pe *offsets.PartitionError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "t", pe.Topic)
			require.EqualValues(t, 3, pe.Partition)
		})
	})

	// A partition whose shard is gone (the Source says so) answers ErrShardGone.
	t.Run("ShardGone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			h.run(realclock.Clock{})
			err := h.c.Durable(context.Background(), "t", 5)
			require.ErrorIs(t, err, offsets.ErrShardGone)
			require.Empty(t, h.store.saves(), "a partition without a state saved")
		})
	})

	t.Run("AfterClose", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			h.src.setFrontier("t", 0, 1)
			require.NoError(t, h.c.Close())
			require.ErrorIs(t, h.c.Durable(context.Background(), "t", 0), offsets.ErrClosed)
		})
	})
}

// waiters returns how many waits the committer keeps for the partition, for the next snapshot.
func (h *harness) waiters(topic string, p int32) int {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if pt := h.c.parts[key{topic, p}]; pt != nil {
		return len(pt.waiters)
	}
	return 0
}

func (h *harness) marked(topic string, p int32) bool {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	pt := h.c.parts[key{topic, p}]
	return pt != nil && pt.marked
}

func TestFailures(t *testing.T) {
	// A Save that fails keeps its partitions marked and their waits waiting; it is retried
	// one interval later, and counted.
	t.Run("SaveError", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			h.src.setFrontier("t", 0, 1)
			h.src.setFrontier("t", 1, 1)
			h.store.setFail(errStore)
			h.c.MarkDirty("t", 1)
			w := goDurable(h.c, "t", 0)
			synctest.Wait()
			start := time.Now()
			h.run(realclock.Clock{})
			synctest.Wait()
			calls := h.store.saves()
			require.Len(t, calls, 1)
			require.ErrorIs(t, calls[0].err, errStore)
			require.EqualValues(t, 1, h.c.Stats().SyncFailures)
			done, _ := w.answered()
			require.False(t, done, "a failed Save answered a wait")
			require.True(t, h.marked("t", 0))
			require.True(t, h.marked("t", 1))
			require.Equal(t, 1, h.waiters("t", 0))

			time.Sleep(time.Second - time.Nanosecond)
			synctest.Wait()
			require.Len(t, h.store.saves(), 1, "retried before the interval passed")
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			calls = h.store.saves()
			require.Len(t, calls, 2)
			require.Equal(t, start.Add(time.Second), calls[1].start)
			require.ElementsMatch(t, []int32{0, 1}, calls[1].partitions())
			require.EqualValues(t, 2, h.c.Stats().SyncFailures)
			done, _ = w.answered()
			require.False(t, done)

			h.store.setFail(nil)
			time.Sleep(time.Second)
			synctest.Wait()
			calls = h.store.saves()
			require.Len(t, calls, 3)
			require.NoError(t, calls[2].err)
			require.Equal(t, start.Add(2*time.Second), calls[2].start)
			done, err := w.answered()
			require.True(t, done)
			require.NoError(t, err)
			requireStoredAsSource(t, h, "t", 0, 1)
			st := h.c.Stats()
			require.EqualValues(t, 2, st.SyncFailures)
			require.EqualValues(t, 1, st.Writeouts)
			require.EqualValues(t, 1, st.Durables)
		})
	})

	// A Save that blocks past Timeout is cancelled by its context and counted as failed.
	t.Run("Timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second, Timeout: 3 * time.Second})
			h.src.setFrontier("t", 0, 1)
			h.store.setGate() // never opened until the end
			h.run(realclock.Clock{})
			start := time.Now()
			h.c.MarkDirty("t", 0)
			time.Sleep(3*time.Second - time.Nanosecond)
			synctest.Wait()
			require.False(t, h.store.saves()[0].done)
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			calls := h.store.saves()
			require.True(t, calls[0].done)
			require.ErrorIs(t, calls[0].err, context.DeadlineExceeded)
			require.ErrorIs(t, calls[0].ctxErr, context.DeadlineExceeded)
			require.Equal(t, start.Add(3*time.Second), calls[0].end)
			st := h.c.Stats()
			require.EqualValues(t, 1, st.SyncFailures)
			require.EqualValues(t, 1, st.Overruns)
			require.Zero(t, st.Writeouts)
			require.True(t, h.marked("t", 0), "a timed-out Save's partition not marked")
			require.Equal(t, 1, len(calls))

			time.Sleep(time.Second)
			synctest.Wait()
			calls = h.store.saves()
			require.Equal(t, 2, len(calls))
			require.Equal(t, calls[0].end.Add(time.Second), calls[1].start, "retried one interval after it failed")
			h.store.openGate()
			synctest.Wait()
			requireStoredAsSource(t, h, "t", 0)
		})
	})

	// A Save slower than the interval delays the next (one at a time), which starts as it
	// returns, and counts as an overrun.
	t.Run("SlowSave", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			h.src.setFrontier("t", 0, 0)
			h.store.delay = 2500 * time.Millisecond
			h.run(realclock.Clock{})
			time.Sleep(50 * time.Millisecond)
			for range 100 {
				h.src.bump("t", 0)
				h.c.MarkDirty("t", 0)
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(5 * time.Second)
			synctest.Wait()
			calls := h.store.saves()
			require.Len(t, calls, 5)
			for i, c := range calls {
				require.Equal(t, 2500*time.Millisecond, c.end.Sub(c.start))
				if i > 0 {
					require.Equal(t, calls[i-1].end, c.start, "Save %d", i)
				}
			}
			require.Zero(t, h.store.overlaps.Load())
			require.EqualValues(t, 5, h.c.Stats().Overruns)
			requireStoredAsSource(t, h, "t", 0)
		})
	})
}

// Run returns once its ctx ends even while saves overrun their interval back to back (a slow
// store, marks without pause): after the Save in flight, not after the marks stop.
func TestRunReturnsWhileSavesOverrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Interval: time.Second})
		h.src.setFrontier("t", 0, 0)
		h.store.delay = 2 * time.Second
		stop := make(chan struct{})
		marking := make(chan struct{})
		go func() {
			defer close(marking)
			for {
				h.src.bump("t", 0)
				h.c.MarkDirty("t", 0)
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		defer func() {
			close(stop)
			<-marking
		}()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.c.Run(ctx, realclock.Clock{}) }()
		start := time.Now()
		time.Sleep(5 * time.Second) // Saves at 0, 2 and 4 s
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
			require.Equal(t, start.Add(6*time.Second), time.Now(), "Run returned before or long after the Save in flight ended")
		case <-time.After(time.Minute):
			t.Fatal("Run did not return after its ctx ended")
		}
		require.Equal(t, 3, len(h.store.saves()))
	})
}

// Forget waits for a Save in flight that holds the partition's snapshot; no snapshot taken
// before it is saved after it returns, and the partition is not saved again until marked.
func TestForgetWaitsForTheSaveInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Interval: time.Second, MaxBatch: 1})
		h.src.setFrontier("t", 0, 1)
		h.src.setFrontier("t", 1, 1)
		gate := h.store.setGate()
		h.c.MarkDirty("t", 0)
		h.c.MarkDirty("t", 1)
		h.run(realclock.Clock{})
		synctest.Wait()
		require.Len(t, h.store.saves(), 1, "the Save of t/0 is in flight")
		h.src.setFrontier("t", 0, 2)

		forgot := make(chan struct{})
		go func() {
			h.c.Forget("t", 0)
			close(forgot)
		}()
		synctest.Wait()
		select {
		case <-forgot:
			t.Fatal("Forget returned while a Save holding the partition was in flight")
		default:
		}
		h.c.Forget("t", 1) // no snapshot of t/1 yet: returns at once

		gate <- struct{}{}
		synctest.Wait()
		select {
		case <-forgot:
		default:
			t.Fatal("Forget did not return once the Save ended")
		}
		h.store.openGate()
		time.Sleep(time.Minute)
		synctest.Wait()
		calls := h.store.saves()
		require.Len(t, calls, 1, "a forgotten partition saved")
		f, _ := h.store.stored(t, "t", 0)
		require.EqualValues(t, 1, f)
		_, ok := h.store.stored(t, "t", 1)
		require.False(t, ok)

		h.c.MarkDirty("t", 0) // marked again: saved again
		synctest.Wait()
		require.Len(t, h.store.saves(), 2)
		requireStoredAsSource(t, h, "t", 0)
	})
}

func TestClose(t *testing.T) {
	// Close saves every marked partition and answers their waits.
	t.Run("SavesEveryMarked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			for p := range int32(5) {
				h.src.setFrontier("t", p, int64(p))
				h.c.MarkDirty("t", p)
			}
			w0, w3 := goDurable(h.c, "t", 0), goDurable(h.c, "t", 3)
			synctest.Wait()
			require.NoError(t, h.c.Close())
			synctest.Wait()
			for _, w := range []*wait{w0, w3} {
				done, err := w.answered()
				require.True(t, done)
				require.NoError(t, err)
			}
			calls := h.store.saves()
			require.Len(t, calls, 1)
			require.Equal(t, []int32{0, 1, 2, 3, 4}, calls[0].partitions())
			requireStoredAsSource(t, h, "t", 0, 1, 2, 3, 4)

			h.c.MarkDirty("t", 1)
			require.NoError(t, h.c.Close(), "a second Close")
			require.Len(t, h.store.saves(), 1, "saved after Close")
		})
	})

	// A Save that fails at Close answers its waits with ErrClosed joined with its error, and
	// Close returns it.
	t.Run("FailingSave", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			h.src.setFrontier("t", 0, 1)
			h.src.setFrontier("t", 1, 1)
			h.store.setFail(errStore)
			h.c.MarkDirty("t", 1)
			w := goDurable(h.c, "t", 0)
			synctest.Wait()
			err := h.c.Close()
			require.ErrorIs(t, err, errStore)
			synctest.Wait()
			done, werr := w.answered()
			require.True(t, done)
			require.ErrorIs(t, werr, offsets.ErrClosed)
			require.ErrorIs(t, werr, errStore)
		})
	})

	// Close while Run's Save is in flight waits for it, then saves what is left (what that
	// Save failed to save included) and answers every wait.
	t.Run("DuringASaveInFlight", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Config{Interval: time.Second})
			h.src.setFrontier("t", 0, 1)
			h.src.setFrontier("t", 1, 1)
			gate := h.store.setGate()
			h.run(realclock.Clock{})
			w0 := goDurable(h.c, "t", 0)
			synctest.Wait()
			require.Len(t, h.store.saves(), 1, "Run's Save of t/0 is in flight")
			w1 := goDurable(h.c, "t", 1)
			synctest.Wait()
			h.store.setFail(errStore)
			closed := make(chan error, 1)
			go func() { closed <- h.c.Close() }()
			synctest.Wait()
			require.Len(t, h.store.saves(), 1, "Close saved while a Save was in flight")

			gate <- struct{}{} // Run's Save fails
			synctest.Wait()
			done, _ := w0.answered()
			require.False(t, done, "a wait answered by a failed Save")
			calls := h.store.saves()
			require.Len(t, calls, 2, "Close's Save")
			require.ElementsMatch(t, []int32{0, 1}, calls[1].partitions())
			h.store.setFail(nil)
			gate <- struct{}{}
			synctest.Wait()
			require.NoError(t, <-closed)
			for _, w := range []*wait{w0, w1} {
				done, err := w.answered()
				require.True(t, done)
				require.NoError(t, err)
			}
			requireStoredAsSource(t, h, "t", 0, 1)
		})
	})
}

func TestLoad(t *testing.T) {
	rich := offsets.State{Frontier: 41, Ahead: []offsets.Run{{First: 43, Last: 43}, {First: 50, Last: 50}}, Attempts: []offsets.Attempt{{Offset: 42, Count: 3}, {Offset: 44, Count: 1}},
		Quarantine: []int64{7, 60}, Requeued: []int64{9, 30}, Incarnation: 99,
		KeyTails: []offsets.KeyTail{{Key: 0xabc, From: 43}, {Key: 5, From: 50}}} // an ordered topic's parked records
	saved := func(t *testing.T, h *harness, topic string, p int32, st offsets.State) []byte {
		t.Helper()
		h.src.set(topic, p, st)
		h.c.MarkDirty(topic, p)
		require.NoError(t, h.c.saveAll(context.Background()))
		b := h.store.bytesOf(topic, p)
		require.NotNil(t, b)
		return slices.Clone(b)
	}

	t.Run("Nothing", func(t *testing.T) {
		h := newHarness(t, Config{})
		a, err := h.c.Load("t", 0)
		require.NoError(t, err)
		require.False(t, a.Found)
		require.EqualValues(t, -1, a.Frontier)
		require.NotZero(t, a.Incarnation)
		b, err := h.c.Load("t", 0)
		require.NoError(t, err)
		require.NotEqual(t, a.Incarnation, b.Incarnation, "a fresh incarnation each time")
		require.Zero(t, h.c.Stats().IgnoredFiles)
	})

	t.Run("RoundTrip", func(t *testing.T) {
		h := newHarness(t, Config{})
		for i, st := range []offsets.State{rich, {Frontier: -1, Incarnation: 5}, {Frontier: 1 << 40, Ahead: []offsets.Run{{First: 1<<40 + 1, Last: 1<<40 + 2}}, Incarnation: 1<<64 - 1}} {
			p := int32(i)
			saved(t, h, "orders", p, st)
			got, err := h.c.Load("orders", p)
			require.NoError(t, err)
			want := st
			want.Found = true
			require.Equal(t, want, got)
		}
		require.Zero(t, h.c.Stats().IgnoredFiles)
	})

	requireIgnored := func(t *testing.T, h *harness, topic string, p int32, n uint64) {
		t.Helper()
		got, err := h.c.Load(topic, p)
		require.NoError(t, err)
		require.False(t, got.Found)
		require.EqualValues(t, -1, got.Frontier)
		require.NotZero(t, got.Incarnation)
		require.NotEqual(t, rich.Incarnation, got.Incarnation)
		require.Equal(t, n, h.c.Stats().IgnoredFiles)
	}

	t.Run("EveryBitFlip", func(t *testing.T) {
		h := newHarness(t, Config{})
		good := saved(t, h, "t", 0, rich)
		for i := range len(good) * 8 {
			b := slices.Clone(good)
			b[i/8] ^= 1 << (i % 8)
			h.store.setBytes("t", 0, b)
			requireIgnored(t, h, "t", 0, uint64(i+1))
		}
		for n := range len(good) { // and every truncation
			h.store.setBytes("t", 0, slices.Clone(good[:n]))
			requireIgnored(t, h, "t", 0, uint64(len(good)*8+n+1))
		}
	})

	t.Run("AnotherPartition", func(t *testing.T) {
		h := newHarness(t, Config{})
		good := saved(t, h, "t", 0, rich)
		h.store.setBytes("t", 1, good)
		requireIgnored(t, h, "t", 1, 1)
		h.store.setBytes("u", 0, good)
		requireIgnored(t, h, "u", 0, 2)
	})

	t.Run("UnknownVersion", func(t *testing.T) {
		h := newHarness(t, Config{})
		b := saved(t, h, "t", 0, rich)
		b[4] = handoff.Version + 1
		binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
		_, err := handoff.Decode(b, time.Time{})
		require.ErrorIs(t, err, handoff.ErrVersion, "the bytes are of another version, checksummed")
		h.store.setBytes("t", 0, b)
		requireIgnored(t, h, "t", 0, 1)
	})

	// A state saved bound to one life of the topic in the host's log is trusted only under that
	// life: under another (a stale entry, or an earlier life's state restored) it is ignored as
	// a damaged one is; a host that names none gets the state with its binding; an unbound state
	// (saved before the binding) is trusted and bound to the host's at its next save.
	t.Run("HostIncarnation", func(t *testing.T) {
		const lifeOne, lifeTwo = 0x1111, 0x2222
		tests := []struct {
			name        string
			saved, host uint64
			wantFound   bool
			wantBinding uint64
			wantIgnored uint64
		}{
			{"the same life", lifeOne, lifeOne, true, lifeOne, 0},
			{"another life", lifeOne, lifeTwo, false, lifeTwo, 1},
			{"a host that names none", lifeOne, 0, true, lifeOne, 0},
			{"unbound, trusted once", 0, lifeOne, true, lifeOne, 0},
			{"unbound, under a host that names none", 0, 0, true, 0, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h := newHarness(t, Config{})
				st := rich
				st.HostIncarnation = tt.saved
				saved(t, h, "t", 0, st)
				got, err := h.c.LoadBound("t", 0, tt.host)
				require.NoError(t, err)
				require.Equal(t, tt.wantFound, got.Found)
				require.Equal(t, tt.wantBinding, got.HostIncarnation)
				require.Equal(t, tt.wantIgnored, h.c.Stats().IgnoredFiles)
				if !tt.wantFound {
					require.EqualValues(t, -1, got.Frontier)
					require.NotEqual(t, rich.Incarnation, got.Incarnation, "a fresh incarnation")
					return
				}
				want := st
				want.Found, want.HostIncarnation = true, tt.wantBinding
				require.Equal(t, want, got)

				// The shard keeps the binding and the next save writes it.
				saved(t, h, "t", 0, got)
				again, err := h.c.LoadBound("t", 0, tt.wantBinding^lifeTwo)
				require.NoError(t, err)
				require.Equal(t, tt.wantBinding != 0, !again.Found, "bound, the state is not another life's")
			})
		}
	})

	t.Run("StoreError", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.store.loadErr = errStore
		_, err := h.c.Load("t", 7)
		var pe *offsets.PartitionError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "load", pe.Op)
		require.Equal(t, "t", pe.Topic)
		require.EqualValues(t, 7, pe.Partition)
		require.ErrorIs(t, err, errStore)
		require.Zero(t, h.c.Stats().IgnoredFiles)
	})
}

func TestDelete(t *testing.T) {
	h := newHarness(t, Config{})
	h.src.setFrontier("t", 0, 1)
	h.src.setFrontier("u", 0, 1)
	h.c.MarkDirty("t", 0)
	h.c.MarkDirty("u", 0)
	require.NoError(t, h.c.saveAll(context.Background()))
	require.NoError(t, h.c.Delete("t"))
	require.Nil(t, h.store.bytesOf("t", 0))
	require.NotNil(t, h.store.bytesOf("u", 0))
	h.store.setFail(errStore)
	require.ErrorIs(t, h.c.Delete("u"), errStore)
}

func TestClampToWatermark(t *testing.T) {
	h := newHarness(t, Config{})
	st := offsets.State{Found: true, Frontier: 10, Incarnation: 3}
	require.Equal(t, st, h.c.ClampToWatermark("t", 0, st, 20))
	require.Zero(t, h.c.Stats().Clamps)
	clamped := h.c.ClampToWatermark("t", 0, st, 5)
	require.Less(t, clamped.Frontier, int64(5))
	require.EqualValues(t, 1, h.c.Stats().Clamps)
}

// Peek reads a partition's state for a look: what Load would take, and damaged or foreign
// bytes and a failing store as errors, with nothing counted (Load counts what it ignores).
func TestPeek(t *testing.T) {
	h := newHarness(t, Config{})
	st, err := h.c.Peek("t", 0)
	require.NoError(t, err)
	require.False(t, st.Found, "nothing stored")

	var p handoff.Partition
	p.ID, p.Topic, p.Partition, p.State.Frontier, p.State.Incarnation = handoff.NewID(), "t", 0, 41, handoff.NewID()
	b := handoff.Append(nil, &p, time.Time{})
	h.store.mu.Lock()
	h.store.data[key{"t", 0}] = b
	h.store.data[key{"t", 1}] = b // another partition's state
	h.store.data[key{"t", 2}] = []byte("damaged")
	h.store.mu.Unlock()

	st, err = h.c.Peek("t", 0)
	require.NoError(t, err)
	require.True(t, st.Found)
	require.Equal(t, int64(41), st.Frontier)
	for _, part := range []int32{1, 2} {
		_, err = h.c.Peek("t", part)
		require.Error(t, err, "partition %d", part)
	}
	require.Zero(t, h.c.Stats().IgnoredFiles, "a look counts nothing")
	h.store.mu.Lock()
	h.store.loadErr = errStore
	h.store.mu.Unlock()
	_, err = h.c.Peek("t", 0)
	require.ErrorIs(t, err, errStore)
}
