package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/acklane"
	"narad.dev/consume/internal/ackstate"
	"narad.dev/consume/internal/cancelmemory"
	"narad.dev/consume/internal/readmap"
	"narad.dev/consume/internal/realclock"
	"narad.dev/consume/internal/statedir"
	"narad.dev/consume/internal/storecommit"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/internal/workers"
	"narad.dev/consume/offsets"
	"narad.dev/consume/pump"
	"narad.dev/consume/tokens"
)

// Errors of the node's API. Test them with errors.Is. Ack, Extend and Nack also answer
// ErrGone, ErrAlreadySettled and ErrMalformedHandle about the handle they were given.
var (
	ErrClosed       = errors.New("router: node closed")
	ErrUnknownTopic = errors.New("router: unknown topic")
	// ErrNotLocal: the partition is not owned by this node.
	ErrNotLocal = errors.New("router: partition not owned by this node")
	// ErrInvalidArgument: a request this node refuses as malformed (a 400).
	ErrInvalidArgument = errors.New("router: invalid argument")
)

// purgeResolution is the finest the purger resolves a deadline: a lease expiry or the end
// of a nack delay on a partition nobody touches is acted on within this much of it.
const purgeResolution = 10 * time.Millisecond

// TopicConfig is a topic's consume settings, enforced per partition; the zero value of each
// field means its default. Its fields (each documented at inflight.Config):
//
//   - VisibilityTimeout: how long a lease lasts unless extended (30 s);
//   - MaxInFlight: the most live leases a partition holds (1,024);
//   - MaxAckedAheadRuns: the runs of acked offsets a partition parks above its oldest
//     unsettled one before it hands out only that one (1,000);
//   - MaxAckedAhead: the same cap counted in offsets (2^20);
//   - MaxDeliveries: the deliveries after which an unsettled record is quarantined
//     (unlimited);
//   - Backoff: the delay before a record whose lease lapsed is delivered again (none);
//   - MaxExtension, MaxLeaseLifetime: caps on one Extend and on a lease's whole life (none).
type TopicConfig = inflight.Config

