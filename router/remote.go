package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/internal/acklane"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/tokens"
)

// The requesting side of consumption across nodes (see docs/protocol.md, "Consumption
// across nodes"). A consume that finds nothing on this node's partitions asks remote owners
// with a non-blocking probe (the first with records answers: one round trip; two at most
// when it has a wait, so it parks within two round trips however many owners there are),
// then parks on this node's queue and leaves a delivery token with each owner, shared by
// every consumer parked here on the topic. An owner where a record shows up spends the
// token and tells this node, which hands the wake to the consumer at the head of the queue;
// that consumer claims the record (two round trips in all).

const (
	// ClaimBudget bounds a claim after a notification: its round trip and the fallbacks for
	// an owner on an older release.
	ClaimBudget = 500 * time.Millisecond
	// ProbeBudget bounds a probe of one owner; a consume's own wait bounds it further (see
	// ConsumeOverrun).
	ProbeBudget = 2 * time.Second
	// probeOwners is how many owners a consume with a wait probes before it parks, its
	// tokens then left with every owner.
	probeOwners = 2
	// probeHedge is how long a consume waits for one owner's answer to its probe before it
	// probes the next owner as well: well above a round trip within a data centre, and short
	// enough that an owner that hangs costs a consume little.
	probeHedge = 50 * time.Millisecond
	// ConsumeOverrun bounds how long after the end of its wait a consume returns, whatever
	// the owners do: a probe or a claim still out when the wait ends gets this long for its
	// reply, then is abandoned (what its reply carried is given back). A consume with no
	// wait returns within ConsumeOverrun.
	ConsumeOverrun = 250 * time.Millisecond
	// gatewayResend is how often a node that owns none of a topic's partitions registers its
	// token again with each owner while consumers are parked: its safety net for a lost
	// notification or a token an owner silently dropped (a restart). A registration wakes
	// the owner, which notifies at once if it holds records, so the net costs one frame per
	// owner per period, whatever the number of consumers parked.
	gatewayResend = 2 * time.Second
	// pollFirst and pollMax bound the backoff at which a node polls an owner for its parked
	// consumers instead of leaving a token (the owner refused registrations, or owners
	// cannot call this node).
	pollFirst = 100 * time.Millisecond
	pollMax   = time.Second
	// olderFieldMemory is how long an owner that refused a field of the consume frame gets
	// frames without it.
	olderFieldMemory = tokens.RefusalMemory
)

// requester is this node's tokens left with owners and the wakes they sent.
type requester struct {
	mu     sync.Mutex
	regs   tokens.Registrations
	topics map[string]*remoteTopic
	kick   chan struct{} // capacity 1: the keeper has work
}

// remoteTopic is what this node keeps for one topic whose consumers wait on other nodes.
type remoteTopic struct {
	parked int // consumers parked here waiting on owners
	// pinnedTo counts, per owner, the parked consumers pinned to a partition of that owner:
	// they wait on it alone. The others (parked - the sum) take a record from any owner.
	// Tokens are left only with owners some parked consumer can take from, and a
	// notification from any other owner is passed at once.
	pinnedTo map[string]int
	latest   time.Time // the latest deadline of a consumer parked since the topic was last idle
	gateway  bool      // this node owns none of the topic's partitions
	inbox    tokens.Inbox
	polls    map[string]*poll // owners polled instead of holding a token
}

// poll is the backoff of an owner polled for a topic's parked consumers.
type poll struct {
	at      time.Time // when the next probe wake is due
	backoff time.Duration
	pending bool // a probe wake is in the inbox, not taken yet
}

func (r *requester) forget(topic string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.topics, topic)
	r.regs.Forget(topic)
}

