package acklane

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/internal/readmap"
	"narad.dev/consume/internal/wire"
)

// Clock is the time lanes answer deadlines by: the node's clock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, as time.AfterFunc does; stop
	// cancels it, reporting whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Config is what Lanes needs of its node. Every field is required.
type Config[P any] struct {
	Clock Clock
	// Window is how many RPCs to one owner may be in flight before settles queue.
	Window int
	// MaxBatch is the most settles one batch carries, at most wire.MaxBatch: 1 for a node
	// that speaks no AckBatch.
	MaxBatch int
	// Send sends batch (settles of one topic, at most MaxBatch, taken from the queue of l,
	// or given to Admit's caller) to the owner of l and puts one answer per settle in
	// answers. now is a clock reading taken just before. A member whose deadline passed by
	// now is Send's to answer unsent (a batch taken in time may run later). It runs on the
	// runner's goroutines as well as its callers'.
	Send func(l *Lane[P], now time.Time, batch []*Ack, answers []wire.Answer)
	// Run runs f in the background, as the node's goroutine pool does.
	Run func(f func())
	// Answered gives a settle queued by Enqueue its answer: it calls done with what a ends
	// as, and ends whatever the node holds for the call (its close fence).
	Answered func(done func(error), a wire.Answer)
	// NoReply is the status of the answer to a settle that left and whose reply did not
	// come back by its deadline: the node's own, never on the wire.
	NoReply byte
	// NewPeer makes the node's own state of an owner, kept with its lane (Lane.Peer).
	NewPeer func(owner string) P
}

// Lanes holds a node's lanes, one per owner, made at first use and kept. The node's state of
// each owner besides forwarding rides along as the lane's Peer. Safe for concurrent use.
type Lanes[P any] struct {
	cfg   Config[P]
	lanes readmap.Map[*Lane[P]] // by owner: read on every settle without a lock
}

// New returns a Lanes with no lanes yet.
func New[P any](cfg Config[P]) *Lanes[P] {
	return &Lanes[P]{cfg: cfg}
}

// Lane returns the lane to owner, made if there is none.
func (ls *Lanes[P]) Lane(owner string) *Lane[P] {
	if l, ok := ls.lanes.Load(owner); ok { // the common case, with no closure to make
		return l
	}
	return ls.lanes.LoadOrAdd(owner, func() *Lane[P] {
		l := &Lane[P]{owner: owner, cfg: &ls.cfg, Peer: ls.cfg.NewPeer(owner)}
		l.sweep = l.sweepDue
		return l
	})
}

// Lane is the forwarding state of one owner: the RPCs in flight to it, the settles queued for
// a slot, and what it refused lately.
type Lane[P any] struct {
	// Peer is the node's own state of the owner, made by Config.NewPeer; the lane never
	// reads it.
	Peer P

	owner string
	cfg   *Config[P]
	sweep func() // the sweep, bound once: arming its timer makes no closure

	mu       sync.Mutex
	inFlight int
	queue    []*Ack
	// tracked holds the settles that queued for a slot and may not be answered yet, in the
	// order they queued, which is the order of their deadlines; answered ones leave it
	// lazily from the front. One timer, armed for the front's deadline while it is not
	// empty, answers what its budget ran out for (see sweep).
	tracked    []*Ack
	sweepArmed bool
	// pickingUp: a goroutine holds a slot for the settles Enqueue queued and has not taken
	// its batch yet (see claimPickupLocked).
	pickingUp bool
	returning int   // slots answering what their RPC carried, each to take the queue next
	spare     []Ack // the rest of the block newAckLocked hands out
	// answerChans holds the answer channels of queued settles that were answered, for the
	// next ones. The lane's own, not the process's: a channel made inside a testing/synctest
	// bubble may not be used outside it, and a host's tests run nodes in bubbles.
	answerChans sync.Pool

	refused [refusals]atomic.Int64 // Unix nanoseconds until which each refusal holds; 0: none
}

// Owner returns the node the lane forwards to.
func (l *Lane[P]) Owner() string { return l.owner }

// Ack is one settle forwarded to an owner: given to Send alone by Admit's caller or by a
// client's batch, or queued for a slot and then waiting for its answer.
type Ack struct {
	Topic    string
	Record   wire.Record
	Deadline time.Time
	// Values is the caller's context, for its values alone: a batch carries its first
	// member's. Nil for Enqueue, which has no context.
	Values context.Context

	// answer carries a blocking settle's one answer (capacity 1); nil for one given to
	// Send directly or queued by Enqueue.
	answer chan wire.Answer
	// done, for a settle Enqueue queued, is given the answer instead of answer.
	done     func(error)
	answered atomic.Bool // the answer was given: the first to give it wins (see give)
	taken    bool        // sent, or given up: no longer in the queue's hands (under Lane.mu)
}

