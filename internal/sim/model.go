package sim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"narad.dev/consume/router"
)

// The model of what the cluster promised, and the checks made as each event comes in
// (docs/protocol.md, "Invariants").
//
// Time is the bubble's fake clock, which every node reads too (plus an offset of its own,
// which the model takes off: skew.go), so a lease's grant is exact: its expiry less the
// visibility it was granted with. What the model cannot know exactly (when an owner applied
// an ack that took a round trip, whether an ack whose reply was lost was applied, how far a
// duplicated extend pushed an expiry) it keeps as a range, and a check fails only when
// every point of the range breaks the promise.

// The crash windows of docs/protocol.md, "Crash windows": the tick T is 100 ms and the
// durability interval D 1 s; a tick's work and a writeout take no fake time, so the margins
// are for the ordering of events within an instant only.
const (
	tick               = 100 * time.Millisecond
	processCrashWindow = tick + time.Millisecond
	powerCutWindow     = time.Second + 2*tick + time.Millisecond
)

// key names a record: its partition and offset in an incarnation of the topic (a topic
// deleted and created again starts a new one).
type key struct {
	inc int
	p   int32
	off int64
}

func (k key) String() string {
	if k.inc == 0 {
		return fmt.Sprintf("%d/%d", k.p, k.off)
	}
	return fmt.Sprintf("%d/%d@%d", k.p, k.off, k.inc)
}

// servedLease is what an owner's consume reply said of one lease it granted: the owner, and
// the lease's expiry on its clock.
type servedLease struct {
	node   *node
	expiry time.Time
}

// lease is one delivery a consumer received: a lease on one offset, under one nonce.
type lease struct {
	id      int
	k       key
	h       router.Handle
	owner   *node  // the node that granted it
	ep      *epoch // the owner's process that granted it
	via     string // the node the consumer consumed on
	granted time.Time
	at      time.Time // when the consumer received it
	vis     time.Duration
	// The lease ended at the earliest at endMin and at the latest at endMax: it is
	// certainly live before endMin and certainly over from endMax on.
	endMin, endMax time.Time
	held           bool // a consumer holds it and may settle it
	// settling is how many settles of it are on their way: the owner may apply one at any
	// moment, so the lease is not certainly held meanwhile.
	settling int
	attempt  uint32
	reason   router.Reason
	// holder is the process that holds it now: ep, or the one that adopted it in the
	// latest hand-off of its partition it lived through; holder's end ends it.
	holder *epoch
	// movesSeen is how many of the run's moves (sim.moves) it has been carried through.
	movesSeen int
	// resp numbers the consume response that delivered it (ordered.go).
	resp int
}

// ack is a settle answered success (ok) or 502 (maybe applied), sent at s and answered at
// r: the owner applied it in between, if at all.
type ack struct {
	s, r time.Time
	l    *lease
	// owner is the node that held the record's partition's state when the ack was
	// answered: its crashes may undo the ack, until the partition moves. durable says it
	// survived to the move, which made it durable for good; lost says that a crash of owner
	// undid it before a move (why, and whether the documentation states the window).
	owner          *node
	durable        bool
	lost           string
	lostDocumented bool
	// epoch is the ownership epoch owner held the partition under when the ack was
	// answered (0 without grants), and waited says it was an AckDurable answered success:
	// in the store by then.
	epoch  uint64
	waited bool
}

// record is the model of one produced record.
type record struct {
	owner     *node
	value     string
	corrupt   bool
	corruptAt time.Time
	trimmedAt time.Time // retention removed it then (zero: retained)
	deletedAt time.Time // its topic was deleted then (zero: its incarnation lives)
	deletedBy time.Time // and every node had dropped it then
	leases    []*lease
	acks      []ack // acks answered success, not yet undone by a redelivery
	maybe     []ack // acks answered 502, not yet undone by a redelivery
	everAcked bool
	// grants are the leases of the record that its owners granted, as far as the model
	// knows, under MaxDeliveries (quarantine.go); quarantined says an owner set it aside,
	// and it has not been leased since (quarantinedAt: when it was last set aside, and
	// quarantinedBy the process that told it).
	grants        map[router.Handle]*grant
	quarantined   bool
	quarantinedAt time.Time
	quarantinedBy *epoch
	rejectState   // reject.go
	// key is the record's key in a run whose topic is ordered (ordered.go), and settledAt
	// when each settle for good of it that may have been applied (an ack or a reject) was
	// sent, and each quarantine told: kept for good, as its redeliveries are (leases).
	key       string
	settledAt []time.Time
}

