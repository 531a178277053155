package inflight

import (
	"cmp"
	crand "crypto/rand"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Reason says why a record is delivered.
type Reason uint8

const (
	ReasonFirst    Reason = iota // never delivered before (as far as this shard knows)
	ReasonExpired                // the previous lease expired
	ReasonNacked                 // the previous holder nacked it
	ReasonRestart                // it was delivered before the owner restarted (persisted attempts)
	ReasonRequeued               // it was quarantined and requeued
)

var reasonNames = [...]string{"first", "expired", "nacked", "restart", "requeued"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// A Lease is what ReserveNext grants: the record at Handle.Offset is invisible to every other
// consumer until Expiry, and only Handle can ack, extend or nack it.
type Lease struct {
	Handle
	Expiry  time.Time
	Attempt uint32 // delivery attempt, 1 for the first
	Reason  Reason // why this delivery happens
	// Fence is a fencing token: it grows with every lease of the offset, across restarts
	// too while the clock does not go back (it is at least the grant time in Unix
	// nanoseconds), so a handler can refuse, in its own store, a write from a superseded
	// lease that still thinks it holds the record.
	Fence uint64
}

// State is a partition's persisted ack state: what Restore seeds a shard with and what
// Snapshot reports for the committer to write.
type State struct {
	// Frontier is the committed frontier, inclusive: every offset at or below it is settled.
	// A new partition whose oldest retained offset is o starts at o-1.
	Frontier int64
	// AckedAhead holds the offsets acked above the frontier, as runs of consecutive
	// offsets: Snapshot and HandOff give maximal runs (no two overlap or touch), ascending.
	// Restore takes any runs: overlapping or touching ones merge, and offsets at or below
	// Frontier are ignored.
	AckedAhead []Run
	// Attempts holds the delivery attempts of unresolved offsets above the frontier,
	// ascending by offset. Restore marks them delivered before a restart.
	Attempts []Attempt
	// Quarantined holds the offsets set aside after too many deliveries, ascending. The
	// frontier passes over them; they stay here until requeued.
	Quarantined []int64
	// Requeued holds quarantined offsets at or below the frontier that were requeued and
	// are waiting to be delivered again, ascending.
	Requeued []int64
	// Incarnation is the identity of the persisted state the shard was restored from (the
	// committer's name for one life of the partition's state files). The shard keeps it and
	// hands it back in Snapshot, so the state it persists names the incarnation it came from;
	// it never interprets it.
	Incarnation uint64
	// HostIncarnation is the host's incarnation of the topic the state is bound to (see
	// offsets.State.HostIncarnation), 0 when unbound. The shard keeps it beside Incarnation
	// and hands it back, uninterpreted, so that what it persists stays bound to the life of
	// the topic it was loaded under.
	HostIncarnation uint64
	// NothingPersisted says the state was not read from persisted files (Load found none it
	// could trust): a shard created from it is not reported dirty until it changes, since
	// there is nothing read to make durable, so a partition that is only looked at writes
	// nothing.
	NothingPersisted bool
	// KeyTails names, on an ordered topic, the records AckedAhead holds that are not
	// settled: records read and deferred behind a key that was blocked (held, or waiting
	// for a lower record of it), kept in the runs so that a key blocked for long does not
	// split them into one run per record. Every record of KeyTails[i].Key (KeyOf of its key)
	// at or above KeyTails[i].From that AckedAhead holds is unsettled. Ascending by From, no
	// two with the same Key. A shard restored from a state with key tails has its scans read
	// those runs to learn which records they hold (Unverified, Verify). A collision of two
	// keys' identities would make a record of the other key, acked while the first was
	// blocked, unsettled again after a restart: delivered once more, never lost.
	KeyTails []KeyTail
	// Held is what only memory knows of the unresolved offsets: the live leases (with their
	// nonces, so the receipt handles consumers hold keep settling), the nack delays, and the
	// attempts and reasons of offsets released for redelivery. HandOff fills it for a move;
	// the state of a restart has none. Restore installs it as given: a lease whose Until has
	// passed by the shard's first touch expires then, as it would have where it was granted.
	Held []Held
	// Corrupt holds the offsets above the frontier skipped as permanently unreadable,
	// ascending: memory only (a restart finds them again by reading), carried by a move.
	Corrupt []int64
	// Fence is the latest fencing token the shard granted: a shard restored from the state
	// grants larger ones, whatever its clock says.
	Fence uint64
	// Epoch names the ownership grant the state was kept under (the host's, see
	// router.Ownership); 0 when the host grants none. A shard restored from the state serves
	// under it, and Snapshot reports it, so that a store can refuse the saves of an older one.
	Epoch uint64
	// GrantUntil is when the grant the shard serves under lapses: from then on (see
	// Shard.Lapsed) the shard is frozen until Renew moves it on. Zero: it never lapses.
	// Memory only: Snapshot leaves it zero.
	GrantUntil time.Time
}

// Held is the in-memory state of one unresolved offset that a move carries to the
// partition's next owner (State.Held).
type Held struct {
	Offset int64
	// Nonce is the live lease's nonce; 0 for a delayed or a released offset.
	Nonce uint64
	// Until is the lease's expiry, or the end of the nack delay; zero for a released offset.
	Until time.Time
	// LeasedAt is when the live lease was granted (MaxLeaseLifetime counts from it).
	LeasedAt time.Time
	Attempts uint32 // leases granted so far, the live one included
	Reason   Reason // of the live lease, or of the next one
	Delayed  bool   // invisible until Until (a nack delay or a backoff)
}

// KeyTail is one key's parked records (State.KeyTails): every record of the key at or above
// From that the state's AckedAhead holds is unsettled.
type KeyTail struct {
	Key  uint64 // KeyOf of the records' key: never 0
	From int64  // the key's lowest parked offset, above the frontier
}

// Attempt is the number of times an unresolved offset was leased.
type Attempt struct {
	Offset int64
	Count  uint32
}

// Hooks are called by a shard after its lock is released, never under it, so
// they may call into the pump or the committer freely. A nil hook is skipped.
type Hooks struct {
	// Wake reports that records of the partition became visible again: a nack without
	// delay, a lease expiry (a reservation's lapse too) or the end of a nack delay, found by
	// Purge or by any touch.
	Wake func(topic string, partition int32)
	// Dirty reports that the persisted state changed: a lease was granted or a reservation
	// confirmed (its attempt counts; a reservation's does not until then), the frontier advanced or jumped, or the acked-ahead, quarantined or
	// requeued sets changed. It is called for the first change after a Snapshot only:
	// every later change before the next Snapshot is in that Snapshot, so a host that
	// snapshots the shard after each Dirty (a committer) sees every change, and pays for
	// one call per snapshot rather than one per ack.
	Dirty func(topic string, partition int32)
	// Quarantine reports an offset set aside after its attempts reached the topic's
	// MaxDeliveries, or rejected (Reject): a host copies the record to a dead-letter topic
	// here, say.
	Quarantine func(topic string, partition int32, offset int64, attempts uint32)
	// Deadline reports that a lease expiry or the end of a nack delay was set for at, so a
	// purger sleeping past it can wake in time.
	Deadline func(topic string, partition int32, at time.Time)
	// AckedAheadStall reports that a reserve found the partition's acked-ahead set at its
	// cap (Config.MaxAckedAheadRuns or MaxAckedAhead): until the frontier hole is settled
	// and the set drains below the cap, only the hole is handed out. It is called once per
	// such episode, when it begins (Counters.AckedAheadStalls counts them): a host logs it.
	AckedAheadStall func(topic string, partition int32, stall AckedAheadStall)
	// Lapsed reports, from Tracker.Purge, a shard whose ownership grant has lapsed (see
	// Shard.Lapsed): the host renews it (Shard.Renew) or deposes it (Tracker.Depose). A
	// lapsed shard's deadlines wait: the purger does not wake for them.
	Lapsed func(topic string, partition int32)
}

// AckedAheadStall is what Hooks.AckedAheadStall reports of a partition whose acked-ahead
// set reached its cap.
type AckedAheadStall struct {
	Hole    int64 // the frontier hole (frontier + 1): the one offset still handed out
	Runs    int   // runs of consecutive offsets the set holds
	Offsets int64 // offsets the set holds
}

// Options configure a shard.
type Options struct {
	Config Config
	// Seed seeds the shard's ChaCha8 nonce stream. The zero value draws a seed from
	// crypto/rand, which is what production must do: a seed derived from the partition
	// would repeat nonces across restarts, and an old handle could settle a new lease. Tests inject seeds.
	Seed     [32]byte
	Hooks    Hooks
	Counters *Counters // nil: the shard counts into its own
}

// pending is the state of an unresolved offset that the shard has touched: leased (nonce !=
// 0), delayed by a nack or a backoff (delayed), or released and waiting to be leased again
// (neither). It lies above the frontier, except for a requeued offset, which is delivered
// below it. Offsets never leased in this incarnation have no entry, unless Restore brought
// their attempts or a requeue made them fresh.
type pending struct {
	nonce    uint64 // the live lease's nonce; 0 when not leased
	until    int64  // lease expiry or end of the nack delay, Unix nanoseconds
	leasedAt int64  // when the live lease was granted (its lifetime cap counts from here)
	attempts uint32 // leases granted so far
	reason   Reason // reason of the current lease, or of the next one
	delayed  bool
	// grant says whether the live lease's attempt, counted in attempts, counts yet in what
	// is persisted (see grantKind). It fits in the struct's padding.
	grant grantKind
	// deferred: on an ordered topic, the offset's record was read and waits behind its key
	// (Bind): neither leased nor visible until the key frees. Also in the padding.
	deferred bool
	// key is, on an ordered topic, the key the live lease holds (bound by Bind); 0 when it
	// holds none, and when there is no live lease. The settle that ends the lease finds the
	// key in the entry it looks up anyway, with no lookup of the key index's offsets.
	key uint64
}

// grantKind says whether a live lease's attempt counts yet in what Snapshot persists.
type grantKind uint8

const (
	// grantCounted: an ordinary lease; its attempt counts.
	grantCounted grantKind = iota
	// grantReserved: a reservation (ReserveAhead) not confirmed yet: its attempt does not
	// count until a consumer gets the record, so it is left out of what is persisted, and a
	// lapse or a give-back takes it back.
	grantReserved
	// grantScanned: under MaxDeliveries, a lease a scan was granted and has not handed over
	// yet (Handed): the scan may still give it back or postpone it, uncounted, so its attempt
	// is left out of what is persisted until then. Otherwise a snapshot taken in between,
	// then a crash before the next one, would keep an attempt no consumer got, and the
	// record would be quarantined a delivery early (or, under MaxDeliveries 1, unread).
	grantScanned
)

// reservation reports whether p's live lease is a reservation not confirmed yet.
func (p pending) reservation() bool { return p.grant == grantReserved }

// parkedMark in leasedAt marks a deferred offset parked in the acked-ahead runs (parked.go): a
// deferred offset holds no lease, so the field is free, and the entry needs no flag of its own.
const parkedMark = math.MinInt64

// parked reports whether the offset is deferred and parked in the acked-ahead runs.
func (p pending) parked() bool { return p.deferred && p.leasedAt == parkedMark }

// setParked marks a deferred offset parked, or not.
func (p *pending) setParked(on bool) {
	p.leasedAt = 0
	if on {
		p.leasedAt = parkedMark
	}
}

// A Shard is the in-flight state of one (topic, partition): the committed frontier, the
// leases, the expiry queue, the acked-ahead set, the corrupt-skip set and the quarantine. It
// never reads a clock: every method that depends on time takes now. It is safe for
// concurrent use.
type Shard struct {
	topic     string
	partition int32
	hooks     Hooks
	counters  *Counters

	mu         sync.Mutex
	cfg        Config
	visibility int64 // cfg.VisibilityTimeout in nanoseconds
	dropped    bool
	// handedOff: HandOff fenced the shard for a move, or Depose took it from this node
	// (dropped is set with it). Its settles answer ErrMoved rather than ErrGone: the lease
	// may live on at the next owner.
	handedOff   bool
	incarnation uint64 // State.Incarnation, kept for Snapshot
	host        uint64 // State.HostIncarnation, kept for Snapshot
	epoch       uint64 // State.Epoch, kept for Snapshot
	// grantUntil is when the ownership grant lapses, Unix nanoseconds; 0: never. Read
	// without the lock by Lapsed, so that a caller can learn it needs a renewal first.
	grantUntil atomic.Int64
	frontier   int64
	// cursor is the lowest offset above the frontier not leased in this incarnation: every
	// offset in (frontier, cursor) has been leased, settled or skipped, so the offsets that
	// can be leased below the cursor are exactly the released ones.
	cursor int64
	// pendingAbove is the highest offset at or above the cursor that may have a pending
	// entry (attempts Restore brought, a requeue); above it, an offset at the cursor is
	// fresh and the hot path skips its lookup.
	pendingAbove int64
	// settledAbove is the highest offset the acked-ahead, corrupt-skip and quarantine sets
	// may hold (a bound, never lowered until Restore): above it no offset is settled by
	// them, and isSettled skips their lookups. The cursor runs above it once it has passed
	// what Restore brought, so a fresh offset is never looked up in them.
	settledAbove int64
	pending      leaseTable
	// ahead is the acked-ahead set, kept as runs: its memory, and the snapshot's cost, grow
	// with the runs (the holes below acked offsets), not with the offsets acked.
	ahead   runSet
	corrupt map[int64]struct{}
	// quarantine holds the offsets set aside after MaxDeliveries attempts or a reject (false), and the
	// requeued ones at or below the frontier waiting for delivery again (true). Quarantined
	// offsets count as settled for the frontier; unlike the other sets, entries stay below
	// the frontier, since they are persisted until requeued.
	quarantine map[int64]bool
	requeued   int // entries of quarantine that are requeued
	leased     int // offsets with a live lease
	reserved   int // of them, reservations not confirmed yet (grantReserved)
	delayed    int // offsets invisible until their nack delay ends
	deadlines  deadlineQueue
	released   minHeap[releasedOffset]
	// requeuedDue holds the requeued offsets below the frontier that may be due, lazily as
	// released does: each is pushed when it is requeued and whenever it is released again
	// (expired, nacked, given back, its delay over, its key freed), and an entry counts only
	// if its offset is still requeued and neither leased, delayed nor deferred when it comes
	// to the top. So a reserve finds the lowest due one in O(log n), not by a scan of the
	// whole quarantine (a requeue of a large dead-letter backlog would make draining it
	// quadratic).
	requeuedDue minHeap[releasedOffset]
	// quarantinedAbove counts the entries of quarantine above the frontier that are not
	// requeued: records set aside that no reserve hands out, which Available leaves out. It
	// is kept as the quarantine and the frontier change, so Available never scans the set.
	quarantinedAbove int
	// keys is an ordered topic's key index (Config.Ordered); nil otherwise, so an unordered
	// topic's paths test one pointer.
	keys *keyIndex
	// asked is how many records the last reserve asked for: on an ordered topic, the Bind
	// that follows it in the same scan (ScanLock) takes it for how many records of a key
	// its consume can take at once (keyState.room).
	asked int
	// ordered mirrors keys != nil for Ordered, read without the lock; verifying mirrors
	// keys.verifying for Verifying; countsAttempts mirrors cfg.MaxDeliveries > 0 for Handed.
	ordered, verifying, countsAttempts atomic.Bool
	// scanMu serialises an ordered partition's scans (ScanLock).
	scanMu sync.Mutex
	// nextFresh is the cursor as the last reserve of a fresh offset or a restore left it,
	// or -1 once an offset was released or requeued since (due before any fresh one): read
	// without the lock (NextFresh).
	nextFresh atomic.Int64
	// capped: a reserve found the acked-ahead set at its cap, and it has stayed there since,
	// so only the frontier hole is handed out (a stall episode, counted and reported once
	// when it begins).
	capped bool
	nonces *rand.ChaCha8
	// fence is the latest fencing token: max(previous + 1, grant time), so tokens grow
	// across the shard's leases and, with a clock that moves on, across restarts.
	fence uint64
	// emptyAt is a high watermark at which a reserve hands out nothing (ErrEmpty), or -1:
	// every offset below it settled, none requeued, room under the in-flight cap, nothing
	// unkeyed, as the last reserve left the shard. A reserve at that high watermark answers
	// without the lock (a drained partition that every consume of its topic passes over).
	// It holds while nothing but settles happen: the frontier only rises, and what could
	// make it false sets it back to -1 under mu (a grant, a requeue, a restore, a new
	// config, an unkeyed record).
	emptyAt atomic.Int64
	// dirtyReported: Dirty was called since the last Snapshot, which clears it under mu
	// before it copies the state. A change whose report finds it set is in the snapshot the
	// call that set it leads to: that snapshot clears the flag after the setter's report,
	// and a change made before the clear is copied by it (see Hooks.Dirty).
	dirtyReported atomic.Bool
}

// NewShard returns a shard for (topic, partition) seeded with state and holding no leases.
func NewShard(topic string, partition int32, opts Options, state State) *Shard {
	seed := opts.Seed
	if seed == ([32]byte{}) {
		crand.Read(seed[:]) // never fails (crypto/rand documents it)
	}
	counters := opts.Counters
	if counters == nil {
		counters = new(Counters)
	}
	cfg := opts.Config.withDefaults()
	s := &Shard{
		topic:      topic,
		partition:  partition,
		hooks:      opts.Hooks,
		counters:   counters,
		cfg:        cfg,
		visibility: int64(cfg.VisibilityTimeout),
		corrupt:    make(map[int64]struct{}),
		quarantine: make(map[int64]bool),
		nonces:     rand.NewChaCha8(seed),
	}
	if cfg.Ordered {
		s.keys = newKeyIndex()
		s.ordered.Store(true)
	}
	s.countsAttempts.Store(cfg.MaxDeliveries > 0)
	s.restoreLocked(state)
	return s
}

// Topic returns the shard's topic.
func (s *Shard) Topic() string { return s.topic }

// Partition returns the shard's partition.
func (s *Shard) Partition() int32 { return s.partition }

// Incarnation returns the incarnation of the state the shard was restored from
// (State.Incarnation).
func (s *Shard) Incarnation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.incarnation
}

// Epoch returns the ownership epoch the shard serves under (State.Epoch).
func (s *Shard) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// Lapsed reports whether the ownership grant the shard serves under has lapsed by now. From
// that instant, checked under the shard's lock against the now of each call, the shard is
// frozen: it grants no lease, every settle, requeue and hand-off answers ErrMoved and changes
// nothing, and nothing expires, so no state that a successor may already serve changes here.
// Renew thaws it, when the host says the same grant still holds. It costs one atomic load.
func (s *Shard) Lapsed(now time.Time) bool { return s.lapsedAt(now.UnixNano()) }

func (s *Shard) lapsedAt(now int64) bool {
	until := s.grantUntil.Load()
	return until != 0 && now >= until
}

// Renew moves the lapse of the shard's grant to until, if that is later (a renewal of the
// same grant: the host's lease was kept alive). A grant that never lapses stays so.
func (s *Shard) Renew(until time.Time) {
	at := max(until.UnixNano(), 1)
	for {
		old := s.grantUntil.Load()
		if old == 0 || at <= old || s.grantUntil.CompareAndSwap(old, at) {
			return
		}
	}
}

// Restore reseeds the shard with persisted state, as after a restart: every lease, delay,
// release and corrupt skip is forgotten, and every offset above the frontier that is not
// acked ahead will be delivered again. Handles issued before never match a
// lease issued after, since the nonce stream goes on.
func (s *Shard) Restore(state State) {
	s.mu.Lock()
	s.restoreLocked(state)
	s.mu.Unlock()
}

func (s *Shard) restoreLocked(state State) {
	s.emptyAt.Store(-1)
	s.frontier, s.incarnation, s.host, s.epoch = state.Frontier, state.Incarnation, state.HostIncarnation, state.Epoch
	s.grantUntil.Store(0)
	if !state.GrantUntil.IsZero() {
		s.grantUntil.Store(max(state.GrantUntil.UnixNano(), 1))
	}
	s.cursor = state.Frontier + 1
	s.nextFresh.Store(s.cursor)
	s.pending.reset()
	s.ahead.reset()
	s.capped = false
	clear(s.corrupt)
	clear(s.quarantine)
	s.leased, s.delayed, s.requeued, s.reserved, s.quarantinedAbove = 0, 0, 0, 0, 0
	s.verifying.Store(false)
	if s.keys != nil || len(state.KeyTails) > 0 {
		// A state with key tails is ordered until its tails are verified, whatever the
		// topic says now (see parked.go).
		s.keys = newKeyIndex()
		s.ordered.Store(true)
	}
	s.deadlines.reset()
	s.released = s.released[:0]
	s.requeuedDue = s.requeuedDue[:0]
	s.settledAbove = s.frontier
	for _, r := range state.AckedAhead {
		if first := max(r.First, s.frontier+1); first <= r.Last {
			s.ahead.add(first, r.Last)
			s.settledAbove = max(s.settledAbove, r.Last)
		}
	}
	if len(state.KeyTails) > 0 {
		s.restoreTailsLocked(state.KeyTails)
	}
	for _, off := range state.Quarantined {
		if off > s.frontier && s.ahead.contains(off) {
			// Acked ahead and quarantined both (a state no shard writes): quarantined, so
			// that Requeue still brings it back, and counted once (quarantinedAbove).
			s.ahead.delete(off)
		}
		s.setQuarantine(off, false)
	}
	for _, off := range state.Requeued {
		if off <= s.frontier {
			s.setQuarantine(off, true)
			s.pending.set(off, pending{reason: ReasonRequeued})
		}
	}
	s.pendingAbove = s.frontier
	for _, a := range state.Attempts {
		if a.Offset > s.frontier && (!s.ahead.contains(a.Offset) || s.unverifiedAt(a.Offset)) && a.Count > 0 {
			s.pending.set(a.Offset, pending{attempts: a.Count, reason: ReasonRestart})
			s.pendingAbove = max(s.pendingAbove, a.Offset)
		}
	}
	for _, h := range state.Held {
		s.restoreHeldLocked(h)
	}
	for _, off := range state.Corrupt {
		if off > s.frontier && !s.isSettled(off) {
			if _, held := s.pending.get(off); !held {
				s.corrupt[off] = struct{}{}
				s.settledAbove = max(s.settledAbove, off)
			}
		}
	}
	s.fence = max(s.fence, state.Fence)
	if s.keys != nil {
		// Nothing is parked below an ack the index does not know of: acked ahead before, or
		// of a lease a move brought above the cursor (acked here later, unbound, or bound
		// and its key forgotten with what the key knew).
		s.keys.parkFrom = s.settledAbove + 1
		if n := len(state.Held); n > 0 {
			s.keys.heldHigh = slices.MaxFunc(state.Held, func(a, b Held) int { return cmp.Compare(a.Offset, b.Offset) }).Offset
			s.keys.parkFrom = max(s.keys.parkFrom, s.keys.heldHigh+1)
		}
		s.restoreQuarantinedKeysLocked()
	}
	s.advanceLocked()
}

// restoreHeldLocked installs what a move carried of one unresolved offset, over the entry
// its attempts made. An offset the state settles, or one already held (the same offset
// twice), is skipped. A lease or a delay above the cursor stays where it is: the reserve
// that reaches it steps over it (see reserveLocked).
func (s *Shard) restoreHeldLocked(h Held) {
	off := h.Offset
	requeued, quarantined := s.quarantine[off]
	switch {
	case s.ahead.contains(off) && !(s.unverifiedAt(off) && h.Nonce == 0 && !h.Delayed):
		return // settled, unless a parked record's attempts (Verify tells which)
	case quarantined && !requeued, off <= s.frontier && !requeued:
		return
	}
	if old, ok := s.pending.get(off); ok && (old.nonce != 0 || old.delayed) {
		return
	}
	p := pending{attempts: h.Attempts, reason: h.Reason}
	switch {
	case h.Nonce != 0:
		p.nonce, p.until, p.leasedAt = h.Nonce, h.Until.UnixNano(), h.LeasedAt.UnixNano()
		s.leased++
		s.deadlines.push(deadline{at: p.until, offset: off, nonce: p.nonce})
	case h.Delayed:
		p.delayed, p.until = true, h.Until.UnixNano()
		s.delayed++
		s.deadlines.push(deadline{at: p.until, offset: off})
	}
	s.pending.set(off, p)
	if off > s.frontier {
		s.pendingAbove = max(s.pendingAbove, off)
	}
}

// SetConfig changes the shard's settings. Live leases keep their expiry.
//
// Made unordered (Config.Ordered cleared), the shard makes the records deferred behind their
// keys visible at once and keeps keys no more: neither one holder per key nor a key's order (a
// shard restored with key tails stays ordered until they are verified: see Verifying). Made
// ordered again, it starts with an empty key index: the leases live then hold no key, and a
// record leased or delayed then is ordered only from its next delivery (a later record of its
// key may go first). With QuarantineKeys set anew, it learns the keys of its quarantined
// records before it hands out anything (Verifying); cleared, each quarantined record is alone
// in the quarantine, and a record out of it and not settled (requeued) is ordered only from
// its next delivery under QuarantineKeys, as one requeued while the setting is unset.
func (s *Shard) SetConfig(cfg Config) {
	cfg = cfg.withDefaults()
	s.mu.Lock()
	s.emptyAt.Store(-1)
	was, wasOrdered := s.cfg.QuarantineKeys, s.keys != nil
	s.cfg = cfg
	s.countsAttempts.Store(cfg.MaxDeliveries > 0)
	s.visibility = int64(cfg.VisibilityTimeout)
	s.checkCapLocked()
	var fx effects
	s.orderLocked(&fx)
	switch {
	case s.keys == nil:
	case cfg.QuarantineKeys && (!was || !wasOrdered):
		s.restoreQuarantinedKeysLocked() // the keys of what is quarantined are not known yet
	case !cfg.QuarantineKeys && was:
		s.dropQuarantinedKeysLocked(&fx)
	}
	s.mu.Unlock()
	s.report(&fx)
}

// ReserveNext leases the lowest unresolved offset above the frontier and below hwm (the
// log's high watermark: the next offset to be written), after purging expired leases; a
// requeued offset below the frontier goes first. The caller reads the record only after this
// returns (a reservation precedes every read: invariant "one live holder"), then hands the
// record over (Handed) and settles the lease, or gives it back with GiveBack, Postpone,
// SkipCorrupt or SkipRetention. With MaxDeliveries set, an offset whose restored attempts
// already reached it is quarantined rather than leased (its last delivery died with the
// previous process).
//
// It hands out nothing, with ErrEmpty, ErrAllReserved, ErrInFlightCap or ErrAckedAheadCap,
// when there is nothing above the frontier, when everything there is leased or resolved,
// when the in-flight cap is reached, or when the acked-ahead set is full and its frontier
// hole is taken.
func (s *Shard) ReserveNext(now time.Time, hwm int64) (Lease, error) {
	return s.ReserveNextFor(now, hwm, 0)
}

// ReserveNextFor is ReserveNext with a lease that lasts visibility (a consume that asks for
// its own visibility timeout); zero means the topic's, and a negative one or one above
// MaxVisibility is ErrInvalidDuration.
func (s *Shard) ReserveNextFor(now time.Time, hwm int64, visibility time.Duration) (Lease, error) {
	if visibility < 0 || visibility > MaxVisibility {
		return Lease{}, ErrInvalidDuration
	}
	at := now.UnixNano()
	if s.drainedAt(hwm, at) {
		return Lease{}, ErrEmpty
	}
	var lease Lease
	var fx effects
	s.mu.Lock()
	s.purgeLocked(at, &fx)
	s.asked = 1
	err := s.reserveLocked(at, hwm, int64(visibility), s.scanGrantLocked(), &lease, &fx)
	s.noteEmptyLocked(hwm, err)
	s.mu.Unlock()
	if err == nil {
		s.counters.Delivered.Add(1)
		fx.deadline = lease.Expiry.UnixNano()
	}
	s.report(&fx)
	return lease, err
}

// CountsAttempts reports whether the shard counts attempts in what it persists
// (Config.MaxDeliveries set): whether Handed does anything.
func (s *Shard) CountsAttempts() bool { return s.countsAttempts.Load() }

// Handed says that the records of leases, granted to a scan (ReserveNext, ReserveNextFor,
// ReserveBatch, ReserveDueKeyed), were read and go to their consumers. Under MaxDeliveries
// their attempts count in what Snapshot persists only from then on (and Dirty is reported):
// until then the scan may still give a lease back or postpone it, uncounted, and a snapshot
// taken in between, then a crash before the next one, would keep an attempt no consumer
// got. A lease that is no longer live, or no longer this grant (given back, deferred behind
// its key, settled, leased again), is passed over, so the caller may pass every lease it was
// granted. A settle of the lease (Ack, Extend, Nack, Reject) or its expiry counts it too.
// Without MaxDeliveries it does nothing, and takes no lock.
func (s *Shard) Handed(leases []Lease) {
	if len(leases) == 0 || !s.countsAttempts.Load() {
		return
	}
	var fx effects
	s.mu.Lock()
	for i := range leases {
		h := leases[i].Handle
		// In its ring slot, the usual place, the entry is changed in place (liveEntry's
		// caller checks what liveLease checks of the shard and the partition).
		if e := s.liveEntry(h); e != nil && !s.dropped && !s.handedOff && h.Partition == s.partition {
			if e.grant == grantScanned {
				e.grant = grantCounted
				fx.dirty = true
			}
		} else if p, err := s.liveLease(h); err == nil && p.grant == grantScanned {
			p.grant = grantCounted
			s.pending.set(h.Offset, p)
			fx.dirty = true
		}
	}
	s.mu.Unlock()
	s.report(&fx)
}

// ReserveBatch leases up to max offsets (at least one is tried) under one acquisition of the
// shard's lock and appends their leases to into, in the order they were granted: each lease
// is the one the next of max ReserveNextFor calls at now would grant (its own nonce, expiry,
// attempt, reason and fence; the in-flight and acked-ahead caps count every lease before
// it), and the hooks report once for the whole batch. It stops at the first reserve that
// would fail: with at least one lease granted the error is nil; with none it is what
// ReserveNextFor answers. The caller reads each record only after this returns, gives back
// with GiveBack whatever it does not deliver, and hands over (Handed) what it does.
func (s *Shard) ReserveBatch(now time.Time, hwm int64, visibility time.Duration, max int, into []Lease) ([]Lease, error) {
	return s.reserveBatch(now, hwm, visibility, max, into, false)
}

// ReserveAhead is ReserveBatch for a gateway that reads ahead for its consumers: it asks for
// records before a consumer wants them, holds them briefly, and gives back those it does not
// hand over. Its leases are reservations, granted exactly as ReserveBatch grants (nonce,
// expiry, fence, reason, and Attempt the attempt the delivery will be), but a reservation is
// not a delivery: its attempt counts only once a consumer gets the record, which Confirm
// says (or, implicitly, an Extend, Nack or Reject of the lease; an Ack resolves it as well).
// Until then:
//
//   - its expiry releases it uncounted: visible again at once, with no backoff, no
//     MaxDeliveries quarantine, the reason it had before, a wake, and no Counters.Expired;
//   - GiveBack releases it uncounted, as it releases any lease;
//   - Snapshot leaves its attempt out, so an owner crash does not count it either.
//
// So that two gateways and the owner's own consumers all get records, it grants at most
// max(1, (MaxInFlight - leased)/2) leases, leased being the live leases when the call starts
// (after its purge): one at least while the in-flight cap leaves room, none at the cap
// (ErrInFlightCap). Counters.Reserved counts the reservations; Counters.Delivered counts
// them only as they are confirmed.
//
// A move carries a reservation as an ordinary counted lease (State.Held has no field for it,
// and the move format stays as it is): one that crosses a move and then lapses at the new
// owner counts one attempt there; one given back there (GiveBack) is uncounted, as always.
func (s *Shard) ReserveAhead(now time.Time, hwm int64, visibility time.Duration, max int, into []Lease) ([]Lease, error) {
	return s.reserveBatch(now, hwm, visibility, max, into, true)
}

// reserveBatch is ReserveBatch, or ReserveAhead when reserved: its leases are reservations
// then, and their number is capped at a share of the in-flight room.
func (s *Shard) reserveBatch(now time.Time, hwm int64, visibility time.Duration, max int, into []Lease, reserved bool) ([]Lease, error) {
	if visibility < 0 || visibility > MaxVisibility {
		return into, ErrInvalidDuration
	}
	at := now.UnixNano()
	if s.drainedAt(hwm, at) {
		return into, ErrEmpty
	}
	max = builtinMax(max, 1)
	into = slices.Grow(into, max)
	first := len(into)
	var fx effects
	var err error
	s.mu.Lock()
	// One purge serves the whole batch: at the same now, a second finds nothing due (every
	// lease granted here expires after now) and no stale top (a reserve never touches an
	// offset with a live deadline).
	s.purgeLocked(at, &fx)
	s.asked = max
	grant := grantReserved
	if reserved {
		// A share of the room left, so that a gateway reading ahead does not take it all.
		max = min(max, builtinMax(1, (s.cfg.MaxInFlight-s.leased)/2))
	} else {
		grant = s.scanGrantLocked()
	}
	for range max {
		into = into[:len(into)+1]
		if err = s.reserveLocked(at, hwm, int64(visibility), grant, &into[len(into)-1], &fx); err != nil {
			into = into[:len(into)-1]
			break
		}
	}
	if len(into) > first {
		s.noteEmptyLocked(hwm, nil)
	} else {
		s.noteEmptyLocked(hwm, err)
	}
	s.mu.Unlock()
	if granted := into[first:]; len(granted) > 0 {
		err = nil
		if reserved {
			s.counters.Reserved.Add(uint64(len(granted)))
		} else {
			s.counters.Delivered.Add(uint64(len(granted)))
		}
		fx.deadline = granted[0].Expiry.UnixNano()
		for i := range granted[1:] {
			fx.deadline = min(fx.deadline, granted[i+1].Expiry.UnixNano())
		}
	}
	s.report(&fx)
	return into, err
}

// drainedAt reports whether a reserve at hwm and now hands out nothing because every offset
// below hwm is settled (emptyAt), without taking the lock. A lapsed grant takes the slow
// path, which answers ErrMoved.
func (s *Shard) drainedAt(hwm, now int64) bool {
	return s.emptyAt.Load() == hwm && !s.lapsedAt(now)
}

// noteEmptyLocked sets emptyAt after a reserve at hwm that answered err: hwm when the shard
// is drained below it (ErrEmpty, and nothing a settle can change: see emptyAt), -1
// otherwise. A grant always leaves -1: leases count against the cap.
func (s *Shard) noteEmptyLocked(hwm int64, err error) {
	at := int64(-1)
	if err == ErrEmpty && !s.dropped && s.frontier+1 >= hwm && s.requeued == 0 &&
		s.leased < s.cfg.MaxInFlight && (s.keys == nil || len(s.keys.unkeyed) == 0) {
		at = hwm
	}
	if s.emptyAt.Load() != at {
		s.emptyAt.Store(at)
	}
}

// builtinMax is max, for where a parameter named max hides it.
func builtinMax(a, b int) int { return max(a, b) }

// scanGrantLocked is how a scan's lease is granted (ReserveNext, ReserveBatch,
// ReserveDueKeyed): under MaxDeliveries, its attempt persisted only once the scan hands the
// record over (see grantScanned).
func (s *Shard) scanGrantLocked() grantKind {
	if s.cfg.MaxDeliveries > 0 {
		return grantScanned
	}
	return grantCounted
}

// reserveLocked grants the lease ReserveNext would, as grant says.
func (s *Shard) reserveLocked(now, hwm, visibility int64, grant grantKind, lease *Lease, fx *effects) error {
	if s.dropped {
		return ErrEmpty
	}
	if s.lapsedAt(now) {
		return ErrMoved
	}
	if s.leased >= s.cfg.MaxInFlight {
		return ErrInFlightCap
	}
	for {
		off, err := s.chooseLocked(hwm, fx)
		if err != nil {
			return err
		}
		// A fresh offset (at the cursor, above every pending entry Restore or a requeue
		// made) has no pending entry: its lookups are skipped.
		fresh := off >= s.cursor && off > s.pendingAbove
		s.passCursorLocked(off)
		if !fresh {
			p, ok := s.pending.get(off)
			switch {
			case ok && (p.nonce != 0 || p.delayed || p.deferred):
				// A lease or a delay a move brought, above the cursor: not to be leased.
				continue
			case ok && s.cfg.MaxDeliveries > 0 && int(p.attempts) >= s.cfg.MaxDeliveries:
				// Its last delivery was in flight when the process died (attempts persist,
				// leases do not): that lease ended unsettled, so it is quarantined now.
				s.quarantineLocked(off, p.attempts, fx)
				s.unkeyedLocked(off) // unread: its key is learnt before anything else goes
				continue
			}
		}
		s.grantLocked(now, visibility, off, fresh, grant, 0, lease)
		return nil
	}
}

// passCursorLocked moves the cursor past off, an offset just chosen, if it was not past it.
func (s *Shard) passCursorLocked(off int64) {
	if off >= s.cursor {
		s.cursor = off + 1
		s.nextFresh.Store(s.cursor)
	}
}

// chooseLocked picks the offset ReserveNext leases: a requeued one below the frontier first,
// then, at the acked-ahead cap, only the frontier hole; otherwise the lowest released offset,
// or the cursor. A reserve that finds the cap reached, after one that did not, begins a
// stall episode: it is counted and reported (fx).
func (s *Shard) chooseLocked(hwm int64, fx *effects) (int64, error) {
	hole := s.frontier + 1
	if s.keys != nil {
		if len(s.keys.unkeyed) > 0 {
			return 0, ErrUnverified // any record could follow a quarantined one of its key
		}
		if len(s.keys.awaiting) > 0 {
			s.releaseAwaitingLocked(fx)
		}
	}
	var off int64
	switch {
	case s.requeued > 0 && s.lowestRequeued(&off):
		return off, nil
	case hole >= hwm:
		return 0, ErrEmpty
	case s.atAckedAheadCap():
		if !s.capped {
			s.capped = true
			s.counters.AckedAheadStalls.Add(1)
			fx.stalled = true
			fx.stall = AckedAheadStall{Hole: hole, Runs: s.ahead.runs, Offsets: s.ahead.offsets}
		}
		// At the acked-ahead cap only the frontier hole is handed out, so that the gap can
		// close and the set drain. The hole is never settled: the frontier
		// would have advanced over it.
		// A hole deferred behind its key (held by a later record's lease) waits as a leased
		// one does: returned, reserveLocked would pass over it and choose it again, forever.
		if p := s.pending.lookup(hole); p.nonce != 0 || p.delayed || p.deferred {
			return 0, ErrAckedAheadCap
		}
		if s.unverifiedAt(hole) {
			return 0, ErrUnverified
		}
		return hole, nil
	}
	if lowest, ok := s.lowestReleased(); ok && lowest < hwm {
		s.released.pop()
		return lowest, nil
	}
	if s.unverifiedAt(s.cursor) {
		return 0, ErrUnverified
	}
	// Past what Restore brought settled above the frontier, each passed once: a run acked
	// ahead in one step.
	for s.cursor <= s.settledAbove {
		if r, ok := s.ahead.runAt(s.cursor); ok {
			if s.keys != nil && s.keys.verifying && r.Last >= s.keys.verifyNext {
				// Records of restored key tails may lie from there: not passed unverified.
				s.cursor = max(s.cursor, s.keys.verifyNext)
				return 0, ErrUnverified
			}
			if r.Last >= hwm {
				s.cursor = hwm // the rest of the run waits for the log to grow (and r.Last+1 may not exist)
				break
			}
			s.cursor = r.Last + 1
			continue
		}
		if !s.isSettled(s.cursor) {
			break
		}
		s.cursor++
	}
	if s.cursor >= hwm {
		return 0, ErrAllReserved
	}
	if s.keys != nil && s.keys.deferred >= s.cfg.MaxDeferred && len(s.keys.awaiting) == 0 {
		// (Records a restore's tails verified wait for the holes below them to be read:
		// those are read whatever the bound.)
		// New records would only be deferred behind their keys past the bound: the
		// partition hands out only what it read already until the keys free.
		if !s.keys.capped {
			s.keys.capped = true
			s.counters.DeferredStalls.Add(1)
		}
		return 0, ErrDeferredCap
	}
	if s.keys != nil {
		s.keys.capped = false
	}
	return s.cursor, nil
}

// atAckedAheadCap reports whether the acked-ahead set is at its cap: as many runs as
// MaxAckedAheadRuns, or as many offsets as MaxAckedAhead.
func (s *Shard) atAckedAheadCap() bool {
	return s.ahead.runs >= s.cfg.MaxAckedAheadRuns || s.ahead.offsets >= int64(s.cfg.MaxAckedAhead)
}

// checkCapLocked ends a stall episode once the acked-ahead set is below its cap again: the
// frontier advanced over runs, an ack joined two runs, or the caps were raised.
func (s *Shard) checkCapLocked() {
	if s.capped && !s.atAckedAheadCap() {
		s.capped = false
	}
}

// lowestReleased returns the lowest offset of the released heap that is still released,
// dropping stale entries from its top.
func (s *Shard) lowestReleased() (int64, bool) {
	for len(s.released) > 0 {
		off := int64(s.released[0])
		if p, ok := s.pending.get(off); ok && off > s.frontier && off < s.cursor && p.nonce == 0 && !p.delayed && !p.deferred {
			return off, true
		}
		s.released.pop()
	}
	return 0, false
}

func (s *Shard) isSettled(off int64) bool {
	if off <= s.frontier {
		return true
	}
	if off > s.settledAbove {
		return false
	}
	// The size checks skip the lookups on the common path, where the sets are empty.
	if s.ahead.runs > 0 && s.ahead.contains(off) {
		return s.keys == nil || !s.parkedAt(off)
	}
	if len(s.corrupt) > 0 {
		if _, ok := s.corrupt[off]; ok {
			return true
		}
	}
	if len(s.quarantine) > 0 {
		requeued, ok := s.quarantine[off]
		return ok && !requeued
	}
	return false
}

// grantLocked leases off for visibility (0 or less: the shard's), as grant says, bound to
// key (0: none, or not yet: see Bind), and fills lease.
func (s *Shard) grantLocked(now, visibility, off int64, fresh bool, grant grantKind, key uint64, lease *Lease) {
	if visibility <= 0 {
		visibility = s.visibility
	}
	expiry := s.capLifetime(now, now+visibility)
	var p pending
	if !fresh {
		p = s.pending.lookup(off)
	}
	p.attempts++
	p.nonce, p.key = s.nextNonce(), key
	p.until = expiry
	p.leasedAt = now
	s.fence = max(s.fence+1, uint64(max(now, 0)))
	p.delayed = false
	p.grant = grant
	s.pending.set(off, p)
	s.leased++
	if grant == grantReserved {
		s.reserved++
	}
	s.pushDeadline(deadline{at: p.until, offset: off, nonce: p.nonce})
	*lease = Lease{
		Handle:  Handle{Partition: s.partition, Offset: off, Nonce: p.nonce},
		Expiry:  time.Unix(0, p.until),
		Attempt: p.attempts,
		Reason:  p.reason,
		Fence:   s.fence,
	}
}

// nextNonce draws a nonzero nonce (zero marks "no lease" in pending and in a handle).
func (s *Shard) nextNonce() uint64 {
	for {
		if n := s.nonces.Uint64(); n != 0 {
			return n
		}
	}
}

// pushDeadline adds d to the expiry queue and compacts the queue once stale entries outnumber
// the live ones (one per lease and per delay), which keeps it O(1) amortized per push.
func (s *Shard) pushDeadline(d deadline) {
	s.deadlines.push(d)
	if live := s.leased + s.delayed; s.deadlines.len() > 2*live+64 {
		s.deadlines.retain(s.isLiveDeadline)
	}
}

// isLiveDeadline reports whether d is the current deadline of a lease or of a nack delay.
func (s *Shard) isLiveDeadline(d deadline) bool {
	p, ok := s.pending.get(d.offset)
	if !ok || p.until != d.at {
		return false
	}
	if d.nonce == 0 {
		return p.delayed
	}
	return p.nonce == d.nonce
}

// Purge releases every lease whose expiry is at or before now and ends every nack delay that
// is over, and returns how many it released. It reports a wake if any. The node's 1 s
// sweeper calls it; every other method purges too.
func (s *Shard) Purge(now time.Time) int {
	var fx effects
	s.mu.Lock()
	s.purgeLocked(now.UnixNano(), &fx)
	s.mu.Unlock()
	s.report(&fx)
	return fx.released
}

// purgeLocked pops due deadlines. A lease is live only while now < expiry.
// An expired lease is released (or delayed by the backoff policy, or quarantined); a delay
// that ended makes its offset visible again.
func (s *Shard) purgeLocked(now int64, fx *effects) {
	if s.dropped || s.lapsedAt(now) {
		return // a dropped, handed-off or lapsed shard's state is frozen: nothing it holds is served
	}
	for first, ok := s.deadlines.first(); ok && first.at <= now; first, ok = s.deadlines.first() {
		d := s.deadlines.pop()
		if !s.isLiveDeadline(d) {
			continue // superseded by an extend, or the lease was settled or released
		}
		p := s.pending.lookup(d.offset)
		if d.nonce == 0 {
			p.delayed = false
			s.delayed--
			s.releaseLocked(d.offset, p, fx)
			continue
		}
		if p.reservation() {
			s.lapseLocked(now, d.offset, p, fx) // handed to no consumer: not an expiry
			continue
		}
		s.counters.Expired.Add(1)
		s.endLeaseLocked(d.offset, p, d.at, now, ReasonExpired, 0, fx)
	}
	// Stale entries above now stay until NextDeadline drops them (or a compaction, or a
	// settle's dropHeadOf): looking the top's lease up on every reserve and settle cost a
	// lookup each, and a far one (a lease held long, far below the others) a map's.
}

// NextDeadline returns when the earliest lease of the shard expires or nack delay ends, as of
// its last touch; ok is false when there is none.
func (s *Shard) NextDeadline() (at time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Stale entries off the top first (each is popped once, now or later), so that the top
	// is the next real deadline and the purger sleeps until then.
	s.deadlines.dropStale(s.isLiveDeadline)
	first, ok := s.deadlines.first()
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, first.at), true
}

