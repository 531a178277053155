package sim

import (
	"context"
	"errors"
	"slices"
	"time"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
)

// move is one partition moved from a node to another: by hand-off (the old owner's HandOff,
// the new owner's Adopt), or by failover from an owner that is down (ReadState from its disk,
// Adopt). The routes name the new owner from end on; zero while the move is under way.
type move struct {
	p        int32
	from, to *node
	failover bool
	fromEp   *epoch // the process the state came from (a failover: the dead one)
	toEp     *epoch // the process that adopted it
	// start is the move's first change: the routes stop naming the old owner, or HandOff is
	// called. A hand-off fenced the partition at some instant of [fenced, handedOff]
	// (HandOff's call and return); the state's times were read on the old owner's clock at
	// handedOff and on the new owner's at adopting (Adopt's call), so every lease and delay
	// it carried stood still from the one to the other. Adopt returned at adopted.
	start, fenced, handedOff, adopting, adopted time.Time
	end                                         time.Time
}

// shift is how long the leases a hand-off carried stood still between the old owner's
// reading of their time left and the new owner's.
func (m *move) shift() time.Duration { return m.adopting.Sub(m.handedOff) }

// carriedEnd maps an instant at which a lease of the old owner could end to the instant it
// ends at through hand-off m, as a lower bound of the new one (lower) or an upper bound: a
// lease over before the fence stays over, one that outlived it ends its time left after
// Adopt (nothing if its expiry passed while HandOff waited for the disk). The fence's
// instant is known only to lie within [fenced, handedOff], and an expiry at the fence's
// instant ends the lease there.
func (m *move) carriedEnd(t time.Time, lower bool) time.Time {
	if lower {
		if t.After(m.handedOff) {
			return t.Add(m.shift())
		}
		return t
	}
	if t.Before(m.fenced) {
		return t
	}
	return later(t, m.handedOff).Add(m.shift())
}

// ownerAt returns the node that owned partition p at t, as the routes named it (the new owner
// from a move's end on); nil while a move had it on its way, after the old owner's hand-off
// (or the failover's start) until the move's end, when no node may grant a lease of it.
func (s *sim) ownerAt(p int32, t time.Time) *node {
	o := s.firstOwner[p]
	for _, m := range s.moves {
		switch {
		case m.p != p || !t.After(m.handedOff):
		case !m.end.IsZero() && !t.Before(m.end):
			o = m.to
		default:
			return nil
		}
	}
	return o
}

// movedLease carries lease l through the hand-offs of its partition it has not been through
// yet: a lease its holder held at the fence lives on at the adopter, its end shifted by the
// time the state stood still (a failover carries no lease: the dead owner's died with it).
// Called with s.mu held.
func (s *sim) movedLease(l *lease) {
	for ; l.movesSeen < len(s.moves); l.movesSeen++ {
		m := s.moves[l.movesSeen]
		if m.failover || m.p != l.k.p || l.holder != m.fromEp || l.granted.After(m.handedOff) {
			continue
		}
		l.endMin, l.endMax = m.carriedEnd(l.endMin, true), m.carriedEnd(l.endMax, false)
		l.holder = m.toEp
	}
}

// inTransit reports whether lease l is in the state of the move under way, handed off and not
// adopted yet: its holder's end no longer ends it. Called with s.mu held.
func (s *sim) inTransit(l *lease) bool {
	m := s.moving
	return m != nil && !m.handedOff.IsZero() && m.adopted.IsZero() && m.p == l.k.p && l.holder == m.fromEp &&
		!l.granted.After(m.handedOff)
}

// resolveAcks settles, as partition p leaves node from (at: the fence of a hand-off, or a
// failover's read of the dead owner's disk), what became of the acks from applied: each is
// either durable for good (it is in the state the new owner adopted, which Adopt made
// durable there), or was undone by a crash of from before then and may come back. Called
// with s.mu held.
func (s *sim) resolveAcks(from *node, p int32, at time.Time) {
	for _, r := range s.records {
		if !r.deletedAt.IsZero() {
			continue
		}
		for i := range r.acks {
			a := &r.acks[i]
			if a.l.k.p != p || a.owner != from || a.durable || a.lost != "" || !a.s.Before(at) {
				continue
			}
			if why, documented := s.explain(from, p, *a, at); why == "" {
				a.durable = true
			} else {
				a.lost, a.lostDocumented = why, documented
			}
		}
	}
}

