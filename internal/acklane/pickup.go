package acklane

import (
	"runtime"
	"sync"
	"time"

	"narad.dev/consume/internal/wire"
)

// HandOn gives the slot Admit took for a settle its caller sent to what queued meanwhile,
// sent from a goroutine of the runner, or frees it.
func (l *Lane[P]) HandOn() {
	l.mu.Lock()
	if len(l.queue) == 0 && l.inFlight < l.cfg.Window { // below the window: free the slot
		l.inFlight--
		l.mu.Unlock()
		return
	}
	hold := len(l.queue) == 0 // every slot is taken: the settles it answered may come back
	l.mu.Unlock()
	if hold {
		runtime.Gosched()
	}
	if batch, _ := l.next(heldSlot); batch != nil {
		l.cfg.Run(func() { l.drain(l.cfg.Clock.Now(), batch) })
	}
}

// claimPickupLocked takes a free slot for a goroutine that picks up the queued settles,
// unless one is on its way already, or a slot is answering the settles its RPC carried and
// takes the queue next: the settles that queue meanwhile leave with it, rather than each
// taking a slot and an RPC of its own. Called with l.mu held.
func (l *Lane[P]) claimPickupLocked() bool {
	if l.pickingUp || l.returning > 0 || l.inFlight >= l.cfg.Window {
		return false
	}
	l.inFlight++
	l.pickingUp = true
	return true
}

// pickUp starts the goroutine of a slot claimed by claimPickupLocked: it takes what has
// queued by the time it runs and drains the lane from there.
func (l *Lane[P]) pickUp() {
	l.cfg.Run(func() {
		if batch, now := l.next(pickupSlot); batch != nil {
			l.drain(now, batch)
		}
	})
}

// taker is the slot that takes a batch from the queue (see next).
type taker int

const (
	heldSlot     taker = iota // a slot whose RPC was made from its caller's goroutine
	returnedSlot              // a slot whose RPC came back and whose settles it answered
	pickupSlot                // a slot claimed for what Enqueue queued (claimPickupLocked)
)

var answersPool = sync.Pool{New: func() any { return new([wire.MaxBatch]wire.Answer) }}

// drain sends batch (taken from the queue, holding one slot) and answers each settle, then
// the batches that queued meanwhile, one after the other on the same slot, until the queue
// is empty and the slot is freed. An answer its settle no longer waits for (its deadline
// passed, and sweep answered it) is dropped. now is the clock's reading when batch was taken.
func (l *Lane[P]) drain(now time.Time, batch []*Ack) {
	answerBuf := answersPool.Get().(*[wire.MaxBatch]wire.Answer) // off the stack: this goroutine's is small
	defer answersPool.Put(answerBuf)
	for batch != nil {
		answers := answerBuf[:len(batch)]
		l.cfg.Send(l, now, batch, answers)
		l.mu.Lock()
		l.returning++ // it takes what queues while it answers (see claimPickupLocked)
		l.mu.Unlock()
		for i, a := range answers {
			l.give(batch[i], a)
		}
		clear(answers) // their messages
		// The settles just answered are runnable and usually come straight back with the
		// next one; let them run first (a few turns of the scheduler, as long as fewer have
		// queued than just left), so that they queue behind this slot and leave together,
		// rather than the first taking the freed slot alone or a few leaving ahead of the
		// rest.
		for range comebackTurns {
			if !l.queueShorter(len(answers)) {
				break
			}
			runtime.Gosched()
		}
		batch, now = l.next(returnedSlot)
	}
}

// comebackTurns bounds the turns of the scheduler a slot waits for the settles it just
// answered to come back: each is a Gosched, microseconds, and the wait happens only while
// every slot is busy. One turn let about half of them back on two cores (0.37 RPCs per ack
// at 256 in flight with a 200 µs round trip); four, nearly all (0.26). Stopping at the first
// turn that brought none back saved fewer RPCs (0.34) and no CPU.
const comebackTurns = 4

// queueShorter reports whether fewer than n settles wait for a slot.
func (l *Lane[P]) queueShorter(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue) < n
}

// next takes the queue's next batch for a slot that just came free: up to MaxBatch settles
// of the head's topic, to leave as one batch (a single one when one is queued, or for an
// owner that refused AckBatch). With nothing queued it frees the slot and returns nil. A
// settle whose budget is spent is left for sweep, which answers it 503. It returns the
// clock's reading it took the batch at.
//
// What it leaves queued (more than a batch, or another topic's) gets a goroutine on a free
// slot, if there is one: settles Enqueue queued while no goroutine was to pick them up. The
// taker says which slot takes the batch.
func (l *Lane[P]) next(by taker) ([]*Ack, time.Time) {
	l.mu.Lock()
	switch by {
	case returnedSlot:
		l.returning--
	case pickupSlot:
		l.pickingUp = false
	}
	batch, now := l.nextLocked()
	more := len(l.queue) > 0 && l.claimPickupLocked()
	l.mu.Unlock()
	if more {
		l.pickUp()
	}
	return batch, now
}

// nextLocked is next, called with l.mu held.
func (l *Lane[P]) nextLocked() ([]*Ack, time.Time) {
	if len(l.queue) == 0 { // the common case below the window: no clock read
		l.inFlight--
		return nil, time.Time{}
	}
	now := l.cfg.Clock.Now()
	limit := l.cfg.MaxBatch
	if l.Refuses(AckBatch, now) {
		limit = 1
	}
	batch := l.takeLocked(func(q *Ack, batch []*Ack) bool {
		return now.Before(q.Deadline) && len(batch) < limit && (len(batch) == 0 || q.Topic == batch[0].Topic)
	})
	if len(batch) == 0 {
		l.inFlight--
		return nil, now
	}
	return batch, now
}

// Singles reports whether settles to the owner go one at a time at now: the node speaks no
// AckBatch (Config.MaxBatch 1), or the owner refused one lately (see Refuse).
func (l *Lane[P]) Singles(now time.Time) bool {
	return l.cfg.MaxBatch == 1 || l.Refuses(AckBatch, now)
}

// TakeRiders takes out of the queue, for a frame the node sends the owner for something else
// (a consume that reserves, whose reply answers them too), up to max of the settles of
// topic that queued for a slot and are plain acks (wire.OpAck), oldest first, whose budget
// is not spent at now: each leaves with that frame, no later than a slot would have sent it.
// They are out of the queue's hands as a batch a slot took is: the caller answers each with
// Answer (the owner's answer, or the frame's failure), and sweep answers one still
// unanswered at its deadline with the no-reply status.
func (l *Lane[P]) TakeRiders(topic string, now time.Time, max int) []*Ack {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takeLocked(func(q *Ack, riders []*Ack) bool {
		return len(riders) < max && q.Topic == topic && q.Record.Op == wire.OpAck && now.Before(q.Deadline)
	})
}

// takeLocked takes out of the queue, in order, the settles take accepts (given those taken
// so before it), marked taken, and drops from it those taken already (sent, or given up).
// Called with l.mu held.
func (l *Lane[P]) takeLocked(take func(q *Ack, taken []*Ack) bool) []*Ack {
	var taken []*Ack
	keep := l.queue[:0]
	for _, q := range l.queue {
		switch {
		case q.taken:
		case take(q, taken):
			q.taken = true
			taken = append(taken, q)
		default:
			keep = append(keep, q)
		}
	}
	clear(l.queue[len(keep):])
	l.queue = keep
	return taken
}

// Answer gives q, a settle TakeRiders took, its answer, unless sweep gave it one already.
func (l *Lane[P]) Answer(q *Ack, a wire.Answer) { l.give(q, a) }
