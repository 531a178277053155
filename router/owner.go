package router

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/tokens"
)

// The owner's side of consumption across nodes (see docs/protocol.md, "Consumption across
// nodes"): it serves the probes and claims other nodes send for its partitions, and keeps
// the delivery tokens their parked consumers leave. A token reserves nothing: when records
// show up here beyond what this node's own parked consumers will take and what is already
// promised, the owner spends one token and tells its node, holding one record back for the
// claim that follows; only the claim leases.

const (
	// remoteBatch is the most records an owner hands one request from another node, but
	// for a reservation (see aheadBatch).
	remoteBatch = 100
	// aheadBatch is the most records an owner reserves for one request of a node reading
	// ahead (a Consume with the Reserve flag): what a refill of a busy gateway asks for
	// once half its target is gone, in one round trip, so that records cross thousands to
	// a frame at any batch size. An owner of an earlier release reserves 1,024 at most (and
	// one before reading ahead, remoteBatch), which a node reading ahead takes as that owner
	// running dry for now.
	aheadBatch = DefaultReadAhead / 2
	// notifyBudget bounds a notification's round trip (and half the hold, at most): a
	// requester that does not answer within it is presumed gone (see notify).
	notifyBudget = 250 * time.Millisecond
)

// ownerTopic is the tokens other nodes left for one topic of this node.
type ownerTopic struct {
	// armed says tokens or holds exist, so a wake must look: the one atomic load an append
	// pays when no other node waits (invariant "idle costs nothing").
	armed atomic.Bool

	mu        sync.Mutex
	queue     tokens.Queue
	timerAt   time.Time   // when the armed hold timer fires
	stopTimer func() bool // nil: no hold timer armed
}

// ownerTopic returns the tokens of topic, creating them when create is set (nil otherwise).
func (n *Node) ownerTopic(topic string, create bool) *ownerTopic {
	if v, ok := n.ownerTopics.Load(topic); ok {
		return v.(*ownerTopic)
	}
	if !create {
		return nil
	}
	ot := &ownerTopic{}
	ot.queue.Hold = n.holdTimeout
	v, _ := n.ownerTopics.LoadOrStore(topic, ot)
	return v.(*ownerTopic)
}

// offer fires the tokens other nodes left for topic while this node holds records beyond
// those its own parked consumers will take and those already promised: one token, one
// record, one node told. With no token it is one map read and one atomic load.
func (n *Node) offer(topic string) {
	ot := n.ownerTopic(topic, false)
	if ot == nil || !ot.armed.Load() || !n.life.fence.enter() {
		return
	}
	defer n.life.fence.leave()
	now := n.clock.Now()
	available := n.availableContained(topic, now) // outside ot.mu: it takes shard locks
	var told []tokens.Hold
	ot.mu.Lock()
	for {
		h, ok := ot.queue.Fire(now, available)
		if !ok {
			break
		}
		told = append(told, h)
	}
	n.armHoldTimer(topic, ot, now)
	if ot.queue.Idle(now) {
		ot.armed.Store(false)
	}
	ot.mu.Unlock()
	for _, h := range told {
		n.stats.remote.notified.Add(1)
		n.background(func() { n.notify(topic, h) })
	}
}

// availableContained is available with a panic of the host's code it calls recovered (see
// recoverHostPanic): offer runs from the purger and from timers, and no caller asked for it.
// A panic offers nothing.
func (n *Node) availableContained(topic string, now time.Time) (available int) {
	defer n.recoverHostPanic("offering records to other nodes", topic, nil)
	return n.available(topic, now)
}

// available estimates the records of topic this node could hand another node now: each
// local partition's (see inflight.Shard.Available), less what this node's own parked
// consumers will take of them. A partition whose state is not loaded is loaded (its files
// read as recovery reads them), so an owner restarting with a backlog offers it to the
// first token without a scan. A partition the host answers wrongly about offers nothing.
func (n *Node) available(topic string, now time.Time) int {
	gen := n.liveGeneration(topic)
	if gen == nil {
		return 0
	}
	local, _, ok, verdict := n.partitions(topic)
	if !ok {
		return 0
	}
	total := 0
	for _, p := range local {
		log, err := n.resolveLog(topic, p, verdict)
		if err != nil {
			continue
		}
		shard, err := n.shardFor(gen, p)
		if err != nil {
			continue
		}
		if n.ownership != nil && shard.Lapsed(now) && !n.renew(shard, now) {
			// A promise is an action: none of a partition whose grant lapsed unrenewed (it
			// may have failed over, its records settled by the new owner). A grant the host
			// kept alive thaws here, so an idle partition's next record is offered at once.
			continue
		}
		hwm := log.HighWatermark()
		if hwm < 0 {
			n.negativeWatermark(topic, p, hwm)
			continue
		}
		total += max(shard.Available(now, hwm)-n.pump.ParkedOn(topic, p), 0)
	}
	return max(total-n.pump.ParkedOn(topic, -1), 0)
}

