package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/acklane"
	"narad.dev/consume/internal/wire"
)

// The settles of a receipt handle (Ack, AckAsync, AckDurable, Extend, Nack, Release, Reject,
// AckBatch) and their local steps: whether a record is applied here or goes to its
// partition's owner (remoteOrLocal, ownerFor, ownerOf), and its application to a shard this
// node serves (settleLocal, settleHere, apply, ackManyLocal), which Serve uses too for what
// other nodes forward. Sending a settle to its owner is forward.go's.

// Ack settles the delivery a receipt handle names. Only the live lease's handle settles:
// a handle whose lease expired (leased again or not), was nacked, or comes from before a
// restart gets inflight.ErrGone (the 410) and changes nothing; a handle of an offset already
// settled (a repeated ack) gets inflight.ErrAlreadySettled, which matches ErrGone too and
// tells an in-process caller why; a handle no lease can have (the zero Handle of a replay, a
// negative partition or offset) gets inflight.ErrMalformedHandle (a 400). An in-process
// consumer passes Message.Receipt as it came; a host that carries handles as text parses
// them with ParseHandle first.
//
// The ack is in memory at once, in the page cache within about 100 ms and on disk within
// about the commit interval; a graceful Close persists it. An ack for a partition another
// node owns is forwarded to it (with Config.Transport set), and answered as the owner
// answers; ErrUnavailable (503) when the owner is unknown or the 2 s budget runs out,
// ErrTransport (502) when no reply came back.
//
// ctx is not used for an ack applied here: it is in memory when Ack returns, whatever ctx.
// For a forwarded ack, ctx bounds only its wait for a slot to the owner (it then answers
// ctx's error, not applied); once sent, it is answered as the owner answers or by its budget.
func (n *Node) Ack(ctx context.Context, topic string, handle Handle) error {
	_, err := n.settle(ctx, topic, handle, opAck, 0)
	return err
}

// AckAsync is Ack that does not wait: it returns at once, and done is called exactly once
// with what Ack would have returned (a nil done is fire and forget). It is for consumers
// that settle many records one at a time and need not stop for each answer, as librdkafka's
// asynchronous commit with its callback is, or a broker whose own protocol's acks carry no
// reply: forwarded acks to one owner share RPCs and the goroutines that answer them, and
// none parks a goroutine of the caller's (with 512 unanswered, a third to a half of the CPU
// of 512 blocked in Ack; a fifth over HTTP).
//
// An ack applied here, or refused before it could leave (a malformed handle, a closed node,
// no live owner), calls done on the caller's goroutine before AckAsync returns. A forwarded
// one calls it from a goroutine of the node once the owner answered or the 2 s budget ran
// out (ErrUnavailable when it never left, ErrTransport when no reply came back, as for Ack).
// done must return promptly: the answers to one RPC's acks are given one after the other,
// and the next RPC to that owner waits for them. It may call the node again (AckAsync
// included), but not Close or Shutdown: Close waits until every done has returned.
func (n *Node) AckAsync(topic string, handle Handle, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	if !n.life.fence.enter() {
		done(ErrClosed)
		return
	}
	var owner string
	var routes remoteRoutes // read on the way to a partition another node owns
	forwarded := false
	rec, err := settleRecord(topic, handle, opAck, 0)
	if err == nil {
		var shard *inflight.Shard
		if shard, routes, err = n.shardOrRoutes(topic, rec.handle.Partition); err == nil {
			_, err = n.settleLocal(context.Background(), shard, n.clock.Now(), topic, rec)
		}
		if err != nil && (shard == nil || err == inflight.ErrMoved) {
			if owner, err = n.ownerAfter(topic, rec.handle.Partition, err, routes); err == nil {
				forwarded = true
			}
		}
	}
	if !forwarded {
		defer n.life.fence.leave() // after done, even if it panics
		done(err)
		return
	}
	n.forwardAsync(owner, topic, routes.state, rec, done) // which leaves the fence once done returned
}

