package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/ackstate"
	"narad.dev/consume/internal/handoff"
	"narad.dev/consume/internal/statedir"
	"narad.dev/consume/offsets"
)

// A partition moves between nodes by hand-off, never by copying files under a live node:
// the old owner's HandOff fences the partition, makes its state durable and returns it as
// bytes, leases included; the new owner's Adopt installs them. From the fence on, every
// settle of the partition on the old owner is either in those bytes or refused with
// ErrMoved, so no settle answered with success is lost, and since the leases move with the
// state, a graceful move changes no consumer's lease. A failover (the old owner is dead)
// adopts the last durable state instead (ReadState): see docs/protocol.md, "Moving a
// partition", for the window each case leaves.

// Errors of a move.
var (
	// ErrMoved: the partition was handed off from this node (HandOff), and the routes do not
	// name another owner to forward the call to. Nothing changed; ask the partition's new
	// owner (HTTPStatus answers 503: a client retries, and by then the routes lead there).
	ErrMoved = inflight.ErrMoved
	// ErrDamagedState: bytes given to Adopt are not a partition's state (truncated,
	// damaged, of a version this release does not read). Nothing changed.
	ErrDamagedState = handoff.ErrDamaged
	// ErrForeignState: bytes given to Adopt are another partition's state.
	ErrForeignState = errors.New("router: the state is another partition's")
	// ErrStaleState: bytes given to Adopt are older than the state this node holds of the
	// same incarnation of the partition (a lower frontier). Nothing changed.
	ErrStaleState = errors.New("router: the state is older than the one held here")
)

// moves is the node's memory of partitions it handed off (their fence) and of the hand-offs
// it adopted (so a retried Adopt of the same bytes installs nothing again).
type moves struct {
	mu      sync.Mutex // guards adopted and unrouted, and serialises Adopt's installs
	fenced  sync.Map   // shardKey → *handedOff: read at every load of a shard
	adopted map[shardKey]uint64
	// unrouted holds the shards Adopt installed that the routes have not named here yet:
	// RoutesChanged leaves them alone until they do (Adopt comes before the routes).
	unrouted map[shardKey]*inflight.Shard
}

// awaitsRoutes reports whether shard is one Adopt installed that the routes have not named
// here yet; routedHere says whether they name it here now, which ends the wait.
func (m *moves) awaitsRoutes(key shardKey, shard *inflight.Shard, routedHere bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	installed, ok := m.unrouted[key]
	if ok && (routedHere || installed != shard) {
		delete(m.unrouted, key)
		return false
	}
	return ok
}

// handedOff is what HandOff keeps of a partition it fenced: the state it returned (times on
// this node's clock), so that a retried HandOff returns the same state.
type handedOff struct {
	id uint64

	mu     sync.Mutex // serialises the HandOff calls of the partition
	state  inflight.State
	fenced bool // state holds the fenced shard's state
	done   bool // and it is durable, the shard dropped
}

// isFenced reports whether the partition was handed off from this node.
func (m *moves) isFenced(topic string, partition int32) bool {
	_, ok := m.fenced.Load(shardKey{topic, partition})
	return ok
}

// unfenceLocked forgets the fence of one partition (partition >= 0) or of every partition of topic.
// Called with mu held.
func (m *moves) unfenceLocked(topic string, partition int32) {
	if partition >= 0 {
		m.fenced.Delete(shardKey{topic, partition})
		return
	}
	m.fenced.Range(func(k, _ any) bool {
		if k.(shardKey).topic == topic {
			m.fenced.Delete(k)
		}
		return true
	})
}

