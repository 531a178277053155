package inflight

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/internal/partitionmap"
	"narad.dev/consume/internal/readmap"
)

// ErrTopicDropped is what a create or lookup through a Generation answers once its topic was
// dropped: the caller's view of the topic (the routes and logs it resolved) belongs to a
// deleted incarnation, and no shard may be created or used for it under that view.
var ErrTopicDropped = errors.New("inflight: topic dropped")

// A Generation is one life of a topic in a tracker: from its first use to its DropTopic. A
// caller takes it before it resolves anything about the topic (routes, logs), and creates or
// finds shards through it (ShardIn), so an operation that began before a delete can neither
// recreate a shard of the deleted topic nor serve the topic created again under the name with
// what it resolved for the old one.
type Generation struct {
	topic string
	ended atomic.Bool
	// shards is the topic's table in the tracker while g is live, stored with it, so that a
	// caller holding g finds a shard without looking the topic up by name (see LookupIn).
	shards atomic.Pointer[topicShards]
}

// Topic returns the topic g is a generation of.
func (g *Generation) Topic() string { return g.topic }

// Ended reports whether the topic was dropped since g was taken.
func (g *Generation) Ended() bool { return g.ended.Load() }

// TrackerConfig configures a Tracker. The zero value is usable: default settings for every
// topic, an empty state for every new shard, seeds from crypto/rand, no hooks.
type TrackerConfig struct {
	// Topic returns a topic's settings. Nil means the defaults for every topic.
	Topic func(topic string) Config
	// Load reads a partition's persisted state when its shard is created (lazily, at first
	// touch, from disk). It runs outside the tracker's lock but inside the
	// create fence, so a drop waits for it. Nil means every shard starts at frontier -1.
	// An error fails the create and stores nothing. A shard created from Load reports
	// Hooks.Dirty once it is stored, unless its State says NothingPersisted.
	Load func(topic string, partition int32) (State, error)
	// Forget is called on every drop, inside the create fence, after the shard left the
	// tracker: the committer forgets the partition there.
	Forget func(topic string, partition int32)
	// ForgetTopic is called by DropTopic inside the create fence, after every shard of the
	// topic left the tracker and was forgotten: the node removes the topic's persisted state
	// there, so no create can read or recreate it meanwhile. Its error is DropTopic's.
	ForgetTopic func(topic string) error
	// Hooks are given to every shard.
	Hooks Hooks
	// Seeds supplies the 32-byte seed of each shard's nonce stream. Nil means crypto/rand,
	// as production must. Tests pass a deterministic reader.
	Seeds io.Reader
}

// topicShards holds the shards of one topic by partition: a lookup hashes only the topic
// name, and a partition indexes a slice. Once in a tracker's tables it is never changed: a
// change sets a clone.
type topicShards = partitionmap.Map[Shard]

// A Tracker holds the shards of the partitions a node owns, keyed by topic name and
// partition, so a recreated topic maps to its successor's shard. It creates a
// shard lazily at its first touch, restoring the persisted state through TrackerConfig.Load.
// It is safe for concurrent use.
type Tracker struct {
	cfg      TrackerConfig
	counters Counters

	// fence orders creates and drops: a create holds the read side while it
	// loads state and stores the shard, a drop holds the write side around its delete and
	// its Forget. A create that read a replaced directory therefore stores its shard before
	// the drop and is dropped with it; a create that starts after the drop reads the path
	// as it is now.
	fence sync.RWMutex

	// The tables are read without a lock, since every consume and ack looks a shard up;
	// changes are made under mu. Each is a concurrent hash trie behind a cache of recent
	// reads (readmap), so a topic's first touch costs the same at 100,000 topics as at
	// 1,000: a table copied per new topic made reaching N topics cost O(N²). A topic's
	// shards are a value never changed once stored: a change stores a clone.
	mu     sync.Mutex
	shards readmap.Map[*topicShards] // a topic with none has no entry
	gens   readmap.Map[*Generation]  // the live generation of each topic in use
	held   atomic.Int64              // shards held, over all topics

	seedMu sync.Mutex // serialises reads of cfg.Seeds
}