// releaseLocked makes the unleased offset off visible again at once.
func (s *Shard) releaseLocked(off int64, p pending, fx *effects) {
	s.pending.set(off, p)
	if off > s.frontier {
		s.released.push(releasedOffset(off))
		s.nextFresh.Store(-1) // due before any fresh offset
	} else if requeued := s.quarantine[off]; requeued {
		s.requeuedDue.push(releasedOffset(off))
	}
	fx.released++
}

// Ack settles the lease h names: the frontier advances over the contiguous settled run, or
// the offset is parked in the acked-ahead set until the gap beneath it closes. Only the live
// lease's handle settles (invariant "the nonce is the authority"); an expired lease is gone even when nobody leased
// the offset again. An ack of a settled offset gets ErrAlreadySettled.
// Acks are always accepted at the acked-ahead cap.
func (s *Shard) Ack(now time.Time, h Handle) error {
	_, err := s.settle(now, h, opAck, 0)
	return err
}

// AckMany acks the leases handles name, in order, under one acquisition of the shard's lock,
// and sets errs[i] to what Ack(now, handles[i]) would have answered (a handle repeated in
// handles is settled by its first ack and answers ErrAlreadySettled after). The hooks report
// once for all of them. errs must be at least as long as handles.
func (s *Shard) AckMany(now time.Time, handles []Handle, errs []error) {
	errs = errs[:len(handles)]
	at := now.UnixNano()
	var fx effects
	var acked, gone, settled uint64
	s.mu.Lock()
	// As a single ack does, it first purges what fell due; at the same now nothing else falls
	// due after that (an ack sets no deadline). An ack whose lease holds the head of the
	// expiry queue's run, as it does for leases acked in the order they were granted (even
	// behind an earlier lease extended and extended again), takes that entry out itself: it
	// is stale now, and no lookup is needed to know it. Other stale entries wait for a later
	// purge or compaction, as single acks leave theirs.
	if len(handles) > 0 {
		s.purgeLocked(at, &fx)
	}
	lapsed := s.lapsedAt(at)
	served := !s.handedOff && !s.dropped // liveLease's tests of the shard, once for the call
	for i, h := range handles {
		var key uint64 // the key the lease holds (pending.key)
		var err error
		if e := s.liveEntry(h); e != nil && served && h.Partition == s.partition {
			key = e.key
		} else {
			var p pending
			p, err = s.liveLease(h)
			key = p.key
		}
		if lapsed {
			err = ErrMoved
		}
		switch err {
		case nil:
			acked++
			if s.reserved > 0 {
				s.ackReservationLocked(h.Offset, &fx)
			}
			s.deadlines.dropHeadOf(h.Offset, s.isLiveDeadline)
			s.resolveLocked(h.Offset, key, false, &fx)
		case ErrGone:
			gone++
		case ErrAlreadySettled:
			settled++
		}
		errs[i] = err
	}
	s.mu.Unlock()
	if acked > 0 {
		s.counters.Acked.Add(acked)
	}
	if gone > 0 {
		s.counters.Gone.Add(gone)
	}
	if settled > 0 {
		s.counters.AlreadySettled.Add(settled)
	}
	s.report(&fx)
}

