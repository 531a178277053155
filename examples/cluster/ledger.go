package main

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/examples/internal/delivery"
	"narad.dev/consume/examples/internal/latency"
	"narad.dev/consume/examples/internal/queueclient"
	"narad.dev/consume/examples/internal/traffic"
)

// The window of acks a crash of their owner may deliver again. The library documents about
// one committer tick (100 ms) of acks delivered again after a process crash: the committer
// writes each partition's acked state to the page cache once a tick, and a killed process
// loses only what it had not written yet. A writeout held back for its sync trails by that
// sync's duration plus a tick, so the check allows a second tick.
const (
	commitTick  = 100 * time.Millisecond
	crashWindow = 2 * commitTick
)

// A record is what the parent knows of one record of the log.
type record struct {
	confirmed    bool   // its produce was answered
	value        string // as produced, or as first delivered
	deliveries   int
	lastDelivery time.Time        // when the last delivery returned
	lastVia      string           // the node it was consumed through
	last         delivery.Outcome // of the last delivery
	ackedAt      time.Time        // when the latest 204 to an ack of it came back
	settled      bool             // answered 204 or already_settled: the owner settled it
	unsure       bool             // an ack of it got no answer
}

// A speed is how a delivery reached its client (see "Consumption across nodes").
type speed int

const (
	local speed = iota // the record's partition is owned by the node consumed through
	probe              // another node owns it, and the consume took it without waiting
	claim              // another node owns it, and the consume waited: notified, then claimed
)

var speedNames = [...]string{"local", "probe", "notify + claim"}

// Why a record was delivered again.
const (
	againNack      = "nack"
	againAbandoned = "abandoned"
	againLate      = "late"
	againCrash     = "crash"
	againOther     = "other"
)

// A ledger keeps every record's story: produced, delivered, settled, and checks each
// delivery against the promises. It is safe for concurrent use.
type ledger struct {
	owner  map[int32]string // partition → node
	owners map[string]int   // node → how many other nodes own partitions

	// Counters for the progress lines.
	produced, produceFailed                atomic.Int64
	deliveries, acks, nacks, abandons      atomic.Int64
	again                                  atomic.Int64
	late, refused, unsure, consumeFailures atomic.Int64

	mu        sync.Mutex
	records   delivery.Records[record]
	killed    string    // the node killed, once it is
	killAt    time.Time // when it was killed
	restartAt time.Time // when it served again
	lastTick  int       // 204s to acks of the killed node's partitions within commitTick before the kill
	reasons   map[string]int
	// Acked records delivered again after the kill of their owner, within crashWindow.
	inWindow     int
	windowOldest time.Duration
	violations   []string // an acked record delivered again outside the window
	mismatches   []string // a record whose value is not what was produced there
	latency      [3][]time.Duration
}

func newLedger(cc clusterConfig) *ledger {
	l := &ledger{owner: cc.owners(), owners: map[string]int{}, records: delivery.Records[record]{}, reasons: map[string]int{}}
	for _, n := range cc.Nodes {
		_, remote, _ := cc.routes(n.ID).Partitions(cc.Topic)
		l.owners[n.ID] = len(remote)
	}
	return l
}

// checkValue compares a value seen at pos with the one known. The caller holds l.mu.
func (l *ledger) checkValue(pos delivery.Position, r *record, value string) {
	switch {
	case r.value == "":
		r.value = value
	case r.value != value:
		l.mismatches = append(l.mismatches, fmt.Sprintf("%v holds %q, not %q", pos, value, r.value))
	}
}

var _ traffic.Ledger = (*ledger)(nil)

// Produced records a produce the owner answered.
func (l *ledger) Produced(pos delivery.Position, value string, _ time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.records.At(pos)
	r.confirmed = true
	l.checkValue(pos, r, value)
	l.produced.Add(1)
}

// ProduceFailed counts a produce that got no offset.
func (l *ledger) ProduceFailed() { l.produceFailed.Add(1) }

// ConsumeFailed counts a consume that failed.
func (l *ledger) ConsumeFailed() { l.consumeFailures.Add(1) }

