package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"narad.dev/consume/pump"
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
	// Pinned restricts the consume to Partition, which this node must own.
	Pinned    bool
	Partition int32
	// Visibility is the lease's visibility timeout; zero means the topic's, at most
	// MaxVisibility.
	Visibility time.Duration
}

// Consume leases and returns up to opts.Max records of topic from this node's partitions,
// lowest unresolved offsets first. With nothing there it waits up to opts.Wait, parked on
// the topic's queue (or the partition's, when pinned), and a record that arrives meanwhile
// is handed to exactly one parked consumer. No records and no error is a 204.
//
// A batch (Max > 1) takes what one non-blocking scan finds, staying on a partition until it
// runs dry or reaches its in-flight cap, and stops once the records carry BatchPayloadBytes
// of keys and payloads. A record that the wait delivers is topped up with a second scan.
//
// Errors: ErrUnknownTopic, ErrNotLocal (pinned to a partition this node does not own),
// ErrClosed, the host's errors resolving a log, ErrLogClosed (transient: try again), and
// ctx's error if it ends first.
func (n *Node) Consume(ctx context.Context, topic string, opts ConsumeOptions) ([]Message, error) {
	if !n.fence.enter() {
		return nil, ErrClosed
	}
	defer n.fence.leave()
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // nobody to hand a record to: lease nothing
	}
	n.stats.consumes.Add(1)
	if !opts.Pinned && opts.Wait > 0 && n.unassigned(topic) {
		n.countEmpty(nil)
		return nil, n.holdUnassigned(ctx, topic, opts.Wait)
	}
	req := scanRequest{topic: topic, pinned: -1, max: max(opts.Max, 1), visibility: opts.Visibility}
	if opts.Pinned {
		req.pinned = opts.Partition
	}
	msgs, err := n.scan(req, nil)
	if len(msgs) > 0 || opts.Wait == 0 || (err != nil && !errors.Is(err, ErrLogClosed)) {
		n.countEmpty(msgs)
		return msgs, err
	}

	m, ok, err := n.waitRecord(ctx, topic, req.pinned, opts.Wait)
	if err != nil || !ok {
		n.countEmpty(nil)
		return nil, err
	}
	if opts.Visibility > 0 {
		// The pump reserves with the topic's timeout; re-arm to the consume's own.
		if shard, ok := n.tracker.Lookup(topic, m.Partition); ok {
			if expiry, err := shard.Extend(n.clock.Now(), m.Receipt, opts.Visibility); err == nil {
				m.Expiry = expiry
			}
		}
	}
	msgs = append(msgs[:0], m) // grown by what is delivered, never by what was asked
	if req.max > 1 {
		req.max--
		msgs, _ = n.scan(req, msgs) // the top-up: what is there now, never an error
	}
	return msgs, nil
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

// wait parks on the pump until a reservation is handed over (ok), the wait ends (not ok, no
// error) or ctx ends. The wait is timed on the node's clock.
func (n *Node) wait(ctx context.Context, topic string, pinned int32, d time.Duration, quiet bool) (m reservation, ok bool, err error) {
	waitCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := n.clock.AfterFunc(d, func() { cancel(errWaitOver) })
	defer stop()
	if quiet {
		m, err = n.pump.WaitQuiet(waitCtx, topic, pinned)
	} else {
		m, err = n.pump.Wait(waitCtx, topic, pinned)
	}
	switch {
	case err == nil:
		return m, true, nil
	case errors.Is(context.Cause(waitCtx), errWaitOver) && ctx.Err() == nil:
		return m, false, nil
	case ctx.Err() != nil:
		return m, false, ctx.Err()
	case n.closed.Load():
		return m, false, ErrClosed
	case errors.Is(err, pump.ErrTopicDropped):
		return m, false, fmt.Errorf("%w: %w", ErrUnknownTopic, err) // deleted while waiting
	}
	return m, false, err
}

var errWaitOver = errors.New("router: wait over")

// UnassignedRecheck is how often a long-poll on a topic with no assigned partition looks at
// the route table again.
const UnassignedRecheck = 50 * time.Millisecond

// unassigned reports whether topic exists but no partition of it is assigned to any node
// yet (created a moment ago, or the first seconds of a cold cluster).
func (n *Node) unassigned(topic string) bool {
	local, remote, ok := n.routes.Partitions(topic)
	return ok && len(local) == 0 && len(remote) == 0
}

// holdUnassigned holds a long-poll on an unassigned topic for its wait instead of answering
// at once, which would turn every looping consumer into a busy poll. It checks the route
// table every UnassignedRecheck; once a partition is assigned it answers empty, so the
// consumer's next poll takes the normal path with its full wait.
func (n *Node) holdUnassigned(ctx context.Context, topic string, wait time.Duration) error {
	tick := make(chan struct{}, 1)
	signal := func() {
		select {
		case tick <- struct{}{}:
		default:
		}
	}
	deadline := n.clock.Now().Add(wait)
	for {
		left := deadline.Sub(n.clock.Now())
		if left <= 0 {
			return nil
		}
		stop := n.clock.AfterFunc(min(UnassignedRecheck, left), signal)
		select {
		case <-ctx.Done():
			stop()
			return ctx.Err()
		case <-n.fence.closing:
			stop()
			return ErrClosed
		case <-tick:
		}
		if n.closed.Load() {
			return ErrClosed
		}
		if !n.unassigned(topic) {
			return nil
		}
	}
}

func (n *Node) countEmpty(msgs []Message) {
	if len(msgs) == 0 {
		n.stats.emptyConsumes.Add(1)
	}
}

// Replay reads records of a local partition from offset on, within retention. It bypasses
// the queue state entirely: no lease, no frontier change, no receipt, and it is not counted
// as consumed. It reads at most limit records (zero means one; there is no other cap) and
// stops once they carry BatchPayloadBytes of keys and payloads, keeping the record that
// crosses the bound; it never reads at or past the high watermark it read first. An offset
// below the oldest retained one starts the replay there. A read error (an unreadable record,
// one retention removed meanwhile, a closed log) or ctx ending ends the replay before it: the
// records read so far come back without the error, or the error alone when there are none
// (ctx's error comes back with what was read).
func (n *Node) Replay(ctx context.Context, topic string, partition int32, offset int64, limit int) ([]Message, error) {
	if !n.fence.enter() {
		return nil, ErrClosed
	}
	defer n.fence.leave()
	if offset < 0 || limit < 0 {
		return nil, fmt.Errorf("%w: negative offset or limit", ErrInvalidArgument)
	}
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	local, _, ok := n.routes.Partitions(topic)
	if !ok {
		return nil, ErrUnknownTopic
	}
	if !slices.Contains(local, partition) {
		return nil, ErrNotLocal
	}
	log, err := n.logs.Get(topic, partition)
	if err != nil {
		return nil, err
	}
	offset = max(offset, log.Oldest())
	hwm := log.HighWatermark()
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
		out = append(out, Message{Topic: topic, Partition: partition, Offset: off, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp})
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
	if !n.fence.enter() {
		return msgs // the node closed: its leases went with it
	}
	defer n.fence.leave()
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
// consumers for them.
func (n *Node) giveBack(msgs []Message) {
	now := n.clock.Now()
	for i := range msgs {
		m := &msgs[i]
		if shard, ok := n.tracker.Lookup(m.Topic, m.Partition); ok && shard.GiveBack(now, m.Receipt) == nil {
			n.pump.NotifyPartition(m.Topic, m.Partition)
		}
	}
}
