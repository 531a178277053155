package main

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/examples/internal/delivery"
	"narad.dev/consume/examples/internal/queueclient"
	"narad.dev/consume/examples/internal/traffic"
)

// saveSlack is what the window allows beyond the commit interval: the committer's tick and
// the save in flight when the owner stopped (one etcd Txn, a quorum's fsyncs), as a crash
// window allows a writeout's sync.
const saveSlack = 100 * time.Millisecond

// leaseMayLive says a delivery that ended so may still hold its lease: a delivery of the
// record before the lease's expiry is a second holder.
func leaseMayLive(o delivery.Outcome) bool {
	return o == delivery.Held || o == delivery.Abandoned || o == delivery.AckUnsure || o == delivery.AckRefused
}

// A phase of the run. They run in this order; -phases picks which.
type phase int

const (
	steady      phase = iota // nothing happens
	moving                   // one partition moved by hand-off
	zombie                   // an owner paused (SIGSTOP) past its lease, failed over, then continued
	partitioned              // an owner cut off from its peers and etcd, failed over, then healed
	failing                  // the controller's node killed for good, failed over
	phases
)

// phaseNames are the phases' names in the summary, phaseFlags in -phases.
var (
	phaseNames = [phases]string{"steady", "graceful move", "zombie", "partition", "failover"}
	phaseFlags = [phases]string{"steady", "move", "zombie", "partition", "kill"}
)

// A record is what the parent knows of one record of the log.
type record struct {
	confirmed  bool // its produce was answered
	value      string
	producedAt time.Time
	leases     []*lease // one per delivery, in the order the clients reported them
	settled    bool     // an ack of it was answered 204 or already_settled: the owner settled it
	unsure     bool     // an ack of it got no answer
}

// A lease is one delivery of a record to a client, and how it ended.
type lease struct {
	start, end time.Time        // the consume that delivered it began and returned: the lease began in between, or, read ahead, up to the hold before
	expiry     time.Time        // when the lease ends unless extended, as the node answered (zero: not told)
	via        string           // the node it was consumed through
	outcome    delivery.Outcome // of the delivery, as far as its client knows
	acked      bool             // an ack of it was answered 204
	ackSent    time.Time        // when that ack was sent
	ackedAt    time.Time        // and answered
}

// A failover is one owner's partitions taken from it while it was paused, cut off or dead:
// its leases were not carried, and its last acks may not have reached etcd.
type failover struct {
	phase    phase
	victim   string
	parts    map[int32]int64 // its partitions → the epoch it held each under
	anchor   time.Time       // when it stopped acting on them: the SIGSTOP, its grant's lapse, the kill
	how      string          // that, in words
	scripted bool            // a phase's event; else a lapse of a node's grants that the node told of
	why      string          // of a lapse: what the node said
	takeover map[int32]time.Time
	// from extends the window, per partition, back to the victim's last save that reached
	// etcd when that was earlier than the window's start: the node answers acks while etcd
	// does not take its saves, and they are durable only once a save takes them.
	from map[int32]time.Time

	ackedAgainIn  int           // acked records delivered again within its window
	answeredDying int           // of them, acks whose answer came back after the anchor
	windowOldest  time.Duration // the longest before the anchor one of them was answered
	leasesDropped int           // leased by the victim, leased again (by the new owner) while the old lease's time ran
}

// counts are one phase's, each by when it happened (a delivery by its consume's return,
// a settle by its answer, a loss by the record's produce).
type counts struct {
	produced, delivered, again                 int
	acked, nacked, abandoned, late             int
	refused, retried, unsure                   int
	lost                                       int
	ackedAgainOut                              int // acked records delivered again outside every failover's window: a violation
	twoHolders                                 int // two leases both settleable at once: a violation
	mismatches                                 int // a record delivered with another value than produced: a violation
	violations                                 []string
	firstDeliveries, nackAgain, abandonedAgain int
}

