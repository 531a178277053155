package offsets

import (
	"cmp"
	"maps"
	"slices"
	"sync"
)

// Shards is the tests' model of the in-flight tracker behind Source: per partition a frontier,
// an acked-ahead set, delivery attempts of unresolved offsets, a quarantine whose entries
// are requeued or not, and, as on an ordered topic, parked offsets: read and deferred behind
// their blocked key (KeyOf), kept in the acked-ahead runs and named by the key tails, never
// settled. Everything it holds was acked, counted, quarantined or requeued, and it
// remembers every value each set ever held, so a recovery can be checked against it: never
// more than the shard held (invariant I1). Exported so the external test package uses it too.
type Shards struct {
	mu    sync.Mutex
	parts map[key]*shard
	hist  map[key]*history // outlives shards: a drop and a reseed add to it
}

type shard struct {
	// incarnation and host are what SeedBound installed, handed back by State as the
	// router's shards hand back theirs; 0 after Seed (a Source that keeps none).
	incarnation, host uint64
	frontier          int64
	ahead             map[int64]bool
	attempts          map[int64]uint32
	quarantine        map[int64]bool // true: requeued (then at or below the frontier)
	parked            map[int64]bool // in ahead too, unsettled: the frontier stops below them
	*history
}

// history is what each set of a partition's shards ever held, for the oracles.
type history struct {
	everAttempt     map[Attempt]bool
	everQuarantined map[int64]bool
	everRequeued    map[int64]bool // requeued at or below the frontier at some point
	released        map[int64]bool // requeued above the frontier (unresolved again) at some point
	requeueSettled  map[int64]bool // requeued at or below the frontier, then acked
	everParked      map[int64]bool // parked at some point (its attempts then counted afresh)
}

func NewShards() *Shards { return &Shards{parts: map[key]*shard{}, hist: map[key]*history{}} }

// Inherit makes s share old's history: a restarted process's shards answer for what the
// shards before the crash held too, since a recovery may legitimately go back to a record they
// wrote. Call it before the first Seed.
func (s *Shards) Inherit(old *Shards) {
	old.mu.Lock()
	defer old.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hist = old.hist
}

func (s *Shards) historyOf(k key) *history {
	h := s.hist[k]
	if h == nil {
		h = &history{everAttempt: map[Attempt]bool{}, everQuarantined: map[int64]bool{},
			everRequeued: map[int64]bool{}, released: map[int64]bool{}, requeueSettled: map[int64]bool{},
			everParked: map[int64]bool{}}
		s.hist[k] = h
	}
	return h
}

// Seed installs a shard with the given state (what a host does with Load's result), the way
// the in-flight tracker restores one: attempts only above the frontier and not acked ahead,
// requeued offsets only at or below it.
func (s *Shards) Seed(topic string, partition int32, st State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{topic, partition}
	sh := &shard{frontier: st.Frontier, ahead: map[int64]bool{}, attempts: map[int64]uint32{},
		quarantine: map[int64]bool{}, parked: map[int64]bool{}, history: s.historyOf(k)}
	if !st.Found {
		sh.frontier = -1
	}
	for _, o := range offsetsOf(st.Ahead) {
		if o > sh.frontier {
			sh.ahead[o] = true
			if InTails(st.KeyTails, o) {
				sh.parked[o], sh.everParked[o] = true, true
			}
		}
	}
	for _, o := range st.Quarantine {
		sh.quarantine[o] = false
		sh.everQuarantined[o] = true
	}
	for _, o := range st.Requeued {
		if o <= sh.frontier {
			sh.quarantine[o] = true
			sh.everRequeued[o] = true
		}
	}
	for _, a := range st.Attempts {
		if a.Offset > sh.frontier && !sh.ahead[a.Offset] && a.Count > 0 {
			sh.attempts[a.Offset] = a.Count
			sh.everAttempt[a] = true
		}
	}
	s.parts[k] = sh
}

// SeedBound is Seed for a host that keeps the state's identity with the shard, as the router
// does: State hands back st.Incarnation and st.HostIncarnation, so the prime binds consumer.id
// to the host incarnation the state was loaded under.
func (s *Shards) SeedBound(topic string, partition int32, st State) {
	s.Seed(topic, partition, st)
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	sh.incarnation, sh.host = st.Incarnation, st.HostIncarnation
}