// HandOff fences a partition of this node for a move to another node and returns its state,
// to be given to the new owner's Adopt: the frontier, the acked-ahead offsets, the attempts,
// the quarantine, the requeues and the live leases (their nonces, the time each has left
// and its attempt) and the latest fencing token. The bytes are versioned, checksummed and
// name the partition; they carry no absolute time.
//
// From the instant HandOff takes the partition's shard, every ack, extend, nack and release
// of the partition here is either in the returned state or refused: forwarded to the owner
// the routes name once they name another node, ErrMoved until then. No consume is served
// from it here any more. HandOff returns once the state is durable on this node's disk too
// (a crash of the new owner before its Adopt is durable loses nothing), and then drops the
// partition's shard. A retried HandOff returns the same state.
//
// If the state could not be made durable here (ctx ended first, or the disk fails), HandOff
// returns it all the same, with the error: the partition is fenced and the state complete, so
// adopting it elsewhere loses nothing (Adopt makes it durable there before it returns), and a
// HandOff called again waits for the durability again. A host moving partitions off a failing
// disk adopts what it got.
//
// The fence lasts until an Adopt of the partition here, DeleteTopic, or DropPartition: a
// host calls DropPartition only once its Routes no longer name the partition here. It
// outlives a restart: HandOff leaves MovedFile in the partition's directory, and a node does
// not load a partition marked so. (With Config.Store the fence is memory: a host changes its
// Routes before it restarts the old owner.) A partition this node never loaded and its Routes
// do not name here answers ErrNotLocal; one of a topic they do not know, ErrUnknownTopic.
func (n *Node) HandOff(ctx context.Context, topic string, partition int32) ([]byte, error) {
	if !n.life.fence.enter() {
		return nil, ErrClosed
	}
	defer n.life.fence.leave()
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if err := checkPartition(partition); err != nil {
		return nil, err
	}
	key := shardKey{topic, partition}
	h, err := n.fencedEntry(key)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		if err = n.fenceShard(ctx, key, h); err != nil && !h.fenced {
			return nil, err
		}
	}
	p := handoff.Partition{Topic: topic, Partition: partition, ID: h.id, Live: true, State: h.state}
	return handoff.Append(nil, &p, n.clock.Now()), err
}

// fencedEntry returns the fence of a partition, setting it if it has none: the partition's
// shard is loaded first (a fenced partition's shard is never loaded), so that a partition
// this node has not touched since it started hands off what its files say.
func (n *Node) fencedEntry(key shardKey) (*handedOff, error) {
	if v, ok := n.moves.fenced.Load(key); ok {
		return v.(*handedOff), nil
	}
	gen := n.tracker.Generation(key.topic)
	shard, ok := n.tracker.LookupIn(gen, key.partition)
	if !ok {
		local, _, known := n.routes.Partitions(key.topic)
		if !known {
			return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, key.topic)
		}
		if !slices.Contains(local, key.partition) {
			return nil, fmt.Errorf("%w: %s/%d has no state here to hand off", ErrNotLocal, key.topic, key.partition)
		}
		var err error
		if shard, err = n.shardFor(gen, key.partition); err != nil {
			return nil, err
		}
	}
	if n.ownership != nil {
		if now := n.clock.Now(); shard.Lapsed(now) && !n.renew(shard, now) {
			// Another node may serve it now: what this node holds is not the partition's state.
			return nil, errNoGrant(key.topic, key.partition)
		}
	}
	n.moves.mu.Lock()
	defer n.moves.mu.Unlock()
	if v, ok := n.moves.fenced.Load(key); ok {
		return v.(*handedOff), nil // a concurrent HandOff set it
	}
	h := &handedOff{id: handoff.NewID()}
	n.moves.fenced.Store(key, h)
	return h, nil
}

// fenceShard is HandOff's work once the partition is fenced: fence its shard, make its
// state durable and drop it. Called with h.mu held; a call after one that failed in its
// wait finds the fenced shard still there (the drop comes after the wait) and waits again.
func (n *Node) fenceShard(ctx context.Context, key shardKey, h *handedOff) error {
	topic, partition := key.topic, key.partition
	// After the fence no shard of the partition is loaded: this lookup finds the last one.
	shard, ok := n.tracker.Lookup(topic, partition)
	switch {
	case ok:
		shard.HandOff(n.clock.Now(), &h.state)
		h.fenced = true
		if err := n.committer.Durable(ctx, topic, partition); err != nil {
			return fmt.Errorf("router: hand-off of %s/%d: %w", topic, partition, err)
		}
		if err := n.markMoved(topic, partition); err != nil {
			// The fence holds in memory; only a restart before the routes change would
			// serve the partition again.
			n.logger.Error("consume: hand-off: cannot mark the partition's directory as handed off; restart this node only once its routes no longer name the partition",
				"topic", topic, "partition", partition, "err", err)
		}
		n.tracker.Drop(topic, partition)
	case !h.fenced:
		// Dropped (DropPartition) between its load and the fence: nothing was captured.
		return fmt.Errorf("%w: %s/%d was dropped during its hand-off; try again", ErrUnavailable, topic, partition)
	}
	// Else the fenced shard was dropped (DropPartition) after a failed wait: what was
	// captured stands, durable at the committer's pace.
	h.done = true
	n.wake(topic, partition) // pinned consumers look again: the partition serves nothing here
	return nil
}

