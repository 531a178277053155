package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/wire"
)

// The door for peer messages: Serve decodes every frame another node sends and dispatches it by
// op. The settles (ack, extend, nack, release, reject, durable ack, AckBatch) are the owner's
// to apply, here, each through the local settle of settle.go; the consumption ops go to the
// owner's side in owner.go (Consume, ConsumeBatch, Replay, Cancel, Register, Pass, Drop) and to
// the requester's in keeper.go (Notify); a topic's status and purge to queuewide.go (Status,
// Purge).

// Serve answers a frame another node sent, decoded at the node's Config.WireVersion, and
// returns the reply frame. An ack, extend, nack or AckBatch is applied record by record in
// order, each record answered as the single op would have been. A frame it cannot read is
// refused inside the reply: an op this node does not know (or newer than its WireVersion)
// with the unsupported status, anything else malformed (a field newer than its WireVersion
// included) with the bad-request status. The frames of consumption across nodes are served
// by owner.go (Consume, ConsumeBatch, Replay, Cancel, Register, Pass, Drop) and keeper.go
// (Notify), a topic's status and purge asked by another node by queuewide.go (Status,
// Purge). A record whose requester gave up before it is applied (the Call's context
// ended, or, in an AckBatch, the record's own budget ran out since the frame arrived) is
// answered 503 unapplied. Serve only applies records of partitions this node owns: it never
// forwards again.
func (n *Node) Serve(ctx context.Context, from string, frame []byte) ([]byte, error) {
	start := n.clock.Now()
	if len(frame) > 0 && frame[0] == wire.OpAcks {
		return n.serveAcksFrame(ctx, start, frame), nil
	}
	req, err := wire.DecodeRequest(frame, n.wireVersion)
	if err != nil {
		return refusalOf(err), nil
	}
	switch req.Op {
	case wire.OpAck, wire.OpExtend, wire.OpNack, wire.OpRelease, wire.OpExtendLeft, wire.OpAckDurable, wire.OpReject, wire.OpConfirm, wire.OpNackNow, wire.OpAckBatch:
		return n.serveAcks(ctx, start, req.Op, req.Topic, req.Records), nil
	}
	if !n.life.fence.enter() {
		return refusal(wire.StatusUnavailable, ErrClosed.Error()), nil
	}
	defer n.life.fence.leave()
	ok := []wire.Answer{{Status: wire.StatusOK}}
	switch req.Op {
	case wire.OpConsume:
		var acks []byte // the acks that rode with the consume, applied first
		if len(req.Records) > 0 {
			scratch := servePool.Get().(*serveScratch)
			handles := scratch.plain[:0]
			for i := range req.Records {
				handles = append(handles, inflight.Handle(req.Records[i].Handle))
			}
			scratch.plain = handles[:0]
			acks = n.appendPlainAcksReply(nil, ctx, start, req.Topic, req.Records[0].Budget, handles, scratch)
			servePool.Put(scratch)
		}
		return n.serveConsume(ctx, acks, from, req.Topic, req.Consume), nil
	case wire.OpConsumeBatch:
		return n.serveConsumeBatch(ctx, from, req.Topic, req.Consumes, start), nil
	case wire.OpReplay:
		return n.serveReplay(ctx, req.Topic, req.Replay), nil
	case wire.OpCancel:
		n.serveCancel(from, req.RequestID)
	case wire.OpRegister:
		return wire.EncodeReply(n.serveRegister(from, req.Registrations)), nil
	case wire.OpNotify:
		ok[0] = n.serveNotify(from, req.Topic, req.Hold)
	case wire.OpPass:
		n.retire(req.Topic, from)
	case wire.OpDrop:
		n.serveDrop(from, req.Topic)
	case wire.OpStatus:
		return n.serveStatus(req.Topic, req.Partitions, req.StatusSpilled), nil
	case wire.OpPurge:
		return n.servePurge(ctx, req.Topic, req.Partitions), nil
	default:
		return refusal(wire.StatusUnsupported, fmt.Sprintf("op %d is not served by this node", req.Op)), nil
	}
	return wire.EncodeReply(ok), nil
}

// serveAcks applies the records of an ack, extend, nack or AckBatch frame that arrived at
// start, and returns the reply. A run of consecutive acks of one partition is settled under
// one lock of its shard, in order, each answered as its single op would have been.
func (n *Node) serveAcks(ctx context.Context, start time.Time, op byte, topic string, records []wire.Record) []byte {
	if !n.life.fence.enter() {
		answers := make([]wire.Answer, len(records))
		for i := range answers {
			answers[i] = answerOf(ErrClosed, time.Time{})
		}
		return wire.EncodeReply(answers)
	}
	defer n.life.fence.leave()
	if len(records) == 1 { // a single op, most often
		answer := [1]wire.Answer{n.serveOne(ctx, op, topic, &records[0], start, start)}
		return wire.EncodeReply(answer[:])
	}
	scratch := servePool.Get().(*serveScratch)
	defer servePool.Put(scratch)
	answers := slices.Grow(scratch.answers[:0], len(records))[:len(records)]
	now := start // the first run's: the frame just arrived
	for i := 0; i < len(records); {
		if i > 0 {
			now = n.clock.Now()
		}
		r := &records[i]
		if r.Op != opAck {
			answers[i] = n.serveOne(ctx, op, topic, r, start, now)
			i++
			continue
		}
		handles, indexes := scratch.handles[:0], scratch.indexes[:0]
		for ; i < len(records) && records[i].Op == opAck && records[i].Handle.Partition == r.Handle.Partition && len(handles) < maxBatch; i++ {
			if gaveUp(ctx, op, &records[i], start, now) {
				answers[i] = unapplied
				continue
			}
			handles = append(handles, inflight.Handle(records[i].Handle))
			indexes = append(indexes, i)
		}
		if len(handles) == 0 {
			continue
		}
		shard, err := n.localShard(topic, r.Handle.Partition)
		if err != nil {
			for _, k := range indexes {
				answers[k] = answerOf(err, time.Time{})
			}
			continue
		}
		errs := scratch.errs[:len(handles)]
		n.ackManyLocal(shard, now, handles, errs)
		for j, k := range indexes {
			answers[k] = answerOf(errs[j], time.Time{})
		}
		clear(errs)
	}
	reply := wire.EncodeReply(answers)
	clear(answers) // their messages
	scratch.answers = answers[:0]
	return reply
}

