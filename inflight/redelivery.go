package inflight

import (
	"math"
	"slices"
	"time"
)

// Redelivery control: delivery limits with a quarantine, backoff, extension
// caps. Every system users compare the library with does something about a record that
// never succeeds (Kafka share groups archive it after 5 attempts, JetStream has MaxDeliver
// and BackOff, SQS a redrive policy); without it one poison record at the frontier is
// leased again every visibility timeout forever and holds the frontier.

// Backoff is a redelivery delay policy: a list of delays, or an exponential one with a cap,
// either with jitter. The zero value means no delay.
type Backoff struct {
	// Delays is the delay after the first, second, ... failed delivery; the last one
	// repeats. When set, Initial and Max are ignored.
	Delays []time.Duration
	// Initial is the delay after the first failed delivery; each later one doubles, up to
	// Max (no cap when zero).
	Initial time.Duration
	Max     time.Duration
	// Jitter spreads each delay uniformly over [d × (1 − Jitter), d], so records that fail
	// together are not redelivered together. It is clamped to [0, 1].
	Jitter float64
}

// Delay returns the delay after the given failed delivery (1 for the first), with random a
// uniformly random value for the jitter. It is at most MaxDelay.
func (b Backoff) Delay(attempt uint32, random uint64) time.Duration {
	var d time.Duration
	switch {
	case attempt == 0:
		return 0
	case len(b.Delays) > 0:
		d = b.Delays[min(int(attempt), len(b.Delays))-1]
	case b.Initial > 0:
		d = b.Initial
		for i := uint32(1); i < attempt && (b.Max <= 0 || d < b.Max) && d < math.MaxInt64/2; i++ {
			d *= 2
		}
		if b.Max > 0 {
			d = min(d, b.Max)
		}
	}
	if d <= 0 {
		return 0
	}
	d = min(d, MaxDelay)
	if jitter := min(max(b.Jitter, 0), 1); jitter > 0 {
		fraction := float64(random>>11) / (1 << 53) // uniform in [0, 1)
		d -= time.Duration(float64(d) * jitter * fraction)
	}
	return d
}

// noBackoff is endLeaseLocked's delay for a record visible again at once, whatever the
// backoff policy says (NackNow).
const noBackoff time.Duration = -1

// endLeaseLocked ends the live lease of off without settling it: it expired at end, or was
// nacked then (reason). The record is quarantined if it reached MaxDeliveries; otherwise it
// waits delay (the backoff policy's when delay is zero) or is visible again at once (delay
// noBackoff, or no delay left).
func (s *Shard) endLeaseLocked(off int64, p pending, end, now int64, reason Reason, delay time.Duration, fx *effects) {
	key := p.key
	p.nonce, p.key = 0, 0
	p.reason = reason
	s.leased--
	// A scan's lease never handed over (Handed) that expired still counts, as any lease that
	// ran out: its attempt, left out of what was persisted until now, is persisted.
	fx.dirty = fx.dirty || p.grant == grantScanned
	p.grant = grantCounted
	if s.cfg.MaxDeliveries > 0 && int(p.attempts) >= s.cfg.MaxDeliveries || s.followsQuarantinedLocked(off, key) {
		s.setAsideLocked(off, key, p.attempts, fx)
		return
	}
	switch delay {
	case noBackoff:
		delay = 0
	case 0:
		delay = s.cfg.Backoff.Delay(p.attempts, s.nonces.Uint64())
	}
	until := end + int64(delay)
	if until > now {
		// Stored delayed before its key frees, so that the free makes none of the key's
		// deferred records visible: they would only be deferred again behind it.
		p.delayed = true
		p.until = until
		s.delayed++
		s.pending.set(off, p)
	}
	if s.keys != nil {
		// Queued before it is released, so the key's next record waits for it (invariant:
		// a key's records in order, its redelivery before any later one).
		s.unbindLocked(off, key, true, now, fx)
	}
	if p.delayed {
		s.pushDeadline(deadline{at: until, offset: off})
		fx.deadline = max(fx.deadline, until)
		return
	}
	s.releaseLocked(off, p, fx)
}