// AckDurable is Ack that returns only once the ack is on disk: after a writeout of the
// partition that the first durable ack starts at once. It is a group commit, as a
// database's log is: durable acks that arrive while that sync runs share the next one, so a
// lone durable ack costs about one sync and many cost a small fraction of a sync each. It is
// for hosts that need Kafka-like durability for some acks; Ack stays asynchronous. A retried
// durable ack of a settled offset waits as well, then answers ErrAlreadySettled. If the
// partition's state cannot be made durable (the partition was dropped or its directory
// replaced) the error says so (ErrShardGone, ErrStranded): the ack is in memory only. ctx bounds
// only the wait for the disk: an AckDurable that answers ctx's error has still applied the
// ack, which reaches the disk at the committer's usual pace.
//
// A durable ack of a partition another node owns is forwarded to it, and answered once it is
// on the owner's disk (within the 2 s budget). An owner on a release before the node wire's
// version 7 cannot wait for its disk: the ack is not sent, and answers ErrUnavailable.
func (n *Node) AckDurable(ctx context.Context, topic string, handle Handle) error {
	_, err := n.settle(ctx, topic, handle, opAckDurable, 0)
	return err
}

// Extend re-arms the lease a handle names to expire d from now (the topic's visibility
// timeout when d is zero), within the topic's MaxExtension and MaxLeaseLifetime, and returns
// the new expiry. A negative d or one above MaxVisibility is ErrInvalidArgument. Errors
// otherwise as for Ack.
func (n *Node) Extend(ctx context.Context, topic string, handle Handle, d time.Duration) (time.Time, error) {
	return n.settle(ctx, topic, handle, opExtend, d)
}

// Nack releases the lease a handle names; the delivery counts as an attempt. The record
// stays invisible for delay; with delay zero, for what the topic's Backoff says after this
// attempt, and with no Backoff it is visible again at once and a parked consumer gets it. A
// negative delay or one above MaxDelay is ErrInvalidArgument. Errors otherwise as for Ack.
func (n *Node) Nack(ctx context.Context, topic string, handle Handle, delay time.Duration) error {
	_, err := n.settle(ctx, topic, handle, opNack, delay)
	return err
}

// NackNow is Nack that makes the record visible again at once, whatever the topic's Backoff:
// a parked consumer gets it, and the delivery counts as an attempt (MaxDeliveries may
// quarantine the record instead), unlike Release. It is SQS's ChangeMessageVisibility to 0.
//
// A nack-now of a partition another node owns is forwarded to it. An owner on a release
// before the node wire's version 14 (or a node pinned below it, Config.WireVersion) knows no
// nack-now, and gets a Nack with no delay instead: counted as well, but invisible there for
// the topic's Backoff. Errors otherwise as for Ack.
func (n *Node) NackNow(ctx context.Context, topic string, handle Handle) error {
	_, err := n.settle(ctx, topic, handle, opNackNow, 0)
	return err
}

// Release gives the lease a handle names back unprocessed, as if it had never been granted:
// the record is visible again at once, a parked consumer gets it, and the delivery does not
// count as an attempt. A consumer that shuts down calls it for what it holds but has not
// begun to process. A release of a partition another node owns is forwarded to it; an owner
// on a release before the node wire's version 7 knows no release, and gets a nack with no
// delay instead, which there counts as an attempt. Errors otherwise as for Ack.
func (n *Node) Release(ctx context.Context, topic string, handle Handle) error {
	_, err := n.settle(ctx, topic, handle, opRelease, 0)
	return err
}

// Reject settles the delivery a handle names as failed for good, as Kafka share groups'
// REJECT and JetStream's TERM do: the record is quarantined at once, whatever its attempts
// and the topic's MaxDeliveries, exactly as a record that reached MaxDeliveries is. It is
// listed by Quarantined, counted in Stats (Shards.Quarantined, and Shards.Rejected), passed
// by the frontier, persisted, and Config.OnQuarantine is told (on the partition's owner);
// Requeue brings it back. For a consumer that knows a record will never succeed (it cannot
// be parsed, say), so that it costs no further deliveries.
//
// A reject of a partition another node owns is forwarded to it. An owner on a release before
// the node wire's version 10 (or a node pinned below it, Config.WireVersion) knows no
// reject: it is not applied, and answers ErrUnsupportedOp (a 501); no nack or ack stands in
// for it. Errors otherwise as for Ack.
func (n *Node) Reject(ctx context.Context, topic string, handle Handle) error {
	_, err := n.settle(ctx, topic, handle, opReject, 0)
	return err
}

