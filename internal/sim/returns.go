package sim

import (
	"time"

	"narad.dev/consume/router"
)

// A consume's wait is bounded (router.ConsumeOverrun): whatever the owners do (hang,
// answer late, lose frames), a consume issued at t with ConsumeOptions.Wait w returns by
// t + w + ConsumeOverrun, since every probe and claim it sends is cut to that instant and
// then abandoned; a consume on a topic no node serves yet is held for the wait, no longer.
// A consume spends no other fake time: a node's local scan, its log reads and its disk
// work take none, nor does an owner's serving. The check allows a margin for the ordering
// of events within an instant and a claim's reply caught on its way, returnMargin: two
// one-way trips and 10 ms. A consume whose context ended (cancelled, or its deadline)
// before the bound is exempt from then on.

// returnMargin is what the check allows past the wait and ConsumeOverrun.
func (s *sim) returnMargin() time.Duration { return 2*s.maxTrip + 10*time.Millisecond }

// checkReturn checks that a consume on nd that began at start with wait returned (r.at)
// within the bound, unless its context ended first (ctxEnd, zero if it did not).
func (s *sim) checkReturn(nd *node, start time.Time, wait time.Duration, ctxEnd time.Time, r polled) {
	bound := router.ConsumeOverrun + s.returnMargin()
	past := r.at.Sub(start) - wait
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.OverrunBound = bound
	if !ctxEnd.IsZero() && ctxEnd.Before(start.Add(wait+bound)) {
		return // exempt: its context ended first
	}
	s.report.Overrun = max(s.report.Overrun, past)
	if past > bound {
		s.failKind(KindLateReturn, "a consume on %s with a wait of %v began at %v and returned at %v (%d records, %v): %v past its wait, more than ConsumeOverrun (%v) and %v",
			nd.id, wait, s.since(start), s.since(r.at), len(r.msgs), r.err, past, router.ConsumeOverrun, s.returnMargin())
	}
}
