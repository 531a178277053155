package router

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"narad.dev/consume/internal/wire"
)

// Consumes that share a frame (see docs/protocol.md, "Consumption across nodes"). The
// probes and claims this node sends one owner go alone while fewer than the lane's consume
// window of them are in flight there, each from its consumer's goroutine, as before. Past
// that they queue, and each consume RPC that comes back sends what queued meanwhile (up to
// MaxConsumeBatch of the head's topic, asking for remoteBatch records in all) as one
// ConsumeBatch, a queue of one as its own Consume frame: N consumers waiting on one owner
// cost it about window frames per round trip, not N. A full batch (MaxConsumeBatch
// consumes, or remoteBatch records asked for) does not wait for a slot: it leaves at once,
// so consumes that ask for much (which gain little from sharing a frame, since the owner
// serves a frame's members one after the other) are not held behind each other. Every
// consume keeps its own deadline, queued or sent; a consumer that leaves (its context ended,
// or its deadline passed) before its batch came back is answered at once, and what its
// member of the reply carried is given back when the reply comes.

// consumeWindow is the consume RPCs to one owner in flight before the next consumes queue:
// one per processor (at least two), since an owner serves one frame's members one after the
// other.
func consumeWindow() int { return max(2, runtime.GOMAXPROCS(0)) }

// consumeQueue is a lane's consumes: those in flight and those queued for a frame.
type consumeQueue struct {
	window int // set with the lane, never changed

	mu       sync.Mutex
	inFlight int              // consume RPCs to the owner in flight
	queue    []*queuedConsume // waiting for a slot, in order (given up ones leave lazily)
	asked    int              // the records the consumes in queue ask for (given up ones not counted)
	noBatch  time.Time        // the owner refused ConsumeBatch: consumes go alone until then
	ready    sync.Pool        // chan consumeResult, reused (the peer's own, as a lane's answer channels are)
}

// queuedConsume is one consume waiting for a slot, then for its member of a batch's reply.
type queuedConsume struct {
	topic    string
	c        wire.Consume
	frame    []byte // the consume's own frame, for when it leaves alone
	deadline time.Time
	values   context.Context // the consumer's, for its values (a batch carries its first member's)
	ready    chan consumeResult
	state    consumeState // under consumeQueue.mu
}

// consumeState is where a queued consume is.
type consumeState uint8

const (
	consumeQueued    consumeState = iota // waiting for a slot
	consumeSent                          // in a frame in flight
	consumeAnswered                      // its result was handed over
	consumeAbandoned                     // its consumer left; nothing more is handed over
)

// errConsumesRefused answers a queued consume that never left: its owner refused the consume
// op (a release before consumption across nodes) after the consume queued, and is asked
// nothing more for olderFieldMemory (one refused request per two minutes).
var errConsumesRefused = errors.New("the owner refused the consume op lately")

// errRefusedSince answers a queued consume that never left: it carries a field its owner
// refused after it queued (an older release, found out by another consume of the lane), and
// would be refused again for it. Its caller sends it again without the fields the owner
// refuses now (remoteConsume): one refused request per field and owner.
var errRefusedSince = errors.New("a field the owner refused since the consume queued")

// refusedSince reports whether m carries a field the owner of l refuses at now.
func (m *queuedConsume) refusedSince(l *lane, now time.Time) bool {
	c := m.c
	return dropRefused(l, &c, now)
}

// consumeResult is a consume's reply (its consume reply frame), or why none came back, and
// when the frame that carried it left.
type consumeResult struct {
	raw  []byte
	err  error
	sent time.Time
}

// exchangeConsume sends the Consume c of topic (frame is its own frame) to owner within
// deadline and returns the consume reply, with exchange's errors: one when no reply came
// back. *sent is when the caller sent it; for a consume that queued, it is moved to when its
// frame left, from which the reply's relative expiries count (see wire.Consume). While fewer than the lane's consume window are in flight to owner, for a consume
// that asks for remoteBatch records or more, for one whose frame carries acks (alone set),
// for an owner that refused ConsumeBatch, or from a node below wire version 8, it goes at
// once, alone, from this goroutine; otherwise it queues for a batch (see consumeQueue).
func (n *Node) exchangeConsume(ctx context.Context, owner, topic string, c wire.Consume, frame []byte, deadline time.Time, sent *time.Time, alone bool) ([]byte, error) {
	if n.wireVersion < wire.V8 {
		return n.exchange(ctx, owner, frame, deadline)
	}
	l := n.lane(owner)
	q := &l.Peer.consumes
	q.mu.Lock()
	// One that asks for a batch's worth of records has nothing to share a frame with.
	alone = alone || q.inFlight < q.window || int(c.Max) >= remoteBatch
	var now time.Time
	if !alone {
		now = n.clock.Now()
		alone = now.Before(q.noBatch)
	}
	if alone {
		q.inFlight++
		q.mu.Unlock()
		raw, err := n.exchange(ctx, owner, frame, deadline)
		n.consumeSlotFreed(l)
		return raw, err
	}
	m := &queuedConsume{topic: topic, c: c, frame: frame, deadline: deadline, values: ctx, ready: q.readyChan()}
	q.queue = append(q.queue, m)
	q.asked += m.asks()
	var full []*queuedConsume
	if q.asked >= remoteBatch || len(q.queue) >= wire.MaxConsumeBatch {
		if full = q.takeLocked(); full != nil {
			q.inFlight++ // a slot of its own, past the window
		}
	}
	q.mu.Unlock()
	if full != nil {
		n.background(func() { n.sendConsumes(l, full) })
	}
	r := n.awaitConsume(ctx, q, m, now)
	if !r.sent.IsZero() {
		*sent = r.sent
	}
	return r.raw, r.err
}

