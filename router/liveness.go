package router

import (
	"slices"
)

// Liveness is an optional capability of Routes, found by type assertion: whether a node is
// down, as the host's failure detector sees it. A consume neither probes nor registers with
// an owner that is down (a topic whose owners are all down is held like one not assigned
// yet), and an ack, extend or nack of a partition it owns answers ErrUnavailable (a 503)
// with no RPC. Without it every owner counts as up, and one that is down is found by its
// RPCs failing (ErrTransport, a 502). It must be safe for concurrent use and cheap: the
// node asks it on every forwarded call.
type Liveness interface {
	Down(node string) bool
}

// down reports whether the host says node is down.
func (n *Node) down(node string) bool {
	l, ok := n.routes.(Liveness)
	return ok && l.Down(node)
}

// remoteOwners returns the nodes that own partitions of topic, those the host says are
// down left out, in a stable order (sorted), and whether any owner is down. With pinned >=
// 0 it returns the owner of that partition alone (none when this node owns it or nobody
// does).
func (n *Node) remoteOwners(topic string, pinned int32) (owners []string, anyDown bool) {
	_, remote, _ := n.routes.Partitions(topic)
	return n.remoteOwnersIn(remote, pinned)
}

// remoteOwnersIn is remoteOwners over remote, the routes' remote partitions of a topic read
// already.
func (n *Node) remoteOwnersIn(remote map[string][]int32, pinned int32) (owners []string, anyDown bool) {
	for owner, parts := range remote {
		if owner == "" || len(parts) == 0 || (pinned >= 0 && !slices.Contains(parts, pinned)) {
			continue // "": no node to ask (the verdict on the routes refuses its partitions)
		}
		if n.down(owner) {
			anyDown = true
			continue
		}
		owners = append(owners, owner)
	}
	slices.Sort(owners)
	return owners, anyDown
}

// consumeOwners is remoteOwners less the owners that refused the consume op within the last
// olderFieldMemory (a release before consumption across nodes), which count as down for a
// consume: nothing is asked of them, and a topic whose owners are all such is held like one
// whose owners are down.
func (n *Node) consumeOwners(topic string, pinned int32) (owners []string, anyOut bool) {
	_, remote, _ := n.routes.Partitions(topic)
	return n.consumeOwnersIn(remote, pinned)
}

// consumeOwnersIn is consumeOwners over remote, the routes' remote partitions of a topic read
// already.
func (n *Node) consumeOwnersIn(remote map[string][]int32, pinned int32) (owners []string, anyOut bool) {
	owners, anyOut = n.remoteOwnersIn(remote, pinned)
	now := n.clock.Now()
	serving := owners[:0]
	for _, owner := range owners {
		if n.servesConsumes(owner, now) {
			serving = append(serving, owner)
		} else {
			anyOut = true
		}
	}
	return serving, anyOut
}