// Config is what a host supplies to build a node. Logs, Routes and Dir are required; every
// other field has a useful zero value.
type Config struct {
	Logs   Logs
	Routes Routes
	// Dir is the root of the consumer state: each partition keeps consumer.id,
	// consumer.ahead and consumer.offset in Dir/<topic, path-escaped>/<partition> (see
	// PartitionDir). It need not exist: New creates it and locks it for the node's life,
	// and the node makes each partition's directory when it first loads the partition.
	Dir string
	// FS is the file system the state is written through (see FS for its contract). Nil
	// means the real one.
	FS FS
	// Clock is the node's time. Nil means the system clock: the wall clock read once, when
	// the node starts, and moved on from there by the monotonic clock, so that a step of
	// the system's wall clock neither cuts short nor stretches a lease or a wait.
	Clock Clock
	// Logger receives the node's logs. Nil discards them.
	Logger *slog.Logger
	// Topic returns a topic's settings. Nil means the defaults for every topic.
	Topic func(topic string) TopicConfig
	// CommitInterval is the durability interval D of the ack state: zero means
	// DefaultCommitInterval (1 s), anything else must lie within MinCommitInterval (10 ms) and
	// MaxCommitInterval (60 s). A power loss redelivers up to about D + 100 ms of acks.
	CommitInterval time.Duration
	// Store keeps the ack state in the host's own storage instead of files under Dir (see
	// StateStore); nil means files. Dir is still locked, one node per directory.
	Store StateStore
	// Seeds supplies the seeds of the nonce streams. Nil means crypto/rand, as production
	// must; tests may pass a deterministic reader.
	Seeds io.Reader
	// Transport carries acks, extends and nacks for partitions other nodes own to their
	// owners (Routes names them); the receiving host hands each frame to that node's Serve.
	// Nil: such a handle answers ErrNotLocal.
	Transport Transport
	// AckWindow is how many forwarded-ack RPCs to one owner may be in flight before acks
	// queue and leave in batches; zero means max(128, 8 × GOMAXPROCS). It must not be
	// negative. AckAsync's acks share RPCs below it too (see Node.AckAsync).
	AckWindow int
	// WireVersion is the newest node-wire version this node speaks and accepts; zero means
	// the newest (16). A host upgrading a cluster in place pins new nodes to the version of
	// the oldest until all run the new release (as a broker's inter-node protocol version is
	// pinned), and tests use it to play older releases. Version 1 is single acks, extends and
	// nacks; 2 adds AckBatch (the releases before this field speak 2); 3 to 6 add the frames
	// of cross-node consumption, 7 the settles that carry no clock, 8 ConsumeBatch, 9 the
	// records' headers in deliveries (a node at 8 or below, on either side, delivers another
	// node's records without their headers), 10 Reject, 11 reading ahead (Confirm and the
	// consume's Reserve flag: a node at 10 or below reads nothing ahead), 12 a topic's status
	// and purge across its owners (QueueStatus, PurgeQueue), 13 AckBatches of up to 1,024
	// records (a consume's whole batch acked in one frame), 14 NackNow (an owner at 13 or
	// below gets a nack of no delay, which waits the topic's Backoff there), 15 the spilled
	// keys and records of an ordered topic in a status across owners (an owner at 14 or
	// below reports them as zero), 16 plain acks in a compact form answered by a count, acks
	// riding with reservations and the compact consume reply (a node at 15 or below sends
	// and gets the forms before them). See
	// docs/protocol.md, "Forwarded acks and the node wire".
	// A node refuses a frame newer than its version as an older release does, and at
	// version 1 sends no AckBatch.
	WireVersion uint8
	// OnQuarantine is told of each record set aside after reaching its topic's
	// MaxDeliveries, or rejected (Node.Reject, here or forwarded here), to copy it to a
	// dead-letter topic, say; it runs on the goroutine that ended the record's last lease,
	// with no lock held, or, for a record that follows its key into the quarantine
	// (TopicConfig.QuarantineKeys) as a scan reads it, on the consuming goroutine, with the
	// partition's scan lock held (it must not consume from that partition). Nil: the
	// quarantine is only logged.
	OnQuarantine func(topic string, partition int32, offset int64, attempts uint32)
	// NotBefore, if set, says when a record may be delivered: a record read for a consume
	// before that time is postponed until then (inflight.Shard.Postpone: not delivered, no
	// attempt spent, invisible and outside the in-flight cap until it is due, not read again
	// before), as SQS's DelaySeconds delays a message or a scheduler holds a job back. The
	// host decides from the record (its Timestamp plus a topic's delay, a header it wrote)
	// on its own clock's terms; nothing of it crosses the node wire. A zero time, or one not
	// after the node's now, delivers the record; one more than MaxDelay ahead is postponed by
	// MaxDelay and asked about again then. It is called on the consuming goroutine, with no
	// lock held, for each record read for delivery (not for Replay), so it must be fast. A
	// restart forgets postponements: the records are read and asked about again. On an ordered
	// topic a postponed record holds its key's later records back until it is delivered.
	NotBefore func(topic string, rec Record) time.Time
	// HoldTimeout is how long this node, as an owner, holds a record back for the claim of
	// a node it told about it; a claim that never comes lapses then, and the record goes
	// to the next node waiting. Zero means tokens.DefaultHold (1 s).
	HoldTimeout time.Duration
	// Ownership is the host's grant of partitions in time (see Ownership): with it, the node
	// serves a partition only while the host's grant of it is valid on the node's own clock,
	// and the ownership epoch travels with the partition's state. Nil: the Routes alone say
	// what this node owns (RoutesChanged still deposes what they no longer name).
	Ownership Ownership
	// NoCallbacks says owners cannot call this node (it has no address they can reach): its
	// consumers poll the owners on a backoff (100 ms doubling to 1 s) instead of leaving
	// tokens with them.
	NoCallbacks bool
}

// The bounds of Config.CommitInterval.
const (
	DefaultCommitInterval = offsets.DefaultInterval // a zero CommitInterval
	MinCommitInterval     = offsets.MinInterval
	MaxCommitInterval     = offsets.MaxInterval
)

// validate checks the settings before anything is built, naming the Config field at fault.
// Every fault is reported, each wrapping ErrInvalidArgument.
func (cfg *Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...))
	}
	if cfg.Logs == nil {
		bad("Config.Logs is required")
	}
	if cfg.Routes == nil {
		bad("Config.Routes is required")
	}
	if cfg.Dir == "" {
		bad("Config.Dir is required")
	}
	if d := cfg.CommitInterval; d != 0 && (d < MinCommitInterval || d > MaxCommitInterval) {
		bad("Config.CommitInterval is %v; it must be zero (%v) or lie within %v and %v",
			d, DefaultCommitInterval, MinCommitInterval, MaxCommitInterval)
	}
	if cfg.HoldTimeout < 0 || cfg.HoldTimeout > time.Minute {
		bad("Config.HoldTimeout is %v; it must be zero (%v) or positive, at most a minute", cfg.HoldTimeout, tokens.DefaultHold)
	}
	if cfg.AckWindow < 0 {
		bad("Config.AckWindow is %d; it must be zero (the default) or positive", cfg.AckWindow)
	}
	if cfg.WireVersion > uint8(wire.Newest) {
		bad("Config.WireVersion is %d; it must be zero (the newest) or lie within 1 and %d", cfg.WireVersion, wire.Newest)
	}
	return errors.Join(errs...)
}

