package inflight

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The model: a plain map offset → state, with the rules of the spec written the obvious way
// (scan for the lowest free offset, walk the frontier), against which the shard's cursor,
// heaps and lazy deletion are checked. RELIABILITY rows 6, 7, 9, 14, 15, 18; DESIGN
// invariants 1 to 3.

type modelState uint8

const (
	free modelState = iota // unresolved and visible (never leased, released, or expired)
	leased
	delayed
	acked
	corrupt
	quarantined
)

type modelOffset struct {
	state    modelState
	nonce    uint64
	until    time.Time
	leasedAt time.Time
	attempts uint32
	reason   Reason
	below    bool // requeued at or below the frontier (free, leased or delayed)
	// reserved: leased by ReserveAhead and not confirmed yet; its attempt, counted in
	// attempts, does not count (a lapse takes it back, a snapshot leaves it out).
	reserved bool
	// scanned: under MaxDeliveries, leased by ReserveNext and not handed over yet (Handed,
	// or a settle or an expiry of it): a snapshot leaves its attempt out.
	scanned bool
}

type model struct {
	cfg         Config
	frontier    int64
	offsets     map[int64]*modelOffset
	hwm         int64
	oldest      int64
	corruptAt   map[int64]bool // the log's permanently unreadable offsets
	closed      bool           // the log answers every read with ErrLogClosed
	quarantines int            // quarantine events so far
	rejects     int            // rejects that quarantined a lease so far
	discards    int            // quarantined offsets settled for good so far
	// discardedAhead counts the discards that parked an offset in the acked-ahead set: it
	// may exceed its cap by them, as the quarantine it came from did.
	discardedAhead int
	capped         bool // the last choice found the acked-ahead cap reached
	stalls         int  // episodes at the acked-ahead cap so far
	delivered      int  // records handed to consumers: plain leases, confirmed reservations
	reservations   int  // reservations granted (ReserveAhead)
	unused         int  // reservations released unconfirmed: given back or lapsed
}

func (m *model) at(off int64) *modelOffset {
	o, ok := m.offsets[off]
	if !ok {
		o = &modelOffset{}
		m.offsets[off] = o
	}
	return o
}

// count counts offsets in state st: above the frontier, or anywhere for the states a
// requeued offset below the frontier can be in.
func (m *model) count(st modelState) int {
	n := 0
	for off, o := range m.offsets {
		if o.state == st && (off > m.frontier || o.below) {
			n++
		}
	}
	return n
}

// aheadRuns counts the maximal runs of consecutive acked offsets above the frontier.
func (m *model) aheadRuns() int {
	runs := 0
	for off, o := range m.offsets {
		if o.state != acked || off <= m.frontier {
			continue
		}
		if prev, ok := m.offsets[off-1]; !ok || prev.state != acked || off-1 <= m.frontier {
			runs++
		}
	}
	return runs
}

// atCap reports whether the acked-ahead set is at either of its caps.
func (m *model) atCap() bool {
	return m.count(acked) >= m.cfg.MaxAckedAhead || m.aheadRuns() >= m.cfg.MaxAckedAheadRuns
}

// checkCap ends a stall episode once the set is below its caps (an episode lasts while the
// set stays at the cap).
func (m *model) checkCap() {
	if m.capped && !m.atCap() {
		m.capped = false
	}
}

func (m *model) quarantineSize() int {
	n := 0
	for _, o := range m.offsets {
		if o.state == quarantined || o.below {
			n++
		}
	}
	return n
}

// available predicts Shard.Available: the free offsets above the frontier (below the log's high
// watermark) and below it (requeued), within what the in-flight cap leaves, and at the
// acked-ahead cap (without a delivery limit, which may quarantine the hole) the frontier hole
// alone if it is free, besides the requeued offsets (every one, leased or not: the estimate
// errs high there).
func (m *model) available() int {
	n := 0
	for off := m.frontier + 1; off < m.hwm; off++ {
		if o, ok := m.offsets[off]; !ok || o.state == free {
			n++
		}
	}
	for _, o := range m.offsets {
		if o.below && o.state == free {
			n++
		}
	}
	n = min(n, max(m.cfg.MaxInFlight-m.count(leased), 0))
	if m.atCap() && m.cfg.MaxDeliveries == 0 {
		hole := 0
		if st := m.at(m.frontier + 1).state; st != leased && st != delayed {
			hole = 1
		}
		n = min(n, hole+m.requeuedBelow())
	}
	return n
}

