package sim_test

import (
	"testing"

	"narad.dev/consume/internal/sim"
	"narad.dev/consume/internal/testflags"
)

// A seed replays: two runs of it take the same course (their fingerprints, a hash of every
// event the driver saw with its fake time, agree). The nodes' goroutines run concurrently,
// so where two of them act at the same fake instant their order is the scheduler's: the
// test reports how many seeds replayed exactly.
func TestSeedsReplay(t *testing.T) {
	n := uint64(100)
	if testflags.Race {
		n = 30
	}
	same := 0
	var differ []uint64
	for seed := range n {
		seed++
		a, _ := runSeed(t, seed, sim.Options{Tolerate: knownKinds()})
		b, _ := runSeed(t, seed, sim.Options{Tolerate: knownKinds()})
		if a.Fingerprint == b.Fingerprint {
			same++
		} else {
			differ = append(differ, seed)
		}
	}
	t.Logf("%d of %d seeds replayed exactly; differing: %v", same, n, differ)
}