// A Node is one member of a deployment: it serves consumes, acks, extends and nacks on the
// partitions it owns, parks long-polls at no cost while idle, and persists ack state. It owns
// every goroutine it starts (the pump, the purger, the committer, the keeper of the tokens it
// leaves with other nodes, and the pool that carries its RPCs to them) and stops them all in
// Close. It is safe for concurrent use.
type Node struct {
	logs      Logs
	routes    Routes
	clock     Clock
	logger    *slog.Logger
	dir       *statedir.Dir // Config.Dir, open and locked
	tracker   *inflight.Tracker
	committer ackStore
	store     *storecommit.Committer // Config.Store's committer; nil with the file committer
	pump      *pump.Pump[reservation]

	topics readmap.Map[*topicState] // read on every consume; changed at a topic's first use and delete
	// topicConfig is Config.Topic: the topics' settings (nil: the defaults), read by the
	// read-ahead here; the shards get theirs through the tracker.
	topicConfig func(topic string) TopicConfig
	notBefore   func(topic string, rec Record) time.Time // Config.NotBefore

	stats    nodeStats
	setAside setAsideTable // partitions whose state could not be loaded
	moves    moves         // partitions handed off from here, hand-offs adopted here
	faults   hostFaults    // what the host's seams answered wrong, and their panics

	transport Transport
	// promptTransport: transport is a ContextTransport, called from the waiting goroutine.
	promptTransport bool
	ownerFinder     OwnerFinder           // the routes', if they offer it
	ownership       Ownership             // Config.Ownership
	fencedEpochs    sync.Map              // shardKey → the epoch whose save the store refused (see fenced)
	incarnations    TopicIncarnation      // the logs', if they offer it
	lanes           *acklane.Lanes[*peer] // forwarding state per owner
	forwarding      *workers.Pool         // RPCs in flight in the background (see background)

	// Consumption across nodes: the tokens other nodes left here (topic → *ownerTopic),
	// this node's tokens left with owners, and the replies whose cancel may race them.
	ownerTopics sync.Map
	requester   requester
	cancels     *cancelmemory.Memory
	holdTimeout time.Duration
	noCallbacks bool

	// wireVersion is what Serve decodes at, and bounds the frames this node sends.
	wireVersion wire.Version

	purge purgeWake // when the purger wakes, and its kick
	// wakes counts the wakes of topics whose local partitions a consume found drained
	// (see drained.go).
	wakes *wakeEpochs

	life lifecycle // what Close and Shutdown end, and the calls they wait for
}

