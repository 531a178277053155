package sim

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing/synctest"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// Zombies: owners that lose their ownership while they live. Two classes, each on in some
// runs (drawn from a stream of its own, so that a run without them draws what it drew
// before they were simulated); a run with either keeps its ack state in the shared store
// and grants ownership in time (ownership.go):
//
//   - paused owners: an owner's process stops for a while, as a process stopped by the
//     kernel, a long garbage collection or a migrated virtual machine does: no call goes
//     into it (the driver makes none; frames sent to it wait until it resumes, and are
//     served then if their caller still waits), it sends nothing, its keep-alives stop, and
//     its clock stands still (Config.Clock reads the instant the pause began, so on resume
//     it jumps forward by the pause's length, as a paused process's monotonic clock does).
//     Its timers whose time comes during the pause run when it resumes, at once; only a
//     goroutine already under way (one a reply from the network woke) may act during the
//     pause, on a clock that stands still, as one that read the clock just before the pause
//     and acts just after it would. A long pause outlives its
//     grants: the host waits them out (the lapse plus a margin), and fails its partitions
//     over to other nodes from the store, all of them or all but one (which the owner is
//     granted anew, under a new epoch, when it resumes). It resumes with stale routes: they
//     still name local what it owned, and nobody calls RoutesChanged on it until the host
//     catches its routes up a while later. The consumers that held its leases settle them
//     through it at once, and new consumers consume through it. A short pause (a third of
//     the TTL) ends before anything lapses: the owner's grants are renewed.
//   - owners cut off: an owner is cut from its peers (every frame between them is lost) and
//     from the controller (its keep-alives stop), but its clients and the store still reach
//     it: consumers keep consuming and settling through it, and it keeps saving, until its
//     grants lapse on its own clock; a long cut outlives them, and its partitions fail over
//     as a paused owner's do, the owner serving its clients on with stale routes until the
//     cut heals and the host catches its routes up.
//
// What must hold (the model, ownership.go): the old owner grants no lease under a lapsed
// grant, answers no settle success after the lapse (so its leases' holders are live until
// the lapse, no longer, and the new owner's leases come after), saves nothing after the
// lapse while its clock runs, and every ack it answered with success survives the failover
// unless it was answered within lapseWindow of its running time before the lapse; an
// AckDurable answered with success survives whatever comes. Through a node whose routes are
// stale a settle may answer ErrMoved or ErrUnavailable (it changed nothing), never success
// for a lease that is over.

// routeView is what a node's routes answer while they are stale: what they answered as it
// went stale.
type routeView struct {
	parts  []int32
	remote map[string][]int32
}

// span is a pause of a node: from start to end (zero: it goes on).
type span struct{ start, end time.Time }

// degradeClassAt is degradeClass with the share of runs the class is on in: pct percent.
func (s *sim) degradeClassAt(tag uint64, forced bool, pct int) (r *rand.Rand, on bool) {
	r = rand.New(rand.NewPCG(s.seed, tag))
	drawn := r.IntN(100) < pct
	return r, forced || (drawn && !s.opts.Calm && !s.opts.OldSchedule)
}

// planOwnership draws the two classes, each on in 15 % of the runs (or as Options.Zombies
// and Options.CutOffs say), before the cluster is set up: a run with either keeps its ack
// state in the shared store and its nodes serve under grants with a TTL of 2, 3 or 5 s;
// some of its acks are durable (AckDurable).
func (s *sim) planOwnership() {
	zr, zon := s.degradeClassAt(0x7a6f6d6269652e73, s.opts.Zombies, 15) // "zombie.s"
	cr, con := s.degradeClassAt(0x6375746f66662e73, s.opts.CutOffs, 15) // "cutoff.s"
	if !zon && !con || s.opts.NoStore {
		return
	}
	if zon {
		s.zombies = zr
	}
	if con {
		s.cutoffs = cr
	}
	gr := rand.New(rand.NewPCG(s.seed, 0x6772616e742e7369)) // "grant.si"
	ttl := []time.Duration{2 * time.Second, 3 * time.Second, 5 * time.Second}[gr.IntN(3)]
	s.ctl = newController(s, ttl)
	s.durable = gr
	if s.store == nil {
		s.store = &routertest.MemStore{}
		s.report.Store = true
	}
	s.report.Grants, s.report.GrantTTL = true, ttl
}

