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

// The controller: the one process that changes the assignment. It runs in whichever node
// holds the etcd election (concurrency.Election over the node's session), rather than in the
// parent, because the parent here plays the clients, not the cluster: a host's controller has
// to survive the loss of any machine, and an election on the nodes' own leases gives that
// for free. When the controller's node dies its election key goes with its lease, the next
// campaigner wins, and since the controller only ever reconciles what etcd says (level, not
// edge), the new one picks up whatever the dead one left, the dead node's own partitions
// included.
//
// Each pass, from the view's latest snapshot:
//
//   - a partition whose owner has no lease key (down): fail it over to the live node that
//     owns fewest. The new owner loads the partition's state from etcd (what the dead owner's
//     StateStore saved last) and adopts it; then one Txn moves the assignment, if its mod
//     revision is still the one the pass read.
//   - a move asked for (move/<topic>/<partition> → node): the owner's HandOff, its bytes
//     to the new owner's Adopt, then the same Txn; the request is deleted.
//
// After each change the controller waits until its view has seen it, so that no pass acts
// twice on one state.
type controller struct {
	id   string
	cc   clusterConfig
	cli  *clientv3.Client
	view *view
	say  *lines
	http *http.Client
}

// campaign campaigns for the election until this node wins it, then controls until ctx ends.
func (c *controller) campaign(ctx context.Context, sess *concurrency.Session) {
	el := concurrency.NewElection(sess, electionName)
	for {
		err := el.Campaign(ctx, c.id)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			break
		}
		launch.Pause(ctx, 200*time.Millisecond)
	}
	c.say.say("event won the controller's election")
	c.assignFirst(ctx)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		changes := c.view.changes()
		if s := c.view.snap(); !s.halt {
			c.pass(ctx, s)
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-tick.C:
		}
	}
}

// assignFirst writes the config's first assignment of each partition etcd has none of.
func (c *controller) assignFirst(ctx context.Context) {
	for _, p := range c.cc.partitions() {
		k := assignKey(c.cc.Topic, p)
		for ctx.Err() == nil {
			_, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, c.cc.initialOwner(p))).Commit()
			if err == nil {
				break
			}
			launch.Pause(ctx, 100*time.Millisecond)
		}
	}
}

// pass fails over the partitions of nodes that are down and makes the moves asked for.
func (c *controller) pass(ctx context.Context, s *snapshot) {
	for _, p := range c.cc.partitions() {
		a, ok := s.assign[p]
		if !ok {
			continue
		}
		if _, live := s.live[a.owner]; live {
			continue
		}
		if _, joined := s.known[a.owner]; !joined {
			continue // not down: not up yet (a node joins once its key is there)
		}
		to := leastLoaded(s)
		if to == "" {
			return // nobody live to take it
		}
		c.failover(ctx, p, a, to)
		return // one change a pass: the next starts from the snapshot after it
	}
	moves := make([]int32, 0, len(s.moves))
	for p := range s.moves {
		moves = append(moves, p)
	}
	slices.Sort(moves)
	for _, p := range moves {
		to, a := s.moves[p], s.assign[p]
		_, fromLive := s.live[a.owner]
		_, toLive := s.live[to]
		switch {
		case a.owner == to || !toLive:
			c.say.say("event controller: move of %s/%d to %s: nothing to do (owner %s)", c.cc.Topic, p, to, a.owner)
		case !fromLive:
			continue // failed over first, at a later pass
		default:
			c.move(ctx, p, a, to)
		}
		if resp, err := c.cli.Delete(ctx, moveKey(c.cc.Topic, p)); err == nil {
			c.seen(ctx, resp.Header.Revision)
		}
		return
	}
}

// leastLoaded returns the live node that owns fewest partitions (the first by ID among equals).
func leastLoaded(s *snapshot) string {
	best, bestN := "", 0
	ids := make([]string, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if n := len(s.owned(id)); best == "" || n < bestN {
			best, bestN = id, n
		}
	}
	return best
}

// failover moves partition p of a dead owner to node to: to adopts the state etcd holds of
// it, then the assignment changes.
func (c *controller) failover(ctx context.Context, p int32, a assignment, to string) {
	start := time.Now()
	var answer adopted
	if err := c.call(ctx, to, "/admin/adopt?from=store&partition="+strconv.Itoa(int(p)), nil, &answer, nil); err != nil {
		c.say.say("event controller: failover of %s/%d to %s: adopt: %v", c.cc.Topic, p, to, err)
		return
	}
	rev, ok := c.reassign(ctx, p, a, to)
	if !ok {
		return
	}
	c.say.say("event failover %s/%d: %s down (no lease key) -> %s read its state from etcd (%d bytes, %s) and adopted it (%s) -> assigned at revision %d, in %v",
		c.cc.Topic, p, a.owner, to, answer.StateBytes, answer.Read, answer.Adopt, rev, time.Since(start).Round(time.Millisecond))
}

// move hands partition p off its live owner to node to.
func (c *controller) move(ctx context.Context, p int32, a assignment, to string) {
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
	for attempt := 1; ; attempt++ {
		err = c.call(ctx, to, "/admin/adopt"+q, state, nil, nil)
		if err == nil || attempt == 5 || ctx.Err() != nil {
			break
		}
		launch.Pause(ctx, 200*time.Millisecond)
	}
	if err != nil {
		c.say.say("event controller: move of %s/%d: adopt by %s: %v (the partition stays fenced on %s)", c.cc.Topic, p, to, err, a.owner)
		return
	}
	rev, ok := c.reassign(ctx, p, a, to)
	if !ok {
		return
	}
	c.say.say("event move %s/%d: %s handed it off (%d bytes, frontier %s, %s live leases) -> %s adopted them -> assigned at revision %d, in %v",
		c.cc.Topic, p, a.owner, len(state), frontier, leased, to, rev, time.Since(start).Round(time.Millisecond))
}

// reassign moves p's assignment from a to node to in one Txn, if the assignment's mod
// revision is still a's, and waits for the view to see it. If it lost the race, to drops
// what it adopted.
func (c *controller) reassign(ctx context.Context, p int32, a assignment, to string) (int64, bool) {
	k := assignKey(c.cc.Topic, p)
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", a.modRev)).
		Then(clientv3.OpPut(k, to)).Commit()
	if err == nil && resp.Succeeded {
		c.seen(ctx, resp.Header.Revision)
		return resp.Header.Revision, true
	}
	if err == nil {
		err = fmt.Errorf("the assignment changed since revision %d", a.modRev)
	}
	c.say.say("event controller: reassigning %s/%d to %s: %v", c.cc.Topic, p, to, err)
	c.call(ctx, to, "/admin/drop?partition="+strconv.Itoa(int(p)), nil, nil, nil)
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