// armHoldTimer makes sure the owner looks again when the earliest hold lapses while tokens
// wait: a record held for a claim that never came is offered to the next token then. One
// timer per topic at most, and none while nothing is held (invariant "idle costs
// nothing"). Called with ot.mu held.
func (n *Node) armHoldTimer(topic string, ot *ownerTopic, now time.Time) {
	at, ok := ot.queue.NextChange(now)
	if !ok || ot.queue.Tokens(now) == 0 {
		return
	}
	if ot.stopTimer != nil {
		if !ot.timerAt.After(at) {
			return
		}
		ot.stopTimer()
	}
	ot.timerAt = at
	ot.stopTimer = n.clock.AfterFunc(at.Sub(now), func() {
		ot.mu.Lock()
		ot.stopTimer = nil
		ot.mu.Unlock()
		n.offer(topic)
	})
}

// retire ends from's oldest hold on topic (its claim arrived with the Claim flag, or it
// passed) and offers the record to the next token at once.
func (n *Node) retire(topic, from string) {
	ot := n.ownerTopic(topic, false)
	if ot == nil {
		return
	}
	ot.mu.Lock()
	ot.queue.Retire(from, n.clock.Now())
	ot.mu.Unlock()
	n.offer(topic)
}

// notify tells the requester of hold h that a record of topic is held for its claim. A
// requester that answers anything but yes (it passed: nobody parked there can use it) ends
// that hold at once, and the record goes to the next token; that hold alone, not the
// requester's oldest (see tokens.Queue.End). One that gives no answer
// within notifyBudget (or half the hold, if shorter) is presumed gone: that hold ends and
// its token goes (tokens.Queue.Abandon), and the record is offered to the next token at
// once, so a requester that died costs one notification, not a hold per record. It may have
// been told all the same: its claim then leases what is there, as any probe does, and a
// record is never leased twice, only perhaps promised to a second peer that then finds
// nothing.
func (n *Node) notify(topic string, h tokens.Hold) {
	frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpNotify, Topic: topic, Hold: n.holdTimeout})
	if err == nil {
		budget := min(notifyBudget, n.holdTimeout/2)
		reply, err := n.exchange(context.Background(), h.To, frame, n.clock.Now().Add(budget))
		if err != nil {
			n.abandon(topic, h)
			return
		}
		answers, err := wire.DecodeReply(reply)
		if err != nil || len(answers) != 1 || answers[0].Status == wire.StatusOK {
			return
		}
	}
	n.stats.remote.passed.Add(1)
	n.endHold(topic, h, (*tokens.Queue).End)
}

// abandon ends hold h on topic and drops its requester's token (its notification got no
// answer), and offers the record to the next token.
func (n *Node) abandon(topic string, h tokens.Hold) {
	if n.endHold(topic, h, (*tokens.Queue).Abandon) {
		n.stats.remote.abandoned.Add(1)
	}
}

// endHold ends hold h on topic with end (tokens.Queue.End or Abandon) and, when h was live,
// offers the record to the next token. It reports whether h was live.
func (n *Node) endHold(topic string, h tokens.Hold, end func(*tokens.Queue, tokens.Hold, time.Time) bool) bool {
	ot := n.ownerTopic(topic, false)
	if ot == nil {
		return false
	}
	ot.mu.Lock()
	ended := end(&ot.queue, h, n.clock.Now())
	ot.mu.Unlock()
	if ended {
		n.offer(topic)
	}
	return ended
}