func valueOf(k key) string { return fmt.Sprintf("i%d-p%d-o%d", k.inc, k.p, k.off) }

// incOf returns the incarnation a record's bytes name.
func incOf(value []byte) int {
	var inc int
	fmt.Sscanf(string(value), "i%d-", &inc)
	return inc
}

// endLeases ends the leases process e holds, as e ends, but those in the state e handed off
// for a move not adopted yet: they live on at the adopter. Called with s.mu held.
func (s *sim) endLeases(e *epoch) {
	for _, l := range s.leases {
		if l.holder == e && !s.inTransit(l) {
			l.endMin = earliest(l.endMin, e.stop)
			l.endMax = earliest(l.endMax, e.end)
		}
	}
}

// delivered checks a record a consumer received at at from a consume on node via with
// visibility vis (0: the topic's), and records its lease.
func (s *sim) delivered(m router.Message, at time.Time, via string, vis time.Duration, resp int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lapsesLocked()
	k := key{incOf(m.Value), m.Partition, m.Offset}
	s.report.Deliveries++
	if vis == 0 {
		vis = s.vt
	}
	// The node that granted the lease: the owner whose consume reply carried it, with the
	// expiry it set, or the node consumed on. The consumer's Expiry is on the clock of the
	// node it consumed on (skew.go); the model's times are true times.
	seen := s.byID[via].trueTime(m.Expiry)
	owner, expiry := s.byID[via], seen
	if o, ok := s.served[m.Receipt]; ok {
		owner, expiry = o.node, o.expiry
	}
	granted := expiry.Add(-vis)
	r := s.records[k]
	if r == nil {
		s.report.Unexpected++
		s.failKind(KindUnexpected, "%s delivered %v through %s, never produced", owner.id, k, via)
		return
	}
	if string(m.Value) != r.value {
		s.report.Unexpected++
		s.failKind(KindUnexpected, "%v delivered with %q, produced as %q (one offset, two values)", k, m.Value, r.value)
		return
	}
	// Only the partition's owner of the instant serves it: not an old owner after its
	// hand-off, nor a dead one started again after its partitions failed over.
	if want := s.ownerAt(m.Partition, granted); owner != want {
		s.failKind(KindNotOwner, "%v leased at %v by %s, which did not own partition %d then (%s did)", k, s.since(granted), owner.id, k.p,
			want.idOr("nobody: it was on its way to another node"))
		return
	}
	// With grants, only under a grant valid then (ownership.go): not after it lapsed.
	if s.ctl != nil && !s.ctl.validAt(owner, m.Partition, granted) {
		s.failKind(KindNotOwner, "%v leased at %v by %s, which held no valid ownership grant of partition %d then", k, s.since(granted), owner.id, k.p)
		return
	}
	if owner.id != via {
		s.report.Remote++
	}
	l := &lease{id: len(s.leases), k: k, h: m.Receipt, owner: owner, via: via, granted: granted, at: at, vis: vis,
		endMin: expiry, endMax: expiry, held: true, attempt: m.Attempt, reason: m.Reason, resp: resp}
	if s.ord != nil {
		s.trace("deliver %v key %q nonce %x attempt %d (%v) via %s, granted %v, expires %v, response %d", k, m.Key, m.Receipt.Nonce%0xffff, m.Attempt,
			m.Reason, via, s.since(granted), s.since(expiry), resp)
	} else {
		s.trace("deliver %v nonce %x attempt %d (%v) via %s, granted %v, expires %v", k, m.Receipt.Nonce%0xffff, m.Attempt,
			m.Reason, via, s.since(granted), s.since(expiry))
	}
	if seen.After(expiry) {
		s.failKind(KindSettleAnswer, "%v delivered through %s with an expiry of %v, after its owner's %v: a lease looks longer to its consumer than it is",
			k, via, s.since(seen), s.since(expiry))
	}
	s.grantedLocked(k, m.Receipt)
	if r.quarantined && granted.After(r.quarantinedAt) {
		r.quarantined = false // a quarantine a crash undid
	}
	for _, o := range r.leases {
		if o.h == l.h {
			s.report.Duplicates++
			s.failKind(KindOneHolder, "%v: the lease granted at %v (nonce %x) delivered twice, through %s at %v and through %s at %v",
				k, s.since(o.granted), o.h.Nonce, o.via, s.since(o.at), via, s.since(at))
			return
		}
	}
	if granted.After(at) {
		s.failKind(KindOneHolder, "%v received at %v through %s, granted later, at %v", k, s.since(at), via, s.since(granted))
		return
	}
	// A bounded hold: a record another node leased reaches its consumer within a round trip
	// of the grant, and one a gateway read ahead within the hold besides (it waited there
	// at most router.MaxReadAheadHold before it went back).
	bound := router.MaxReadAheadHold + 2*s.maxTrip + 10*time.Millisecond
	if owner.id != via {
		s.report.HeldMax, s.report.HeldBound = max(s.report.HeldMax, at.Sub(granted)), bound
	}
	if owner.id != via && at.Sub(granted) > bound {
		s.failKind(KindHeldTooLong, "%v received at %v through %s, %v after %s leased it (bound: the hold and a round trip, %v)",
			k, s.since(at), via, at.Sub(granted), owner.id, bound)
		return
	}
	l.ep = owner.epochAt(granted)
	if l.ep == nil {
		s.failKind(KindOneHolder, "%v leased at %v, when its owner %s ran no process", k, s.since(granted), owner.id)
		return
	}
	l.ep.touch(k.p, granted)
	l.holder = l.ep
	s.movedLease(l) // the hand-offs since its grant, if its reply came after them
	s.lapsedLease(l)
	if !l.holder.end.IsZero() && !s.inTransit(l) {
		// Held by a process that ended before the reply arrived: dead on arrival.
		l.endMin, l.endMax = earliest(l.endMin, l.holder.stop), earliest(l.endMax, l.holder.end)
	}
	if !r.deletedAt.IsZero() {
		// Leased before the delete, received after: the delete ended it.
		l.endMin, l.endMax = earliest(l.endMin, r.deletedAt), earliest(l.endMax, r.deletedBy)
	}
	if r.corrupt && granted.After(r.corruptAt) {
		s.report.Unexpected++
		s.failKind(KindUnexpected, "%v delivered (leased at %v) though it was made unreadable at %v", k, s.since(granted), s.since(r.corruptAt))
		return
	}
	if !r.deletedAt.IsZero() && granted.After(r.deletedAt) {
		s.report.Unexpected++
		s.failKind(KindUnexpected, "%v delivered (leased at %v) though its topic was deleted at %v, and created again", k, s.since(granted), s.since(r.deletedAt))
		return
	}
	if !r.trimmedAt.IsZero() && granted.After(r.trimmedAt) {
		s.report.Unexpected++
		s.failKind(KindUnexpected, "%v delivered (leased at %v) though retention removed it at %v", k, s.since(granted), s.since(r.trimmedAt))
		return
	}
	// One live holder (invariant 1): no two leases of an offset overlap, whichever nodes
	// they were consumed on; the same lease delivered twice overlaps itself.
	for _, o := range r.leases {
		first, second := o, l
		if l.granted.Before(o.granted) {
			first, second = l, o
		}
		if second.granted.Before(first.endMin) {
			s.failKind(KindOneHolder, "%v leased to two live holders: through %s from %v (live until at least %v), and through %s from %v",
				k, first.via, s.since(first.granted), s.since(first.endMin), second.via, s.since(second.granted))
			return
		}
	}
	// An ordered topic's promises (ordered.go): one holder per key, a key's records in order.
	if !s.checkKeyHolders(l) || !s.checkKeyOrder(l) {
		return
	}
	if len(r.leases) > 0 {
		s.report.Duplicates++
	}
	// The documented redelivery window (invariant 6): an acked record comes back only after
	// its owner crashed within the window of the ack, or its disk failed.
	var kept []ack
	for _, a := range r.acks {
		if !a.s.Before(granted) {
			kept = append(kept, a)
			continue
		}
		why, documented := s.explain(a.owner, k.p, a, granted)
		if why == "" {
			s.failKind(KindAckUndone, "%v leased again at %v through %s (attempt %d, %v), after its ack through %s answered success within [%v, %v], with no crash window or disk fault to explain it",
				k, s.since(granted), via, m.Attempt, m.Reason, a.l.via, s.since(a.s), s.since(a.r))
			return
		}
		if !documented && strings.HasPrefix(why, lapseWhy) {
			// Lost with a lapsed grant, outside the failover's window (ownership.go).
			s.failKind(KindAckUndone, "%v leased again at %v through %s (attempt %d, %v), after its ack through %s answered success within [%v, %v] by %s: %s",
				k, s.since(granted), via, m.Attempt, m.Reason, a.l.via, s.since(a.s), s.since(a.r), a.owner.idOr("?"), why)
			return
		}
		if !documented && s.failKind(KindCrashThenPowerCut, "%v leased again at %v through %s (attempt %d, %v), after its ack through %s answered success within [%v, %v]: undone by a %s, a window the documentation does not state",
			k, s.since(granted), via, m.Attempt, m.Reason, a.l.via, s.since(a.s), s.since(a.r), why) {
			return
		}
		s.report.AckedRedelivered++
		s.report.AckedRedeliveredBy[why]++
		s.trace("  %v: acked at %v, back by %s", k, s.since(a.s), why)
	}
	r.acks = kept
	var maybe []ack
	for _, a := range r.maybe {
		if !a.s.Before(granted) {
			maybe = append(maybe, a)
		}
	}
	r.maybe = maybe
	r.leases = append(r.leases, l)
	s.leases = append(s.leases, l)
	s.held = append(s.held, l)
}

