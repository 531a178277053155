package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"narad.dev/consume/internal/wire"
)

// ConsumeOptions shape one consume. The zero value takes one record from any local
// partition without waiting, under the topic's visibility timeout.
type ConsumeOptions struct {
	// Max is the most records to take (a batch consume); zero or one means one, and at
	// most MaxBatch.
	Max int
	// Wait is how long to wait for a record when none is there (a long-poll), at most
	// MaxWait. A waiting consumer costs no polling and no wake-up: it blocks on one channel,
	// and its only timer is its own deadline, which fires only if nothing arrives.
	Wait time.Duration
	// Pinned restricts the consume to Partition: this node's, or, with a Transport, another
	// node's, whose owner serves it (a pinned long-poll waits on that owner alone).
	Pinned    bool
	Partition int32
	// Visibility is the lease's visibility timeout; zero means the topic's, at most
	// MaxVisibility.
	Visibility time.Duration
}

// Consume leases and returns up to opts.Max records of topic, lowest unresolved offsets
// first: from this node's partitions, and, with a Transport, from the partitions other nodes
// own (a probe per owner, the next sent when one has not answered within 50 ms, the
// first with records answering). With nothing there it waits up to opts.Wait, parked on the
// topic's queue (or the partition's, when pinned) and on delivery tokens left with the
// owners, and a record that arrives meanwhile, here or on an owner, is handed to exactly one
// parked consumer. No records and no error is a 204. It returns within opts.Wait plus
// ConsumeOverrun, whatever the owners do.
//
// A batch (Max > 1) takes what one non-blocking scan finds, staying on a partition until it
// runs dry or reaches its in-flight cap, and stops once the records carry BatchPayloadBytes
// of keys and payloads; an owner's batch (at most 100 records) is passed through. On an
// ordered topic a batch within an eighth of opts.Max whose reads found the rest held by
// other consumers' keys stops there, rather than read again for a few records. A single
// record that the wait delivers is topped up with a second local scan.
//
// Errors: ErrUnknownTopic, ErrNotLocal (pinned to a partition no node owns, or, without a
// Transport, that this node does not own), ErrClosed, the host's errors resolving a log,
// ErrLogClosed (transient: try again), ErrTransport or ErrUnavailable when every owner asked
// failed and nothing was there, and ctx's error if it ends first. ErrHostContract when the
// host answered wrongly about the pinned partition, or about every partition here; a
// partition it answers wrongly about is otherwise passed over, and the rest serve.
func (n *Node) Consume(ctx context.Context, topic string, opts ConsumeOptions) ([]Message, error) {
	return n.ConsumeAppend(ctx, nil, topic, opts)
}

// ConsumeAppend is Consume appending the messages to dst and returning the extended slice,
// as strconv.AppendInt does: a consumer that passes the same slice back each time (dst[:0])
// consumes without allocating for its messages once the slice has grown to its batches,
// and writes them into memory its cache holds. On error dst comes back extended by what
// Consume would have returned with the error, if anything.
func (n *Node) ConsumeAppend(ctx context.Context, dst []Message, topic string, opts ConsumeOptions) ([]Message, error) {
	if !n.life.fence.enter() {
		return dst, ErrClosed
	}
	defer n.life.fence.leave()
	if err := opts.check(); err != nil {
		return dst, err
	}
	if err := checkTopic(topic); err != nil {
		return dst, err
	}
	if err := ctx.Err(); err != nil {
		return dst, err // nobody to hand a record to: lease nothing
	}
	n.stats.consumes.Add(1)
	msgs, err := n.consume(ctx, topic, opts, dst[len(dst):])
	n.countEmpty(msgs)
	return extend(dst, msgs), err
}