// A ledger keeps every record's story and checks each delivery and each ack against the
// promises:
//
//   - acked again outside the window: a record whose ack was answered 204 and that is
//     delivered again. The one exception is a failover's window: the failed-over owner
//     saved its ack state at most once per commit interval, so an ack it applied within one
//     commit interval plus a tick (saveSlack) before it stopped acting on its partitions (the
//     anchor: the SIGSTOP, its grant's lapse on its clock, the kill) may not have reached
//     etcd. The ack was applied between its sending and its answer, so it is within the
//     window when it was sent at or before the anchor and answered at or after the anchor
//     less the window. While etcd takes none of the owner's saves (it has no leader, or it
//     stalls), the owner answers acks all the same: those are durable only once a save takes
//     them, so when the owner's last save of the partition that reached etcd (which the
//     owner tells) was earlier than the window's start, the window reaches back to it.
//   - two holders at once: two leases of one record both settleable at one time. Either a
//     delivery while an earlier lease surely still ran (it was handed over before, began
//     less than the visibility timeout before, and its client has not settled it), except
//     that a failover carries no leases: the failed-over owner's leases are dropped, and the
//     new owner leases their records again at once (counted apart, not a violation, because
//     the old leases are no longer settleable: the old owner's grant lapsed); or an ack of a
//     lease answered 204 although it was sent after a later lease of the record was handed
//     over (the first lease was settleable while the second was held: this is what catches
//     an old owner that settles after a failover). The ledger orders two leases only where
//     the times it saw make the order sure (see ackedAndLeased): a long-poll that began
//     first may take a record after another consume's delivery of it was nacked.
//
// It is safe for concurrent use.
type ledger struct {
	visibility time.Duration
	window     time.Duration // the failovers' window: commit interval + saveSlack

	// For the progress lines.
	produced, deliveries, acks atomic.Int64

	mu        sync.Mutex
	records   delivery.Records[record]
	c         [phases]counts
	order     []phase // the phases of the run, in order
	starts    [phases]time.Time
	failovers []*failover
}

func newLedger(visibility, commitInterval time.Duration, order []phase) *ledger {
	return &ledger{visibility: visibility, window: commitInterval + saveSlack, order: order, records: delivery.Records[record]{}}
}

// begin records that phase ph began at at.
func (l *ledger) begin(ph phase, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts[ph] = at
}

// startOf returns when phase ph began.
func (l *ledger) startOf(ph phase) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.starts[ph]
}

// phaseAt is the phase t falls in: the last one begun by t (the first one before any). The
// caller holds l.mu.
func (l *ledger) phaseAt(t time.Time) phase {
	in := l.order[0]
	for _, ph := range l.order {
		if s := l.starts[ph]; !s.IsZero() && !t.Before(s) {
			in = ph
		}
	}
	return in
}