// Admit admits a blocking settle of topic, due by deadline, to the lane. While fewer than the
// window's RPCs are in flight it takes a slot and returns nil: the caller sends the settle
// itself, from its goroutine (through the node's Send, as a batch of one), and then calls
// HandOn. Otherwise it queues the settle and returns it, for Wait.
func (l *Lane[P]) Admit(ctx context.Context, topic string, rec wire.Record, deadline time.Time) *Ack {
	l.mu.Lock()
	if l.inFlight < l.cfg.Window {
		l.inFlight++
		l.mu.Unlock()
		return nil
	}
	q := l.newAckLocked()
	q.Topic, q.Record, q.Deadline, q.Values, q.answer = topic, rec, deadline, ctx, l.answerChan()
	l.queue = append(l.queue, q)
	l.trackLocked(q)
	l.mu.Unlock()
	return q
}

// Wait returns the answer to q, a settle Admit queued. When ctx ends before q left, q is
// never sent and Wait returns ctx's error; once q left it waits for the owner's answer, or
// the no-reply answer at q's deadline, whatever ctx does, since the owner may apply it.
func (l *Lane[P]) Wait(ctx context.Context, q *Ack) (wire.Answer, error) {
	// Whichever way the wait ends, the channel is empty then and nobody sends on it again
	// (give sends once, and not at all once the waiter gave up first): it is reused.
	defer l.answerChans.Put(q.answer)
	done := ctx.Done()
	if done == nil { // a context that never ends: a plain receive is cheaper than a select
		return <-q.answer, nil
	}
	select {
	case a := <-q.answer:
		return a, nil
	case <-done:
	}
	l.mu.Lock()
	left := q.taken
	q.taken = true
	l.mu.Unlock()
	if !left && q.answered.CompareAndSwap(false, true) {
		return wire.Answer{}, ctx.Err() // given up before its batch left: never applied
	}
	return <-q.answer, nil
}

// Enqueue queues a settle of topic, due by deadline, and returns at once; Config.Answered is
// given done and the settle's answer, from the goroutine that learns it. With a slot free, a
// goroutine of the runner takes it and sends what has queued by the time it runs (this
// settle, and any queued just after it): nothing waits for a round trip that is not its own,
// and the caller never waits for the network.
func (l *Lane[P]) Enqueue(topic string, rec wire.Record, deadline time.Time, done func(error)) {
	l.mu.Lock()
	q := l.newAckLocked()
	q.Topic, q.Record, q.Deadline, q.done = topic, rec, deadline, done
	l.queue = append(l.queue, q)
	l.trackLocked(q)
	start := l.claimPickupLocked()
	l.mu.Unlock()
	if start {
		l.pickUp()
	}
}

// give answers q unless it was answered already (its reply and its deadline race), and
// reports whether this answer was the one.
func (l *Lane[P]) give(q *Ack, a wire.Answer) bool {
	if !q.answered.CompareAndSwap(false, true) {
		return false
	}
	if done := q.done; done != nil {
		// Not kept: the block q came from outlives it (see newAckLocked), and done may
		// hold on to the caller's state.
		q.done = nil
		l.cfg.Answered(done, a)
		return true
	}
	q.answer <- a
	return true
}

// newAckLocked returns a zero Ack for the lane's queue, from a block of them allocated
// together: one allocation per ackBlock settles instead of one each, which was a tenth of an
// AckAsync's CPU. Each is used once, never reused (the tracked list may still point at an
// answered one): a block stays in memory until none of its settles is referenced. Called
// with l.mu held.
func (l *Lane[P]) newAckLocked() *Ack {
	if len(l.spare) == 0 {
		l.spare = make([]Ack, ackBlock)
	}
	q := &l.spare[0]
	l.spare = l.spare[1:]
	return q
}

// ackBlock is how many Acks newAckLocked allocates at once: a batch's worth.
const ackBlock = wire.MaxBatch

// answerChan returns a channel for a queued settle's one answer, reused if one is free.
func (l *Lane[P]) answerChan() chan wire.Answer {
	if ch, ok := l.answerChans.Get().(chan wire.Answer); ok {
		return ch
	}
	return make(chan wire.Answer, 1)
}