// lifecycle is what ends a node: Close and Shutdown set closed, take closing's outcome,
// wait for the calls the fence counts, then cancel the goroutines and wait for them.
type lifecycle struct {
	closed  atomic.Bool
	closing struct {
		sync.Mutex
		done      chan struct{} // made by the first Close or Shutdown, closed when the close ends
		err       error         // the close's outcome, set before done closes
		unclaimed bool          // a Shutdown gave up on the close: the next call takes the outcome
	}
	fence  callFence // API calls in progress, for Close to wait for
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// topicState is the node's per-topic memory besides the shards and the pump's queues.
type topicState struct {
	scanStart  atomic.Uint32 // rotates the partition a scan starts at
	probeStart atomic.Uint32 // rotates the owner a probe asks first
	// ahead is what this node reads ahead of its consumers (made at the first consume that
	// crosses nodes), and aheadSettings what the topic's settings make of it (nil: not
	// read since the topic's first use or the last ReloadTopic).
	ahead         atomic.Pointer[readAhead]
	aheadSettings atomic.Pointer[aheadSettings]

	// routes is the verdict on the topic's last answer of Routes.Partitions that needed
	// judging (see judgeRoutes); never nil: at first, on an answer of no partitions.
	routes atomic.Pointer[routesVerdict]

	mu             sync.Mutex
	jumpLogged     map[int32]logLimit // rate limit of the retention-jump log line (made on first use)
	skipLogged     map[int32]logLimit // rate limit of the corrupt-skip log line (made on first use)
	stallLogged    map[int32]logLimit // rate limit of the acked-ahead stall log line (made on first use)
	contractLogged map[int32]logLimit // rate limit of the host-contract log line (made on first use)
}

func (t *topicState) nextStart(n int) int { return int(t.scanStart.Add(1)-1) % n }

func (t *topicState) nextProbe(n int) int { return int(t.probeStart.Add(1)-1) % n }

type nodeStats struct {
	consumes, emptyConsumes, delivered, replayed atomic.Uint64
	deposed                                      atomic.Uint64 // partitions taken from this node while live
	remote                                       remoteStats
	ahead                                        aheadStats
	// The latency histograms (see Stats).
	consumeWait, remoteDelivery, forwardedAckRPC histogram
}

// New builds a node and starts its goroutines. Settings out of range are refused first, before
// anything is created, with errors wrapping ErrInvalidArgument that name the Config field. New
// creates Dir if needed and locks it (see
// LockName and DirLocker): a Dir that cannot be created or locked fails New, and a Dir another
// live node holds fails it with ErrDirLocked.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{
		logs:   cfg.Logs,
		routes: cfg.Routes,
		clock:  cfg.Clock,
		logger: cfg.Logger,

		topicConfig: cfg.Topic,
		notBefore:   cfg.NotBefore,

		purge:     purgeWake{kick: make(chan struct{}, 1)},
		wakes:     newWakeEpochs(),
		life:      lifecycle{fence: newCallFence()},
		transport: cfg.Transport,

		requester:   requester{topics: map[string]*remoteTopic{}, kick: make(chan struct{}, 1)},
		cancels:     cancelmemory.New(cancelMemoryTTL),
		holdTimeout: cmp.Or(cfg.HoldTimeout, tokens.DefaultHold),
		noCallbacks: cfg.NoCallbacks,
	}
	_, n.promptTransport = cfg.Transport.(ContextTransport)
	n.ownerFinder, _ = cfg.Routes.(OwnerFinder)
	n.ownership = cfg.Ownership
	n.incarnations, _ = cfg.Logs.(TopicIncarnation)
	n.wireVersion = wire.Version(cfg.WireVersion)
	if n.wireVersion == 0 {
		n.wireVersion = wire.Newest
	}
	n.purge.at.Store(math.MaxInt64)
	ackWindow := cmp.Or(cfg.AckWindow, defaultAckWindow())
	n.forwarding = workers.New(min(ackWindow, maxIdleWorkers))
	if n.clock == nil {
		n.clock = realclock.New()
	}
	n.lanes = n.newLanes(ackWindow)
	if n.logger == nil {
		n.logger = slog.New(slog.DiscardHandler)
	}
	dir, err := statedir.Open(cfg.FS, cfg.Dir)
	if err != nil {
		return nil, err
	}
	n.dir = dir
	if cfg.Store != nil {
		store := storecommit.Store{Load: cfg.Store.Load, Save: cfg.Store.Save, Delete: cfg.Store.Delete}
		n.store = storecommit.New(storecommit.Config{Store: store, Source: &committerSource{n: n},
			Interval: cfg.CommitInterval, Logger: n.logger, Fenced: n.fenced})
		n.committer = n.store
	} else {
		committer, err := offsets.New(offsets.Config{
			FS:       cfg.FS, // nil stays nil: the committer's real file system
			Dir:      n.dir.Partition,
			Interval: cfg.CommitInterval,
			Source:   &committerSource{n: n},
			Logger:   n.logger,
		})
		if err != nil {
			n.dir.Close()
			return nil, err
		}
		n.committer = committer
	}
	n.pump = pump.New[reservation](pumpSource{n: n})
	n.tracker = inflight.NewTracker(inflight.TrackerConfig{
		Topic: cfg.Topic,
		Load:  n.loadPartition,
		Forget: func(topic string, partition int32) {
			n.committer.Forget(topic, partition)
			n.setAside.forget(topic, partition)
		},
		// A deleted topic's state goes inside the tracker's create fence, so no create
		// that began before the delete can read it or make its directory again.
		ForgetTopic: n.removeTopicDir,
		Seeds:       cfg.Seeds,
		Hooks: inflight.Hooks{
			Wake:            n.wake,
			Dirty:           n.committer.MarkDirty,
			Deadline:        n.deadlineSet,
			AckedAheadStall: n.logAckedAheadStall,
			Lapsed:          n.deposeLapsed,
			Quarantine: func(topic string, partition int32, offset int64, attempts uint32) {
				n.logger.Warn("consume: record quarantined (rejected, or after too many deliveries); Requeue brings it back",
					"topic", topic, "partition", partition, "offset", offset, "attempts", attempts)
				if cfg.OnQuarantine != nil {
					n.tellQuarantine(cfg.OnQuarantine, topic, partition, offset, attempts)
				}
			},
		},
	})

	ctx, cancel := context.WithCancel(context.Background())
	n.life.cancel = cancel
	n.goroutine(func() { n.pump.Run(ctx) })
	n.goroutine(func() { n.committer.Run(ctx, n.clock) })
	n.goroutine(func() { n.runPurger(ctx) })
	n.goroutine(func() { n.runKeeper(ctx) })
	return n, nil
}