// requeuedBelow counts the requeued offsets at or below the frontier (the quarantine entries
// waiting for delivery again).
func (m *model) requeuedBelow() int {
	n := 0
	for _, o := range m.offsets {
		if o.below {
			n++
		}
	}
	return n
}

// endLease ends a live lease unsettled at end (expiry or nack), as the shard must: delay
// zero waits the backoff, noBackoff none.
func (m *model) endLease(off int64, end, now time.Time, reason Reason, delay time.Duration) {
	o := m.at(off)
	o.nonce, o.reason, o.scanned = 0, reason, false
	if m.cfg.MaxDeliveries > 0 && int(o.attempts) >= m.cfg.MaxDeliveries {
		m.quarantine(off)
		return
	}
	switch delay {
	case noBackoff:
		delay = 0
	case 0:
		delay = m.cfg.Backoff.Delay(o.attempts, 0)
	}
	if until := end.Add(delay); until.After(now) {
		o.state, o.until = delayed, until
		return
	}
	o.state = free
}

// confirm makes the reservation of off, if it is one, or the scan's lease not handed over
// yet, an ordinary lease: a consumer got it.
func (m *model) confirm(off int64) {
	o := m.at(off)
	o.scanned = false
	if o.reserved {
		o.reserved = false
		m.delivered++
	}
}

// unreserve ends the live lease of off unconfirmed if it is a reservation (a give-back or a
// lapse): its attempt is taken back. An ordinary lease given back loses its attempt too.
func (m *model) unreserve(off int64) {
	o := m.at(off)
	o.nonce = 0
	o.attempts--
	o.scanned = false
	if o.reserved {
		o.reserved = false
		m.unused++
	}
}

// countReserved counts the live reservations not confirmed yet.
func (m *model) countReserved() int {
	n := 0
	for off, o := range m.offsets {
		if o.state == leased && o.reserved && (off > m.frontier || o.below) {
			n++
		}
	}
	return n
}

// persisted returns the attempts a snapshot holds: of unresolved offsets above the frontier,
// an unconfirmed reservation's and a lease's not handed over yet left out, ascending.
func (m *model) persisted() []Attempt {
	var as []Attempt
	for off, o := range m.offsets {
		if off <= m.frontier || (o.state != free && o.state != leased && o.state != delayed) {
			continue
		}
		n := o.attempts
		if o.state == leased && (o.reserved || o.scanned) {
			n--
		}
		if n > 0 {
			as = append(as, Attempt{Offset: off, Count: n})
		}
	}
	slices.SortFunc(as, func(a, b Attempt) int { return int(a.Offset - b.Offset) })
	return as
}

// quarantine sets off aside, whatever it was: the frontier may pass it now.
func (m *model) quarantine(off int64) {
	o := m.at(off)
	o.nonce = 0
	o.state, o.below = quarantined, false
	m.quarantines++
	m.advance()
}

// reject quarantines a live lease at once, whatever its attempts and MaxDeliveries.
func (m *model) reject(off int64) {
	m.rejects++
	m.quarantine(off)
}

func (m *model) purge(now time.Time) {
	for off, o := range m.offsets {
		if o.state == leased && !now.Before(o.until) {
			if o.reserved {
				m.unreserve(off) // a lapse uncounted: visible at once, its reason kept
				o.state = free
				continue
			}
			m.endLease(off, o.until, now, ReasonExpired, 0)
		}
	}
	for _, o := range m.offsets {
		if o.state == delayed && !now.Before(o.until) {
			o.state = free
		}
	}
}

// advance moves the frontier over what is settled above it, after a change that may have
// shrunk the acked-ahead set's runs (an ack joining two runs too).
func (m *model) advance() {
	for {
		o, ok := m.offsets[m.frontier+1]
		if !ok || (o.state != acked && o.state != corrupt && o.state != quarantined) {
			break
		}
		m.frontier++
	}
	m.checkCap()
}

// reserve predicts ReserveNext: the offset it leases, or the error. A candidate whose
// attempts already reached MaxDeliveries (restored after a crash took its last lease) is
// quarantined instead, and the next one is taken.
func (m *model) reserve() (int64, error) {
	if m.count(leased) >= m.cfg.MaxInFlight {
		return 0, ErrInFlightCap
	}
	for {
		off, err := m.choose()
		if err != nil {
			return 0, err
		}
		o := m.at(off)
		if m.cfg.MaxDeliveries == 0 || int(o.attempts) < m.cfg.MaxDeliveries {
			return off, nil
		}
		o.state, o.below = quarantined, false
		m.quarantines++
		m.advance()
	}
}

