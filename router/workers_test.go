package router

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// A function run after another has finished goes to the parked worker rather than a new
// goroutine, close waits for what runs, and parked workers end at close (goleak checks that
// none is left).
func TestWorkersReuseParkedGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers(4)
		var ran atomic.Int32
		for range 10 {
			w.run(func() { ran.Add(1) })
			synctest.Wait() // the worker has run it and parked
		}
		require.EqualValues(t, 10, ran.Load())
		require.EqualValues(t, 1, w.idle.Load(), "one worker served all ten, one after the other")
		w.close()
		require.EqualValues(t, 10, ran.Load())
	})
}

// At most maxIdle workers stay parked; the others end when their function returns.
func TestWorkersParkAtMostMaxIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers(2)
		release := make(chan struct{})
		var started sync.WaitGroup
		for range 5 {
			started.Add(1)
			w.run(func() { started.Done(); <-release })
		}
		started.Wait()
		require.EqualValues(t, 0, w.idle.Load())
		close(release)
		synctest.Wait()
		require.EqualValues(t, 2, w.idle.Load())
		w.close()
	})
}

// close waits for a function that is still running, including one it runs in turn.
func TestWorkersCloseWaitsForRunningFunctions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers(1)
		release := make(chan struct{})
		var nestedRan atomic.Bool
		w.run(func() {
			<-release
			w.run(func() { nestedRan.Store(true) })
		})
		closed := make(chan struct{})
		go func() { w.close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("close returned while a function was running")
		default:
		}
		close(release)
		<-closed
		require.True(t, nestedRan.Load())
	})
}