// explain returns why an ack a of a record of partition p owned by owner may be undone
// before a lease granted at granted, and whether the documentation promises that window;
// "" if nothing explains it. It follows the ack through the owner's processes:
//
//   - the process that applied it has it in the page cache a tick after the ack
//     (processCrashWindow) and on disk a durability interval and a tick later
//     (powerCutWindow); a disk fault in force meanwhile (ENOSPC, failing syncs: the
//     committer then holds the window back) pushes both to a window after the fault ends;
//   - a process crash before the first loses it; a power cut before the second loses it; a
//     graceful stop persists it, unless its Close failed (a disk fault), which is a crash
//     as far as the ack is concerned;
//   - an ack that outlived a process crash in the page cache only is made durable by the
//     next process's prime of the partition, a tick after its first touch (the model knows
//     of the touches its deliveries and settles made): a power cut before that loses it,
//     a graceful stop of a process that touched it persists it.
//
// The last case, with no disk fault in play, is a window the documentation does not state
// (invariant 6 names only a tick before a process crash and D + T before a power loss);
// explain reports it as undocumented.
func (s *sim) explain(owner *node, p int32, a ack, granted time.Time) (why string, documented bool) {
	s.lapsesLocked()
	if a.durable {
		return "", false // a move made it durable
	}
	if a.lost != "" {
		return a.lost, a.lostDocumented // a move found it undone
	}
	if s.store != nil {
		return s.explainStore(owner, p, a, granted)
	}
	never := time.Unix(1<<40, 0)
	push := func(from, to time.Time, window time.Duration) (time.Time, string) {
		kind := ""
		for _, f := range owner.periods {
			if f.start.Before(to) && (f.end.IsZero() || f.end.After(from)) {
				end := never
				if !f.end.IsZero() {
					end = f.end.Add(window)
				}
				to, kind = later(to, end), f.kind
			}
		}
		return to, kind
	}
	carried := false
	diskCarry := ""
	for _, e := range owner.epochs {
		if e.end.IsZero() || !e.end.Before(granted) {
			return "", false // the ack reached the process that leased the record again
		}
		if e.end.Before(a.s) {
			continue // before the ack
		}
		if !carried {
			// The process that applied the ack (the first one live within [a.s, a.r]).
			pcAt, pcDisk := push(a.s, a.r.Add(processCrashWindow), processCrashWindow)
			durAt, durDisk := push(a.s, a.r.Add(powerCutWindow), powerCutWindow)
			switch {
			case e.kind == processCrash && e.stop.Before(pcAt):
				return withDisk(pcDisk, "process crash"), true
			case e.kind == powerCut && e.stop.Before(durAt):
				return withDisk(durDisk, "power cut"), true
			case e.kind == graceful && e.closeErr != nil && e.stop.Before(pcAt):
				return withDisk(pcDisk, "graceful stop whose Close failed"), true
			case e.kind == graceful && e.closeErr == nil, !e.stop.Before(durAt):
				return "", false // persisted
			}
			carried, diskCarry = true, durDisk // in the page cache only
			continue
		}
		// A later process: it makes the carried state durable when it primes the
		// partition, a tick after its first touch.
		primeAt := never
		disk := diskCarry
		if t, ok := e.touched[p]; ok {
			primeAt, disk = push(t, t.Add(tick+time.Millisecond), tick+time.Millisecond)
			if disk == "" {
				disk = diskCarry
			}
		}
		_, touched := e.touched[p]
		switch {
		case e.kind == powerCut && e.stop.Before(primeAt):
			if disk != "" {
				return withDisk(disk, "process crash, then power cut before the partition was primed again"), true
			}
			return "process crash, then power cut before the restarted process primed the partition", false
		case e.kind == graceful && e.closeErr == nil && touched, !e.stop.Before(primeAt):
			return "", false // persisted
		}
	}
	return "", false
}