// extend returns dst followed by tail, which is either in dst's spare capacity already (a
// local scan appends there) or elsewhere.
func extend(dst, tail []Message) []Message {
	if len(tail) == 0 {
		return dst
	}
	if len(dst) < cap(dst) && &dst[:len(dst)+1][len(dst)] == &tail[0] {
		return dst[:len(dst)+len(tail)]
	}
	if dst == nil {
		return tail
	}
	return append(dst, tail...)
}

// consume routes a consume: this node's partitions first (no round trip), then a probe of
// up to two remote owners (all of them without a wait), then the wait, parked on this node's queue and on
// tokens left with the owners (two round trips: notify, then claim). A topic no node
// serves yet is held for the wait, its routes looked at again every unassignedRecheck.
// The local scan appends to into, an empty slice whose capacity it may use.
func (n *Node) consume(ctx context.Context, topic string, opts ConsumeOptions, into []Message) ([]Message, error) {
	req := scanRequest{topic: topic, pinned: -1, max: max(opts.Max, 1), visibility: opts.Visibility}
	if opts.Pinned {
		req.pinned = opts.Partition
	}
	now := n.clock.Now() // one clock read: the first scan's leases and the wait's deadline
	// The generation before the routes, as the scan takes them (see scan), so the first scan
	// reuses both.
	gen, local, remote, ok := n.generationAndRoutes(topic)
	if !ok {
		return nil, ErrUnknownTopic
	}
	req.gen = gen
	req.local, req.remote = local, remote
	if len(local) > 1 {
		// Once, for the scan's rotation and, when the scan finds nothing, the read-ahead
		// (which looks it up itself otherwise): a consume served here pays no more.
		req.state = n.topic(topic)
	}
	here := servesLocally(local, req.pinned)
	var scanErr error     // a closed log: the wait may still serve
	var drained wakeWatch // when a walk that found every local partition drained began
	if here {
		if req.state != nil && len(remote) > 0 && req.pinned < 0 && n.crossNode() {
			// The local partitions were all drained lately, and nothing woke them since:
			// what was read ahead first, with no walk over them (see drained.go).
			if msgs, ok := n.takeAheadIfDrained(ctx, req, now, into); ok {
				return msgs, nil
			}
			drained = n.wakes.watch(topic) // before the walk
		}
		msgs, allDrained, err := n.scanDrained(req, now, into)
		if !allDrained {
			drained = wakeWatch{}
		}
		switch {
		case len(msgs) > 0:
			return msgs, err
		case err == nil || errors.Is(err, ErrLogClosed):
			scanErr = err
		case req.pinned < 0 && len(remote) > 0 && errors.Is(err, ErrHostContract):
			scanErr = err // every partition here is broken: those of other nodes may serve
		default:
			return msgs, err
		}
	}
	if !here && req.pinned >= 0 {
		if err := n.judgeRoutes(req.state, topic, local, remote).refuses(req.pinned); err != nil {
			return nil, err // named wrongly: no owner to ask
		}
	}
	// Then what was read ahead of the consumers here, if anything: no round trip either.
	var ra *readAhead
	var ahead aheadSettings
	if len(remote) > 0 && n.crossNode() {
		if ra, ahead = n.readAheadFor(req); ra != nil {
			defer ra.left(ctx)
			if msgs := ra.take(req, now, ahead, into, drained); len(msgs) > 0 {
				return msgs, nil
			}
		}
	}
	deadline := now.Add(opts.Wait) // only a consume the local scan did not serve needs it
	req.calledAt = now             // a consume that parks observes its wait (see park)
	// The owners are worked out only now: a consume served here pays nothing for them.
	var owners []string
	anyDown := false
	if n.crossNode() {
		owners, anyDown = n.consumeOwnersIn(remote, req.pinned)
	}
	if !here && len(owners) == 0 {
		switch {
		case req.pinned >= 0 && !anyDown:
			return nil, ErrNotLocal
		case opts.Wait == 0:
			return nil, nil
		}
		var err error
		owners, err = n.holdUnassigned(ctx, topic, req.pinned, deadline)
		if err != nil || len(owners) == 0 {
			n.observeWait(now)
			return nil, err
		}
		// It waited: its wait is observed once, when it returns, whether it parks or not.
		req.calledAt = time.Time{}
		defer n.observeWait(now)
	}
	if len(owners) == 0 { // here, and nothing there now
		if opts.Wait == 0 {
			return nil, scanErr
		}
		return n.park(ctx, req, nil, false, deadline, nil)
	}
	msgs, err := n.consumeRemote(ctx, req, owners, len(local) == 0, deadline, ra, ahead)
	if len(msgs) > 0 && !slices.Contains(local, msgs[0].Partition) { // an owner's records
		n.stats.remoteDelivery.observe(n.clock.Now().Sub(now))
	}
	return msgs, err
}

