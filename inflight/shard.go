package inflight

import (
	crand "crypto/rand"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Reason says why a record is delivered.
type Reason uint8

const (
	ReasonFirst   Reason = iota // never delivered before (as far as this shard knows)
	ReasonExpired               // the previous lease expired
	ReasonNacked                // the previous holder nacked it
	ReasonRestart               // it was delivered before the owner restarted (persisted attempts)
)

var reasonNames = [...]string{"first", "expired", "nacked", "restart"}

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
}

// State is a partition's persisted ack state: what Restore seeds a shard with and what
// Snapshot reports for the committer to write.
type State struct {
	// Frontier is the committed frontier, inclusive: every offset at or below it is settled.
	// A new partition whose oldest retained offset is o starts at o-1.
	Frontier int64
	// AckedAhead holds the offsets acked above the frontier, ascending.
	AckedAhead []int64
	// Attempts holds the delivery attempts of unresolved offsets above the frontier,
	// ascending by offset. Restore marks them delivered before a restart.
	Attempts []Attempt
}

// Attempt is the number of times an unresolved offset was leased.
type Attempt struct {
	Offset int64
	Count  uint32
}

// Hooks are called by a shard after its lock is released, never under it (checklist 34), so
// they may call into the pump or the committer freely. A nil hook is skipped.
type Hooks struct {
	// Wake reports that records of the partition became visible again: a nack without
	// delay, a lease expiry or the end of a nack delay, found by Purge or by any touch.
	Wake func(topic string, partition int32)
	// Dirty reports that the persisted state changed: the frontier advanced or jumped, or
	// the acked-ahead set grew.
	Dirty func(topic string, partition int32)
}

// Options configure a shard.
type Options struct {
	Config Config
	// Seed seeds the shard's ChaCha8 nonce stream. The zero value draws a seed from
	// crypto/rand, which is what production must do: a seed derived from the partition
	// would repeat nonces across restarts (RELIABILITY G2). Tests inject seeds.
	Seed     [32]byte
	Hooks    Hooks
	Counters *Counters // nil: the shard counts into its own
}

// pending is the state of an unresolved offset above the frontier that the shard has
// touched: leased (nonce != 0), delayed by a nack (delayed), or released and waiting to be
// leased again (neither). Offsets never leased in this incarnation have no entry, unless
// Restore brought their attempts.
type pending struct {
	nonce    uint64 // the live lease's nonce; 0 when not leased
	until    int64  // lease expiry or end of the nack delay, Unix nanoseconds
	attempts uint32 // leases granted so far
	reason   Reason // reason of the current lease, or of the next one
	delayed  bool
}

// A Shard is the in-flight state of one (topic, partition): the committed frontier, the
// leases, the expiry heap, the acked-ahead set and the corrupt-skip set. It never reads a
// clock: every method that depends on time takes now. It is safe for concurrent use.
type Shard struct {
	topic     string
	partition int32
	hooks     Hooks
	counters  *Counters

	mu         sync.Mutex
	cfg        Config
	visibility int64 // cfg.VisibilityTimeout in nanoseconds
	dropped    bool
	frontier   int64
	// cursor is the lowest offset above the frontier not leased in this incarnation: every
	// offset in (frontier, cursor) has been leased, settled or skipped, so the offsets that
	// can be leased below the cursor are exactly the released ones.
	cursor int64
	// restoredAbove is the highest offset whose attempts Restore brought; offsets at or
	// above the cursor may have a pending entry only up to it.
	restoredAbove int64
	pending       map[int64]pending
	ackedAhead    map[int64]struct{}
	corrupt       map[int64]struct{}
	leased        int // offsets with a live lease
	delayed       int // offsets invisible until their nack delay ends
	deadlines     minHeap[deadline]
	released      minHeap[releasedOffset]
	nonces        *rand.ChaCha8
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
		pending:    make(map[int64]pending),
		ackedAhead: make(map[int64]struct{}),
		corrupt:    make(map[int64]struct{}),
		nonces:     rand.NewChaCha8(seed),
	}
	s.restoreLocked(state)
	return s
}

// Topic returns the shard's topic.
func (s *Shard) Topic() string { return s.topic }

// Partition returns the shard's partition.
func (s *Shard) Partition() int32 { return s.partition }