func (m *model) choose() (int64, error) {
	lowestBelow, found := int64(0), false
	for off, o := range m.offsets {
		if o.below && o.state == free && (!found || off < lowestBelow) {
			lowestBelow, found = off, true
		}
	}
	if found {
		return lowestBelow, nil
	}
	hole := m.frontier + 1
	if hole >= m.hwm {
		return 0, ErrEmpty
	}
	if m.atCap() {
		if !m.capped {
			m.capped = true
			m.stalls++
		}
		if st := m.at(hole).state; st == leased || st == delayed {
			return 0, ErrAckedAheadCap
		}
		return hole, nil
	}
	for off := hole; off < m.hwm; off++ {
		if m.at(off).state == free {
			return off, nil
		}
	}
	return 0, ErrAllReserved
}

// live predicts the validation of a handle: nil, ErrAlreadySettled or ErrGone.
func (m *model) live(h Handle) error {
	if h.Partition != 0 {
		return ErrGone
	}
	if o, ok := m.offsets[h.Offset]; ok && o.state == leased && o.nonce == h.Nonce {
		return nil
	}
	if h.Offset <= m.frontier {
		return ErrAlreadySettled
	}
	switch m.at(h.Offset).state {
	case acked, corrupt, quarantined:
		return ErrAlreadySettled
	}
	return ErrGone
}

// settle resolves a live lease, acked or corrupt.
func (m *model) settle(off int64, st modelState) {
	if o := m.at(off); o.below {
		delete(m.offsets, off)
		return
	}
	m.at(off).state = st
	m.advance()
}

func (m *model) jump(oldest int64) bool {
	if oldest-1 <= m.frontier {
		return false
	}
	m.frontier = oldest - 1
	for off, o := range m.offsets {
		if off <= m.frontier && !o.below {
			delete(m.offsets, off)
		}
	}
	m.advance()
	return true
}

// settleBelow settles every offset below hwm (a purge): the frontier jumps to hwm-1, and
// every entry at or below it goes, requeued ones too.
func (m *model) settleBelow(hwm int64) int64 {
	moved := max(hwm-1-m.frontier, 0)
	m.frontier = max(m.frontier, hwm-1)
	for off := range m.offsets {
		if off <= m.frontier {
			delete(m.offsets, off)
		}
	}
	m.advance()
	return moved
}

func (m *model) requeue(off int64) bool {
	o, ok := m.offsets[off]
	if !ok || o.state != quarantined {
		return false
	}
	*o = modelOffset{state: free, reason: ReasonRequeued, below: off <= m.frontier}
	return true
}

// discard settles a quarantined offset for good: gone at or below the frontier, acked
// ahead above it (the frontier passed over it already, or a hole lies beneath).
func (m *model) discard(off int64) bool {
	o, ok := m.offsets[off]
	if !ok || o.state != quarantined {
		return false
	}
	m.discards++
	if off <= m.frontier {
		delete(m.offsets, off)
		return true
	}
	*o = modelOffset{state: acked}
	m.discardedAhead++
	m.advance()
	return true
}

type shardMachine struct {
	s           *Shard
	m           *model
	now         time.Time
	unread      []Lease  // reserved, not read yet
	held        []Handle // handed to a consumer, possibly stale by now
	frontier    int64    // the highest frontier seen, to check it never moves back
	fences      map[int64]uint64
	quarantined int // Quarantine hook calls
	stalls      int // AckedAheadStall hook calls
	// clockWentBack: fences are promised to grow across restarts only while the clock does
	// not go back, so a restart after a backward jump starts the fence check afresh.
	clockWentBack bool
}

