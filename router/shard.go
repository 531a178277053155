package router

import (
	"errors"
	"fmt"
	"slices"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/ackstate"
)

// Finding and loading a partition's shard: localShard for a call that names a partition this
// node serves, shardFor through a generation of the topic the caller holds (a set-aside
// partition waits for its retry: see setaside.go), and the tracker's Load, loadPartition,
// which reads the partition's persisted state (loadState).

// localShard returns the shard of a partition this node owns, loading it if needed.
func (n *Node) localShard(topic string, partition int32) (*inflight.Shard, error) {
	shard, _, err := n.shardOrRoutes(topic, partition)
	return shard, err
}

// shardOrRoutes is localShard that also returns, for a partition another node owns
// (ErrNotLocal), what it read of the routes on the way, so that a settle forwarded to the
// owner (ownerAfter) reads them, and looks the topic's state up, no second time.
func (n *Node) shardOrRoutes(topic string, partition int32) (*inflight.Shard, remoteRoutes, error) {
	if err := checkTopic(topic); err != nil {
		return nil, remoteRoutes{}, err
	}
	if n.life.closed.Load() {
		return nil, remoteRoutes{}, ErrClosed
	}
	if shard, ok := n.tracker.Lookup(topic, partition); ok {
		return shard, remoteRoutes{}, nil
	}
	// A partition another node owns needs no generation: the routes alone say so.
	routes := n.readRoutes(topic)
	if err := routes.places(partition); err != nil {
		return nil, routes.remoteOnes(), err
	}
	// Here, and not loaded yet: the generation, then the routes again, in that order (a
	// delete from here on ends the generation, so the shard is never loaded under the routes
	// of an earlier life of the topic).
	gen := n.liveGeneration(topic)
	if gen == nil {
		return nil, remoteRoutes{}, ErrUnknownTopic
	}
	routes = n.readRoutes(topic)
	if err := routes.places(partition); err != nil {
		return nil, routes.remoteOnes(), err
	}
	shard, err := n.shardFor(gen, partition)
	return shard, remoteRoutes{}, err
}

// remoteRoutes is what a settle forwarded to another node needs of an answer of the routes
// read already, small enough to pass in registers: its remote partitions (nil: none read),
// and the topic's state if reading them looked it up.
type remoteRoutes struct {
	remote map[string][]int32
	state  *topicState
}

func (r *routesRead) remoteOnes() remoteRoutes { return remoteRoutes{remote: r.remote, state: r.state} }

// places is nil when the routes name partition this node's, else why not: the verdict's
// error for a partition they name wrongly, ErrUnknownTopic, or ErrNotLocal (another node's,
// or nobody's).
func (r *routesRead) places(partition int32) error {
	if err := r.verdict.refuses(partition); err != nil {
		return err // named wrongly: neither here nor forwarded
	}
	switch {
	case !r.ok:
		return ErrUnknownTopic
	case !slices.Contains(r.local, partition):
		return ErrNotLocal
	}
	return nil
}

// shardFor returns the shard of a partition this node owns, loading it if needed; a
// partition set aside answers a *SetAsideError until its retry time, and the first caller
// after it retries the load.
//
// It goes through the caller's generation of the topic, taken before it resolved the topic's
// routes: a topic deleted since answers ErrUnknownTopic, and nothing is created for it.
func (n *Node) shardFor(gen *inflight.Generation, partition int32) (*inflight.Shard, error) {
	topic := gen.Topic()
	if shard, ok := n.tracker.LookupIn(gen, partition); ok {
		if gen.Ended() {
			return nil, fmt.Errorf("%w: %w", ErrUnknownTopic, ErrTopicDropped)
		}
		return shard, nil
	}
	key := shardKey{topic, partition}
	retry := false
	if n.setAside.count.Load() > 0 {
		var err error
		if retry, err = n.setAside.admit(key, n.clock.Now()); err != nil {
			return nil, err
		}
	}
	shard, err := n.tracker.ShardIn(gen, partition)
	var stateErr *errStateLoad
	switch {
	case errors.Is(err, inflight.ErrTopicDropped):
		if retry {
			n.setAside.unclaim(key)
		}
		return nil, fmt.Errorf("%w: %w", ErrUnknownTopic, ErrTopicDropped)
	case err == nil:
		if retry {
			n.setAside.rejoin(key)
			n.logger.Info("consume: partition state loads again; the partition rejoins its topic",
				"topic", topic, "partition", partition)
		}
		return shard, nil
	case errors.As(err, &stateErr):
		return nil, n.setAside.fail(n, key, err, n.clock.Now())
	}
	if retry {
		n.setAside.unclaim(key)
	}
	return nil, err
}