// Restore reseeds the shard with persisted state, as after a restart: every lease, delay,
// release and corrupt skip is forgotten, and every offset above the frontier that is not
// acked ahead will be delivered again (checklist 7). Handles issued before never match a
// lease issued after, since the nonce stream goes on.
func (s *Shard) Restore(state State) {
	s.mu.Lock()
	s.restoreLocked(state)
	s.mu.Unlock()
}

func (s *Shard) restoreLocked(state State) {
	s.frontier = state.Frontier
	s.cursor = state.Frontier + 1
	clear(s.pending)
	clear(s.ackedAhead)
	clear(s.corrupt)
	s.leased, s.delayed = 0, 0
	s.deadlines = s.deadlines[:0]
	s.released = s.released[:0]
	for _, off := range state.AckedAhead {
		if off > s.frontier {
			s.ackedAhead[off] = struct{}{}
		}
	}
	s.restoredAbove = s.frontier
	for _, a := range state.Attempts {
		if _, settled := s.ackedAhead[a.Offset]; a.Offset > s.frontier && !settled && a.Count > 0 {
			s.pending[a.Offset] = pending{attempts: a.Count, reason: ReasonRestart}
			s.restoredAbove = max(s.restoredAbove, a.Offset)
		}
	}
	s.advanceLocked()
}

// SetConfig changes the shard's settings. Live leases keep their expiry.
func (s *Shard) SetConfig(cfg Config) {
	cfg = cfg.withDefaults()
	s.mu.Lock()
	s.cfg = cfg
	s.visibility = int64(cfg.VisibilityTimeout)
	s.mu.Unlock()
}

// ReserveNext leases the lowest unresolved offset above the frontier and below hwm (the
// log's high watermark: the next offset to be written), after purging expired leases. The
// caller reads the record only after this returns (a reservation precedes every read,
// invariant 1), then settles the lease, or gives it back with GiveBack, SkipCorrupt or
// SkipRetention if the read failed.
//
// It hands out nothing, with ErrEmpty, ErrAllReserved, ErrInFlightCap or ErrAckedAheadCap,
// when there is nothing above the frontier, when everything there is leased or resolved,
// when the in-flight cap is reached, or when the acked-ahead set is full and its frontier
// hole is taken.
func (s *Shard) ReserveNext(now time.Time, hwm int64) (Lease, error) {
	return s.ReserveNextFor(now, hwm, 0)
}

// ReserveNextFor is ReserveNext with a lease that lasts visibility (a consume that asks for
// its own visibility timeout); zero or negative means the topic's.
func (s *Shard) ReserveNextFor(now time.Time, hwm int64, visibility time.Duration) (Lease, error) {
	at := now.UnixNano()
	var lease Lease
	s.mu.Lock()
	woke := s.purgeLocked(at) > 0
	err := s.reserveLocked(at, hwm, int64(visibility), &lease)
	s.mu.Unlock()
	if woke {
		s.wake()
	}
	return lease, err
}

func (s *Shard) reserveLocked(now, hwm, visibility int64, lease *Lease) error {
	if s.dropped {
		return ErrEmpty
	}
	if s.leased >= s.cfg.MaxInFlight {
		return ErrInFlightCap
	}
	hole := s.frontier + 1
	if hole >= hwm {
		return ErrEmpty
	}
	var off int64
	switch lowest, ok := s.lowestReleased(); {
	case len(s.ackedAhead) >= s.cfg.MaxAckedAhead:
		// At the acked-ahead cap only the frontier hole is handed out, so that the gap can
		// close and the set drain (checklist 23). The hole is never settled: the frontier
		// would have advanced over it.
		if p := s.pending[hole]; p.nonce != 0 || p.delayed {
			return ErrAckedAheadCap
		}
		off = hole
	case ok && lowest < hwm:
		s.released.pop()
		off = lowest
	default:
		for s.isSettled(s.cursor) {
			s.cursor++ // past offsets Restore brought acked ahead; each is passed once
		}
		if s.cursor >= hwm {
			return ErrAllReserved
		}
		off = s.cursor
	}
	if visibility <= 0 {
		visibility = s.visibility
	}
	s.grantLocked(now+visibility, off, lease)
	if off >= s.cursor {
		s.cursor = off + 1
	}
	return nil
}