func (sm *shardMachine) init(t *rapid.T) {
	cfg := Config{
		VisibilityTimeout: 10 * time.Second,
		MaxInFlight:       rapid.IntRange(1, 6).Draw(t, "inFlightCap"),
		MaxAckedAhead:     rapid.IntRange(1, 8).Draw(t, "ackedAheadCap"),
		MaxAckedAheadRuns: rapid.IntRange(1, 4).Draw(t, "ackedAheadRunsCap"),
		MaxDeliveries:     rapid.IntRange(0, 3).Draw(t, "maxDeliveries"),
		Backoff: Backoff{Delays: rapid.SampledFrom([][]time.Duration{
			nil, {time.Second}, {time.Second, 3 * time.Second},
		}).Draw(t, "backoff")},
		MaxExtension:     rapid.SampledFrom([]time.Duration{0, 5 * time.Second}).Draw(t, "maxExtension"),
		MaxLeaseLifetime: rapid.SampledFrom([]time.Duration{0, 25 * time.Second}).Draw(t, "maxLifetime"),
	}
	sm.m = &model{
		cfg:       cfg,
		frontier:  rapid.Int64Range(-1, 5).Draw(t, "frontier"),
		offsets:   map[int64]*modelOffset{},
		corruptAt: map[int64]bool{},
	}
	sm.m.hwm = sm.m.frontier + 1
	sm.m.oldest = sm.m.frontier + 1
	for _, off := range rapid.SliceOfN(rapid.Int64Range(0, 60), 0, 6).Draw(t, "corrupt") {
		sm.m.corruptAt[off] = true
	}
	sm.now = epoch
	sm.frontier = sm.m.frontier
	sm.fences = map[int64]uint64{}
	seed := [32]byte{byte(rapid.IntRange(0, 255).Draw(t, "seed"))}
	hooks := Hooks{
		Quarantine:      func(string, int32, int64, uint32) { sm.quarantined++ },
		AckedAheadStall: func(string, int32, AckedAheadStall) { sm.stalls++ },
	}
	sm.s = NewShard("model", 0, Options{Config: cfg, Seed: seed, Hooks: hooks}, State{Frontier: sm.m.frontier})
}

func (sm *shardMachine) produce(t *rapid.T) {
	sm.m.hwm += int64(rapid.IntRange(1, 5).Draw(t, "n"))
}

func (sm *shardMachine) advanceTime(t *rapid.T) {
	step := rapid.SampledFrom([]time.Duration{time.Nanosecond, time.Second, 5 * time.Second, 10*time.Second - 1, 10 * time.Second}).Draw(t, "step")
	sm.now = sm.now.Add(step)
}

// jumpClock moves the host's clock by a jump, backwards too (RELIABILITY row 10): leases then
// last longer by the jump, a forward jump only brings redeliveries, and nothing else changes.
func (sm *shardMachine) jumpClock(t *rapid.T) {
	jump := rapid.SampledFrom([]time.Duration{-time.Hour, -10 * time.Second, -time.Nanosecond, time.Hour}).Draw(t, "jump")
	sm.now = sm.now.Add(jump)
	sm.clockWentBack = sm.clockWentBack || jump < 0
}

func (sm *shardMachine) reserve(t *rapid.T) {
	sm.m.purge(sm.now)
	wantOff, wantErr := sm.m.reserve()
	lease, err := sm.s.ReserveNext(sm.now, sm.m.hwm)
	if !errors.Is(err, wantErr) {
		t.Fatalf("ReserveNext: got %v, want %v", err, wantErr)
	}
	if err != nil {
		return
	}
	sm.m.delivered++
	sm.granted(t, lease, wantOff, false)
}

// granted checks a lease the shard granted against the model's prediction, wantOff, and
// records it in the model, a reservation when reserved.
func (sm *shardMachine) granted(t *rapid.T, lease Lease, wantOff int64, reserved bool) {
	if lease.Offset != wantOff {
		t.Fatalf("ReserveNext leased %d, want the lowest free offset %d", lease.Offset, wantOff)
	}
	o := sm.m.at(wantOff)
	o.attempts++
	o.reserved = reserved
	o.scanned = !reserved && sm.m.cfg.MaxDeliveries > 0
	if lease.Attempt != o.attempts || lease.Reason != o.reason {
		t.Fatalf("lease of %d: attempt %d reason %v, want %d %v", wantOff, lease.Attempt, lease.Reason, o.attempts, o.reason)
	}
	if !lease.Expiry.Equal(sm.now.Add(10 * time.Second)) {
		t.Fatalf("expiry %v, want now + visibility", lease.Expiry)
	}
	if lease.Fence <= sm.fences[wantOff] {
		t.Fatalf("fence of %d went from %d to %d: not monotonic", wantOff, sm.fences[wantOff], lease.Fence)
	}
	sm.fences[wantOff] = lease.Fence
	o.state, o.nonce, o.until, o.leasedAt = leased, lease.Nonce, lease.Expiry, sm.now
	sm.unread = append(sm.unread, lease)
}

