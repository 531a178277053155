package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"narad.dev/consume/router"
)

// Ownership in time (router.Config.Ownership). In runs with paused or cut-off owners
// (zombie.go) every node serves a partition only under the host's grant of it, which the
// run's controller keeps as an etcd lease on an owner key is kept: one grant of a partition
// at a time, each with an epoch larger than every grant of the partition before it (the
// store is fenced at that epoch as it is granted: routertest.MemStore.Fence), kept alive for
// its node by a keep-alive every third of the TTL while the node's process keeps its
// session. A node that loses its session (its process paused, or cut off from the
// controller) holds its grants until the TTL after its last keep-alive, no longer: then they
// lapse. A session that comes back before the lapse renews them; one that comes back after
// it is granted anew, under new epochs, what did not fail over meanwhile. A process that
// stops ends its session and its grants; the node's next process begins a new session,
// granted what the node holds then (a restarted process never serves under its
// predecessor's epoch).
//
// Ownership moves only under the controller: a hand-off revokes the old owner's grant once
// its HandOff returned and grants the new owner before its Adopt; a failover, from an owner
// that is down or one that may be alive (the host cannot tell them apart), waits out the old
// owner's grant (until it lapsed, plus a margin for the rates of the clocks), then grants the
// new owner (fencing the store), loads the state the store holds, Adopts it there, changes
// the routes, and calls RoutesChanged on every node whose routes are current.
//
// The model takes a lapse as the end of what the lapsed grant allowed: every lease the node
// granted under it is over at the lapse (no settle of it can succeed from then on, so its
// holder is no longer live), no lease may be granted under it afterwards (the lease check
// asks validAt), no save under it may reach the store after it from a node whose clock
// runs (nodeStore.Save), and an ack its node applied but did not save under it by then is
// lost: within the documented window if it was answered within a commit interval, a tick
// and a margin of the node's running time before the lapse (a paused process runs no
// committer: the window counts running time, so a pause is, for the acks, a crash at its
// start), and a violation otherwise (explainStore).

// lapseWindow is how much of its node's running time before its grant lapsed an ack may be
// answered in and still be lost with the grant: the commit interval of the store committer
// (an ack is saved within one of it), a tick, and a margin for the order of events within an
// instant (a save takes no fake time).
const lapseWindow = router.DefaultCommitInterval + tick + time.Millisecond

// lapseWhy begins the explanation of an ack lost with a lapsed grant.
const lapseWhy = "ownership grant lapsed"

// controller is the host's grant of partitions in time: its consensus, as far as a run
// needs it.
type controller struct {
	s      *sim
	ttl    time.Duration // how long a grant lives after its last keep-alive
	margin time.Duration // what a failover waits past the old owner's lapse

	mu       sync.Mutex // guards what follows; a node's Grant takes it and nothing else
	epochs   map[int32]uint64
	sessions map[*node]*session
	recs     map[*node][]*grantRec
	// released is when the grants of each node's last process stopped by a stop (its last
	// keep-alive plus the TTL): a failover from a node that is down waits it out.
	released map[*node]time.Time
}

// session is a process's session with the controller.
type session struct {
	e      *epoch
	start  time.Time // the keep-alives count from it
	lost   time.Time // the keep-alives stopped then; zero while they run
	cause  string    // why they stopped: "paused" or "cut off"
	lapsed bool      // its grants lapsed (the model was told)
	held   map[int32]*grantRec
}

// grantRec is one grant of a partition to one process.
type grantRec struct {
	e     *epoch
	p     int32
	epoch uint64
	from  time.Time
	// lapsed is when it lapsed unrenewed (zero: it did not), and cause why; ended is when it
	// was revoked, granted anew under another epoch, or its process stopped.
	lapsed, ended time.Time
	cause         string
}

func newController(s *sim, ttl time.Duration) *controller {
	return &controller{s: s, ttl: ttl, margin: ttl / 10, epochs: map[int32]uint64{}, sessions: map[*node]*session{},
		recs: map[*node][]*grantRec{}, released: map[*node]time.Time{}}
}