// setParts replaces the partitions each node of changes owns, and every node's view of the
// others', in one change of the routes.
func (s *sim) setParts(changes map[*node][]int32) {
	s.mu.Lock()
	s.routesMu.Lock()
	for nd, parts := range changes {
		nd.parts = parts
	}
	s.rebuildRemote()
	s.routesMu.Unlock()
	s.mu.Unlock()
}

func without(parts []int32, p int32) []int32 {
	return slices.DeleteFunc(slices.Clone(parts), func(q int32) bool { return q == p })
}

func with(parts []int32, p int32) []int32 {
	parts = append(slices.Clone(parts), p)
	slices.Sort(parts)
	return parts
}

// moveOut takes p out of the routes of its owner from.
func (s *sim) moveOut(from *node, p int32) {
	s.setParts(map[*node][]int32{from: without(from.parts, p)})
}

// moveIn adds p to the routes of node to.
func (s *sim) moveIn(to *node, p int32) { s.setParts(map[*node][]int32{to: with(to.parts, p)}) }

// switchRoutes moves p from from's routes to to's at once.
func (s *sim) switchRoutes(from, to *node, p int32) {
	s.setParts(map[*node][]int32{from: without(from.parts, p), to: with(to.parts, p)})
}

// diskFaulty reports whether a disk fault is in force on nd.
func (nd *node) diskFaulty() bool { return nd.diskFull != nil || nd.syncErr != nil }