// planZombies adds the classes' steps to the workload.
func (s *sim) planZombies() {
	if s.zombies != nil {
		s.weights = append(s.weights, weighted{"pause", 2, s.pauseStep})
	}
	if s.cutoffs != nil {
		s.weights = append(s.weights, weighted{"cutOff", 2, s.cutOffStep})
	}
}

// pausableClock is a node's clock in runs with paused owners: the bubble's plus the node's
// offset, standing still while the node is paused. A timer whose time comes during a pause
// runs its function when the pause ends, at once, as a paused process's timers do: none of
// the node's timers acts during a pause, on a clock that stands still.
type pausableClock struct {
	s  *sim
	nd *node
}

func (c pausableClock) Now() time.Time {
	if t := c.nd.frozen.Load(); t != nil {
		return *t
	}
	return time.Now().Add(c.nd.skew)
}

func (c pausableClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	return time.AfterFunc(d, func() {
		if ch := c.s.pausedChan(c.nd); ch != nil {
			<-ch
		}
		f()
	}).Stop
}

// clockOf returns the clock nd's processes read: nil (the node's default, the bubble's
// clock) unless it is skewed or may be paused.
func (s *sim) clockOf(nd *node) router.Clock {
	if s.zombies != nil {
		return pausableClock{s, nd}
	}
	return nd.clock()
}

// pausedNow reports whether nd's clock stands still, or stood still until this very
// instant (a goroutine may have read it then). Called with s.mu held (which guards pauses).
func (nd *node) pausedNow(now time.Time) bool {
	return nd.frozen.Load() != nil || len(nd.pauses) > 0 && nd.pauses[len(nd.pauses)-1].end.Equal(now)
}