// takeAheadIfDrained is a consume's take of what was read ahead of it before it walks the
// local partitions, while they are marked drained (see readAhead.takeIfDrained): the records
// it took and true, or false when the consume walks them (nothing held, no mark, or the
// records held outstayed the hold).
func (n *Node) takeAheadIfDrained(ctx context.Context, req scanRequest, now time.Time, into []Message) ([]Message, bool) {
	if req.state.ahead.Load() == nil { // only a read-ahead made earlier holds anything
		return nil, false
	}
	ra, ahead := n.readAheadFor(req)
	if ra == nil {
		return nil, false
	}
	msgs, took := ra.takeIfDrained(req, now, ahead, into)
	if took {
		ra.left(ctx)
	}
	return msgs, len(msgs) > 0
}

// servesLocally reports whether a consume pinned to pinned (or to none, when negative) can
// take records from this node's partitions local.
func servesLocally(local []int32, pinned int32) bool {
	if pinned < 0 {
		return len(local) > 0
	}
	return slices.Contains(local, pinned)
}

// check refuses options out of their bounds, naming the field.
func (o *ConsumeOptions) check() error {
	switch {
	case o.Max < 0 || o.Max > MaxBatch:
		return fmt.Errorf("%w: ConsumeOptions.Max %d outside [0, %d]", ErrInvalidArgument, o.Max, MaxBatch)
	case o.Wait < 0 || o.Wait > MaxWait:
		return fmt.Errorf("%w: ConsumeOptions.Wait %v outside [0, %v]", ErrInvalidArgument, o.Wait, MaxWait)
	case o.Visibility < 0 || o.Visibility > MaxVisibility:
		return fmt.Errorf("%w: ConsumeOptions.Visibility %v outside [0, %v]", ErrInvalidArgument, o.Visibility, MaxVisibility)
	case o.Pinned && o.Partition < 0:
		return fmt.Errorf("%w: ConsumeOptions.Partition %d is negative", ErrInvalidArgument, o.Partition)
	}
	return nil
}

func (n *Node) countEmpty(msgs []Message) {
	if len(msgs) == 0 {
		n.stats.emptyConsumes.Add(1)
	}
}

// Replay reads records of a partition from offset on, within retention: a local one here,
// one another node owns from its owner (with a Transport). It bypasses
// the queue state entirely: no lease, no frontier change, no receipt, and it is not counted
// as consumed. It reads at most limit records (zero means one; there is no other cap) and
// stops once they carry BatchPayloadBytes of keys, payloads and headers, keeping the record that
// crosses the bound; it never reads at or past the high watermark it read first. An offset
// below the oldest retained one starts the replay there. A read error (an unreadable record,
// one retention removed meanwhile, a closed log) or ctx ending ends the replay before it: the
// records read so far come back without the error, or the error alone when there are none
// (ctx's error comes back with what was read).
func (n *Node) Replay(ctx context.Context, topic string, partition int32, offset int64, limit int) ([]Message, error) {
	if !n.life.fence.enter() {
		return nil, ErrClosed
	}
	defer n.life.fence.leave()
	if offset < 0 || limit < 0 {
		return nil, fmt.Errorf("%w: negative offset or limit", ErrInvalidArgument)
	}
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if err := checkPartition(partition); err != nil {
		return nil, err
	}
	local, remote, ok, verdict := n.partitions(topic)
	if !ok {
		return nil, ErrUnknownTopic
	}
	if err := verdict.refuses(partition); err != nil {
		return nil, err
	}
	if !slices.Contains(local, partition) {
		if !n.crossNode() {
			return nil, ErrNotLocal
		}
		owners, anyDown := n.remoteOwnersIn(remote, partition)
		switch {
		case len(owners) == 1:
			return n.replayRemote(ctx, owners[0], topic, partition, offset, limit)
		case anyDown:
			return nil, fmt.Errorf("%w: the owner of %s/%d is down", ErrUnavailable, topic, partition)
		}
		return nil, ErrNotLocal
	}
	return n.replayLocal(ctx, topic, partition, offset, limit)
}