// Drop removes the shard: State answers ok=false for it from now on.
func (s *Shards) Drop(topic string, partition int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.parts, key{topic, partition})
}

// KeyOf is the model's key of the record at off: one of three, never 0.
func KeyOf(off int64) uint64 { return 0x9e3779b97f4a7c15 * uint64(off%3+1) }

// InTails reports whether tails name off unsettled: its key's tail starts at or below it.
func InTails(tails []KeyTail, off int64) bool {
	for _, k := range tails {
		if k.Key == KeyOf(off) && off >= k.From {
			return true
		}
	}
	return false
}

func (sh *shard) unresolved(off int64) bool {
	_, q := sh.quarantine[off]
	return off > sh.frontier && !sh.ahead[off] && !q
}

// advance moves the frontier over acked-ahead and quarantined offsets.
func (sh *shard) advance() {
	for {
		next := sh.frontier + 1
		_, q := sh.quarantine[next]
		switch {
		case sh.parked[next]:
			return
		case sh.ahead[next]:
			delete(sh.ahead, next)
		case q:
		default:
			return
		}
		delete(sh.attempts, next)
		sh.frontier = next
	}
}

// Ack settles off and reports whether the state changed. A requeued offset at or below the
// frontier leaves the quarantine; a quarantined one cannot be acked.
func (s *Shards) Ack(topic string, partition int32, off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	if sh == nil {
		return false
	}
	if requeued, ok := sh.quarantine[off]; ok {
		if !requeued {
			return false
		}
		delete(sh.quarantine, off)
		sh.requeueSettled[off] = true
		return true
	}
	if !sh.unresolved(off) {
		return false
	}
	delete(sh.attempts, off)
	sh.settleKey(off)
	sh.ahead[off] = true
	sh.advance()
	return true
}

// settleKey gives back the parked offsets of off's key below off, which is being acked, as
// an ordered shard does: a key tail names every record of its key from its lowest parked one,
// so no acked record of the key may lie above a parked one.
func (sh *shard) settleKey(off int64) {
	for o, parked := range sh.parked {
		if parked && o < off && KeyOf(o) == KeyOf(off) {
			delete(sh.parked, o)
			delete(sh.ahead, o)
		}
	}
}

// Park defers an unresolved offset above the frontier behind its key, as an ordered topic's
// shard does: it joins the acked-ahead runs, unsettled, and the frontier stops below it.
func (s *Shards) Park(topic string, partition int32, off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	if sh == nil || !sh.unresolved(off) {
		return false
	}
	for o, acked := range sh.ahead {
		if acked && !sh.parked[o] && o > off && KeyOf(o) == KeyOf(off) {
			return false // never below an ack of its key, as an ordered shard parks
		}
	}
	delete(sh.attempts, off) // counted afresh, as for an offset acked ahead
	sh.ahead[off], sh.parked[off] = true, true
	sh.everParked[off] = true
	return true
}

// Unpark ends a parked offset: acked (settled, the frontier may pass it) or given back for
// delivery (unresolved again).
func (s *Shards) Unpark(topic string, partition int32, off int64, ack bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	if sh == nil || !sh.parked[off] {
		return false
	}
	delete(sh.parked, off)
	if !ack {
		delete(sh.ahead, off)
		return true
	}
	delete(sh.attempts, off)
	sh.settleKey(off)
	sh.advance()
	return true
}

// Parked returns the shard's parked offsets, ascending.
func (s *Shards) Parked(topic string, partition int32) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	if sh == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(sh.parked))
}

// Deliver counts a delivery of an unresolved offset above the frontier (a lease granted).
func (s *Shards) Deliver(topic string, partition int32, off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	if sh == nil || !sh.unresolved(off) {
		return false
	}
	sh.attempts[off]++
	sh.everAttempt[Attempt{Offset: off, Count: sh.attempts[off]}] = true
	return true
}

// Quarantine sets an unresolved offset above the frontier aside; the frontier passes over it.
func (s *Shards) Quarantine(topic string, partition int32, off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	if sh == nil || !sh.unresolved(off) {
		return false
	}
	delete(sh.attempts, off)
	sh.quarantine[off] = false
	sh.everQuarantined[off] = true
	sh.advance()
	return true
}

