package router

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"narad.dev/consume/internal/acklane"
	"narad.dev/consume/internal/wire"
)

// Acks that ride with reservations (wire version 16; see docs/protocol.md, "Reading ahead").
// A node that reads ahead sends an owner a Consume with the Reserve flag (a refill, or a
// probe that reserves for the next consumes); the acks of its consumers waiting for a slot
// to that owner (the AckBatches of batchQueue, then the acks the lane queued past its
// window: AckAsync's, and blocking Acks') leave in that frame, as plain acks after its
// flags byte, and are answered in its reply, before the consume's own: an ack leaves no
// later than it would have, and a frame less crosses. A consume carrying acks goes alone, in its
// own frame, and only on a call that nothing but its deadline ends (a refill, a hedged
// probe); its deadline is cut to the acks' latest. An owner before version 16 refuses the
// flag with the whole frame: the acks go in a frame of their own, and none rides to that
// owner for olderFieldMemory.

// riders are the acks that ride in one consume's frame: AckBatches, then acks the lane
// queued.
type riders struct {
	l        *lane
	batches  []*queuedBatch
	queued   []*acklane.Ack
	records  []wire.Record // as the frame carries them: plain acks of one budget
	deadline time.Time     // the latest of theirs
	pooled   *[]wire.Record
}

// riderRecords and riderAnswers hold the slices the frames with riders were encoded from
// and their answers read into: up to wire.MaxLargeBatch of each a frame, a refill's or a
// probe's, which were most of what a gateway allocated a record at 64 consumers of batch 1.
var (
	riderRecords = sync.Pool{New: func() any { return new([]wire.Record) }}
	riderAnswers = sync.Pool{New: func() any { return new([]wire.Answer) }}
)

// release returns r's records to riderRecords once the frame that carried them is over.
func (r *riders) release() {
	*r.pooled = r.records[:0] // plain acks: handles and budgets, nothing to let go of
	riderRecords.Put(r.pooled)
	r.pooled, r.records = nil, nil
}

// takeRiders takes the AckBatches of topic waiting for a slot to the owner of l, then the
// plain acks of topic its lane queued past its window, up to wire.MaxLargeBatch acks in all,
// to ride in a consume's frame that nothing but its deadline ends (values: its context),
// sent now; nil when none may ride (none waits, the owner refused riders or plain acks
// lately, or this node speaks a version before 16).
func (n *Node) takeRiders(l *lane, values context.Context, topic string, now time.Time) *riders {
	if values.Done() != nil || !n.plainAcksTo(l, now) || l.Refuses(acklane.RidingAcks, now) {
		return nil
	}
	batches, count := l.Peer.batches.takeRiders(topic, now, wire.MaxLargeBatch)
	queued := l.TakeRiders(topic, now, wire.MaxLargeBatch-count)
	if len(batches)+len(queued) == 0 {
		return nil
	}
	pooled := riderRecords.Get().(*[]wire.Record)
	r := &riders{l: l, batches: batches, queued: queued, records: slices.Grow((*pooled)[:0], count+len(queued)), pooled: pooled}
	least := time.Duration(math.MaxInt64)
	noteDeadline := func(deadline time.Time) {
		least = min(least, deadline.Sub(now))
		if deadline.After(r.deadline) {
			r.deadline = deadline
		}
	}
	for _, b := range batches {
		noteDeadline(b.deadline)
		for _, h := range b.handles {
			r.records = append(r.records, wire.Record{Op: wire.OpAck, Handle: h})
		}
	}
	for _, q := range queued {
		noteDeadline(q.Deadline)
		r.records = append(r.records, wire.Record{Op: wire.OpAck, Handle: q.Record.Handle})
	}
	for i := range r.records {
		r.records[i].Budget = least
	}
	return r
}

// answer gives the riders' callers answers, one per ack in order.
func (r *riders) answer(answers []wire.Answer) {
	for _, b := range r.batches {
		answers = answers[copy(b.answers, answers):]
	}
	answerQueued(r.batches)
	for i, q := range r.queued {
		r.l.Answer(q, answers[i])
	}
}

// answerEach gives every rider a.
func (r *riders) answerEach(a wire.Answer) {
	for _, b := range r.batches {
		eachAnswer(b.answers, a)
	}
	answerQueued(r.batches)
	for _, q := range r.queued {
		r.l.Answer(q, a)
	}
}

// readRiders reads the acks reply at the front of raw, the reply to the consume the riders
// rode in, answers the riders, and returns the consume's own reply after it. A refusal of
// the whole frame applied none of them: they go in frames of their own to the owner of l
// (in the background), and refusal is the refusal, raw the consume's reply (the caller
// sends the consume again without them when the refusal is a bad request: an owner before
// version 16, refusing the flag). An acks reply it cannot read answers them 502.
func (n *Node) readRiders(l *lane, r *riders, raw []byte) (rest []byte, refusal *wire.Answer, err error) {
	pooled := riderAnswers.Get().(*[]wire.Answer)
	answers := slices.Grow((*pooled)[:0], len(r.records))[:len(r.records)]
	defer func() {
		clear(answers) // their messages
		*pooled = answers[:0]
		riderAnswers.Put(pooled)
	}()
	reply, err := wire.DecodeAcksReply(answers, raw, len(r.records))
	switch {
	case err != nil:
		r.answerEach(wire.Answer{Status: statusTransport, Message: err.Error()})
		return nil, nil, err
	case reply.Refused:
		n.background(func() {
			if len(r.batches) > 0 {
				n.sendGroup(l, r.batches)
				answerQueued(r.batches)
			}
			n.sendRiders(l, r.queued)
		})
		return raw, &reply.Refusal, nil
	}
	r.answer(reply.Answers)
	return reply.Rest, nil, nil
}

// sendRiders sends acks the lane queued that rode in a frame the owner refused whole in
// frames of their own, at most wire.MaxBatch a frame as a slot would send them, and answers
// each.
func (n *Node) sendRiders(l *lane, queued []*acklane.Ack) {
	var answers [wire.MaxBatch]wire.Answer
	for len(queued) > 0 {
		batch := queued[:min(len(queued), wire.MaxBatch)]
		queued = queued[len(batch):]
		n.call(l, n.clock.Now(), batch, answers[:len(batch)])
		for i, q := range batch {
			l.Answer(q, answers[i])
		}
	}
}