// consumeRemote serves a consume that found nothing local (or has no local partition to
// look at) from the remote owners: a probe of each (see probe), then, with a wait, parked on
// this node's queue and on tokens left with the owners, until a record comes, the wait ends
// or ctx ends. It returns within ConsumeOverrun of deadline, whatever the owners do.
func (n *Node) consumeRemote(ctx context.Context, req scanRequest, owners []string, gateway bool, deadline time.Time) ([]Message, error) {
	parks := n.clock.Now().Before(deadline)
	msgs, probeErr := n.probe(ctx, req, owners, parks, !gateway && req.pinned < 0, deadline)
	if len(msgs) > 0 || ctx.Err() != nil {
		return msgs, ctx.Err()
	}
	if !n.clock.Now().Before(deadline) {
		return nil, probeErr
	}
	return n.park(ctx, req, owners, gateway, deadline)
}

// probe asks the owners for up to req.max records, starting at one that rotates per topic;
// the first with records answers, and the batch is never filled from several owners. An
// owner that has not answered within probeHedge does not hold up the next: it is probed
// too, and so on, so a hung owner costs a consume probeHedge, not its budget; a reply that
// comes after another owner's records were taken is given back. Owners that let a consume's
// RPC run out of its budget lately are not probed at all (see answering). Each probe ends by
// ConsumeOverrun past deadline at the latest. It returns the last error when every owner
// asked failed, or ErrUnavailable when none was asked.
//
// A consume that parks (it has a wait, and tokens that reach every owner) asks probeOwners
// owners at most, and waits for no probe past probeHedge after the last one left: then it
// returns empty and the consume parks, the replies still out given back when they come. A
// record reaches a parked consumer, not one still probing, so an owner that hangs would
// otherwise keep another owner's records (and, with localToo set, this node's own: its
// partitions serve the consume too) from it for a probe's budget. A lone owner is probed
// from the caller's goroutine when nothing else serves the consume.
func (n *Node) probe(ctx context.Context, req scanRequest, owners []string, parks, localToo bool, deadline time.Time) ([]Message, error) {
	if len(owners) == 0 {
		return nil, nil
	}
	asked := n.answering(owners)
	if len(asked) == 0 {
		return nil, fmt.Errorf("%w: no owner of %s answered lately (asked again in the background)", ErrUnavailable, req.topic)
	}
	until := deadline.Add(ConsumeOverrun)
	start := n.topic(req.topic).nextProbe(len(asked))
	if parks && len(asked) > probeOwners {
		// The rest are reached by the tokens the wait leaves with every owner: an owner
		// holding records spends one at once, so the consume parks within two round trips
		// however many owners there are.
		asked = append(slices.Clone(asked[start:]), asked[:start]...)[:probeOwners]
		start = 0
	}
	if len(asked) == 1 && !(parks && localToo) { // nothing else serves the consume meanwhile
		n.stats.remote.probes.Add(1)
		msgs, err := n.remoteConsume(ctx, asked[0], req, false, n.rpcDeadline(ProbeBudget, until))
		if len(msgs) > 0 {
			n.stats.remote.probeHits.Add(1)
		}
		return msgs, err
	}

	type answer struct {
		msgs []Message
		err  error
	}
	// The probes still out when probe returns run on to their replies or their budgets
	// (so an owner that hangs is found slow, not merely outrun), and the records a late
	// reply carries are given back at once, uncounted: nobody takes them (left).
	var mu sync.Mutex
	left := false
	answers := make(chan answer, len(asked))
	defer func() {
		mu.Lock()
		left = true
		mu.Unlock()
		for {
			select {
			case a := <-answers:
				n.giveBack(a.msgs)
			default:
				return
			}
		}
	}()
	hedge := make(chan struct{}, 1)
	stopHedge := func() bool { return false }
	defer func() { stopHedge() }()
	sent := 0
	send := func() {
		owner := asked[(start+sent)%len(asked)]
		sent++
		n.stats.remote.probes.Add(1)
		budget := n.rpcDeadline(ProbeBudget, until)
		n.background(func() {
			var a answer
			func() {
				// The host's routes and transport run here, on a goroutine of the node.
				defer n.recoverHostPanic("probing an owner", owner, &a.err)
				a.msgs, a.err = n.remoteConsume(ctx, owner, req, false, budget)
			}()
			mu.Lock()
			defer mu.Unlock()
			if left {
				n.giveBack(a.msgs)
				return
			}
			answers <- a
		})
		stopHedge()
		select {
		case <-hedge: // the previous probe's, fired as this one left: spent
		default:
		}
		if sent < len(asked) || parks {
			stopHedge = n.clock.AfterFunc(probeHedge, func() { notifyOne(hedge) })
		}
	}
	send()
	var lastErr error
	failed := 0
	for got := 0; got < len(asked); {
		select {
		case a := <-answers:
			got++
			if len(a.msgs) > 0 {
				n.stats.remote.probeHits.Add(1)
				return a.msgs, nil
			}
			if a.err != nil {
				lastErr = a.err
				failed++
				n.logger.Debug("consume: probe of an owner failed", "topic", req.topic, "err", a.err)
			}
			if got == sent && sent < len(asked) {
				send() // the owners out so far answered: the next at once
			}
		case <-hedge:
			switch {
			case sent < len(asked):
				n.stats.remote.hedges.Add(1)
				send()
			case n.clock.Now().Before(deadline):
				// Every probe is out past probeHedge or answered empty: park, with tokens
				// left with the owners still silent too.
				return nil, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if failed == len(asked) {
		return nil, lastErr
	}
	return nil, nil
}

// rpcDeadline is the deadline of a consume's RPC sent now with budget, cut to until (the
// consume's deadline plus ConsumeOverrun).
func (n *Node) rpcDeadline(budget time.Duration, until time.Time) time.Time {
	return earliest(n.clock.Now().Add(budget), until)
}

// remoteConsume sends one probe (claim false) or claim to owner and returns the records it
// answered. An owner on an older release refuses a field it does not know with a 400: the
// frame goes again without it, newest first (the Headers flag, relative expiry, Max, then
// the Claim flag), within the same budget,
// and the refusal is remembered for that owner for olderFieldMemory. When no reply comes
// back, or ctx ends before the records reach the caller, the owner is asked to give back
// whatever the reply carried.
func (n *Node) remoteConsume(ctx context.Context, owner string, req scanRequest, claim bool, deadline time.Time) ([]Message, error) {
	l := n.lane(owner)
	now := n.clock.Now()
	if !n.servesConsumes(owner, now) {
		// It refused the op since this consume chose it: one refusal per two minutes.
		return nil, fmt.Errorf("%w: %s serves no consumes of other nodes (an older release)", ErrUnavailable, owner)
	}
	c := wire.Consume{Pinned: req.pinned, Visibility: req.visibility, Max: 1}
	if claim && n.wireVersion >= wire.V5 && !l.Refuses(acklane.ConsumeClaim, now) {
		c.Claim = true
	}
	if req.max > 1 && n.wireVersion >= wire.V6 && !l.Refuses(acklane.ConsumeMax, now) {
		c.Max = int32(req.max)
	}
	if n.wireVersion >= wire.V7 && !l.Refuses(acklane.RelativeExpiry, now) {
		c.RelativeExpiry = true
	}
	c.Headers = n.asksHeaders(l, now)
	for {
		c.RequestID = requestID()
		sent := n.clock.Now()
		frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpConsume, Topic: req.topic, Consume: c})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
		raw, err := n.exchangeConsume(ctx, owner, req.topic, c, frame, deadline, &sent)
		if err != nil {
			n.cancelRemote(ctx, owner, req.topic, c.RequestID)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, errNoReplyInBudget) {
				n.slowOwner(owner)
			}
			return nil, fmt.Errorf("%w: %v", ErrTransport, err)
		}
		n.ownerAnswered(owner)
		reply, err := wire.DecodeConsumeReply(raw)
		if err != nil {
			n.cancelRemote(ctx, owner, req.topic, c.RequestID)
			return nil, fmt.Errorf("%w: %v", ErrTransport, err)
		}
		if reply.Status == wire.StatusBadRequest && (c.Headers || c.RelativeExpiry || c.Max > 1 || c.Claim) {
			// An older release refused the newest field the frame carried: again without it.
			until := n.clock.Now().Add(olderFieldMemory)
			switch {
			case c.Headers:
				c.Headers = false
				l.Refuse(acklane.Headers, until)
			case c.RelativeExpiry:
				c.RelativeExpiry = false
				l.Refuse(acklane.RelativeExpiry, until)
			case c.Max > 1:
				c.Max = 1
				l.Refuse(acklane.ConsumeMax, until)
			default:
				c.Claim = false
				l.Refuse(acklane.ConsumeClaim, until)
			}
			continue
		}
		if err := n.ownerRefusal(owner, &reply); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			n.cancelRemote(ctx, owner, req.topic, c.RequestID)
			return nil, ctx.Err()
		}
		if !c.RelativeExpiry {
			sent = time.Time{} // expiries as the owner's times
		}
		return n.owned(owner, req, messagesOf(req.topic, reply.Deliveries, sent)), nil
	}
}

