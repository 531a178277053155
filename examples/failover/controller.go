package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"narad.dev/consume/examples/internal/launch"
)

// The controller: the one process that changes the grants and the routes. It runs in
// whichever node holds the etcd election (concurrency.Election over the node's lease),
// rather than in the parent, because the parent here plays the clients, not the cluster: a
// host's controller has to survive the loss of any machine, and an election on the nodes' own
// leases gives that for free. When the controller's node dies its election key goes with its
// lease, the next campaigner wins, and since the controller only ever reconciles what etcd
// says (level, not edge), the new one picks up whatever the dead one left, the dead node's
// own partitions included. Every Txn it commits compares its election key's create revision,
// so a controller whose lease expired while it was paused changes nothing when it runs again.
//
// A partition has two keys: its owner key (owner/<topic>/<p> → the node it is granted to,
// under that node's lease; its mod revision is the grant's epoch) and its assignment
// (assign/<topic>/<p> → the node the routes name). The owner key comes first, the routes
// last. Each pass, from the view's latest snapshot, makes one change:
//
//   - a partition never assigned: its first grant and assignment, in one Txn, to the node
//     the config names, once that node is live;
//   - a partition whose owner key is gone (its owner's lease expired: the node died, or was
//     paused or cut off from etcd for longer than the TTL): it waits out the old grant, a
//     TTL plus 10% from the moment it saw the key gone (grantWait), during which the old
//     owner may still be serving it on its own clock; then it grants the partition to the live
//     node that owns fewest (one Txn, if the assignment's mod revision is still the one it
//     read: the owner key under the new owner's lease, and the partition's epoch key, which
//     raises the epoch the state store fences with, both at one revision, the new epoch); the
//     new owner loads the partition's state from etcd (what the old owner saved last) and
//     adopts it under its grant; then one Txn moves the assignment;
//   - a partition granted to a node the routes do not name yet (a pass stopped midway): the
//     adopt (again) and the assignment;
//   - a move asked for (move/<topic>/<partition> → node): the owner's HandOff, then the grant
//     to the new owner (if the owner key's mod revision is still the old grant's), its
//     Adopt of the bytes, then the assignment; the request is deleted.
//
// After each change the controller waits until its view has seen it, so that no pass acts
// twice on one state.
type controller struct {
	id    string
	cc    clusterConfig
	cli   *clientv3.Client
	view  *view
	say   *lines
	store *etcdStore
	http  *http.Client

	lease     *leaseState               // the node's lease it won the election under
	guard     clientv3.Cmp              // its election key is still there: in every Txn
	goneSince map[int32]goneFrom        // partitions whose owner key it saw gone, and since when
	wake      func(after time.Duration) // asks for a pass after a wait
}

// goneFrom is when the controller first saw a partition's owner key gone, and the
// assignment then.
type goneFrom struct {
	at     time.Time
	modRev int64 // of the assignment
}

// campaign campaigns for the election under each lease the node takes, and controls while
// it holds it, until ctx ends.
func (c *controller) campaign(ctx context.Context, lease *nodeLease) {
	for ctx.Err() == nil {
		st := lease.state()
		if st.left() <= 0 {
			launch.Pause(ctx, 100*time.Millisecond)
			continue
		}
		// The session is the election's holder of the node's lease, nothing more: its
		// keep-alive stops at once (Orphan), the node keeps the lease alive itself.
		sess, err := concurrency.NewSession(c.cli, concurrency.WithLease(st.id), concurrency.WithContext(ctx))
		if err != nil {
			launch.Pause(ctx, 200*time.Millisecond)
			continue
		}
		sess.Orphan()
		lctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-st.lost:
				cancel()
			case <-lctx.Done():
			}
		}()
		c.lead(lctx, sess, lease, st)
		cancel()
		launch.Pause(ctx, 200*time.Millisecond)
	}
}

