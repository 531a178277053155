package workers

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// A function run after another has finished goes to the parked worker rather than a new
// goroutine, Close waits for what runs, and parked workers end at Close (goleak checks that
// none is left).
func TestPoolReuseParkedGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := New(4)
		var ran atomic.Int32
		for range 10 {
			w.Run(func() { ran.Add(1) })
			synctest.Wait() // the worker has run it and parked
		}
		require.EqualValues(t, 10, ran.Load())
		require.EqualValues(t, 1, w.idle.Load(), "one worker served all ten, one after the other")
		w.Close()
		require.EqualValues(t, 10, ran.Load())
	})
}

// At most maxIdle workers stay parked; the others end when their function returns.
func TestPoolParkAtMostMaxIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := New(2)
		release := make(chan struct{})
		var started sync.WaitGroup
		for range 5 {
			started.Add(1)
			w.Run(func() { started.Done(); <-release })
		}
		started.Wait()
		require.EqualValues(t, 0, w.idle.Load())
		close(release)
		synctest.Wait()
		require.EqualValues(t, 2, w.idle.Load())
		w.Close()
	})
}

// Close waits for a function that is still running, including one it runs in turn.
func TestPoolCloseWaitsForRunningFunctions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := New(1)
		release := make(chan struct{})
		var nestedRan atomic.Bool
		w.Run(func() {
			<-release
			w.Run(func() { nestedRan.Store(true) })
		})
		closed := make(chan struct{})
		go func() { w.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while a function was running")
		default:
		}
		close(release)
		<-closed
		require.True(t, nestedRan.Load())
	})
}