// ackReservationLocked counts, for AckMany, the ack of off's live lease as a confirm if it
// is a reservation: a consumer got the record. It is called only while the shard holds
// reservations, and out of line, which keeps AckMany's loop as fast as it was without them.
//
//go:noinline
func (s *Shard) ackReservationLocked(off int64, fx *effects) {
	if s.pending.lookup(off).reservation() {
		s.reserved--
		fx.delivered++
	}
}

// Extend re-arms the lease h names to expire d after now (the visibility timeout when d is
// zero; a negative d or one above MaxVisibility is ErrInvalidDuration and changes nothing),
// with a fresh heap entry; the old one is skipped when popped. It returns
// the new expiry, which the topic's MaxExtension and MaxLeaseLifetime may cap below what was
// asked, so a stuck consumer cannot hold a record forever.
func (s *Shard) Extend(now time.Time, h Handle, d time.Duration) (time.Time, error) {
	if d < 0 || d > MaxVisibility {
		return time.Time{}, ErrInvalidDuration
	}
	expiry, err := s.settle(now, h, opExtend, d)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, expiry), nil
}

func (s *Shard) extendLocked(now int64, h Handle, p pending, d time.Duration, fx *effects) int64 {
	expiry := s.extendedExpiry(now, p, d)
	if expiry != p.until {
		// The old deadline is spent: off the top at once if it is there (purges leave spent
		// entries on top), so that a lease held long does not leave one there each time.
		s.deadlines.dropSpent(deadline{at: p.until, offset: h.Offset, nonce: h.Nonce})
		p.until = expiry
		s.pending.set(h.Offset, p)
		s.pushDeadline(deadline{at: expiry, offset: h.Offset, nonce: h.Nonce})
	}
	s.counters.Extended.Add(1)
	fx.deadline = expiry
	return expiry
}

