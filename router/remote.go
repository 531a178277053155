package router

import (
	"cmp"
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
// across nodes"): the RPCs this node sends owners for its consumers. A consume that finds
// nothing on this node's partitions asks remote owners with a non-blocking probe (the first
// with records answers: one round trip; two at most when it has a wait, so it parks within
// two round trips however many owners there are), then parks (parked.go) with a delivery
// token left with each owner (keeper.go). A consumer handed an owner's wake claims the
// record (two round trips in all). A reply nobody receives is cancelled, and a replay of
// another node's partition is asked of its owner.

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
	// olderFieldMemory is how long an owner that refused a field of the consume frame gets
	// frames without it.
	olderFieldMemory = tokens.RefusalMemory
)

// consumeRemote serves a consume that found nothing local (or has no local partition to
// look at), nor anything read ahead (ra, when the consume may take what is), from the remote
// owners: a probe of each (see probe), then, with a wait, parked on
// this node's queue and on tokens left with the owners, until a record comes, the wait ends
// or ctx ends. It returns within ConsumeOverrun of deadline, whatever the owners do.
func (n *Node) consumeRemote(ctx context.Context, req scanRequest, owners []string, gateway bool, deadline time.Time, ra *readAhead, s aheadSettings) ([]Message, error) {
	parks := n.clock.Now().Before(deadline)
	probed := req
	if ra != nil {
		// Nothing held (see consume): the probe asks for the target besides, as
		// reservations. One with room for nothing besides (a batch as large as a request
		// carries) asks for its own records as a plain probe: nothing to hold, nothing to
		// confirm.
		if size := ra.probeSize(req.max, s); size > req.max {
			probed.max, probed.reserve, probed.ahead = size, true, size-req.max
		}
	}
	msgs, out, probeErr := n.probe(ctx, probed, owners, parks, !gateway && req.pinned < 0, deadline)
	received := func(msgs []Message, _ time.Time) []Message { return msgs }
	if probed.reserve {
		ra.probed(probed.ahead)
		received = func(msgs []Message, arrived time.Time) []Message { return ra.split(msgs, req.max, s, arrived) }
		if len(msgs) > 0 {
			msgs = received(msgs, time.Time{})
		}
	}
	if out != nil {
		// Probes still out: the consume parks, and a record one of them brings goes to it
		// (see park); what they bring once it returned is given back.
		out.received, out.hold = received, n.lateHold(req)
		defer out.leave()
	}
	if len(msgs) > 0 || ctx.Err() != nil {
		return msgs, ctx.Err()
	}
	if !n.clock.Now().Before(deadline) {
		return nil, probeErr
	}
	return n.park(ctx, req, owners, gateway, deadline, out)
}