// refusalOf is the reply refusing a frame that did not decode: the unsupported status for
// an op this node does not know, the bad-request status for anything else.
func refusalOf(err error) []byte {
	status := wire.StatusBadRequest
	if errors.Is(err, ErrUnsupportedOp) {
		status = wire.StatusUnsupported
	}
	return refusal(status, err.Error())
}

// serveAcksFrame answers an Acks frame (wire version 16) that arrived at start: its plain
// acks decoded where the owner applies them (see appendPlainAcksReply).
func (n *Node) serveAcksFrame(ctx context.Context, start time.Time, frame []byte) []byte {
	scratch := servePool.Get().(*serveScratch)
	defer servePool.Put(scratch)
	topic, budget, handles, err := wire.DecodeAcks(frame, n.wireVersion, scratch.plain[:0])
	if err != nil {
		return refusalOf(err)
	}
	scratch.plain = handles[:0]
	return n.appendPlainAcksReply(nil, ctx, start, topic, budget, handles, scratch)
}

// appendPlainAcksReply applies handles, the plain acks of budget of an Acks frame (or of a
// Consume's Acks flag) that arrived at start, each run of one partition with one AckMany
// under one lock of its shard, and appends their acks reply to dst: the count applied, and
// the answers of the others alone (those whose budget ran out before their run was reached
// included). It works in scratch, whose plain handles may be handles.
func (n *Node) appendPlainAcksReply(dst []byte, ctx context.Context, start time.Time, topic string, budget time.Duration, handles []inflight.Handle, scratch *serveScratch) []byte {
	failed := scratch.failed[:0]
	failAll := func(from, to int, a wire.Answer) {
		for i := from; i < to; i++ {
			failed = append(failed, wire.Failed{Index: i, Answer: a})
		}
	}
	if !n.life.fence.enter() {
		failAll(0, len(handles), answerOf(ErrClosed, time.Time{}))
	} else {
		defer n.life.fence.leave()
		now := start
		for i := 0; i < len(handles); {
			p := handles[i].Partition
			end := i + 1
			for end < len(handles) && handles[end].Partition == p {
				end++
			}
			if i > 0 {
				now = n.clock.Now()
			}
			if ctx.Err() != nil || now.Sub(start) >= budget {
				failAll(i, end, unapplied)
				i = end
				continue
			}
			shard, err := n.localShard(topic, p)
			if err != nil {
				failAll(i, end, answerOf(err, time.Time{}))
				i = end
				continue
			}
			errs := slices.Grow(scratch.runErrs[:0], end-i)[:end-i]
			n.ackManyLocal(shard, now, handles[i:end], errs)
			for j, err := range errs {
				if err != nil {
					failed = append(failed, wire.Failed{Index: i + j, Answer: answerOf(err, time.Time{})})
				}
			}
			clear(errs)
			scratch.runErrs = errs[:0]
			i = end
		}
	}
	reply := wire.AppendAcksReply(dst, len(handles), failed)
	clear(failed) // their messages
	scratch.failed = failed[:0]
	return reply
}

// serveOne applies r, a record of a frame of op that arrived at start, at now, and answers
// it: unapplied if its requester gave up by then.
func (n *Node) serveOne(ctx context.Context, op byte, topic string, r *wire.Record, start, now time.Time) wire.Answer {
	if gaveUp(ctx, op, r, start, now) {
		return unapplied
	}
	rec := recordOf(r)
	shard, err := n.localShard(topic, rec.handle.Partition)
	if err != nil {
		return answerOf(err, time.Time{})
	}
	expiry, err := n.settleLocal(ctx, shard, now, topic, rec)
	a := answerOf(err, expiry)
	if r.Op == wire.OpExtendLeft && err == nil {
		a.Expiry = int64(max(expiry.Sub(now), 1)) // the time left, not a time: see wire.OpExtendLeft
	}
	return a
}

// unapplied answers a record whose requester gave up before it was applied.
var unapplied = wire.Answer{Status: wire.StatusUnavailable, Message: "the requester gave up: not applied"}

// gaveUp reports whether the requester of r, a record of a frame of op that arrived at
// start, gave up by now: the call's context ended, or, in an AckBatch, the record's own
// budget ran out.
func gaveUp(ctx context.Context, op byte, r *wire.Record, start, now time.Time) bool {
	return ctx.Err() != nil || (op == wire.OpAckBatch && now.Sub(start) >= r.Budget)
}

// serveScratch is what serveAcks works in for a frame of several records, pooled.
type serveScratch struct {
	handles [maxBatch]inflight.Handle
	errs    [maxBatch]error
	indexes [maxBatch]int
	answers []wire.Answer // one per record: up to wire.MaxLargeBatch
	// The plain acks of an Acks frame (up to wire.MaxLargeBatch), the errors of a run of
	// them, and the answers of those not applied.
	plain   []inflight.Handle
	runErrs []error
	failed  []wire.Failed
}

var servePool = sync.Pool{New: func() any { return new(serveScratch) }}
