package offsets

import (
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Cadences and bounds of the committer (see docs/protocol.md, "Cadences").
const (
	DefaultInterval = time.Second            // D when Config.Interval is zero
	MinInterval     = 10 * time.Millisecond  // storage.consumer_offset_commit_interval_ms lower bound
	MaxInterval     = 60 * time.Second       // and upper bound
	MaxTickPeriod   = 100 * time.Millisecond // T, unless D is shorter
	LevelInterval   = 30 * time.Second       // consumer.offset is levelled at most this often
	MaxDescriptors  = 4096                   // descriptors open at once, at most (held, one-shot, priming)
)

// primeWorkers bounds the primes Run's pool runs at once; primeChunk bounds how many it takes
// on before the first of them may have its window written.
const (
	primeWorkers = 16
	primeChunk   = 256
)

// transientReserve is what the held descriptors leave free under a cap of limit: room for one
// prime at least (a root, consumer.ahead, consumer.id and consumer.offset), and up to the
// one-shot, reopen and levelling descriptors of the tick and the writeout worker (2 each) and
// those of the prime pool (3 or 4 per prime, 2 per prime held to the end of its chunk). An
// eighth of a large cap: when thousands of new partitions wait for their first writeout, the
// held descriptors (which a partition keeps until its window is durable) fill their share,
// and the pool's chunks take what is left; a chunk of about a hundred primes keeps the
// pool's syscalls, not the cap, the bound on how fast new partitions get their windows.
func transientReserve(limit int) int { return max(4, min(limit/2, max(4+3*primeWorkers, limit/8))) }

// Source gives the committer the live state of a partition. The router adapts the in-flight
// tracker to it.
//
// State fills *into with the partition's live acked state and reports whether the partition
// has a shard: the incarnation Load gave the shard (0 lets the committer take consumer.id's or
// name a new one), the frontier (inclusive: the last offset up to which everything is settled, -1
// while offset 0 is not), the offsets acked above it as runs (ascending, each above the
// frontier; runs that touch are joined; AppendRuns makes them from offsets), on an ordered
// topic the key tails that name the records parked among those runs (see State.KeyTails: at
// most MaxKeyTails; a state breaking their rules is not written, and asked for again), the
// delivery attempts of unresolved offsets above it (ascending by offset, each above the
// frontier), the quarantined offsets (ascending, at least 0, on either side of the frontier)
// and the requeued ones (ascending, within [0, frontier]). It reuses into's slices, appending
// to them from length zero, so a steady tick allocates nothing; into.Found is not used. The
// committer resets the lengths before the call and reads the slices only until its next call.
//
// ok is false when the partition's shard is gone; the committer then writes nothing for it,
// and fails the Durable waits of the partition. The committer calls State
// from its own goroutine, one call at a time, never while holding a lock that Forget,
// MarkDirty or Durable take, so State may take the shard's lock. It must not call Tick or
// Close.
type Source interface {
	State(topic string, partition int32, into *State) (ok bool)
}

// Config configures a Committer. Dir and Source are required.
type Config struct {
	// FS is the file system; nil means OS().
	FS FS
	// Dir names a partition's directory. The host creates it before the partition's first
	// ack: the committer never creates a directory.
	Dir func(topic string, partition int32) string
	// Interval is the durability interval D: each partition written since is written out
	// once per interval. Zero means DefaultInterval; otherwise it must lie within
	// [MinInterval, MaxInterval]. The tick period T is min(MaxTickPeriod, D).
	Interval time.Duration
	// Source gives the live state of a partition at tick time.
	Source Source
	// Logger receives the committer's warnings; nil discards them.
	Logger *slog.Logger
	// MaxDescriptors caps the descriptors the committer has open at once: consumer.ahead
	// descriptors held between ticks, one-shot ones, and those of primes and levellings. Zero
	// means min(MaxDescriptors, soft RLIMIT_NOFILE / 4), and at least 5; otherwise it must
	// be at least 5.
	MaxDescriptors int
}

type key struct {
	topic     string
	partition int32
}

// Committer persists the acked state of partitions: it is the node's one offset committer.
// MarkDirty, Durable, Forget, Load, ClampToWatermark and Stats are safe for concurrent use;
// Tick, Run and Close serialize with each other.
type Committer struct {
	fs         FS
	dir        func(string, int32) string
	src        Source
	log        *slog.Logger
	interval   time.Duration // D
	period     time.Duration // T
	turns      uint64        // ticks per interval: each partition's writeout turn is one of them
	maxOpen    int64         // the descriptor cap: every descriptor open at once
	maxHeld    int           // descriptors held between ticks, at most: maxOpen less a reserve
	levelEvery time.Duration

	// hookOpened runs inside the open-then-check window of a prime, a levelling and a reopen:
	// after the state file is opened, before the path is checked again. Tests only.
	hookOpened func(dir string)

	// tickMu serializes Tick and Close. The fields below it belong to the goroutine holding it.
	tickMu  sync.Mutex
	tickNo  uint64
	lastNow time.Time
	work    []*partition // this tick's partitions to prime or write
	pending []*partition // partitions written since their last writeout (lazily compacted)
	unlevel []*partition // partitions whose consumer.offset trails their anchor (lazily compacted)
	spare   []*partition // the marked list not in use
	t       tickScratch
	st      State // the Source's answer, reused
	rec     Record
	slot    [SlotSize]byte
	primeQ  []*partition // sync mode: partitions waiting for their prime
	wobatch []*partition // the writeout batch being selected

	// Background work, while Run runs (async). The tick hands a writeout batch to one worker
	// and the partitions to prime to a pool; a Tick without Run does both inline.
	async    bool           // tickMu
	ranAsync bool           // tickMu: Run has run, so Close's final writeouts may use workers
	bgStop   chan struct{}  // tickMu: closed to stop the background goroutines
	woCh     chan woJob     // to the writeout worker
	woBusy   atomic.Bool    // a writeout batch is in flight
	woSince  time.Time      // tickMu: when the batch in flight was handed
	woCount  int            // tickMu: how many partitions it holds
	woLate   bool           // tickMu: the batch in flight was reported late already
	wt       tickScratch    // the writeout worker's
	woSpare  []*partition   // the writeout batch not in use
	primeMu  sync.Mutex     // guards the pool's queue and primeStop
	primeQA  []*partition   // async: partitions waiting for the pool
	primeC   chan struct{}  // wakes the pool (capacity 1)
	primeOff bool           // primeMu: no new chunk may start (Close, Run ending)
	priming  atomic.Int32   // chunks the pool is priming (taken from primeQA under primeMu)
	pt       tickScratch    // the pool's
	bg       sync.WaitGroup // batches and chunks in flight
	asyncMu  sync.Mutex
	asyncErr []error // errors of background batches, returned by the next Tick

	// ioMu guards the partitions' file state (see partition) and what Forget shares with the
	// tick and the background work: the descriptors, the LRU list, held and orphans. It is held
	// for one partition's page-cache write, or an open and its checks, at a time, never across
	// a sync and never while calling Source, so Forget and the tick wait for at most one
	// partition's write.
	ioMu sync.Mutex
	held int
	lru  lruList
	// noneEvictable: the last eviction scan found no held descriptor it may close, and no
	// writeout has flipped or ended since (only those make one evictable), so the next is
	// not made: with thousands of windows waiting for their writeouts, each of the many
	// opens past the cap would otherwise scan every held descriptor.
	noneEvictable bool
	orphans       []File               // descriptors Forget dropped while a writeout batch used them
	offBuf        [OffsetFileSize]byte // levelling's buffer
	// fds counts every descriptor open (held, one-shot, priming, levelling, roots); it never
	// exceeds maxOpen.
	fds atomic.Int64

	// markMu guards the changes of the partition map, the marked list, partition.marked's
	// changes, the Durable waiters (partition.waiters, .strandedW) and closed. It is never held
	// across I/O or a call out of the package. MarkDirty reads the map and partition.marked
	// without it: a partition already marked needs nothing more.
	markMu sync.Mutex
	parts  sync.Map // key → *partition: written under markMu, read by anyone
	marked []*partition
	closed bool

	// kickC wakes Run: something was marked (Run ticks at the next tick of the cadence) or,
	// with urgent set, a Durable wait wants a writeout now. Run sleeps on it when idle.
	kickC  chan struct{}
	urgent atomic.Bool

	// snaps numbers the Source calls (the tick's, in order); a Durable wait is covered by a
	// window whose snapshot's number exceeds what snaps held when it registered.
	snaps atomic.Uint64
	// waiting counts the Durable waits registered and not yet answered, all partitions.
	waiting atomic.Int64

	done chan struct{} // closed by Close, so Run returns at once

	stats                                counters
	warnOverrun, warnLate, warnDropped   limiter
	warnDroppedRequeued, warnDroppedSets limiter
	warnTick, warnPrime                  limiter
}

// partition is the committer's state for one partition. Fields below forgotten are guarded by
// ioMu, except those whose comment says "tick": the tick goroutine's alone.
type partition struct {
	topic string
	num   int32
	key   uint32 // PartitionKey
	turn  uint64 // writeout turn: key % turns
	dir   string // resolved at the first prime
	// incarnation is what the partition's records name: the live shard's (from Load), or
	// consumer.id's when the Source keeps none; settled at the prime.
	incarnation uint64
	// host is the host's incarnation of the topic the shard was loaded under (State.
	// HostIncarnation), taken with incarnation; the prime binds consumer.id to it.
	host uint64

	marked    atomic.Bool  // acked since the last tick; changed under markMu, read by MarkDirty
	waiters   []*waiter    // markMu: Durable waits not yet answered
	strandedW bool         // markMu: stranded; Durable fails at once
	nwait     atomic.Int32 // len(waiters), for the tick to read without markMu

	forgotten bool // Forget detached it; never touched again. Set under fileMu too.
	// fileMu serialises a prime's file work for the partition with its Forget, so that
	// nothing is created or written for it once Forget returned, without holding ioMu
	// (which every tick takes per partition) through the prime's syscalls.
	fileMu           sync.Mutex
	f                File // held descriptor
	woFile           File // a descriptor the writeout batch opened for this writeout only
	lruPrev, lruNext *partition

	stranded bool
	primed   bool
	priming  bool // handed to the prime pool
	fresh    bool // primed, its first window not written yet: its descriptor is not evicted
	// syncsOwed: primed from a blank directory without the prime's syncs; its first
	// writeout makes consumer.id and the directory entries durable before it may flip.
	syncsOwed bool
	queuedAt  time.Time // tick: when a tick first found it unprimed (zero: none)
	inWork    bool      // tick
	inPend    bool      // tick
	inUnlev   bool      // the writeout batch's

	woBusy      bool               // in a writeout batch: its descriptor is in use outside ioMu
	syncStarted bool               // a sync of slot syncSlot has begun and the batch has not completed
	syncSlot    int                // the slot that sync makes durable: the window when it began
	gen         [AheadSlots]uint64 // writes started, per slot
	syncGen     uint64             // gen[syncSlot] when the sync began: a flip needs it unchanged
	syncFront   int64              // windowFrontier and windowSnap when the sync began
	syncSnap    uint64

	dirDev, dirIno   uint64 // identity of the directory the prime pinned
	fileDev, fileIno uint64 // identity of the consumer.ahead the prime opened

	anchor int // slot index of the anchor
	// win is the slot index of the window, the slot ticks write: never the anchor, and never
	// the slot a sync in flight makes durable (a tick then moves it to the spare, the third).
	win int
	// seqs is the sequence number of each slot's record (a record of the partition that
	// counts, or one this committer wrote or tried to), 0 for none: a record written into a
	// slot outranks the other two (see writeWindow).
	seqs           [AheadSlots]uint64
	spareSince     time.Time // when the window moved to the spare while its sync ran
	anchorFrontier int64
	hasAnchor      bool // the anchor slot holds a valid record
	anchorOurs     bool // the anchor is a record this committer wrote out

	windowFrontier int64  // frontier of the last whole window write, -1 before the first
	windowSnap     uint64 // number of the snapshot the last whole window write holds
	windowOK       bool   // the window holds a whole record written after the last failed sync
	needRewrite    bool   // a window write or sync failed: rewrite it before any flip (slot discipline)
	pending        bool   // written since the last writeout
	pendingSince   time.Time

	levelled      int64     // value consumer.offset holds, when levelledOK
	levelledOK    bool      // consumer.offset durably holds levelled
	levelledAt    time.Time // last levelling by this committer
	offsetEntryOK bool      // consumer.offset's directory entry is durable
}

// window returns the slot a window write goes to now: the window, unless a sync of it is in
// flight. Then the write goes to the spare slot, which is neither the anchor nor the slot
// being synced, and which becomes the window: a page-cache write never waits for a sync, and
// the sync, its slot untouched, can flip (see "Anchor and window"). Called with ioMu held.
func (p *partition) window(now time.Time) int {
	if p.syncStarted && p.win == p.syncSlot {
		p.win = AheadSlots - p.anchor - p.syncSlot // the slot indexes sum to 3
		p.windowOK, p.spareSince = false, now
	}
	return p.win
}

// nextSeq is the sequence number of a record written into slot s: above those of the other
// two, so that recovery takes the newest record written whichever slot holds it. Rewrites of
// the window while the others stand keep its number. Called with ioMu held.
func (p *partition) nextSeq(s int) uint64 {
	var top uint64
	for i, q := range p.seqs {
		if i != s {
			top = max(top, q)
		}
	}
	return top + 1
}

// New validates cfg and returns a committer. It touches no file: partitions are primed at
// their first tick.
func New(cfg Config) (*Committer, error) {
	if cfg.Dir == nil || cfg.Source == nil {
		return nil, errors.New("offsets: Config.Dir and Config.Source are required")
	}
	d := cfg.Interval
	if d == 0 {
		d = DefaultInterval
	}
	if d < MinInterval || d > MaxInterval {
		return nil, errors.New("offsets: Config.Interval must lie within 10ms and 60s")
	}
	if cfg.MaxDescriptors < 0 || (cfg.MaxDescriptors > 0 && cfg.MaxDescriptors < 5) {
		return nil, errors.New("offsets: Config.MaxDescriptors must be zero or at least 5")
	}
	c := &Committer{
		fs:         cfg.FS,
		dir:        cfg.Dir,
		src:        cfg.Source,
		log:        cfg.Logger,
		interval:   d,
		period:     min(MaxTickPeriod, d),
		maxOpen:    int64(cfg.MaxDescriptors),
		levelEvery: LevelInterval,
		kickC:      make(chan struct{}, 1),
		done:       make(chan struct{}),
		woCh:       make(chan woJob, 1),
		primeC:     make(chan struct{}, 1),
	}
	c.turns = uint64(c.interval / c.period)
	if c.fs == nil {
		c.fs = OS()
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.maxOpen == 0 {
		c.maxOpen = int64(defaultMaxOpen(softNoFile()))
	}
	c.maxHeld = int(c.maxOpen) - transientReserve(int(c.maxOpen))
	return c, nil
}

// defaultMaxOpen is min(4096, soft RLIMIT_NOFILE / 4), at least 5: the
// host keeps at least three quarters of its limit.
func defaultMaxOpen(soft uint64) int {
	if soft == 0 {
		return MaxDescriptors
	}
	return int(max(5, min(MaxDescriptors, soft/4)))
}

// TickPeriod is T: min(100ms, D).
func (c *Committer) TickPeriod() time.Duration { return c.period }

// MarkDirty records that the partition's acked state changed. The ack path calls it after
// releasing the shard's lock: it does no I/O, never waits for a tick,
// and allocates nothing for a partition already known. For a partition already marked since
// the last tick it takes no lock. After Close it does nothing.
func (c *Committer) MarkDirty(topic string, partition int32) {
	k := key{topic, partition}
	if p := c.lookup(k); p != nil && p.marked.Load() {
		// The tick clears the mark (under markMu) before it asks the Source for the state,
		// so a mark seen set is one the tick has yet to take: the change is in its snapshot.
		return
	}
	c.markMu.Lock()
	defer c.markMu.Unlock()
	if c.closed {
		return
	}
	c.markLocked(c.partLocked(k))
}

// lookup returns the partition's state, nil when the committer has none. It takes no lock.
func (c *Committer) lookup(k key) *partition {
	if v, ok := c.parts.Load(k); ok {
		return v.(*partition)
	}
	return nil
}

// partLocked returns the partition's state, creating it. Called with markMu held.
func (c *Committer) partLocked(k key) *partition {
	p := c.lookup(k)
	if p == nil {
		p = c.newPartition(k)
		c.parts.Store(k, p)
	}
	return p
}

// markLocked puts p on the next tick's list, and tells Run when it is the first mark since
// the last tick. Called with markMu held.
func (c *Committer) markLocked(p *partition) {
	if !p.marked.Load() {
		p.marked.Store(true)
		c.marked = append(c.marked, p)
		c.kick(false)
	}
}

// kick wakes Run: for a tick at the cadence's next one, or, urgent, for one at once.
func (c *Committer) kick(urgent bool) {
	if urgent {
		c.urgent.Store(true)
	}
	select {
	case c.kickC <- struct{}{}:
	default:
	}
}

func (c *Committer) newPartition(k key) *partition {
	pk := PartitionKey(k.topic, k.partition)
	return &partition{topic: k.topic, num: k.partition, key: pk, turn: uint64(pk) % c.turns}
}

// Forget drops the partition's descriptor and state. Once it returns, no snapshot taken before
// the call is written: it waits for a write of that partition in progress
// (a sync in flight ends on the old descriptor, closed after), and a tick holding an older snapshot finds the partition forgotten. The next
// MarkDirty starts afresh with a prime, which also clears a strand. Every shard drop calls it.
// The partition's Durable waits fail with ErrShardGone.
func (c *Committer) Forget(topic string, partition int32) {
	c.ioMu.Lock()
	defer c.ioMu.Unlock()
	k := key{topic, partition}
	c.markMu.Lock()
	p := c.lookup(k)
	if p == nil {
		c.markMu.Unlock()
		return
	}
	c.parts.Delete(k)
	if p.marked.Load() {
		// The mark may come from an ack of the shard that replaced the dropped one, reported
		// just before this call: it moves to fresh state, and the next tick asks the live
		// shard, priming anew if there is one. A MarkDirty that finds p still marked relies
		// on this move.
		np := c.newPartition(k)
		np.marked.Store(true)
		c.parts.Store(k, np)
		for i, q := range c.marked {
			if q == p {
				c.marked[i] = np
			}
		}
	}
	c.failWaiters(p, math.MaxUint64, ErrShardGone)
	c.markMu.Unlock()
	p.fileMu.Lock() // waits for a prime's file work in progress
	p.forgotten = true
	p.fileMu.Unlock()
	c.dropDescriptors(p)
	if p.stranded {
		c.stats.strandedNow.Add(-1)
	}
}

// Tick runs one step at time now: it primes the partitions touched
// for the first time, writes a window record into the page cache for every partition marked
// since the last tick (and every window a failure left to rewrite), writes out the partitions
// whose turn has come or that waited a whole interval, levels consumer.offset where due, and
// warns about writes waiting more than twice the interval. It returns the partitions'
// errors joined; each is retried on the next tick. After Close it returns ErrClosed.
func (c *Committer) Tick(now time.Time) error {
	_, err := c.step(now, modeNormal)
	return err
}

// tickMode selects what a pass does beyond writing windows.
type tickMode int

const (
	modeNormal    tickMode = iota
	modePageCache          // windows only, no writeouts (benchmarks)
	modeClose              // everything written out and levelled, whatever its turn
)

// tickReport is what Run needs from a tick: the overrun warning's figures, and when to tick
// again.
type tickReport struct {
	partitions int
	primed     bool
	busy       bool      // work is left: tick again one period after this tick
	wakeAt     time.Time // when not busy: when work falls due (a levelling), zero for none
}

func (c *Committer) step(now time.Time, mode tickMode) (tickReport, error) {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	c.markMu.Lock()
	closed := c.closed
	c.markMu.Unlock()
	if closed {
		return tickReport{}, ErrClosed
	}
	return c.tick(now, mode)
}

// Close writes out every partition and levels every consumer.offset, whatever their turn, then
// closes every descriptor: after it both files of every partition the committer knows are
// exact and durable (no consumer.offset is created for a frontier of -1). A Durable wait
// registered before Close is answered nil when Close's writeout of its partition holds, and otherwise fails with an error matching
// ErrClosed (joined with Close's error). Later Ticks and Durable calls answer ErrClosed, Run
// returns, MarkDirty does nothing. A second Close returns nil.
func (c *Committer) Close() error {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	c.markMu.Lock()
	if c.closed {
		c.markMu.Unlock()
		return nil
	}
	c.closed = true
	c.markMu.Unlock()
	close(c.done)

	// Let the background work in flight finish; what the pool had not started is primed
	// inline by the final pass.
	c.primeMu.Lock()
	c.primeOff = true
	c.primeMu.Unlock()
	c.bg.Wait()
	// What the background met before is retried by the final pass, whose errors alone say
	// whether Close persisted everything; the earlier ones go to the log.
	if err := c.takeAsyncErr(); err != nil {
		c.log.Warn(msgTickFailed, "err", err)
	}
	c.unqueuePrimes(func(p *partition) {
		c.markMu.Lock()
		defer c.markMu.Unlock()
		if c.lookup(key{p.topic, p.num}) == p {
			c.markLocked(p) // retryNextTick would not: the committer is closed
		}
	})

	_, err := c.tick(c.lastNow, modeClose)
	c.releaseAll()
	c.failAllWaiters(err)
	return err
}

func (c *Committer) releaseAll() {
	c.ioMu.Lock()
	defer c.ioMu.Unlock()
	c.markMu.Lock()
	defer c.markMu.Unlock()
	for _, v := range c.parts.Range {
		c.dropDescriptors(v.(*partition))
	}
	for _, f := range c.orphans {
		c.closeFD(f)
	}
	c.orphans = nil
}