// lead wins the election under st, then controls while the node's lease st lives.
func (c *controller) lead(ctx context.Context, sess *concurrency.Session, lease *nodeLease, st *leaseState) {
	el := concurrency.NewElection(sess, electionName)
	if err := el.Campaign(ctx, c.id); err != nil {
		return
	}
	// Campaign also returns once the keys before its own are gone, even if its own went with
	// an expired lease meanwhile: check that it is there.
	resp, err := c.cli.Get(ctx, el.Key())
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != el.Rev() {
		return
	}
	c.lease, c.guard, c.goneSince = st, clientv3.Compare(clientv3.CreateRevision(el.Key()), "=", el.Rev()), map[int32]goneFrom{}
	c.say.say("event won the controller's election")
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	wake := make(chan struct{}, 1)
	c.wake = func(after time.Duration) {
		time.AfterFunc(after, func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		})
	}
	for {
		changes := c.view.changes()
		if cur := lease.state(); cur.id != st.id || cur.left() <= 0 {
			c.say.say("event controller: its lease's grant lapsed: it stops controlling")
			return
		}
		if s := c.view.snap(); !s.halt {
			c.pass(ctx, s)
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-tick.C:
		case <-wake:
		}
	}
}

// pass makes at most one change: a first assignment, a failover, the end of one, or a move.
func (c *controller) pass(ctx context.Context, s *snapshot) {
	now := time.Now()
	var next time.Duration // until the first wait ends
	defer func() {
		if next > 0 {
			c.wake(next)
		}
	}()
	for _, p := range c.cc.partitions() {
		a, routed := s.assign[p]
		g, granted := s.owners[p]
		switch {
		case !routed:
			first := c.cc.initialOwner(p)
			if lease, live := s.leases[first]; live {
				c.assignFirst(ctx, p, first, lease)
				return
			}
		case granted && g.node == a.owner:
			delete(c.goneSince, p)
		case granted:
			c.finish(ctx, p, a, g, time.Now(), "")
			return
		default:
			gone, seen := c.goneSince[p]
			if !seen || gone.modRev != a.modRev {
				gone = goneFrom{at: now, modRev: a.modRev}
				c.goneSince[p] = gone
			}
			if wait := grantWait(c.lease.ttl) - now.Sub(gone.at); wait > 0 {
				if next == 0 || wait < next {
					next = wait
				}
				continue // the old owner may still serve it: its grant may live that long
			}
			to := leastLoaded(s, a.owner)
			if to == "" {
				continue // nobody live to take it
			}
			c.failover(ctx, p, a, to, s.leases[to], gone.at)
			return
		}
	}
	moves := make([]int32, 0, len(s.moves))
	for p := range s.moves {
		moves = append(moves, p)
	}
	slices.Sort(moves)
	for _, p := range moves {
		to, a := s.moves[p], s.assign[p]
		_, toLive := s.live[to]
		switch {
		case a.owner == to || !toLive:
			c.say.say("event controller: move of %s/%d to %s: nothing to do (owner %s)", c.cc.Topic, p, to, a.owner)
		case !s.settled(p):
			continue // failed over first, at a later pass
		default:
			c.move(ctx, p, a, s.owners[p], to, s.leases[to])
		}
		if resp, err := c.cli.Delete(ctx, moveKey(c.cc.Topic, p)); err == nil {
			c.seen(ctx, resp.Header.Revision)
		}
		return
	}
}

