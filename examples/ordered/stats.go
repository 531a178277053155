package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"narad.dev/consume/router"
)

// stats counts what the producer and the workers do; the progress lines read it while they
// run.
type stats struct {
	produced, deliveries   atomic.Int64
	afterExpiry, afterNack atomic.Int64 // deliveries again, by why
	crashes, crashedOps    atomic.Int64 // batches dropped unsettled, and their records
	nacked, poisonFailures atomic.Int64 // transient failures, and the poisoned operation's
	released               atomic.Int64 // given back behind a failed operation of their account
	ackLapsed              atomic.Int64 // acks too late: the lease had lapsed
}

func (s *stats) delivered(m *router.Message) {
	s.deliveries.Add(1)
	switch {
	case m.Attempt <= 1:
	case m.Reason == router.ReasonExpired:
		s.afterExpiry.Add(1)
	case m.Reason == router.ReasonNacked:
		s.afterNack.Add(1)
	}
}

// progress prints a line every interval until done closes: the counts, and the keys of the
// partitions as PartitionStatus gives them.
func progress(done <-chan struct{}, every time.Duration, start time.Time, out io.Writer, st *stats, l *ledger, node *router.Node, partitions int) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last int
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			var keys router.KeyStats
			for p := range partitions {
				if ps, err := node.PartitionStatus(topic, int32(p)); err == nil {
					keys.HeldKeys += ps.Keys.HeldKeys
					keys.BlockedKeys += ps.Keys.BlockedKeys
					keys.Deferred += ps.Keys.Deferred
				}
			}
			l.mu.Lock()
			applied := l.applied
			l.mu.Unlock()
			fmt.Fprintf(out, "%5.1fs  produced %6d  applied %6d (%6.0f/s)  again %4d  crashes %3d  accounts held %3d  blocked %3d  records deferred %4d\n",
				now.Sub(start).Seconds(), st.produced.Load(), applied, float64(applied-last)/every.Seconds(),
				st.afterExpiry.Load()+st.afterNack.Load(), st.crashes.Load(), keys.HeldKeys, keys.BlockedKeys, keys.Deferred)
			last = applied
		}
	}
}

// summary is what the demo reports at the end.
type summary struct {
	operations, accounts, partitions, workers int
	unordered, quarantineKeys, keysGoOn       bool
	elapsed                                   time.Duration
	visibility                                time.Duration

	produced, delivered, afterExpiry, afterNack int64
	crashes, crashedOps, nacked, released       int64
	poisonFailures, ackLapsed                   int64

	applied     int
	poisoned    opRef
	quarantined []quarantine // as OnQuarantine told
	keyOps      []opRef      // what should be quarantined, in order
	// Under QuarantineKeys: the records requeued, and of the quarantined operations those
	// applied (after the requeue).
	requeued, appliedAfterRequeue int

	orderViolations, overlaps, ackedDelivered, overdrafts, lateDeliveries int
	staleRefused, reapplied                                               int
	lost, wrongBalances                                                   int
	examples                                                              []string

	deferred, deferredStalls, spilled uint64 // Stats().Shards
}

// inOrder says every account's operations were applied in order, each once.
func (s summary) inOrder() bool {
	return s.orderViolations == 0 && s.ackedDelivered == 0 && s.lateDeliveries == 0
}