func withDisk(disk, why string) string {
	if disk == "" {
		return why
	}
	return "disk fault (" + disk + ") then " + why
}

// undoable reports whether a crash, a power cut or a disk fault of the record's owner since
// ack a may have undone it.
func (s *sim) undoable(r *record, a ack) bool {
	why, _ := s.explain(a.owner, a.l.k.p, a, time.Now().Add(time.Hour))
	return why != ""
}

// settledSure reports whether the owner's live process certainly holds the record settled.
func (s *sim) settledSure(r *record) bool {
	if !r.deletedAt.IsZero() {
		return false // an old handle meets the new incarnation's state: either answer
	}
	for _, a := range r.acks {
		if !s.undoable(r, a) {
			return true
		}
	}
	return false
}

// unsettledSure reports whether the record was certainly never settled: no ack answered
// success or 502 since its last delivery, not unreadable, not removed by retention.
func (s *sim) unsettledSure(r *record) bool {
	return len(r.acks) == 0 && len(r.maybe) == 0 && !r.corrupt && r.trimmedAt.IsZero() && r.deletedAt.IsZero() && !s.mayBeQuarantined(r)
}

// Settle ops.
type settleOp uint8

const (
	opAck settleOp = iota
	opNack
	opExtend
	opRelease
	opReject
	opAckDurable // an AckDurable, in runs with grants (zombie.go)
)