// leastLoaded returns the live node that owns fewest partitions (the first by ID among
// equals), other than not unless it is the only one.
func leastLoaded(s *snapshot, not string) string {
	best, bestN := "", 0
	ids := make([]string, 0, len(s.live))
	for id := range s.live {
		if id != not {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		if _, live := s.live[not]; live {
			return not
		}
		return ""
	}
	slices.Sort(ids)
	for _, id := range ids {
		if n := len(s.owned(id)); best == "" || n < bestN {
			best, bestN = id, n
		}
	}
	return best
}

// assignFirst grants partition p to node to and assigns it there, in one Txn, if nobody ever
// did. Nothing was granted before, so there is nothing to wait out.
func (c *controller) assignFirst(ctx context.Context, p int32, to string, lease int64) {
	ak, ok := assignKey(c.cc.Topic, p), ownerKey(c.cc.Topic, p)
	resp, err := c.cli.Txn(ctx).If(c.guard, clientv3.Compare(clientv3.CreateRevision(ak), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(ok), "=", 0)).
		Then(clientv3.OpPut(ok, to, clientv3.WithLease(clientv3.LeaseID(lease))),
			clientv3.OpPut(c.store.epochKey(c.cc.Topic, p), to), clientv3.OpPut(ak, to)).Commit()
	if err != nil || !resp.Succeeded {
		c.say.say("event controller: first assignment of %s/%d to %s: %v (lost the election?)", c.cc.Topic, p, to, orFailed(err))
		launch.Pause(ctx, 100*time.Millisecond)
		return
	}
	c.seen(ctx, resp.Header.Revision)
}

func orFailed(err error) error {
	if err == nil {
		return fmt.Errorf("the Txn's comparisons failed")
	}
	return err
}

// grant grants partition p to node to (under its lease), if cmp still holds: the owner key
// and the partition's epoch key at one revision, which it returns: the grant's epoch.
func (c *controller) grant(ctx context.Context, p int32, to string, lease int64, cmp clientv3.Cmp, a assignment) (int64, error) {
	resp, err := c.cli.Txn(ctx).If(c.guard, cmp, clientv3.Compare(clientv3.ModRevision(assignKey(c.cc.Topic, p)), "=", a.modRev)).
		Then(clientv3.OpPut(ownerKey(c.cc.Topic, p), to, clientv3.WithLease(clientv3.LeaseID(lease))),
			clientv3.OpPut(c.store.epochKey(c.cc.Topic, p), to)).Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("the grant or the assignment changed since the pass read them, or the controller lost its election")
	}
	c.seen(ctx, resp.Header.Revision)
	return resp.Header.Revision, nil
}

// failover grants partition p, whose owner key is gone since gone, to node to; to loads its
// state from etcd and adopts it; then the assignment changes.
func (c *controller) failover(ctx context.Context, p int32, a assignment, to string, lease int64, gone time.Time) {
	start := time.Now()
	epoch, err := c.grant(ctx, p, to, lease, clientv3.Compare(clientv3.CreateRevision(ownerKey(c.cc.Topic, p)), "=", 0), a)
	if err != nil {
		c.say.say("event controller: failover of %s/%d to %s: grant: %v", c.cc.Topic, p, to, err)
		return
	}
	c.finish(ctx, p, a, grant{node: to, lease: lease, modRev: epoch}, start,
		fmt.Sprintf("%s lost its grant (owner key gone %v before; waited out %v) -> granted to %s under epoch %d",
			a.owner, start.Sub(gone).Round(time.Millisecond), grantWait(c.lease.ttl), to, epoch))
}

// finish has node g.node, granted partition p under epoch g.modRev, adopt the state etcd
// holds of it, then moves the assignment there.
func (c *controller) finish(ctx context.Context, p int32, a assignment, g grant, start time.Time, what string) {
	var answer adopted
	q := fmt.Sprintf("/admin/adopt?from=store&partition=%d&epoch=%d", p, g.modRev)
	if err := c.call(ctx, g.node, q, nil, &answer, nil); err != nil {
		c.say.say("event controller: failover of %s/%d to %s: adopt: %v", c.cc.Topic, p, g.node, err)
		launch.Pause(ctx, 100*time.Millisecond)
		return
	}
	rev, ok := c.reassign(ctx, p, a, g)
	if !ok {
		return
	}
	if what == "" {
		what = fmt.Sprintf("granted to %s under epoch %d by an earlier pass", g.node, g.modRev)
	}
	c.say.say("event failover %s/%d: %s -> %s read its state from etcd (%d bytes, %s) and adopted it (%s) -> assigned at revision %d, in %v",
		c.cc.Topic, p, what, g.node, answer.StateBytes, answer.Read, answer.Adopt, rev, time.Since(start).Round(time.Millisecond))
}