// topicShardsOf returns the shards of topic held now, nil when there are none.
func (t *Tracker) topicShardsOf(topic string) *topicShards {
	ts, _ := t.shards.Load(topic)
	return ts
}

// generationOf returns the live generation of topic, nil when it has none.
func (t *Tracker) generationOf(topic string) *Generation {
	g, _ := t.gens.Load(topic)
	return g
}

func (t *Tracker) lookup(topic string, partition int32) *Shard {
	if ts := t.topicShardsOf(topic); ts != nil {
		return ts.Get(partition)
	}
	return nil
}

// NewTracker returns an empty tracker.
func NewTracker(cfg TrackerConfig) *Tracker {
	if cfg.Seeds == nil {
		cfg.Seeds = rand.Reader
	}
	return &Tracker{cfg: cfg}
}

// Generation returns the live generation of topic, starting one if the topic has none (first
// use, or first use since its DropTopic).
func (t *Tracker) Generation(topic string) *Generation {
	if g := t.generationOf(topic); g != nil {
		return g
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if g := t.generationOf(topic); g != nil {
		return g
	}
	g := &Generation{topic: topic}
	g.shards.Store(t.topicShardsOf(topic)) // none: DropTopic ends a generation with its shards
	t.gens.Store(topic, g)
	return g
}

// LiveGeneration returns the live generation of topic, nil when it has none; unlike
// Generation it starts none, so that a caller can look at the host's routes first and keep
// nothing for a topic that does not exist.
func (t *Tracker) LiveGeneration(topic string) *Generation { return t.generationOf(topic) }

// Counters returns the counters every shard of the tracker counts into.
func (t *Tracker) Counters() *Counters { return &t.counters }

// Lookup returns the shard of (topic, partition) if it exists. It never creates one.
func (t *Tracker) Lookup(topic string, partition int32) (*Shard, bool) {
	s := t.lookup(topic, partition)
	return s, s != nil
}

// LookupIn returns the shard of (g's topic, partition) if it exists, as Lookup does, without
// looking the topic up by name. It does not check that g is live: the caller does, after.
func (t *Tracker) LookupIn(g *Generation, partition int32) (*Shard, bool) {
	if ts := g.shards.Load(); ts != nil {
		if s := ts.Get(partition); s != nil {
			return s, true
		}
	}
	return t.Lookup(g.topic, partition) // a shard stored a moment ago, or g ended
}

// Shard returns the shard of (topic, partition), creating it from the persisted state if it
// does not exist yet. It is ShardIn with the topic's live generation.
func (t *Tracker) Shard(topic string, partition int32) (*Shard, error) {
	return t.ShardIn(t.Generation(topic), partition)
}

// ShardIn returns the shard of (g's topic, partition), creating it from the persisted state
// if it does not exist yet, or ErrTopicDropped once g's topic was dropped: inside the create
// fence, so a create racing DropTopic either stores its shard before the drop (which then
// drops it) or sees the generation ended and stores nothing.
func (t *Tracker) ShardIn(g *Generation, partition int32) (*Shard, error) {
	topic := g.topic
	if s, ok := t.LookupIn(g, partition); ok {
		if g.ended.Load() {
			return nil, ErrTopicDropped
		}
		return s, nil
	}
	t.fence.RLock()
	defer t.fence.RUnlock()
	if g.ended.Load() {
		return nil, ErrTopicDropped
	}
	if s, ok := t.Lookup(topic, partition); ok {
		return s, nil
	}
	var state State
	if t.cfg.Load != nil {
		var err error
		if state, err = t.cfg.Load(topic, partition); err != nil {
			return nil, fmt.Errorf("inflight: load state of %s/%d: %w", topic, partition, err)
		}
	} else {
		state.Frontier = -1
	}
	fresh, err := t.newShard(topic, partition, state)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if s := t.lookup(topic, partition); s != nil {
		t.mu.Unlock()
		return s, nil // a concurrent create won; both read the same files under the fence
	}
	t.setShard(topic, partition, fresh)
	t.mu.Unlock()
	if t.cfg.Load != nil && !state.NothingPersisted {
		// What Load read may exist only in the page cache of a process that crashed: report
		// the new shard dirty so the committer primes the partition and makes it durable
		// before a later power loss could take back what this incarnation started from.
		t.reportDirty(topic, partition)
	}
	return fresh, nil
}

// Install replaces the shard of (topic, partition) with one restored from state, as the
// adoption of a partition from its previous owner does, all inside the create fence: the
// shard held now, if any, is dropped and forgotten as Drop does it, reset runs (the node
// clears the partition's directory there), and the new shard is stored and reported dirty,
// so that no create reads the partition's files between the reset and the install. It
// answers ErrTopicDropped once g's topic was dropped, and reset's error; either way it
// stores nothing (a shard held before is dropped all the same once reset ran).
func (t *Tracker) Install(g *Generation, partition int32, state State, reset func() error) (*Shard, error) {
	topic := g.topic
	t.fence.Lock()
	defer t.fence.Unlock()
	if g.ended.Load() {
		return nil, ErrTopicDropped
	}
	t.dropLocked(topic, partition)
	if reset != nil {
		if err := reset(); err != nil {
			return nil, err
		}
	}
	fresh, err := t.newShard(topic, partition, state)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.setShard(topic, partition, fresh)
	t.mu.Unlock()
	t.reportDirty(topic, partition)
	return fresh, nil
}

// newShard returns a shard of (topic, partition) restored from state, with the topic's
// settings, the tracker's hooks and counters, and a seed of its own.
func (t *Tracker) newShard(topic string, partition int32, state State) (*Shard, error) {
	opts := Options{Hooks: t.cfg.Hooks, Counters: &t.counters}
	if t.cfg.Topic != nil {
		opts.Config = t.cfg.Topic(topic)
	}
	if err := t.readSeed(&opts.Seed); err != nil {
		return nil, err
	}
	return NewShard(topic, partition, opts, state), nil
}

func (t *Tracker) reportDirty(topic string, partition int32) {
	if t.cfg.Hooks.Dirty != nil {
		t.cfg.Hooks.Dirty(topic, partition)
	}
}

// setShard publishes a clone of topic's shards with partition's set to s (nil: removed), in
// the table and in the topic's live generation. Called with t.mu held.
func (t *Tracker) setShard(topic string, partition int32, s *Shard) {
	old := t.topicShardsOf(topic)
	ts := old.Clone()
	ts.Set(partition, s)
	t.held.Add(int64(ts.Len() - old.Len()))
	if ts.Len() == 0 {
		t.shards.Remove(topic)
	} else {
		t.shards.Store(topic, ts)
	}
	if g := t.generationOf(topic); g != nil {
		g.shards.Store(ts)
	}
}

func (t *Tracker) readSeed(seed *[32]byte) error {
	t.seedMu.Lock()
	defer t.seedMu.Unlock()
	if _, err := io.ReadFull(t.cfg.Seeds, seed[:]); err != nil {
		return fmt.Errorf("inflight: read nonce seed: %w", err)
	}
	return nil
}

// Drop removes the shard of (topic, partition), as a move (before and after its install),
// a reclaim or a retired incarnation does, and tells TrackerConfig.Forget. It waits for a
// create that is already reading. A caller still holding the dropped shard can settle
// nothing on it: its handles get ErrGone.
func (t *Tracker) Drop(topic string, partition int32) {
	t.fence.Lock()
	defer t.fence.Unlock()
	t.dropLocked(topic, partition)
}

// Depose is Drop of shard, the partition's shard now, for a partition taken from this node
// while the shard was live (the routes name another owner, or its ownership grant lapsed): a
// caller still holding the shard gets ErrMoved for every settle, as after a hand-off, so the
// settle goes to the partition's owner rather than answering ErrGone for a lease that may live
// on there. It reports whether it deposed shard: a partition whose shard is another by now
// (installed since) is left alone.
func (t *Tracker) Depose(shard *Shard) bool {
	t.fence.Lock()
	defer t.fence.Unlock()
	t.mu.Lock()
	current := t.lookup(shard.topic, shard.partition)
	if current != shard {
		t.mu.Unlock()
		return false
	}
	t.setShard(shard.topic, shard.partition, nil)
	t.mu.Unlock()
	shard.drop(true)
	t.forget(shard.topic, shard.partition)
	return true
}

// dropLocked is Drop inside the create fence.
func (t *Tracker) dropLocked(topic string, partition int32) {
	t.mu.Lock()
	s := t.lookup(topic, partition)
	if s != nil {
		t.setShard(topic, partition, nil)
	}
	t.mu.Unlock()
	if s != nil {
		s.drop(false)
	}
	t.forget(topic, partition)
}

// DropTopic drops every shard of topic (a deleted topic), as Drop does for each, ends the
// topic's generation (creates through it answer ErrTopicDropped from now on) and calls
// TrackerConfig.ForgetTopic, all inside the create fence. It returns ForgetTopic's error.
func (t *Tracker) DropTopic(topic string) error {
	t.fence.Lock()
	defer t.fence.Unlock()
	var dropped []*Shard
	t.mu.Lock()
	if g := t.generationOf(topic); g != nil {
		g.ended.Store(true)
		g.shards.Store(nil)
		t.gens.Remove(topic)
	}
	if ts := t.topicShardsOf(topic); ts != nil {
		dropped = ts.AppendTo(nil)
		t.held.Add(-int64(ts.Len()))
		t.shards.Remove(topic)
	}
	t.mu.Unlock()
	for _, s := range dropped {
		s.drop(false)
		t.forget(topic, s.partition)
	}
	if t.cfg.ForgetTopic != nil {
		return t.cfg.ForgetTopic(topic)
	}
	return nil
}

func (t *Tracker) forget(topic string, partition int32) {
	if t.cfg.Forget != nil {
		t.cfg.Forget(topic, partition)
	}
}

// Purge purges every shard (the node's background purger) and returns how
// many offsets became visible again, and the earliest deadline left among all shards (zero
// when there is none), so the purger can sleep until then rather than a whole cadence.
// Each shard reports its own wake.
func (t *Tracker) Purge(now time.Time) (released int, next time.Time) {
	shards := make([]*Shard, 0, t.held.Load())
	t.shards.Range(func(_ string, ts *topicShards) bool {
		shards = ts.AppendTo(shards)
		return true
	})
	for _, s := range shards {
		if s.Lapsed(now) {
			if t.cfg.Hooks.Lapsed != nil {
				t.cfg.Hooks.Lapsed(s.topic, s.partition)
			}
			if s.Lapsed(now) {
				continue // frozen: deposed, or lapsed still
			}
		}
		released += s.Purge(now)
		if at, ok := s.NextDeadline(); ok && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return released, next
}

// Held returns the shards of topic held now.
func (t *Tracker) Held(topic string) []*Shard {
	if ts := t.topicShardsOf(topic); ts != nil {
		return ts.AppendTo(nil)
	}
	return nil
}

// Reconfigure applies TrackerConfig.Topic's current settings to every shard of topic held
// now (a host changed a topic's caps or timeouts). Live leases keep their expiry.
func (t *Tracker) Reconfigure(topic string) {
	if t.cfg.Topic == nil {
		return
	}
	cfg := t.cfg.Topic(topic)
	if ts := t.topicShardsOf(topic); ts != nil {
		for _, s := range ts.AppendTo(nil) {
			s.SetConfig(cfg)
		}
	}
}

// Len returns how many shards the tracker holds.
func (t *Tracker) Len() int { return int(t.held.Load()) }