// nodeOwnership is one process's router.Ownership.
type nodeOwnership struct {
	c *controller
	e *epoch
}

var _ router.Ownership = nodeOwnership{}

// Grant answers the process's grant of a partition, with the time left until its lapse as
// the controller sees it now: its last keep-alive plus the TTL.
func (o nodeOwnership) Grant(t string, p int32) (router.Grant, bool) {
	if t != topic {
		return router.Grant{}, false
	}
	c := o.c
	c.mu.Lock()
	defer c.mu.Unlock()
	sess := c.sessions[o.e.nd]
	if sess == nil || sess.e != o.e {
		return router.Grant{}, false
	}
	rec := sess.held[p]
	if rec == nil {
		return router.Grant{}, false
	}
	now := time.Now()
	left := c.untilLocked(sess, now).Sub(now)
	if left <= 0 {
		return router.Grant{}, false
	}
	return router.Grant{Epoch: rec.epoch, Left: left}, true
}

// untilLocked is when sess's grants lapse as things stand at now: the TTL after its last
// keep-alive (before now, or before its session was lost). Called with c.mu held.
func (c *controller) untilLocked(sess *session, now time.Time) time.Time {
	at := now
	if !sess.lost.IsZero() {
		at = sess.lost
	}
	period := c.ttl / 3
	last := sess.start.Add(at.Sub(sess.start) / period * period)
	return last.Add(c.ttl)
}

