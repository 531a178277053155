package sim_test

import (
	"errors"
	"slices"
	"testing"

	"narad.dev/consume/internal/sim"
)

// A checker that cannot fail proves nothing: with a bug planted in the network, runs that
// pass without it must fail, each with the violation the bug breaks.

// calm is the runs plantedRuns makes unless told otherwise: faults off, so that nothing else
// is in play.
var calm = sim.Options{Calm: true, Steps: 80}

// plantedRuns runs seeds with and without plant (with opts) and returns how many runs the
// checker could judge (eligible reports whether a run without the plant exercised what the
// plant breaks), how many of those it caught, and the seeds of those it missed. A catch of
// another kind than kinds fails the test. The runs tolerate the known library bugs of other
// kinds than kinds; a seed whose run without the plant shows a known bug of one of kinds
// cannot be judged (the bug hides the plant), and is left out.
func plantedRuns(t *testing.T, opts sim.Options, plant sim.Plant, kinds []string, seeds int, eligible func(sim.Report) bool) (judged, caught int, missed []uint64) {
	seen := map[string]bool{}
	opts.Tolerate = slices.DeleteFunc(knownKinds(), func(k string) bool { return slices.Contains(kinds, k) })
	hidden := 0
	defer func() {
		if hidden > 0 {
			t.Logf("%d seeds left out: a known library bug of the kind the plant breaks shows without it", hidden)
		}
	}()
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		opts.Plant = sim.PlantNone
		rep, err := runSeed(t, seed, opts)
		var bug *sim.Violation
		if errors.As(err, &bug) && slices.Contains(kinds, bug.Kind) && slices.Contains(knownKinds(), bug.Kind) {
			hidden++
			continue
		}
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
			missed = append(missed, seed)
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
	return judged, caught, missed
}

// checklist 11: a claim rewritten as a plain probe leases the record all the same, but never
// ends the owner's hold, which then lapses: the next record of a sparse stream waits for it.
// Only the sparse-stream latency check can see that.
func TestCheckerCatchesClaimAsProbe(t *testing.T) {
	judged, caught, missed := plantedRuns(t, calm, sim.PlantClaimAsProbe, []string{sim.KindSparseLatency}, 30,
		func(r sim.Report) bool { return r.Sparse > 0 })
	for _, seed := range missed {
		t.Errorf("seed %d: the checker missed the planted claim-as-probe", seed)
	}
	t.Logf("claim-as-probe: caught in %d of %d runs with a sparse stream", caught, judged)
	if judged < 10 {
		t.Fatalf("only %d runs timed a sparse stream", judged)
	}
}

// A consume reply delivered again in place of a later one: the same leases handed to two
// consumers, which the one-live-holder check catches; or, when the first reply never reached
// its consumer (its records were given back), a consumer holding a lease that is over, which
// the settle check catches; or leases that reach a consumer long after their grant, which
// the check of the hold catches.
func TestCheckerCatchesReplayedReply(t *testing.T) {
	judged, caught, missed := plantedRuns(t, calm, sim.PlantReplayReply, []string{sim.KindOneHolder, sim.KindSettleAnswer, sim.KindHeldTooLong}, 30,
		func(r sim.Report) bool { return r.Remote > 1 })
	for _, seed := range missed {
		t.Errorf("seed %d: the checker missed the planted replayed reply", seed)
	}
	t.Logf("replayed reply: caught in %d of %d runs with consumes across nodes", caught, judged)
	if judged < 10 {
		t.Fatalf("only %d runs consumed across nodes", judged)
	}
}

// An old owner that applied settles after its hand-off's fence (here: the network answers
// with success each settle frame reaching an old owner for a partition it handed off, and
// applies it nowhere) loses them with the state that left before them: an ack answered
// success is followed by the record delivered again, which the redelivery-after-an-ack check
// catches (no crash window excuses a hand-off); an extend answered success leaves its
// consumer a lease that lapses under it (one live holder, or the settle check); a settle of
// a lease already over answered success (the settle check). A run catches it only if a
// consumer settled a lease of the partition through another node while the routes still
// named the old owner; a nack answered success changes nothing the checker sees.
func TestCheckerCatchesUnfencedSettle(t *testing.T) {
	opts := calm
	opts.Moves = true
	judged, caught, missed := plantedRuns(t, opts, sim.PlantUnfencedSettle,
		[]string{sim.KindAckUndone, sim.KindOneHolder, sim.KindSettleAnswer}, 40,
		func(r sim.Report) bool { return r.Faults.Moves > 0 })
	t.Logf("unfenced settle: caught in %d of %d runs that moved partitions; missed %v", caught, judged, missed)
	if judged < 20 {
		t.Fatalf("only %d runs moved partitions", judged)
	}
	if caught*2 <= judged {
		t.Errorf("the checker caught the planted unfenced settle in %d of %d runs that moved partitions, want most", caught, judged)
	}
}

