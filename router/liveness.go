package router

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"
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

// Slow owners. An owner that let a consume's RPC (a probe or a claim) run out of its budget
// with no reply is slow, as this node sees it: consumes stop probing it on their own time,
// so one owner that hangs (it neither answers nor refuses) costs the consumes of every
// other node one budget once, not each. It is asked again in the background instead: a
// consume that passes over it sends it, at most once a second, a Cancel naming no
// request (the cheapest frame every owner answers, changing nothing), and any reply from it
// (that one, a late probe's, a registration's) ends its slowness. Tokens are still left with
// a slow owner meanwhile, so a parked consumer still hears of its records: a slow owner is
// passed over, not forgotten. Nothing of this runs while no consume comes (invariant "idle
// costs nothing").

// slowOwnerRecheck is how often, at most, a slow owner is asked in the background whether it
// answers again, while consumes pass over it.
const slowOwnerRecheck = time.Second

// answering returns owners less the slow ones (owners itself when none is), and sends each
// slow one its background recheck when one is due. It never writes into owners.
func (n *Node) answering(owners []string) []string {
	now := n.clock.Now()
	var asked []string // nil until an owner is left out
	for i, owner := range owners {
		p := n.lane(owner).Peer
		p.mu.Lock()
		slow, due := p.slow, p.slow && !now.Before(p.recheckAt)
		if due {
			p.recheckAt = now.Add(slowOwnerRecheck)
		}
		p.mu.Unlock()
		if due {
			n.recheck(owner)
		}
		switch {
		case slow && asked == nil:
			asked = append(make([]string, 0, len(owners)-1), owners[:i]...)
		case !slow && asked != nil:
			asked = append(asked, owner)
		}
	}
	if asked == nil {
		return owners
	}
	return asked
}

// slowOwner marks owner slow: a consume's RPC to it ran out of its budget with no reply.
func (n *Node) slowOwner(owner string) {
	p := n.lane(owner).Peer
	p.mu.Lock()
	if !p.slow {
		p.slow = true
		p.recheckAt = n.clock.Now().Add(slowOwnerRecheck)
		n.stats.remote.slowOwners.Add(1)
		n.logger.Info("consume: an owner gave no reply within the budget: passed over until it answers", "owner", owner)
	}
	p.mu.Unlock()
}

// ownerAnswered ends owner's slowness, if it was slow: a reply of its came back.
func (n *Node) ownerAnswered(owner string) {
	p := n.lane(owner).Peer
	p.mu.Lock()
	was := p.slow
	p.slow = false
	p.mu.Unlock()
	if was {
		n.logger.Info("consume: a slow owner answers again", "owner", owner)
	}
}

// recheck asks a slow owner, in the background, whether it answers: a Cancel of request id
// zero, which no consume uses (see requestID).
func (n *Node) recheck(owner string) { n.sendCancel(context.Background(), owner, "", 0) }

// requestID draws the id of a consume sent to an owner: unpredictable (the runtime's
// ChaCha8 generator, seeded by the system), so that no frame of one request tells a peer
// the id of another, and never zero (see recheck).
func requestID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}