// lowestReleased returns the lowest offset of the released heap that is still released,
// dropping stale entries from its top.
func (s *Shard) lowestReleased() (int64, bool) {
	for len(s.released) > 0 {
		off := int64(s.released[0])
		if p, ok := s.pending[off]; ok && off > s.frontier && p.nonce == 0 && !p.delayed {
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
	// The length checks skip the hashing on the common path, where both sets are empty.
	if len(s.ackedAhead) > 0 {
		if _, ok := s.ackedAhead[off]; ok {
			return true
		}
	}
	if len(s.corrupt) > 0 {
		_, ok := s.corrupt[off]
		return ok
	}
	return false
}

func (s *Shard) grantLocked(expiry, off int64, lease *Lease) {
	var p pending
	if off < s.cursor || off <= s.restoredAbove {
		p = s.pending[off] // a fresh offset has no entry: skip the lookup on the hot path
	}
	p.attempts++
	p.nonce = s.nextNonce()
	p.until = expiry
	p.delayed = false
	s.pending[off] = p
	s.leased++
	s.pushDeadline(deadline{at: p.until, offset: off, nonce: p.nonce})
	s.counters.Delivered.Add(1)
	*lease = Lease{
		Handle:  Handle{Partition: s.partition, Offset: off, Nonce: p.nonce},
		Expiry:  time.Unix(0, p.until),
		Attempt: p.attempts,
		Reason:  p.reason,
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

// pushDeadline adds d to the expiry heap and compacts the heap once stale entries outnumber
// the live ones (one per lease and per delay), which keeps it O(1) amortized per push.
func (s *Shard) pushDeadline(d deadline) {
	s.deadlines.push(d)
	if live := s.leased + s.delayed; len(s.deadlines) > 2*live+64 {
		s.deadlines.retain(s.isLiveDeadline)
	}
}

// isLiveDeadline reports whether d is the current deadline of a lease or of a nack delay.
func (s *Shard) isLiveDeadline(d deadline) bool {
	p, ok := s.pending[d.offset]
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
// sweeper calls it; every other method purges too (checklist 15, 16).
func (s *Shard) Purge(now time.Time) int {
	at := now.UnixNano()
	s.mu.Lock()
	n := s.purgeLocked(at)
	s.mu.Unlock()
	if n > 0 {
		s.wake()
	}
	return n
}

// purgeLocked pops due deadlines. A lease is live only while now < expiry (checklist 3).
// It returns how many offsets became visible again.
func (s *Shard) purgeLocked(now int64) (released int) {
	for len(s.deadlines) > 0 && s.deadlines[0].at <= now {
		d := s.deadlines.pop()
		if !s.isLiveDeadline(d) {
			continue // superseded by an extend, or the lease was settled or released
		}
		p := s.pending[d.offset]
		if d.nonce == 0 {
			p.delayed = false
			s.delayed--
		} else {
			p.nonce = 0
			p.reason = ReasonExpired
			s.leased--
			s.counters.Expired.Add(1)
		}
		s.pending[d.offset] = p
		s.released.push(releasedOffset(d.offset))
		released++
	}
	return released
}

// Ack settles the lease h names: the frontier advances over the contiguous settled run, or
// the offset is parked in the acked-ahead set until the gap beneath it closes. Only the live
// lease's handle settles (invariant 2); an expired lease is gone even when nobody leased
// the offset again (checklist 17-19). An ack of a settled offset gets ErrAlreadySettled.
// Acks are always accepted at the acked-ahead cap (checklist 24).
func (s *Shard) Ack(now time.Time, h Handle) error {
	return s.settle(now, h, func(s *Shard, h Handle, _ pending) (bool, bool) {
		s.counters.Acked.Add(1)
		return false, s.resolveLocked(h.Offset, false)
	})
}

// Extend re-arms the lease h names to expire d after now (the visibility timeout when d is
// zero or negative), with a fresh heap entry; the old one is skipped when popped.
func (s *Shard) Extend(now time.Time, h Handle, d time.Duration) error {
	at := now.UnixNano()
	return s.settle(now, h, func(s *Shard, h Handle, p pending) (bool, bool) {
		until := at + int64(d)
		if d <= 0 {
			until = at + s.visibility
		}
		if until != p.until {
			p.until = until
			s.pending[h.Offset] = p
			s.pushDeadline(deadline{at: until, offset: h.Offset, nonce: h.Nonce})
		}
		s.counters.Extended.Add(1)
		return false, false
	})
}

// Nack releases the lease h names. With delay zero or negative the offset is visible again
// at once and a wake is reported; otherwise it stays invisible until the delay has passed
// (no hot redelivery loop while a dependency fails), and the expiry machinery wakes it.
func (s *Shard) Nack(now time.Time, h Handle, delay time.Duration) error {
	at := now.UnixNano()
	return s.settle(now, h, func(s *Shard, h Handle, p pending) (bool, bool) {
		s.counters.Nacked.Add(1)
		p.nonce = 0
		p.reason = ReasonNacked
		s.leased--
		if delay > 0 {
			p.delayed = true
			p.until = at + int64(delay)
			s.delayed++
			s.pending[h.Offset] = p
			s.pushDeadline(deadline{at: p.until, offset: h.Offset})
			return false, false
		}
		s.pending[h.Offset] = p
		s.released.push(releasedOffset(h.Offset))
		return true, false
	})
}

// GiveBack releases the lease h names as if it had never been granted: the attempt is not
// counted and no wake is reported. The scan gives back a reservation whose read found the
// log closed (a closed log is transient, not a gap); the pump gives back a record whose
// consumer left at the instant it was handed over.
func (s *Shard) GiveBack(now time.Time, h Handle) error {
	return s.settle(now, h, func(s *Shard, h Handle, p pending) (bool, bool) {
		s.counters.GivenBack.Add(1)
		s.giveBackLocked(h.Offset, p)
		return false, false
	})
}

func (s *Shard) giveBackLocked(off int64, p pending) {
	p.nonce = 0
	p.attempts--
	s.leased--
	s.pending[off] = p
	s.released.push(releasedOffset(off))
}

// SkipCorrupt settles the lease h names as a permanently unreadable record: the offset goes
// into the corrupt-skip set (memory only; the next incarnation finds it again by reading)
// and the frontier advances over it as over an acked offset (checklist 28, 29).
func (s *Shard) SkipCorrupt(now time.Time, h Handle) error {
	return s.settle(now, h, func(s *Shard, h Handle, _ pending) (bool, bool) {
		s.counters.CorruptSkipped.Add(1)
		return false, s.resolveLocked(h.Offset, true)
	})
}

// settle runs apply on the live lease h names, after the purge every touch does, and calls
// the hooks apply asks for once the lock is released. apply reports (wake, dirty).
func (s *Shard) settle(now time.Time, h Handle, apply func(*Shard, Handle, pending) (wake, dirty bool)) error {
	s.mu.Lock()
	woke := s.purgeLocked(now.UnixNano()) > 0
	p, err := s.liveLease(h)
	switch err {
	case ErrGone:
		s.counters.Gone.Add(1)
	case ErrAlreadySettled:
		s.counters.AlreadySettled.Add(1)
	}
	var dirty bool
	if err == nil {
		var wake bool
		wake, dirty = apply(s, h, p)
		woke = woke || wake
	}
	s.mu.Unlock()
	if woke {
		s.wake()
	}
	if dirty {
		s.dirty()
	}
	return err
}

// liveLease returns the pending state of the live lease h names, or why there is none.
func (s *Shard) liveLease(h Handle) (pending, error) {
	if s.dropped || h.Partition != s.partition {
		return pending{}, ErrGone
	}
	if s.isSettled(h.Offset) {
		return pending{}, ErrAlreadySettled
	}
	p, ok := s.pending[h.Offset]
	if !ok || p.nonce == 0 || p.nonce != h.Nonce {
		return pending{}, ErrGone
	}
	return p, nil
}

// resolveLocked settles the leased offset off, acked or skipped as corrupt: at the frontier
// hole the frontier advances over the contiguous settled run; above it, off is parked in the
// acked-ahead or the corrupt-skip set. It reports whether the persisted state changed.
func (s *Shard) resolveLocked(off int64, corrupt bool) (dirty bool) {
	delete(s.pending, off)
	s.leased--
	if off != s.frontier+1 {
		if corrupt {
			s.corrupt[off] = struct{}{}
			return false
		}
		s.ackedAhead[off] = struct{}{}
		return true
	}
	s.frontier = off
	s.advanceLocked()
	return true
}

// advanceLocked moves the frontier over the settled run above it (checklist 2, 5).
func (s *Shard) advanceLocked() {
	for next := s.frontier + 1; s.isSettled(next); next++ {
		delete(s.ackedAhead, next)
		delete(s.corrupt, next)
		s.frontier = next
	}
	s.cursor = max(s.cursor, s.frontier+1)
}

// SkipRetention handles a read of the lease h names that found the offset below the log's
// oldest retained offset: the frontier jumps to oldest-1 in one step, dropping every lease,
// delay and acked-ahead entry below oldest, and the partition is reported dirty so the jump
// is persisted (checklist 25, 26). It reports whether this call jumped. A consume that
// raced another to the same gap finds the jump done: its lease is already gone, and it
// simply reserves again; it never sees ErrGone. If the lease is somehow still live (the log
// reported an offset at or above oldest as missing), it is given back.
func (s *Shard) SkipRetention(now time.Time, h Handle, oldest int64) (jumped bool) {
	s.mu.Lock()
	woke := s.purgeLocked(now.UnixNano()) > 0
	if !s.dropped && oldest-1 > s.frontier {
		s.jumpLocked(oldest - 1)
		jumped = true
	}
	if p, err := s.liveLease(h); err == nil {
		s.giveBackLocked(h.Offset, p)
	}
	s.mu.Unlock()
	if woke {
		s.wake()
	}
	if jumped {
		s.dirty()
	}
	return jumped
}

func (s *Shard) jumpLocked(frontier int64) {
	s.frontier = frontier
	for off, p := range s.pending {
		if off > frontier {
			continue
		}
		if p.nonce != 0 {
			s.leased--
		}
		if p.delayed {
			s.delayed--
		}
		delete(s.pending, off)
	}
	for off := range s.ackedAhead {
		if off <= frontier {
			delete(s.ackedAhead, off)
		}
	}
	for off := range s.corrupt {
		if off <= frontier {
			delete(s.corrupt, off)
		}
	}
	s.deadlines.retain(s.isLiveDeadline)
	s.advanceLocked()
	s.counters.RetentionJumps.Add(1)
}

// Snapshot fills dst with the shard's persisted state, reusing dst's slices: the frontier,
// the acked-ahead set ascending, and the attempts of unresolved offsets with at least one
// delivery. Leases, nonces, the expiry heap and the corrupt-skip set are memory only
// (checklist 6).
func (s *Shard) Snapshot(dst *State) {
	s.mu.Lock()
	dst.Frontier = s.frontier
	dst.AckedAhead = dst.AckedAhead[:0]
	for off := range s.ackedAhead {
		dst.AckedAhead = append(dst.AckedAhead, off)
	}
	dst.Attempts = dst.Attempts[:0]
	for off, p := range s.pending {
		if p.attempts > 0 {
			dst.Attempts = append(dst.Attempts, Attempt{Offset: off, Count: p.attempts})
		}
	}
	s.mu.Unlock()
	slices.Sort(dst.AckedAhead)
	slices.SortFunc(dst.Attempts, func(a, b Attempt) int { return cmpInt64(a.Offset, b.Offset) })
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Stats is a consistent view of a shard's counts, for metrics, tests and the delivery-token
// estimate of available records.
type Stats struct {
	Frontier   int64 // committed frontier (inclusive)
	Leased     int   // live leases
	Delayed    int   // offsets invisible until their nack delay ends
	AckedAhead int   // offsets acked above the frontier
	Corrupt    int   // offsets skipped as corrupt above the frontier
}

// Stats returns the shard's counts. It does not purge.
func (s *Shard) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Frontier:   s.frontier,
		Leased:     s.leased,
		Delayed:    s.delayed,
		AckedAhead: len(s.ackedAhead),
		Corrupt:    len(s.corrupt),
	}
}

// drop retires the shard: its leases are gone, ReserveNext hands out nothing and every
// handle gets ErrGone, so a caller still holding it cannot settle anything that the
// successor shard would not know about.
func (s *Shard) drop() {
	s.mu.Lock()
	s.dropped = true
	s.mu.Unlock()
}

func (s *Shard) wake() {
	if s.hooks.Wake != nil {
		s.hooks.Wake(s.topic, s.partition)
	}
}

func (s *Shard) dirty() {
	if s.hooks.Dirty != nil {
		s.hooks.Dirty(s.topic, s.partition)
	}
}