// quarantinedAsExpected says the poisoned operation was quarantined after MaxDeliveries,
// and with it, under QuarantineKeys, its account's later operations, none before it: each
// once, reported in offset order. A record the batch of the poisoned one's last delivery
// held behind it is reported as its holder gives it back, after those waiting: it alone may
// come out of order.
func (s summary) quarantinedAsExpected() bool {
	if len(s.quarantined) != len(s.keyOps) || s.quarantined[0].op != s.poisoned || s.quarantined[0].attempts != maxDeliveries {
		return false
	}
	byOffset := slices.Clone(s.quarantined)
	slices.SortFunc(byOffset, func(a, b quarantine) int {
		return cmp.Or(cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
	})
	for i, q := range byOffset {
		if q.op != s.keyOps[i] {
			return false
		}
	}
	head, last := s.quarantined[0], int64(-1)
	for _, q := range s.quarantined[1:] {
		if q.batch != 0 && q.batch == head.batch {
			continue
		}
		if q.offset < last {
			return false
		}
		last = q.offset
	}
	return true
}

// requeuedAsExpected says, under QuarantineKeys, that every quarantined record was
// requeued and its operation then applied.
func (s summary) requeuedAsExpected() bool {
	return !s.quarantineKeys || (s.requeued == len(s.quarantined) && s.appliedAfterRequeue == s.requeued)
}

// failures lists the checks that failed; none means the run showed what it should.
func (s summary) failures() []string {
	var f []string
	if !s.inOrder() {
		f = append(f, "an account's operations were not applied in order")
	}
	if s.overlaps > 0 {
		f = append(f, "two workers held one account at once")
	}
	if s.lost > 0 {
		f = append(f, fmt.Sprintf("%d operations lost", s.lost))
	}
	if s.wrongBalances > 0 || s.overdrafts > 0 {
		f = append(f, "balances wrong")
	}
	switch {
	case !s.quarantinedAsExpected() && s.quarantineKeys:
		f = append(f, "the quarantine is not the poisoned operation's and its account's later ones, in order")
	case !s.quarantinedAsExpected():
		f = append(f, "the quarantine is not the poisoned operation's alone")
	}
	if !s.requeuedAsExpected() {
		f = append(f, fmt.Sprintf("%d quarantined, %d requeued, %d of them applied", len(s.quarantined), s.requeued, s.appliedAfterRequeue))
	}
	return f
}

// printKeyQuarantine tells what the poisoned operation took with it into the quarantine, and
// what the requeue brought back.
func (s summary) printKeyQuarantine(w func(string, ...any)) {
	head := s.quarantined[0]
	w("  quarantined  %7d   %v (partition %d, offset %d) after %d deliveries, and with it its account's later operations:",
		len(s.quarantined), head.op, head.partition, head.offset, head.attempts)
	var never, withHead, before int
	for _, q := range s.quarantined[1:] {
		switch {
		case q.batch == 0:
			never++
		case q.batch == head.batch:
			withHead++
		default:
			before++
		}
	}
	w("                         %d never delivered, %d given back by the holder of its last batch, %d given back before; as expected: %s",
		never, withHead, before, yesNo(s.quarantinedAsExpected()))
	w("  requeued     %7d   once everything else was acked and the poison fixed (RequeueAll); %d of them applied after",
		s.requeued, s.appliedAfterRequeue)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func (s summary) print(out io.Writer) {
	w := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	w("")
	kind := "ordered"
	switch {
	case s.unordered:
		kind = "NOT ordered: planted"
	case s.keysGoOn:
		kind = "ordered, NOT quarantining keys: planted"
	case s.quarantineKeys:
		kind = "ordered, quarantining keys"
	}
	w("summary: %d operations on %d accounts, %d partitions, %s, %d workers, %.2fs",
		s.operations, s.accounts, s.partitions, kind, s.workers, s.elapsed.Seconds())
	if s.quarantineKeys {
		w("  applied      %7d   each operation once, %d of them after the requeue", s.applied, s.appliedAfterRequeue)
	} else {
		w("  applied      %7d   each operation once, but the poisoned one", s.applied)
	}
	w("  delivered    %7d   %d of them again: %d after a crash (their lease lapsed), %d after a nack, %d after a release",
		s.delivered, s.afterExpiry+s.afterNack+s.released, s.afterExpiry, s.afterNack, s.released)
	w("  crashes      %7d   batches dropped unacked (%d operations), back after the %v visibility timeout", s.crashes, s.crashedOps, s.visibility)
	w("  nacked       %7d   transient failures, visible again %v later (and %d failures of the poisoned operation)", s.nacked, nackDelay, s.poisonFailures)
	w("  released     %7d   given back unprocessed behind a failed operation of their account", s.released)
	if s.ackLapsed > 0 || s.staleRefused > 0 || s.reapplied > 0 {
		w("  too slow     %7d   acks after the lease lapsed; %d writes refused by their fencing token, %d redeliveries taken as applied",
			s.ackLapsed, s.staleRefused, s.reapplied)
	}
	switch {
	case len(s.quarantined) == 0:
		w("  quarantined  nothing, though %v always fails", s.poisoned)
	case s.quarantineKeys:
		s.printKeyQuarantine(w)
	default:
		for _, q := range s.quarantined {
			w("  quarantined  %v (partition %d, offset %d) after %d deliveries; the account went on with its next operation",
				q.op, q.partition, q.offset, q.attempts)
		}
	}
	w("  deferred     %7d   records set aside behind their held account (Stats().Shards.Deferred), %d of them spilled (a bit each, past MaxDeferredPerKey), %d stalls at MaxDeferred",
		s.deferred, s.spilled, s.deferredStalls)
	balances := "every account's balance as its operations make it, never overdrawn"
	if s.wrongBalances > 0 || s.overdrafts > 0 {
		balances = fmt.Sprintf("WRONG: %d accounts off, %d withdrawals overdrew", s.wrongBalances, s.overdrafts)
	}
	w("  balances     %s", balances)
	if s.lost > 0 {
		w("  lost         %7d   operations never applied nor quarantined", s.lost)
	}
	w("every account's operations applied in order: %s", yesNo(s.inOrder()))
	if !s.inOrder() {
		w("  %d applied out of order, %d delivered again after their ack, %d delivered past MaxDeliveries",
			s.orderViolations, s.ackedDelivered, s.lateDeliveries)
	}
	held := "never"
	if s.overlaps > 0 {
		held = fmt.Sprintf("%d times", s.overlaps)
	}
	w("two workers held one account at once: %s", held)
	for _, e := range s.examples {
		w("  e.g. %s", e)
	}
	if f := s.failures(); len(f) > 0 {
		w("FAILED: %s", strings.Join(f, "; "))
	}
}