// move hands partition p off its live owner to node to.
func (c *controller) move(ctx context.Context, p int32, a assignment, g grant, to string, lease int64) {
	start := time.Now()
	var state []byte
	var leased, frontier string
	q := "?partition=" + strconv.Itoa(int(p))
	err := c.call(ctx, a.owner, "/admin/handoff"+q, nil, nil, func(resp *http.Response) error {
		leased, frontier = resp.Header.Get("Leased"), resp.Header.Get("Frontier")
		var err error
		state, err = io.ReadAll(resp.Body)
		return err
	})
	if err != nil {
		c.say.say("event controller: move of %s/%d: hand-off by %s: %v", c.cc.Topic, p, a.owner, err)
		return
	}
	// The partition is fenced on its owner from here: it must end up adopted somewhere.
	epoch, err := c.grant(ctx, p, to, lease, clientv3.Compare(clientv3.ModRevision(ownerKey(c.cc.Topic, p)), "=", g.modRev), a)
	if err != nil {
		// Still the old owner's grant (or gone: then a failover takes it): it takes its
		// state back.
		c.say.say("event controller: move of %s/%d to %s: grant: %v; %s adopts its state again", c.cc.Topic, p, to, err, a.owner)
		c.call(ctx, a.owner, fmt.Sprintf("/admin/adopt%s&epoch=%d", q, g.modRev), state, nil, nil)
		return
	}
	for attempt := 1; ; attempt++ {
		err = c.call(ctx, to, fmt.Sprintf("/admin/adopt%s&epoch=%d", q, epoch), state, nil, nil)
		if err == nil || attempt == 5 || ctx.Err() != nil {
			break
		}
		launch.Pause(ctx, 200*time.Millisecond)
	}
	if err != nil {
		// Granted to, not adopted: a later pass has to adopt it from the store (what the
		// hand-off made durable there), without its live leases.
		c.say.say("event controller: move of %s/%d: adopt by %s: %v (a later pass adopts it from the store)", c.cc.Topic, p, to, err)
		return
	}
	rev, ok := c.reassign(ctx, p, a, grant{node: to, lease: lease, modRev: epoch})
	if !ok {
		return
	}
	c.say.say("event move %s/%d: %s handed it off (%d bytes, frontier %s, %s live leases) -> granted to %s under epoch %d, which adopted them -> assigned at revision %d, in %v",
		c.cc.Topic, p, a.owner, len(state), frontier, leased, to, epoch, rev, time.Since(start).Round(time.Millisecond))
}

// reassign moves p's assignment from a to g's node in one Txn, if the assignment's mod
// revision is still a's and g is still the grant, and waits for the view to see it.
func (c *controller) reassign(ctx context.Context, p int32, a assignment, g grant) (int64, bool) {
	k := assignKey(c.cc.Topic, p)
	resp, err := c.cli.Txn(ctx).If(c.guard, clientv3.Compare(clientv3.ModRevision(k), "=", a.modRev),
		clientv3.Compare(clientv3.ModRevision(ownerKey(c.cc.Topic, p)), "=", g.modRev)).
		Then(clientv3.OpPut(k, g.node)).Commit()
	if err == nil && resp.Succeeded {
		c.seen(ctx, resp.Header.Revision)
		return resp.Header.Revision, true
	}
	if err == nil {
		err = fmt.Errorf("the assignment or the grant changed since revision %d, or the controller lost its election", a.modRev)
	}
	c.say.say("event controller: reassigning %s/%d to %s: %v", c.cc.Topic, p, g.node, err)
	return 0, false
}

// seen waits until the view has seen revision rev.
func (c *controller) seen(ctx context.Context, rev int64) {
	c.view.wait(ctx, func(s *snapshot) bool { return s.rev >= rev })
}

// call POSTs body to path on node id and reads its JSON answer into into, or hands the
// response to read.
func (c *controller) call(ctx context.Context, id, path string, body []byte, into any, read func(*http.Response) error) error {
	addr, ok := c.view.snap().known[id]
	if !ok {
		return fmt.Errorf("no address for %s", id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	switch {
	case read != nil:
		return read(resp)
	case into != nil:
		return json.NewDecoder(resp.Body).Decode(into)
	}
	return nil
}