// lateHold is how long a record a probe brought after its consume parked may wait here for
// that consume: the hold of reading ahead, under the visibility timeout the probe asked for
// (the topic's, unless it named another), whether the consume reads ahead or not.
func (n *Node) lateHold(req scanRequest) time.Duration {
	t := req.state
	if t == nil {
		t = n.topic(req.topic)
	}
	return holdFor(cmp.Or(req.visibility, n.aheadSettingsIn(t, req.topic).visibility))
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
//
// When it returns empty with probes still out, for the consume to park, it returns them
// too (out): the caller hands park what they bring, and leaves them once it returns.
func (n *Node) probe(ctx context.Context, req scanRequest, owners []string, parks, localToo bool, deadline time.Time) (msgs []Message, out *hedgedProbes, err error) {
	if len(owners) == 0 {
		return nil, nil, nil
	}
	asked, start, err := n.probeOrder(req.topic, owners, parks)
	if err != nil {
		return nil, nil, err
	}
	if len(asked) == 1 && !(parks && localToo) { // nothing else serves the consume meanwhile
		msgs, err := n.probeOne(ctx, asked[0], req, deadline.Add(ConsumeOverrun))
		return msgs, nil, err
	}
	return n.probeHedged(ctx, req, asked, start, parks, deadline)
}

// probeOrder is the owners a consume probes, asked from start on, round: those that let no
// consume's RPC run out of its budget lately (see answering), start rotating per topic; for
// a consume that parks, probeOwners of them at most. With none, the error says so.
func (n *Node) probeOrder(topic string, owners []string, parks bool) (asked []string, start int, err error) {
	asked = n.answering(owners)
	if len(asked) == 0 {
		return nil, 0, fmt.Errorf("%w: no owner of %s answered lately (asked again in the background)", ErrUnavailable, topic)
	}
	start = n.topic(topic).nextProbe(len(asked))
	if parks && len(asked) > probeOwners {
		// The rest are reached by the tokens the wait leaves with every owner: an owner
		// holding records spends one at once, so the consume parks within two round trips
		// however many owners there are.
		asked = append(slices.Clone(asked[start:]), asked[:start]...)[:probeOwners]
		start = 0
	}
	return asked, start, nil
}

// probeOne probes a lone owner from the caller's goroutine, its RPC ending by until at the
// latest.
func (n *Node) probeOne(ctx context.Context, owner string, req scanRequest, until time.Time) ([]Message, error) {
	n.stats.remote.probes.Add(1)
	msgs, err := n.remoteConsume(ctx, owner, req, false, n.rpcDeadline(ProbeBudget, until))
	if len(msgs) > 0 {
		n.stats.remote.probeHits.Add(1)
	}
	return msgs, err
}

// probeHedged probes asked, from start on, each on a goroutine of the node: the next owner
// as soon as those out so far answered empty, or once the last one sent has not answered
// within probeHedge. The first records that come back answer the consume. A consume that
// parks returns empty once every probe is out past probeHedge or answered empty, and
// returns the probes still out (see probe).
func (n *Node) probeHedged(ctx context.Context, req scanRequest, asked []string, start int, parks bool, deadline time.Time) (msgs []Message, out *hedgedProbes, err error) {
	p := &hedgedProbes{n: n, req: req, asked: asked, start: start, parks: parks,
		until: deadline.Add(ConsumeOverrun), answers: make(chan probeAnswer, len(asked)),
		hedge: make(chan struct{}, 1), stopHedge: func() bool { return false }}
	defer func() {
		if out == nil {
			p.leave()
		}
	}()
	p.send(ctx)
	var lastErr error
	failed := 0
	for got := 0; got < len(asked); {
		select {
		case a := <-p.answers:
			got++
			if len(a.msgs) > 0 {
				n.stats.remote.probeHits.Add(1)
				return a.msgs, nil, nil
			}
			if a.err != nil {
				lastErr = a.err
				failed++
				n.logger.Debug("consume: probe of an owner failed", "topic", req.topic, "err", a.err)
			}
			if got == p.sent && p.sent < len(asked) {
				p.send(ctx) // the owners out so far answered: the next at once
			}
		case <-p.hedge:
			switch {
			case p.sent < len(asked):
				n.stats.remote.hedges.Add(1)
				p.send(ctx)
			case n.clock.Now().Before(deadline):
				// Every probe is out past probeHedge or answered empty: park, with tokens
				// left with the owners still silent too.
				return nil, p, nil
			}
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	if failed == len(asked) {
		return nil, nil, lastErr
	}
	return nil, nil, nil
}

// probeAnswer is an owner's answer to a probe.
type probeAnswer struct {
	msgs []Message
	err  error
	at   time.Time // when it came, for an answer that comes once the consume parked
}

// hedgedProbes is the probes of one consume that probeHedged sends. The probes still out
// when probeHedged returns run on to their replies or their budgets (so an owner that hangs
// is found slow, not merely outrun). The records a late reply carries go to the consume if
// it parked meanwhile (see park): they are the very records it waits for, and given back
// they would reach it only after a release, a notification and a claim, if at all (an owner
// on a release before the node wire's version 7 counts the give-back as an attempt, and
// under MaxDeliveries 1 quarantines the record), within the hold of reading ahead of the
// reply's coming. Past that, or once the consume returned (left), they are given back,
// uncounted: nobody takes them.
type hedgedProbes struct {
	n     *Node
	req   scanRequest
	asked []string
	start int
	sent  int // the probes sent so far
	parks bool
	until time.Time // the consume's deadline plus ConsumeOverrun: every probe ends by then

	answers   chan probeAnswer
	hedge     chan struct{} // the last probe sent is out past probeHedge
	stopHedge func() bool

	// received turns what a late probe brought, when it arrived, into the consume's records
	// (the read-ahead holds what it reserved besides, from then on), and hold is how long
	// after it came the parked consume may still take it: a reading ahead's hold, so that a
	// record waits here no longer than a record read ahead does. Both set before the
	// consume parks.
	received func(msgs []Message, arrived time.Time) []Message
	hold     time.Duration

	mu   sync.Mutex
	left bool // the consume returned: nobody takes what a probe brings
	// interrupt, while the consume waits parked, ends its wait: a probe brought records.
	interrupt func()
}

// send probes the next owner, on a goroutine of the node, and arms the hedge: another owner
// left to ask, or a consume that parks, is told when this probe is out past probeHedge. The
// probe carries ctx's values but not its end: it runs to its reply or its budget even when
// the consumer goes first (a front end's client that hung up), so that an owner that hangs
// is found slow however briefly its consumers wait.
func (p *hedgedProbes) send(ctx context.Context) {
	n := p.n
	owner := p.asked[(p.start+p.sent)%len(p.asked)]
	p.sent++
	n.stats.remote.probes.Add(1)
	budget := n.rpcDeadline(ProbeBudget, p.until)
	req := p.req
	n.background(func() {
		var a probeAnswer
		func() {
			// The host's routes and transport run here, on a goroutine of the node.
			defer n.recoverHostPanic("probing an owner", owner, &a.err)
			a.msgs, a.err = n.remoteConsume(context.WithoutCancel(ctx), owner, req, false, budget)
		}()
		a.at = n.clock.Now()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.left {
			p.gaveBack(a.msgs)
			return
		}
		p.answers <- a // room for one answer a probe
		if len(a.msgs) > 0 && p.interrupt != nil {
			p.interrupt()
		}
	})
	p.stopHedge()
	select {
	case <-p.hedge: // the previous probe's, fired as this one left: spent
	default:
	}
	if p.sent < len(p.asked) || p.parks {
		p.stopHedge = n.clock.AfterFunc(probeHedge, func() { notifyOne(p.hedge) })
	}
}

// parked tells the probes that the consume waits parked, until interrupt is called (nil:
// it no longer waits): a probe that brings records calls it.
func (p *hedgedProbes) parked(interrupt func()) {
	p.mu.Lock()
	p.interrupt = interrupt
	p.mu.Unlock()
}

// late takes the answers that came, and returns the records of the first that carried any
// and came within the hold of now, turned into the consume's (see received); those of the
// others go back. Nil when none did.
func (p *hedgedProbes) late(now time.Time) []Message {
	var first probeAnswer
	for {
		select {
		case a := <-p.answers:
			switch {
			case len(a.msgs) == 0:
			case first.msgs == nil && now.Sub(a.at) <= p.hold:
				first = a
			default:
				p.gaveBack(a.msgs) // outstayed the hold, or a second owner's
			}
		default:
			if first.msgs == nil {
				return nil
			}
			p.n.stats.remote.probeHits.Add(1)
			p.n.stats.remote.lateTaken.Add(1)
			return p.received(first.msgs, first.at)
		}
	}
}

// gaveBack gives back the records of a late reply nobody takes, and counts it.
func (p *hedgedProbes) gaveBack(msgs []Message) {
	if len(msgs) > 0 {
		p.n.stats.remote.lateGivenBack.Add(1)
		p.n.giveBack(msgs)
	}
}

// leave ends the consume's probes: the hedge is stopped, and the answers that came but were
// not taken are given back, as will be those still out.
func (p *hedgedProbes) leave() {
	p.stopHedge()
	p.mu.Lock()
	p.left = true
	p.interrupt = nil
	p.mu.Unlock()
	for {
		select {
		case a := <-p.answers:
			p.gaveBack(a.msgs)
		default:
			return
		}
	}
}

// rpcDeadline is the deadline of a consume's RPC sent now with budget, cut to until (the
// consume's deadline plus ConsumeOverrun).
func (n *Node) rpcDeadline(budget time.Duration, until time.Time) time.Time {
	return earliest(n.clock.Now().Add(budget), until)
}

// remoteConsume sends one probe (claim false) or claim to owner and returns the records it
// answered. An owner on an older release refuses a field it does not know with a 400: the
// frame goes again without it, newest first (the Headers flag, relative expiry, Max, then
// the Claim flag), within the same budget, and without any other field the owner refused
// meanwhile (other consumes learn too); the refusal is remembered for that owner for
// olderFieldMemory. When no reply comes
// back, or ctx ends before the records reach the caller, the owner is asked to give back
// whatever the reply carried.
func (n *Node) remoteConsume(ctx context.Context, owner string, req scanRequest, claim bool, deadline time.Time) ([]Message, error) {
	l := n.lane(owner)
	now := n.clock.Now()
	if !n.servesConsumes(owner, now) {
		// It refused the op since this consume chose it: one refusal per two minutes.
		return nil, fmt.Errorf("%w: %s serves no consumes of other nodes (an older release)", ErrUnavailable, owner)
	}
	c, err := n.consumeTo(l, owner, req, claim, now)
	if err != nil {
		return nil, err
	}
	var ride *riders // the acks that ride with the reservations (see riders.go)
	if c.Reserve {
		if ride = n.takeRiders(l, ctx, req.topic, now); ride != nil {
			defer ride.release()
		}
	}
	deliveries := deliveriesPool.Get().(*[]wire.Delivery)
	defer func() {
		if deliveries != nil { // not handed to a refill
			putDeliveries(deliveries)
		}
	}()
	for refused := false; ; refused = true {
		if refused {
			// The owner refused a field (an older release), now remembered in l: the frame
			// again without every field l refuses now, those other consumes to the owner
			// learnt meanwhile included, so that each costs one refused request.
			if c, err = n.consumeTo(l, owner, req, claim, n.clock.Now()); err != nil {
				return nil, err
			}
		}
		c.RequestID = requestID()
		sent := n.clock.Now()
		r := wire.Request{Op: wire.OpConsume, Topic: req.topic, Consume: c}
		callDeadline := deadline
		if ride != nil {
			r.Records, callDeadline = ride.records, earliest(deadline, ride.deadline)
		}
		frame, err := wire.EncodeRequest(r)
		if err != nil {
			if ride != nil {
				ride.answerEach(wire.Answer{Status: wire.StatusBadRequest, Message: err.Error()})
			}
			return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
		raw, err := n.exchangeConsume(ctx, owner, req.topic, c, frame, callDeadline, &sent, ride != nil)
		if err != nil && ride != nil {
			// It went alone (never queued): it left, and no reply came back.
			ride.answerEach(wire.Answer{Status: statusTransport, Message: err.Error()})
		}
		if errors.Is(err, errConsumesRefused) {
			// It refused the op while this consume queued: sent nowhere, nothing to cancel.
			return nil, fmt.Errorf("%w: %s serves no consumes of other nodes (an older release)", ErrUnavailable, owner)
		}
		if errors.Is(err, errRefusedSince) {
			continue // sent nowhere: again as the lane says now, within the same budget
		}
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
		if ride != nil {
			rest, refusal, err := n.readRiders(l, ride, raw)
			ride = nil // answered, or gone in a frame of their own
			if err != nil {
				n.cancelRemote(ctx, owner, req.topic, c.RequestID)
				return nil, fmt.Errorf("%w: %v", ErrTransport, err)
			}
			if refusal != nil && refusal.Status == wire.StatusBadRequest {
				// An older release refused the Acks flag (or a field before it): the
				// consume again without acks, and without the version's other flag.
				until := n.clock.Now().Add(olderFieldMemory)
				l.Refuse(acklane.RidingAcks, until)
				if c.Compact {
					c.Compact = false
					l.Refuse(acklane.CompactDeliveries, until)
				}
				continue
			}
			raw = rest
		}
		reply, err := wire.DecodeConsumeReplyInto(*deliveries, raw)
		if err != nil {
			n.cancelRemote(ctx, owner, req.topic, c.RequestID)
			return nil, fmt.Errorf("%w: %v", ErrTransport, err)
		}
		if reply.Deliveries != nil {
			*deliveries = reply.Deliveries
		}
		if reply.Status == wire.StatusBadRequest && n.learnConsumeRefusal(l, &c) {
			continue // an older release refused a field: again without it (consumeTo)
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
		if req.refill != nil {
			// Kept as they came, for the consumes to come (see aheadRecords): the slice is
			// the refill's now.
			*deliveries = ownedBy(n, owner, req, *deliveries, deliveryPlace)
			req.refill.deliveries, req.refill.sent = deliveries, sent
			deliveries = nil
			return nil, nil
		}
		return ownedBy(n, owner, req, messagesOf(req.topic, reply.Deliveries, sent), messagePlace), nil
	}
}

// deliveriesPool holds the slices remote consumes decode their replies' deliveries into: the
// deliveries are made messages at once (messagesOf copies what it keeps), and the slice
// goes back for the next reply.
var deliveriesPool = sync.Pool{New: func() any { return new([]wire.Delivery) }}

// putDeliveries returns a slice of deliveriesPool, keeping none of the reply it held.
func putDeliveries(d *[]wire.Delivery) {
	clear(*d)
	*d = (*d)[:0]
	deliveriesPool.Put(d)
}

// consumeTo is the consume frame remoteConsume sends owner, whose lane is l, for req (a
// claim when claim is set) now: every field this release knows but those the owner refused
// lately (an older release: see dropRefused). Its RequestID is left to the sender.
func (n *Node) consumeTo(l *lane, owner string, req scanRequest, claim bool, now time.Time) (wire.Consume, error) {
	c := wire.Consume{Pinned: req.pinned, Visibility: req.visibility, Max: 1, Reserve: req.reserve,
		Claim: claim && n.wireVersion >= wire.V5, RelativeExpiry: n.wireVersion >= wire.V7,
		Headers: n.wireVersion >= wire.V9, Compact: n.wireVersion >= wire.V16}
	if req.max > 1 && n.wireVersion >= wire.V6 {
		c.Max = int32(req.max)
	}
	dropRefused(l, &c, now)
	if !c.Reserve {
		if err := ownRecordsOnly(&c, req, owner); err != nil {
			return c, err
		}
	}
	return c, nil
}

// dropRefused takes out of c each optional field the owner of l refuses at now (an older
// release), and reports whether c carried any: consumeTo builds frames with it, and a
// consume queued before a refusal is not sent when it finds one (see errRefusedSince).
func dropRefused(l *lane, c *wire.Consume, now time.Time) bool {
	dropped := false
	drop := func(field *bool, r acklane.Refusal) {
		if *field && l.Refuses(r, now) {
			*field, dropped = false, true
		}
	}
	drop(&c.Claim, acklane.ConsumeClaim)
	drop(&c.RelativeExpiry, acklane.RelativeExpiry)
	drop(&c.Headers, acklane.Headers)
	drop(&c.Compact, acklane.CompactDeliveries)
	drop(&c.Reserve, acklane.Reserve)
	if c.Max > 1 && l.Refuses(acklane.ConsumeMax, now) {
		c.Max, dropped = 1, true
	}
	return dropped
}

// ownRecordsOnly makes c, a consume for req, one that asks owner (which reserves nothing: an
// older release) for the consume's own records alone, without the Reserve flag; a request
// that is all read-ahead has nothing to ask.
func ownRecordsOnly(c *wire.Consume, req scanRequest, owner string) error {
	own := int32(req.max - req.ahead)
	if own < 1 {
		return fmt.Errorf("%w: %s reserves nothing (an older release)", ErrUnavailable, owner)
	}
	c.Reserve, c.Max = false, min(c.Max, own)
	return nil
}

// learnConsumeRefusal remembers in l the field an owner refused c, a consume it answered 400
// (an older release), for olderFieldMemory, and reports whether c carried one to refuse:
// the compact reply (asked again for the reply it reads), the reservation flag (it reserves
// nothing: the consume's own records are asked again without it, and nothing is read ahead
// from it, since a consume would deliver them, counting attempts for records nobody asked for
// yet), or else the newest of the others (dropNewestField). Whoever reads the reply learns
// it, the consumer that left before its batch came back included (answerConsumes): each
// field costs one refused request per owner.
func (n *Node) learnConsumeRefusal(l *lane, c *wire.Consume) bool {
	switch {
	case c.Compact:
		l.Refuse(acklane.CompactDeliveries, n.clock.Now().Add(olderFieldMemory))
		return true
	case c.Reserve:
		l.Refuse(acklane.Reserve, n.clock.Now().Add(olderFieldMemory))
		return true
	}
	return n.dropNewestField(l, c)
}

// dropNewestField takes the newest field out of c, a consume an owner refused with a 400 (a
// release that does not know it), and remembers the refusal in l for olderFieldMemory:
// the Headers flag, relative expiry, Max, then the Claim flag. It reports false when c
// carries none of them.
func (n *Node) dropNewestField(l *lane, c *wire.Consume) bool {
	if !(c.Headers || c.RelativeExpiry || c.Max > 1 || c.Claim) {
		return false
	}
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
	return true
}

// ownedBy keeps the records of owner's reply (messages or deliveries, place giving each
// one's receipt handle) that this node's routes say owner owns (of the pinned partition
// alone, for a pinned consume), and gives the others back to owner at once: a peer is
// believed only where the routes back it. A reply a peer forged carries
// records no consumer here receives; one from an owner whose routes are ahead of this
// node's (a partition moving) costs those records nothing but a round trip.
func ownedBy[R any](n *Node, owner string, req scanRequest, recs []R, place func(*R) Handle) []R {
	_, remote, _ := n.routes.Partitions(req.topic)
	parts := remote[owner]
	backed := func(p int32) bool { return (req.pinned < 0 || p == req.pinned) && slices.Contains(parts, p) }
	// A reply's records come in runs of one partition, each checked once; a record (a
	// large struct) is moved only once one before it was given back.
	checked, ok := int32(-1), false
	kept := 0
	for i := range recs {
		h := place(&recs[i])
		if h.Partition != checked {
			checked, ok = h.Partition, backed(h.Partition)
		}
		if ok {
			if kept != i {
				recs[kept] = recs[i]
			}
			kept++
			continue
		}
		n.stats.remote.unbacked.Add(1)
		n.logger.Warn("consume: an owner answered a record of a partition the routes do not give it: given back", "owner", owner, "topic", req.topic, "partition", h.Partition)
		rec := wireRecord{op: opRelease, handle: h}
		n.background(func() { n.forward(context.Background(), owner, req.topic, rec) })
	}
	clear(recs[kept:]) // what was given back refers to the reply no more
	return recs[:kept]
}

// messagePlace and deliveryPlace are the receipt handle of a record, for ownedBy.
func messagePlace(m *Message) Handle { return m.Receipt }

func deliveryPlace(d *wire.Delivery) Handle {
	return Handle{Partition: d.Partition, Offset: d.Offset, Nonce: d.Nonce}
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

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
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
	// Probe replies with records that came after their consume stopped waiting for them
	// (another owner's records taken, or it parked): taken by the consume that parked
	// (within the hold of their arrival), or given back (past it, a second owner's, or the
	// consume gone).
	LateTaken, LateGivenBack uint64
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
	hedges, slowOwners, unbacked, lateTaken, lateGivenBack                              atomic.Uint64
	served, tokens, notified, passed, cancelled, abandoned                              atomic.Uint64
}

func (s *remoteStats) load() RemoteStats {
	return RemoteStats{
		Probes: s.probes.Load(), ProbeHits: s.probeHits.Load(), Registrations: s.registrations.Load(),
		Notifications: s.notifications.Load(), Claims: s.claims.Load(), ClaimHits: s.claimHits.Load(),
		Passes: s.passes.Load(), Cancels: s.cancels.Load(), Hedges: s.hedges.Load(), SlowOwners: s.slowOwners.Load(), Unbacked: s.unbacked.Load(),
		LateTaken: s.lateTaken.Load(), LateGivenBack: s.lateGivenBack.Load(),
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
// as for setMessage. Their headers share one allocation, each message's capped at its own.
func messagesOf(topic string, deliveries []wire.Delivery, sent time.Time) []Message {
	if len(deliveries) == 0 {
		return nil
	}
	return messagesAppend(make([]Message, 0, len(deliveries)), topic, deliveries, sent)
}

// messagesAppend appends to msgs the messages of deliveries, each written whole
// (setMessage), so nothing of what msgs's array held there before is left.
func messagesAppend(msgs []Message, topic string, deliveries []wire.Delivery, sent time.Time) []Message {
	from := len(msgs)
	msgs = slices.Grow(msgs, len(deliveries))[:from+len(deliveries)]
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
		setMessage(&msgs[from+i], topic, &deliveries[i], sent, all[:n:n])
		all = all[n:]
	}
	return msgs
}

// setMessage makes *m the record another node delivered, as this node's caller receives
// it, with its headers converted into headers (the caller's: len(d.Headers) of them). With
// sent set, the delivery's expiry is the lease's time left at the owner (see
// wire.Consume.RelativeExpiry), counted here from sent, when the request left: the lease
// never looks longer here than it is at the owner, whatever the two clocks say. It is
// written in place: a message is large, and a batch's are many.
func setMessage(m *Message, topic string, d *wire.Delivery, sent time.Time, headers []Header) {
	*m = Message{
		Topic: topic, Partition: d.Partition, Offset: d.Offset, Key: d.Key, Value: d.Value,
		Receipt: Handle{Partition: d.Partition, Offset: d.Offset, Nonce: d.Nonce},
		Attempt: d.Attempt, Reason: Reason(d.Reason), Fence: d.Fence,
	}
	switch {
	case d.Expiry == 0:
	case !sent.IsZero():
		m.Expiry = sent.Add(time.Duration(d.Expiry))
	default:
		m.Expiry = time.Unix(0, d.Expiry)
	}
	if d.Timestamp != 0 {
		m.Timestamp = time.Unix(0, d.Timestamp)
	}
	if len(d.Headers) > 0 {
		for i, h := range d.Headers {
			headers[i] = Header(h)
		}
		m.Headers = headers
	}
}

// refusedConsumes remembers that owner refused the consume op, for olderFieldMemory.
func (n *Node) refusedConsumes(owner string) {
	n.lane(owner).Refuse(acklane.ConsumeOp, n.clock.Now().Add(olderFieldMemory))
}

// servesConsumes reports whether owner did not refuse the consume op lately.
func (n *Node) servesConsumes(owner string, now time.Time) bool {
	return !n.lane(owner).Refuses(acklane.ConsumeOp, now)
}