// owned keeps the records of owner's reply that this node's routes say owner owns (of the
// pinned partition alone, for a pinned consume), and gives the others back to owner at
// once: a peer is believed only where the routes back it. A reply a peer forged carries
// records no consumer here receives; one from an owner whose routes are ahead of this
// node's (a partition moving) costs those records nothing but a round trip.
func (n *Node) owned(owner string, req scanRequest, msgs []Message) []Message {
	_, remote, _ := n.routes.Partitions(req.topic)
	parts := remote[owner]
	kept := msgs[:0]
	for i := range msgs {
		m := &msgs[i]
		if (req.pinned < 0 || m.Partition == req.pinned) && slices.Contains(parts, m.Partition) {
			kept = append(kept, *m)
			continue
		}
		n.stats.remote.unbacked.Add(1)
		n.logger.Warn("consume: an owner answered a record of a partition the routes do not give it: given back", "owner", owner, "topic", req.topic, "partition", m.Partition)
		rec := wireRecord{op: opRelease, handle: m.Receipt}
		n.background(func() { n.forward(context.Background(), owner, req.topic, rec) })
	}
	return kept
}

// cancelRemote asks owner, in the background, to give back the records of a reply its
// requester will not receive. The cancel carries ctx's values, not its cancellation.
func (n *Node) cancelRemote(ctx context.Context, owner, topic string, id uint64) {
	if n.sendCancel(ctx, owner, topic, id) {
		n.stats.remote.cancels.Add(1)
	}
}