// replayLocal is Replay of a partition this node owns.
func (n *Node) replayLocal(ctx context.Context, topic string, partition int32, offset int64, limit int) ([]Message, error) {
	log, err := n.getLog(topic, partition)
	if err != nil {
		return nil, err
	}
	oldest, hwm := log.Oldest(), log.HighWatermark()
	if err := n.checkWatermarks(topic, partition, oldest, hwm); err != nil {
		return nil, err
	}
	offset = max(offset, oldest)
	limit = max(limit, 1)
	var out []Message
	bytes := 0
	for off := offset; off < hwm && len(out) < limit && bytes < BatchPayloadBytes; off++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		rec, err := log.Read(off)
		if err != nil {
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		out = append(out, Message{Topic: topic, Partition: partition, Offset: off, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Headers: rec.Headers})
		bytes += out[len(out)-1].payloadBytes()
	}
	n.stats.replayed.Add(uint64(len(out)))
	return out, nil
}

// FitResponse keeps the longest prefix of msgs whose encoded size, as the host's encoder
// measures it with size, stays within limit (the first record is always kept), and gives
// back every record past it before the host writes its response, so the next consume takes
// them at once rather than after their visibility timeout. ResponseLimit is the usual limit.
func (n *Node) FitResponse(msgs []Message, size func(*Message) int, limit int) []Message {
	if !n.life.fence.enter() {
		return msgs // the node closed: its leases went with it
	}
	defer n.life.fence.leave()
	total := 0
	for i := range msgs {
		total += size(&msgs[i])
		if i > 0 && total > limit {
			n.giveBack(msgs[i:])
			return msgs[:i]
		}
	}
	return msgs
}

// ResponseLimit is a bound for FitResponse: 8 MiB of encoded records, twice
// BatchPayloadBytes, so a full batch fits unless its encoding more than doubles it.
const ResponseLimit = 8 << 20

// giveBack returns delivered records that never reached their consumer, and wakes parked
// consumers for them, without counting the delivery as an attempt. A record another node
// delivered through this one is released at its owner, in the background (an owner on a
// release before the node wire's version 7 gets a nack with no delay, which counts there).
func (n *Node) giveBack(msgs []Message) {
	now := n.clock.Now()
	for i := range msgs {
		m := &msgs[i]
		if shard, ok := n.tracker.Lookup(m.Topic, m.Partition); ok {
			if shard.GiveBack(now, m.Receipt) == nil {
				n.wake(m.Topic, m.Partition)
			}
			continue
		}
		if owner, ok, err := n.ownerOf(m.Topic, m.Partition); ok && err == nil && n.crossNode() {
			topic, rec := m.Topic, wireRecord{op: opRelease, handle: m.Receipt}
			n.background(func() { n.forward(context.Background(), owner, topic, rec) })
		}
	}
}

// crossNode reports whether this node consumes from other nodes: a Transport, and a wire
// version that has the consume op.
func (n *Node) crossNode() bool { return n.transport != nil && n.wireVersion >= wire.V3 }