// Nack releases the lease h names. The offset stays invisible for delay (no hot redelivery
// loop while a dependency fails) and the expiry machinery wakes it then; with delay zero it
// waits what the topic's Backoff policy says, and with no policy it is visible again at once
// and a wake is reported. A record whose attempts reached the topic's MaxDeliveries is
// quarantined instead. A negative delay or one above MaxDelay is ErrInvalidDuration and
// changes nothing.
func (s *Shard) Nack(now time.Time, h Handle, delay time.Duration) error {
	if delay < 0 || delay > MaxDelay {
		return ErrInvalidDuration
	}
	_, err := s.settle(now, h, opNack, delay)
	return err
}

// NackNow is Nack that makes the record visible again at once, whatever the topic's Backoff
// policy (a wake is reported): the delivery still counts as an attempt, so MaxDeliveries
// may quarantine the record instead, unlike GiveBack. It is SQS's ChangeMessageVisibility
// to 0, which counts the receive and makes the message receivable now.
func (s *Shard) NackNow(now time.Time, h Handle) error {
	_, err := s.settle(now, h, opNack, noBackoff)
	return err
}

// GiveBack releases the lease h names as if it had never been granted: the attempt is not
// counted and no wake is reported. The scan gives back a reservation whose read found the
// log closed (a closed log is transient, not a gap); the pump gives back a record whose
// consumer left at the instant it was handed over.
func (s *Shard) GiveBack(now time.Time, h Handle) error {
	_, err := s.settle(now, h, opGiveBack, 0)
	return err
}