// sendCancel sends owner a Cancel of request id in the background, unless owner refused
// the consume op lately (it served none to cancel, and knows no Cancel either), and reports
// whether it did. Any reply ends owner's slowness; a refusal of the op is remembered.
func (n *Node) sendCancel(ctx context.Context, owner, topic string, id uint64) bool {
	if !n.servesConsumes(owner, n.clock.Now()) {
		return false
	}
	frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpCancel, Topic: topic, RequestID: id})
	if err != nil {
		return false
	}
	n.background(func() {
		raw, err := n.exchangeDetached(ctx, owner, frame, n.clock.Now().Add(cancelBudget))
		if err != nil {
			return
		}
		n.ownerAnswered(owner)
		if answers, err := wire.DecodeReply(raw); err == nil && len(answers) == 1 && answers[0].Status == wire.StatusUnsupported {
			n.refusedConsumes(owner) // a release before consumption across nodes
		}
	})
	return true
}

// tokenTTL sizes a token to a consumer's remaining wait plus the share window, at most two
// periods of resend: the keeper sends it again before then while anyone is parked.
func tokenTTL(now, deadline time.Time, resend time.Duration) time.Duration {
	return min(max(deadline.Sub(now), 0), 2*resend) + tokens.ShareWindow
}

// resendOwners is how many owners a topic's tokens may be kept with at the base period;
// each resendOwners more stretch it by one base period.
const resendOwners = 8

