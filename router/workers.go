package router

import (
	"sync"
	"sync/atomic"
)

// workers runs the node's background functions (RPCs bounded by their budgets) in
// goroutines that close waits for, reusing a parked one where there is one. A new goroutine
// starts on a small stack, and an RPC's chain (encode, the Transport, and over an in-process
// transport the owner's Serve) runs deeper than that: the runtime grows the stack by copying
// it, frame by frame, more than once, which cost more CPU than the RPC's own work when a
// goroutine was started per drained batch. A parked worker keeps its grown stack. Parked
// workers cost no wake-ups (they wait on a channel) and are capped at maxIdle; the rest end.
// The zero value is not ready: see newWorkers.
type workers struct {
	tasks   sync.WaitGroup // functions run or running
	live    sync.WaitGroup // goroutines
	handoff chan func()    // unbuffered: a send succeeds only to a worker parked on it
	stop    chan struct{}  // closed by close: parked workers end
	idle    atomic.Int32   // workers parked, or about to park
	maxIdle int32
}

func newWorkers(maxIdle int) *workers {
	return &workers{handoff: make(chan func()), stop: make(chan struct{}), maxIdle: int32(maxIdle)}
}

// run runs f in a worker: a parked one, or a new one.
func (w *workers) run(f func()) {
	w.tasks.Add(1)
	select {
	case w.handoff <- f:
		return
	default:
	}
	w.live.Add(1)
	go w.loop(f)
}

// loop runs f, then parks for the next function until close, or ends if maxIdle workers
// are parked already.
func (w *workers) loop(f func()) {
	defer w.live.Done()
	for {
		f()
		f = nil // not kept alive while parked
		w.tasks.Done()
		if w.idle.Add(1) > w.maxIdle {
			w.idle.Add(-1)
			return
		}
		select {
		case f = <-w.handoff:
			w.idle.Add(-1)
		case <-w.stop:
			return
		}
	}
}

// close waits for every function run so far, then ends the parked workers and waits for
// them. Nothing may be run once it is called but by a function still running.
func (w *workers) close() {
	w.tasks.Wait()
	close(w.stop)
	w.live.Wait()
}
