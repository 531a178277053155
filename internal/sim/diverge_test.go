package sim_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"narad.dev/consume/internal/sim"
)

func TestDiverge(t *testing.T) {
	for _, seed := range []uint64{2, 3, 7, 8} {
		var runs [2][]string
		for i := range 2 {
			var mu sync.Mutex
			runSeed(t, seed, sim.Options{Tolerate: knownKinds(), Logf: func(f string, a ...any) {
				mu.Lock()
				defer mu.Unlock()
				l := fmt.Sprintf(f, a...)
				if !strings.Contains(l, " logs: ") && !strings.Contains(l, "frame ") && !strings.Contains(l, "network:") {
					runs[i] = append(runs[i], l)
				}
			}})
		}
		for j := range min(len(runs[0]), len(runs[1])) {
			if runs[0][j] != runs[1][j] {
				fmt.Fprintf(os.Stderr, "seed %d line %d:\n  %s\n  %s\n", seed, j, runs[0][j], runs[1][j])
				break
			}
		}
	}
}