// quarantineLocked sets off aside: settled as far as the frontier is concerned, persisted,
// reported.
func (s *Shard) quarantineLocked(off int64, attempts uint32, fx *effects) {
	s.pending.remove(off)
	s.setQuarantine(off, false)
	if off == s.frontier+1 {
		s.advanceLocked()
		fx.released++ // the frontier hole moved: at the acked-ahead cap, more is visible
	}
	fx.dirty = true
	fx.quarantined = append(fx.quarantined, Attempt{Offset: off, Count: attempts})
	s.counters.Quarantined.Add(1)
}

// setQuarantine puts off in the quarantine, requeued or not, and keeps the counts of its
// entries (requeued, quarantinedAbove).
func (s *Shard) setQuarantine(off int64, requeued bool) {
	was, ok := s.quarantine[off]
	if ok && was {
		s.requeued--
	}
	if off > s.frontier {
		if ok && !was {
			s.quarantinedAbove--
		}
		if !requeued {
			s.quarantinedAbove++
		}
	}
	if requeued {
		s.requeued++
		s.requeuedDue.push(releasedOffset(off))
		s.emptyAt.Store(-1) // a requeued record below the frontier goes first
		s.nextFresh.Store(-1)
	}
	s.quarantine[off] = requeued
	s.settledAbove = max(s.settledAbove, off)
}

// clearQuarantine takes off out of the quarantine, if it is there, and keeps the counts of its
// entries.
func (s *Shard) clearQuarantine(off int64) {
	if requeued, ok := s.quarantine[off]; ok {
		switch {
		case requeued:
			s.requeued--
		case off > s.frontier:
			s.quarantinedAbove--
		}
		delete(s.quarantine, off)
	}
}

// lowestRequeued finds the lowest requeued offset below the frontier that is neither leased
// nor delayed nor deferred, dropping the entries of requeuedDue that no longer count from its
// top (an offset leased, delayed or deferred is pushed again when it is released).
func (s *Shard) lowestRequeued(off *int64) bool {
	for len(s.requeuedDue) > 0 {
		q := int64(s.requeuedDue[0])
		if requeued := s.quarantine[q]; requeued {
			if p := s.pending.lookup(q); p.nonce == 0 && !p.delayed && !p.deferred {
				*off = q
				return true
			}
		}
		s.requeuedDue.pop()
	}
	return false
}

// extendedExpiry is the expiry an extend by d at now gives the lease p, within the topic's
// MaxExtension and MaxLeaseLifetime.
func (s *Shard) extendedExpiry(now int64, p pending, d time.Duration) int64 {
	if d <= 0 {
		d = time.Duration(s.visibility)
	}
	if s.cfg.MaxExtension > 0 {
		d = min(d, s.cfg.MaxExtension)
	}
	return s.capLifetime(p.leasedAt, now+int64(d))
}

// capLifetime caps an expiry at the topic's MaxLeaseLifetime from the lease's grant. A live
// lease expires after now, so a capped extension never moves its expiry into the past.
func (s *Shard) capLifetime(leasedAt, until int64) int64 {
	if s.cfg.MaxLeaseLifetime > 0 {
		until = min(until, leasedAt+int64(s.cfg.MaxLeaseLifetime))
	}
	return until
}

// Quarantined returns the partition's quarantined offsets, ascending; those requeued and
// waiting for delivery are not included.
func (s *Shard) Quarantined() []int64 {
	s.mu.Lock()
	out := make([]int64, 0, len(s.quarantine)-s.requeued)
	for off, requeued := range s.quarantine {
		if !requeued {
			out = append(out, off)
		}
	}
	s.mu.Unlock()
	slices.Sort(out)
	return out
}

// Requeue brings a quarantined offset back for delivery, with its attempts counted afresh
// and ReasonRequeued. Above the frontier it is an unresolved offset again; at or below it
// (the frontier passed over it meanwhile), it is delivered before anything above the
// frontier and leaves the quarantine when acked, all without moving the frontier back
// (invariant "no frontier past an ack"). It reports whether off was quarantined.
func (s *Shard) Requeue(now time.Time, off int64) bool {
	return s.onQuarantined(now, off, func(off int64, fx *effects) bool {
		return s.requeueLocked(now.UnixNano(), off, fx)
	})
}

