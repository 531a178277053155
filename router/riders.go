package router

import (
	"context"
	"time"

	"narad.dev/consume/internal/acklane"
	"narad.dev/consume/internal/wire"
)

// Acks that ride with reservations (wire version 16; see docs/protocol.md, "Reading ahead").
// A node that reads ahead sends an owner a Consume with the Reserve flag (a refill, or a
// probe that reserves for the next consumes); the AckBatches of its consumers waiting for a
// slot to that owner (see batchQueue) leave in that frame, as plain acks after its flags
// byte, and are answered in its reply, before the consume's own: an ack leaves no later
// than it would have, and a frame less crosses. A consume carrying acks goes alone, in its
// own frame, and only on a call that nothing but its deadline ends (a refill, a hedged
// probe); its deadline is cut to the acks' latest. An owner before version 16 refuses the
// flag with the whole frame: the acks go in a frame of their own, and none rides to that
// owner for olderFieldMemory.

// riders are the AckBatches that ride in one consume's frame.
type riders struct {
	batches  []*queuedBatch
	acks     []*acklane.Ack
	records  []wire.Record // as the frame carries them: plain acks of one budget
	deadline time.Time     // the latest of theirs
}

// takeRiders takes the AckBatches of topic waiting for a slot to the owner of l, to ride
// in a consume's frame that nothing but its deadline ends (values: its context), sent
// now; nil when none may ride (none waits, the owner refused riders or plain acks lately,
// or this node speaks a version before 16).
func (n *Node) takeRiders(l *lane, values context.Context, topic string, now time.Time) *riders {
	if n.wireVersion < wire.V16 || values.Done() != nil || l.Refuses(acklane.RidingAcks, now) || l.Refuses(acklane.PlainAcks, now) {
		return nil
	}
	batches, count := l.Peer.batches.takeRiders(topic, now, wire.MaxLargeBatch)
	if len(batches) == 0 {
		return nil
	}
	r := &riders{batches: batches, acks: make([]*acklane.Ack, 0, count), records: make([]wire.Record, 0, count)}
	var least time.Duration
	for _, b := range batches {
		for _, q := range b.acks {
			if budget := q.Deadline.Sub(now); len(r.acks) == 0 || budget < least {
				least = budget
			}
			if q.Deadline.After(r.deadline) {
				r.deadline = q.Deadline
			}
			r.acks = append(r.acks, q)
			r.records = append(r.records, wire.Record{Op: wire.OpAck, Handle: q.Record.Handle})
		}
	}
	for i := range r.records {
		r.records[i].Budget = least
	}
	return r
}

// answer gives the riders' callers answers, one per ack in order.
func (r *riders) answer(answers []wire.Answer) { answerQueued(r.batches, answers) }

// answerEach gives every rider a.
func (r *riders) answerEach(a wire.Answer) {
	answers := make([]wire.Answer, len(r.acks))
	eachAnswer(answers, a)
	r.answer(answers)
}

// readRiders reads the acks reply at the front of raw, the reply to the consume the riders
// rode in, answers the riders, and returns the consume's own reply after it. A refusal of
// the whole frame applied none of them: they go in a frame of their own to the owner of l
// (in the background), and refusal is the refusal, raw the consume's reply (the caller
// sends the consume again without them when the refusal is a bad request: an owner before
// version 16, refusing the flag). An acks reply it cannot read answers them 502.
func (n *Node) readRiders(l *lane, r *riders, raw []byte) (rest []byte, refusal *wire.Answer, err error) {
	answers := make([]wire.Answer, len(r.acks))
	reply, err := wire.DecodeAcksReply(answers, raw, len(r.acks))
	switch {
	case err != nil:
		r.answerEach(wire.Answer{Status: statusTransport, Message: err.Error()})
		return nil, nil, err
	case reply.Refused:
		n.background(func() { n.sendRidersAlone(l, r) })
		return raw, &reply.Refusal, nil
	}
	r.answer(reply.Answers)
	return reply.Rest, nil, nil
}

// sendRidersAlone sends riders whose consume's frame was refused in a frame of their own,
// as call sends a batch, and answers them.
func (n *Node) sendRidersAlone(l *lane, r *riders) {
	answers := make([]wire.Answer, len(r.acks))
	n.call(l, n.clock.Now(), r.acks, answers)
	r.answer(answers)
}