// giveBackLocked releases the lease p of off uncounted. Under MaxDeliveries the attempt
// count is persisted state, so the uncounting is too: the shard is reported dirty (else the
// count the lease's grant persisted comes back at the next start, and the record is
// quarantined a delivery early). It reports no wake: the caller decides (see GiveBack).
//
// A reservation (ReserveAhead) given back is an unused one (Counters.Unused); its attempt was
// never persisted, so nothing is reported dirty for it.
func (s *Shard) giveBackLocked(now, off int64, p pending, fx *effects) {
	key := p.key
	s.withdrawLocked(&p, fx)
	if s.keys != nil {
		s.unbindLocked(off, key, true, now, fx)
	}
	var release effects
	s.releaseLocked(off, p, &release)
}

// withdrawLocked takes back the live lease *p as if it was never granted: its attempt is not
// spent, a reservation counts as unused, and under MaxDeliveries the uncounting of a grant's
// attempt, which may be persisted already, is persisted too. The caller stores *p.
func (s *Shard) withdrawLocked(p *pending, fx *effects) {
	p.nonce, p.key = 0, 0
	p.attempts--
	s.leased--
	switch p.grant {
	case grantReserved:
		s.reserved--
		fx.unused++
	case grantCounted:
		fx.dirty = fx.dirty || s.cfg.MaxDeliveries > 0
	} // a scan's lease not handed over yet: its attempt was never persisted
	p.grant = grantCounted
}

