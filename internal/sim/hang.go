package sim

import (
	"math/rand/v2"
	"time"
)

// Hung nodes. In some runs (drawn from a stream of their own, so that a run without them
// draws what it drew before they were simulated) a node hangs for a while instead of
// refusing: every frame sent to it is lost on its way (routertest.DropRequest: its caller
// learns nothing until its budget ends), while the node runs on, its own calls going out
// and their replies coming back, and the host's failure detector (Liveness) does not
// report it down. Unlike a node cut off, whose calls fail at once, a hung owner costs each
// probe or claim its budget, until its requesters pass over it as slow (see router's
// liveness.go, "Slow owners"); a notification to a hung node gets no answer, and its
// owner abandons the hold. Hangs heal with the other faults.

// degradeClass draws whether a fault class of graceful degradation (hangs, skew, the lying
// peer, MaxDeliveries) is on in this run, from a stream of its own named by tag, so that a
// run without the class draws what it drew before the class was simulated: on when forced
// by its option, off in calm runs and with Options.OldSchedule, otherwise on in 30 % of
// runs. It returns the stream for the class's other draws.
func (s *sim) degradeClass(tag uint64, forced bool) (r *rand.Rand, on bool) {
	r = rand.New(rand.NewPCG(s.seed, tag))
	drawn := r.IntN(100) < 30
	return r, forced || (drawn && !s.opts.Calm && !s.opts.OldSchedule)
}

// hangs is the state of the hung-node fault class of a run.
type hangs struct {
	rng *rand.Rand // its own stream: which node hangs, and for how long
}

// planHangs turns the class on in some runs, as a step of the workload.
func (s *sim) planHangs() {
	hr, on := s.degradeClass(0x68616e672e73696d, s.opts.Hangs) // "hang.sim"
	if !on {
		return
	}
	s.hangs = &hangs{rng: hr}
	s.weights = append(s.weights, weighted{"hang", 1, s.hang})
}

// hang makes a node hang for a while: an owner most often, a gateway now and then (its
// notifications are lost).
func (s *sim) hang() {
	hr := s.hangs.rng
	var cands []*node
	for _, nd := range s.nodes {
		if nd.hungUntil.IsZero() && (nd.owner() || hr.IntN(4) == 0) {
			cands = append(cands, nd)
		}
	}
	if len(cands) == 0 {
		return
	}
	nd := cands[hr.IntN(len(cands))]
	nd.hungUntil = time.Now().Add([]time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second}[hr.IntN(3)])
	s.mu.Lock()
	s.hung[nd.id] = true
	s.report.Faults.Hangs++
	s.mu.Unlock()
	s.logf("hang %s until %v (the failure detector does not notice)", nd.id, s.since(nd.hungUntil))
}

// unhang ends nd's hang.
func (s *sim) unhang(nd *node) {
	nd.hungUntil = time.Time{}
	s.mu.Lock()
	delete(s.hung, nd.id)
	s.mu.Unlock()
	s.logf("%s answers again", nd.id)
}

// reviveHung ends the hangs whose time is up.
func (s *sim) reviveHung(now time.Time) {
	for _, nd := range s.nodes {
		if !nd.hungUntil.IsZero() && !now.Before(nd.hungUntil) {
			s.unhang(nd)
		}
	}
}

// healHangs ends every hang.
func (s *sim) healHangs() {
	for _, nd := range s.nodes {
		if !nd.hungUntil.IsZero() {
			s.unhang(nd)
		}
	}
}