// reserveAhead reads ahead as a gateway: a batch of reservations, capped at half the
// in-flight room (one at least), each what the next ReserveNext would grant.
func (sm *shardMachine) reserveAhead(t *rapid.T) {
	max := rapid.IntRange(1, 6).Draw(t, "max")
	sm.m.purge(sm.now)
	n := min(max, builtinMax(1, (sm.m.cfg.MaxInFlight-sm.m.count(leased))/2))
	leases, err := sm.s.ReserveAhead(sm.now, sm.m.hwm, 0, max, nil)
	granted := 0
	for range n {
		wantOff, wantErr := sm.m.reserve()
		if wantErr != nil {
			if granted == 0 && !errors.Is(err, wantErr) {
				t.Fatalf("ReserveAhead: got %v, want %v", err, wantErr)
			}
			break
		}
		if granted >= len(leases) {
			t.Fatalf("ReserveAhead granted %d, want more (next %d), err %v", len(leases), wantOff, err)
		}
		sm.granted(t, leases[granted], wantOff, true)
		sm.m.reservations++
		granted++
	}
	if granted != len(leases) {
		t.Fatalf("ReserveAhead granted %d, want %d", len(leases), granted)
	}
	if granted > 0 && err != nil {
		t.Fatalf("ReserveAhead granted %d with %v", granted, err)
	}
}

// confirm says a consumer got the record of a handle.
func (sm *shardMachine) confirm(t *rapid.T) {
	h := sm.handle(t)
	sm.m.purge(sm.now)
	want := sm.m.live(h)
	if err := sm.s.Confirm(sm.now, h); !errors.Is(err, want) {
		t.Fatalf("Confirm(%v): got %v, want %v", h, err, want)
	}
	if want == nil {
		sm.m.confirm(h.Offset)
	}
}

// read reads a reserved offset from the model log and handles the outcome as the router
// will: retention jump, corrupt skip, give-back on a closed log, or delivery.
func (sm *shardMachine) read(t *rapid.T) {
	if len(sm.unread) == 0 {
		t.Skip("nothing reserved")
	}
	i := rapid.IntRange(0, len(sm.unread)-1).Draw(t, "unread")
	lease := sm.unread[i]
	sm.unread = slices.Delete(sm.unread, i, i+1)
	sm.m.purge(sm.now)
	switch {
	case sm.m.closed:
		want := sm.m.live(lease.Handle)
		if err := sm.s.GiveBack(sm.now, lease.Handle); !errors.Is(err, want) {
			t.Fatalf("GiveBack: got %v, want %v", err, want)
		}
		if want == nil {
			sm.m.unreserve(lease.Offset)
			sm.m.at(lease.Offset).state = free
		}
	case lease.Offset < sm.m.oldest:
		wasLive := sm.m.live(lease.Handle) == nil
		wantJump := sm.m.jump(sm.m.oldest)
		if jumped := sm.s.SkipRetention(sm.now, lease.Handle, sm.m.oldest); jumped != wantJump {
			t.Fatalf("SkipRetention jumped=%v, want %v", jumped, wantJump)
		}
		if o, ok := sm.m.offsets[lease.Offset]; ok && wasLive && o.below {
			delete(sm.m.offsets, lease.Offset) // a requeued record retention removed
		}
	case sm.m.corruptAt[lease.Offset]:
		want := sm.m.live(lease.Handle)
		if err := sm.s.SkipCorrupt(sm.now, lease.Handle); !errors.Is(err, want) {
			t.Fatalf("SkipCorrupt: got %v, want %v", err, want)
		}
		if want == nil {
			sm.m.at(lease.Offset).reserved = false // never handed over: not a delivery
			sm.m.settle(lease.Offset, corrupt)
		}
	default:
		sm.s.Handed([]Lease{lease})
		if sm.m.live(lease.Handle) == nil {
			sm.m.at(lease.Offset).scanned = false
		}
		sm.held = append(sm.held, lease.Handle)
	}
}

// handle draws a handle a consumer sends: one it holds (maybe stale), or a forged one.
func (sm *shardMachine) handle(t *rapid.T) Handle {
	if len(sm.held) > 0 && rapid.IntRange(0, 4).Draw(t, "forge") > 0 {
		return sm.held[rapid.IntRange(0, len(sm.held)-1).Draw(t, "held")]
	}
	return Handle{
		Partition: int32(rapid.IntRange(0, 1).Draw(t, "partition")),
		Offset:    rapid.Int64Range(0, sm.m.hwm+1).Draw(t, "offset"),
		Nonce:     rapid.Uint64Min(1).Draw(t, "nonce"),
	}
}

func (sm *shardMachine) ack(t *rapid.T) {
	h := sm.handle(t)
	sm.m.purge(sm.now)
	want := sm.m.live(h)
	if err := sm.s.Ack(sm.now, h); !errors.Is(err, want) {
		t.Fatalf("Ack(%v): got %v, want %v", h, err, want)
	}
	if want == nil {
		sm.m.confirm(h.Offset)
		sm.m.settle(h.Offset, acked)
	}
}