// Delivered records the delivery of m to a client that consumed through node via, in a
// consume that began at start, returned at end, and made calls calls to other nodes, and
// reports whether the record was delivered before, and how many times.
func (l *ledger) Delivered(via string, m *queueclient.Message, calls int, start, end time.Time) (n int, again bool) {
	pos := delivery.Position{Partition: m.Partition, Offset: m.Offset}
	l.deliveries.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.records.At(pos)
	l.checkValue(pos, r, m.Value)
	owner := l.owner[m.Partition]
	// Delivered by the killed node's first life, or through it, and again after the kill:
	// its owner died holding its lease, or the node it was consumed through died before its
	// ack went through.
	crashed := r.deliveries > 0 && !l.killAt.IsZero() && end.After(l.killAt) &&
		(l.restartAt.IsZero() || r.lastDelivery.Before(l.restartAt))
	ownerCrashed := crashed && owner == l.killed
	crashed = crashed && (ownerCrashed || r.lastVia == l.killed)
	switch {
	case r.deliveries == 0:
		// The first delivery: how long the client waited for a record that existed, from
		// the consume's start, or from the record's append (its timestamp) if it came
		// later; by the speed it came at. A consume that waited had probed every other
		// owner before it parked, so it made more calls than there are other owners.
		s := local
		switch {
		case owner == via:
		case calls > l.owners[via]:
			s = claim
		default:
			s = probe
		}
		l.latency[s] = append(l.latency[s], end.Sub(later(start, m.Timestamp)))
	case r.last == delivery.Nacked:
		l.reasons[againNack]++
	case r.last == delivery.Abandoned:
		l.reasons[againAbandoned]++
	case r.last == delivery.AckLate:
		l.reasons[againLate]++
	case crashed:
		l.reasons[againCrash]++
	default:
		l.reasons[againOther]++
	}
	if !r.ackedAt.IsZero() {
		// An acked record comes back only after a crash of its owner (the ack went to the
		// process that was killed), and only if it was acked within the window before
		// the kill.
		before := l.killAt.Sub(r.ackedAt)
		if ownerCrashed && (l.restartAt.IsZero() || r.ackedAt.Before(l.restartAt)) && before <= crashWindow {
			l.inWindow++
			l.windowOldest = max(l.windowOldest, before)
		} else {
			l.violations = append(l.violations, fmt.Sprintf("%v, consumed through %s, was acked %s and delivered again",
				pos, via, r.ackedAt.Format("15:04:05.000000")))
		}
	}
	again = r.deliveries > 0
	if again {
		l.again.Add(1)
	}
	r.deliveries++
	r.lastDelivery, r.lastVia = end, via
	r.last = delivery.Held
	return r.deliveries - 1, again
}

// Settled records how a delivery of the record at pos ended, answered at at.
func (l *ledger) Settled(pos delivery.Position, _ int, o delivery.Outcome, _, at time.Time, _ bool) {
	switch o {
	case delivery.Acked:
		l.acks.Add(1)
	case delivery.Nacked:
		l.nacks.Add(1)
	case delivery.Abandoned:
		l.abandons.Add(1)
	case delivery.AckLate:
		l.late.Add(1)
	case delivery.AckRefused:
		l.refused.Add(1)
	case delivery.AckUnsure:
		l.unsure.Add(1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.records.At(pos)
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

// kill records that node id was killed at at.
func (l *ledger) kill(id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.killed, l.killAt = id, at
	for pos, r := range l.records {
		if l.owner[pos.Partition] == id && !r.ackedAt.IsZero() && at.Sub(r.ackedAt) <= commitTick {
			l.lastTick++
		}
	}
}

// restarted records that the killed node serves again.
func (l *ledger) restarted(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.restartAt = at
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
	produced    int                 // records whose produce their owner answered
	landed      int                 // records whose produce got no answer, delivered all the same
	delivered   int                 // deliveries
	records     int                 // records delivered at least once
	acked       int                 // records acked: an ack answered 204 (or already_settled)
	ackedUnsure int                 // records whose acks all went unanswered, in a partition that drained
	lost        []delivery.Position // records produced and never acked
	reasons     map[string]int      // deliveries again, by why

	killAt, restartAt time.Time
	inWindow          int           // acked records delivered again within the crash window
	windowOldest      time.Duration // the longest before the kill one of them was acked
	lastTick          int           // acks of the killed node's partitions answered in its last tick
	violations        []string
	mismatches        []string
	latency           [3]percentiles
	nacks, abandoned  int64
	late, refused     int64 // acks answered 410 gone, 503
	unsure            int64 // acks that got no answer
	produceFailures   int64 // produce calls that failed
	consumeFailures   int64 // consume calls that failed
}

func (l *ledger) tally() tally {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := tally{
		reasons: maps.Clone(l.reasons), inWindow: l.inWindow, lastTick: l.lastTick,
		killAt: l.killAt, restartAt: l.restartAt, windowOldest: l.windowOldest,
		violations: slices.Clone(l.violations), mismatches: slices.Clone(l.mismatches),
		delivered: int(l.deliveries.Load()), nacks: l.nacks.Load(), abandoned: l.abandons.Load(),
		late: l.late.Load(), refused: l.refused.Load(), unsure: l.unsure.Load(),
		produceFailures: l.produceFailed.Load(), consumeFailures: l.consumeFailures.Load(),
	}
	for s := range l.latency {
		t.latency[s] = percentilesOf(l.latency[s])
	}
	for pos, r := range l.records {
		if r.confirmed {
			t.produced++
		} else if r.deliveries > 0 {
			t.landed++
		}
		if r.deliveries > 0 {
			t.records++
		}
		switch {
		case r.settled:
			t.acked++
		case r.unsure:
			t.ackedUnsure++
		case r.confirmed:
			t.lost = append(t.lost, pos)
		}
	}
	slices.SortFunc(t.lost, delivery.Compare)
	return t
}

// percentiles of a set of durations, as the report prints them.
type percentiles latency.Percentiles

func percentilesOf(d []time.Duration) percentiles { return percentiles(latency.Of(d)) }

func (p percentiles) String() string {
	if p.N == 0 {
		return "no samples"
	}
	r := latency.Round
	return fmt.Sprintf("p50 %-9v p90 %-9v p99 %-9v max %-9v (%d)", r(p.P50), r(p.P90), r(p.P99), r(p.Max), p.N)
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