// zombieCandidate draws a running owner, neither paused, cut off nor stale, and holding the
// state of a partition; nil if there is none.
func (s *sim) zombieCandidate(r *rand.Rand) *node {
	var cands []*node
	for _, nd := range s.nodes {
		if nd.up() && nd.owner() && !nd.paused && !nd.cut && nd.view == nil && !nd.isolated {
			cands = append(cands, nd)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[r.IntN(len(cands))]
}

// goStale freezes nd's routes as they are: the host's changes no longer reach it.
func (s *sim) goStale(nd *node) {
	s.routesMu.Lock()
	nd.view = &routeView{parts: nd.parts, remote: nd.remote}
	s.routesMu.Unlock()
	nd.staleUntil = time.Time{}
}

// catchUp gives nd the routes as they are, and tells it (RoutesChanged).
func (s *sim) catchUp(nd *node) {
	s.routesMu.Lock()
	nd.view = nil
	s.routesMu.Unlock()
	nd.staleUntil = time.Time{}
	if nd.up() && !nd.paused {
		nd.rn.RoutesChanged(topic)
	}
	s.logf("%s's routes are current again", nd.id)
}

// staleFor reports whether via's routes are stale about who owns p. Called with s.mu held.
func (s *sim) staleFor(via *node, p int32) bool {
	s.routesMu.RLock()
	defer s.routesMu.RUnlock()
	if via.view == nil {
		return false
	}
	owner := s.routedIDLocked(via, p)
	for _, nd := range s.nodes {
		if slices.Contains(nd.parts, p) {
			return nd.id != owner
		}
	}
	return owner != ""
}

// routedOwner is the node via's routes name as p's owner now ("" when they name none, or via
// has no view of its own), nil when there is none.
func (s *sim) routedOwner(via *node, p int32) *node {
	s.routesMu.RLock()
	defer s.routesMu.RUnlock()
	if via.view == nil {
		return nil
	}
	return s.byID[s.routedIDLocked(via, p)]
}

// routedIDLocked is the id of the node via's view names as p's owner, "" for none. Called
// with s.routesMu held, via.view set.
func (s *sim) routedIDLocked(via *node, p int32) string {
	v := via.view
	owner := ""
	if slices.Contains(v.parts, p) {
		owner = via.id
	}
	for id, parts := range v.remote {
		if slices.Contains(parts, p) {
			owner = id
		}
	}
	return owner
}

// loseFor has the controller stop renewing nd's grants (why: paused, cut off) and sets how
// long nd stays so: for a third of the TTL now and then, otherwise until its grants lapsed,
// its partitions failed over (nd.failoverAt), and a while more. It returns the time it began
// and when nd's grants lapse.
func (s *sim) loseFor(rng *rand.Rand, nd *node, why string) (now, lapse time.Time) {
	now = time.Now()
	lapse = s.ctl.lose(nd, why)
	length := s.ctl.ttl / 3
	if rng.IntN(4) != 0 {
		length = lapse.Sub(now) + s.ctl.margin + []time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second}[rng.IntN(3)]
		nd.failoverAt = lapse.Add(s.ctl.margin)
	}
	nd.until = now.Add(length)
	return now, lapse
}

// pauseStep pauses a running owner: for a third of the TTL now and then, otherwise until
// its grants lapsed, its partitions failed over, and a while more.
func (s *sim) pauseStep() {
	zr := s.zombies
	nd := s.zombieCandidate(zr)
	if nd == nil {
		return
	}
	now, lapse := s.loseFor(zr, nd, "paused")
	nd.paused = true
	s.mu.Lock() // the model reads the pauses from the nodes' goroutines (running)
	nd.pauses = append(nd.pauses, span{start: now})
	s.mu.Unlock()
	frozen := now.Add(nd.skew)
	nd.frozen.Store(&frozen)
	s.goStale(nd)
	s.mu.Lock()
	s.pausedCh[nd.id] = make(chan struct{})
	s.mu.Unlock()
	nd.down.Store(zr.IntN(2) == 0)
	// The consumers waiting in it give up: none of its goroutines would answer them.
	for _, p := range s.polls {
		if p.via == nd {
			p.end()
		}
	}
	s.report.Faults.Pauses++
	s.logf("pause %s until %v (its grants lapse at %v; fail over at %v; detected %v)", nd.id, s.since(nd.until), s.since(lapse),
		s.sinceOr(nd.failoverAt), nd.down.Load())
}

// resume ends nd's pause: its clock jumps to the time it is, its session comes back (its
// grants renewed, or granted anew if they lapsed), the frames that waited for it are
// served, and its host tells it of the records appended meanwhile to what its (stale)
// routes name local. With burst, the consumers that held its leases settle them through it,
// and new ones consume through it.
func (s *sim) resume(nd *node, burst bool) {
	s.mu.Lock()
	s.lapsesLocked()
	now := time.Now()
	nd.pauses[len(nd.pauses)-1].end = now
	s.mu.Unlock()
	nd.frozen.Store(nil)
	nd.paused = false
	nd.failoverAt = time.Time{}
	s.regranted(nd, s.ctl.restore(nd))
	// Last, with its clock running and its grants as they are now: what waited for the
	// pause's end (frames, timers) goes on.
	s.mu.Lock()
	ch := s.pausedCh[nd.id]
	delete(s.pausedCh, nd.id)
	s.mu.Unlock()
	close(ch)
	nd.down.Store(false)
	s.routesMu.RLock()
	local := nd.parts
	if nd.view != nil {
		local = nd.view.parts
	}
	s.routesMu.RUnlock()
	for _, p := range local {
		nd.rn.Appended(topic, p, s.logs.Log(topic, p).HighWatermark())
	}
	nd.staleUntil = now.Add([]time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second}[s.zombies.IntN(3)])
	s.logf("resume %s: its routes stale until %v", nd.id, s.since(nd.staleUntil))
	if burst {
		// The node's goroutines act on the resume first (its pump notifies the nodes
		// waiting for its records), as they do between steps.
		synctest.Wait()
		s.staleBurst(nd)
	}
}