func (sm *shardMachine) extend(t *rapid.T) {
	h := sm.handle(t)
	d := rapid.SampledFrom([]time.Duration{0, time.Second, 20 * time.Second}).Draw(t, "d")
	sm.m.purge(sm.now)
	want := sm.m.live(h)
	expiry, err := sm.s.Extend(sm.now, h, d)
	if !errors.Is(err, want) {
		t.Fatalf("Extend(%v): got %v, want %v", h, err, want)
	}
	if want != nil {
		return
	}
	sm.m.confirm(h.Offset)
	if d == 0 {
		d = 10 * time.Second
	}
	if c := sm.m.cfg.MaxExtension; c > 0 {
		d = min(d, c)
	}
	o := sm.m.at(h.Offset)
	until := sm.now.Add(d)
	if c := sm.m.cfg.MaxLeaseLifetime; c > 0 && until.After(o.leasedAt.Add(c)) {
		until = o.leasedAt.Add(c)
	}
	if until.Before(sm.now) {
		until = sm.now
	}
	if !expiry.Equal(until) {
		t.Fatalf("Extend by %v: expiry %v, want %v", d, expiry, until)
	}
	o.until = until
}

func (sm *shardMachine) nack(t *rapid.T) {
	h := sm.handle(t)
	delay := rapid.SampledFrom([]time.Duration{0, 0, 3 * time.Second, noBackoff}).Draw(t, "delay")
	sm.m.purge(sm.now)
	want := sm.m.live(h)
	var err error
	if delay == noBackoff {
		err = sm.s.NackNow(sm.now, h)
	} else {
		err = sm.s.Nack(sm.now, h, delay)
	}
	if !errors.Is(err, want) {
		t.Fatalf("Nack(%v, %v): got %v, want %v", h, delay, err, want)
	}
	if want == nil {
		sm.m.confirm(h.Offset)
		sm.m.endLease(h.Offset, sm.now, sm.now, ReasonNacked, delay)
	}
}

func (sm *shardMachine) reject(t *rapid.T) {
	h := sm.handle(t)
	sm.m.purge(sm.now)
	want := sm.m.live(h)
	if err := sm.s.Reject(sm.now, h); !errors.Is(err, want) {
		t.Fatalf("Reject(%v): got %v, want %v", h, err, want)
	}
	if want == nil {
		sm.m.confirm(h.Offset)
		sm.m.reject(h.Offset)
	}
}

func (sm *shardMachine) requeue(t *rapid.T) {
	quarantine := sm.s.Quarantined()
	off := rapid.Int64Range(0, sm.m.hwm).Draw(t, "offset")
	if len(quarantine) > 0 && rapid.Bool().Draw(t, "quarantined") {
		off = quarantine[rapid.IntRange(0, len(quarantine)-1).Draw(t, "which")]
	}
	sm.m.purge(sm.now)
	if got, want := sm.s.Requeue(sm.now, off), sm.m.requeue(off); got != want {
		t.Fatalf("Requeue(%d) = %v, want %v", off, got, want)
	}
}

func (sm *shardMachine) discard(t *rapid.T) {
	quarantine := sm.s.Quarantined()
	off := rapid.Int64Range(0, sm.m.hwm).Draw(t, "offset")
	if len(quarantine) > 0 && rapid.Bool().Draw(t, "quarantined") {
		off = quarantine[rapid.IntRange(0, len(quarantine)-1).Draw(t, "which")]
	}
	sm.m.purge(sm.now)
	if got, want := sm.s.Discard(sm.now, off), sm.m.discard(off); got != want {
		t.Fatalf("Discard(%d) = %v, want %v", off, got, want)
	}
}

func (sm *shardMachine) purge(t *rapid.T) {
	sm.m.purge(sm.now)
	sm.s.Purge(sm.now)
}

// settleBelow purges the partition below a high watermark at most the log's.
func (sm *shardMachine) settleBelow(t *rapid.T) {
	hwm := rapid.Int64Range(0, sm.m.hwm).Draw(t, "hwm")
	sm.m.purge(sm.now)
	moved, err := sm.s.SettleBelow(sm.now, hwm)
	require.NoError(t, err)
	if want := sm.m.settleBelow(hwm); moved != want {
		t.Fatalf("SettleBelow(%d) moved %d, want %d", hwm, moved, want)
	}
}

func (sm *shardMachine) retention(t *rapid.T) {
	sm.m.oldest = min(sm.m.oldest+int64(rapid.IntRange(1, 4).Draw(t, "n")), sm.m.hwm)
}

