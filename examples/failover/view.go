package main

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"narad.dev/consume/examples/internal/launch"
)

// A view follows what etcd says about the cluster: which nodes are live (their lease keys),
// which node each partition of the topic is granted to (its owner key, under that node's
// lease) and routed to (its assignment), the moves asked for, and whether the cluster is
// being stopped. It reads everything at one revision, then watches from the next, and
// publishes each change as a new immutable snapshot. A node's Routes and Liveness answer
// from it (etcdRoutes), its controller reconciles from it, and the parent's producers find
// the owners through it.
type view struct {
	topic string
	self  string // this process's node ID; "" in the parent
	cur   atomic.Pointer[snapshot]

	// prepare is called with the snapshot published and the one about to be, and changed
	// with the one before and the one just published; both on the view's goroutine, in
	// order.
	prepare func(prev, next *snapshot)
	changed func(prev, next *snapshot)

	mu      sync.Mutex
	updated chan struct{} // closed and replaced at each publish

	// The partition's test hook: while held, the view hears nothing from etcd (its watch
	// is ended, and it reads afresh once released), as a node cut off from etcd.
	held      atomic.Bool
	stopWatch context.CancelFunc // ends the watch in progress; under mu
}

// An assignment is the node a partition is routed to, and the revision that said so last
// (the controller's transactions compare it).
type assignment struct {
	owner  string
	modRev int64
}

// A grant is a partition's owner key: the node it is granted to, the lease the key lives
// under (that node's, when it was granted), and the key's mod revision, which is the grant's
// epoch (router.Grant.Epoch): it grows with every grant of the partition, since the
// controller puts the key once per grant.
type grant struct {
	node   string
	lease  int64
	modRev int64
}

// A snapshot is the view at one revision. Nothing in it changes once published.
type snapshot struct {
	rev    int64
	assign map[int32]assignment
	owners map[int32]grant   // partition → its owner key; none while it is granted to nobody
	live   map[string]string // live node → its HTTP address
	leases map[string]int64  // live node → the lease its liveness key is under
	known  map[string]string // every node ever seen live → its last address
	moves  map[int32]string  // partition → the node a move was asked to
	halt   bool

	// For view.self: its partitions, ascending, and every other owner's (Routes).
	local  []int32
	remote map[string][]int32
}

func newView(topic, self string) *view {
	v := &view{topic: topic, self: self, updated: make(chan struct{})}
	v.cur.Store(&snapshot{assign: map[int32]assignment{}, owners: map[int32]grant{}, live: map[string]string{},
		leases: map[string]int64{}, known: map[string]string{}, moves: map[int32]string{}, remote: map[string][]int32{}})
	return v
}

func (v *view) snap() *snapshot { return v.cur.Load() }

// watched is the key range the view follows: assign/ to owner/, which takes in
// controller/, halt, move/ and nodes/ and leaves out state/ (the ack states, written at
// every commit interval) and epoch/ (the store's).
var watchFrom, watchEnd = assignPrefix, clientv3.GetPrefixRangeEnd(ownerPrefix)

