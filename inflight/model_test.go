package inflight

import (
	"errors"
	"slices"
	"testing"
	"time"

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
)

type modelOffset struct {
	state    modelState
	nonce    uint64
	until    time.Time
	attempts uint32
	reason   Reason
}

type model struct {
	frontier  int64
	offsets   map[int64]*modelOffset
	inFlight  int
	ackedCap  int
	hwm       int64
	oldest    int64
	corruptAt map[int64]bool // the log's permanently unreadable offsets
	closed    bool           // the log answers every read with ErrLogClosed
}

func (m *model) at(off int64) *modelOffset {
	o, ok := m.offsets[off]
	if !ok {
		o = &modelOffset{}
		m.offsets[off] = o
	}
	return o
}

func (m *model) count(st modelState) int {
	n := 0
	for off, o := range m.offsets {
		if off > m.frontier && o.state == st {
			n++
		}
	}
	return n
}

func (m *model) purge(now time.Time) {
	for _, o := range m.offsets {
		switch {
		case o.state == leased && !now.Before(o.until):
			o.state, o.nonce, o.reason = free, 0, ReasonExpired
		case o.state == delayed && !now.Before(o.until):
			o.state = free
		}
	}
}

func (m *model) advance() {
	for {
		o, ok := m.offsets[m.frontier+1]
		if !ok || (o.state != acked && o.state != corrupt) {
			return
		}
		m.frontier++
	}
}

// reserve predicts ReserveNext: the offset it leases, or the error.
func (m *model) reserve() (int64, error) {
	if m.count(leased) >= m.inFlight {
		return 0, ErrInFlightCap
	}
	hole := m.frontier + 1
	if hole >= m.hwm {
		return 0, ErrEmpty
	}
	if m.count(acked) >= m.ackedCap {
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
	if h.Offset <= m.frontier {
		return ErrAlreadySettled
	}
	o := m.at(h.Offset)
	if o.state == acked || o.state == corrupt {
		return ErrAlreadySettled
	}
	if o.state != leased || o.nonce != h.Nonce {
		return ErrGone
	}
	return nil
}

func (m *model) jump(oldest int64) bool {
	if oldest-1 <= m.frontier {
		return false
	}
	m.frontier = oldest - 1
	for off := range m.offsets {
		if off <= m.frontier {
			delete(m.offsets, off)
		}
	}
	m.advance()
	return true
}

type shardMachine struct {
	s        *Shard
	m        *model
	now      time.Time
	unread   []Lease  // reserved, not read yet
	held     []Handle // handed to a consumer, possibly stale by now
	frontier int64    // the highest frontier seen, to check it never moves back
}

func (sm *shardMachine) init(t *rapid.T) {
	sm.m = &model{
		frontier:  rapid.Int64Range(-1, 5).Draw(t, "frontier"),
		offsets:   map[int64]*modelOffset{},
		inFlight:  rapid.IntRange(1, 6).Draw(t, "inFlightCap"),
		ackedCap:  rapid.IntRange(1, 6).Draw(t, "ackedAheadCap"),
		corruptAt: map[int64]bool{},
	}
	sm.m.hwm = sm.m.frontier + 1
	sm.m.oldest = sm.m.frontier + 1
	for _, off := range rapid.SliceOfN(rapid.Int64Range(0, 60), 0, 6).Draw(t, "corrupt") {
		sm.m.corruptAt[off] = true
	}
	sm.now = epoch
	sm.frontier = sm.m.frontier
	seed := [32]byte{byte(rapid.IntRange(0, 255).Draw(t, "seed"))}
	cfg := Config{VisibilityTimeout: 10 * time.Second, MaxInFlight: sm.m.inFlight, MaxAckedAhead: sm.m.ackedCap}
	sm.s = NewShard("model", 0, Options{Config: cfg, Seed: seed}, State{Frontier: sm.m.frontier})
}

func (sm *shardMachine) produce(t *rapid.T) {
	sm.m.hwm += int64(rapid.IntRange(1, 5).Draw(t, "n"))
}

func (sm *shardMachine) advanceTime(t *rapid.T) {
	step := rapid.SampledFrom([]time.Duration{time.Nanosecond, time.Second, 5 * time.Second, 10*time.Second - 1, 10 * time.Second}).Draw(t, "step")
	sm.now = sm.now.Add(step)
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
	if lease.Offset != wantOff {
		t.Fatalf("ReserveNext leased %d, want the lowest free offset %d", lease.Offset, wantOff)
	}
	o := sm.m.at(wantOff)
	o.attempts++
	if lease.Attempt != o.attempts || lease.Reason != o.reason {
		t.Fatalf("lease of %d: attempt %d reason %v, want %d %v", wantOff, lease.Attempt, lease.Reason, o.attempts, o.reason)
	}
	if !lease.Expiry.Equal(sm.now.Add(10 * time.Second)) {
		t.Fatalf("expiry %v, want now + visibility", lease.Expiry)
	}
	o.state, o.nonce, o.until = leased, lease.Nonce, lease.Expiry
	sm.unread = append(sm.unread, lease)
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
			o := sm.m.at(lease.Offset)
			o.state, o.nonce = free, 0
			o.attempts--
		}
	case lease.Offset < sm.m.oldest:
		wantJump := sm.m.jump(sm.m.oldest)
		if jumped := sm.s.SkipRetention(sm.now, lease.Handle, sm.m.oldest); jumped != wantJump {
			t.Fatalf("SkipRetention jumped=%v, want %v", jumped, wantJump)
		}
	case sm.m.corruptAt[lease.Offset]:
		want := sm.m.live(lease.Handle)
		if err := sm.s.SkipCorrupt(sm.now, lease.Handle); !errors.Is(err, want) {
			t.Fatalf("SkipCorrupt: got %v, want %v", err, want)
		}
		if want == nil {
			sm.m.at(lease.Offset).state = corrupt
			sm.m.advance()
		}
	default:
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
		sm.m.at(h.Offset).state = acked
		sm.m.advance()
	}
}

