package pump

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

var (
	// ErrTopicDropped is what Wait returns to a waiter of a topic DropTopic dropped.
	ErrTopicDropped = errors.New("pump: topic dropped")
	// ErrClosed is what Wait returns once Close has been called.
	ErrClosed = errors.New("pump: closed")
)

// passBudget bounds the Take calls one pass makes on one FIFO, so a topic with a deep backlog and
// many waiters does not hold the pump while other topics wait; the FIFO is due again next pass.
const passBudget = 64

// Source is what the pump takes records from. The router implements it over its in-flight shards
// and the host's logs.
type Source[M any] interface {
	// Take reserves one record of topic, for the waiter the pump has just popped (it should do
	// no slow work, such as a log read, that the waiter can do itself once woken):
	// from partition pinned when pinned >= 0, else from any of this node's partitions of the
	// topic, worked out afresh on every call (a partition gained since the waiter parked is
	// served to it, one that moved away is never reopened). ok false means nothing to hand out
	// now; the waiter goes back at the head of its FIFO until the next wake. A failure that the
	// waiter should see (say, its pinned partition moved away) travels inside M.
	//
	// Only the pump calls Take, one call at a time, with no lock of the pump held; Take may call
	// Notify or NotifyPartition.
	//
	// Take must not panic: a panic ends the goroutine that pumps (and, under Run, the
	// process). If it does, it goes up out of Step or Run as it was raised, with the pump's
	// locks released and the waiter back at the head of its FIFO, so that a caller of Step
	// that recovers it finds the pump as it was. The router's Take contains its host's
	// panics itself.
	Take(topic string, pinned int32) (m M, ok bool)
	// Release gives back a record Take returned that nobody received: its waiter left at the
	// instant it was handed over, or its topic was dropped. The record must be visible again at
	// once (a nack), not after its lease runs out. The pump wakes the topic itself afterwards.
	//
	// Release is called from the pump or from a waiter's goroutine, concurrently with Take.
	Release(topic string, m M)
}

// Pump parks consumers that found nothing and hands each record that becomes available to exactly
// one of them. See the package documentation.
//
// Wait, Notify, NotifyPartition, DropTopic, Parked and Close are safe for concurrent use. Exactly
// one goroutine pumps: either Run, or a caller of Step (a simulator), never both.
type Pump[M any] struct {
	src    Source[M]
	topics sync.Map      // topic name → *topicQueue[M]
	kick   chan struct{} // capacity 1: a pass is due
	closed atomic.Bool
	busy   atomic.Bool // a Step is running; catches a second pumping goroutine

	mu      sync.Mutex
	pending []*topicQueue[M] // topics due a pass, each once (topic.scheduled)
	spare   []*topicQueue[M] // the other pending buffer, swapped in by each Step
}

// New returns a pump over src. It starts nothing: the owner runs Run in a goroutine of its own,
// or drives Step.
func New[M any](src Source[M]) *Pump[M] {
	return &Pump[M]{src: src, kick: make(chan struct{}, 1)}
}

// queue returns the queue state of name, creating it.
func (p *Pump[M]) queue(name string) *topicQueue[M] {
	if v, ok := p.topics.Load(name); ok {
		return v.(*topicQueue[M])
	}
	v, _ := p.topics.LoadOrStore(name, newTopicQueue[M](name))
	return v.(*topicQueue[M])
}

// Run is the pump goroutine: it sleeps on the kick channel and runs Step until no topic is due.
// It reads no clock and wakes for nothing else. It returns nil once ctx is done; waiters still
// parked stay parked (Close answers them).
func (p *Pump[M]) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		}
		for p.Step() {
			if ctx.Err() != nil {
				return nil
			}
		}
	}
}

// Step makes one pass over the topics due one: for each, the pinned FIFOs due a pass first, then
// the shared FIFO, each served from its head until a waiter cannot be served (or the pass budget
// runs out). It reports whether topics are due again (woken during the pass, or with budget
// left over), that is, whether the caller should step again.
//
// Step is for a simulator driving the pump from one goroutine; it must not run concurrently with
// itself or with Run.
func (p *Pump[M]) Step() bool {
	if !p.busy.CompareAndSwap(false, true) {
		panic("pump: Step called concurrently (only one goroutine may pump)")
	}
	defer p.busy.Store(false)

	p.mu.Lock()
	batch := p.pending
	p.pending = p.spare[:0]
	for _, t := range batch {
		t.scheduled = false
	}
	p.mu.Unlock()

	for i, t := range batch {
		p.pumpTopic(t)
		batch[i] = nil
	}

	p.mu.Lock()
	p.spare = batch[:0]
	more := len(p.pending) > 0
	p.mu.Unlock()
	return more
}