// AckBatch acks several handles of one topic and answers each on its own, in order, with
// what Ack would have answered. Handles of partitions this node owns are applied here, those
// of one partition together under one lock of its shard; the others are grouped by owner,
// and each owner gets one frame per 1,024 handles (an Acks frame of plain acks from wire
// version 16, an AckBatch to an owner before it; per 64 handles to an owner before version
// 13; single ops to one before AckBatch), the owners in parallel, each on the 2 s budget. A handle whose owner
// the routes do not name answers ErrUnavailable with no RPC made; a transport failure
// answers ErrTransport for that owner's handles only.
func (n *Node) AckBatch(ctx context.Context, topic string, handles []Handle) []error {
	errs := make([]error, len(handles))
	if !n.life.fence.enter() {
		for i := range errs {
			errs[i] = ErrClosed
		}
		return errs
	}
	defer n.life.fence.leave()
	if err := checkTopic(topic); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	scratch := ackPool.Get().(*ackScratch)
	defer scratch.put()
	byPartition := scratch.byPartition(handles, errs)
	groups := n.ackHere(topic, handles, byPartition, errs, scratch)
	n.ackAtOwners(ctx, topic, handles, groups, errs)
	return errs
}

// byPartition returns the indexes of the well-formed handles, by partition (in the caller's
// order within one), and answers the others in errs.
func (s *ackScratch) byPartition(handles []Handle, errs []error) []int {
	byPartition := s.order[:0] // indexes of the well-formed handles, by partition
	sorted := true             // a batch from one consume usually is
	for i, h := range handles {
		if err := h.Check(); err != nil {
			errs[i] = err
			continue
		}
		if len(byPartition) > 0 && h.Partition < handles[byPartition[len(byPartition)-1]].Partition {
			sorted = false
		}
		byPartition = append(byPartition, i)
	}
	s.order = byPartition
	if !sorted {
		slices.SortStableFunc(byPartition, func(a, b int) int { return cmp.Compare(handles[a].Partition, handles[b].Partition) })
	}
	return byPartition
}

// ackHere acks the handles byPartition lists whose partitions this node serves, those of one
// partition under one lock of its shard, and answers each in errs. It returns the others
// grouped by the owner they go to (nil: none); one with no owner to go to is answered in
// errs.
func (n *Node) ackHere(topic string, handles []Handle, byPartition []int, errs []error, scratch *ackScratch) (groups map[string][]int) {
	now := n.clock.Now()
	for len(byPartition) > 0 {
		p := handles[byPartition[0]].Partition
		run := 1
		for run < len(byPartition) && handles[byPartition[run]].Partition == p {
			run++
		}
		indexes := byPartition[:run]
		byPartition = byPartition[run:]
		shard, err := n.localShard(topic, p)
		switch {
		case err == nil && indexes[run-1]-indexes[0] == run-1:
			// The run is handles[first:last+1] in order (the indexes ascend): acked where
			// it lies, with no copy.
			first, last := indexes[0], indexes[run-1]
			n.ackManyLocal(shard, now, handles[first:last+1], errs[first:last+1])
		case err == nil:
			hs, es := scratch.handles[:0], slices.Grow(scratch.errs[:0], run)[:run]
			for _, i := range indexes {
				hs = append(hs, handles[i])
			}
			n.ackManyLocal(shard, now, hs, es)
			for j, i := range indexes {
				errs[i] = es[j]
			}
			scratch.handles, scratch.errs = hs, es
		}
		if err == nil {
			// One acquisition of the shard's lock answered the run: all moved, or none.
			if errs[indexes[0]] != inflight.ErrMoved {
				continue
			}
			err = inflight.ErrMoved
		}
		owner, err := n.ownerFor(topic, p, err)
		if err != nil {
			for _, i := range indexes {
				errs[i] = err
			}
			continue
		}
		if groups == nil {
			groups = map[string][]int{}
		}
		groups[owner] = append(groups[owner], indexes...)
	}
	return groups
}