// Adopt installs a partition's state that the previous owner's HandOff returned, or that
// ReadState read from a dead owner's files, and returns once it is durable here. Whatever
// this node held of the partition is replaced (its directory is cleared and written
// afresh). The live leases a hand-off carries are honoured: the receipt handles their
// consumers hold ack, extend and nack here (or through any node that forwards to here) until
// their leases end, each having the time it had left at the hand-off, by this node's clock.
// Adopt the state before the Routes name the partition here: a consume or ack that reaches
// the partition first would load what this node's own files say.
//
// Damaged bytes answer ErrDamagedState (wrapping ErrInvalidArgument), another partition's
// ErrForeignState, and a state older than the one held here of the same incarnation
// ErrStaleState; none of them changes anything. Adopting the same bytes again installs
// nothing and waits for durability again, so a host may retry an Adopt that failed (its ctx
// ended before the state was durable: it is installed, and durable at the committer's
// pace). Retry only while the routes do not name the partition here: once they do, this
// node's state is newer than the bytes (settles applied since), and a node restarted since
// has forgotten which bytes it adopted, so adopting them again would undo those settles
// wherever the frontier has not moved past the bytes' (ErrStaleState catches the rest).
//
// With Logs' TopicIncarnation, a state bound to another incarnation of the topic than the
// host names answers ErrOtherIncarnation (wrapping ErrInvalidArgument), changing nothing, and
// an unbound one is bound to the host's (see TopicIncarnation).
func (n *Node) Adopt(ctx context.Context, topic string, partition int32, state []byte) error {
	if !n.life.fence.enter() {
		return ErrClosed
	}
	defer n.life.fence.leave()
	if err := checkTopic(topic); err != nil {
		return err
	}
	p, err := handoff.Decode(state, n.clock.Now())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if p.Topic != topic || p.Partition != partition {
		return fmt.Errorf("%w: %w: the state of %s/%d, adopted as %s/%d", ErrInvalidArgument, ErrForeignState, p.Topic, p.Partition, topic, partition)
	}
	if err := n.bindAdopted(topic, partition, &p.State); err != nil {
		return err
	}
	key := shardKey{topic, partition}
	n.moves.mu.Lock()
	if n.moves.adopted[key] == p.ID {
		n.moves.mu.Unlock()
		return n.committer.Durable(ctx, topic, partition) // installed by an earlier call
	}
	err = n.install(key, &p)
	n.moves.mu.Unlock()
	if err != nil {
		return err
	}
	n.wake(topic, partition)
	return n.committer.Durable(ctx, topic, partition)
}

