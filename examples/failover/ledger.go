package main

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/examples/internal/delivery"
	"narad.dev/consume/examples/internal/queueclient"
)

// saveSlack is what the window allows beyond the commit interval: the save in flight at the
// kill (one etcd Txn, a quorum's fsyncs), as a crash window allows a writeout's sync.
const saveSlack = 100 * time.Millisecond

// leaseMayLive says a delivery that ended so may still hold its lease: a delivery of the
// record before the lease's expiry is a second holder.
func leaseMayLive(o delivery.Outcome) bool {
	return o == delivery.Held || o == delivery.Abandoned || o == delivery.AckUnsure || o == delivery.AckRefused
}

// A phase of the run.
type phase int

const (
	steady  phase = iota // from the start to the move
	moving               // from the move's request to the kill
	failing              // from the kill to the end
	phases
)

var phaseNames = [phases]string{"1 steady", "2 graceful move", "3 failover"}

// A record is what the parent knows of one record of the log.
type record struct {
	confirmed  bool // its produce was answered
	value      string
	producedAt time.Time
	deliveries int
	lastStart  time.Time        // when the consume of its last delivery began: its lease began later
	lastEnd    time.Time        // and returned
	last       delivery.Outcome // of the last delivery
	ackedAt    time.Time        // when the latest 204 to an ack of it came back
	ackSent    time.Time        // when that ack was sent
	ackVia     string           // and the node it went through
	settled    bool             // answered 204 or already_settled: the owner settled it
	unsure     bool             // an ack of it got no answer
}

// counts are one phase's, each by when it happened (a delivery by its consume's return,
// a settle by its answer, a loss by the record's produce).
type counts struct {
	produced, delivered, again                 int
	acked, nacked, abandoned, late             int
	refused, retried, unsure                   int
	lost                                       int
	ackedAgainIn                               int           // acked records delivered again within the window
	answeredDying                              int           // of them, acks whose answer came back after the kill
	windowOldest                               time.Duration // the longest before the kill one of them was acked
	ackedAgainOut                              int           // acked records delivered again outside it: a violation
	twoHolders                                 int           // delivered while another lease could still be live: a violation
	leasesDropped                              int           // held at the dead owner, delivered again at once after the failover
	mismatches                                 int           // a record delivered with another value than produced: a violation
	violations                                 []string
	firstDeliveries, nackAgain, abandonedAgain int
}

// A ledger keeps every record's story and checks each delivery against the promises. It
// is safe for concurrent use.
type ledger struct {
	visibility time.Duration
	window     time.Duration // the failover's window: commit interval + saveSlack

	// For the progress lines.
	produced, deliveries, acks atomic.Int64

	mu          sync.Mutex
	records     map[delivery.Position]*record
	c           [phases]counts
	moveAt      time.Time
	killAt      time.Time
	victim      string
	victimParts map[int32]bool      // the partitions the victim owned when it was killed
	failedOver  map[int32]time.Time // when the parent's view saw each of them assigned elsewhere
	lastWindow  int                 // acks of the victim's partitions answered within the window before the kill
}

func newLedger(visibility, commitInterval time.Duration) *ledger {
	return &ledger{visibility: visibility, window: commitInterval + saveSlack, records: map[delivery.Position]*record{}}
}

func (l *ledger) rec(pos delivery.Position) *record {
	r := l.records[pos]
	if r == nil {
		r = &record{}
		l.records[pos] = r
	}
	return r
}

