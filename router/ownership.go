package router

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/storecommit"
)

// A node acts on a partition only while it can prove it owns it (see docs/protocol.md,
// "Ownership and failover from a live owner"): its Routes name it here and, with
// Config.Ownership, the host's grant of it is valid on the node's own clock. When the routes
// name another owner the partition is deposed: its settles go to that owner. When the grant
// runs out the partition's shard is frozen (no lease, no settle, no save): the same grant
// coming back thaws it, another epoch deposes it.

// Ownership is the host's grant of partitions in time (Config.Ownership): what its consensus
// gives this node, an etcd lease on an owner key, a leader epoch with a session timeout, a
// lock with a TTL. It must be safe for concurrent use and answer quickly, from memory: the
// node asks it when it loads a partition, when a grant it holds reaches its end, on
// RoutesChanged, and before it saves a partition whose grant it cannot vouch for.
type Ownership interface {
	// Grant returns this node's grant of partition of topic, and ok false when it holds
	// none (the node then serves nothing of the partition, and saves nothing of it). A host
	// that grants per node answers the node's grant for every partition it owns.
	Grant(topic string, partition int32) (g Grant, ok bool)
}

// A Grant is a node's ownership of a partition, as the host's consensus granted it.
type Grant struct {
	// Epoch names the grant. It must grow with every grant of the partition: to another
	// node, or to this one again after it lost it or restarted (an etcd owner key's
	// revision, a leader epoch). 0 means the host keeps no epochs: the node then cannot tell
	// one grant from the next, and a store cannot refuse an older owner's saves.
	Epoch uint64
	// Left is how long the grant stays valid from the call, on the host's monotonic clock
	// (for an etcd lease: the TTL, less the time since the keep-alive that the lease's
	// current TTL answered was sent). The node serves the partition until Left has passed on
	// its own clock and asks again then; zero or negative is a grant already lapsed. A
	// successor may act on the partition only once the grant has lapsed everywhere: the
	// failover waits out the old owner's Left plus a margin for the two clocks' rates.
	Left time.Duration
}

// Errors of ownership.
var (
	// ErrNotGranted: Config.Ownership answers no valid grant of the partition to this node
	// (Adopt refuses to install a partition this node may not serve; a settle or consume of
	// one answers ErrMoved).
	ErrNotGranted = errors.New("router: this node holds no ownership grant of the partition")
	// ErrFenced: the state store refused a save because the partition's state is kept
	// under a newer ownership epoch than the save's (see StateStore). A store wraps it in
	// its error; the node then deposes the partition at once.
	ErrFenced = storecommit.ErrFenced
)

// maxGrant bounds a grant's Left, so that now plus it cannot overflow.
const maxGrant = 100 * 365 * 24 * time.Hour

// fenceGrantGap is how far a shard's fencing tokens jump above the state's when it takes a
// grant newer than the one the state was kept under: a token is at least its grant time in
// nanoseconds and grows by one per lease, so an owner that served for less than 2^40 ns
// (about 18 minutes) after its last save issued no token above the jump.
const fenceGrantGap = 1 << 40

// errNoGrant answers a partition this node holds no valid grant of.
func errNoGrant(topic string, partition int32) error {
	return fmt.Errorf("%w: %w: %s/%d", ErrMoved, ErrNotGranted, topic, partition)
}

// takeGrant binds st, a partition's state about to be served here, to this node's grant at
// now: the grant's epoch and its end, and fencing tokens above any the state's older grant
// issued. Without Config.Ownership it changes nothing. A partition with no valid grant, or
// whose state was kept under a newer grant than this node's (this node's is stale), is
// refused, and nothing is served.
func (n *Node) takeGrant(topic string, partition int32, st *inflight.State, now time.Time) error {
	if n.ownership == nil {
		if n.fencedBelow(topic, partition, 0) {
			return errNoGrant(topic, partition)
		}
		return nil
	}
	g, ok := n.grant(topic, partition)
	if !ok || n.fencedBelow(topic, partition, g.Epoch) {
		return errNoGrant(topic, partition)
	}
	if st.Epoch > g.Epoch {
		return fmt.Errorf("%w: %w: the state of %s/%d was kept under epoch %d, this node's grant is of epoch %d",
			ErrMoved, ErrNotGranted, topic, partition, st.Epoch, g.Epoch)
	}
	if st.Epoch < g.Epoch {
		st.Fence += fenceGrantGap
	}
	st.Epoch = g.Epoch
	st.GrantUntil = now.Add(g.Left)
	return nil
}