// pumpTopic makes one pass over t: the pinned FIFOs due, then the shared one (pinned waiters can
// take only from their own partition, so they go first).
func (p *Pump[M]) pumpTopic(t *topicQueue[M]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped != nil {
		return
	}
	if t.all.Swap(false) {
		t.markAll()
	}
	due := t.dirty
	t.dirty = t.spare[:0]
	for i, f := range due {
		due[i] = nil
		if t.dropped == nil && f.dirty {
			p.pumpFIFO(t, f)
		}
	}
	t.spare = due[:0]
	if t.dropped == nil && t.shared.dirty {
		p.pumpFIFO(t, &t.shared)
	}
}

// pumpFIFO serves f from its head, one Take per waiter, until Take has nothing (the waiter goes
// back at the head and the FIFO stops: every waiter behind it scans the same partitions) or the
// pass budget is spent. Called and returns with t.mu held; releases it around Take and Release.
func (p *Pump[M]) pumpFIFO(t *topicQueue[M], f *fifo[M]) {
	f.dirty = false // cleared before any Take, so a wake during Take marks it due again
	for tries := 0; ; tries++ {
		if tries == passBudget {
			if f.live() > 0 && t.markDirty(f) {
				p.schedule(t)
			}
			break
		}
		w := f.pop()
		if w == nil {
			break
		}
		if w.state.Load() != waiting {
			continue // its context ended; leave() is on its way and finds it no longer queued
		}
		m, ok := p.take(t, f, w)
		if !ok {
			if t.dropped != nil {
				w.hand(result[M]{err: t.dropped})
			} else if w.state.Load() == waiting {
				f.pushFront(w)
			}
			break
		}
		if t.dropped != nil {
			w.hand(result[M]{err: t.dropped})
			p.release(t, m)
			break
		}
		if w.hand(result[M]{m: m}) {
			t.live.Add(-1)
			continue
		}
		// The waiter left while Take ran: nobody receives m. It goes back at once, and the next
		// waiter (if any) can take it.
		p.release(t, m)
	}
	t.forgetIfIdle(f)
}

// take calls the Source's Take for w, just popped from f, with t.mu released, and takes
// t.mu again however Take ends. A Take that panics thus leaves the pump as it was, w back at
// the head of f, and the panic goes on up as it was raised: without this, the deferred
// unlock of pumpTopic would meet an unlocked mutex, a fatal error that no recover catches.
func (p *Pump[M]) take(t *topicQueue[M], f *fifo[M], w *waiter[M]) (m M, ok bool) {
	f.held = true
	t.mu.Unlock()
	returned := false
	defer func() {
		t.mu.Lock()
		f.held = false
		if !returned && t.dropped == nil && w.state.Load() == waiting {
			f.pushFront(w)
		}
	}()
	m, ok = p.src.Take(t.name, f.partition)
	returned = true
	return m, ok
}

// release hands m back to the Source with t.mu released, and wakes the topic.
func (p *Pump[M]) release(t *topicQueue[M], m M) {
	p.releaseUnlocked(t, m)
	t.wakeAll(p)
}

// releaseUnlocked calls the Source's Release with t.mu released, taking it again however
// Release ends (see take).
func (p *Pump[M]) releaseUnlocked(t *topicQueue[M], m M) {
	t.mu.Unlock()
	defer t.mu.Lock()
	p.src.Release(t.name, m)
}

// DropTopic drops the queue state of a deleted topic: its parked waiters return ErrTopicDropped,
// and nothing of it stays in the pump. A later Wait on the same name starts a fresh queue (a
// topic created again under the name).
func (p *Pump[M]) DropTopic(topic string) {
	if v, ok := p.topics.LoadAndDelete(topic); ok {
		v.(*topicQueue[M]).drop(ErrTopicDropped)
	}
}

// Close answers every parked waiter with ErrClosed and makes later Wait calls return ErrClosed.
// It does not stop Run; the owner cancels Run's context.
func (p *Pump[M]) Close() {
	p.closed.Store(true)
	p.topics.Range(func(k, v any) bool {
		p.topics.Delete(k)
		v.(*topicQueue[M]).drop(ErrClosed)
		return true
	})
	p.mu.Lock()
	clear(p.pending)
	p.pending = p.pending[:0]
	p.mu.Unlock()
}

// Parked returns the number of waiters parked on topic (pinned ones included) that have not been
// handed a record nor left.
func (p *Pump[M]) Parked(topic string) int {
	v, ok := p.topics.Load(topic)
	if !ok {
		return 0
	}
	return int(v.(*topicQueue[M]).live.Load())
}

// ParkedOn returns the number of waiters parked on topic pinned to partition (those that only
// that partition's records serve), or, for a negative partition, those parked on the topic's
// shared FIFO (any partition serves them). Parked counts them too.
func (p *Pump[M]) ParkedOn(topic string, partition int32) int {
	v, ok := p.topics.Load(topic)
	if !ok {
		return 0
	}
	t := v.(*topicQueue[M])
	t.mu.Lock()
	defer t.mu.Unlock()
	if partition < 0 {
		return t.shared.live()
	}
	if f := t.pinned[partition]; f != nil {
		return f.live()
	}
	return 0
}
