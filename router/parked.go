package router

import (
	"context"
	"errors"
	"fmt"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/pump"
	"narad.dev/consume/tokens"
)

// A consumer parked on this node: its wait on the pump's queue, where a record of this
// node's partitions (reserved for it by reserve.go) and an owner's wake (see keeper.go) both
// arrive; the top-up of a batch the wait served; the wake that appends, nacks and expiries
// send; the count of consumers parked on owners (parkRemote, unparkRemote); and the hold of
// a long-poll on a topic no node serves yet.

// park waits for a record on this node's queue, where a local record and an owner's wake
// both arrive, with tokens left with the owners, until deadline. A wake is either an
// owner's notification, which the consumer claims, or, for an owner that cannot take
// tokens, the keeper's turn to poll it, which the consumer probes. Probes the consume left
// out before it parked (nil: none) end the wait when one brings records: the consume
// returns those.
func (n *Node) park(ctx context.Context, req scanRequest, owners []string, gateway bool, deadline time.Time, probes *hedgedProbes) ([]Message, error) {
	defer n.observeWait(req.calledAt)
	if len(owners) > 0 {
		pinnedTo := ""
		if req.pinned >= 0 {
			pinnedTo = owners[0] // the pinned partition's owner, alone
		}
		rt := n.parkRemote(req.topic, owners, pinnedTo, gateway, deadline)
		defer n.unparkRemote(rt, pinnedTo)
	}
	quiet := false
	for {
		if probes != nil && ctx.Err() == nil { // (a consumer gone: what came goes back with leave)
			if msgs := probes.late(n.clock.Now()); len(msgs) > 0 {
				return n.topUp(req, msgs), nil
			}
		}
		left := deadline.Sub(n.clock.Now())
		if left <= 0 {
			return nil, nil
		}
		r, ok, err := n.waitOrProbe(ctx, req, left, quiet, probes)
		if errors.Is(err, errProbeBrought) {
			continue // taken at the top
		}
		if err != nil || !ok {
			return nil, err
		}
		if r.err != nil {
			return nil, r.err // the host broke a seam's contract, or panicked, as the pump reserved
		}
		if r.fromOwner {
			if msgs, err := n.takeFromOwner(ctx, req, r.wake, deadline); len(msgs) > 0 || err != nil {
				return msgs, err
			}
			quiet = false // the record went elsewhere: wait for the next
			if r.wake.Claim {
				// The notification spent this node's token there, and nothing came of it:
				// a token goes back now, not at the keeper's next pass (up to
				// tokens.KeepInterval later), or a record arriving meanwhile waits for it.
				n.kickKeeper()
			}
			continue
		}
		if r.scan {
			req.gen, req.local, req.remote = nil, nil, nil
			if msgs, err := n.scan(req, nil); len(msgs) > 0 || err != nil {
				return msgs, err
			}
			// Another consumer took them, or the shard has nothing a scan can take though it
			// counts records available (a lapsed grant, a cap): wait for the next wake, or
			// the pump hands this consumer a scan again at once, over and over.
			quiet = true
			continue
		}
		m, err := n.read(r)
		if err == nil {
			return n.received(ctx, req, r.shard, m)
		}
		// Skipped (retention, corruption): wait on. A failed log (closed, or one whose host
		// answered wrongly): the reservation went back; wait for the next wake rather than
		// be handed it again at once.
		if errors.Is(err, ErrHostContract) {
			if req.pinned >= 0 {
				return nil, err // nothing else to wait for
			}
			// The other partitions may hold what woke it: the scan passes over this one.
			req.gen, req.local, req.remote = nil, nil, nil
			if msgs, _ := n.scan(req, nil); len(msgs) > 0 {
				return msgs, nil
			}
		}
		quiet = !errors.Is(err, errSkipped)
	}
}