// skippedByScans reports whether err, from loading a partition's shard, leaves the
// partition out of an unpinned scan rather than failing it: the partition is set aside, or
// was handed off from this node while the routes still name it here.
func skippedByScans(err error) bool {
	var setAside *SetAsideError
	return errors.As(err, &setAside) || errors.Is(err, ErrMoved)
}

// loadPartition is the tracker's Load: the partition's log is resolved and its watermarks
// read and checked first, so a failure of loadState past that is a failure of the
// partition's state (its directory, its files). A log whose watermarks break its contract
// fails the load as the host's fault (ErrHostContract), not the state's: nothing is set
// aside, and nothing is loaded on the strength of them.
func (n *Node) loadPartition(topic string, partition int32) (inflight.State, error) {
	if n.moves.isFenced(topic, partition) || n.markedMoved(topic, partition) {
		// Handed off: its files hold the state as of the hand-off, which the next owner
		// serves now. Checked inside the create fence, so no load that began before the
		// hand-off's drop stores a shard after it.
		return inflight.State{}, fmt.Errorf("%w: %s/%d was handed off from this node", ErrMoved, topic, partition)
	}
	// Asked before the log is resolved: a topic created again in between binds the state
	// to the earlier life (a redelivery at the next load), never the log's offsets of the
	// earlier life to the new one (a skip).
	host := n.hostIncarnation(topic)
	if n.ownership != nil {
		// Not granted here: no log or store is read for it (takeGrant below decides, once
		// the state's epoch is known).
		if _, ok := n.grant(topic, partition); !ok {
			return inflight.State{}, errNoGrant(topic, partition)
		}
	}
	log, err := n.getLog(topic, partition)
	if err != nil {
		return inflight.State{}, err
	}
	oldest, hwm := log.Oldest(), log.HighWatermark() // in this order: see checkWatermarks
	if err := n.checkWatermarks(topic, partition, oldest, hwm); err != nil {
		return inflight.State{}, err
	}
	st, err := n.loadState(topic, partition, oldest, hwm, host)
	if errors.Is(err, ErrHostContract) {
		return st, err // the host's fault, not the state's: not set aside
	}
	if err != nil {
		return st, &errStateLoad{err}
	}
	// Last: the grant's time counts from the load's end, and a partition not granted here
	// is neither set aside nor served.
	if err := n.takeGrant(topic, partition, &st, n.clock.Now()); err != nil {
		return inflight.State{}, err
	}
	return st, nil
}

// errStateLoad marks a failure to load a partition's state, as opposed to resolving its log.
type errStateLoad struct{ err error }

func (e *errStateLoad) Error() string { return e.err.Error() }

func (e *errStateLoad) Unwrap() error { return e.err }

// loadState reads the persisted state of a partition whose log is resolved, at its shard's
// first touch; oldest and hwm are its log's Oldest and HighWatermark, read and checked just
// before, and host the host's incarnation of the topic, asked before them (0: none; see
// TopicIncarnation). A partition with no state it can trust starts just below its oldest
// retained offset. A
// recovered frontier at or past the high watermark is clamped below it (a log that lost its
// tail), or, from an unverifiable legacy file, dropped for damage (see offsets.ClampToWatermark).
// The shard keeps the state's incarnation and its binding to the host's, so what it persists
// names the state it came from and the life of the topic it was loaded under.
func (n *Node) loadState(topic string, partition int32, oldest, hwm int64, host uint64) (inflight.State, error) {
	if n.statesInDir() {
		n.adoptLegacyTopicDir(topic)
		if err := n.dir.MkdirAll(n.dir.Partition(topic, partition)); err != nil {
			return inflight.State{}, err
		}
	}
	persisted, err := n.committer.LoadBound(topic, partition, host)
	if err != nil {
		return inflight.State{}, err
	}
	if err := n.checkLoadedIncarnation(topic, partition, host, persisted.HostIncarnation); err != nil {
		return inflight.State{}, err
	}
	persisted = n.committer.ClampToWatermark(topic, partition, persisted, hwm)
	if !persisted.Found {
		return inflight.State{Frontier: oldest - 1, Incarnation: persisted.Incarnation,
			HostIncarnation: persisted.HostIncarnation, NothingPersisted: true}, nil
	}
	return ackstate.ToInflight(&persisted), nil
}