func (o settleOp) String() string {
	return [...]string{"ack", "nack", "extend", "release", "reject", "durable ack"}[o]
}

// forGood reports whether op settles a record for good: an ack, or a reject (which
// quarantines it).
func (o settleOp) forGood() bool { return o == opAck || o == opReject || o == opAckDurable }

// newAck is an ack of lease l answered err (nil or 502 or another that may have applied
// it) within [start, end], its record's partition held by owner then. Called with s.mu
// held.
func (s *sim) newAck(start, end time.Time, l *lease, owner *node, op settleOp, err error) ack {
	a := ack{s: start, r: end, l: l, owner: owner, waited: op == opAckDurable && err == nil}
	if r := s.records[l.k]; r != nil {
		r.settledAt = append(r.settledAt, start) // every ack the model keeps is made here
	}
	if s.ctl != nil && owner != nil && s.opts.Plant != PlantUnfencedZombie { // (whose nodes save no epoch)
		a.epoch = s.ctl.epochOf(owner, l.k.p)
	}
	return a
}

// settled checks the answer err to a settle op of lease l through node via, sent at start
// and answered at end (an extend's new expiry is expiry, its argument d), and applies it to
// the model. forged says the handle was l's with another nonce. pathFaulty says frames
// between via and the owner could be lost.
func (s *sim) settled(l *lease, op settleOp, via *node, start, end time.Time, err error, expiry time.Time, d time.Duration, forged, pathFaulty bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lapsesLocked()
	r := s.records[l.k]
	what := fmt.Sprintf("%s of %v (lease through %s granted at %v) through %s within [%v, %v]", op, l.k, l.via,
		s.since(l.granted), via.id, s.since(start), s.since(end))
	if forged {
		what = "forged " + what
	}
	s.trace("%s: %v", what, err)
	if err == nil || errors.Is(err, router.ErrGone) {
		// The owner's shard answered: the partition was touched (loaded) by then.
		if o := s.holder[l.k.p]; o != nil {
			if e := o.epochAt(start); e != nil && e == o.epochAt(end) {
				e.touch(l.k.p, end)
			}
		}
	}
	live := !forged && end.Before(l.endMin)
	dead := forged || !start.Before(l.endMax)
	owner := s.holder[l.k.p] // the node holding the partition's state, which applies settles
	local := via == owner
	// A duplicated frame's copy may have been applied first: the frame itself then answers
	// as a repeated settle does.
	dup := !forged && s.dupHandles[l.h]
	// A settle made while its partition moves may meet no node holding its state for the
	// routes it took: the old owner after its hand-off (ErrMoved, or 503 forwarded), or no
	// owner in the routes at all. Through the process holding the state live (the old
	// owner's before HandOff, the one that adopted it once Adopt returned) it is applied
	// there.
	refused := false
	if m := s.moving; m != nil && m.p == l.k.p && (errors.Is(err, router.ErrMoved) || errors.Is(err, router.ErrUnavailable)) {
		e := via.cur()
		if live := m.handedOff.IsZero() && e == m.fromEp || !m.adopted.IsZero() && e == m.toEp; local && live {
			s.failKind(KindSettleAnswer, "%s answered %v while its partition moved, through %s, which held its state", what, err, via.id)
			return
		}
		refused = true
	}
	// With grants, a settle that met a node whose routes are stale, or an owner that no
	// longer holds the lease's partition (its grant lapsed, or it was revoked), is refused
	// (ErrMoved; 503, ErrUnavailable, forwarded). It changed nothing, unless the owner
	// applied it while its grant held and answered after the lapse: an ack so answered is
	// as one answered 502, applied or not.
	deposed := false
	if s.ctl != nil && !refused && (errors.Is(err, router.ErrMoved) || errors.Is(err, router.ErrUnavailable) || errors.Is(err, router.ErrNotLocal)) &&
		(s.staleFor(via, l.k.p) || l.holder != nil && s.ctl.disowned(l.holder, l.k.p, end)) {
		deposed = true
		if op.forGood() && !forged && (l.holder == nil || !s.ctl.disowned(l.holder, l.k.p, start)) {
			r.maybeRejected = r.maybeRejected || op == opReject
			r.maybe = append(r.maybe, s.newAck(start, end, l, owner, op, err))
			r.everAcked = r.everAcked || op != opReject
			l.endMin = earliest(l.endMin, start)
		}
	}
	switch {
	case refused:
		s.report.MoveRefusals++ // nothing changed
	case deposed:
		s.report.DeposedRefusals++
	case err == nil:
		if dead {
			s.failKind(KindSettleAnswer, "%s succeeded, though the lease was over by %v: only the live nonce settles", what, s.since(l.endMax))
			return
		}
		if l.holder != l.ep {
			s.report.CarriedSettles++
		}
		switch op {
		case opReject:
			// Quarantined for good: as far as the checks go, an ack (reject.go).
			s.report.Rejected++
			if !local {
				s.report.ForwardedRejects++
			}
			r.maybeRejected = true
			r.acks = append(r.acks, s.newAck(start, end, l, owner, op, err))
			l.endMin, l.endMax = earliest(l.endMin, start), earliest(l.endMax, end)
		case opAck, opAckDurable:
			s.report.Acked++
			if op == opAckDurable {
				s.report.DurableAcks++
			}
			r.acks = append(r.acks, s.newAck(start, end, l, owner, op, err))
			r.everAcked = true
			fallthrough
		case opNack, opRelease:
			l.endMin, l.endMax = earliest(l.endMin, start), earliest(l.endMax, end)
			if op == opRelease {
				s.released(l, via, owner.epochAt(end), start)
			}
		case opExtend:
			// A forwarded extend's expiry is the owner's time left counted from when it left
			// here: the owner's own is up to the call's length later.
			l.endMin = expiry
			l.endMax = later(l.endMax, expiry)
			if !local {
				l.endMax = later(l.endMax, expiry.Add(end.Sub(start)))
			}
			if dup {
				l.endMax = later(l.endMax, expiry.Add(s.maxTrip))
			}
			if expiry.Before(start.Add(d)) || expiry.After(end.Add(d)) {
				s.failKind(KindSettleAnswer, "%s by %v answered a new expiry of %v, outside [%v, %v]", what, d, s.since(expiry), s.since(start.Add(d)), s.since(end.Add(d)))
			}
			s.checkKeyHolders(l) // live longer: its key too
		}
	case op == opReject && errors.Is(err, router.ErrUnsupportedOp):
		s.rejectRefusedLocked(what, via, owner, l.k.p) // nothing changed: the lease lives on
	case op == opAckDurable && !forged && !errors.Is(err, router.ErrGone):
		// Not made durable (its partition deposed or fenced meanwhile, an owner that cannot
		// wait for its store, no reply): applied in memory or not, as a 502.
		r.maybe = append(r.maybe, s.newAck(start, end, l, owner, op, err))
		r.everAcked = true
		l.endMin = earliest(l.endMin, start)
	case errors.Is(err, router.ErrTransport), errors.Is(err, router.ErrUnavailable):
		if !pathFaulty || local {
			s.failKind(KindSettleAnswer, "%s answered %v on a healthy path", what, err)
			return
		}
		if errors.Is(err, router.ErrTransport) && !forged { // it may have been applied
			switch op {
			case opReject:
				r.maybeRejected = true
				r.maybe = append(r.maybe, s.newAck(start, end, l, owner, op, err))
				l.endMin = earliest(l.endMin, start)
			case opAck:
				s.report.AckedMaybe++
				r.maybe = append(r.maybe, s.newAck(start, end, l, owner, op, err))
				r.everAcked = true
				l.endMin = earliest(l.endMin, start)
			case opNack, opRelease:
				l.endMin = earliest(l.endMin, start)
			case opExtend:
				// Applied, it set the expiry to its arrival plus d: earlier or later.
				l.endMin = earliest(l.endMin, start.Add(d))
				l.endMax = later(l.endMax, end.Add(d+s.maxTrip))
			}
		}
	case live && dup && (op.forGood() && errors.Is(err, router.ErrAlreadySettled) || (op == opNack || op == opRelease) && errors.Is(err, router.ErrGone)):
		// The copy settled the live lease; this frame came second.
		if op == opReject {
			r.maybeRejected = true
			r.acks = append(r.acks, s.newAck(start, end, l, owner, op, err))
		}
		if op == opAck || op == opAckDurable {
			s.report.Acked++
			r.acks = append(r.acks, s.newAck(start, end, l, owner, op, err))
			r.everAcked = true
		}
		l.endMin, l.endMax = earliest(l.endMin, start), earliest(l.endMax, end)
	case !dead && dup && (op.forGood() && errors.Is(err, router.ErrAlreadySettled) || (op == opNack || op == opRelease) && errors.Is(err, router.ErrGone)):
		// The lease was ending as the frames came: the copy may have settled it first.
		if op == opReject {
			r.maybeRejected = true
			r.maybe = append(r.maybe, s.newAck(start, end, l, owner, op, err))
		}
		if op == opAck || op == opAckDurable {
			s.report.AckedMaybe++
			r.maybe = append(r.maybe, s.newAck(start, end, l, owner, op, err))
			r.everAcked = true
		}
		l.endMin, l.endMax = earliest(l.endMin, start), earliest(l.endMax, end)
	case errors.Is(err, router.ErrAlreadySettled), errors.Is(err, router.ErrGone):
		if live && !r.trimmedAt.IsZero() && !r.trimmedAt.After(end) {
			// Retention removed the record (at the settle's last instant at the latest: a
			// trim and a settle at one instant of the fake clock run in either order): a
			// consume that reached the gap jumped the frontier over it, which settles its
			// lease whatever lived of it (see docs/protocol.md, "Retention jumps, corrupt
			// skips and closed logs").
			l.endMax = earliest(l.endMax, end)
			return
		}
		if live {
			s.failKind(KindSettleAnswer, "%s answered %v, though the lease was live until at least %v", what, err, s.since(l.endMin))
			return
		}
		if errors.Is(err, router.ErrAlreadySettled) {
			if s.unsettledSure(r) {
				s.failKind(KindSettleAnswer, "%s answered %v, though the record was never acked, skipped or removed", what, err)
				return
			}
		} else if s.settledSure(r) {
			s.failKind(KindSettleAnswer, "%s answered %v, though the record is settled for good: want ErrAlreadySettled", what, err)
			return
		}
		if !forged {
			l.endMax = earliest(l.endMax, end) // over when it was applied
		}
	default:
		s.failKind(KindSettleAnswer, "%s answered %v", what, err)
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (nd *node) idOr(def string) string {
	if nd == nil {
		return def
	}
	return nd.id
}
