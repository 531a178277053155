package inflight

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Available errs high, never low: after any history, the reserves that succeed at the same
// instant are at most Available, and exactly that many without a delivery limit (the
// estimate a node gates notifications of remote consumers on: checklist 96, 97).
func TestAvailableCountsWhatCanBeLeased(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := newBatchPair(t)
		for range rapid.IntRange(0, 40).Draw(t, "history") {
			p.step(t)
		}
		available := p.a.Available(p.now, p.hwm)
		quarantined := p.a.Stats().Quarantined
		leased := 0
		for {
			if _, err := p.a.ReserveNext(p.now, p.hwm); err != nil {
				break
			}
			leased++
			require.LessOrEqual(t, leased, available, "an estimate below what can be leased strands a remote consumer")
		}
		if quarantined == 0 && p.a.Stats().Quarantined == 0 && p.a.cfg.MaxDeliveries == 0 {
			require.Equal(t, available, leased)
			require.Zero(t, p.a.Available(p.now, p.hwm), "nothing left once everything is leased")
		}
	})
}