// takeFromOwner takes, for a consume parked until deadline, the record an owner's wake w
// stands for: a claim after the owner's notification, or a probe when the keeper's turn to
// poll an owner that takes no tokens came. No records and no error: the record went
// elsewhere, and the consumer waits for the next.
func (n *Node) takeFromOwner(ctx context.Context, req scanRequest, w tokens.Wake, deadline time.Time) ([]Message, error) {
	budget := ClaimBudget
	if !w.Claim {
		budget = ProbeBudget
		n.stats.remote.probes.Add(1)
	} else {
		n.stats.remote.claims.Add(1)
	}
	until := n.rpcDeadline(budget, deadline.Add(ConsumeOverrun))
	msgs, _ := n.remoteConsume(ctx, w.Owner, req, w.Claim, until)
	if len(msgs) > 0 {
		if w.Claim {
			n.stats.remote.claimHits.Add(1)
		} else {
			n.stats.remote.probeHits.Add(1)
			n.polled(req.topic, w.Owner, true)
		}
		return n.topUp(req, msgs), nil
	}
	return nil, ctx.Err()
}

// received is what a parked consume returns for m, the record it read of a reservation
// that shard holds: m under the consume's own visibility timeout, topped up; or, when the
// consumer left while it read, nothing and ctx's error.
func (n *Node) received(ctx context.Context, req scanRequest, shard *inflight.Shard, m Message) ([]Message, error) {
	if ctx.Err() != nil {
		// The consumer left while it read: nobody receives the record, so it is
		// visible again at once, as a hand-over at the instant of a cancel is.
		if shard.GiveBack(n.clock.Now(), m.Receipt) == nil {
			n.wake(m.Topic, m.Partition)
		}
		return nil, ctx.Err()
	}
	shard.Handed([]inflight.Lease{{Handle: m.Receipt}}) // its attempt counts from here
	if req.visibility > 0 {
		// The pump reserves with the topic's timeout; re-arm to the consume's own.
		if expiry, err := shard.Extend(n.clock.Now(), m.Receipt, req.visibility); err == nil {
			m.Expiry = expiry
		}
	}
	return n.topUp(req, []Message{m}), nil
}

// waitOrProbe is wait, ended early with errProbeBrought when one of probes (nil: none)
// brings records.
func (n *Node) waitOrProbe(ctx context.Context, req scanRequest, d time.Duration, quiet bool, probes *hedgedProbes) (reservation, bool, error) {
	if probes == nil {
		return n.wait(ctx, req.topic, req.pinned, d, quiet)
	}
	waitCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	probes.parked(func() { cancel(errProbeBrought) })
	r, ok, err := n.wait(waitCtx, req.topic, req.pinned, d, quiet)
	probes.parked(nil)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(waitCtx), errProbeBrought) {
		return r, false, errProbeBrought
	}
	return r, ok, err
}

// errProbeBrought ends a parked consume's wait: a probe it left out brought records.
var errProbeBrought = errors.New("router: a probe brought records")

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
	case n.life.closed.Load():
		return m, false, ErrClosed
	case errors.Is(err, pump.ErrTopicDropped):
		return m, false, fmt.Errorf("%w: %w", ErrUnknownTopic, err) // deleted while waiting
	}
	return m, false, err
}

var errWaitOver = errors.New("router: wait over")

// topUp adds what one local scan finds now to a batch consume the wait delivered a single
// record to (a local one, or an older owner's): the one case where a batch holds records
// of two owners. An owner's batch is passed through as it is.
func (n *Node) topUp(req scanRequest, msgs []Message) []Message {
	if req.max <= 1 || len(msgs) != 1 {
		return msgs
	}
	req.max--
	req.gen, req.local = nil, nil // the routes and generation as they are now, after the wait
	more, _ := n.scan(req, msgs)  // what is there now, never an error
	return more
}

// observeWait counts, in Stats.ConsumeWait, the wait of a consume called at calledAt that
// returns now; a zero calledAt is a wait observed elsewhere.
func (n *Node) observeWait(calledAt time.Time) {
	if !calledAt.IsZero() {
		n.stats.consumeWait.observe(n.clock.Now().Sub(calledAt))
	}
}

// wake reports that records of (topic, partition) may have become available: it ends the
// topic's drained marks (see drained.go), wakes this node's parked consumers, then offers
// what is left to other nodes' tokens.
func (n *Node) wake(topic string, partition int32) {
	n.wakes.woke(topic)
	n.pump.NotifyPartition(topic, partition)
	n.offer(topic)
}