// run reads and watches until ctx ends. ready is closed after the first publish.
func (v *view) run(ctx context.Context, cli *clientv3.Client, ready chan<- struct{}) error {
	for ctx.Err() == nil {
		if v.held.Load() {
			launch.Pause(ctx, 20*time.Millisecond)
			continue
		}
		resp, err := cli.Get(ctx, watchFrom, clientv3.WithRange(watchEnd))
		if err != nil {
			if launch.Pause(ctx, 100*time.Millisecond); ctx.Err() != nil {
				break
			}
			continue
		}
		next := v.build(v.snap(), resp.Header.Revision, func(apply applyFunc) {
			for _, kv := range resp.Kvs {
				apply(string(kv.Key), kv.Value, kv.ModRevision, kv.Lease, true)
			}
		}, true)
		if v.held.Load() {
			continue // cut off meanwhile: what it read is not heard
		}
		v.publish(next)
		if ready != nil {
			close(ready)
			ready = nil
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		v.mu.Lock()
		v.stopWatch = cancel
		v.mu.Unlock()
		for wr := range cli.Watch(wctx, watchFrom, clientv3.WithRange(watchEnd), clientv3.WithRev(next.rev+1)) {
			if wr.Err() != nil || v.held.Load() {
				break // compacted, the member lost its leader, or cut off: read afresh
			}
			if len(wr.Events) == 0 {
				continue
			}
			next = v.build(v.snap(), wr.Header.Revision, func(apply applyFunc) {
				for _, ev := range wr.Events {
					apply(string(ev.Kv.Key), ev.Kv.Value, ev.Kv.ModRevision, ev.Kv.Lease, ev.Type == clientv3.EventTypePut)
				}
			}, false)
			v.publish(next)
		}
		cancel()
	}
	return nil
}

// hold cuts the view off from etcd (on) or lets it hear again: the partition's test hook.
func (v *view) hold(on bool) {
	v.held.Store(on)
	if on {
		v.mu.Lock()
		if v.stopWatch != nil {
			v.stopWatch()
		}
		v.mu.Unlock()
	}
}

// build returns the snapshot after the changes each calls apply for: from scratch when
// full (a fresh read), over prev otherwise.
// applyFunc takes one key's change: put (value, at modRev, under lease) or deleted.
type applyFunc func(key string, value []byte, modRev, lease int64, put bool)

func (v *view) build(prev *snapshot, rev int64, each func(apply applyFunc), full bool) *snapshot {
	next := &snapshot{rev: rev, known: maps.Clone(prev.known)}
	if full {
		next.assign, next.owners, next.live, next.leases, next.moves = map[int32]assignment{}, map[int32]grant{},
			map[string]string{}, map[string]int64{}, map[int32]string{}
	} else {
		next.assign, next.owners, next.live, next.leases, next.moves, next.halt = maps.Clone(prev.assign), maps.Clone(prev.owners),
			maps.Clone(prev.live), maps.Clone(prev.leases), maps.Clone(prev.moves), prev.halt
	}
	each(func(key string, value []byte, modRev, lease int64, put bool) {
		switch {
		case key == haltKey:
			next.halt = put
		case strings.HasPrefix(key, nodesPrefix):
			id := strings.TrimPrefix(key, nodesPrefix)
			if put {
				next.live[id] = string(value)
				next.known[id] = string(value)
				next.leases[id] = lease
			} else {
				delete(next.live, id)
				delete(next.leases, id)
			}
		case strings.HasPrefix(key, ownerPrefix):
			if p, ok := v.partitionOf(key, ownerPrefix); ok {
				if put {
					next.owners[p] = grant{node: string(value), lease: lease, modRev: modRev}
				} else {
					delete(next.owners, p)
				}
			}
		case strings.HasPrefix(key, assignPrefix):
			if p, ok := v.partitionOf(key, assignPrefix); ok {
				if put {
					next.assign[p] = assignment{owner: string(value), modRev: modRev}
				} else {
					delete(next.assign, p)
				}
			}
		case strings.HasPrefix(key, movePrefix):
			if p, ok := v.partitionOf(key, movePrefix); ok {
				if put {
					next.moves[p] = string(value)
				} else {
					delete(next.moves, p)
				}
			}
		}
	})
	next.remote = map[string][]int32{}
	for p, a := range next.assign {
		if a.owner == v.self {
			next.local = append(next.local, p)
		} else {
			next.remote[a.owner] = append(next.remote[a.owner], p)
		}
	}
	slices.Sort(next.local)
	for _, ps := range next.remote {
		slices.Sort(ps)
	}
	return next
}

// partitionOf parses prefix<topic>/<partition>, for the view's topic.
func (v *view) partitionOf(key, prefix string) (int32, bool) {
	rest, ok := strings.CutPrefix(key, prefix+v.topic+"/")
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseInt(rest, 10, 32)
	return int32(p), err == nil && p >= 0
}

func (v *view) publish(next *snapshot) {
	if v.prepare != nil {
		v.prepare(v.snap(), next)
	}
	prev := v.cur.Swap(next)
	if v.changed != nil {
		v.changed(prev, next)
	}
	v.mu.Lock()
	close(v.updated)
	v.updated = make(chan struct{})
	v.mu.Unlock()
}

// wait returns the first snapshot cond holds for, or nil when ctx ends first.
func (v *view) wait(ctx context.Context, cond func(*snapshot) bool) *snapshot {
	for {
		v.mu.Lock()
		updated := v.updated
		v.mu.Unlock()
		if s := v.snap(); cond(s) {
			return s
		}
		select {
		case <-ctx.Done():
			return nil
		case <-updated:
		}
	}
}

// changes returns a channel closed at the next publish.
func (v *view) changes() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.updated
}

// owner returns the node partition p is routed to.
func (s *snapshot) owner(p int32) string { return s.assign[p].owner }

// granted returns the partitions whose owner key names node, ascending.
func (s *snapshot) granted(node string) []int32 {
	var ps []int32
	for p, g := range s.owners {
		if g.node == node {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// settled reports whether partition p is granted and routed to one node.
func (s *snapshot) settled(p int32) bool {
	g, ok := s.owners[p]
	return ok && s.assign[p].owner == g.node
}

// owned returns the partitions routed to node, ascending.
func (s *snapshot) owned(node string) []int32 {
	var ps []int32
	for p, a := range s.assign {
		if a.owner == node {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// etcdRoutes is a node's router.Routes, router.OwnerFinder and router.Liveness: what the
// view's latest snapshot says. Its answers are the snapshot's slices, which nothing
// modifies.
type etcdRoutes struct{ v *view }

func (r etcdRoutes) Partitions(topic string) (local []int32, remote map[string][]int32, ok bool) {
	if topic != r.v.topic {
		return nil, nil, false
	}
	s := r.v.snap()
	return s.local, s.remote, true
}

func (r etcdRoutes) Owner(topic string, partition int32) (string, bool) {
	if topic != r.v.topic {
		return "", false
	}
	a, ok := r.v.snap().assign[partition]
	if !ok || a.owner == r.v.self {
		return "", false
	}
	return a.owner, true
}

// Down: a node is down when its lease key is gone (its lease expired, or it never came).
func (r etcdRoutes) Down(node string) bool {
	_, live := r.v.snap().live[node]
	return !live
}

// resolve is the nodehttp Resolve: a node's peer URL, from its lease key's value (its last
// one, once it is gone: calls to it then fail, and Liveness says it is down anyway).
func (r etcdRoutes) resolve(id string) (string, bool) {
	addr, ok := r.v.snap().known[id]
	if !ok {
		return "", false
	}
	return launch.Node{Addr: addr}.PeerURL(), true
}