// cutOffStep cuts a running owner off its peers and the controller, its clients and the
// store still reaching it: for a third of the TTL now and then, otherwise until its grants
// lapsed, its partitions failed over, and a while more.
func (s *sim) cutOffStep() {
	cr := s.cutoffs
	nd := s.zombieCandidate(cr)
	if nd == nil {
		return
	}
	_, lapse := s.loseFor(cr, nd, "cut off")
	nd.cut = true
	s.goStale(nd)
	s.mu.Lock()
	s.cutOff[nd.id] = true
	s.mu.Unlock()
	nd.down.Store(cr.IntN(2) == 0)
	s.report.Faults.CutOffs++
	s.logf("cut %s off its peers and the controller until %v (its grants lapse at %v; fail over at %v; detected %v)", nd.id,
		s.since(nd.until), s.since(lapse), s.sinceOr(nd.failoverAt), nd.down.Load())
}

// reconnect ends nd's cut: its peers and the controller reach it again (its grants
// renewed, or granted anew if they lapsed); the host catches its routes up a while later.
func (s *sim) reconnect(nd *node) {
	s.mu.Lock()
	s.lapsesLocked()
	delete(s.cutOff, nd.id)
	s.mu.Unlock()
	nd.cut = false
	nd.failoverAt = time.Time{}
	s.regranted(nd, s.ctl.restore(nd))
	nd.down.Store(false)
	nd.staleUntil = time.Now().Add([]time.Duration{0, 300 * time.Millisecond, time.Second}[s.cutoffs.IntN(3)])
	s.logf("%s reaches its peers and the controller again: its routes stale until %v", nd.id, s.since(nd.staleUntil))
}

// regranted records the partitions nd was granted anew: its process loads each again (the
// corrupt skips, memory only, are found again, as after a move in).
func (s *sim) regranted(nd *node, parts []int32) {
	if len(parts) == 0 {
		return
	}
	s.mu.Lock()
	e := nd.cur()
	if e.movedIn == nil {
		e.movedIn = map[int32]int{}
	}
	for _, p := range parts {
		e.movedIn[p]++
	}
	s.mu.Unlock()
	s.logf("%s granted anew %v: its grants lapsed", nd.id, parts)
}

// reviveOwnership moves the two classes on at the start of a step: the failovers due, the
// pauses and cuts over, the stale routes caught up.
func (s *sim) reviveOwnership(now time.Time) {
	if s.ctl == nil {
		return
	}
	for _, nd := range s.nodes {
		if (nd.paused || nd.cut) && !nd.failoverAt.IsZero() && !now.Before(nd.failoverAt) {
			s.liveFailover(nd)
		}
		if nd.paused && !now.Before(nd.until) {
			s.resume(nd, true)
		}
		if nd.cut && !now.Before(nd.until) {
			s.reconnect(nd)
		}
		if nd.view != nil && !nd.paused && !nd.cut && !nd.staleUntil.IsZero() && !now.Before(nd.staleUntil) {
			s.catchUp(nd)
		}
	}
}

// healOwnership ends every pause and cut (failing over first what is due) and catches every
// node's routes up.
func (s *sim) healOwnership() {
	if s.ctl == nil {
		return
	}
	now := time.Now()
	for _, nd := range s.nodes {
		if (nd.paused || nd.cut) && !nd.failoverAt.IsZero() && !now.Before(nd.failoverAt) {
			s.liveFailover(nd)
		}
		if nd.paused {
			s.resume(nd, false)
		}
		if nd.cut {
			s.reconnect(nd)
		}
		if nd.view != nil {
			s.catchUp(nd)
		}
	}
}

// unpauseAll lets every paused node's held frames go and its clock run, at the end of a run
// that stopped early: nothing may wait for a pause that never ends.
func (s *sim) unpauseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ch := range s.pausedCh {
		close(ch)
		delete(s.pausedCh, id)
	}
	for _, nd := range s.nodes {
		nd.frozen.Store(nil)
	}
}