func (sm *shardMachine) toggleClosed(t *rapid.T) {
	sm.m.closed = !sm.m.closed
}

// restart persists a snapshot and restores it, as a crash and recovery do: leases, delays and
// corrupt skips are forgotten; attempts above the frontier, the quarantine and the requeued
// offsets survive. A restart takes time, so the clock moves on.
func (sm *shardMachine) restart(t *rapid.T) {
	var snap State
	sm.s.Snapshot(&snap)
	sm.s.Restore(snap)
	sm.now = sm.now.Add(time.Millisecond)
	if sm.clockWentBack {
		clear(sm.fences)
		sm.clockWentBack = false
	}
	sm.unread = sm.unread[:0]
	sm.m.capped = false // a restored shard starts a new episode if it is at the cap
	for off, o := range sm.m.offsets {
		switch {
		case o.below:
			*o = modelOffset{state: free, reason: ReasonRequeued, below: true}
		case o.state == quarantined:
		case off <= sm.m.frontier, o.state == corrupt:
			delete(sm.m.offsets, off)
		case o.state == leased || o.state == delayed || o.state == free:
			if o.state == leased && (o.reserved || o.scanned) {
				o.attempts-- // the snapshot left the unconfirmed reservation out, or the lease not handed over
			}
			o.state, o.nonce, o.reason, o.reserved, o.scanned = free, 0, ReasonFirst, false, false
			if o.attempts > 0 {
				o.reason = ReasonRestart
			}
		}
	}
}

// move hands the shard off to a new one (another owner) and goes on with that: a move
// changes nothing the model sees (every lease, delay, attempt and reason moves with it, the
// handles consumers hold settle on the new shard), and the old shard, fenced, settles and
// hands out nothing.
func (sm *shardMachine) move(t *rapid.T) {
	var st State
	old := sm.s
	old.HandOff(sm.now, &st)
	seed := [32]byte{byte(rapid.IntRange(0, 255).Draw(t, "seed")), 1}
	sm.s = NewShard("model", 0, Options{Config: sm.m.cfg, Seed: seed, Hooks: old.hooks, Counters: old.counters}, st)
	sm.m.capped = false
	for _, o := range sm.m.offsets {
		o.reserved, o.scanned = false, false // a reservation moves as an ordinary, counted lease
	}
	for _, h := range sm.held {
		if _, err := old.Extend(sm.now, h, 0); !errors.Is(err, ErrMoved) {
			t.Fatalf("extend of %v on the handed-off shard: %v, want ErrMoved", h, err)
		}
		if err := old.Ack(sm.now, h); !errors.Is(err, ErrMoved) {
			t.Fatalf("ack of %v on the handed-off shard: %v, want ErrMoved", h, err)
		}
	}
	if _, err := old.ReserveNext(sm.now, sm.m.hwm); err == nil {
		t.Fatalf("the handed-off shard leased a record")
	}
	var again State
	old.HandOff(sm.now.Add(time.Hour), &again)
	if !slices.Equal(again.Held, st.Held) || again.Frontier != st.Frontier {
		t.Fatalf("a second HandOff gave another state")
	}
}