// bindHeldKeys binds the live leases a move brought to their keys on an ordered topic, so
// that no consumer here takes a key one of them holds, and queues its delayed records under
// theirs, so that no later record of a key goes before a record of it nacked there (the move
// carries no keys: their records are read again here). A record that cannot be read is
// logged and left as it is: its key is not kept from other consumers until it settles.
func (n *Node) bindHeldKeys(shard *inflight.Shard, topic string, partition int32, held []inflight.Held) {
	if !shard.Ordered() {
		return
	}
	var handles []inflight.Handle
	var keys, delayedKeys []uint64
	var delayed []int64
	log, err := n.getLog(topic, partition)
	for _, h := range held {
		if (h.Nonce == 0 && !h.Delayed) || err != nil {
			continue
		}
		rec, readErr := log.Read(h.Offset)
		if readErr != nil {
			n.logger.Warn("consume: adopt: cannot read a moved lease's record to learn its key; the key is not held until the lease ends",
				slog.String("topic", topic), slog.Int("partition", int(partition)), slog.Int64("offset", h.Offset), slog.Any("err", readErr))
			continue
		}
		if h.Nonce == 0 {
			delayed = append(delayed, h.Offset)
			delayedKeys = append(delayedKeys, inflight.KeyOf(rec.Key))
			continue
		}
		handles = append(handles, inflight.Handle{Partition: partition, Offset: h.Offset, Nonce: h.Nonce})
		keys = append(keys, inflight.KeyOf(rec.Key))
	}
	if err != nil && len(held) > 0 {
		n.logger.Warn("consume: adopt: cannot resolve the log to learn the keys of moved leases; their keys are not held until the leases end",
			slog.String("topic", topic), slog.Int("partition", int(partition)), slog.Any("err", err))
	}
	if len(handles)+len(delayed) == 0 {
		return
	}
	now := n.clock.Now()
	shard.ScanLock().Lock()
	defer shard.ScanLock().Unlock()
	// One Bind: the leases of a key were one holder's at the previous owner.
	shard.Bind(now, handles, keys, false, make([]bool, len(handles)))
	shard.QueueKeys(now, delayed, delayedKeys)
}

// verifyAdopted verifies the key tails an adopted state brought (inflight.State.KeyTails),
// reading their records, before the routes name this node and its moved leases can be
// settled here: a record settled before it is verified would be taken for a parked one.
func (n *Node) verifyAdopted(shard *inflight.Shard, topic string, partition int32) error {
	if err := n.verifyRestored(shard); err != nil {
		return fmt.Errorf("router: adopt %s/%d: read the records of its key tails: %w", topic, partition, err)
	}
	return nil
}

// install replaces the partition's shard with one restored from p, its directory cleared.
// Called with moves.mu held.
func (n *Node) install(key shardKey, p *handoff.Partition) error {
	topic, partition := key.topic, key.partition
	gen := n.tracker.Generation(topic)
	if err := n.checkNotStale(gen, key, &p.State); err != nil {
		return err
	}
	if err := n.takeGrant(topic, partition, &p.State, n.clock.Now()); err != nil {
		return err
	}
	dir := n.dir.Partition(topic, partition)
	reset := func() error {
		if n.hostKeepsStates() {
			return nil // the installed shard's first save replaces what the store holds
		}
		n.adoptLegacyTopicDir(topic)
		if err := n.dir.RemoveAll(dir); err != nil {
			return fmt.Errorf("router: clear %s before adopting %s/%d: %w", dir, topic, partition, err)
		}
		return n.dir.MkdirAll(dir)
	}
	shard, err := n.tracker.Install(gen, partition, p.State, reset)
	if err != nil {
		if errors.Is(err, inflight.ErrTopicDropped) {
			return fmt.Errorf("%w: %w", ErrUnknownTopic, err)
		}
		return err
	}
	n.bindHeldKeys(shard, topic, partition, p.State.Held)
	if err := n.verifyAdopted(shard, topic, partition); err != nil {
		// A moved lease settled before the key tails are verified would look parked to a
		// restart: the Adopt fails, so that the mover retries it (the retry installs the
		// state again), rather than have the routes name this node first.
		return err
	}
	n.moves.unfenceLocked(topic, partition)
	if n.moves.adopted == nil {
		n.moves.adopted = map[shardKey]uint64{}
	}
	n.moves.adopted[key] = p.ID
	if n.moves.unrouted == nil {
		n.moves.unrouted = map[shardKey]*inflight.Shard{}
	}
	n.moves.unrouted[key] = shard
	return nil
}