// grant asks the host for this node's grant of a partition; ok is false for none, or one
// already lapsed.
func (n *Node) grant(topic string, partition int32) (Grant, bool) {
	g, ok := n.ownership.Grant(topic, partition)
	if !ok || g.Left <= 0 {
		return Grant{}, false
	}
	g.Left = min(g.Left, maxGrant)
	return g, true
}

// renew tries to renew shard's lapsed grant at now: true when the host answers the same
// grant (its epoch) valid again, and the shard thaws as it was, its leases and unsaved acks
// included (a keep-alive that came late: a consensus electing a leader). No grant now leaves
// it frozen, to thaw if the same grant comes back: no other node can have been granted the
// partition meanwhile, since every grant has a larger epoch. Another epoch deposes it (the
// partition loads again under that grant, from the store).
func (n *Node) renew(shard *inflight.Shard, now time.Time) bool {
	switch renewed, other := n.renewed(shard, now); {
	case renewed:
		n.committer.MarkDirty(shard.Topic(), shard.Partition()) // a save it missed while frozen
		return true
	case other:
		n.depose(shard.Topic(), shard.Partition(), shard, "its ownership grant changed")
	}
	return false
}

// renewed is renew without its consequences: whether the host renewed shard's grant, valid
// at now, or answers another epoch.
func (n *Node) renewed(shard *inflight.Shard, now time.Time) (renewed, other bool) {
	g, ok := n.grant(shard.Topic(), shard.Partition())
	switch {
	case !ok:
		return false, false
	case g.Epoch != shard.Epoch():
		return false, true
	}
	shard.Renew(now.Add(g.Left))
	return !shard.Lapsed(now), false
}

// lapsedRetry reports whether an op that answered err on shard at now should be tried again:
// it answered ErrMoved because the shard's grant lapsed, and the host renewed the same grant.
// Otherwise err stands (and the shard stays frozen, or is deposed: see renew).
func (n *Node) lapsedRetry(shard *inflight.Shard, now time.Time, err error) bool {
	return err == inflight.ErrMoved && n.ownership != nil && shard.Lapsed(now) && n.renew(shard, now)
}

// depose takes a partition from this node while its shard is live: the routes name another
// owner, the host granted it under another epoch, or the store fenced its save. The shard goes with its leases (their holders' settles answer
// ErrMoved, and go to the owner the routes name), nothing of it is saved any more, and the
// consumers parked for it look elsewhere. shard is the one found deposable; a newer shard
// of the partition (loaded since under a new grant) is left alone.
func (n *Node) depose(topic string, partition int32, shard *inflight.Shard, why string) {
	if f := deposing.Load(); f != nil {
		(*f)() // a test's: a caller between finding shard stale and deposing it
	}
	if !n.tracker.Depose(shard) { // shard alone: not a newer one loaded since
		return
	}
	n.stats.deposed.Add(1)
	n.logger.Warn("consume: partition deposed: this node no longer serves it, and saves nothing of it",
		"topic", topic, "partition", partition, "why", why)
	n.wake(topic, partition)
}

// deposing, when set by the package's tests (export_test.go), runs in depose just before
// the shard found stale is dropped: where another caller may depose the same shard, and a
// newer one be loaded, first.
var deposing atomic.Pointer[func()]