// logAckedAheadStall logs a stall episode of a partition at its acked-ahead cap, at most once
// a minute per partition; the line says how many episodes of the partition were not logged
// since the previous one (Stats().Shards.AckedAheadStalls counts every one).
func (n *Node) logAckedAheadStall(topic string, partition int32, stall inflight.AckedAheadStall) {
	t := n.topic(topic)
	if due, suppressed := t.due(&t.stallLogged, partition, n.clock.Now()); due {
		n.logger.Warn("consume: partition at its acked-ahead cap; only the frontier hole is handed out until it is settled",
			slog.String("topic", topic), slog.Int("partition", int(partition)), slog.Int64("hole", stall.Hole),
			slog.Int("runs", stall.Runs), slog.Int64("offsets", stall.Offsets), slog.Int("suppressed", suppressed))
	}
}

// tellQuarantine calls the host's OnQuarantine with a panic of it recovered (see
// recoverHostPanic): it runs on whichever goroutine ended the record's last lease, the
// purger's included, and the record is quarantined whatever it does.
func (n *Node) tellQuarantine(onQuarantine func(string, int32, int64, uint32), topic string, partition int32, offset int64, attempts uint32) {
	defer n.recoverHostPanic("Config.OnQuarantine", topic, nil)
	onQuarantine(topic, partition, offset, attempts)
}

func (n *Node) goroutine(f func()) {
	n.life.done.Add(1)
	go func() {
		defer n.life.done.Done()
		f()
	}()
}