// Requeue brings a quarantined offset back: at or below the frontier it becomes requeued;
// above it, an unresolved offset again with its attempts counted afresh.
func (s *Shards) Requeue(topic string, partition int32, off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	if sh == nil {
		return false
	}
	if requeued, ok := sh.quarantine[off]; !ok || requeued {
		return false
	}
	if off <= sh.frontier {
		sh.quarantine[off] = true
		sh.everRequeued[off] = true
	} else {
		delete(sh.quarantine, off)
		sh.released[off] = true
	}
	return true
}

// Snapshot is the shard's state (Found false when there is no shard).
func (s *Shards) Snapshot(topic string, partition int32) State {
	var st State
	st.Found = s.State(topic, partition, &st)
	if !st.Found {
		st.Frontier = -1
	}
	return st
}

// Settled reports whether off is settled in the shard.
func (s *Shards) Settled(topic string, partition int32, off int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	return sh != nil && (off <= sh.frontier || (sh.ahead[off] && !sh.parked[off]))
}

// History answers what the shard's sets ever held, for the invariants' oracles.
type History struct {
	Attempt     func(Attempt) bool // (offset, count) was ever the offset's attempts
	Quarantined func(int64) bool   // ever quarantined
	Requeued    func(int64) bool   // ever requeued at or below the frontier
	Released    func(int64) bool   // ever requeued above the frontier: unresolved again
	// RequeueSettled: requeued at or below the frontier, then acked.
	RequeueSettled func(int64) bool
	Parked         func(int64) bool // ever parked behind its key
}

// History returns the partition's history; it reads the shard under its lock at each call.
func (s *Shards) History(topic string, partition int32) History {
	get := func(f func(sh *shard) bool) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		h := s.hist[key{topic, partition}]
		return h != nil && f(&shard{history: h})
	}
	return History{
		Attempt:        func(a Attempt) bool { return get(func(sh *shard) bool { return sh.everAttempt[a] }) },
		Quarantined:    func(o int64) bool { return get(func(sh *shard) bool { return sh.everQuarantined[o] }) },
		Requeued:       func(o int64) bool { return get(func(sh *shard) bool { return sh.everRequeued[o] }) },
		Released:       func(o int64) bool { return get(func(sh *shard) bool { return sh.released[o] }) },
		RequeueSettled: func(o int64) bool { return get(func(sh *shard) bool { return sh.requeueSettled[o] }) },
		Parked:         func(o int64) bool { return get(func(sh *shard) bool { return sh.everParked[o] }) },
	}
}

// Unresolved returns the shard's unresolved offsets in (frontier, upTo]: what Deliver and
// Quarantine may take.
func (s *Shards) Unresolved(topic string, partition int32, upTo int64) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	if sh == nil {
		return nil
	}
	var out []int64
	for o := sh.frontier + 1; o <= upTo; o++ {
		if sh.unresolved(o) {
			out = append(out, o)
		}
	}
	return out
}

// State implements Source.
func (s *Shards) State(topic string, partition int32, into *State) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.parts[key{topic, partition}]
	into.Ahead, into.Attempts = into.Ahead[:0], into.Attempts[:0]
	into.Quarantine, into.Requeued, into.KeyTails = into.Quarantine[:0], into.Requeued[:0], into.KeyTails[:0]
	if sh == nil {
		into.Frontier = -1
		return false
	}
	into.Frontier, into.Incarnation, into.HostIncarnation = sh.frontier, sh.incarnation, sh.host
	into.Ahead = AppendRuns(into.Ahead, slices.Sorted(maps.Keys(sh.ahead)))
	for o, n := range sh.attempts {
		into.Attempts = append(into.Attempts, Attempt{Offset: o, Count: n})
	}
	for o, requeued := range sh.quarantine {
		if requeued {
			into.Requeued = append(into.Requeued, o)
		} else {
			into.Quarantine = append(into.Quarantine, o)
		}
	}
	slices.SortFunc(into.Attempts, func(a, b Attempt) int { return cmp.Compare(a.Offset, b.Offset) })
	slices.Sort(into.Quarantine)
	slices.Sort(into.Requeued)
	// A tail per key with parked offsets, from its lowest.
	for _, o := range slices.Sorted(maps.Keys(sh.parked)) {
		if slices.ContainsFunc(into.KeyTails, func(k KeyTail) bool { return k.Key == KeyOf(o) }) {
			continue
		}
		into.KeyTails = append(into.KeyTails, KeyTail{Key: KeyOf(o), From: o})
	}
	return true
}