// moveTarget draws a running node other than from, taking callbacks, its disk healthy, to
// adopt a partition; nil if there is none.
func (s *sim) moveTarget(from *node) *node {
	var cands []*node
	for _, nd := range s.nodes {
		// Not a node out of the host's reach (paused, cut off, its routes stale: zombie.go).
		if nd != from && !nd.noCallbacks && !nd.paused && !nd.cut && nd.view == nil {
			cands = append(cands, nd)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	to := cands[s.rng.IntN(len(cands))]
	if !to.up() || to.diskFaulty() {
		return nil
	}
	return to
}

// The orders in which a hand-off and the routes change (moveStep).
const (
	routesFirst   = iota // the routes stop naming the old owner, then HandOff, Adopt, the new routes
	routesAtOnce         // HandOff, Adopt, then the routes move from the old owner to the new at once
	routesOutLate        // HandOff, Adopt, the routes stop naming the old owner, then name the new
)

// moveStep moves a partition to another node by hand-off, as a host does: HandOff on the old
// owner, Adopt on the destination (an owner, or a gateway that becomes one), then the routes
// name the destination. The routes stop naming the old owner before HandOff, after Adopt
// together with naming the destination, or after Adopt alone; between the changes consumers
// settle the partition's leases through any node, the old owner included, and are refused
// (ErrMoved, 503) where nothing holds the state for the routes they took. HandOff and Adopt
// are retried now and then, with the same bytes, and time passes between them now and then.
// In runs that crash processes, the old owner dies now and then once HandOff returned (and
// starts again after the routes changed), or the new owner once Adopt returned (and starts
// again at once, before the routes name it). Only from a running owner to a running node,
// neither with a disk fault in force.
//
// The model: the leases the old owner held at the fence live on at the destination, their
// ends shifted by the time the state stood still (resolved when Adopt returns; a crash of the
// old owner after HandOff returned no longer ends them, one of the destination after Adopt
// returned does); every ack the
// old owner applied, unless its crashes undid it before the fence, is durable for good once
// Adopt returns; a settle refused changed nothing.
func (s *sim) moveStep() {
	p := int32(s.rng.IntN(int(s.partitions())))
	from := s.ownerOf(p)
	to := s.moveTarget(from)
	if to == nil || !from.up() || from.diskFaulty() || from.paused || from.cut || from.view != nil {
		return
	}
	order := s.rng.IntN(3)
	m := &move{p: p, from: from, to: to, fromEp: from.cur(), toEp: to.cur()}
	s.mu.Lock()
	s.moving = m
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.moving = nil
		s.mu.Unlock()
	}()
	m.start = time.Now()
	if order == routesFirst {
		// HandOff finds a partition its routes no longer name only if its shard is loaded.
		if err := within(func(ctx context.Context) error { return from.rn.Persist(ctx, topic, p) }); err != nil {
			s.report.Faults.MovesSkipped++
			s.logf("move %d from %s to %s abandoned: Persist: %v", p, from.id, to.id, err)
			return
		}
		s.moveOut(from, p)
		s.logf("move %d: %s's routes no longer name it", p, from.id)
		s.settleDuring(p, "before the hand-off")
	}
	m.fenced = time.Now()
	var state []byte
	handOff := func(ctx context.Context) (err error) {
		state, err = from.rn.HandOff(ctx, topic, p)
		return err
	}
	err := within(handOff)
	if err == nil && s.rng.IntN(4) == 0 {
		err = within(handOff) // retried: the same state
	}
	m.handedOff = time.Now()
	if err != nil {
		var setAside *router.SetAsideError
		if !errors.Is(err, router.ErrNotLocal) && !errors.As(err, &setAside) {
			s.fatalf("move %d from %s: HandOff on a healthy disk: %v", p, from.id, err)
		}
		// Refused before the fence: the partition's shard could not be loaded, or it was
		// dropped since Persist loaded it (idle) and the routes no longer name it there.
		if order == routesFirst {
			s.moveIn(from, p)
		}
		s.report.Faults.MovesSkipped++
		s.logf("move %d from %s to %s abandoned: HandOff: %v", p, from.id, to.id, err)
		return
	}
	if s.ctl != nil {
		s.ctl.revoke(from, p) // the state left with HandOff: the old owner's grant goes
	}
	s.mu.Lock()
	from.cur().movedOut = append(from.cur().movedOut, p)
	if s.handedOff[from] == nil {
		s.handedOff[from] = map[int32]bool{}
	}
	s.handedOff[from][p] = true
	if s.deposed[from] == nil {
		s.deposed[from] = map[int32]bool{}
	}
	s.deposed[from][p] = true
	s.mu.Unlock()
	s.logf("move %d: %s handed it off within [%v, %v] (%d bytes)", p, from.id, s.since(m.fenced), s.since(m.handedOff), len(state))
	s.settleDuring(p, "handed off, not adopted")
	if s.crashes() && s.rng.IntN(6) == 0 {
		// The old owner dies with the state in the host's hands; it starts again once the
		// routes no longer name the partition there.
		s.stop(from, []endKind{processCrash, powerCut}[s.rng.IntN(2)])
		from.downUntil = time.Now().Add(time.Second)
	}
	time.Sleep([]time.Duration{0, 0, 0, 10 * time.Millisecond, 300 * time.Millisecond}[s.rng.IntN(5)])
	m.adopting = time.Now()
	s.mu.Lock()
	delete(s.deposed[to], p) // its Adopt saves the partition (a node adopting what it handed off)
	s.mu.Unlock()
	if s.ctl != nil {
		s.ctl.grant(to, p) // Adopt installs only what the node is granted
	}
	adopt := func(ctx context.Context) error { return to.rn.Adopt(ctx, topic, p, state) }
	err = within(adopt)
	if err == nil && s.rng.IntN(4) == 0 {
		err = within(adopt) // retried: nothing installed again
	}
	if err != nil {
		s.fatalf("move %d to %s: Adopt on a healthy disk: %v", p, to.id, err)
	}
	m.adopted = time.Now()
	s.mu.Lock()
	s.adoptedLocked(m, to, from, m.handedOff)
	for _, l := range s.leases {
		s.movedLease(l)
	}
	s.mu.Unlock()
	s.logf("move %d: %s adopted it within [%v, %v]; its leases stood still %v", p, to.id, s.since(m.adopting), s.since(m.adopted), m.shift())
	s.settleDuring(p, "adopted, the routes not naming the new owner yet")
	if s.crashes() && s.rng.IntN(6) == 0 {
		// The new owner dies before the routes name it, and starts again at once: it loads
		// the adopted state from its disk, the leases carried gone with the process.
		s.stop(to, []endKind{processCrash, powerCut}[s.rng.IntN(2)])
		s.start(to)
	}
	switch order {
	case routesOutLate:
		s.moveOut(from, p)
		s.logf("move %d: %s's routes no longer name it", p, from.id)
		s.settleDuring(p, "adopted, named by no routes")
		fallthrough
	case routesFirst:
		time.Sleep(time.Microsecond) // the new owner's leases are granted after the move's end
		m.end = time.Now()
		s.moveIn(to, p)
	default:
		time.Sleep(time.Microsecond)
		m.end = time.Now()
		s.switchRoutes(from, to, p)
	}
	if from.up() && s.rng.IntN(2) == 0 {
		from.rn.DropPartition(topic, p) // the routes no longer name it there: the fence ends
	}
	s.routesChanged()
	to.rn.Appended(topic, p, s.logs.Log(topic, p).HighWatermark())
	s.report.Faults.Moves++
	s.logf("move %d from %s to %s: the routes name %s", p, from.id, to.id, to.id)
}

// crashes reports whether the run crashes processes (its swarm drew the class).
func (s *sim) crashes() bool {
	for _, x := range s.weights {
		if x.name == "processCrash" {
			return x.w > 0
		}
	}
	return false
}

// within makes one call of a move (Persist, HandOff, Adopt) with 2 s to return: on a
// healthy disk each returns within a writeout.
func within(call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return call(ctx)
}

// settleDuring settles, now and then, a few leases of partition p (held ones, or any) through
// any running node while p is on its way: moment says where, for the log.
func (s *sim) settleDuring(p int32, moment string) {
	if s.rng.IntN(3) == 0 {
		return
	}
	var ls []*lease
	for _, l := range s.held {
		if l.k.p == p {
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		for _, l := range s.leases {
			if l.k.p == p && l.k.inc == s.inc {
				ls = append(ls, l)
			}
		}
	}
	if len(ls) == 0 {
		return
	}
	s.logf("move %d: settles %s", p, moment)
	for range 1 + s.rng.IntN(3) {
		l := ls[s.rng.IntN(len(ls))]
		via := s.pickUp()
		if via == nil {
			return
		}
		s.settleOne(l, []settleOp{opAck, opAck, opAck, opExtend, opNack}[s.rng.IntN(5)], via, false)
	}
}

// failoverStep fails over the partitions of an owner that is down (crashed, cut or stopped,
// and not started again yet; or, when none is, one killed now until the faults heal), as a
// host does once it gives the owner up: ReadState from its disk (after a power cut, what
// survived it), Adopt on a running node, then the routes name that node. The dead owner's
// routes no longer name the partition when it starts again.
//
// The model: the leases the dead owner held ended at its death; each ack it applied is
// durable for good (in the state read, which Adopt made durable on the new owner) unless its
// crash undid it, which the model resolves by the crash windows, as for a restart.
func (s *sim) failoverStep() {
	var down []*node
	for _, nd := range s.nodes {
		if !nd.up() && nd.owner() {
			down = append(down, nd)
		}
	}
	if len(down) == 0 {
		nd := s.pickUp()
		if nd == nil || !nd.owner() || nd.cut || nd.view != nil {
			return
		}
		s.stop(nd, []endKind{processCrash, powerCut}[s.rng.IntN(2)])
		nd.downUntil = []time.Time{{}, time.Now().Add(10 * time.Second)}[s.rng.IntN(2)] // zero: until the heal
		s.logf("kill %s until %v", nd.id, s.since(nd.downUntil))
		down = []*node{nd}
	}
	dead := down[s.rng.IntN(len(down))]
	time.Sleep(time.Microsecond) // the failover comes after the death
	// With grants, the host cannot tell a dead owner from a paused one: it waits out the
	// grants of its last process first.
	s.waitOutDown(dead)
	parts := slices.Clone(dead.parts)
	if s.rng.IntN(2) == 0 {
		parts = parts[s.rng.IntN(len(parts)):][:1]
	}
	for _, p := range parts {
		to := s.moveTarget(dead)
		if to == nil {
			continue
		}
		m := &move{p: p, from: dead, to: to, failover: true, fromEp: dead.cur(), toEp: to.cur(), start: time.Now()}
		var state []byte
		if s.store != nil {
			// The state the dead owner last saved to the shared store, which survived it.
			err := within(func(ctx context.Context) (err error) {
				state, err = s.store.Load(ctx, topic, p)
				return err
			})
			if err != nil {
				s.fatalf("failover of %d from %s: the store's Load: %v", p, dead.id, err)
			}
			if state == nil {
				// Never saved: there is nothing to adopt, and the partition waits for its owner.
				s.logf("fail over %d from %s (down): the store holds no state of it; skipped", p, dead.id)
				continue
			}
		} else {
			var err error
			state, err = router.ReadState(dead.fs, "/state", topic, p)
			if err != nil {
				s.fatalf("failover of %d from %s: ReadState: %v", p, dead.id, err)
			}
		}
		m.fenced, m.handedOff, m.adopting = m.start, m.start, m.start
		s.mu.Lock()
		delete(s.deposed[to], p)
		s.mu.Unlock()
		if s.ctl != nil {
			s.ctl.grant(to, p)
		}
		if err := within(func(ctx context.Context) error { return to.rn.Adopt(ctx, topic, p, state) }); err != nil {
			s.fatalf("failover of %d from %s to %s: Adopt on a healthy disk: %v", p, dead.id, to.id, err)
		}
		m.adopted = time.Now()
		s.mu.Lock()
		s.adoptedLocked(m, to, dead, m.start)
		s.mu.Unlock()
		time.Sleep(time.Microsecond)
		m.end = time.Now()
		s.switchRoutes(dead, to, p)
		s.routesChanged()
		to.rn.Appended(topic, p, s.logs.Log(topic, p).HighWatermark())
		s.report.Faults.Failovers++
		s.logf("fail over %d from %s (down) to %s: %d bytes of durable state", p, dead.id, to.id, len(state))
	}
}

// unfencedSettle answers a settle frame reaching nd for partitions nd handed off with
// success, applying it nowhere, as an old owner that applied settles after its fence would
// (the planted bug PlantUnfencedSettle); ok is false for any other frame.
func (s *sim) unfencedSettle(nd *node, frame []byte) (reply []byte, ok bool) {
	if len(frame) == 0 {
		return nil, false
	}
	switch frame[0] {
	case wire.OpAck, wire.OpExtend, wire.OpNack, wire.OpAckBatch, wire.OpAcks:
	default:
		return nil, false
	}
	req, err := wire.DecodeRequest(frame, wire.Newest)
	if err != nil || req.Topic != topic || len(req.Records) == 0 {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	answers := make([]wire.Answer, len(req.Records))
	now := time.Now()
	for i, r := range req.Records {
		if !s.handedOff[nd][r.Handle.Partition] {
			return nil, false
		}
		answers[i].Status = wire.StatusOK
		if r.Op == wire.OpExtend {
			answers[i].Expiry = wire.Nanos(now.Add(r.Arg))
		}
	}
	s.plantedSettles += len(answers)
	if req.Op == wire.OpAcks {
		return wire.AppendAcksReply(nil, len(answers), nil), true // every one answered applied
	}
	return wire.EncodeReply(answers), true
}

// adoptedLocked records that to adopted partition m.p from its previous owner, whose acks
// answered by the instant upTo are judged against what the adoption carried. Called with
// s.mu held.
func (s *sim) adoptedLocked(m *move, to, from *node, upTo time.Time) {
	p := m.p
	s.holder[p] = to
	delete(s.handedOff[to], p)
	to.everOwned[p] = true
	if e := to.cur(); e.movedIn == nil {
		e.movedIn = map[int32]int{p: 1}
	} else {
		e.movedIn[p]++
	}
	s.resolveAcks(from, p, upTo)
	s.moves = append(s.moves, m)
}
