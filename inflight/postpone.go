package inflight

import "time"

// Postpone withdraws the live lease h names, uncounted as a GiveBack is, and keeps its offset
// invisible until until: a record its host says is not to be delivered before then (a
// delayed message, a scheduled one). The caller reads the record, finds it due later, and
// postpones it rather than deliver it. The offset then waits as a nack's delay does (counted
// in Stats.Delayed, not against the in-flight cap, never read again before until, with a wake
// when it is due), but no attempt is spent on it and its reason stays as it was. On an
// ordered topic, key is KeyOf the record's key (0 otherwise): the key's later records wait
// for it, as they wait for a nacked record of the key. An until not after now, or more than
// MaxDelay after it, is ErrInvalidDuration, changing nothing; a handle that names no live
// lease answers as for GiveBack.
//
// A restart forgets the postponement as it forgets a nack's delay: the scan reads the record
// again and its host says again when it is due.
func (s *Shard) Postpone(now time.Time, h Handle, until time.Time, key uint64) error {
	if !until.After(now) || until.Sub(now) > MaxDelay {
		return ErrInvalidDuration
	}
	at := now.UnixNano()
	var fx effects
	s.mu.Lock()
	p, err := s.touchLeaseLocked(at, h, &fx)
	if err == nil {
		s.postponeLocked(at, h.Offset, p, until.UnixNano(), key, &fx)
		s.counters.Postponed.Add(1)
	}
	s.mu.Unlock()
	s.report(&fx)
	return err
}

// postponeLocked withdraws the lease p of off, uncounted, and delays off until until.
func (s *Shard) postponeLocked(now, off int64, p pending, until int64, key uint64, fx *effects) {
	held := p.key
	s.withdrawLocked(&p, fx)
	if s.keys != nil {
		s.unbindLocked(off, held, true, now, fx) // bound already: it goes back to its key's queue
	}
	p.delayed = true
	p.until = until
	s.delayed++
	s.pending.set(off, p)
	s.pushDeadline(deadline{at: until, offset: off})
	fx.deadline = max(fx.deadline, until)
	if s.keys != nil {
		s.queueKeyLocked(off, key, now)
	}
}