// asks is the records m asks for.
func (m *queuedConsume) asks() int { return max(int(m.c.Max), 1) }

// readyChan returns a channel for a queued consume's one result, reused if one is free.
func (q *consumeQueue) readyChan() chan consumeResult {
	if ch, ok := q.ready.Get().(chan consumeResult); ok {
		return ch
	}
	return make(chan consumeResult, 1)
}

// awaitConsume waits for m's result: its member of a batch's reply, or the answer to its own
// frame; or, when ctx ends or m's deadline passes first, leaves m (its member's records are
// given back when the reply comes) and answers ctx's error or errNoReplyInBudget.
func (n *Node) awaitConsume(ctx context.Context, q *consumeQueue, m *queuedConsume, now time.Time) consumeResult {
	stop := n.clock.AfterFunc(m.deadline.Sub(now), func() {
		if q.leave(m) {
			m.ready <- consumeResult{err: errNoReplyInBudget}
		}
	})
	var r consumeResult
	select {
	case r = <-m.ready:
	case <-ctx.Done():
		if q.leave(m) {
			stop()
			q.ready.Put(m.ready) // nothing is sent on it any more
			return consumeResult{err: ctx.Err()}
		}
		r = <-m.ready // answered, or timed out, at the same instant
	}
	stop()
	q.ready.Put(m.ready)
	return r
}

// leave marks m abandoned unless its result was handed over already, and reports whether it
// did.
func (q *consumeQueue) leave(m *queuedConsume) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch m.state {
	case consumeQueued:
		q.asked -= m.asks()
	case consumeSent:
	default:
		return false
	}
	m.state = consumeAbandoned
	return true
}

// consumeSlotFreed hands a consume slot whose RPC came back to what queued meanwhile, sent
// from a goroutine of the node, or frees it.
func (n *Node) consumeSlotFreed(l *lane) {
	q := &l.Peer.consumes
	q.mu.Lock()
	batch := q.takeLocked()
	if batch == nil {
		q.inFlight--
	}
	q.mu.Unlock()
	if batch != nil {
		n.background(func() { n.sendConsumes(l, batch) })
	}
}

// takeLocked takes the queue's next batch: up to MaxConsumeBatch consumes of the head's
// topic asking for remoteBatch records in all (the head whatever it asks for), each marked
// sent; nil when nothing waits. Called with q.mu held.
func (q *consumeQueue) takeLocked() []*queuedConsume {
	var batch []*queuedConsume
	asked := 0
	keep := q.queue[:0]
	for _, m := range q.queue {
		switch {
		case m.state != consumeQueued:
		case len(batch) == 0 || (len(batch) < wire.MaxConsumeBatch && m.topic == batch[0].topic && asked+m.asks() <= remoteBatch):
			m.state = consumeSent
			batch = append(batch, m)
			asked += m.asks()
		default:
			keep = append(keep, m)
		}
	}
	q.asked -= asked
	clear(q.queue[len(keep):])
	q.queue = keep
	return batch
}

// sendConsumes sends batch on a slot, then what queued meanwhile, on the same slot, until
// nothing waits and the slot is freed.
func (n *Node) sendConsumes(l *lane, batch []*queuedConsume) {
	q := &l.Peer.consumes
	for batch != nil {
		n.consumeRPC(l, batch)
		q.mu.Lock()
		if batch = q.takeLocked(); batch == nil {
			q.inFlight--
		}
		q.mu.Unlock()
	}
}

