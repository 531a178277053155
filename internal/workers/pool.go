package workers

import (
	"sync"
	"sync/atomic"
)

// Pool runs the node's background functions (RPCs bounded by their budgets) in
// goroutines that Close waits for, reusing a parked one where there is one. A new goroutine
// starts on a small stack, and an RPC's chain (encode, the Transport, and over an in-process
// transport the owner's Serve) runs deeper than that: the runtime grows the stack by copying
// it, frame by frame, more than once, which cost more CPU than the RPC's own work when a
// goroutine was started per drained batch. A parked worker keeps its grown stack. Parked
// workers cost no wake-ups (they wait on a channel) and are capped at maxIdle; the rest end.
// The zero value is not ready: see New. A Pool is safe for concurrent use.
type Pool struct {
	tasks   sync.WaitGroup // functions run or running
	live    sync.WaitGroup // goroutines
	handoff chan func()    // unbuffered: a send succeeds only to a worker parked on it
	stop    chan struct{}  // closed by Close: parked workers end
	idle    atomic.Int32   // workers parked, or about to park
	maxIdle int32
}

// New returns a pool that keeps at most maxIdle workers parked between functions.
func New(maxIdle int) *Pool {
	return &Pool{handoff: make(chan func()), stop: make(chan struct{}), maxIdle: int32(maxIdle)}
}

// Run runs f in a worker: a parked one, or a new one.
func (p *Pool) Run(f func()) {
	p.tasks.Add(1)
	select {
	case p.handoff <- f:
		return
	default:
	}
	p.live.Add(1)
	go p.loop(f)
}

// loop runs f, then parks for the next function until Close, or ends if maxIdle workers
// are parked already.
func (p *Pool) loop(f func()) {
	defer p.live.Done()
	for {
		f()
		f = nil // not kept alive while parked
		p.tasks.Done()
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		select {
		case f = <-p.handoff:
			p.idle.Add(-1)
		case <-p.stop:
			return
		}
	}
}

// Close waits for every function run so far, then ends the parked workers and waits for
// them. Nothing may be run once it is called but by a function still running.
func (p *Pool) Close() {
	p.tasks.Wait()
	close(p.stop)
	p.live.Wait()
}