// serveRegister places the tokens a node left: one per (node, topic), replacing the one it
// had. Registering wakes the topic here, so a backlog is offered to the token at once.
func (n *Node) serveRegister(from string, regs []wire.Registration) []wire.Answer {
	answers := make([]wire.Answer, len(regs))
	now := n.clock.Now()
	for i, r := range regs {
		local, _, ok := n.routes.Partitions(r.Topic)
		switch {
		case n.transport == nil:
			answers[i] = answerOf(fmt.Errorf("%w: this node has no transport to notify with", ErrUnavailable), time.Time{})
			continue
		case !ok:
			answers[i] = answerOf(ErrUnknownTopic, time.Time{})
			continue
		case len(local) == 0:
			answers[i] = answerOf(ErrNotLocal, time.Time{})
			continue
		}
		ot := n.ownerTopic(r.Topic, true)
		ot.mu.Lock()
		ot.queue.Register(from, r.TTL, now)
		ot.armed.Store(true)
		ot.mu.Unlock()
		n.stats.remote.tokens.Add(1)
		n.offer(r.Topic)
	}
	return answers
}

// serveDrop removes the token a node left (the frame older releases send; tokens lapse).
func (n *Node) serveDrop(from, topic string) {
	if ot := n.ownerTopic(topic, false); ot != nil {
		ot.mu.Lock()
		ot.queue.Drop(from)
		ot.mu.Unlock()
	}
}

// serveConsume answers a probe or a claim of another node: one non-blocking scan of this
// node's partitions of the topic (the pinned one alone, when there is one), capped at
// remoteBatch records (aheadBatch for reservations) and BatchPayloadBytes of keys, payloads
// and headers, its reply bounded at ResponseLimit of encoded records with the records past
// it given back at once. A claim
// carrying the Claim flag retires the sender's hold; a plain probe never does. The reply's
// handles are remembered for cancelMemoryTTL, so a cancel that races the reply gives them
// all back.
//
// The reply is appended to acks: the acks reply of the plain acks that rode with the consume
// (wire version 16), nil for none.
func (n *Node) serveConsume(ctx context.Context, acks []byte, from, topic string, c wire.Consume) []byte {
	s := getConsumeScratch()
	defer s.release()
	reply := n.consumeReply(ctx, s, from, topic, c, ResponseLimit)
	return wire.AppendConsumeReply(acks, &reply)
}

// consumeScratch is what serving one consume works with: the records scanned and their
// deliveries, which reference the log's bytes and live only until the reply is encoded.
// Pooled, so that an owner's per-record cost is the encoding alone.
type consumeScratch struct {
	msgs       []Message
	deliveries []wire.Delivery
	// written is the most messages and deliveries a consume left in them since the scratch
	// was taken: release clears that much, not their whole capacity (a reservation's scan has
	// room for aheadBatch records and often returns half). A scan writes its messages below
	// the length it returns, clearing any it drops (partitionRead.keep).
	written int
}

var consumeScratchPool = sync.Pool{New: func() any { return new(consumeScratch) }}

func getConsumeScratch() *consumeScratch { return consumeScratchPool.Get().(*consumeScratch) }

// release drops the scratch's references to the log's bytes and pools it.
func (s *consumeScratch) release() {
	clear(s.msgs[:min(s.written, cap(s.msgs))])
	clear(s.deliveries[:min(s.written, cap(s.deliveries))])
	s.msgs, s.deliveries, s.written = s.msgs[:0], s.deliveries[:0], 0
	consumeScratchPool.Put(s)
}

// serveConsumeBatch answers a ConsumeBatch of another node: each member as serveConsume
// answers a Consume, in order, the whole reply bounded at ResponseLimit of encoded records
// (a member past the bound is answered unavailable, unserved, and asks again). A member
// whose budget ran out since the frame arrived at start is answered unavailable, unserved:
// its requester no longer waits for it.
func (n *Node) serveConsumeBatch(ctx context.Context, from, topic string, members []wire.Consume, start time.Time) []byte {
	b := wire.BeginConsumeBatchReply(make([]byte, 0, 256*len(members)), len(members))
	s := getConsumeScratch()
	defer s.release()
	used := 0
	for i := range members {
		c := &members[i]
		var reply wire.ConsumeReply
		switch {
		case used >= ResponseLimit:
			reply = refusalReply(fmt.Errorf("%w: the batch's reply is full", ErrUnavailable))
		case i > 0 && n.clock.Now().Sub(start) >= c.Budget:
			reply = refusalReply(fmt.Errorf("%w: the requester gave up: not served", ErrUnavailable))
		default:
			reply = n.consumeReply(ctx, s, from, topic, *c, ResponseLimit-used)
		}
		before := len(b)
		b = wire.AppendConsumeBatchMember(b, &reply)
		used += len(b) - before
	}
	return b
}