// onQuarantined applies op to off under the shard's lock, once the expiries due at now are
// purged, unless the shard's grant has lapsed; it reports op's answer.
func (s *Shard) onQuarantined(now time.Time, off int64, op func(off int64, fx *effects) bool) bool {
	var fx effects
	s.mu.Lock()
	s.purgeLocked(now.UnixNano(), &fx)
	ok := !s.lapsedAt(now.UnixNano()) && op(off, &fx)
	s.mu.Unlock()
	s.report(&fx)
	return ok
}

// RequeueAll requeues every quarantined offset and returns how many.
func (s *Shard) RequeueAll(now time.Time) int {
	var fx effects
	s.mu.Lock()
	s.purgeLocked(now.UnixNano(), &fx)
	n := 0
	lapsed := s.lapsedAt(now.UnixNano())
	for off, requeued := range s.quarantine {
		if !requeued && !lapsed && s.requeueLocked(now.UnixNano(), off, &fx) {
			n++
		}
	}
	s.mu.Unlock()
	s.report(&fx)
	return n
}

// Discard settles a quarantined offset for good, as an ack would have: the host copied the
// record elsewhere (a dead-letter queue) or gave up on it, and it is never delivered again.
// At or below the frontier (which passed over it) it simply leaves the quarantine; above it
// (a hole lies beneath) it moves to the acked-ahead set, which the frontier passes over just
// as it passed the quarantined offset, so the frontier never moves back (invariant "no
// frontier past an ack"). The persisted state never grows for it: the acked-ahead section
// takes the room before the quarantine's, and the offset may join two runs into one (at the
// acked-ahead cap too: like an ack, a discard is always accepted). The partition is reported
// dirty, so the committer persists the change.
//
// It reports whether off was quarantined. An offset that is not (never quarantined, or
// requeued: waiting for delivery again, or leased after a requeue) changes nothing and gets
// false, as does any offset of a dropped, handed-off or lapsed shard, and one above restored
// key tails the shard has not verified yet (Verifying: the caller verifies first, as a scan
// does): settled into the runs there, a later restart would take it for one of a tail's
// parked records and deliver it again.
func (s *Shard) Discard(now time.Time, off int64) bool {
	return s.onQuarantined(now, off, s.discardLocked)
}

func (s *Shard) discardLocked(off int64, fx *effects) bool {
	if requeued, ok := s.quarantine[off]; !ok || requeued || s.dropped || s.unverifiedAt(off) {
		return false
	}
	s.clearQuarantine(off)
	s.leftQuarantineLocked(off, false, 0, fx)
	if off > s.frontier {
		// A quarantined offset at the frontier hole was passed over when it was quarantined
		// (or restored), so a hole lies beneath this one: it parks in the acked-ahead set.
		wasCapped := s.capped
		if s.keys != nil {
			// Its key may be unknown: no tail may lie below it, now or later.
			s.unparkBelowLocked(off, fx)
			s.keys.parkFrom = max(s.keys.parkFrom, off+1)
		}
		s.ahead.insert(off)
		if s.keys != nil {
			s.settledAheadLocked(off)
		}
		s.checkCapLocked()
		if wasCapped && !s.capped {
			fx.released++ // it joined two runs and ended a stall: more is visible
		}
	}
	s.counters.Discarded.Add(1)
	fx.dirty = true
	return true
}

func (s *Shard) requeueLocked(at, off int64, fx *effects) bool {
	if requeued, ok := s.quarantine[off]; !ok || requeued || s.dropped {
		return false
	}
	fresh := pending{reason: ReasonRequeued}
	if off > s.frontier {
		s.clearQuarantine(off)
		s.pending.set(off, fresh)
		if off < s.cursor {
			s.released.push(releasedOffset(off))
			s.nextFresh.Store(-1)
		} else {
			s.pendingAbove = max(s.pendingAbove, off) // the cursor reaches it in turn
		}
	} else {
		s.setQuarantine(off, true)
		s.pending.set(off, fresh)
	}
	s.leftQuarantineLocked(off, true, at, fx)
	s.counters.Requeued.Add(1)
	fx.released++
	fx.dirty = true
	return true
}