// resendEvery is how often the keeper registers a topic's token again with each of owners
// owners while consumers are parked: gatewayResend for a node that owns none of the topic,
// tokens.Resend otherwise, times one per resendOwners owners, so that the registrations an
// idle node sends per second do not grow with the cluster (at most resendOwners frames per
// base period per topic). A lost token then comes back later in a large cluster; a consume
// that parks probes two owners first, and a registration is also sent at each park past
// the share window.
func resendEvery(gateway bool, owners int) time.Duration {
	base := tokens.Resend
	if gateway {
		base = gatewayResend
	}
	return base * time.Duration(max(1, (owners+resendOwners-1)/resendOwners))
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// waitsOn reports whether a consumer parked on rt can take a record from owner: one not
// pinned, or one pinned to a partition of owner. Called with the requester's lock held.
func (rt *remoteTopic) waitsOn(owner string) bool {
	pinned := 0
	for _, c := range rt.pinnedTo {
		pinned += c
	}
	return rt.parked > pinned || rt.pinnedTo[owner] > 0
}

// register sends tokens to owner in one frame, in the background. An owner that refuses
// the op (a release before tokens) is remembered, and polled instead, for
// tokens.RefusalMemory; a token that did not arrive is forgotten, so the keeper sends it
// again within tokens.KeepInterval.
func (n *Node) register(owner string, regs []wire.Registration) {
	frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpRegister, Registrations: regs})
	if err != nil {
		return
	}
	n.stats.remote.registrations.Add(uint64(len(regs)))
	n.background(func() {
		raw, err := n.exchange(context.Background(), owner, frame, n.clock.Now().Add(ForwardBudget))
		var answers []wire.Answer
		if err == nil {
			n.ownerAnswered(owner) // a registration doubles as a slow owner's recheck
			answers, err = wire.DecodeReply(raw)
		}
		r := &n.requester
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case err == nil && len(answers) == 1 && answers[0].Status == wire.StatusUnsupported:
			r.regs.Refused(owner, n.clock.Now())
			for _, reg := range regs {
				r.regs.Spent(reg.Topic, owner)
			}
			n.kickKeeper() // to poll it
		case err != nil || len(answers) != len(regs):
			for _, reg := range regs {
				r.regs.Spent(reg.Topic, owner)
			}
		default:
			for i, a := range answers {
				if a.Status != wire.StatusOK {
					r.regs.Spent(regs[i].Topic, owner)
				}
			}
		}
	})
}

// serveNotify takes an owner's word that it holds a record of topic for this node: the
// token is spent (forgotten here at once), and the wake goes to the consumer at the head of
// this node's queue, which claims the record. With nobody parked here it is passed at once,
// so the owner offers the record to its next token a round trip later.
func (n *Node) serveNotify(from, topic string, hold time.Duration) wire.Answer {
	now := n.clock.Now()
	if _, remote, _ := n.routes.Partitions(topic); len(remote[from]) == 0 {
		// The routes give the notifier no partition of the topic: nothing it says is
		// believed. Passed, so an owner whose routes are ahead of this node's (a partition
		// moving here) offers the record to its next token.
		n.stats.remote.unbacked.Add(1)
		return wire.Answer{Status: wire.StatusPass}
	}
	r := &n.requester
	r.mu.Lock()
	if !r.regs.Outstanding(topic, from) {
		// No token of this node's is outstanding there: this notification spends none (a
		// second one for one token, or one from a peer it never registered with).
		r.mu.Unlock()
		n.stats.remote.unbacked.Add(1)
		return wire.Answer{Status: wire.StatusPass}
	}
	r.regs.Spent(topic, from)
	rt := r.topics[topic]
	if rt == nil || !rt.waitsOn(from) {
		r.mu.Unlock()
		n.stats.remote.passes.Add(1)
		return wire.Answer{Status: wire.StatusPass}
	}
	rt.inbox.Push(tokens.Wake{Owner: from, Claim: true, Until: now.Add(hold)})
	r.mu.Unlock()
	n.stats.remote.notifications.Add(1)
	n.pump.Notify(topic)
	return wire.Answer{Status: wire.StatusOK}
}