// ackAtOwners sends each owner its group of handles (indexes into handles), in batches
// (see settleAtOwner) in the caller's order, the owners in parallel, and answers each handle in
// errs as its owner answered it. The last owner's go from the caller's goroutine: a batch
// of one owner's records (one consume's, most often) starts no goroutine, whose stack would
// grow afresh for every batch.
func (n *Node) ackAtOwners(ctx context.Context, topic string, handles []Handle, groups map[string][]int, errs []error) {
	if ra := n.aheadOf(topic); ra != nil {
		ra.settled(handles...) // the acks confirm what was read ahead at the owners
	}
	var wg sync.WaitGroup
	left := len(groups)
	for owner, indexes := range groups {
		slices.Sort(indexes) // the owner applies them in the caller's order
		send := func() {
			n.settleAtOwner(ctx, owner, topic, opAck, len(indexes),
				func(j int) Handle { return handles[indexes[j]] },
				func(j int, a wire.Answer) { _, errs[indexes[j]] = answerResult(a) })
		}
		if left--; left == 0 {
			send()
		} else {
			wg.Go(send)
		}
	}
	wg.Wait()
}

// settleAtOwner sends owner count settles of op (an ack, a confirm or a release: no
// argument) of topic, of handle(0) to handle(count-1), in frames in order (of up to
// wire.MaxLargeBatch records, or maxBatch to an owner that reads no larger ones: see
// largeBatches), each batch within ForwardBudget of its send and in one frame with the
// batches of other callers queued meanwhile (see batchQueue), and gives answered the
// owner's answer to each. Plain acks go as an Acks frame, the others as an AckBatch (see
// sendGroup). What a batch is sorted out in is pooled: a gateway's AckBatch allocates
// nothing per record on its way to the owner.
func (n *Node) settleAtOwner(ctx context.Context, owner, topic string, op byte, count int, handle func(i int) Handle, answered func(i int, a wire.Answer)) {
	l := n.lane(owner)
	s := settlePool.Get().(*settleScratch)
	defer s.put()
	for start := 0; start < count; {
		now := n.clock.Now()
		most := maxBatch // records in a frame
		if n.largeBatches(l, now) {
			most = wire.MaxLargeBatch
		}
		size := min(most, count-start)
		s.grow(size)
		b := &queuedBatch{topic: topic, op: op, handles: s.handles[:size], deadline: now.Add(ForwardBudget), values: ctx, answers: s.answers[:size]}
		for j := range size {
			b.handles[j] = wire.Handle(handle(start + j))
		}
		n.sendBatch(l, b, most)
		for j, a := range b.answers {
			answered(start+j, a)
		}
		start += size
	}
}

// batchesOut is how many batches of callers (settleAtOwner's) a node has out to one owner
// at once; past it they queue and leave together (see batchQueue).
const batchesOut = 2

// batchQueue is the batches settleAtOwner sends one owner (consumers' AckBatch, and the
// confirms and releases of reading ahead): while batchesOut are out, the next ones queue,
// and the first of them to leave carries every batch of its topic queued by then, up to a
// frame's worth, so that consumers acking their batches at once share frames. A batch
// queued waits for one out to come back, whose RPC its budget bounds; the records keep
// their own budgets meanwhile, and one whose budget was spent before its frame left is
// answered 503, unsent (see rpc). A queued batch of plain acks may instead ride in a frame
// of reservations to the owner that leaves meanwhile (see riders).
type batchQueue struct {
	mu      sync.Mutex
	out     int // the batches out, each with a caller sending it
	waiting []*queuedBatch
}

// queuedBatch is one caller's batch: settles of one op and topic, with no argument, due by
// one deadline.
type queuedBatch struct {
	topic    string
	op       byte
	handles  []wire.Handle
	deadline time.Time
	values   context.Context // the caller's, for its values (a frame carries its first batch's)
	answers  []wire.Answer   // one per handle, given by the frame that carried the batch
	// turn is told when another's frame carried the batch (answered) or when it is the
	// batch's turn to leave, with those queued behind it.
	turn     chan struct{}
	answered bool
}

// sendBatch sends b to the owner of l, in one frame with the batches of its topic queued
// meanwhile (see batchQueue), limit records in all at most, and puts the owner's answers in
// b.answers.
func (n *Node) sendBatch(l *lane, b *queuedBatch, limit int) {
	q := &l.Peer.batches
	q.mu.Lock()
	if q.out < batchesOut {
		q.out++
	} else {
		b.turn = make(chan struct{}, 1)
		q.waiting = append(q.waiting, b)
		q.mu.Unlock()
		<-b.turn
		if b.answered {
			return
		}
		q.mu.Lock() // its turn: the slot out passed to it
	}
	group := q.groupLocked(b, limit)
	q.mu.Unlock()
	defer q.passOn()
	n.sendGroup(l, group)
	answerQueued(group[1:])
}