// Reject settles the lease h names as failed for good, as Kafka share groups' REJECT and
// JetStream's TERM do: the record is quarantined at once, whatever its attempts and the
// topic's MaxDeliveries, exactly as one that reached MaxDeliveries is (the frontier passes
// over it, the quarantine is persisted and reported through Hooks.Quarantine, and Requeue
// brings it back). A handle that names no live lease gets ErrGone or ErrAlreadySettled, as
// for Ack, and changes nothing.
func (s *Shard) Reject(now time.Time, h Handle) error {
	_, err := s.settle(now, h, opReject, 0)
	return err
}

// SkipCorrupt settles the lease h names as a permanently unreadable record: the offset goes
// into the corrupt-skip set (memory only; the next incarnation finds it again by reading)
// and the frontier advances over it as over an acked offset.
func (s *Shard) SkipCorrupt(now time.Time, h Handle) error {
	_, err := s.settle(now, h, opSkipCorrupt, 0)
	return err
}

// Confirm says a consumer got the record of the reservation h names (ReserveAhead): the
// reservation becomes an ordinary lease, whose attempt counts from now on (under
// MaxDeliveries it is persisted, and Dirty is reported as for a grant), and Counters.Delivered
// counts the delivery. A live lease that is not a reservation (one granted by ReserveNext,
// or a reservation confirmed already, explicitly or by an Extend or a Nack) is left as it is
// and nil is answered, so a confirm may be repeated or come late. A handle that names no live
// lease gets ErrGone, ErrAlreadySettled or ErrMoved, as for Ack, and changes nothing.
func (s *Shard) Confirm(now time.Time, h Handle) error {
	_, err := s.settle(now, h, opConfirm, 0)
	return err
}

// settleOp is what settle does to a live lease.
type settleOp uint8

const (
	opAck settleOp = iota
	opExtend
	opNack
	opGiveBack
	opSkipCorrupt
	opReject
	opConfirm
)

// settle applies op to the live lease h names, after the purge every touch does, and reports
// the effects once the lock is released. d is the extension or the nack delay. It returns
// the new expiry of an extend.
func (s *Shard) settle(now time.Time, h Handle, op settleOp, d time.Duration) (expiry int64, err error) {
	at := now.UnixNano()
	var fx effects
	s.mu.Lock()
	p, err := s.touchLeaseLocked(at, h, &fx)
	switch {
	case err != nil:
	case op == opConfirm:
		if p.grant != grantCounted {
			s.confirmLocked(h.Offset, &p, &fx)
		}
	default:
		if p.grant != grantCounted && op != opGiveBack && op != opSkipCorrupt {
			// An Ack, Extend, Nack or Reject of a reservation, or of a scan's lease not
			// handed over yet: a consumer got the record, so it is confirmed first, and op
			// acts on an ordinary lease.
			s.confirmLocked(h.Offset, &p, &fx)
		}
		switch op {
		case opAck:
			s.counters.Acked.Add(1)
			s.deadlines.dropHeadOf(h.Offset, s.isLiveDeadline)
			s.resolveLocked(h.Offset, p.key, false, &fx)
		case opExtend:
			expiry = s.extendLocked(at, h, p, d, &fx)
		case opNack:
			s.counters.Nacked.Add(1)
			s.endLeaseLocked(h.Offset, p, at, at, ReasonNacked, d, &fx)
		case opGiveBack:
			s.counters.GivenBack.Add(1)
			s.giveBackLocked(at, h.Offset, p, &fx)
		case opSkipCorrupt:
			if p.reservation() {
				s.reserved-- // never handed over: resolved unconfirmed
			}
			s.counters.CorruptSkipped.Add(1)
			s.resolveLocked(h.Offset, p.key, true, &fx)
		case opReject:
			s.counters.Rejected.Add(1)
			s.leased--
			s.setAsideLocked(h.Offset, p.key, p.attempts, &fx)
		}
	}
	s.mu.Unlock()
	s.report(&fx)
	return expiry, err
}

// confirmLocked makes the live reservation or scan's lease *p of off an ordinary lease: the
// consumer got the record, so its attempt counts from now on (persisted under
// MaxDeliveries, hence dirty), and a reservation's delivery is counted (a scan's was, as it
// was granted).
func (s *Shard) confirmLocked(off int64, p *pending, fx *effects) {
	if p.reservation() {
		s.reserved--
		fx.delivered++
	}
	p.grant = grantCounted
	s.pending.set(off, *p)
	fx.dirty = fx.dirty || s.cfg.MaxDeliveries > 0
}

// lapseLocked releases the reservation p of off at its expiry, uncounted: the gateway that
// held it handed it to no consumer, so its attempt is taken back, and it is visible again
// at once (no backoff, no MaxDeliveries quarantine, its reason as it was before), with a
// wake. Nothing persisted changes: Snapshot never counted the reservation.
func (s *Shard) lapseLocked(now, off int64, p pending, fx *effects) {
	key := p.key
	s.withdrawLocked(&p, fx) // a reservation: counted unused, nothing persisted
	if s.keys != nil {
		s.unbindLocked(off, key, true, now, fx)
	}
	s.releaseLocked(off, p, fx)
}

// touchLeaseLocked returns, after the purge every touch does, the pending state of the live
// lease h names at now, or why there is none: ErrGone and ErrAlreadySettled (counted), or
// ErrMoved for a shard handed off, deposed, or whose grant has lapsed.
func (s *Shard) touchLeaseLocked(now int64, h Handle, fx *effects) (pending, error) {
	s.purgeLocked(now, fx)
	p, err := s.liveLease(h)
	if s.lapsedAt(now) {
		err = ErrMoved
	}
	switch err {
	case ErrGone:
		s.counters.Gone.Add(1)
	case ErrAlreadySettled:
		s.counters.AlreadySettled.Add(1)
	}
	return p, err
}

// liveLease returns the pending state of the live lease h names, or why there is none. The
// lease is looked up first, since a requeued offset is leased below the frontier.
// liveEntry returns the entry of the live lease h names when it is in its ring slot, the
// usual place, for the caller to read before anything writes the table; nil otherwise, for
// liveLease to tell why. With no call in it, it is inlined: an ack's usual path makes none.
// The caller has checked what liveLease checks of the shard and h's partition (served:
// neither handed off nor dropped).
func (s *Shard) liveEntry(h Handle) *pending {
	if e := s.pending.ref(h.Offset); e != nil && e.nonce != 0 && e.nonce == h.Nonce {
		return e
	}
	return nil
}

func (s *Shard) liveLease(h Handle) (pending, error) {
	if s.handedOff {
		return pending{}, ErrMoved
	}
	if s.dropped || h.Partition != s.partition {
		return pending{}, ErrGone
	}
	p, ok := s.pending.get(h.Offset)
	if ok && p.nonce != 0 && p.nonce == h.Nonce {
		return p, nil
	}
	if s.isSettled(h.Offset) {
		return pending{}, ErrAlreadySettled
	}
	return pending{}, ErrGone
}

