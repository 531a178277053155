package router

import (
	"context"
	"sync"
	"time"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/tokens"
)

// The tokens this node leaves with owners while its consumers wait on them (see
// docs/protocol.md, "Consumption across nodes"), their keeper, and the inbox of owners'
// wakes. One token per owner and topic serves every consumer parked here on the topic. An
// owner where a record shows up spends the token and tells this node (serveNotify), which
// puts the wake in the topic's inbox for the pump to hand the consumer at the head of the
// queue (takeWake); that consumer claims the record. The keeper (runKeeper, keep) sends
// tokens again before they lapse, passes the wakes nobody took, and polls the owners that
// take no tokens.

const (
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

// waitsOn reports whether a consumer parked on rt can take a record from owner: one not
// pinned, or one pinned to a partition of owner. Called with the requester's lock held.
func (rt *remoteTopic) waitsOn(owner string) bool {
	pinned := 0
	for _, c := range rt.pinnedTo {
		pinned += c
	}
	return rt.parked > pinned || rt.pinnedTo[owner] > 0
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
			due, next := rt.pollDue(owner, now)
			if due {
				polled = append(polled, topic)
			}
			soon(next.Sub(now))
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
			n.register(owner, regs[:k], now)
			regs = regs[k:]
		}
	}
	return again
}

// pollDue gives the topic's parked consumers a probe wake for owner, one that takes no
// tokens, when its poll is due at now and none is pending, and backs the next poll off. It
// reports whether it did, and when the owner's next poll is due. Called with the
// requester's lock held.
func (rt *remoteTopic) pollDue(owner string, now time.Time) (due bool, next time.Time) {
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
		due = true
	}
	return due, p.at
}

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

// register sends tokens to owner in one frame, in the background: the registrations the
// requester recorded as sent at sent. An owner that refuses the op (a release before
// tokens) is remembered, and polled instead, for tokens.RefusalMemory; a token that did not
// arrive is forgotten (unless a registration sent since replaced it: its frame may have
// arrived), so the keeper sends it again within tokens.KeepInterval.
func (n *Node) register(owner string, regs []wire.Registration, sent time.Time) {
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
				r.regs.Lost(reg.Topic, owner, sent)
			}
		default:
			for i, a := range answers {
				if a.Status != wire.StatusOK {
					r.regs.Lost(regs[i].Topic, owner, sent)
				}
			}
		}
	})
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

// serveNotify takes an owner's word that it holds a record of topic for this node: the
// token is spent (forgotten here at once), and the wake goes to the consumer at the head of
// this node's queue, which claims the record; with more consumers parked than wakes, the
// keeper registers a fresh token at once. With nobody parked here it is passed at once,
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
	// More consumers wait here than wakes came: the token goes back to the owner at once,
	// rather than at the keeper's next pass (up to tokens.KeepInterval later), so an owner
	// with a backlog serves every consumer parked here a round trip apart, not one per pass.
	more := rt.parked > rt.inbox.Len()
	r.mu.Unlock()
	n.stats.remote.notifications.Add(1)
	n.pump.Notify(topic)
	if more {
		n.kickKeeper()
	}
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