// parkRemote counts a consumer parked on topic waiting on owners (on pinnedTo alone, when
// it is pinned to a partition of that owner), and leaves a token with each owner that holds
// no fresh one from this node (consumers parking within tokens.ShareWindow of a
// registration share it, unless its TTL ends before their wait does). It returns the
// topic's state it counted the consumer in, for unparkRemote.
func (n *Node) parkRemote(topic string, owners []string, pinnedTo string, gateway bool, deadline time.Time) *remoteTopic {
	now := n.clock.Now()
	resend := resendEvery(gateway, len(owners))
	ttl := tokenTTL(now, deadline, resend)
	var send []string
	r := &n.requester
	r.mu.Lock()
	rt := r.topics[topic]
	if rt == nil {
		rt = &remoteTopic{}
		r.topics[topic] = rt
	}
	first := rt.parked == 0
	rt.parked++
	if pinnedTo != "" {
		if rt.pinnedTo == nil {
			rt.pinnedTo = map[string]int{}
		}
		rt.pinnedTo[pinnedTo]++
	}
	rt.gateway = gateway
	if deadline.After(rt.latest) {
		rt.latest = deadline
	}
	polls := false
	for _, owner := range owners {
		if !n.takesTokens(owner, now) {
			polls = true // polled by the keeper
			continue
		}
		if !r.regs.Share(topic, owner, now, earliest(deadline, now.Add(resend))) {
			r.regs.Sent(topic, owner, now, ttl)
			send = append(send, owner)
		}
	}
	r.mu.Unlock()
	for _, owner := range send {
		n.register(owner, []wire.Registration{{Topic: topic, TTL: ttl}}, now)
	}
	if first || polls {
		n.kickKeeper() // to keep the tokens, or to poll the owners that take none
	}
	return rt
}

// unparkRemote uncounts a consumer parkRemote counted, in the state it counted it in: a
// topic deleted and created again meanwhile has a state of its own, whose count the consumer
// of the old one must not touch (a count too low passes notifications for parked consumers).
func (n *Node) unparkRemote(rt *remoteTopic, pinnedTo string) {
	r := &n.requester
	r.mu.Lock()
	rt.parked--
	if pinnedTo != "" {
		if rt.pinnedTo[pinnedTo]--; rt.pinnedTo[pinnedTo] == 0 {
			delete(rt.pinnedTo, pinnedTo)
		}
	}
	r.mu.Unlock()
}

// holdUnassigned holds a long-poll on a topic no node serves yet (none of its partitions
// assigned, or every owner down) instead of answering at once, which would turn every
// looping consumer into a busy poll. It looks at the routes every unassignedRecheck, and
// returns the live owners once some appear, so the consume probes them and parks for
// what is left of its wait; once a partition this consume may take from is local, it
// answers empty (no owners, no error), so the next poll takes the local path with its full
// wait.
func (n *Node) holdUnassigned(ctx context.Context, topic string, pinned int32, deadline time.Time) ([]string, error) {
	tick := make(chan struct{}, 1)
	signal := func() { notifyOne(tick) }
	for {
		left := deadline.Sub(n.clock.Now())
		if left <= 0 {
			return nil, nil
		}
		stop := n.clock.AfterFunc(min(unassignedRecheck, left), signal)
		select {
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-n.life.fence.closing:
			stop()
			return nil, ErrClosed
		case <-tick:
		}
		if n.life.closed.Load() {
			return nil, ErrClosed
		}
		local, _, ok := n.routes.Partitions(topic)
		if !ok {
			return nil, ErrUnknownTopic
		}
		if servesLocally(local, pinned) {
			return nil, nil
		}
		if !n.crossNode() {
			continue
		}
		if owners, _ := n.consumeOwners(topic, pinned); len(owners) > 0 {
			return owners, nil
		}
	}
}

// unassignedRecheck is how often a long-poll on a topic no node serves yet looks at the
// route table again.
const unassignedRecheck = 50 * time.Millisecond
