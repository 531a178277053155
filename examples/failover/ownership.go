package main

import (
	"maps"
	"sync"
	"time"

	"narad.dev/consume/router"
)

// etcdOwnership is a node's router.Ownership (Config.Ownership): a partition is granted to
// this node while its owner key names the node under the node's current lease, and for as
// long as that lease lives as far as the node can tell (nodeLease: the end of its last
// answered keep-alive's TTL, counted from when the keep-alive was sent). The grant's epoch is
// the owner key's mod revision: the controller puts the key once per grant, so the epoch
// grows with every grant of the partition, to this node or another.
//
// It answers from memory: the view's latest snapshot (a watch on the owner keys) and the
// lease's last answer. A node that hears nothing from etcd (paused, or cut off) keeps its
// grants until its lease's end, and not a moment longer, which is what lets the controller
// grant the partition to another node safely once the owner key is gone and the old lease's
// TTL (with a margin for the clocks' rates) has passed.
type etcdOwnership struct {
	topic string
	self  string
	view  *view
	lease *nodeLease
}

var _ router.Ownership = (*etcdOwnership)(nil)

// Grant implements router.Ownership.
func (o *etcdOwnership) Grant(topic string, partition int32) (router.Grant, bool) {
	if topic != o.topic {
		return router.Grant{}, false
	}
	g, ok := o.view.snap().owners[partition]
	if !ok || g.node != o.self {
		return router.Grant{}, false
	}
	st := o.lease.state()
	if g.lease != int64(st.id) {
		return router.Grant{}, false // under a lease of this node's that expired: gone with it
	}
	left := st.left()
	if left <= 0 {
		return router.Grant{}, false
	}
	return router.Grant{Epoch: uint64(g.modRev), Left: left}, true
}

// holds reports whether this node holds partition p's grant of epoch now: what the shared
// log's appends ask (logs.go).
func (o *etcdOwnership) holds(p int32, epoch uint64) bool {
	g, ok := o.Grant(o.topic, p)
	return ok && g.Epoch == epoch
}

// heldGrants follows the partitions granted to this node under its current lease: those
// whose owner key names it under the lease, and those whose owner key was deleted since (the
// controller replaces owner keys, never deletes them: a deleted one went with the lease).
// When the lease lapses, or etcd revokes it, that is what the node held, even if its view
// has seen the keys go by then.
type heldGrants struct {
	mu    sync.Mutex
	lease int64
	parts map[int32]int64 // partition → the grant's epoch
}

// update follows snapshot s, for node self under lease.
func (h *heldGrants) update(s *snapshot, self string, lease int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if lease != h.lease || h.parts == nil {
		h.lease, h.parts = lease, map[int32]int64{}
	}
	for p := range h.parts {
		if g, ok := s.owners[p]; ok && (g.node != self || g.lease != lease) {
			delete(h.parts, p) // granted anew, to another node or under another lease
		}
	}
	for p, g := range s.owners {
		if g.node == self && g.lease == lease {
			h.parts[p] = g.modRev
		}
	}
}

// of returns what the node held under lease.
func (h *heldGrants) of(lease int64) map[int32]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if lease != h.lease {
		return nil
	}
	return maps.Clone(h.parts)
}

// grantWait is how long the controller waits, once a partition's owner key is gone, before
// it grants the partition to another node: the old owner's grant ends at most a TTL after
// it sent the last keep-alive etcd's leader answered, which came before the key went (the
// lease expired, TTL after the leader received that keep-alive), so a TTL from the moment
// the controller sees the key gone is enough on clocks of one rate; 10% more covers clocks
// whose rates differ by that much.
func grantWait(ttl time.Duration) time.Duration { return ttl + ttl/10 }