// takeWake hands the pump an owner's wake for a waiter of topic: from the owner of its
// partition for a pinned waiter.
func (n *Node) takeWake(topic string, pinned int32) (tokens.Wake, bool) {
	owner := ""
	if pinned >= 0 {
		owners, _ := n.remoteOwners(topic, pinned)
		if len(owners) != 1 {
			return tokens.Wake{}, false
		}
		owner = owners[0]
	}
	now := n.clock.Now()
	r := &n.requester
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.topics[topic]
	if rt == nil {
		return tokens.Wake{}, false
	}
	var w tokens.Wake
	var ok bool
	if owner != "" {
		w, ok = rt.inbox.PopFrom(owner, now)
	} else {
		w, ok = rt.inbox.Pop(now)
	}
	if p := rt.polls[w.Owner]; ok && !w.Claim && p != nil {
		p.pending = false
	}
	return w, ok
}

// returnWake puts back a wake its consumer could not use (it left at that instant): the
// next consumer parked here claims the record (the keeper passes it if none is left).
func (n *Node) returnWake(topic string, w tokens.Wake) {
	r := &n.requester
	r.mu.Lock()
	if rt := r.topics[topic]; rt != nil {
		rt.inbox.PushFront(w)
	}
	r.mu.Unlock()
}

// pass tells owner that nobody here will claim the record it holds for this node.
func (n *Node) pass(owner, topic string) {
	frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpPass, Topic: topic})
	if err != nil {
		return
	}
	n.stats.remote.passes.Add(1)
	n.background(func() {
		n.exchange(context.Background(), owner, frame, n.clock.Now().Add(notifyBudget))
	})
}

// runKeeper keeps this node's tokens in place while consumers wait on owners: every
// tokens.KeepInterval it makes sure each owner of a topic with parked consumers holds a
// live token from this node, and sends each again after tokens.Resend (gatewayResend on a
// gateway) regardless; and it polls, for the topic's parked consumers, the owners that
// cannot take tokens. With no consumer waiting on an owner it arms no timer and sleeps
// until a consumer parks (invariant "idle costs nothing").
func (n *Node) runKeeper(ctx context.Context) {
	tick := make(chan struct{}, 1)
	fire := func() { notifyOne(tick) }
	var again time.Duration // when to keep again; zero: not until kicked
	for {
		stop := func() bool { return false }
		if again > 0 {
			stop = n.clock.AfterFunc(again, fire)
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case <-tick:
		case <-n.requester.kick:
			stop()
		}
		again = n.keep(n.clock.Now())
	}
}

func (n *Node) kickKeeper() { notifyOne(n.requester.kick) }

// keptOwners is consumeOwners of every partition of topic, for the keeper, with a panic of
// the host's routes or failure detector recovered (see recoverHostPanic): the keeper holds
// the requester's lock around it, which the recovery leaves held for keep to release. A
// panic keeps no owner for this pass.
func (n *Node) keptOwners(topic string) (owners []string) {
	defer n.recoverHostPanic("the keeper looking up the owners", topic, nil)
	owners, _ = n.consumeOwners(topic, -1)
	return owners
}

// takesTokens reports whether this node leaves tokens with owner (else it polls it): owners
// can call this node, its wire version has tokens, and the owner did not refuse a
// registration lately. Called with the requester's lock held.
func (n *Node) takesTokens(owner string, now time.Time) bool {
	return !n.noCallbacks && n.wireVersion >= wire.V4 && !n.requester.regs.Refusing(owner, now)
}

// polled records a poll of owner for topic that found records: the next comes at once,
// and the backoff starts again.
func (n *Node) polled(topic, owner string, hit bool) {
	r := &n.requester
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt := r.topics[topic]; rt != nil && hit {
		if p := rt.polls[owner]; p != nil {
			p.at, p.backoff = n.clock.Now(), pollFirst
		}
	}
	n.kickKeeper()
}

