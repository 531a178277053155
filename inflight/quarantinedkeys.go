package inflight

import "slices"

// Quarantined keys (Config.QuarantineKeys). On an ordered topic a record quarantined after
// MaxDeliveries, or rejected, takes its key with it: each later record of the key is
// quarantined too, in offset order, rather than delivered after it, so that the frontier
// passes them and the key's order holds (a dead-letter queue then receives the key's records
// in order, and Requeue brings them back in order). The key stays quarantined while any of
// its records is in the quarantine; once every one of them is requeued or discarded, its new
// records are delivered again.
//
// The quarantine set is persisted by offset alone. A shard restored with quarantined
// offsets does not know their keys until it reads them: until Verify has seen them all
// (Unverified lists them first), it hands out nothing (ErrUnverified), since any record it
// read could be a later record of a quarantined key.

// quarantinedKeyOf returns the key of the quarantined (or requeued) offset off, if the index
// knows it.
func (x *keyIndex) quarantinedKeyOf(off int64) (uint64, *keyState, bool) {
	key, ok := x.quarantinedKey[off]
	if !ok {
		return 0, nil, false
	}
	return key, x.byKey.get(key), true
}

// quarantinedKeyLocked reports whether ks is a quarantined key whose records above off are
// quarantined as they come: one of its records below off is in the quarantine.
func (s *Shard) quarantinedKeyLocked(ks *keyState, off int64) bool {
	return s.cfg.QuarantineKeys && len(ks.quarantined) > 0 && ks.quarantined[0] < off
}

// setAsideLocked quarantines off, whose lease just ended unsettled (MaxDeliveries reached, or
// a reject), and under QuarantineKeys its key (the key the lease held, 0: none): the key's
// records waiting behind it are quarantined after it, in order.
func (s *Shard) setAsideLocked(off int64, key uint64, attempts uint32, fx *effects) {
	if s.keys == nil {
		s.quarantineLocked(off, attempts, fx)
		return
	}
	keyed := key != 0 && s.cfg.QuarantineKeys
	var ks *keyState
	if keyed {
		// Before the unbind frees the key, so that it makes none of its records visible.
		ks, _ = s.keys.stateOf(key)
		s.noteQuarantinedKeyLocked(off, key, ks)
	}
	s.unbindLocked(off, key, false, 0, fx) // a head quarantined alone: its key goes on
	s.quarantineLocked(off, attempts, fx)
	if keyed {
		s.quarantineFollowersLocked(key, ks, off, fx)
	}
}

// noteQuarantinedKeyLocked records that off, a record of key ks, is in the quarantine.
func (s *Shard) noteQuarantinedKeyLocked(off int64, key uint64, ks *keyState) {
	x := s.keys
	if x.quarantinedKey == nil {
		x.quarantinedKey = map[int64]uint64{}
	}
	x.quarantinedKey[off] = key
	ks.quarantined = insertSorted(ks.quarantined, off)
}

// quarantineFollowersLocked quarantines the records of key ks above off that wait unleased
// (deferred behind the key, released, or delayed), in order: they follow the quarantined
// record off. Records its holder still leases are quarantined if their leases end unsettled.
func (s *Shard) quarantineFollowersLocked(key uint64, ks *keyState, off int64, fx *effects) {
	var followers []int64
	for _, q := range ks.queued {
		if ks.spilledBelow(q) {
			break // spilled records of the key lie below: they go first, once read back (spill.go)
		}
		if q > off {
			followers = append(followers, q)
		}
	}
	for _, q := range followers {
		p, ok := s.pending.get(q)
		if !ok || p.nonce != 0 {
			continue
		}
		if p.deferred {
			s.undeferLocked(q, &p, ks)
		}
		if p.delayed {
			p.delayed = false // its deadline is stale once the entry is gone
			s.delayed--
		}
		ks.unqueue(q)
		s.keys.of.remove(q)
		s.quarantineLocked(q, p.attempts, fx) // (a requeued one below the frontier goes back)
		s.noteQuarantinedKeyLocked(q, key, ks)
	}
	s.freeKeyLocked(key, ks, fx)
}

// quarantineWithKeyLocked quarantines off, just read and delivered to no one (p its entry, its
// lease withdrawn uncounted or none granted), as a later record of its quarantined key ks.
func (s *Shard) quarantineWithKeyLocked(off int64, p pending, key uint64, ks *keyState, fx *effects) {
	ks.unqueue(off)
	s.keys.of.remove(off)
	s.quarantineLocked(off, p.attempts, fx) // (a requeued one below the frontier goes back)
	s.noteQuarantinedKeyLocked(off, key, ks)
	// The key's next records follow it: made visible (spilled ones brought back first), they
	// go to a bind that quarantines them in turn, as no holder frees the key meanwhile.
	s.freeKeyLocked(key, ks, fx)
}