// passOn gives the slot of a batch that came back to the first batch queued, whose turn it
// is to leave, or frees it.
func (q *batchQueue) passOn() {
	q.mu.Lock()
	if len(q.waiting) == 0 {
		q.out--
		q.mu.Unlock()
		return
	}
	next := q.waiting[0]
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
	q.mu.Unlock()
	next.turn <- struct{}{}
}

// groupLocked takes out of the queue the batches of first's topic that fit in one frame of
// limit records with first, and returns them after first, in the order they queued.
func (q *batchQueue) groupLocked(first *queuedBatch, limit int) []*queuedBatch {
	if len(q.waiting) == 0 {
		return []*queuedBatch{first}
	}
	group, _ := q.takeWaitingLocked([]*queuedBatch{first}, len(first.handles), func(b *queuedBatch, size int) bool {
		return b.topic == first.topic && size+len(b.handles) <= limit
	})
	return group
}

// takeWaitingLocked takes the batches take accepts out of the queue, in the order they
// queued, appending them to taken; size counts the records taken, from the size given, and
// take is asked with it.
func (q *batchQueue) takeWaitingLocked(taken []*queuedBatch, size int, take func(b *queuedBatch, size int) bool) ([]*queuedBatch, int) {
	kept := q.waiting[:0]
	for _, b := range q.waiting {
		if take(b, size) {
			taken = append(taken, b)
			size += len(b.handles)
			continue
		}
		kept = append(kept, b)
	}
	clear(q.waiting[len(kept):])
	q.waiting = kept
	return taken, size
}

// sendGroup sends the batches of group (of one topic) to the owner of l in one frame and puts
// each settle's answer in its batch's answers: plain acks alone as an Acks frame (see
// sendPlainAcks), anything else, or plain acks to an owner that reads no Acks frame, as call
// sends settles.
func (n *Node) sendGroup(l *lane, group []*queuedBatch) {
	now := n.clock.Now()
	if n.plainAcksTo(l, now) && allPlainAcks(group) && n.sendPlainAcks(l, now, group) {
		return
	}
	s := groupPool.Get().(*groupScratch)
	defer s.put()
	for _, b := range group {
		for _, h := range b.handles {
			s.blocks = append(s.blocks, acklane.Ack{Topic: b.topic, Record: wire.Record{Op: b.op, Handle: h}, Deadline: b.deadline, Values: b.values})
		}
	}
	for i := range s.blocks {
		s.acks = append(s.acks, &s.blocks[i])
	}
	answers := group[0].answers // one batch (the usual case) is answered in place
	if len(group) > 1 {
		answers = slices.Grow(s.answers[:0], len(s.acks))[:len(s.acks)]
		s.answers = answers
	}
	n.call(l, n.clock.Now(), s.acks, answers)
	if len(group) > 1 {
		for _, b := range group {
			answers = answers[copy(b.answers, answers):]
		}
	}
}

// groupScratch is what sendGroup builds a frame of settles in (the settle blocks call
// takes), pooled: the confirms and releases of reading ahead go this way.
type groupScratch struct {
	blocks  []acklane.Ack
	acks    []*acklane.Ack
	answers []wire.Answer
}

var groupPool = sync.Pool{New: func() any { return new(groupScratch) }}

// put returns s to the pool, keeping none of the callers' contexts or the owners' messages.
func (s *groupScratch) put() {
	clear(s.blocks)
	clear(s.acks)
	clear(s.answers)
	s.blocks, s.acks, s.answers = s.blocks[:0], s.acks[:0], s.answers[:0]
	groupPool.Put(s)
}

// plainAcksTo reports whether plain acks go to the owner of l at now as an Acks frame: this
// node speaks version 16, and the owner refused neither it nor anything older lately.
func (n *Node) plainAcksTo(l *lane, now time.Time) bool {
	return n.settleForm(l, now) >= wire.V16 && !l.Singles(now)
}

// allPlainAcks reports whether the batches of group are all plain acks.
func allPlainAcks(group []*queuedBatch) bool {
	for _, b := range group {
		if b.op != opAck {
			return false
		}
	}
	return true
}