func (l *ledger) violation(c *counts, format string, args ...any) {
	if len(c.violations) < 10 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

func (l *ledger) checkValue(c *counts, pos delivery.Position, r *record, value string) {
	switch {
	case r.value == "":
		r.value = value
	case r.value != value:
		c.mismatches++
		l.violation(c, "%v holds %q, not %q", pos, value, r.value)
	}
}

var _ traffic.Ledger = (*ledger)(nil)

// Produced records a produce the owner answered.
func (l *ledger) Produced(pos delivery.Position, value string, at time.Time) {
	l.produced.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.records.At(pos)
	c := &l.c[l.phaseAt(at)]
	c.produced++
	r.confirmed, r.producedAt = true, at
	l.checkValue(c, pos, r, value)
}

// ProduceFailed is told of a produce that got no offset: nothing to keep (the phases' owners
// change, and a producer looks its owner up again).
func (l *ledger) ProduceFailed() {}

// ConsumeFailed is told of a failed consume: nothing to keep.
func (l *ledger) ConsumeFailed() {}

// Delivered records the delivery of m to a client through node via, by a consume that
// began at start and returned at end. It returns the delivery's number, for Settled, and
// whether the record was delivered before.
func (l *ledger) Delivered(via string, m *queueclient.Message, _ int, start, end time.Time) (n int, again bool) {
	l.deliveries.Add(1)
	pos := delivery.Position{Partition: m.Partition, Offset: m.Offset}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &l.c[l.phaseAt(end)]
	c.delivered++
	r := l.records.At(pos)
	l.checkValue(c, pos, r, m.Value)
	nl := &lease{start: start, end: end, expiry: m.Expiry, via: via, outcome: delivery.Held}
	if len(r.leases) == 0 {
		c.firstDeliveries++
	} else {
		c.again++
		for _, j := range r.leases {
			switch {
			case j.acked:
				l.ackedAndLeased(pos, j, nl)
			case leaseMayLive(j.outcome) && l.surelyOverlap(j, nl):
				if f := l.tookOver(pos.Partition, j, nl); f != nil {
					f.leasesDropped++
				} else {
					c.twoHolders++
					l.violation(c, "%v was delivered through %s at %s while the lease of its delivery through %s at %s still ran",
						pos, via, stamp(end), j.via, stamp(j.end))
				}
			}
		}
		switch r.leases[len(r.leases)-1].outcome {
		case delivery.Nacked:
			c.nackAgain++
		case delivery.Abandoned:
			c.abandonedAgain++
		}
	}
	r.leases = append(r.leases, nl)
	return len(r.leases) - 1, len(r.leases) > 1
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

// surelyOverlap reports whether leases a and b surely both ran at one time: each began by
// its consume's return and ran until the visibility timeout from its consume's start, or
// its expiry if that came first (a lease a gateway read ahead began before its consume).
func (l *ledger) surelyOverlap(a, b *lease) bool {
	last := a.end
	if b.end.After(last) {
		last = b.end
	}
	first := a.start
	if b.start.Before(first) {
		first = b.start
	}
	end := first.Add(l.visibility)
	for _, x := range []*lease{a, b} {
		end = earliest(end, l.leaseEnd(x))
	}
	return last.Before(end)
}

// leaseEnd is the latest lease x can run to unless extended: the visibility timeout from its
// consume's start, or the expiry its node answered if that is earlier (a gateway that read
// the record ahead granted it before the consume began, up to its hold, and says so).
func (l *ledger) leaseEnd(x *lease) time.Time {
	end := x.start.Add(l.visibility)
	if !x.expiry.IsZero() && x.expiry.Before(end) {
		return x.expiry
	}
	return end
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// tookOver returns the failover that explains leases a and b of one record of partition p
// overlapping: the one that began first began before the new owner was granted the
// partition, and the other was handed over after the old owner stopped acting on it.
func (l *ledger) tookOver(p int32, a, b *lease) *failover {
	first, last := a.start, b.end
	if b.start.Before(first) {
		first = b.start
	}
	if a.end.After(last) {
		last = a.end
	}
	for _, f := range l.failovers {
		if _, ok := f.parts[p]; !ok {
			continue
		}
		if to, seen := f.takeover[p]; (!seen || first.Before(to)) && last.After(f.anchor) {
			return f
		}
	}
	return nil
}

// ackedAndLeased checks lease j, whose ack was answered 204, against lease n, another
// delivery of the same record. The ack was applied between its sending and its answer;
// n's lease began between its consume's start and return. The caller holds l.mu.
//
//   - n began surely after the ack was applied (its consume started after the answer): an
//     acked record delivered again, allowed only within a failover's window;
//   - n began surely after j (its consume started after j's returned) and surely before j's
//     ack was sent: j, whose ack then succeeded, was still settleable while n was held, two
//     holders at once;
//   - n's consume ran across the ack's sending and could not have lapsed before j began: n
//     began either after the apply (delivered again) or while j ran (two holders), both
//     broken unless within the window;
//   - otherwise n may be an earlier lease of the record (it ended, nacked or lapsed, before j
//     began), or its order against j cannot be told: nothing to say (the check of every
//     delivery against the leases that surely still ran covers the rest).
func (l *ledger) ackedAndLeased(pos delivery.Position, j, n *lease) {
	switch {
	case n.start.After(j.ackedAt):
	case n.start.After(j.end) && n.end.Before(j.ackSent):
		c := &l.c[l.phaseAt(j.ackedAt)]
		c.twoHolders++
		l.violation(c, "%v was delivered again through %s at %s, and an ack of its earlier lease sent through %s at %s was answered 204 at %s",
			pos, n.via, stamp(n.end), j.via, stamp(j.ackSent), stamp(j.ackedAt))
		return
	case !n.end.Before(j.ackSent) && !l.leaseEnd(n).Before(j.end):
	default:
		return
	}
	if f := l.inWindow(pos.Partition, j); f != nil {
		f.ackedAgainIn++
		before := f.anchor.Sub(j.ackedAt)
		f.windowOldest = max(f.windowOldest, before)
		if before < 0 {
			f.answeredDying++
		}
		return
	}
	c := &l.c[l.phaseAt(n.end)]
	c.ackedAgainOut++
	l.violation(c, "%v was acked through %s (sent %s, answered %s) and delivered again through %s at %s", pos,
		j.via, stamp(j.ackSent), stamp(j.ackedAt), n.via, stamp(n.end))
}

// inWindow returns the failover whose window the 204 to lease j's ack falls in: the record's
// partition failed over, and the ack may have been applied within the window before the old
// owner stopped acting on it (sent by then, answered no earlier than the window's start:
// the window before, or the old owner's last save that reached etcd if that was earlier).
func (l *ledger) inWindow(p int32, j *lease) *failover {
	for _, f := range l.failovers {
		start := f.anchor.Add(-l.window)
		if from, ok := f.from[p]; ok {
			start = from
		}
		if _, ok := f.parts[p]; ok && !j.ackSent.After(f.anchor) && !j.ackedAt.Before(start) {
			return f
		}
	}
	return nil
}

// Settled records how delivery n of the record at pos ended, by an answer at at to a settle
// sent at sent; retried says a 503 came first.
func (l *ledger) Settled(pos delivery.Position, n int, o delivery.Outcome, sent, at time.Time, retried bool) {
	if o == delivery.Acked {
		l.acks.Add(1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &l.c[l.phaseAt(at)]
	switch o {
	case delivery.Acked:
		c.acked++
	case delivery.Nacked:
		c.nacked++
	case delivery.Abandoned:
		c.abandoned++
	case delivery.AckLate:
		c.late++
	case delivery.AckRefused:
		c.refused++
	case delivery.AckUnsure:
		c.unsure++
	}
	if retried && (o == delivery.Acked || o == delivery.AckSettled) {
		c.retried++
	}
	r := l.records.At(pos)
	j := r.leases[n]
	j.outcome = o
	switch o {
	case delivery.Acked:
		j.acked, j.ackSent, j.ackedAt, r.settled = true, sent, at, true
		for _, other := range r.leases {
			if other != j {
				l.ackedAndLeased(pos, j, other)
			}
		}
	case delivery.AckSettled:
		r.settled = true
	case delivery.AckUnsure:
		r.unsure = true
	}
}

// failover records that node victim's partitions parts (each with the epoch it held it
// under) are being failed over in phase ph, the victim having stopped acting on them at
// anchor (how says how).
func (l *ledger) failover(ph phase, victim string, parts map[int32]int64, anchor time.Time, how string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failovers = append(l.failovers, &failover{phase: ph, victim: victim, parts: parts, anchor: anchor, how: how,
		scripted: true, takeover: map[int32]time.Time{}})
}

// lapse records that node's grants of parts lapsed at anchor, as the node told: the library
// deposed them at once (whether or not the same grants came back a moment later), so the
// failover's window applies, reaching back to the node's last save of a partition that
// reached etcd (saved) where that was earlier. A lapse of a phase's victim within a TTL of
// its event is that event's, already recorded: only its window is extended. It reports
// whether it recorded a new one.
func (l *ledger) lapse(node string, parts map[int32]int64, saved map[int32]time.Time, anchor time.Time, ttl time.Duration, why string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.failovers {
		if f.victim == node && f.scripted && anchor.After(f.anchor.Add(-ttl)) && anchor.Before(f.anchor.Add(ttl)) {
			l.extend(f, saved)
			return false
		}
	}
	if len(parts) == 0 {
		return false // nothing deposed
	}
	f := &failover{phase: l.phaseAt(anchor), victim: node, parts: parts, anchor: anchor,
		how: "its grants' lapse on its clock, unscripted", why: why, takeover: map[int32]time.Time{}}
	l.extend(f, saved)
	l.failovers = append(l.failovers, f)
	return true
}

// extend reaches f's window back to the victim's last saves that reached etcd (saved),
// where they were earlier than the window's start. The caller holds l.mu.
func (l *ledger) extend(f *failover, saved map[int32]time.Time) {
	start := f.anchor.Add(-l.window)
	for p, t := range saved {
		if _, ok := f.parts[p]; !ok {
			continue
		}
		// The save took a state the node took just before it: saveSlack covers that.
		if from := t.Add(-saveSlack); from.Before(start) {
			if f.from == nil {
				f.from = map[int32]time.Time{}
			}
			f.from[p] = from
		}
	}
}

// granted notes the failed-over partitions that next grants anew: the takeover.
func (l *ledger) granted(next *snapshot) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.failovers {
		for p, epoch := range f.parts {
			if _, seen := f.takeover[p]; !seen {
				if g, ok := next.owners[p]; ok && g.modRev > epoch {
					f.takeover[p] = now
				}
			}
		}
	}
}

// through counts the deliveries through node whose consume began after after, and the acks
// through it of any delivery answered 204 after after: what its clients got from it.
func (l *ledger) through(node string, after time.Time) (delivered, acked int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		for _, j := range r.leases {
			if j.via != node {
				continue
			}
			if j.start.After(after) {
				delivered++
			}
			if j.acked && j.ackedAt.After(after) {
				acked++
			}
		}
	}
	return delivered, acked
}

// allAcked reports whether every record whose produce was answered has been acked, or had
// an ack that got no answer (the owner's status tells whether it took it).
func (l *ledger) allAcked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.records.Any(func(r *record) bool { return r.confirmed && !r.settled && !r.unsure })
}

// tally is what the ledger found, at the end.
type tally struct {
	c         [phases]counts
	starts    [phases]time.Time
	failovers []failoverTally
	window    time.Duration
	produced  int                 // records whose produce was answered
	landed    int                 // records whose produce got no answer, delivered all the same
	acked     int                 // records settled: an ack answered 204 or already_settled
	unsure    int                 // records whose acks all went unanswered
	lost      []delivery.Position // records produced and never acked
}

// failoverTally is one failover, at the end.
type failoverTally struct {
	failover
	windowAcks int // acks of its partitions the clients had within the window
}

// violations counts what broke a promise, in every phase.
func (t *tally) violations() int {
	n := 0
	for _, c := range t.c {
		n += c.ackedAgainOut + c.twoHolders + c.mismatches
	}
	return n + len(t.lost)
}

func (l *ledger) tally() tally {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := tally{c: l.c, starts: l.starts, window: l.window}
	for i := range t.c {
		t.c[i].violations = slices.Clone(l.c[i].violations)
	}
	for _, f := range l.failovers {
		ft := failoverTally{failover: *f}
		for pos, r := range l.records {
			if _, ok := f.parts[pos.Partition]; !ok {
				continue
			}
			for _, j := range r.leases {
				if j.acked && l.inWindow(pos.Partition, j) == f {
					ft.windowAcks++
				}
			}
		}
		t.failovers = append(t.failovers, ft)
	}
	for pos, r := range l.records {
		switch {
		case r.confirmed:
			t.produced++
		case len(r.leases) > 0:
			t.landed++
		}
		switch {
		case r.settled:
			t.acked++
		case r.unsure:
			t.unsure++
		case r.confirmed:
			t.lost = append(t.lost, pos)
			t.c[l.phaseAt(r.producedAt)].lost++
		}
	}
	slices.SortFunc(t.lost, delivery.Compare)
	return t
}