// consumeReply is serveConsume's reply, its encoded records bounded at limit (the first is
// always carried).
func (n *Node) consumeReply(ctx context.Context, s *consumeScratch, from, topic string, c wire.Consume, limit int) wire.ConsumeReply {
	most := remoteBatch
	if c.Reserve {
		most = aheadBatch
	}
	req := scanRequest{topic: topic, pinned: c.Pinned, max: min(max(int(c.Max), 1), most), visibility: c.Visibility,
		reserve: c.Reserve, handLater: !c.Reserve}
	if req.pinned < 0 {
		req.pinned = -1
	}
	var msgs []Message
	var err error
	if c.Visibility < 0 || c.Visibility > MaxVisibility {
		err = ErrInvalidArgument
	} else {
		msgs, err = n.scan(req, s.msgs[:0])
		s.msgs, s.written = msgs[:0], max(s.written, len(msgs))
	}
	n.stats.remote.served.Add(1)
	if c.Claim {
		n.retire(topic, from)
	}
	if len(msgs) == 0 && err != nil {
		return refusalReply(err)
	}
	var relativeTo time.Time // zero: expiries as times, for a requester before version 7
	if c.RelativeExpiry {
		relativeTo = n.clock.Now()
	}
	reply := boundedReply(msgs, relativeTo, c.Headers, limit, s.deliveries[:0])
	reply.Compact = c.Compact // a requester before version 16 reads only the other form
	s.deliveries = reply.Deliveries[:0]
	if kept := len(reply.Deliveries); kept < len(msgs) {
		n.giveBack(msgs[kept:]) // past the reply's bound: visible again at once
		msgs = msgs[:kept]
	}
	if ctx.Err() != nil {
		// The requester left before the reply: nobody will receive these.
		n.giveBack(msgs)
		return refusalReply(fmt.Errorf("%w: the requester gave up: given back", ErrUnavailable))
	}
	if len(msgs) > 0 {
		if !c.Reserve {
			n.handOver(topic, msgs)
		}
		handles := make([]inflight.Handle, len(msgs))
		for i := range msgs {
			handles[i] = msgs[i].Receipt
		}
		n.cancels.Remember(from, c.RequestID, topic, handles, n.clock.Now())
	}
	return reply
}

// handOver says that msgs, records of this node's partitions that a scan leased for a
// caller that hands them over itself (scanRequest.handLater), go to their consumer: their
// attempts count from here (inflight.Shard.Handed), one call per run of one partition.
func (n *Node) handOver(topic string, msgs []Message) {
	var leases [64]inflight.Lease // a run's handles, a chunk at a time
	for start := 0; start < len(msgs); {
		p := msgs[start].Partition
		end := start + 1
		for end < len(msgs) && msgs[end].Partition == p {
			end++
		}
		if shard, ok := n.tracker.Lookup(topic, p); ok && shard.CountsAttempts() {
			for i := start; i < end; i += len(leases) {
				k := 0
				for ; k < len(leases) && i+k < end; k++ {
					leases[k] = inflight.Lease{Handle: msgs[i+k].Receipt}
				}
				shard.Handed(leases[:k])
			}
		}
		start = end
	}
}

// cancelMemoryTTL is how long an owner remembers the receipt handles of a forwarded consume's
// reply, so that a Cancel naming the request can give them all back at once (see
// internal/cancelmemory). A Cancel that comes later finds nothing, and the records come back
// when their leases lapse. The latest a Cancel comes is when a reply was lost at once: its
// requester sends the Cancel at the end of the consume's budget (ProbeBudget at most, from
// before the reply), and the Cancel itself travels within cancelBudget; the memory outlives
// both by half a second, on the owner's own clock, so no clock skew between the nodes
// shortens it. (Every reply is held this long, so it is kept as short as that allows: the
// memory's cost per delivery grows with the replies it holds.)
const cancelMemoryTTL = ProbeBudget + cancelBudget + 500*time.Millisecond

// cancelBudget bounds a Cancel's round trip (and a slow owner's recheck, which is one).
const cancelBudget = 500 * time.Millisecond

// serveCancel gives back every record of a reply whose request was cancelled as it came
// back (within cancelMemoryTTL of the reply).
func (n *Node) serveCancel(from string, id uint64) {
	topic, handles, ok := n.cancels.Take(from, id, n.clock.Now())
	if !ok {
		return
	}
	now := n.clock.Now()
	for _, h := range handles {
		if shard, ok := n.tracker.Lookup(topic, h.Partition); ok && shard.GiveBack(now, h) == nil {
			n.wake(topic, h.Partition)
		}
	}
	n.stats.remote.cancelled.Add(uint64(len(handles)))
}