// sendPlainAcks sends the plain acks of group in one Acks frame (see exchangeAcks),
// its budget the least of theirs, and puts each one's answer in its batch's answers; a batch
// whose budget was spent by now is answered 503, unsent. It reports false, with nothing
// answered, when the owner refused the op (an older release), which is remembered for
// olderPeerMemory.
func (n *Node) sendPlainAcks(l *lane, now time.Time, group []*queuedBatch) bool {
	s := plainPool.Get().(*plainScratch)
	defer s.put()
	var deadline time.Time
	var least time.Duration
	var values context.Context
	for _, b := range group {
		if !now.Before(b.deadline) {
			continue
		}
		if budget := b.deadline.Sub(now); len(s.handles) == 0 || budget < least {
			least = budget
		}
		if len(s.handles) == 0 {
			values = b.values
		}
		s.handles = append(s.handles, b.handles...)
		if b.deadline.After(deadline) {
			deadline = b.deadline
		}
	}
	answers := slices.Grow(s.answers[:0], len(s.handles))[:len(s.handles)]
	s.answers = answers
	if len(s.handles) > 0 {
		frame, err := wire.EncodeAcks(group[0].topic, least, s.handles)
		if n.exchangeAcks(values, l.Owner(), frame, err, deadline, answers) == statusPlainAcksRefused {
			l.Refuse(acklane.PlainAcks, n.clock.Now().Add(olderPeerMemory))
			return false
		}
	}
	for _, b := range group {
		if !now.Before(b.deadline) {
			eachAnswer(b.answers, spentBeforeSent)
			continue
		}
		answers = answers[copy(b.answers, answers):]
	}
	return true
}

// plainScratch is what sendPlainAcks gathers a frame's acks and answers in, pooled.
type plainScratch struct {
	handles []wire.Handle
	answers []wire.Answer
}

var plainPool = sync.Pool{New: func() any { return new(plainScratch) }}

func (s *plainScratch) put() {
	clear(s.answers) // their messages
	s.handles, s.answers = s.handles[:0], s.answers[:0]
	plainPool.Put(s)
}

// answerQueued tells the callers of batches, which wait in the queue, that the frame that
// carried them came back: each batch's answers are in.
func answerQueued(batches []*queuedBatch) {
	for _, b := range batches {
		b.answered = true
		b.turn <- struct{}{}
	}
}

// takeRiders takes out of the queue the batches of topic, waiting for a slot, that are
// plain acks with budget left at now, up to limit acks in all, in the order they queued:
// they ride in a frame of reservations to the owner (see riders), which leaves now, rather
// than wait for a batch out to come back.
func (q *batchQueue) takeRiders(topic string, now time.Time, limit int) (riding []*queuedBatch, acks int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.takeWaitingLocked(nil, 0, func(b *queuedBatch, acks int) bool {
		return b.topic == topic && b.op == opAck && now.Before(b.deadline) && acks+len(b.handles) <= limit
	})
}

// largeBatches reports whether a frame of settles to the owner of l may carry more than
// maxBatch records at now: this node speaks version 13, and the owner did not refuse such a
// batch within the last olderPeerMemory.
func (n *Node) largeBatches(l *lane, now time.Time) bool {
	return n.wireVersion >= wire.V13 && !l.Refuses(acklane.LargeBatch, now)
}

// settleScratch is what settleAtOwner sorts one batch out in, grown to the largest batch it
// sent.
type settleScratch struct {
	handles []wire.Handle
	answers []wire.Answer
}

var settlePool = sync.Pool{New: func() any { return new(settleScratch) }}

// grow makes room in s for a batch of size.
func (s *settleScratch) grow(size int) {
	if len(s.handles) < size {
		s.handles = make([]wire.Handle, size)
		s.answers = make([]wire.Answer, size)
	}
}

// put returns s to the pool, keeping none of the owners' messages.
func (s *settleScratch) put() {
	clear(s.answers)
	settlePool.Put(s)
}

// ackScratch holds what an AckBatch works with, pooled so that a local batch allocates only
// its answers.
type ackScratch struct {
	order   []int
	handles []inflight.Handle
	errs    []error
}

var ackPool = sync.Pool{New: func() any { return new(ackScratch) }}