// mayWrite reports whether the committer may save shard's state now: without
// Config.Ownership always; with it, while its grant is valid at a clock reading taken now (or
// renewed). A shard whose grant lapsed saves nothing (its thaw marks it dirty again, see
// renew); one granted anew under another epoch is deposed off the committer's goroutine (a
// depose waits for the committer's save in progress: this one).
func (n *Node) mayWrite(shard *inflight.Shard) bool {
	if n.ownership == nil {
		return true
	}
	now := n.clock.Now()
	if !shard.Lapsed(now) {
		return true
	}
	renewed, other := n.renewed(shard, now)
	if other && !n.life.closed.Load() { // the pool runs until Close has stopped the committer's loop
		n.background(func() { n.depose(shard.Topic(), shard.Partition(), shard, "its ownership grant changed") })
	}
	return renewed
}

// fenced is the store committer's Fenced: the store refused a save of the partition as
// fenced, so another node owns it under a newer epoch. It is deposed at once (the store
// committer calls it off its own locks), and not served again under the same grant: every
// ack it answered would be lost with the next refused save. A newer grant (or, without
// Config.Ownership, RoutesChanged or DropPartition) ends that. A shard loaded since under a
// newer grant than the refused save's epoch is left alone.
func (n *Node) fenced(topic string, partition int32, epoch uint64) {
	if shard, ok := n.tracker.Lookup(topic, partition); ok && shard.Epoch() <= epoch {
		n.fencedEpochs.Store(shardKey{topic, partition}, epoch)
		n.depose(topic, partition, shard, "the state store refused its save as fenced")
	}
}

// fencedBelow reports whether the store refused a save of the partition under a grant of
// epoch or newer (see fenced); a newer grant forgets the refusal.
func (n *Node) fencedBelow(topic string, partition int32, epoch uint64) bool {
	key := shardKey{topic, partition}
	v, ok := n.fencedEpochs.Load(key)
	if !ok {
		return false
	}
	if epoch > v.(uint64) {
		n.fencedEpochs.Delete(key)
		return false
	}
	return true
}

// deposeLapsed is the tracker's Lapsed hook: the purger found shard's grant lapsed.
func (n *Node) deposeLapsed(topic string, partition int32) {
	if shard, ok := n.tracker.Lookup(topic, partition); ok {
		n.renew(shard, n.clock.Now())
	}
}

// RoutesChanged tells the node that its Routes (or its Ownership grants) changed for topic:
// partitions moved, were added, or failed over. The node checks at once every partition of
// the topic it has loaded: one the routes no longer name here (unless Adopt installed it and
// the routes have not named it here yet), or (with Config.Ownership) granted anew under
// another epoch, is deposed (no lease, no settle, no save of it here from now on: settles of
// its leases go to the owner the routes name), and consumers parked on the topic look at the
// partitions as they are now. One whose grant is gone stops when its grant runs out. A host calls it whenever its routes
// change, after the change; calls cost one routes lookup and a pass over the topic's loaded
// partitions, nothing on the consume and settle paths.
func (n *Node) RoutesChanged(topic string) {
	if !n.life.fence.enter() {
		return
	}
	defer n.life.fence.leave()
	if checkTopic(topic) != nil {
		return
	}
	if n.ownership == nil { // with grants, only a newer grant forgets a store's refusal
		n.fencedEpochs.Range(func(k, _ any) bool {
			if k.(shardKey).topic == topic {
				n.fencedEpochs.Delete(k)
			}
			return true
		})
	}
	shards := n.tracker.Held(topic)
	if len(shards) > 0 {
		local, _, known := n.routes.Partitions(topic)
		now := n.clock.Now()
		for _, shard := range shards {
			p := shard.Partition()
			routedHere := known && slices.Contains(local, p)
			switch {
			case n.moves.awaitsRoutes(shardKey{topic, p}, shard, routedHere):
				// Adopted here, the routes not yet changed to name it: its leases live on.
			case !routedHere:
				n.depose(topic, p, shard, "the routes name another owner")
			case n.ownership != nil:
				// No grant now: the shard freezes when the one it holds runs out, and thaws
				// if that grant comes back (see renew).
				if g, ok := n.grant(topic, p); ok && g.Epoch != shard.Epoch() {
					n.depose(topic, p, shard, "its ownership grant changed")
				} else if ok {
					shard.Renew(now.Add(g.Left))
				}
			}
		}
	}
	n.pump.Notify(topic)
	n.offer(topic)
}