// liveFailover fails over the partitions of old, an owner that may be alive (paused, or
// cut off), once its grants lapsed and the margin passed: all of them, or all but one; each
// to a running node, from the state the store holds (a partition never saved waits for its
// owner). The host grants the new owner (fencing the store), loads the state, Adopts it
// there, and changes the routes of every node but old, whose routes stay as they were.
func (s *sim) liveFailover(old *node) {
	old.failoverAt = time.Time{}
	r := s.zombies
	if old.cut {
		r = s.cutoffs
	}
	s.mu.Lock()
	s.lapsesLocked()
	s.mu.Unlock()
	parts := slices.Clone(old.parts)
	if len(parts) > 1 && r.IntN(3) == 0 {
		i := r.IntN(len(parts))
		parts = slices.Delete(parts, i, i+1)
	}
	for _, p := range parts {
		to := s.moveTarget(old)
		if to == nil {
			continue
		}
		if s.storedState(p) == nil {
			s.logf("fail over %d from %s (live): the store holds no state of it; skipped", p, old.id)
			continue
		}
		rec, ok := s.ctl.revoke(old, p)
		if !ok || rec.lapsed.IsZero() {
			s.fatalf("failing over %d from %s, live, before its grant lapsed", p, old.id)
		}
		s.ctl.grant(to, p)
		loaded := time.Now()
		state := s.storedState(p)
		m := &move{p: p, from: old, to: to, failover: true, fromEp: old.cur(), toEp: to.cur(), start: loaded}
		// The old owner's authority ended at its lapse: no node may lease the partition from
		// then until the routes name the new owner.
		m.fenced, m.handedOff, m.adopting = rec.lapsed, rec.lapsed, loaded
		s.mu.Lock()
		delete(s.deposed[to], p)
		s.mu.Unlock()
		if err := within(func(ctx context.Context) error { return to.rn.Adopt(ctx, topic, p, state) }); err != nil {
			s.fatalf("failover of %d from %s (live) to %s: Adopt on a healthy disk: %v", p, old.id, to.id, err)
		}
		m.adopted = time.Now()
		s.mu.Lock()
		old.cur().movedOut = append(old.cur().movedOut, p)
		s.adoptedLocked(m, to, old, loaded)
		s.mu.Unlock()
		time.Sleep(time.Microsecond)
		m.end = time.Now()
		s.switchRoutes(old, to, p)
		s.routesChanged()
		to.rn.Appended(topic, p, s.logs.Log(topic, p).HighWatermark())
		s.report.Faults.LiveFailovers++
		s.logf("fail over %d from %s (live, its grant of epoch %d lapsed at %v) to %s: %d bytes of stored state", p, old.id, rec.epoch,
			s.since(rec.lapsed), to.id, len(state))
	}
}

// staleBurst has the consumers that hold leases nd granted settle a few through it, and a
// new consumer or two consume through it, as it resumes with stale routes.
func (s *sim) staleBurst(nd *node) {
	var ls []*lease
	for _, l := range s.held {
		if l.owner == nd {
			ls = append(ls, l)
		}
	}
	s.rng.Shuffle(len(ls), func(i, j int) { ls[i], ls[j] = ls[j], ls[i] })
	for _, l := range ls[:min(len(ls), 4)] {
		if !slices.Contains(s.held, l) {
			continue
		}
		s.settleOne(l, []settleOp{opAck, opAck, opExtend, opNack}[s.rng.IntN(4)], nd, false)
	}
	for range 1 + s.rng.IntN(2) {
		s.consumeOn(nd)
	}
}

// sinceOr is since, or "never" for the zero time.
func (s *sim) sinceOr(t time.Time) any {
	if t.IsZero() {
		return "never"
	}
	return s.since(t)
}

// pausedChan returns the channel that closes when nd resumes, if it is paused; nil if not.
func (s *sim) pausedChan(nd *node) chan struct{} {
	if s.zombies == nil {
		return nil // no node is ever paused: no lock taken for every frame
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pausedCh[nd.id]
}