func (s *ackScratch) put() {
	clear(s.errs[:cap(s.errs)])
	ackPool.Put(s)
}

// settle parses a handle and applies op (an ack, an extend by arg, a nack with delay arg)
// to the live shard of its partition here, or forwards it to the partition's owner. A
// partition this node owns but has not touched since it started is loaded, so that a handle
// of an offset settled before the restart answers ErrAlreadySettled rather than ErrGone.
func (n *Node) settle(ctx context.Context, topic string, handle Handle, op byte, arg time.Duration) (time.Time, error) {
	if !n.life.fence.enter() {
		return time.Time{}, ErrClosed
	}
	defer n.life.fence.leave()
	rec, err := settleRecord(topic, handle, op, arg)
	if err != nil {
		return time.Time{}, err
	}
	return n.remoteOrLocal(ctx, topic, rec)
}

// settleRecord checks a settle's arguments and returns the record it applies.
func settleRecord(topic string, h Handle, op byte, arg time.Duration) (wireRecord, error) {
	if err := h.Check(); err != nil {
		return wireRecord{}, err
	}
	if err := checkTopic(topic); err != nil {
		return wireRecord{}, err
	}
	if err := checkDuration(op, arg); err != nil {
		return wireRecord{}, err
	}
	return wireRecord{op: op, handle: h, arg: arg}, nil
}

// checkDuration refuses, before anything is applied or forwarded, an extension or a
// visibility that is negative or above MaxVisibility and a nack delay that is negative or
// above MaxDelay.
func checkDuration(op byte, d time.Duration) error {
	limit := MaxVisibility
	if op == opNack {
		limit = MaxDelay
	}
	if d < 0 || d > limit {
		return fmt.Errorf("%w: %w: %v (at most %v)", ErrInvalidArgument, inflight.ErrInvalidDuration, d, limit)
	}
	return nil
}

// remoteOrLocal applies a record here when this node owns its partition, and forwards it to
// the owner otherwise (with a Transport configured); an owner the routes do not name is
// unavailable, with no RPC made.
func (n *Node) remoteOrLocal(ctx context.Context, topic string, r wireRecord) (time.Time, error) {
	shard, routes, err := n.shardOrRoutes(topic, r.handle.Partition)
	if err == nil {
		// The clock is read only for a record applied here.
		if expiry, err := n.settleLocal(ctx, shard, n.clock.Now(), topic, r); err != inflight.ErrMoved {
			return expiry, err
		}
		err = inflight.ErrMoved // handed off since it was found: the new owner has the lease
	}
	owner, err := n.ownerAfter(topic, r.handle.Partition, err, routes)
	if err != nil {
		return time.Time{}, err
	}
	return n.forward(ctx, owner, topic, r)
}

// ownerFor returns the owner to forward a record of partition to, given why localShard did
// not find it here (or why applying it here failed): ErrNotLocal, with a Transport
// configured, names the owner; so does ErrMoved (the partition was handed off from here)
// once the routes name another owner, and until then it is the answer; any other reason is
// the answer. An owner the routes do not name, or one that is down, is unavailable, with no
// RPC made.
func (n *Node) ownerFor(topic string, partition int32, notHere error) (string, error) {
	return n.ownerAfter(topic, partition, notHere, remoteRoutes{})
}

// ownerAfter is ownerFor given the routes shardOrRoutes read on its way to notHere (zero:
// none), which it reads again only if there are none.
func (n *Node) ownerAfter(topic string, partition int32, notHere error, routes remoteRoutes) (string, error) {
	moved := notHere != ErrNotLocal && errors.Is(notHere, ErrMoved) // the common case first
	if !(moved || errors.Is(notHere, ErrNotLocal)) || n.transport == nil {
		return "", notHere
	}
	if moved {
		if local, _, _ := n.routes.Partitions(topic); slices.Contains(local, partition) {
			return "", notHere // the routes have not moved on yet
		}
	}
	owner, ok, err := n.ownerIn(topic, partition, routes)
	switch {
	case err != nil:
		return "", err
	case !ok && moved:
		return "", notHere
	case !ok:
		return "", fmt.Errorf("%w: no owner of %s/%d", ErrUnavailable, topic, partition)
	}
	if n.down(owner) {
		return "", fmt.Errorf("%w: the owner of %s/%d is down", ErrUnavailable, topic, partition)
	}
	return owner, nil
}