// consumeRPC sends batch (consumes of one topic) to the lane's owner and hands each its
// result: as one ConsumeBatch, whose RPC ends by its earliest member's deadline and carries
// each member's budget; a batch of one, or every member while the owner refuses
// ConsumeBatch, as their own frames. An owner that refuses the op (a release before wire
// version 8) is remembered for olderFieldMemory, and the refused batch goes again member by
// member.
func (n *Node) consumeRPC(l *lane, batch []*queuedConsume) {
	q := &l.Peer.consumes
	now := n.clock.Now()
	if !n.servesConsumes(l.Owner(), now) {
		// The owner refused the consume op while these queued: nothing more goes to it.
		n.answerConsumes(l, batch, nil, errConsumesRefused, now)
		return
	}
	q.mu.Lock()
	alone := len(batch) == 1 || now.Before(q.noBatch)
	q.mu.Unlock()
	if alone {
		n.consumesAlone(l, batch)
		return
	}
	members := make([]wire.Consume, 0, len(batch))
	live := batch[:0:0]
	var deadline time.Time
	for _, m := range batch {
		if !now.Before(m.deadline) {
			continue // its timer answers it
		}
		if m.refusedSince(l, now) {
			n.answerConsumes(l, []*queuedConsume{m}, nil, errRefusedSince, now)
			continue
		}
		c := m.c
		c.Budget = m.deadline.Sub(now)
		members = append(members, c)
		if len(live) == 0 || m.deadline.Before(deadline) {
			deadline = m.deadline
		}
		live = append(live, m)
	}
	if len(live) == 0 {
		return
	}
	frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpConsumeBatch, Topic: live[0].topic, Consumes: members})
	if err != nil {
		n.answerConsumes(l, live, nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err), now)
		return
	}
	raw, err := n.exchangeDetached(live[0].values, l.Owner(), frame, deadline)
	if err != nil {
		n.answerConsumes(l, live, nil, err, now)
		return
	}
	reply, err := wire.DecodeConsumeBatchReply(raw, len(live))
	switch {
	case err != nil:
		n.answerConsumes(l, live, nil, err, now)
	case reply.Members != nil:
		n.answerConsumes(l, live, reply.Members, nil, now)
	case reply.Refusal.Status == wire.StatusUnsupported:
		q.mu.Lock()
		q.noBatch = n.clock.Now().Add(olderFieldMemory)
		q.mu.Unlock()
		n.consumesAlone(l, live)
	default:
		// The owner could not serve the frame at all (it is closing, say): each consume is
		// answered that refusal, as its own frame would have been.
		refusal := wire.AppendConsumeReply(nil, &wire.ConsumeReply{Status: reply.Refusal.Status, Message: reply.Refusal.Message})
		members := make([][]byte, len(live))
		for i := range members {
			members[i] = refusal
		}
		n.answerConsumes(l, live, members, nil, now)
	}
}

// consumesAlone sends each consume of batch in its own frame, the first from this goroutine
// and the others from goroutines of the node, and hands each its result. None goes once the
// owner refused the consume op (a release before consumption across nodes, found out by a
// consume of the lane while the batch was on its way): each is answered errConsumesRefused.
func (n *Node) consumesAlone(l *lane, batch []*queuedConsume) {
	send := func(m *queuedConsume) {
		sent := n.clock.Now()
		if !n.servesConsumes(l.Owner(), sent) {
			n.answerConsumes(l, []*queuedConsume{m}, nil, errConsumesRefused, sent)
			return
		}
		if m.refusedSince(l, sent) {
			n.answerConsumes(l, []*queuedConsume{m}, nil, errRefusedSince, sent)
			return
		}
		raw, err := n.exchangeDetached(m.values, l.Owner(), m.frame, m.deadline)
		n.answerConsumes(l, []*queuedConsume{m}, [][]byte{raw}, err, sent)
	}
	var wg sync.WaitGroup
	for _, m := range batch[1:] {
		wg.Add(1)
		n.background(func() {
			defer wg.Done()
			send(m)
		})
	}
	send(batch[0])
	wg.Wait()
}

// answerConsumes hands each consume of batch, whose frame left at sent, its result:
// members[i] (its consume reply), or err for all of them. A consume whose consumer left
// meanwhile is handed nothing, and the records its member carried are given back.
func (n *Node) answerConsumes(l *lane, batch []*queuedConsume, members [][]byte, err error, sent time.Time) {
	q := &l.Peer.consumes
	for i, m := range batch {
		r := consumeResult{err: err, sent: sent}
		if err == nil {
			r.raw = members[i]
		}
		q.mu.Lock()
		state := m.state
		if state == consumeSent {
			m.state = consumeAnswered
		}
		q.mu.Unlock()
		switch {
		case state == consumeSent:
			m.ready <- r
		case state == consumeAbandoned && r.err == nil:
			n.abandonedMember(l, m, r.raw)
		}
	}
}

// abandonedMember reads the consume reply raw that nobody receives, m's consumer having left
// before the batch came back: it gives back the records it carries, and learns the field
// an older owner refused (the next consume would send it again, to be refused again).
func (n *Node) abandonedMember(l *lane, m *queuedConsume, raw []byte) {
	reply, err := wire.DecodeConsumeReply(raw)
	switch {
	case err != nil:
	case reply.Status == wire.StatusBadRequest:
		c := m.c
		n.learnConsumeRefusal(l, &c)
	case len(reply.Deliveries) > 0:
		n.giveBack(messagesOf(m.topic, reply.Deliveries, time.Time{}))
	}
}