// checkNotStale refuses a state older than what this node holds of the same incarnation:
// its live shard's, or its durable files'.
func (n *Node) checkNotStale(gen *inflight.Generation, key shardKey, st *inflight.State) error {
	held, found := int64(0), false
	if shard, ok := n.tracker.LookupIn(gen, key.partition); ok && shard.Incarnation() == st.Incarnation {
		held, found = shard.Stats().Frontier, true
	} else if !ok {
		if files, err := n.committer.Load(key.topic, key.partition); err == nil && files.Found && files.Incarnation == st.Incarnation {
			held, found = files.Frontier, true
		}
	}
	if found && held > st.Frontier {
		return fmt.Errorf("%w: %w: frontier %d of %s/%d, this node holds %d", ErrInvalidArgument, ErrStaleState,
			st.Frontier, key.topic, key.partition, held)
	}
	return nil
}

// MovedFile marks a partition's directory as handed off from its node (HandOff), so that the
// fence outlives a restart: a node does not load a partition whose directory holds it, and
// ReadState refuses it (the state lives on elsewhere). Adopt and DropPartition remove it.
const MovedFile = "consumer.moved"

// markMoved writes MovedFile into the partition's directory, durably (the file and the
// directory's entry). With Config.Store there is no directory: the fence is memory.
func (n *Node) markMoved(topic string, partition int32) error {
	if n.hostKeepsStates() {
		return nil
	}
	root, err := n.dir.OpenRoot(n.dir.Partition(topic, partition))
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := root.OpenFile(MovedFile, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	err = f.SyncData()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Sync()
	}
	return err
}

// markedMoved reports whether the partition's directory holds MovedFile.
func (n *Node) markedMoved(topic string, partition int32) bool {
	return n.statesInDir() && n.dir.Exists(filepath.Join(n.dir.Partition(topic, partition), MovedFile))
}

// ReadState reads the durable state of a partition from the state directory of a node that
// is not running (its Config.Dir, through fsys as its Config.FS was, nil for the real file
// system: a dead owner's disk, or a copy of it) and returns it as Adopt takes it: the
// frontier, acked-ahead offsets, attempts, quarantine and requeues that recovery would take
// from the files (damaged or foreign files are ignored, so the new owner delivers again
// rather than skips), and no leases, which a node keeps in memory only. A partition with no
// trusted state reads as nothing acked. A partition the node handed off (its directory holds
// MovedFile) answers ErrMoved: its state lives on at the next owner. It never writes.
//
// A failover from this state delivers again what the dead owner had not yet made durable:
// after a process crash, with its page cache intact, about one commit tick (100 ms) of acks;
// after a power loss or the machine's loss (a copy of the disk as it was), about one commit
// interval plus a tick and its sync. The records the dead owner had leased are delivered
// again at once: their consumers' handles answer ErrGone on the new owner.
func ReadState(fsys FS, dir, topic string, partition int32) ([]byte, error) {
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if err := checkPartition(partition); err != nil {
		return nil, err
	}
	var rfs offsets.FS // nil: the real file system
	if fsys != nil {
		rfs = fsys
	}
	partDir := statedir.PartitionPath(dir, topic, partition)
	if rfs == nil {
		rfs = offsets.OS()
	}
	if root, err := rfs.OpenRoot(partDir); err == nil {
		_, statErr := root.Stat(MovedFile)
		root.Close()
		if statErr == nil {
			return nil, fmt.Errorf("%w: %s/%d was handed off from the node of %s: its state lives on at the next owner", ErrMoved, topic, partition, dir)
		}
	}
	rec, err := offsets.ReadDir(rfs, partDir, topic, partition)
	if err != nil {
		return nil, err
	}
	st := inflight.State{Frontier: -1, Incarnation: rec.Incarnation}
	if rec.Found && !rec.Unverified {
		// A legacy frontier (no checksum, no identity) cannot be checked against the log
		// here, so it is not trusted: the new owner delivers the retained records again.
		st = ackstate.ToInflight(&rec)
	}
	if st.Incarnation == 0 {
		st.Incarnation = handoff.NewID() // no consumer.id to trust: the state starts a new life
	}
	p := handoff.Partition{Topic: topic, Partition: partition, ID: handoff.NewID(), State: st}
	return handoff.Append(nil, &p, time.Time{}), nil // a state with no leases carries no times
}