// notifyOne signals on ch (capacity 1) without blocking: a signal already pending there
// stands for this one.
func notifyOne(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// background runs f, an RPC bounded by its budget, in a goroutine that Close waits for (a
// parked worker's, see internal/workers).
func (n *Node) background(f func()) { n.forwarding.Run(f) }

// maxIdleWorkers caps the workers kept parked for background RPCs: a lane keeps at most its
// window of them in flight.
const maxIdleWorkers = 1024

// topic returns the node's state of a topic, creating it.
func (n *Node) topic(name string) *topicState {
	return n.topics.LoadOrAdd(name, newTopicState)
}

func newTopicState() *topicState {
	t := &topicState{}
	t.routes.Store(&routesVerdict{})
	return t
}

// purgeWake is the purger's plan: at is when it wakes (Unix nanoseconds; math.MaxInt64
// while it plans no wake), and a deadline set before that sends on kick.
type purgeWake struct {
	at   atomic.Int64
	kick chan struct{} // capacity 1
}

// runPurger releases expired leases and ends nack delays on partitions nobody touches
// on the node's clock, at the earliest deadline the shards hold. A dead
// consumer's record is then delivered again exactly one visibility timeout later, and a
// delayed one when its delay ends. With no lease and no nack delay anywhere it arms no timer
// and sleeps until deadlineSet wakes it.
func (n *Node) runPurger(ctx context.Context) {
	tick := make(chan struct{}, 1)
	fire := func() { notifyOne(tick) }
	var next time.Time // the earliest deadline after the last sweep; zero: none
	for {
		stop := func() bool { return false }
		if !next.IsZero() {
			now := n.clock.Now()
			// A deadline can be due already (set during the sweep): come back soon, but never
			// spin. A sweep visits every shard, so under a steady stream of expiries the
			// purger sweeps at most every purgeResolution.
			sleep := max(next.Sub(now), purgeResolution)
			n.purge.at.Store(now.Add(sleep).UnixNano())
			stop = n.clock.AfterFunc(sleep, fire)
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case <-tick:
		case <-n.purge.kick:
			stop()
		}
		// Until the next plan, every deadline set wakes the purger: one set during the sweep,
		// after its shard was visited, brings it back at once.
		n.purge.at.Store(math.MaxInt64)
		_, next = n.tracker.Purge(n.clock.Now())
	}
}

// deadlineSet wakes the purger early when a lease or a nack delay ends before its planned
// wake: a 200 ms nack delay on a partition nobody touches ends after 200 ms, not at the
// next sweep. The common case is one atomic load.
func (n *Node) deadlineSet(_ string, _ int32, at time.Time) {
	if at.UnixNano() < n.purge.at.Load() {
		notifyOne(n.purge.kick)
	}
}

// Appended tells the node that the log of (topic, partition) grew. It wakes a consumer
// parked for the partition if there is one; with none parked it returns at once on an
// atomic flag and allocates nothing. When the node gains or loses partitions, the host calls
// RoutesChanged, which also makes consumers parked on the topic look again. Without it, a
// parked consumer waits until its deadline or until another wake (a nack, a lease expiry, an
// append to another partition) makes the node look. hwm, the next offset to be written, is not used: the node
// reads the high watermark from the log itself when it reserves.
func (n *Node) Appended(topic string, partition int32, hwm int64) {
	n.wake(topic, partition)
}

// ReloadTopic applies Config.Topic's current settings for topic (caps, visibility timeout,
// redelivery control, reading ahead) to the partitions this node has loaded; the others take
// them when they load. Live leases keep their expiry.
func (n *Node) ReloadTopic(topic string) {
	if !n.life.fence.enter() {
		return
	}
	defer n.life.fence.leave()
	n.tracker.Reconfigure(topic)
	if t, ok := n.topics.Load(topic); ok {
		t.aheadSettings.Store(nil) // read again at the next consume
	}
	n.pump.Notify(topic) // a raised cap may free records for parked consumers
	n.offer(topic)
}

// Parked returns how many consumers are parked on topic, waiting for a record.
func (n *Node) Parked(topic string) int { return n.pump.Parked(topic) }

// DeleteTopic drops everything the node holds for a deleted topic: its shards (the committer
// forgets them), its parked consumers (they get an error), its queue state, and its ack state
// on disk, so churning through uniquely named topics leaves nothing behind and a topic created
// again under the name starts afresh rather than from the old incarnation's frontier. The
// host takes the topic out of its Routes first. A consume, ack or other call that resolved the
// topic before the delete and finishes after it creates nothing and serves nothing of the
// topic: the shards, the committer's entries and the directory of a deleted incarnation never
// serve, write or are read as the next one's. After Close it answers ErrClosed and removes
// nothing.
//
// What the node cannot see is the deleted life's state put back after the delete: a backup
// restored into the partition's directory (or into the StateStore). Unless Logs offers
// TopicIncarnation, such a restore, whole (consumer.id included), into a partition of the new
// life that has acked nothing yet (and so has written no consumer.id of its own), or over the
// new life's whole state, is taken as this life's: the new life's records up to the old
// frontier are never delivered. With TopicIncarnation the state is bound to the topic's
// incarnation and such a restore is ignored (see PartitionDir).
func (n *Node) DeleteTopic(topic string) error {
	if !n.life.fence.enter() {
		return ErrClosed
	}
	defer n.life.fence.leave()
	if err := checkTopic(topic); err != nil {
		return err
	}
	err := n.tracker.DropTopic(topic)
	n.moves.mu.Lock()
	n.moves.unfenceLocked(topic, -1)
	for key := range n.moves.adopted {
		if key.topic == topic {
			delete(n.moves.adopted, key)
			delete(n.moves.unrouted, key)
		}
	}
	n.moves.mu.Unlock()
	n.setAside.forget(topic, -1)
	n.pump.DropTopic(topic)
	n.forgetTopicTokens(topic)
	if t, ok := n.topics.Load(topic); ok {
		if ra := t.ahead.Load(); ra != nil {
			n.background(ra.close) // what it held goes back to the owners
		}
	}
	n.topics.Remove(topic)
	return err
}

// Persist returns once the partition's ack state as of the call is durable on disk (the
// committer's next writeout, group-committed like AckDurable). A partition handed off from
// here answers ErrMoved.
func (n *Node) Persist(ctx context.Context, topic string, partition int32) error {
	if !n.life.fence.enter() {
		return ErrClosed
	}
	defer n.life.fence.leave()
	if err := checkPartition(partition); err != nil {
		return err
	}
	if _, err := n.localShard(topic, partition); err != nil {
		return err
	}
	return n.committer.Durable(ctx, topic, partition)
}

// PartitionDir returns the directory holding a partition's ack state (consumer.id,
// consumer.ahead and consumer.offset), for an operator to read or back up. A partition moves
// to another node by HandOff and Adopt, not by copying these files under a live node: acks
// answered after a copy would be lost, and its leases with them. consumer.id names the
// incarnation the state files belong to: files restored without it cannot be trusted, and the
// node delivers the partition's retained records again.
//
// Restoring a backup is safe within one life of the topic; across a delete it needs the
// host's help. With TopicIncarnation, consumer.id is bound to the topic's incarnation in the
// host's log, and the files of another life (a deleted topic's earlier life restored under
// the topic created again) are ignored, logged and counted (Stats.Committer.IgnoredFiles):
// the partition delivers its retained records again. Without it, the limit: a backup of a
// deleted topic's earlier life, restored whole into the directory of a new life that has not
// yet written its own consumer.id (it has acked nothing), is taken as this life's, and the
// new life's records up to the old frontier are never delivered; so is one restored over all
// three files of a new life that wrote its own. The same holds of a state written before the
// binding (by a release before it, or under a host that named no incarnation): it is trusted,
// and bound at its next write.
func (n *Node) PartitionDir(topic string, partition int32) string {
	return n.dir.Partition(topic, partition)
}

// DropPartition drops the node's state of one partition: its shard goes (leases with it)
// and the committer forgets the partition, so no ack of the old shard is written into the
// partition's directory afterwards, and it ends the fence of a partition handed off from
// here (HandOff). A host calls it when it reclaims a partition, when it retires an
// incarnation, and around an install of the partition's files it made itself; for a move it
// uses HandOff and Adopt, and after a failover away from this node RoutesChanged, which
// deposes what the routes no longer name here (with Config.Ownership a partition whose grant
// lapsed stops by itself). The next touch loads the state afresh from disk.
func (n *Node) DropPartition(topic string, partition int32) {
	if !n.life.fence.enter() {
		return // the node's state went with Close
	}
	defer n.life.fence.leave()
	if partition >= 0 {
		n.fencedEpochs.Delete(shardKey{topic, partition})
		n.moves.mu.Lock()
		delete(n.moves.unrouted, shardKey{topic, partition})
		n.moves.unfenceLocked(topic, partition)
		n.moves.mu.Unlock()
		if n.statesInDir() {
			_ = n.dir.RemoveAll(filepath.Join(n.dir.Partition(topic, partition), MovedFile))
		}
	}
	n.tracker.Drop(topic, partition)
	// Consumers parked for the partition look again: a copy just installed may hold records.
	n.wake(topic, partition)
}

// Stats is a snapshot of the node's counters and latency histograms, for a host to export
// (package router/metrics exports it for Prometheus, OpenTelemetry and expvar).
type Stats struct {
	Consumes      uint64 // Consume calls
	EmptyConsumes uint64 // Consume calls that delivered nothing (the 204s)
	Delivered     uint64 // records delivered under a lease
	Replayed      uint64 // records read by Replay (not counted as consumed)
	// Deposed counts partitions taken from this node while it served them: RoutesChanged
	// found the routes naming another owner, the ownership grant lapsed or changed, or the
	// state store refused a save as fenced (ErrFenced).
	Deposed uint64
	// SetAsides counts partitions set aside because their state could not be loaded,
	// SetAsideRecovered those that rejoined, and SetAsideNow is how many are set aside now
	// (Health lists them).
	SetAsides         uint64
	SetAsideRecovered uint64
	SetAsideNow       int64
	// HostContractViolations counts the answers of the host's seams the node refused with
	// ErrHostContract (a nil Log, a negative watermark, routes naming a partition twice, ...;
	// a wrong routes answer once, however often it is returned). HostPanics counts the
	// panics of the host's code the node recovered on its own goroutines.
	HostContractViolations uint64
	HostPanics             uint64
	Shards                 ShardCounters
	Committer              CommitterStats
	Remote                 RemoteStats
	// Ahead counts what this node read ahead of its consumers (see DefaultReadAhead).
	Ahead AheadStats
	// ConsumeWait is how long the consumes that waited for a record took, from the call to
	// its return, whether a record came or the wait ran out: those that parked, and those
	// held for a topic no node served yet. A consume served without waiting is not in it.
	ConsumeWait Histogram
	// RemoteDelivery is how long the consumes served with another node's records took, from
	// the call to the records' arrival (a probe's one round trip; a parked consume's wait,
	// then the notification and the claim).
	RemoteDelivery Histogram
	// ForwardedAckRPC is the round trip of each RPC carrying forwarded acks, extends, nacks
	// or releases to their owner (a single op or an AckBatch), from its send to its reply,
	// or to the end of its budget when no reply came back.
	ForwardedAckRPC Histogram
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{
		Consumes:               n.stats.consumes.Load(),
		EmptyConsumes:          n.stats.emptyConsumes.Load(),
		Delivered:              n.stats.delivered.Load(),
		Replayed:               n.stats.replayed.Load(),
		Deposed:                n.stats.deposed.Load(),
		SetAsides:              n.setAside.total.Load(),
		SetAsideRecovered:      n.setAside.recovered.Load(),
		SetAsideNow:            n.setAside.count.Load(),
		HostContractViolations: n.faults.violations.Load(),
		HostPanics:             n.faults.panics.Load(),
		Shards:                 n.tracker.Counters().Load(),
		Committer:              n.committer.Stats(),
		Remote:                 n.stats.remote.load(),
		Ahead:                  n.stats.ahead.load(),
		ConsumeWait:            n.stats.consumeWait.load(),
		RemoteDelivery:         n.stats.remoteDelivery.load(),
		ForwardedAckRPC:        n.stats.forwardedAckRPC.load(),
	}
}

// Close stops the node. A call that starts once Close has begun answers ErrClosed; parked
// consumers get ErrClosed at once; Close waits for the other calls in progress (an ack being
// forwarded, a durable ack waiting for its sync) to finish, then stops the goroutines, and the
// committer writes out every partition and brings consumer.offset level. So every ack,
// extend and nack that returned success before Close returned, in progress ones included, is
// persisted: a restart delivers no acked record again (invariant "the documented redelivery window"). It returns what the
// final writeout and the release of Dir's lock failed with, if anything.
//
// Close is Shutdown without a bound: see Shutdown for what later calls answer.
func (n *Node) Close() error { return n.Shutdown(context.Background()) }

// Shutdown is Close bounded by ctx, as http.Server.Shutdown is: the first call of Close or
// Shutdown begins the close, and Shutdown returns its outcome if it finishes before ctx
// ends. If ctx ends first, Shutdown returns ctx.Err() and the close goes on in the
// background to its end (a disk whose sync hangs keeps it going): nothing is abandoned, and
// Dir stays locked until it finishes.
//
// Each close has one outcome, handed to one caller:
//   - while a Close or Shutdown is waiting for the close, or after one returned its outcome,
//     every other call of Close or Shutdown returns ErrClosed at once;
//   - after a Shutdown returned ctx.Err(), the next call of Close or Shutdown waits for the
//     close (Shutdown again bounded by its own ctx) and returns its outcome: nil, or the
//     error Close would have returned. So a host that gave up on a bounded shutdown can still
//     learn whether everything was persisted by calling Close.
func (n *Node) Shutdown(ctx context.Context) error {
	n.life.closing.Lock()
	switch {
	case n.life.closing.done == nil:
		n.life.closing.done = make(chan struct{})
		n.life.closed.Store(true)
		go n.shutdown()
	case n.life.closing.unclaimed:
		n.life.closing.unclaimed = false
	default:
		n.life.closing.Unlock()
		return ErrClosed
	}
	done := n.life.closing.done
	n.life.closing.Unlock()
	select {
	case <-done:
		return n.life.closing.err
	case <-ctx.Done():
	}
	select {
	case <-done: // finished as ctx ended: the outcome is here, hand it over
		return n.life.closing.err
	default:
	}
	n.life.closing.Lock()
	n.life.closing.unclaimed = true
	n.life.closing.Unlock()
	return ctx.Err()
}

// shutdown is the close itself, in its own goroutine so that Shutdown can stop waiting for
// it. It records its outcome and closes closing.done.
func (n *Node) shutdown() {
	n.life.fence.close()
	n.pump.Close()
	n.life.fence.wait()
	n.closeReadAheads() // every reservation back to its owner, before the transport's goroutines stop
	n.ownerTopics.Range(func(topic, _ any) bool {
		n.forgetTopicTokens(topic.(string)) // and their hold timers
		return true
	})
	n.life.cancel()
	n.life.done.Wait()
	n.forwarding.Close()
	err := n.committer.Close()
	n.life.closing.err = errors.Join(err, n.dir.Close()) // the last thing: a new node may open Dir now
	close(n.life.closing.done)
}

// committerSource gives the committer the live state of a partition: a
// partition whose shard is gone writes nothing. The committer calls it from one goroutine, one
// call at a time, so the snapshot it holds is reused without a lock: the shard fills the
// committer's own buffers for the offset sets, and snap's for the acked-ahead runs, the key
// tails and the attempts, which are then converted (ackstate.ToOffsets, which carries every
// persisted field: an ordered topic's key tails must reach the record with its runs). A steady tick allocates nothing here, and copies the
// acked-ahead set's runs, never its offsets.
type committerSource struct {
	n    *Node
	snap inflight.State
}

func (s *committerSource) State(topic string, partition int32, into *offsets.State) bool {
	shard, ok := s.n.tracker.Lookup(topic, partition)
	if !ok || !s.n.mayWrite(shard) {
		return false
	}
	snap := &s.snap
	snap.Quarantined, snap.Requeued = into.Quarantine[:0], into.Requeued[:0]
	into.OmittedAttempts = shard.SnapshotCapped(snap, offsets.MaxSlotAttempts)
	ackstate.ToOffsets(into, snap)
	// Drop the references to the committer's buffers: they are its own between calls.
	snap.Quarantined, snap.Requeued = nil, nil
	return true
}
