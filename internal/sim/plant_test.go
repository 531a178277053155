package sim_test

import (
	"errors"
	"slices"
	"testing"

	"narad.dev/consume/internal/sim"
)

// A checker that cannot fail proves nothing: with a bug planted in the network, runs that
// pass without it must fail, each with the violation the bug breaks.

// plantedRuns runs seeds with and without plant (faults off, so that nothing else is in
// play) and returns how many runs the checker could judge (eligible reports whether a run
// without the plant exercised what the plant breaks) and how many of those it caught.
func plantedRuns(t *testing.T, plant sim.Plant, kinds []string, seeds int, eligible func(sim.Report) bool) (judged, caught int) {
	seen := map[string]bool{}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		opts := sim.Options{Calm: true, Steps: 80, Tolerate: knownKinds()}
		rep, err := runSeed(t, seed, opts)
		if err != nil {
			t.Fatalf("seed %d without a plant: %v", seed, err)
		}
		if !eligible(rep) {
			continue
		}
		judged++
		opts.Plant = plant
		_, err = runSeed(t, seed, opts)
		var v *sim.Violation
		switch {
		case err == nil:
			t.Errorf("seed %d: the checker missed the planted %v", seed, plant)
		case !errors.As(err, &v) || !slices.Contains(kinds, v.Kind):
			t.Errorf("seed %d: the planted %v caught as %v, want a violation of %q", seed, plant, err, kinds)
		default:
			caught++
			if !seen[v.Kind] {
				seen[v.Kind] = true
				t.Logf("seed %d: %s: %s", seed, v.Kind, v.What)
			}
		}
	}
	return judged, caught
}

// checklist 11: a claim rewritten as a plain probe leases the record all the same, but never
// ends the owner's hold, which then lapses: the next record of a sparse stream waits for it.
// Only the sparse-stream latency check can see that.
func TestCheckerCatchesClaimAsProbe(t *testing.T) {
	judged, caught := plantedRuns(t, sim.PlantClaimAsProbe, []string{sim.KindSparseLatency}, 30,
		func(r sim.Report) bool { return r.Sparse > 0 })
	t.Logf("claim-as-probe: caught in %d of %d runs with a sparse stream", caught, judged)
	if judged < 10 {
		t.Fatalf("only %d runs timed a sparse stream", judged)
	}
}

// A consume reply delivered again in place of a later one: the same leases handed to two
// consumers, which the one-live-holder check catches; or, when the first reply never reached
// its consumer (its records were given back), a consumer holding a lease that is over, which
// the settle check catches.
func TestCheckerCatchesReplayedReply(t *testing.T) {
	judged, caught := plantedRuns(t, sim.PlantReplayReply, []string{sim.KindOneHolder, sim.KindSettleAnswer}, 30,
		func(r sim.Report) bool { return r.Remote > 1 })
	t.Logf("replayed reply: caught in %d of %d runs with consumes across nodes", caught, judged)
	if judged < 10 {
		t.Fatalf("only %d runs consumed across nodes", judged)
	}
}