// leftQuarantineLocked notes that the quarantined offset off left the quarantine (requeued,
// discarded): once none of its key's records is left there, the key's new records are
// delivered again. A requeued one (requeued) is queued behind its key, so that it goes before
// the key's later records. An offset whose key the index does not know changes nothing.
func (s *Shard) leftQuarantineLocked(off int64, requeued bool, at int64, fx *effects) {
	if s.keys == nil {
		return
	}
	key, ks, ok := s.keys.quarantinedKeyOf(off)
	if !ok {
		return
	}
	delete(s.keys.quarantinedKey, off)
	ks.quarantined, _ = deleteSorted(ks.quarantined, off)
	if requeued {
		ks.queue(off, at)
		s.keys.of.set(off, key)
		return
	}
	s.freeKeyLocked(key, ks, fx)
}

// restoreQuarantinedKeysLocked lists the quarantined and requeued offsets whose keys the
// index does not know (a restore, or QuarantineKeys just set), for Verify to learn: until
// then the shard hands out nothing.
func (s *Shard) restoreQuarantinedKeysLocked() {
	x := s.keys
	x.unkeyed = x.unkeyed[:0]
	if !s.cfg.QuarantineKeys {
		return
	}
	for off := range s.quarantine {
		if _, known := x.quarantinedKey[off]; !known {
			x.unkeyed = append(x.unkeyed, off)
		}
	}
	slices.Sort(x.unkeyed)
	s.syncVerifyingLocked()
}

// dropQuarantinedKeysLocked forgets which keys are quarantined: QuarantineKeys was cleared,
// and each quarantined record is alone in the quarantine again.
func (s *Shard) dropQuarantinedKeysLocked(fx *effects) {
	x := s.keys
	x.unkeyed = x.unkeyed[:0]
	for off := range x.quarantinedKey {
		s.leftQuarantineLocked(off, false, 0, fx)
	}
	s.syncVerifyingLocked()
}

// learnQuarantinedKeyLocked tells the index the key of off, if it is a restored quarantined
// or requeued offset Unverified listed (key 0: none, or it could not be read).
func (s *Shard) learnQuarantinedKeyLocked(off int64, key uint64, at int64, fx *effects) {
	x := s.keys
	var found bool
	if x.unkeyed, found = deleteSorted(x.unkeyed, off); !found {
		return
	}
	requeued, quarantined := s.quarantine[off]
	if key == 0 || !quarantined {
		return
	}
	ks, _ := x.stateOf(key)
	if requeued {
		// Requeued before the restore: queued behind its key, so that it goes before the
		// key's later records.
		if _, known := x.of.get(off); !known && s.pending.lookup(off).nonce == 0 {
			ks.queue(off, at)
			x.of.set(off, key)
		}
		return
	}
	s.noteQuarantinedKeyLocked(off, key, ks)
	s.quarantineFollowersLocked(key, ks, off, fx)
}

// syncVerifyingLocked makes Verifying follow what is left to verify.
func (s *Shard) syncVerifyingLocked() {
	x := s.keys
	s.verifying.Store(x != nil && (x.verifying || len(x.unkeyed) > 0))
}

// followsQuarantinedLocked reports whether off, whose lease holding key (0: none) is ending
// unsettled, is a record of a quarantined key above one of its quarantined records: it
// follows them into the quarantine rather than be delivered again.
func (s *Shard) followsQuarantinedLocked(off int64, key uint64) bool {
	if s.keys == nil || !s.cfg.QuarantineKeys {
		return false
	}
	if key == 0 {
		return false
	}
	ks := s.keys.byKey.get(key) // nil for a key held by this lease alone: not quarantined
	return ks != nil && s.quarantinedKeyLocked(ks, off)
}

// unkeyedLocked notes that off was quarantined before its record was read (its last delivery
// died with the previous process): Verify learns its key before anything else is handed out.
func (s *Shard) unkeyedLocked(off int64) {
	if s.keys == nil || !s.cfg.QuarantineKeys {
		return
	}
	s.keys.unkeyed = insertSorted(s.keys.unkeyed, off)
	s.emptyAt.Store(-1) // reserves answer ErrUnverified until it is read
	s.syncVerifyingLocked()
}