// check runs after every step: the shard agrees with the model and the invariants hold.
func (sm *shardMachine) check(t *rapid.T) {
	st := sm.s.Stats()
	if st.Frontier < sm.frontier {
		t.Fatalf("frontier moved back from %d to %d (invariant 3)", sm.frontier, st.Frontier)
	}
	sm.frontier = st.Frontier
	// The shard purges lazily, the model eagerly at each touch: compare after a purge of both.
	sm.m.purge(sm.now)
	sm.s.Purge(sm.now)
	want := Stats{
		Frontier:       sm.m.frontier,
		Leased:         sm.m.count(leased),
		Delayed:        sm.m.count(delayed),
		AckedAhead:     sm.m.count(acked),
		AckedAheadRuns: sm.m.aheadRuns(),
		Corrupt:        sm.m.count(corrupt),
		Quarantined:    sm.m.quarantineSize(),
		Requeued:       sm.m.requeuedBelow(),
		Reserved:       sm.m.countReserved(),
	}
	if st = sm.s.Stats(); st != want {
		t.Fatalf("shard %+v, model %+v", st, want)
	}
	if got := sm.s.quarantinedAbove; got != sm.m.count(quarantined) {
		t.Fatalf("shard counts %d quarantined above the frontier, model %d", got, sm.m.count(quarantined))
	}
	if got, want := sm.s.Available(sm.now, sm.m.hwm), sm.m.available(); got != want {
		t.Fatalf("Available: %d, model %d", got, want)
	}
	checkRequeuedDue(t, sm.s)
	if sm.quarantined != sm.m.quarantines {
		t.Fatalf("Quarantine hook called %d times, want %d", sm.quarantined, sm.m.quarantines)
	}
	if got := sm.s.counters.Rejected.Load(); got != uint64(sm.m.rejects) {
		t.Fatalf("Rejected counted %d, want %d", got, sm.m.rejects)
	}
	if sm.stalls != sm.m.stalls {
		t.Fatalf("AckedAheadStall hook called %d times, want %d episodes", sm.stalls, sm.m.stalls)
	}
	if got := sm.s.counters.Discarded.Load(); got != uint64(sm.m.discards) {
		t.Fatalf("Discarded counted %d, want %d", got, sm.m.discards)
	}
	if st.AckedAhead > sm.m.cfg.MaxInFlight+sm.m.cfg.MaxAckedAhead+sm.m.discardedAhead {
		t.Fatalf("acked-ahead set %d exceeds in-flight cap + acked-ahead cap (checklist 24)", st.AckedAhead)
	}
	if st.AckedAheadRuns > sm.m.cfg.MaxInFlight+sm.m.cfg.MaxAckedAheadRuns+sm.m.discardedAhead {
		t.Fatalf("acked-ahead set of %d runs exceeds in-flight cap + run cap (checklist 24)", st.AckedAheadRuns)
	}
	c := sm.s.counters.Load()
	if c.Delivered != uint64(sm.m.delivered) || c.Reserved != uint64(sm.m.reservations) || c.Unused != uint64(sm.m.unused) {
		t.Fatalf("counted delivered %d reserved %d unused %d, want %d %d %d",
			c.Delivered, c.Reserved, c.Unused, sm.m.delivered, sm.m.reservations, sm.m.unused)
	}
	var snap State
	sm.s.Snapshot(&snap)
	if want := sm.m.persisted(); !slices.Equal(snap.Attempts, want) {
		t.Fatalf("snapshot attempts %v, want %v", snap.Attempts, want)
	}
	// Runs ascend, none touches the next, and the first starts above the frontier hole (the
	// frontier would have advanced over a run at the hole).
	prev := snap.Frontier
	for _, r := range snap.AckedAhead {
		if r.First <= prev+1 || r.Last < r.First {
			t.Fatalf("snapshot acked-ahead %v: not maximal runs ascending above frontier %d", snap.AckedAhead, snap.Frontier)
		}
		for off := r.First; off <= r.Last; off++ {
			if sm.m.at(off).state != acked {
				t.Fatalf("snapshot holds %d acked ahead, which was never acked (invariant 3)", off)
			}
		}
		prev = r.Last
	}
	for _, off := range snap.Quarantined {
		if sm.m.at(off).state != quarantined {
			t.Fatalf("snapshot holds %d quarantined, model says %v", off, sm.m.at(off).state)
		}
	}
}

func TestShardAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sm := &shardMachine{}
		sm.init(t)
		t.Repeat(map[string]func(*rapid.T){
			"produce":      sm.produce,
			"advanceTime":  sm.advanceTime,
			"jumpClock":    sm.jumpClock,
			"reserve":      sm.reserve,
			"reserveAhead": sm.reserveAhead,
			"confirm":      sm.confirm,
			"read":         sm.read,
			"ack":          sm.ack,
			"extend":       sm.extend,
			"nack":         sm.nack,
			"reject":       sm.reject,
			"requeue":      sm.requeue,
			"discard":      sm.discard,
			"purge":        sm.purge,
			"settleBelow":  sm.settleBelow,
			"retention":    sm.retention,
			"toggleClosed": sm.toggleClosed,
			"restart":      sm.restart,
			"move":         sm.move,
			"":             sm.check,
		})
	})
}

// checkRequeuedDue fails unless the shard's heap of requeued offsets finds the lowest due one
// that a scan of the whole quarantine finds (the heap is pushed at each release: a path
// that makes a requeued record due without one would strand it).
func checkRequeuedDue(t *rapid.T, s *Shard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want, found := int64(0), false
	for q, requeued := range s.quarantine {
		if !requeued || (found && q >= want) {
			continue
		}
		if p := s.pending.lookup(q); p.nonce != 0 || p.delayed || p.deferred {
			continue
		}
		want, found = q, true
	}
	var got int64
	ok := s.lowestRequeued(&got)
	if ok != found || got != want && found {
		t.Fatalf("lowest requeued offset due: %d (%v), a scan of the quarantine finds %d (%v)", got, ok, want, found)
	}
}
