package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Ordered topics. In some runs (drawn from a stream of their own, so that a run without them
// draws what it drew before they were simulated; Options.Ordered turns them on, OldSchedule
// and NoOrdered off) the topic is ordered (TopicConfig.Ordered), and each record produced
// gets a key from a small key set drawn for the run (1, 2, 3 or 5 keys), one in six none.
// Keys order the records of one partition: the same key in two partitions is two keys.
//
// Two checks hold each ordered run to the promises, as each delivery comes in:
//
//   - one holder per key: no two consume responses hold leases of records of one key that
//     are both surely live at once (from their grant to the earliest their lease may have
//     ended: settled, expired, its process dead, its record removed), whichever nodes they
//     were consumed on; one response may hold several records of a key (a batch). A lease
//     of a record made unreadable does not count (a move reads its record to bind its key,
//     and cannot), nor one of a record removed by retention from then on (the frontier's
//     jump over it frees its key);
//   - a key's records in order: a record is delivered only once every lower record of its
//     key is settled or in the same response. A lower record counts as settled when it may
//     have been: a settle for good of it (an ack or a reject, answered success, 502 or no
//     reply) or a quarantine was sent at or before the grant and no lease of it was granted
//     between the two (a redelivery says the settle was undone); a crash that may have lost
//     an ack is not known to have lost it, so after one the check errs towards passing. The
//     stated exceptions are left out: a record that may be quarantined (MaxDeliveries, a
//     reject), one made unreadable or removed by retention by then, or of a deleted
//     incarnation of the topic (under QuarantineKeys a quarantine is no exception: a record
//     is not delivered while a lower one of its key surely is in the quarantine,
//     quarantinedkeys.go). The simulation requeues nothing, and replays are no deliveries.
//
// Options.Plant PlantUnordered runs the nodes with the topic unordered while the checks
// expect order.

// ordered is the state of the ordered class of a run.
type ordered struct {
	rng  *rand.Rand // its own stream: each record's key
	keys int        // the size of the run's key set
	// offsets lists, per key of a partition in an incarnation, the offsets of its records in
	// order (records are appended in offset order).
	offsets map[partKey][]int64
	// response numbers the consume responses; inResponse holds the records of the one the
	// driver is checking.
	response   int
	inResponse map[key]bool
	keyless    bool // the records appended now get no key (the sparse stream's)
}

// partKey is one key of one partition in one incarnation of the topic.
type partKey struct {
	inc int
	p   int32
	key string
}

// planOrdered draws whether the run's topic is ordered, on in 25 % of the runs (or as
// Options.Ordered says), and the size of its key set.
func (s *sim) planOrdered() {
	or, on := s.degradeClassAt(0x6f7264657265642e, s.opts.Ordered, 25) // "ordered."
	if !on || s.opts.NoOrdered {
		return
	}
	s.ord = &ordered{rng: or, keys: []int{1, 2, 3, 5}[or.IntN(4)], offsets: map[partKey][]int64{}}
	s.report.Ordered, s.report.Keys = true, s.ord.keys
}

// planSpill draws, in half the ordered runs, a per-key bound on the deferred records a
// partition keeps in memory of 1, 2 or 4 (TopicConfig.MaxDeferredPerKey), so that a key
// blocked for a while spills its later records into the acked-ahead runs and the scans read
// them back: through crashes, moves and failovers, in order and never delivered after an ack.
func (s *sim) planSpill() {
	r, on := s.degradeClassAt(0x7370696c6c2e7369, false, 50) // "spill.si"
	if s.ord == nil || !on {
		return
	}
	s.topicCfg.MaxDeferredPerKey = []int{1, 2, 4}[r.IntN(3)]
	s.logf("cluster: a key keeps %d deferred records in memory, and spills the rest", s.topicCfg.MaxDeferredPerKey)
}

// keyFor draws the key of a record about to be appended: none in an unordered run (whose
// records keep the unique keys they had before ordered topics were simulated, drawing
// nothing), one of the run's key set or none (one in six) in an ordered run.
func (s *sim) keyFor(off int64) string {
	if s.ord == nil {
		return fmt.Sprintf("k%d", off)
	}
	if s.ord.keyless || s.ord.rng.IntN(6) == 0 {
		return ""
	}
	return fmt.Sprintf("key%d", s.ord.rng.IntN(s.ord.keys))
}

// sparseAppend appends one record of the sparse stream: in an ordered run without a key, so
// that it waits behind nothing (a record before it whose ack failed, a durable ack an older
// owner refuses, holds its key until its lease lapses, and the stream times a claim, not a
// key's turn).
func (s *sim) sparseAppend(p int32) {
	if s.ord != nil {
		s.ord.keyless = true
		defer func() { s.ord.keyless = false }()
	}
	s.append(p, 1)
}

// keyed records that record k has key. Called with s.mu held.
func (s *sim) keyed(k key, r *record, key string) {
	if s.ord == nil {
		return
	}
	r.key = key
	if key != "" {
		pk := partKey{k.inc, k.p, key}
		s.ord.offsets[pk] = append(s.ord.offsets[pk], k.off)
	}
}

// beginResponse numbers a consume response about to be checked, and notes its records.
func (s *sim) beginResponse(r polled) int {
	if s.ord == nil {
		return 0
	}
	s.ord.response++
	s.ord.inResponse = map[key]bool{}
	perKey := map[partKey]int{}
	batch := false
	for _, m := range r.msgs {
		k := key{incOf(m.Value), m.Partition, m.Offset}
		s.ord.inResponse[k] = true
		pk := partKey{k.inc, k.p, string(m.Key)}
		if len(m.Key) > 0 {
			perKey[pk]++
			batch = batch || perKey[pk] == 2
		}
	}
	if batch {
		s.report.KeyBatches++
	}
	return s.ord.response
}

// checkKeyHolders checks that lease l's key is held by no lease of another response while
// both are surely live (see above). Called with s.mu held; false when the run ends.
func (s *sim) checkKeyHolders(l *lease) bool {
	r := s.records[l.k]
	if s.ord == nil || r == nil || r.key == "" || r.corrupt {
		return true
	}
	for _, off := range s.ord.offsets[partKey{l.k.inc, l.k.p, r.key}] {
		if off == l.k.off {
			continue // two leases of one record: the one-live-holder check's
		}
		o := s.records[key{l.k.inc, l.k.p, off}]
		if o.corrupt {
			continue
		}
		for _, ol := range o.leases {
			if ol.resp == l.resp {
				continue
			}
			first, second := ol, l
			if l.granted.Before(ol.granted) {
				first, second = l, ol
			}
			if end := s.keyHeldUntil(first); second.granted.Before(end) && s.failKind(KindKeyHolders,
				"key %q of partition %d held by two consume responses at once: %v through %s from %v (live until at least %v), and %v through %s from %v (live until at least %v)",
				r.key, l.k.p, first.k, first.via, s.since(first.granted), s.since(end), second.k, second.via, s.since(second.granted), s.since(s.keyHeldUntil(second))) {
				return false
			}
		}
	}
	return true
}

// keyHeldUntil is the earliest lease l may have stopped holding its key: its end, or the
// removal of its record by retention (the frontier's jump over it frees the key, though a
// lease of it may still answer its settles).
func (s *sim) keyHeldUntil(l *lease) time.Time {
	if r := s.records[l.k]; r != nil && !r.trimmedAt.IsZero() {
		return earliest(l.endMin, r.trimmedAt)
	}
	return l.endMin
}

// checkKeyOrder checks that the record of lease l, just delivered, came after every lower
// record of its key was settled, or with them in one response (see above). Called with s.mu
// held; false when the run ends.
func (s *sim) checkKeyOrder(l *lease) bool {
	r := s.records[l.k]
	if s.ord == nil || r == nil || r.key == "" {
		return true
	}
	s.report.KeyedDeliveries++
	g := l.granted
	for _, off := range s.ord.offsets[partKey{l.k.inc, l.k.p, r.key}] {
		if off >= l.k.off {
			break
		}
		k := key{l.k.inc, l.k.p, off}
		o := s.records[k]
		switch {
		case s.ord.inResponse[k]:
		case s.surelyQuarantinedAt(k.p, o, g):
			// Under QuarantineKeys the key followed o into the quarantine (quarantinedkeys.go).
			if s.failKind(KindKeyOrder, "%v (key %q) delivered through %s, granted at %v, while %v of its key was in the quarantine (told by %s#%d at %v, not leased since): under QuarantineKeys the key follows it there",
				l.k, r.key, l.via, s.since(g), k, o.quarantinedBy.nd.id, o.quarantinedBy.n, s.since(o.quarantinedAt)) {
				return false
			}
		case o.corrupt && !o.corruptAt.After(g), !o.trimmedAt.IsZero() && !o.trimmedAt.After(g), !o.deletedAt.IsZero():
		case s.mayBeQuarantined(o) || o.rejectExempt():
		case s.maybeSettledAt(o, g):
		default:
			what := "never delivered"
			if len(o.leases) > 0 {
				last := o.leases[len(o.leases)-1]
				what = fmt.Sprintf("delivered %d times, last through %s granted at %v, live until at least %v and at most %v",
					len(o.leases), last.via, s.since(last.granted), s.since(last.endMin), s.since(last.endMax))
			}
			if s.failKind(KindKeyOrder, "%v (key %q) delivered through %s, granted at %v, before %v of its key was settled (%s)",
				l.k, r.key, l.via, s.since(g), k, what) {
				return false
			}
		}
	}
	return true
}

// maybeSettledAt reports whether record r may have been settled for good at t: a settle of
// it sent at or before t, with no lease of it granted since (after one, the record was not
// settled; a redelivery an ack cannot explain is the redelivery check's).
func (s *sim) maybeSettledAt(r *record, t time.Time) bool {
	var last time.Time
	for _, o := range r.leases {
		if !o.granted.After(t) && o.granted.After(last) {
			last = o.granted
		}
	}
	for _, at := range r.settledAt {
		if !at.After(t) && !at.Before(last) {
			return true
		}
	}
	return false
}
