package sim

import "time"

// Quarantined keys. In about half the ordered runs that quarantine (MaxDeliveries set, or
// rejects planned), drawn from a stream of their own so that a run without them draws what
// it drew before they were simulated (Options.QuarantineKeys turns them on in such runs,
// OldSchedule and NoQuarantineKeys off), the topic sets TopicConfig.QuarantineKeys: a
// record quarantined takes its key with it, so that the key's records waiting behind it and
// each later record of the key follow it into the quarantine, in offset order (OnQuarantine
// told of each, attempts 0 for one never delivered), for as long as a record of the key is
// there. The simulation never requeues nor discards, so a key that went into the quarantine
// stays there for the rest of its partition's incarnation: but a restored shard reads its
// quarantined records for their keys, and one made unreadable or removed by retention by
// then quarantines no key.
//
// Two checks change:
//
//   - no early quarantine: a record that follows its key is quarantined before its
//     MaxDeliveries deliveries. Its quarantine is taken as justified when a lower record of
//     its key (same partition, same incarnation) may be in the quarantine: told quarantined
//     and not leased since, or at MaxDeliveries deliveries that count, or with a reject in
//     flight or answered success or 502 (the check errs towards passing, as the others do);
//   - a key's records in order, stricter: a record is not delivered while a lower record of
//     its key surely is in the quarantine, since its key followed that one there. Surely:
//     the quarantine was told strictly before the record's grant by the process of the node
//     that owned the partition then (under a grant valid then, in runs with grants: not a
//     deposed owner, whose state the next one never saw), no lease of the lower record was
//     granted since (a redelivery says a crash undid the quarantine), and the lower record
//     was neither made unreadable nor removed by retention by the grant (a restore could not
//     read it for its key). A crash that undid the quarantine puts the lower record back at
//     the head of its key, so the key's later records still wait for it: its redelivery, a
//     quarantine told anew, or its removal.
//
// Options.Plant PlantUnquarantinedKeys runs the nodes without QuarantineKeys while the checks
// expect it.

// planQuarantineKeys draws whether the topic quarantines keys: only in an ordered run that
// quarantines (call it after the topic's MaxDeliveries, rejects and order are drawn), on in
// half of them or as Options.QuarantineKeys says.
func (s *sim) planQuarantineKeys() {
	if s.ord == nil || s.topicCfg.MaxDeliveries == 0 && s.rejects == nil || s.opts.NoQuarantineKeys {
		return
	}
	if _, on := s.degradeClassAt(0x716b6579732e7369, s.opts.QuarantineKeys, 50); !on { // "qkeys.si"
		return
	}
	s.topicCfg.QuarantineKeys = true
	s.report.QuarantineKeys = true
}

// quarantinesKeys reports whether the checks expect the topic to quarantine keys. (s.topicCfg
// is written before the first node starts, and only read since.)
func (s *sim) quarantinesKeys() bool { return s.ord != nil && s.topicCfg.QuarantineKeys }

// followsQuarantinedKey reports whether record k may have been quarantined as a follower of
// its key: a lower record of its key may be in the quarantine (see above). Called with s.mu
// held.
func (s *sim) followsQuarantinedKey(k key, r *record) bool {
	if !s.quarantinesKeys() || r.key == "" {
		return false
	}
	for _, off := range s.ord.offsets[partKey{k.inc, k.p, r.key}] {
		if off >= k.off {
			return false
		}
		if o := s.records[key{k.inc, k.p, off}]; s.mayBeQuarantined(o) || o.rejectExempt() {
			return true
		}
	}
	return false
}

// surelyQuarantinedAt reports whether record r of partition p surely was in the quarantine
// at t, its key with it (see above). Called with s.mu held.
func (s *sim) surelyQuarantinedAt(p int32, r *record, t time.Time) bool {
	if !s.quarantinesKeys() || !r.quarantined || !r.quarantinedAt.Before(t) || r.quarantinedBy == nil {
		return false
	}
	if r.corrupt && !r.corruptAt.After(t) || !r.trimmedAt.IsZero() && !r.trimmedAt.After(t) || !r.deletedAt.IsZero() {
		return false
	}
	nd := r.quarantinedBy.nd
	if s.ownerAt(p, r.quarantinedAt) != nd || s.ctl != nil && !s.ctl.validAt(nd, p, r.quarantinedAt) {
		return false // a deposed owner's quarantine: the state the next owner holds may lack it
	}
	for _, l := range r.leases {
		if l.granted.After(r.quarantinedAt) && !l.granted.After(t) {
			return false // a crash undid it
		}
	}
	return true
}