// keep is one pass of the keeper at now: it forgets topics nobody waits on any more
// (their tokens lapse at the owners; nothing is sent), passes the wakes nobody took, sends
// the registrations due, one frame per owner, and hands the parked consumers a probe wake
// for each owner whose poll is due. It returns when to keep again (zero: when kicked).
func (n *Node) keep(now time.Time) time.Duration {
	r := &n.requester
	type wakeOf struct{ owner, topic string }
	var passes []wakeOf
	var polled []string
	due := map[string][]wire.Registration{}
	again := time.Duration(0)
	soon := func(d time.Duration) {
		if again == 0 || d < again {
			again = max(d, time.Millisecond)
		}
	}
	r.mu.Lock()
	for topic, rt := range r.topics {
		if rt.parked == 0 {
			rt.inbox.Drain(now, func(w tokens.Wake) {
				if w.Claim {
					passes = append(passes, wakeOf{w.Owner, topic})
				}
			})
			r.regs.Forget(topic)
			delete(r.topics, topic)
			continue
		}
		soon(tokens.KeepInterval)
		owners := n.keptOwners(topic)
		resend := resendEvery(rt.gateway, len(owners))
		ttl := tokenTTL(now, rt.latest, resend)
		for _, owner := range owners {
			if !rt.waitsOn(owner) {
				continue // its records serve nobody parked here: no token, no poll
			}
			if n.takesTokens(owner, now) {
				if r.regs.Due(topic, owner, now, resend) {
					r.regs.Sent(topic, owner, now, ttl)
					due[owner] = append(due[owner], wire.Registration{Topic: topic, TTL: ttl})
				}
				continue
			}
			if rt.polls == nil {
				rt.polls = map[string]*poll{}
			}
			p := rt.polls[owner]
			if p == nil {
				p = &poll{at: now, backoff: pollFirst}
				rt.polls[owner] = p
			}
			if !now.Before(p.at) && !p.pending {
				rt.inbox.Push(tokens.Wake{Owner: owner, Until: now.Add(pollMax)})
				p.pending = true
				p.at, p.backoff = now.Add(p.backoff), min(2*p.backoff, pollMax)
				polled = append(polled, topic)
			}
			soon(p.at.Sub(now))
		}
	}
	r.mu.Unlock()
	for _, topic := range polled {
		n.pump.Notify(topic)
	}
	for _, p := range passes {
		n.pass(p.owner, p.topic)
	}
	for owner, regs := range due {
		for len(regs) > 0 {
			k := min(len(regs), wire.MaxRegistrations)
			n.register(owner, regs[:k])
			regs = regs[k:]
		}
	}
	return again
}

// replayRemote reads a partition another node owns, from its owner. An owner on a release
// before wire version 9 refuses the Headers flag with a 400: the frame goes again without
// it, within the same budget, and the refusal is remembered for olderFieldMemory.
func (n *Node) replayRemote(ctx context.Context, owner, topic string, partition int32, offset int64, limit int) ([]Message, error) {
	now := n.clock.Now()
	if !n.servesConsumes(owner, now) {
		return nil, fmt.Errorf("%w: %s serves no replays of other nodes (an older release)", ErrUnavailable, owner)
	}
	l := n.lane(owner)
	r := wire.Replay{Partition: partition, Offset: offset, Limit: int32(min(limit, 1<<30)), Headers: n.asksHeaders(l, now)}
	deadline := now.Add(ForwardBudget)
	var reply wire.ConsumeReply
	for {
		frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpReplay, Topic: topic, Replay: r})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
		raw, err := n.exchange(ctx, owner, frame, deadline)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: %v", ErrTransport, err)
		}
		if reply, err = wire.DecodeConsumeReply(raw); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTransport, err)
		}
		if reply.Status != wire.StatusBadRequest || !r.Headers {
			break
		}
		// An older release refused the flags byte: again without it.
		r.Headers = false
		l.Refuse(acklane.Headers, n.clock.Now().Add(olderFieldMemory))
	}
	if err := n.ownerRefusal(owner, &reply); err != nil {
		return nil, err
	}
	msgs := messagesOf(topic, reply.Deliveries, time.Time{})
	for i := range msgs {
		msgs[i].Receipt, msgs[i].Expiry = Handle{}, time.Time{} // a replay leases nothing
	}
	n.stats.replayed.Add(uint64(len(msgs)))
	return msgs, nil
}