// begin starts process e's session, granted every partition whose state its node holds
// (the driver's s.holder), in order. It returns the partitions granted.
func (c *controller) begin(e *epoch) []int32 {
	var parts []int32
	for p, h := range c.s.holder {
		if h == e.nd {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	c.mu.Lock()
	defer c.mu.Unlock()
	sess := &session{e: e, start: time.Now(), held: map[int32]*grantRec{}}
	c.sessions[e.nd] = sess
	for _, p := range parts {
		c.grantLocked(sess, p)
	}
	return parts
}

// grantLocked grants p to sess's process under the partition's next epoch, and fences the
// store at it. Called with c.mu held.
func (c *controller) grantLocked(sess *session, p int32) *grantRec {
	c.epochs[p]++
	rec := &grantRec{e: sess.e, p: p, epoch: c.epochs[p], from: time.Now()}
	sess.held[p] = rec
	c.recs[sess.e.nd] = append(c.recs[sess.e.nd], rec)
	if c.s.opts.Plant != PlantUnfencedZombie {
		// (The planted bug's nodes carry no epoch in their saves: the fence would refuse
		// every one of them, not only a zombie's.)
		c.s.store.Fence(topic, p, rec.epoch)
	}
	return rec
}

// grant grants p to nd's process (whose session runs).
func (c *controller) grant(nd *node, p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sess := c.sessions[nd]; sess != nil {
		c.grantLocked(sess, p)
	}
}

// revoke takes p's grant from nd, and returns it as it ended (ok false if nd held none).
func (c *controller) revoke(nd *node, p int32) (rec grantRec, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sess := c.sessions[nd]
	if sess == nil || sess.held[p] == nil {
		return grantRec{}, false
	}
	r := sess.held[p]
	r.ended = time.Now()
	delete(sess.held, p)
	return *r, true
}

// lose stops nd's keep-alives now (cause says why), and returns when its grants lapse
// unless the session comes back first.
func (c *controller) lose(nd *node, cause string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	sess := c.sessions[nd]
	now := time.Now()
	sess.lost, sess.cause = now, cause
	return c.untilLocked(sess, now)
}

// restore brings nd's session back: renewed, if its grants have not lapsed; otherwise each
// partition it still holds is granted anew, under a new epoch, and returned.
func (c *controller) restore(nd *node) (regranted []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sess := c.sessions[nd]
	if sess == nil || sess.lost.IsZero() {
		return nil
	}
	now := time.Now()
	if sess.lapsed {
		for p := range sess.held {
			regranted = append(regranted, p)
		}
		slices.Sort(regranted)
		for _, p := range regranted {
			sess.held[p].ended = now
			c.grantLocked(sess, p)
		}
	}
	sess.start, sess.lost, sess.lapsed = now, time.Time{}, false
	return regranted
}

// end ends process e's session as it stops: its grants end, and a failover from its node
// waits until they would have lapsed.
func (c *controller) end(e *epoch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sess := c.sessions[e.nd]
	if sess == nil || sess.e != e {
		return
	}
	now := time.Now()
	for _, rec := range sess.held {
		rec.ended = now
	}
	c.released[e.nd] = c.untilLocked(sess, now)
	delete(c.sessions, e.nd)
}

// lapses marks the grants of every lost session whose lapse has come by now, and returns
// them as they lapsed (each once), in the order of the nodes and partitions.
func (c *controller) lapses(now time.Time) []grantRec {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []grantRec
	for _, nd := range c.s.nodes {
		sess := c.sessions[nd]
		if sess == nil || sess.lost.IsZero() || sess.lapsed {
			continue
		}
		at := c.untilLocked(sess, now)
		if at.After(now) {
			continue
		}
		sess.lapsed = true
		var parts []int32
		for p := range sess.held {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		for _, p := range parts {
			rec := sess.held[p]
			rec.lapsed, rec.cause = at, sess.cause
			out = append(out, *rec)
		}
	}
	return out
}

// lapseAt returns when nd's grants lapse (or lapsed) with its session lost, and ok false if
// its session runs.
func (c *controller) lapseAt(nd *node) (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sess := c.sessions[nd]
	if sess == nil || sess.lost.IsZero() {
		return time.Time{}, false
	}
	return c.untilLocked(sess, time.Now()), true
}

// epochOf returns the epoch of nd's grant of p now (0: none).
func (c *controller) epochOf(nd *node, p int32) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sess := c.sessions[nd]; sess != nil && sess.held[p] != nil {
		return sess.held[p].epoch
	}
	return 0
}

// recOf returns nd's grant of p under epoch as it stands now (a copy: the controller moves
// it on under its lock), and ok false if there was none.
func (c *controller) recOf(nd *node, p int32, epoch uint64) (rec grantRec, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.recs[nd] {
		if r.p == p && r.epoch == epoch {
			return *r, true
		}
	}
	return grantRec{}, false
}

// validAt reports whether nd held a grant of p valid at t: granted at or before it, not
// lapsed nor ended before it.
func (c *controller) validAt(nd *node, p int32, t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rec := range c.recs[nd] {
		if rec.p == p && !rec.from.After(t) && (rec.lapsed.IsZero() || !t.After(rec.lapsed)) && (rec.ended.IsZero() || !t.After(rec.ended)) {
			return true
		}
	}
	return false
}

// lapsedUnder returns when the grant of p that process e held at t lapsed, after t (zero: it
// did not, as far as the controller knows now).
func (c *controller) lapsedUnder(e *epoch, p int32, t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rec := range c.recs[e.nd] {
		// Strictly after: a node holds its grant lapsed from the lapse's instant on.
		if rec.e == e && rec.p == p && !rec.from.After(t) && rec.lapsed.After(t) {
			return rec.lapsed
		}
	}
	return time.Time{}
}

// disowned reports whether process e's grant of p lapsed or ended at or before t.
func (c *controller) disowned(e *epoch, p int32, t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rec := range c.recs[e.nd] {
		if rec.e == e && rec.p == p && (!rec.lapsed.IsZero() && !rec.lapsed.After(t) || !rec.ended.IsZero() && !rec.ended.After(t)) {
			return true
		}
	}
	return false
}

// lapsesLocked tells the model of the grants that lapsed by now: every lease granted under
// one is over at its lapse (its holder can settle it no more), and a give-back its process
// applied may not have been saved (quarantine.go). Called with s.mu held.
func (s *sim) lapsesLocked() {
	if s.ctl == nil {
		return
	}
	for _, rec := range s.ctl.lapses(time.Now()) {
		rec.e.lostGrant = true
		for _, l := range s.leases {
			if l.holder == rec.e && l.k.p == rec.p && l.granted.Before(rec.lapsed) {
				l.endMin, l.endMax = earliest(l.endMin, rec.lapsed), earliest(l.endMax, rec.lapsed)
			}
		}
		// Logged as a node's event: which goroutine tells the model first is the scheduler's.
		s.event(true, "%s#%d's grant of %d (epoch %d) lapsed at %v (%s)", rec.e.nd.id, rec.e.n, rec.p, rec.epoch, s.since(rec.lapsed), rec.cause)
	}
}

// lapsedLease ends lease l at the lapse of the grant its holder held it under, if that
// grant lapsed (a lease received after its grant lapsed is over on arrival). Called with
// s.mu held.
func (s *sim) lapsedLease(l *lease) {
	if s.ctl == nil || l.holder == nil {
		return
	}
	if at := s.ctl.lapsedUnder(l.holder, l.k.p, l.granted); !at.IsZero() {
		l.endMin, l.endMax = earliest(l.endMin, at), earliest(l.endMax, at)
	}
}

// routesChanged tells every running node whose routes are current that they changed
// (Node.RoutesChanged), in runs with grants: a host calls it on every change. A node whose
// routes are stale (a resumed zombie, a node cut off) hears nothing.
func (s *sim) routesChanged() {
	if s.ctl == nil {
		return
	}
	for _, nd := range s.upNodes() {
		if nd.view == nil {
			nd.rn.RoutesChanged(topic)
		}
	}
}

// waitOutDown sleeps until a failover from nd, down, may act: its last process's grants
// lapsed, and the margin passed (the host cannot tell a dead owner from a paused one).
func (s *sim) waitOutDown(nd *node) {
	if s.ctl == nil {
		return
	}
	s.ctl.mu.Lock()
	at := s.ctl.released[nd].Add(s.ctl.margin)
	s.ctl.mu.Unlock()
	if d := time.Until(at); d > 0 {
		s.logf("wait out %s's grants: %v", nd.id, d)
		time.Sleep(d)
	}
}

// storedState returns what the store holds of p now (nil: nothing).
func (s *sim) storedState(p int32) []byte {
	var state []byte
	if err := within(func(ctx context.Context) (err error) {
		state, err = s.store.Load(ctx, topic, p)
		return err
	}); err != nil {
		s.fatalf("the store's Load of %d: %v", p, err)
	}
	return state
}

// running returns how long nd's processes ran between from and to: the time between, less
// its pauses (a paused process does nothing, its committer included).
func (nd *node) running(from, to time.Time) time.Duration {
	d := to.Sub(from)
	for _, sp := range nd.pauses {
		end := sp.end
		if end.IsZero() {
			end = to
		}
		lo, hi := later(sp.start, from), earliest(end, to)
		if hi.After(lo) {
			d -= hi.Sub(lo)
		}
	}
	return d
}

// explainLapse explains ack a, applied by process e of owner under its grant of p of epoch
// a.epoch and not saved under it after it was answered: lost if that grant lapsed by
// granted (documented within lapseWindow of the owner's running time before the lapse); ok
// is false if it did not. Called with s.mu held.
func (s *sim) explainLapse(owner *node, e *epoch, p int32, a ack, granted time.Time) (why string, documented, ok bool) {
	if s.ctl == nil {
		return "", false, false
	}
	rec, ok := s.ctl.recOf(owner, p, a.epoch)
	if !ok || rec.e != e || rec.lapsed.IsZero() || rec.lapsed.After(granted) {
		return "", false, false
	}
	why = lapseWhy + " (" + rec.cause + ")"
	if run := owner.running(a.r, rec.lapsed); run >= lapseWindow {
		return fmt.Sprintf("%s at %v, %v of its owner's running time after the ack was answered: outside the window of %v (a commit interval, a tick)",
			why, s.since(rec.lapsed), run, lapseWindow), false, true
	}
	return why, true, true
}