// A transport that says it honours its context (router.ContextTransport) but holds each
// consume reply for a second whatever its context does: the node waits for such a
// transport's Call, so its consumes return up to a second after their wait, and the
// consume-return check catches it; or, where every consume of the run returned within its
// wait (a consume with a wait parks rather than wait long on a probe), the sparse stream's
// claim reply comes a second late, and the sparse-stream check catches it; or its records
// reach their consumer a second after their grant, and the check of the hold catches it. Only the
// processes with such a transport (half of them) are bent, so a run catches it if one of
// them consumed across nodes.
func TestCheckerCatchesLateReply(t *testing.T) {
	judged, caught, missed := plantedRuns(t, calm, sim.PlantLateReply, []string{sim.KindLateReturn, sim.KindSparseLatency, sim.KindHeldTooLong}, 20,
		func(r sim.Report) bool { return r.Remote > 0 })
	t.Logf("late reply: caught in %d of %d runs with consumes across nodes; missed %v", caught, judged, missed)
	if judged < 10 {
		t.Fatalf("only %d runs consumed across nodes", judged)
	}
	if caught*4 < judged*3 {
		t.Errorf("the checker caught the planted late reply in %d of %d runs with consumes across nodes, want most", caught, judged)
	}
}

// A release rewritten as a nack on its way to the owner: the owner counts the attempt of a
// delivery its consumer gave back (or that never reached one), and with MaxDeliveries 1 it
// quarantines the record at once, which the early-quarantine check catches. A run can catch
// it only if a consumer released a live lease through a node that does not own it, on a
// path that speaks the node wire's version 7 (an older owner gets a nack by design).
func TestCheckerCatchesReleaseAsNack(t *testing.T) {
	opts := calm
	opts.MaxDeliveries = 1
	judged, caught, missed := plantedRuns(t, opts, sim.PlantReleaseAsNack, []string{sim.KindEarlyQuarantine}, 40,
		func(r sim.Report) bool { return r.ForwardedReleases > 0 })
	t.Logf("release as nack: caught in %d of %d runs that forwarded releases; missed %v", caught, judged, missed)
	if judged < 10 {
		t.Fatalf("only %d runs forwarded releases", judged)
	}
	if caught*4 < judged*3 {
		t.Errorf("the checker caught the planted release-as-nack in %d of %d runs that forwarded releases, want most", caught, judged)
	}
}

// A reject rewritten as a nack on its way to the owner: the reject is answered success, the
// record is delivered again, and the check of a settled record's redelivery catches it (no
// crash window explains it in a calm run), or a later settle of its handle answers ErrGone
// where a settled record answers ErrAlreadySettled (the settle check). A run can catch it only if a consumer rejected
// a lease with success through a node that does not own it.
func TestCheckerCatchesRejectAsNack(t *testing.T) {
	opts := calm
	opts.Rejects = true
	judged, caught, missed := plantedRuns(t, opts, sim.PlantRejectAsNack, []string{sim.KindAckUndone, sim.KindOneHolder, sim.KindSettleAnswer}, 40,
		func(r sim.Report) bool { return r.ForwardedRejects > 0 })
	t.Logf("reject as nack: caught in %d of %d runs that forwarded rejects; missed %v", caught, judged, missed)
	if judged < 10 {
		t.Fatalf("only %d runs forwarded rejects", judged)
	}
	if caught*4 < judged*3 {
		t.Errorf("the checker caught the planted reject-as-nack in %d of %d runs that forwarded rejects, want most", caught, judged)
	}
}

// A node that ignores its grant in time (Config.Ownership nil), paused past its grant while
// its partitions fail over, resumes with stale routes (nobody calls RoutesChanged on it at
// first): nothing fences it but the store, which refuses its next save. Until then it serves
// the partitions it lost: it leases records the new owner serves (a lease granted with no
// valid grant, or two live holders), answers settles of leases that ended with its grant
// with success (the settle check), or acks what is then delivered again (the redelivery
// check). A run can catch it only if a partition failed over from the paused owner and
// consumers went through it with its routes stale.
func TestCheckerCatchesUnfencedZombie(t *testing.T) {
	opts := calm
	opts.Zombies = true
	judged, caught, missed := plantedRuns(t, opts, sim.PlantUnfencedZombie,
		[]string{sim.KindNotOwner, sim.KindOneHolder, sim.KindSettleAnswer, sim.KindAckUndone, sim.KindDeposedSave}, 80,
		func(r sim.Report) bool { return r.Faults.LiveFailovers > 0 && r.StaleSettles+r.StaleConsumes > 0 })
	t.Logf("unfenced zombie: caught in %d of %d runs that failed over from a paused owner; missed %v", caught, judged, missed)
	if judged < 10 {
		t.Fatalf("only %d runs failed over from a paused owner", judged)
	}
	// A run that went through the zombie with stale routes may still touch nothing contested
	// (its partitions' records all settled, say): half is the bar, against none without the
	// plant.
	if caught*2 < judged {
		t.Errorf("the checker caught the planted unfenced zombie in %d of %d runs that failed over from a paused owner, want half at least", caught, judged)
	}
}