// resolveLocked settles the leased offset off, acked or skipped as corrupt (key: the key its
// lease holds, as pending.key): at the frontier hole the frontier advances over the
// contiguous settled run; above it, off is parked in the acked-ahead or the corrupt-skip set;
// a requeued offset below the frontier leaves the quarantine for good.
func (s *Shard) resolveLocked(off int64, key uint64, corrupt bool, fx *effects) {
	s.pending.remove(off)
	s.leased--
	if s.keys != nil {
		// unbindLocked's, with a call less on every ack's path.
		switch {
		case key == 0:
			// Queued and leased again, but resolved before its read bound it (a corrupt
			// skip): left at the head of its key's queue, it would block the key for good.
			s.unqueueUnboundLocked(off, fx)
		default:
			if ks := s.keys.byKey.forgetLight(key); ks != nil {
				s.settledHolderLocked(off, key, ks, fx)
			} // else its key, held by this lease alone, went with it
		}
	}
	switch {
	case off <= s.frontier:
		s.clearQuarantine(off)
		fx.dirty = true
	case off != s.frontier+1 && corrupt:
		s.corrupt[off] = struct{}{} // memory only: a restart finds it again by reading
		s.settledAbove = max(s.settledAbove, off)
		// Its reservation's attempt, counted under MaxDeliveries, may be persisted already:
		// the next snapshot drops it, or a restart would quarantine the record unread.
		fx.dirty = fx.dirty || s.cfg.MaxDeliveries > 0
	case off != s.frontier+1:
		s.ahead.insert(off)
		if s.keys != nil {
			s.settledAheadLocked(off)
		}
		s.checkCapLocked()
		s.settledAbove = max(s.settledAbove, off)
		fx.dirty = true
	default:
		s.frontier = off
		s.advanceLocked()
		fx.dirty = true
	}
}

// advanceDirtyLocked is advanceLocked after the floor the frontier stops at rose (a key's
// parked or spilled records read or verified): the state is dirty if the frontier moved.
func (s *Shard) advanceDirtyLocked(fx *effects) {
	before := s.frontier
	s.advanceLocked()
	if s.frontier != before {
		fx.dirty = true
	}
}

// advanceLocked moves the frontier over the settled run above it: a run of the acked-ahead
// set in one step, corrupt and quarantined offsets one at a time.
func (s *Shard) advanceLocked() {
	for s.frontier < s.settledAbove {
		next := s.frontier + 1
		if r, ok := s.ahead.first(); ok && r.First == next {
			last := r.Last
			if s.keys != nil {
				// A parked record is unsettled: the frontier stops below it.
				if floor := s.keys.parkedFloor(); floor <= last {
					if last = floor - 1; last < next {
						break
					}
				}
			}
			if last == r.Last {
				s.ahead.removeFirst()
			} else {
				s.ahead.removeThrough(last)
			}
			s.frontier = last
			continue
		}
		if !s.isSettled(next) {
			break
		}
		delete(s.corrupt, next)
		if s.quarantinedAbove > 0 {
			if requeued, ok := s.quarantine[next]; ok && !requeued {
				s.quarantinedAbove--
			}
		}
		s.frontier = next
	}
	s.cursor = max(s.cursor, s.frontier+1)
	s.checkCapLocked()
}

// SkipRetention handles a read of the lease h names that found the offset below the log's
// oldest retained offset: the frontier jumps to oldest-1 in one step, dropping every lease,
// delay and acked-ahead entry below oldest (but a requeued record's below the frontier, whose
// own read finds whether it is gone: a lease of one, read already, stays its holder's, with
// its key), and the partition is reported dirty so the jump is persisted. It reports whether
// this call jumped. A consume that raced another to the same gap finds the jump done: its
// lease is already gone, and it simply reserves again; it never sees ErrGone. If the lease is
// somehow still live (the log reported an offset at or above oldest as missing), it is given
// back.
func (s *Shard) SkipRetention(now time.Time, h Handle, oldest int64) (jumped bool) {
	var fx effects
	s.mu.Lock()
	s.purgeLocked(now.UnixNano(), &fx)
	if !s.dropped && oldest-1 > s.frontier {
		s.jumpLocked(oldest-1, false, &fx)
		s.counters.RetentionJumps.Add(1)
		jumped = true
		fx.dirty = true
	}
	if p, err := s.liveLease(h); err == nil {
		if h.Offset < oldest {
			// A requeued offset below the frontier that retention removed: it is gone, and
			// resolved as an ack would: out of the quarantine, and out of its key's queue
			// (or its key freed, when it was bound), so the key's later records go on.
			if p.reservation() {
				s.reserved--
			}
			s.resolveLocked(h.Offset, p.key, false, &fx)
		} else {
			s.giveBackLocked(now.UnixNano(), h.Offset, p, &fx)
		}
	}
	s.mu.Unlock()
	s.report(&fx)
	return jumped
}

// jumpLocked moves the frontier to frontier in one step: what lies below is gone from the
// log (or purged), so its leases, delays, acked-ahead, corrupt and quarantine entries go too;
// requeued entries below it stay for a retention jump (their own read finds whether they are
// gone; a lease of one keeps its key) and go for a purge.
func (s *Shard) jumpLocked(frontier int64, purge bool, fx *effects) {
	for off, requeued := range s.quarantine {
		if off <= frontier && (!requeued || purge) {
			s.clearQuarantine(off) // its record is gone: nothing left to requeue
		}
	}
	// (Moved only now: the clears above count what lay above the frontier.)
	s.frontier = frontier
	var held []heldKey // the bound leases dropped: their keys free
	for off, p := range s.pending.all {
		if off > frontier {
			continue
		}
		if _, requeued := s.quarantine[off]; requeued && !purge {
			// Requeued below the frontier: its own read finds whether it is gone, and a lease
			// of it, live, keeps its key until its holder settles it.
			continue
		}
		if p.key != 0 {
			held = append(held, heldKey{off, p.key})
		}
		if p.nonce != 0 {
			s.leased--
		}
		if p.reservation() {
			s.reserved--
		}
		if p.delayed {
			s.delayed--
		}
		s.pending.remove(off)
	}
	s.ahead.removeThrough(frontier)
	for off := range s.corrupt {
		if off <= frontier {
			delete(s.corrupt, off)
		}
	}
	if s.keys != nil {
		s.forgetKeysThroughLocked(frontier, held, fx)
		if s.keys.verifying {
			s.verifiedIfDoneLocked(fx) // the jump took every record the tails could name
		}
	}
	s.deadlines.retain(s.isLiveDeadline)
	s.advanceLocked()
}

// aheadFrom reports whether the acked-ahead runs hold an offset at or above off.
func (s *Shard) aheadFrom(off int64) bool {
	_, ok := s.ahead.from(off)
	return ok
}

// SettleBelow settles every offset below hwm, as if each had been acked: the frontier jumps
// to hwm-1 in one step, and every lease, delay, deferral, acked-ahead, corrupt and
// quarantine entry at or below the frontier goes, quarantined and requeued records the
// frontier had passed included (a purge of the partition's backlog: a handle of a lease it
// ended answers ErrAlreadySettled). Records at or above hwm are left as they are. The
// partition is reported dirty, so the committer persists the jump. It reports how many
// offsets the frontier moved over (0 when it was at hwm-1 or past it already), and answers
// ErrMoved, changing nothing, for a shard handed off, deposed or whose grant has lapsed.
//
// A shard restored with key tails it has not verified yet (Verifying) cannot tell which of
// its acked-ahead records above the purge are parked ones of the keys whose tails the purge
// passed: a purge that passes some of the records to verify and leaves others answers
// ErrUnverified, changing nothing, and the caller verifies first, as a scan does. A purge
// below them all, or past them all (below the log's high watermark), goes.
func (s *Shard) SettleBelow(now time.Time, hwm int64) (int64, error) {
	var fx effects
	s.mu.Lock()
	at := now.UnixNano()
	s.purgeLocked(at, &fx)
	var moved int64
	var err error
	switch {
	case s.handedOff || s.lapsedAt(at):
		err = ErrMoved
	case s.dropped:
		err = ErrGone
	case s.keys != nil && s.keys.verifying && hwm > s.keys.verifyNext && s.aheadFrom(hwm):
		err = ErrUnverified
	default:
		moved = max(hwm-1-s.frontier, 0)
		s.jumpLocked(max(hwm-1, s.frontier), true, &fx)
		fx.dirty, fx.released = true, fx.released+1 // parked consumers look again: above hwm may wait
	}
	s.mu.Unlock()
	s.report(&fx)
	return moved, err
}

// Snapshot fills dst with the shard's persisted state, reusing dst's slices: the frontier,
// the acked-ahead set ascending, the attempts of unresolved offsets with at least one
// delivery, and the quarantined and requeued offsets. Leases, nonces, the expiry queue and
// the corrupt-skip set are memory only. The attempt of a reservation not yet confirmed
// (ReserveAhead) is left out, so an owner that crashes does not count it: an offset whose
// only attempt it is has no entry.
func (s *Shard) Snapshot(dst *State) { s.SnapshotCapped(dst, math.MaxInt) }

// SnapshotCapped is Snapshot keeping only the maxAttempts lowest offsets' attempts, and
// returns how many it left out. A persisted record holds a bounded number of attempts, the
// lowest first, so a caller that knows the bound asks for no more: the shard's leases are
// then not all sorted on every snapshot, which with many leases held costs far more than
// the record it feeds.
func (s *Shard) SnapshotCapped(dst *State, maxAttempts int) (omitted int) {
	s.mu.Lock()
	s.dirtyReported.Store(false)
	inOrder := s.copyStateLocked(dst, maxAttempts)
	s.mu.Unlock()
	return sortState(dst, inOrder, maxAttempts)
}