// ownerOf returns the node that owns a partition, from the routes; err is the host's
// answer refused (ErrHostContract: an owner named "", or routes that name the partition
// wrongly), and then there is no owner to forward to.
func (n *Node) ownerOf(topic string, partition int32) (owner string, ok bool, err error) {
	return n.ownerIn(topic, partition, remoteRoutes{})
}

// ownerIn is ownerOf in routes, read already and judged sound for partition (none: read
// here).
func (n *Node) ownerIn(topic string, partition int32, routes remoteRoutes) (owner string, ok bool, err error) {
	if n.ownerFinder != nil {
		if owner, ok = n.ownerFinder.Owner(topic, partition); ok && owner == "" {
			return "", false, n.nameless(topic, partition)
		}
		return owner, ok, nil
	}
	remote := routes.remote
	if remote == nil {
		read := n.readRoutes(topic)
		if err := read.verdict.refuses(partition); err != nil {
			return "", false, err
		}
		remote = read.remote
	}
	for owner, parts := range remote {
		for _, p := range parts {
			if p == partition {
				return owner, true, nil
			}
		}
	}
	return "", false, nil
}

// settleLocal is settleHere on a partition this node serves, within its ownership grant at
// now: a shard whose grant lapsed answers ErrMoved, unless the host renewed the grant, and
// then the record is applied.
func (n *Node) settleLocal(ctx context.Context, shard *inflight.Shard, now time.Time, topic string, r wireRecord) (time.Time, error) {
	if err := n.verifyBeforeSettle(shard); err != nil {
		return time.Time{}, err
	}
	expiry, err := n.settleHere(ctx, shard, now, topic, r)
	if n.lapsedRetry(shard, now, err) {
		expiry, err = n.settleHere(ctx, shard, now, topic, r)
	}
	return expiry, err
}

// settleHere is apply, and for a durable ack the wait until the partition's state is on
// disk (within ctx): a retried durable ack of a settled offset waits too, then answers
// ErrAlreadySettled. An ack that could not be made durable answers why (ErrShardGone,
// ErrStranded, ctx's error), though it was applied in memory.
func (n *Node) settleHere(ctx context.Context, shard *inflight.Shard, now time.Time, topic string, r wireRecord) (time.Time, error) {
	expiry, err := n.apply(shard, now, topic, r)
	if r.op != opAckDurable || (err != nil && !errors.Is(err, inflight.ErrAlreadySettled)) {
		return expiry, err
	}
	if werr := n.committer.Durable(ctx, topic, r.handle.Partition); werr != nil {
		return expiry, werr
	}
	return expiry, err
}

// apply applies one record at now to shard, a partition of topic this node owns: a durable
// ack as an ack (settleHere waits for its disk), an ExtendLeft as an extend (serveOne answers
// it with the time left). A release wakes the partition's consumers: the record is visible
// again.
func (n *Node) apply(shard *inflight.Shard, now time.Time, topic string, r wireRecord) (time.Time, error) {
	switch r.op {
	case opExtend, wire.OpExtendLeft:
		return shard.Extend(now, r.handle, r.arg)
	case opNack:
		return time.Time{}, shard.Nack(now, r.handle, r.arg)
	case opNackNow:
		return time.Time{}, shard.NackNow(now, r.handle)
	case opReject:
		return time.Time{}, shard.Reject(now, r.handle)
	case opConfirm:
		return time.Time{}, shard.Confirm(now, r.handle)
	case opRelease:
		err := shard.GiveBack(now, r.handle)
		if err == nil {
			n.wake(topic, r.handle.Partition)
		}
		return time.Time{}, err
	}
	return time.Time{}, shard.Ack(now, r.handle)
}

// ackManyLocal is shard.AckMany on a partition this node serves, within its grant at now as
// settleLocal applies one record.
func (n *Node) ackManyLocal(shard *inflight.Shard, now time.Time, handles []inflight.Handle, errs []error) {
	if err := n.verifyBeforeSettle(shard); err != nil {
		for i := range handles {
			errs[i] = err
		}
		return
	}
	shard.AckMany(now, handles, errs)
	if len(handles) > 0 && n.lapsedRetry(shard, now, errs[0]) {
		shard.AckMany(now, handles, errs)
	}
}
