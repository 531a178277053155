package budget

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Context is the context of one node-to-node call that nothing but its deadline can end
// early: the call's budget. It ends at deadline on the node's clock (DeadlineExceeded), or
// when the call is over (Canceled). It needs no timer of its own: the lane of the node it
// calls keeps its open budgets in a heap under one timer, armed for the earliest deadline
// (see Set). An RPC that returns before its deadline, as almost all do, costs a heap push
// and a pop, where a context.WithDeadline costs a runtime timer set and stopped, a closure
// and a cancel context. Its Done channel is made only when someone asks for it: a transport
// that answers in place and only reads Err makes none. A budget opened with its deadline
// passed already ends when the timer runs, a moment later, rather than at once.
type Context struct {
	deadline time.Time
	index    int // in its heap; -1 once out of it
	// values is the context whose values the call carries (a trace, a request's
	// credentials), never its cancellation; nil carries none.
	values context.Context

	// err is context.Canceled or DeadlineExceeded once it ended: set under mu, read without
	// it, since a transport and the owner's Serve ask for it on every call.
	err    atomic.Pointer[error]
	mu     sync.Mutex
	done   chan struct{} // made by the first Done
	afters []*afterFunc  // what AfterFunc registered and is still to run
}

// afterFunc is a function registered with Context.AfterFunc.
type afterFunc struct {
	f       func()
	settled bool // it ran or was stopped (under the budget's mu)
}

var _ context.Context = (*Context)(nil)

// Clock is the time a Set's budgets end by: the node's clock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, as time.AfterFunc does; stop
	// cancels it, reporting whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Deadline implements context.Context.
func (b *Context) Deadline() (time.Time, bool) { return b.deadline, true }

// Value implements context.Context: the values of the context the budget was opened with,
// as context.WithoutCancel keeps them, without the allocation of wrapping it.
func (b *Context) Value(key any) any {
	if b.values == nil {
		return nil
	}
	return b.values.Value(key)
}

// Err implements context.Context.
func (b *Context) Err() error {
	if err := b.err.Load(); err != nil {
		return *err
	}
	return nil
}

// Done implements context.Context.
func (b *Context) Done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		b.done = make(chan struct{})
		if b.err.Load() != nil {
			close(b.done)
		}
	}
	return b.done
}

// AfterFunc arranges for f to run in its own goroutine once b ends, as context.AfterFunc
// does; stop reports whether it kept f from running. A context derived from b with
// context.WithCancel finds it and uses it rather than a goroutine that waits on Done.
func (b *Context) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err.Load() != nil {
		a.settled = true
		go f()
	} else {
		b.afters = append(b.afters, a)
	}
	return func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		if a.settled {
			return false
		}
		a.settled = true
		return true
	}
}

// The two ways a budget ends, stored in Context.err by pointer: ending one allocates
// nothing.
var (
	errOver    error = context.Canceled
	errExpired error = context.DeadlineExceeded
)

// end ends b with *err (errOver or errExpired), unless it ended already.
func (b *Context) end(err *error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err.Load() != nil {
		return
	}
	b.err.Store(err)
	if b.done != nil {
		close(b.done)
	}
	for _, a := range b.afters {
		if !a.settled {
			a.settled = true
			go a.f()
		}
	}
	b.afters = nil
}

// Set holds the open budgets of one lane, in a min-heap by deadline, and the one timer
// that ends those whose deadline passes. The timer is not moved when the earliest budget
// leaves the heap: when it fires early it is armed again for the new earliest, so a steady
// stream of calls that return in time costs one firing per budget's length (2 s for acks),
// and a lane that falls idle wakes once more at most, then sleeps.
//
// The zero value is an empty set; a Set is safe for concurrent use.
type Set struct {
	mu       sync.Mutex
	heap     contextHeap
	armedFor time.Time   // the armed timer's deadline; zero: none armed
	stop     func() bool // stops the armed timer
	// armings counts the timers armed: a timer that fires after another replaced it (its
	// stop came too late) ends what is due but leaves the arming to the newer one.
	armings uint64
}

// Open returns a budget ending at deadline on clock, in the heap, carrying the values of
// values (nil: none). The caller closes it with Close once the call returns. Every budget of
// a Set must be opened on the same clock.
func (s *Set) Open(clock Clock, deadline time.Time, values context.Context) *Context {
	b := &Context{deadline: deadline, values: values}
	s.mu.Lock()
	defer s.mu.Unlock()
	heap.Push(&s.heap, b)
	if s.armedFor.IsZero() || deadline.Before(s.armedFor) {
		if s.stop != nil {
			s.stop()
		}
		s.arm(clock, clock.Now(), deadline)
	}
	return b
}

// Close ends b as over (Canceled) and takes it out of the heap, if its deadline did not end
// it first.
func (s *Set) Close(b *Context) {
	s.mu.Lock()
	if b.index >= 0 {
		heap.Remove(&s.heap, b.index)
	}
	s.mu.Unlock()
	b.end(&errOver)
}

// arm sets the timer for deadline. Called with s.mu held.
func (s *Set) arm(clock Clock, now, deadline time.Time) {
	s.armings++
	arming := s.armings
	s.armedFor = deadline
	s.stop = clock.AfterFunc(deadline.Sub(now), func() { s.fire(clock, arming) })
}

// fire ends the budgets whose deadline passed and, if the timer of arming is the armed one,
// arms it for the next deadline.
func (s *Set) fire(clock Clock, arming uint64) {
	now := clock.Now()
	var due []*Context
	s.mu.Lock()
	for len(s.heap) > 0 && !now.Before(s.heap[0].deadline) {
		due = append(due, heap.Pop(&s.heap).(*Context))
	}
	if arming == s.armings {
		s.armedFor, s.stop = time.Time{}, nil
		if len(s.heap) > 0 {
			s.arm(clock, now, s.heap[0].deadline)
		}
	}
	s.mu.Unlock()
	for _, b := range due {
		b.end(&errExpired)
	}
}

// contextHeap orders open budgets by deadline for container/heap, keeping each one's index so
// that a call that returns in time takes its budget out wherever it is.
type contextHeap []*Context

func (h contextHeap) Len() int           { return len(h) }
func (h contextHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }

func (h contextHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *contextHeap) Push(x any) {
	b := x.(*Context)
	b.index = len(*h)
	*h = append(*h, b)
}

func (h *contextHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	b.index = -1
	return b
}