func (sm *shardMachine) extend(t *rapid.T) {
	h := sm.handle(t)
	d := rapid.SampledFrom([]time.Duration{0, time.Second, 20 * time.Second}).Draw(t, "d")
	sm.m.purge(sm.now)
	want := sm.m.live(h)
	if err := sm.s.Extend(sm.now, h, d); !errors.Is(err, want) {
		t.Fatalf("Extend(%v): got %v, want %v", h, err, want)
	}
	if want == nil {
		if d == 0 {
			d = 10 * time.Second
		}
		sm.m.at(h.Offset).until = sm.now.Add(d)
	}
}

func (sm *shardMachine) nack(t *rapid.T) {
	h := sm.handle(t)
	delay := rapid.SampledFrom([]time.Duration{0, 0, 3 * time.Second}).Draw(t, "delay")
	sm.m.purge(sm.now)
	want := sm.m.live(h)
	if err := sm.s.Nack(sm.now, h, delay); !errors.Is(err, want) {
		t.Fatalf("Nack(%v): got %v, want %v", h, err, want)
	}
	if want == nil {
		o := sm.m.at(h.Offset)
		o.state, o.nonce, o.reason = free, 0, ReasonNacked
		if delay > 0 {
			o.state, o.until = delayed, sm.now.Add(delay)
		}
	}
}

func (sm *shardMachine) purge(t *rapid.T) {
	sm.m.purge(sm.now)
	sm.s.Purge(sm.now)
}

func (sm *shardMachine) retention(t *rapid.T) {
	sm.m.oldest = min(sm.m.oldest+int64(rapid.IntRange(1, 4).Draw(t, "n")), sm.m.hwm)
}

func (sm *shardMachine) toggleClosed(t *rapid.T) {
	sm.m.closed = !sm.m.closed
}

// restart persists a snapshot and restores it, as a crash and recovery do: leases, delays and
// corrupt skips are forgotten, attempts survive.
func (sm *shardMachine) restart(t *rapid.T) {
	var snap State
	sm.s.Snapshot(&snap)
	sm.s.Restore(snap)
	sm.unread = sm.unread[:0]
	for off, o := range sm.m.offsets {
		switch {
		case off <= sm.m.frontier:
			delete(sm.m.offsets, off)
		case o.state == corrupt:
			delete(sm.m.offsets, off)
		case o.state == leased || o.state == delayed || o.state == free:
			o.state, o.nonce = free, 0
			if o.attempts > 0 {
				o.reason = ReasonRestart
			}
		}
	}
}

// check runs after every step: the shard agrees with the model and the invariants hold.
func (sm *shardMachine) check(t *rapid.T) {
	st := sm.s.Stats()
	if st.Frontier < sm.frontier {
		t.Fatalf("frontier moved back from %d to %d (invariant 3)", sm.frontier, st.Frontier)
	}
	sm.frontier = st.Frontier
	want := Stats{
		Frontier:   sm.m.frontier,
		Leased:     sm.m.count(leased),
		Delayed:    sm.m.count(delayed),
		AckedAhead: sm.m.count(acked),
		Corrupt:    sm.m.count(corrupt),
	}
	// The shard purges lazily, the model eagerly at each touch: compare after a purge of both.
	sm.m.purge(sm.now)
	sm.s.Purge(sm.now)
	want.Leased, want.Delayed = sm.m.count(leased), sm.m.count(delayed)
	if st = sm.s.Stats(); st != want {
		t.Fatalf("shard %+v, model %+v", st, want)
	}
	if st.AckedAhead > sm.m.inFlight+sm.m.ackedCap {
		t.Fatalf("acked-ahead set %d exceeds in-flight cap + acked-ahead cap (checklist 24)", st.AckedAhead)
	}
	// Invariant 1: no offset has two live leases. Live handles are distinct by offset.
	seen := map[int64]bool{}
	for off, o := range sm.m.offsets {
		if o.state == leased && off > sm.m.frontier {
			if seen[off] {
				t.Fatalf("offset %d leased twice", off)
			}
			seen[off] = true
		}
	}
	var snap State
	sm.s.Snapshot(&snap)
	if !slices.IsSorted(snap.AckedAhead) || (len(snap.AckedAhead) > 0 && snap.AckedAhead[0] <= snap.Frontier) {
		t.Fatalf("snapshot acked-ahead %v not ascending above frontier %d", snap.AckedAhead, snap.Frontier)
	}
	for _, off := range snap.AckedAhead {
		if sm.m.at(off).state != acked {
			t.Fatalf("snapshot holds %d acked ahead, which was never acked (invariant 3)", off)
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
			"reserve":      sm.reserve,
			"read":         sm.read,
			"ack":          sm.ack,
			"extend":       sm.extend,
			"nack":         sm.nack,
			"purge":        sm.purge,
			"retention":    sm.retention,
			"toggleClosed": sm.toggleClosed,
			"restart":      sm.restart,
			"":             sm.check,
		})
	})
}