// phaseAt is the phase t falls in. The caller holds l.mu.
func (l *ledger) phaseAt(t time.Time) phase {
	switch {
	case !l.killAt.IsZero() && !t.Before(l.killAt):
		return failing
	case !l.moveAt.IsZero() && !t.Before(l.moveAt):
		return moving
	}
	return steady
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

// producedAt records a produce the owner answered.
func (l *ledger) producedAt(pos delivery.Position, value string, at time.Time) {
	l.produced.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rec(pos)
	c := &l.c[l.phaseAt(at)]
	c.produced++
	r.confirmed, r.producedAt = true, at
	l.checkValue(c, pos, r, value)
}

// delivered records the delivery of m to a client, by a consume that began at start and
// returned at end, and reports whether the record was delivered before.
func (l *ledger) delivered(m *queueclient.Message, start, end time.Time) (again bool) {
	l.deliveries.Add(1)
	pos := delivery.Position{Partition: m.Partition, Offset: m.Offset}
	l.mu.Lock()
	defer l.mu.Unlock()
	ph := l.phaseAt(end)
	c := &l.c[ph]
	c.delivered++
	r := l.rec(pos)
	l.checkValue(c, pos, r, m.Value)
	// Only the failover may hand out again what the victim held or had acked: its leases
	// are not carried (they were in its memory), and its last acks may not have reached etcd.
	ofVictim := ph == failing && l.victimParts[pos.Partition]
	switch {
	case r.deliveries == 0:
		c.firstDeliveries++
	case !r.ackedAt.IsZero():
		// The victim's own acks may come back: those it answered within the window before
		// the kill, or as it died (an answer already on its way when the kill landed reads
		// as answered after it), which is any ack of its partitions answered before they
		// were failed over, since no other node answers them until then.
		before := l.killAt.Sub(r.ackedAt)
		failedOver, ok := l.failedOver[pos.Partition]
		if ofVictim && (!ok || r.ackedAt.Before(failedOver)) && before <= l.window {
			c.ackedAgainIn++
			c.windowOldest = max(c.windowOldest, before)
			if before < 0 {
				c.answeredDying++
			}
		} else {
			c.ackedAgainOut++
			l.violation(c, "%v was acked through %s (sent %s, answered %s; the kill at %s) and delivered again at %s", pos,
				r.ackVia, r.ackSent.Format("15:04:05.000"), r.ackedAt.Format("15:04:05.000"),
				l.killAt.Format("15:04:05.000"), end.Format("15:04:05.000"))
		}
	case leaseMayLive(r.last) && end.Before(r.lastStart.Add(l.visibility)):
		// The earlier lease began after r.lastStart and lasts the visibility timeout; this
		// one began before end.
		if ofVictim && r.lastEnd.Before(l.killAt) {
			c.leasesDropped++
		} else {
			c.twoHolders++
			l.violation(c, "%v was delivered at %s while the lease of its delivery at %s could still be live",
				pos, end.Format("15:04:05.000"), r.lastEnd.Format("15:04:05.000"))
		}
	case r.last == delivery.Nacked:
		c.nackAgain++
	case r.last == delivery.Abandoned:
		c.abandonedAgain++
	}
	again = r.deliveries > 0
	if again {
		c.again++
	}
	r.deliveries++
	r.lastStart, r.lastEnd, r.last = start, end, delivery.Held
	return again
}

// acking notes an ack of the record at pos sent through node via at sent, for the report.
func (l *ledger) acking(pos delivery.Position, via string, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rec(pos)
	r.ackVia, r.ackSent = via, sent
}

// settle records how a delivery of the record at pos ended, answered at at; retried says a
// 503 came first.
func (l *ledger) settle(pos delivery.Position, o delivery.Outcome, at time.Time, retried bool) {
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
	r := l.rec(pos)
	r.last = o
	switch o {
	case delivery.Acked:
		r.ackedAt, r.settled = at, true
	case delivery.AckSettled:
		r.settled = true
	case delivery.AckUnsure:
		r.unsure = true
	}
}

// move records that the move was asked for at at.
func (l *ledger) move(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.moveAt = at
}

// kill records that node victim, owner of parts, was killed at at.
func (l *ledger) kill(victim string, parts []int32, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.victim, l.killAt, l.victimParts, l.failedOver = victim, at, map[int32]bool{}, map[int32]time.Time{}
	for _, p := range parts {
		l.victimParts[p] = true
	}
	for pos, r := range l.records {
		if l.victimParts[pos.Partition] && !r.ackedAt.IsZero() && at.Sub(r.ackedAt) <= l.window {
			l.lastWindow++
		}
	}
}

// assigned notes the victim's partitions that next assigns to another node.
func (l *ledger) assigned(next *snapshot) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range l.victimParts {
		if _, seen := l.failedOver[p]; !seen && next.owner(p) != l.victim {
			l.failedOver[p] = now
		}
	}
}

// allAcked reports whether every record whose produce was answered has been acked, or had
// an ack that got no answer (the owner's status tells whether it took it).
func (l *ledger) allAcked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.confirmed && !r.settled && !r.unsure {
			return false
		}
	}
	return true
}

// tally is what the ledger found, at the end.
type tally struct {
	c              [phases]counts
	moveAt, killAt time.Time
	victim         string
	lastWindow     int
	window         time.Duration
	produced       int                 // records whose produce was answered
	landed         int                 // records whose produce got no answer, delivered all the same
	acked          int                 // records settled: an ack answered 204 or already_settled
	ackedUnsure    int                 // records whose acks all went unanswered
	lost           []delivery.Position // records produced and never acked
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
	t := tally{c: l.c, moveAt: l.moveAt, killAt: l.killAt, victim: l.victim, lastWindow: l.lastWindow, window: l.window}
	for i := range t.c {
		t.c[i].violations = slices.Clone(l.c[i].violations)
	}
	for pos, r := range l.records {
		switch {
		case r.confirmed:
			t.produced++
		case r.deliveries > 0:
			t.landed++
		}
		switch {
		case r.settled:
			t.acked++
		case r.unsure:
			t.ackedUnsure++
		case r.confirmed:
			t.lost = append(t.lost, pos)
			t.c[l.phaseAt(r.producedAt)].lost++
		}
	}
	slices.SortFunc(t.lost, delivery.Compare)
	return t
}
