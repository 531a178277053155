package sim

import (
	"time"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
)

// Redelivery control under MaxDeliveries. In some runs (drawn from a stream of their own)
// the topic sets TopicConfig.MaxDeliveries to 1, 2 or 3, and each process reports its
// quarantines to the model through Config.OnQuarantine. An owner counts an attempt for
// every lease it grants, and uncounts it for a lease given back unprocessed: one its
// consumer released (Release, forwarded as the node wire's version 7 Release), or one a
// node never handed to a consumer (the consumer left, the reply came too late or a
// peer's routes disowned it: a Cancel, a Release), so a record is quarantined only after
// MaxDeliveries deliveries that count.
//
// The model counts, per record, its grants: every lease a consumer received, and every
// lease an owner's consume reply carried to another node, received by a consumer or not.
// A grant does not count once it was given back with success: released by its consumer
// through a path that speaks version 7 end to end (an older owner gets a nack, which
// counts), or released by the node it was served to (a Release frame the owner answered
// with success); unless the process that applied the give-back crashed since (its
// uncount may not have reached its disk). A grant given back by a Cancel counts all the
// same (the model cannot tell whether the cancel found the reply), and so does a grant
// whose consume reply was lost: the count errs high, never low. A quarantine of a record
// with fewer grants that count than MaxDeliveries breaks the promise, unless a reject may
// have set it aside (reject.go) or, under QuarantineKeys, it may have followed a lower record
// of its key into the quarantine (quarantinedkeys.go).
//
// A quarantined record is settled as far as its frontier is concerned: the liveness check
// does not wait for its ack, and a stale handle of it may answer ErrAlreadySettled.

// grant is one lease of a record that its owner granted, as the model knows of it.
type grant struct {
	// returned is the process that applied a give-back of the lease (a release answered
	// success, uncounted); nil if none did.
	returned *epoch
}

// drawMaxDeliveries sets the topic's MaxDeliveries in some runs (from a stream of their
// own, so that a run without it draws what it drew before it was simulated), or as
// Options.MaxDeliveries says.
func (s *sim) drawMaxDeliveries() {
	qr, on := s.degradeClass(0x6d61786465762e73, s.opts.MaxDeliveries > 0) // "maxdev.s"
	if !on {
		return
	}
	value := 1 + qr.IntN(3)
	if s.opts.MaxDeliveries > 0 {
		value = s.opts.MaxDeliveries
	}
	s.topicCfg.MaxDeliveries = value
	s.report.MaxDeliveries = value
}

// grantedLocked records a lease h of record k that its owner granted. Called with s.mu
// held.
func (s *sim) grantedLocked(k key, h router.Handle) {
	r := s.records[k]
	if r == nil || s.topicCfg.MaxDeliveries == 0 {
		return // never produced (the delivery check says so), or nothing counts
	}
	if r.grants == nil {
		r.grants = map[router.Handle]*grant{}
	}
	if r.grants[h] == nil {
		r.grants[h] = &grant{}
	}
}

// received records the leases a consume returned, as it returns (before the driver
// collects it: a lease may end, and its record be quarantined, meanwhile).
func (s *sim) received(msgs []router.Message) {
	if len(msgs) == 0 || s.topicCfg.MaxDeliveries == 0 {
		return
	}
	// (s.topicCfg is written before the first node starts, and only read since.)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.grantedLocked(key{incOf(m.Value), m.Partition, m.Offset}, m.Receipt)
	}
}

// countable returns how many of r's grants count as deliveries. Called with s.mu held.
func (s *sim) countable(r *record) int {
	n := 0
	for _, g := range r.grants {
		if e := g.returned; e == nil || !e.end.IsZero() && (e.kind != graceful || e.closeErr != nil) || e.lostGrant {
			n++
		}
	}
	return n
}

// mayBeQuarantined reports whether r may be quarantined: it was, or it reached
// MaxDeliveries and its owner may be setting it aside (OnQuarantine is told after the
// shard did). Called with s.mu held.
func (s *sim) mayBeQuarantined(r *record) bool {
	max := s.topicCfg.MaxDeliveries
	return r.quarantined || max > 0 && s.countable(r) >= max
}