// serveReplay answers another node's replay of a partition this node owns.
func (n *Node) serveReplay(ctx context.Context, topic string, r wire.Replay) []byte {
	var msgs []Message
	local, _, ok, verdict := n.partitions(topic)
	err := ErrUnknownTopic
	switch {
	case !ok:
	case verdict.refuses(r.Partition) != nil:
		err = verdict.refuses(r.Partition)
	case !slices.Contains(local, r.Partition):
		err = ErrNotLocal // never forwarded again
	default:
		msgs, err = n.replayLocal(ctx, topic, r.Partition, r.Offset, int(r.Limit))
	}
	if len(msgs) == 0 && err != nil {
		return consumeRefusal(err)
	}
	reply := boundedReply(msgs, time.Time{}, r.Headers, ResponseLimit, nil) // a replay holds no leases: what is cut is only not sent
	return wire.AppendConsumeReply(nil, &reply)
}

// consumeRefusal is the consume reply answering err, with no records.
func consumeRefusal(err error) []byte {
	reply := refusalReply(err)
	return wire.AppendConsumeReply(nil, &reply)
}

// refusalReply is consumeRefusal, not encoded.
func refusalReply(err error) wire.ConsumeReply {
	a := answerOf(err, time.Time{})
	return wire.ConsumeReply{Status: a.Status, Message: a.Message}
}

// boundedReply carries msgs in order until the next would take the reply past limit bytes
// of encoded records (the first is always carried); the caller deals with the rest. With
// relativeTo set, each lease's expiry goes as its time left from then; with headers set
// (the requester asked for them, so it speaks wire version 9), each record's headers go
// too, and otherwise they are dropped: an older requester could not read them. The
// deliveries are appended to into.
func boundedReply(msgs []Message, relativeTo time.Time, headers bool, limit int, into []wire.Delivery) wire.ConsumeReply {
	reply := wire.ConsumeReply{Deliveries: slices.Grow(into[:0], len(msgs))}
	var all []wire.Header // every delivery's headers, in one allocation
	if headers {
		count := 0
		for i := range msgs {
			count += len(msgs[i].Headers)
		}
		if count > 0 {
			all = make([]wire.Header, 0, count)
		}
	}
	size := 0
	for i := range msgs {
		// Written where it goes (the capacity is there), and kept if the bound allows.
		d := &reply.Deliveries[:i+1][i]
		setDelivery(d, &msgs[i], relativeTo)
		if all != nil && len(msgs[i].Headers) > 0 {
			start := len(all)
			for _, h := range msgs[i].Headers {
				all = append(all, wire.Header(h))
			}
			d.Headers = all[start:len(all):len(all)]
		}
		if size += wire.DeliverySize(d); i > 0 && size > limit {
			*d = wire.Delivery{} // past the slice's end: nothing of the record kept
			break
		}
		reply.Deliveries = reply.Deliveries[:i+1]
	}
	return reply
}

// setDelivery makes *d the delivered record m as the wire carries it: its lease's expiry as
// a time, or, with relativeTo set, as the time left from then (at least a nanosecond: zero
// means none).
func setDelivery(d *wire.Delivery, m *Message, relativeTo time.Time) {
	*d = wire.Delivery{
		Partition: m.Partition, Offset: m.Offset, Nonce: m.Receipt.Nonce,
		Attempt: m.Attempt, Reason: uint8(m.Reason), Fence: m.Fence, Key: m.Key, Value: m.Value,
	}
	switch {
	case m.Expiry.IsZero():
	case !relativeTo.IsZero():
		// As Sub would (an expiry is a lease's, a wall time: Sub reads the wall clock of
		// both), without the check for a difference past Duration's range that Sub makes
		// with a second Add: a lease ends within MaxVisibility of now.
		d.Expiry = max(m.Expiry.UnixNano()-relativeTo.UnixNano(), 1)
	default:
		d.Expiry = m.Expiry.UnixNano()
	}
	if !m.Timestamp.IsZero() {
		d.Timestamp = m.Timestamp.UnixNano()
	}
}

// forgetTopicTokens drops what the node holds for a deleted topic on either side.
func (n *Node) forgetTopicTokens(topic string) {
	if v, ok := n.ownerTopics.LoadAndDelete(topic); ok {
		ot := v.(*ownerTopic)
		ot.mu.Lock()
		if ot.stopTimer != nil {
			ot.stopTimer()
			ot.stopTimer = nil
		}
		ot.mu.Unlock()
	}
	n.requester.forget(topic)
}