// Nodes that run the topic unordered (TopicConfig.Ordered false) while the model expects it
// ordered, its records keyed from a set of 1 to 5 keys: any consumer takes any record of a
// key, whoever holds its lower ones. The check of one holder per key catches two consume
// responses holding one key at once; with that check's violations tolerated, the check of a
// key's records in order catches a record delivered before a lower one of its key was settled
// (and so, in runs where consumes never overlapped, a nack's redelivery overtaken). A run can
// catch it only if it delivered several records of one key.
func TestCheckerCatchesUnordered(t *testing.T) {
	opts := calm
	opts.Ordered = true
	eligible := func(r sim.Report) bool { return r.KeyedDeliveries > 1 }
	judged, caught, missed := plantedRuns(t, opts, sim.PlantUnordered, []string{sim.KindKeyHolders, sim.KindKeyOrder}, 30, eligible)
	t.Logf("unordered nodes: caught in %d of %d runs that delivered several keyed records; missed %v", caught, judged, missed)
	if judged < 20 {
		t.Fatalf("only %d runs delivered several keyed records", judged)
	}
	if caught*4 < judged*3 {
		t.Errorf("the checker caught the planted unordered nodes in %d of %d runs, want most", caught, judged)
	}

	// The order check on its own.
	opts.Plant = sim.PlantUnordered
	opts.Tolerate = append(slices.DeleteFunc(knownKinds(), func(k string) bool { return k == sim.KindKeyOrder }), sim.KindKeyHolders)
	ordered := 0
	for seed := uint64(1); seed <= 30; seed++ {
		_, err := runSeed(t, seed, opts)
		var v *sim.Violation
		switch {
		case err == nil:
		case !errors.As(err, &v) || v.Kind != sim.KindKeyOrder:
			t.Errorf("seed %d: the planted unordered nodes, one holder per key tolerated, caught as %v, want %q", seed, err, sim.KindKeyOrder)
		default:
			if ordered == 0 {
				t.Logf("seed %d: %s: %s", seed, v.Kind, v.What)
			}
			ordered++
		}
	}
	t.Logf("unordered nodes, one holder per key tolerated: the order check caught %d of 30 runs", ordered)
	if ordered*2 < judged {
		t.Errorf("the order check caught the planted unordered nodes in %d runs, of %d that delivered several keyed records", ordered, judged)
	}
}

// Nodes that run an ordered topic without QuarantineKeys while the model expects it, with
// MaxDeliveries 1 and rejects: a quarantined record's key goes on with its next record, which
// is delivered while the lower one is surely in the quarantine, and the stricter check of a
// key's records in order catches it. A run can catch it only if a later record of a
// quarantined key came while its key was there: without the plant, it followed its key into
// the quarantine before MaxDeliveries deliveries (Report.KeyFollowers).
func TestCheckerCatchesUnquarantinedKeys(t *testing.T) {
	opts := calm
	opts.Ordered, opts.MaxDeliveries, opts.Rejects, opts.QuarantineKeys = true, 1, true, true
	eligible := func(r sim.Report) bool {
		if !r.QuarantineKeys {
			t.Fatalf("seed %d: Options.QuarantineKeys set in an ordered run that quarantines, and the topic did not quarantine keys", r.Seed)
		}
		return r.KeyFollowers > 0
	}
	judged, caught, missed := plantedRuns(t, opts, sim.PlantUnquarantinedKeys, []string{sim.KindKeyOrder}, 30, eligible)
	t.Logf("unquarantined keys: caught in %d of %d runs whose keys followed a record into the quarantine; missed %v", caught, judged, missed)
	if judged < 10 {
		t.Fatalf("only %d runs had a key follow a record into the quarantine", judged)
	}
	if caught*4 < judged*3 {
		t.Errorf("the checker caught the planted unquarantined keys in %d of %d runs, want most", caught, judged)
	}
}