// released records that lease l's consumer released it with success through node via,
// sent at start: uncounted, if the release went as one (applied where it was asked, or
// forwarded from a node that speaks version 7 to an owner that does). Called with s.mu
// held.
func (s *sim) released(l *lease, via *node, holder *epoch, start time.Time) {
	r := s.records[l.k]
	if r == nil || holder == nil {
		return
	}
	if via != holder.nd {
		if !via.knows(wire.V7) || !holder.nd.knows(wire.V7) {
			return // a nack with no delay: it counts
		}
		s.report.ForwardedReleases++
	}
	if g := r.grants[l.h]; g != nil {
		g.returned = holder
		s.recheckQuarantine(l.k, r, start)
	}
}

// recheckQuarantine checks a quarantine of record k that came while a give-back the model
// has just learned of (applied from since on) was applied: it was told before the give-back
// was answered. Called with s.mu held.
func (s *sim) recheckQuarantine(k key, r *record, since time.Time) {
	if !r.quarantined || r.quarantinedAt.Before(since) {
		return
	}
	if n, max := s.countable(r), s.topicCfg.MaxDeliveries; n < max && !r.rejectExempt() && !s.followsQuarantinedKey(k, r) {
		s.failKind(KindEarlyQuarantine, "%v quarantined at %v as a give-back of it was applied; %d of its %d deliveries count (MaxDeliveries %d): a lease given back unprocessed counted",
			k, s.since(r.quarantinedAt), n, len(r.grants), max)
	}
}

// releasesServed records the releases of a settle frame that process e answered with
// success: each gives its lease back uncounted. frame is the frame as it was sent, and
// arrived when it arrived.
func (s *sim) releasesServed(e *epoch, frame, reply []byte, arrived time.Time) {
	if s.topicCfg.MaxDeliveries == 0 || len(frame) == 0 || frame[0] != wire.OpRelease && frame[0] != wire.OpAckBatch {
		return
	}
	req, err := wire.DecodeRequest(frame, wire.Newest)
	if err != nil {
		return
	}
	answers, err := wire.DecodeReply(reply)
	if err != nil || len(answers) != len(req.Records) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, rec := range req.Records {
		if rec.Op != wire.OpRelease || answers[i].Status != wire.StatusOK {
			continue
		}
		h := router.Handle{Partition: rec.Handle.Partition, Offset: rec.Handle.Offset, Nonce: rec.Handle.Nonce}
		for k, r := range s.records {
			if k.p == h.Partition && k.off == h.Offset && r.grants[h] != nil {
				r.grants[h].returned = e
				s.recheckQuarantine(k, r, arrived)
			}
		}
	}
}

// quarantined checks a quarantine that process e reported: the record had at least
// MaxDeliveries grants that count.
func (s *sim) quarantined(e *epoch, t string, p int32, off int64, attempts uint32) {
	if t != topic {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{s.inc, p, off}
	r := s.records[k]
	if r == nil || !r.deletedAt.IsZero() {
		return
	}
	s.report.Quarantined++
	s.trace("%s#%d quarantines %v after %d attempts", e.nd.id, e.n, k, attempts)
	// A corrupt record is exempt: a reservation counts its attempt before the read that
	// finds the record unreadable, and a crash after a save that persisted the attempt and
	// before the save after the skip leaves it counted, so the record is quarantined at the
	// restart instead of skipped. It could not be delivered either way: nothing is lost.
	// A record a reject may have set aside is exempt too (reject.go), and so is one retention
	// removed: a reserve counts its attempt before the read finds it gone, and a process that
	// stops before it saves the frontier's jump over it (a crash, a pause that outlives its
	// grant) leaves the attempt counted, so the next owner quarantines it instead of jumping.
	// Under QuarantineKeys, a record that follows its key into the quarantine is exempt too
	// (quarantinedkeys.go).
	if n, max := s.countable(r), s.topicCfg.MaxDeliveries; n < max && !r.corrupt && r.trimmedAt.IsZero() && !r.rejectExempt() {
		if !s.followsQuarantinedKey(k, r) {
			s.failKind(KindEarlyQuarantine, "%s#%d quarantined %v after %d attempts; %d of its %d deliveries count (MaxDeliveries %d): a lease given back unprocessed counted",
				e.nd.id, e.n, k, attempts, n, len(r.grants), max)
		} else {
			s.report.KeyFollowers++
		}
	}
	r.quarantined, r.quarantinedAt, r.quarantinedBy = true, time.Now(), e
	r.settledAt = append(r.settledAt, r.quarantinedAt)
}
