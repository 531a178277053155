package inflight

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Available errs high, never low: after any history, the reserves that succeed at the same
// instant are at most Available, and exactly that many without a delivery limit (the
// estimate a node gates notifications of remote consumers on: checklist 96, 97), records
// quarantined above the frontier included.
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
		if quarantined <= availableQuarantineScan && p.a.cfg.MaxDeliveries == 0 {
			require.Equal(t, available, leased)
			require.Zero(t, p.a.Available(p.now, p.hwm), "nothing left once everything is leased")
		}
	})
}

// A record quarantined above an unsettled one is not counted: a node would tell a remote
// consumer of it, again each time the consumer's claim found nothing and it registered
// again, for as long as the record below stayed unsettled (checks 96, 97).
func TestAvailableLeavesOutTheQuarantine(t *testing.T) {
	s, _ := newTestShard(t, Config{}, State{Frontier: -1})
	held := reserve(t, s, epoch, 2)
	rejected := reserve(t, s, epoch, 2)
	require.NoError(t, s.Reject(epoch, rejected.Handle))
	require.Equal(t, 0, s.Available(epoch, 2), "offset 0 leased, offset 1 quarantined")
	require.Equal(t, 1, s.Available(epoch, 3), "offset 2 is there")
	require.True(t, s.Requeue(epoch, 1), "requeued")
	require.Equal(t, 1, s.Available(epoch, 2), "a requeued record counts")
	again := reserve(t, s, epoch, 2)
	require.NoError(t, s.Reject(epoch, again.Handle))
	require.NoError(t, s.Ack(epoch, held.Handle)) // the frontier passes the quarantined offset
	require.Equal(t, int64(1), s.Stats().Frontier)
	require.Equal(t, 0, s.Available(epoch, 2))

	// Past availableQuarantineScan records quarantined, none is looked at: the estimate errs
	// high.
	many, _ := newTestShard(t, Config{}, State{Frontier: -1})
	reserve(t, many, epoch, availableQuarantineScan+3) // offset 0, held
	for range availableQuarantineScan + 1 {
		l := reserve(t, many, epoch, availableQuarantineScan+3)
		require.NoError(t, many.Reject(epoch, l.Handle))
	}
	require.Equal(t, availableQuarantineScan+2, many.Available(epoch, availableQuarantineScan+3))
}