// RemoteStats counts consumption across nodes, on both sides.
type RemoteStats struct {
	// As the requesting node.
	Probes        uint64 // probes sent to owners (a consume's opening ask, and polls)
	ProbeHits     uint64 // of them, answered with records
	Registrations uint64 // tokens sent to owners (each entry of a registration frame)
	Notifications uint64 // owners' notifications taken for a parked consumer
	Claims        uint64 // claims sent after a notification
	ClaimHits     uint64 // of them, answered with records
	Passes        uint64 // notifications declined: nobody parked here could use them
	Cancels       uint64 // cancels sent for a reply nobody received
	Hedges        uint64 // probes sent while another owner's was still out past 50 ms (a hedge)
	Unbacked      uint64 // a peer's notifications and records refused: the routes give it no such partition, or no token was left with it
	SlowOwners    uint64 // owners found slow: a consume's RPC ran out of its budget
	// As the owner.
	Served    uint64 // probes and claims of other nodes served
	Tokens    uint64 // tokens other nodes registered here
	Notified  uint64 // notifications sent to other nodes (tokens fired)
	Passed    uint64 // of them, passed: the hold retired at once
	Abandoned uint64 // of them, unanswered: the hold ended and the requester's token dropped
	Cancelled uint64 // records given back by a cancel that raced their reply
}

type remoteStats struct {
	probes, probeHits, registrations, notifications, claims, claimHits, passes, cancels atomic.Uint64
	hedges, slowOwners, unbacked                                                        atomic.Uint64
	served, tokens, notified, passed, cancelled, abandoned                              atomic.Uint64
}

func (s *remoteStats) load() RemoteStats {
	return RemoteStats{
		Probes: s.probes.Load(), ProbeHits: s.probeHits.Load(), Registrations: s.registrations.Load(),
		Notifications: s.notifications.Load(), Claims: s.claims.Load(), ClaimHits: s.claimHits.Load(),
		Passes: s.passes.Load(), Cancels: s.cancels.Load(), Hedges: s.hedges.Load(), SlowOwners: s.slowOwners.Load(), Unbacked: s.unbacked.Load(),
		Served: s.served.Load(), Tokens: s.tokens.Load(), Notified: s.notified.Load(),
		Passed: s.passed.Load(), Cancelled: s.cancelled.Load(), Abandoned: s.abandoned.Load(),
	}
}

// asksHeaders reports whether a consume or replay sent to the owner of lane l now asks for
// the records' headers: this node speaks wire version 9, and the owner did not refuse the
// flag lately.
func (n *Node) asksHeaders(l *lane, now time.Time) bool {
	return n.wireVersion >= wire.V9 && !l.Refuses(acklane.Headers, now)
}

// ownerRefusal is the error an owner's consume reply answers, nil for records. An owner that
// does not know the op (a release before consumption across nodes) is remembered, and asked
// nothing more for olderFieldMemory.
func (n *Node) ownerRefusal(owner string, reply *wire.ConsumeReply) error {
	switch reply.Status {
	case wire.StatusOK:
		return nil
	case wire.StatusUnsupported:
		n.refusedConsumes(owner)
		return fmt.Errorf("%w: %s serves no consumes or replays of other nodes (an older release): %s", ErrUnavailable, owner, reply.Message)
	}
	return errorOf(wire.Answer{Status: reply.Status, Message: reply.Message})
}

// messagesOf is the records of an owner's reply, as this node's caller receives them; sent
// as for messageOf. Their headers share one allocation, each message's capped at its own.
func messagesOf(topic string, deliveries []wire.Delivery, sent time.Time) []Message {
	msgs := make([]Message, len(deliveries))
	count := 0
	for i := range deliveries {
		count += len(deliveries[i].Headers)
	}
	var all []Header // every message's headers, in one allocation
	if count > 0 {
		all = make([]Header, count)
	}
	for i := range deliveries {
		n := len(deliveries[i].Headers)
		msgs[i] = messageOf(topic, &deliveries[i], sent, all[:n:n])
		all = all[n:]
	}
	return msgs
}