// HandOff fences the shard for a move and fills dst with its whole state as of now, the
// leases with their nonces included (State.Held, State.Fence): from the instant it takes the
// shard's lock, every settle of the shard answers ErrMoved and changes nothing, no reserve
// hands anything out, and nothing expires, so dst is the partition's last state here and
// every settle that succeeded before is in it. Snapshot still reports that state, so the
// committer can make it durable. A shard restored from dst (NewShard, Restore) on the next
// owner honours the handles of its live leases. A second call fills dst with the same state.
//
// A reservation not yet confirmed (ReserveAhead) travels as an ordinary lease, its attempt
// counted (State.Held has no field for it; the move format stays as it is): if it lapses at
// the next owner, that counts one attempt, while a GiveBack there is uncounted as always.
// dst.Attempts, what Snapshot would persist, still leaves it out.
func (s *Shard) HandOff(now time.Time, dst *State) {
	var fx effects
	s.mu.Lock()
	if !s.handedOff {
		s.purgeLocked(now.UnixNano(), &fx)
		s.handedOff, s.dropped = true, true
	}
	inOrder := s.copyStateLocked(dst, math.MaxInt)
	dst.Fence = s.fence
	dst.Held = dst.Held[:0]
	for off, p := range s.pending.all {
		if p.nonce == 0 && !p.delayed && p.attempts == 0 && p.reason == ReasonFirst {
			continue
		}
		h := Held{Offset: off, Nonce: p.nonce, Attempts: p.attempts, Reason: p.reason, Delayed: p.delayed}
		if p.nonce != 0 || p.delayed {
			h.Until = time.Unix(0, p.until)
		}
		if p.nonce != 0 {
			h.LeasedAt = time.Unix(0, p.leasedAt)
		}
		dst.Held = append(dst.Held, h)
	}
	dst.Corrupt = dst.Corrupt[:0]
	for off := range s.corrupt {
		dst.Corrupt = append(dst.Corrupt, off)
	}
	s.mu.Unlock()
	s.report(&fx) // what the purge quarantined is reported, as any touch reports it
	sortState(dst, inOrder, math.MaxInt)
	slices.SortFunc(dst.Held, func(a, b Held) int { return cmp.Compare(a.Offset, b.Offset) })
	slices.Sort(dst.Corrupt)
}

// copyStateLocked copies the persisted state into dst, reusing its slices, unsorted except
// for the attempts when it reports them in order (see SnapshotCapped).
func (s *Shard) copyStateLocked(dst *State, maxAttempts int) (attemptsInOrder bool) {
	dst.Frontier, dst.Incarnation, dst.HostIncarnation = s.frontier, s.incarnation, s.host
	dst.Epoch, dst.Fence, dst.GrantUntil = s.epoch, s.fence, time.Time{}
	dst.AckedAhead = s.ahead.appendTo(dst.AckedAhead[:0])
	dst.KeyTails = s.keyTailsLocked(dst.KeyTails)
	inOrder := s.attemptsInOrderLocked(dst, maxAttempts)
	if !inOrder {
		dst.Attempts = dst.Attempts[:0]
		for off, p := range s.pending.all {
			if n := p.persistedAttempts(); n > 0 && off > s.frontier {
				dst.Attempts = append(dst.Attempts, Attempt{Offset: off, Count: n})
			}
		}
	}
	dst.Quarantined, dst.Requeued = dst.Quarantined[:0], dst.Requeued[:0]
	for off, requeued := range s.quarantine {
		if requeued {
			dst.Requeued = append(dst.Requeued, off)
		} else {
			dst.Quarantined = append(dst.Quarantined, off)
		}
	}
	return inOrder
}

// sortState sorts what copyStateLocked copied, outside the shard's lock, and keeps the
// maxAttempts lowest attempts; it returns how many it left out.
func sortState(dst *State, attemptsInOrder bool, maxAttempts int) (omitted int) {
	if !attemptsInOrder {
		dst.Attempts, omitted = lowestAttempts(dst.Attempts, maxAttempts)
		slices.SortFunc(dst.Attempts, func(a, b Attempt) int { return cmp.Compare(a.Offset, b.Offset) })
	}
	slices.Sort(dst.Quarantined)
	slices.Sort(dst.Requeued)
	return omitted
}

// Stats is a consistent view of a shard's counts, for metrics, tests and the delivery-token
// estimate of available records.
type Stats struct {
	Frontier   int64 // committed frontier (inclusive)
	Leased     int   // live leases
	Delayed    int   // offsets invisible until their nack delay ends
	AckedAhead int   // offsets acked above the frontier
	// AckedAheadRuns is how many runs of consecutive offsets the acked-ahead set holds: what
	// MaxAckedAheadRuns bounds, and about one per hole (an unsettled offset) below an ack. On
	// an ordered topic the runs also hold the records parked behind up to MaxKeyTails blocked
	// keys (Keys.Parked), which split no run.
	AckedAheadRuns int
	Corrupt        int // offsets skipped as corrupt above the frontier
	Quarantined    int // offsets quarantined, requeued ones included
	Requeued       int // of them, requeued ones waiting for delivery again
	// Reserved is how many of the live leases are reservations (ReserveAhead) not confirmed
	// yet.
	Reserved int
	// Keys counts an ordered partition's keys (Config.Ordered); zero otherwise.
	Keys KeyStats
}

// Stats returns the shard's counts. It does not purge.
func (s *Shard) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	acked := int(s.ahead.offsets)
	if s.keys != nil {
		acked -= s.keys.parkedOffsets
	}
	return Stats{
		Frontier:       s.frontier,
		Leased:         s.leased,
		Delayed:        s.delayed,
		AckedAhead:     acked,
		AckedAheadRuns: s.ahead.runs,
		Corrupt:        len(s.corrupt),
		Quarantined:    len(s.quarantine),
		Requeued:       s.requeued,
		Reserved:       s.reserved,
		Keys:           s.keyStatsLocked(),
	}
}

// drop retires the shard: its leases are gone, ReserveNext hands out nothing and every
// handle gets ErrGone (ErrMoved when moved: the partition was taken from this node and the
// lease may live on at its owner), so a caller still holding it cannot settle anything that
// the successor shard would not know about.
func (s *Shard) drop(moved bool) {
	s.mu.Lock()
	s.dropped = true
	s.handedOff = s.handedOff || moved
	s.mu.Unlock()
}

// effects is what a touch of the shard reports through its hooks once its lock is released.
type effects struct {
	released    int       // offsets made visible again: a wake
	dirty       bool      // the persisted state changed
	deadline    int64     // a deadline set (Unix nanoseconds), 0 if none
	quarantined []Attempt // offsets quarantined, with their attempts
	stalled     bool      // a stall episode began, as stall says
	stall       AckedAheadStall
	delivered   uint64 // reservations confirmed (Counters.Delivered)
	unused      uint64 // reservations released uncounted (Counters.Unused)
	// spilled, refilled: deferred records spilled, and brought back (Counters.Spilled,
	// Refilled).
	spilled, refilled uint64
}

// report calls the hooks for what fx says, and adds its counts to the counters. It runs
// after the shard's lock is released.
func (s *Shard) report(fx *effects) {
	if fx.delivered > 0 {
		s.counters.Delivered.Add(fx.delivered)
	}
	if fx.unused > 0 {
		s.counters.Unused.Add(fx.unused)
	}
	if fx.spilled > 0 {
		s.counters.Spilled.Add(fx.spilled)
	}
	if fx.refilled > 0 {
		s.counters.Refilled.Add(fx.refilled)
	}
	if fx.released > 0 && s.hooks.Wake != nil {
		s.hooks.Wake(s.topic, s.partition)
	}
	if fx.dirty && s.hooks.Dirty != nil && !s.dirtyReported.Load() && s.dirtyReported.CompareAndSwap(false, true) {
		s.hooks.Dirty(s.topic, s.partition)
	}
	if fx.deadline != 0 && s.hooks.Deadline != nil {
		s.hooks.Deadline(s.topic, s.partition, time.Unix(0, fx.deadline))
	}
	if s.hooks.Quarantine != nil {
		for _, q := range fx.quarantined {
			s.hooks.Quarantine(s.topic, s.partition, q.Offset, q.Count)
		}
	}
	if fx.stalled && s.hooks.AckedAheadStall != nil {
		s.hooks.AckedAheadStall(s.topic, s.partition, fx.stall)
	}
}

// settledBelow counts the offsets above the frontier and below hwm that no reserve hands out
// for good: acked ahead, skipped as corrupt, or quarantined (not requeued). These are the
// sets' counts, unless restored state reaches past hwm (a log that lost its tail). Counted,
// a record quarantined above an unsettled one told remote consumers of a record, again each
// time their claim found nothing and they registered again: a loop of notifications for as
// long as the record below stayed unsettled.
func (s *Shard) settledBelow(hwm int64) int64 {
	if s.settledAbove < hwm {
		return s.ahead.offsets + int64(len(s.corrupt)+s.quarantinedAbove)
	}
	n := s.ahead.countBelow(hwm)
	for off := range s.corrupt {
		if off < hwm {
			n++
		}
	}
	for off, requeued := range s.quarantine {
		if !requeued && off > s.frontier && off < hwm {
			n++
		}
	}
	return n
}

// Available estimates how many records the shard could lease now below hwm, after purging
// what is due: the offsets above the frontier less those leased, delayed, acked ahead,
// skipped as corrupt or quarantined, plus requeued ones, bounded by what the in-flight cap
// leaves (and by the frontier hole alone at the acked-ahead cap). It errs high, never low:
// a node that tells a remote consumer about a record that is not there costs that consumer
// one wasted claim (and, while the estimate stays wrong, a claim each time it registers
// again), while one that misses a record leaves the consumer waiting. It costs the same
// whatever the sets hold: each is counted as it changes.
func (s *Shard) Available(now time.Time, hwm int64) int {
	var fx effects
	s.mu.Lock()
	s.purgeLocked(now.UnixNano(), &fx)
	n := 0
	if !s.dropped {
		above := hwm - 1 - s.frontier - int64(s.leased+s.delayed) - s.settledBelow(hwm)
		if s.keys != nil {
			// Waiting behind their keys, not to be handed out (the parked ones are counted
			// with the acked-ahead runs that hold them).
			above -= int64(s.keys.deferred - s.keys.parkedOffsets)
		}
		// (The leases and delays counted include the requeued records', below the frontier,
		// which s.requeued counts again: only the sum is what can be handed out.)
		n = int(min(max(above+int64(s.requeued), 0), math.MaxInt32))
		if s.keys != nil && s.keys.verifying {
			n = max(n, 1) // the parked records a restore brought are in the runs: a scan verifies them
		}
		n = min(n, max(s.cfg.MaxInFlight-s.leased, 0))
		// At the acked-ahead cap only the frontier hole is handed out; under MaxDeliveries a
		// reserve can quarantine the hole and move the frontier, so the cap is not counted.
		if s.atAckedAheadCap() && s.cfg.MaxDeliveries == 0 {
			if p := s.pending.lookup(s.frontier + 1); p.nonce != 0 || p.delayed || p.deferred {
				n = min(n, s.requeued)
			} else {
				n = min(n, 1+s.requeued)
			}
		}
	}
	s.mu.Unlock()
	s.report(&fx)
	return n
}
