package inflight

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Available errs high, never low: after any history, the reserves that succeed at the same
// instant are at most Available, and exactly that many without a delivery limit (the
// estimate a node gates notifications of remote consumers on: checklist 96, 97), however
// many records are quarantined above the frontier.
func TestAvailableCountsWhatCanBeLeased(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := newBatchPair(t)
		for range rapid.IntRange(0, 40).Draw(t, "history") {
			p.step(t)
		}
		available := p.a.Available(p.now, p.hwm)
		leased := 0
		for {
			if _, err := p.a.ReserveNext(p.now, p.hwm); err != nil {
				break
			}
			leased++
			require.LessOrEqual(t, leased, available, "an estimate below what can be leased strands a remote consumer")
		}
		if p.a.cfg.MaxDeliveries == 0 {
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

	// However many are quarantined: a bounded scan of the quarantine (256 entries) counted
	// none of them past that.
	const manyRejected = 300
	many, _ := newTestShard(t, Config{}, State{Frontier: -1})
	reserve(t, many, epoch, manyRejected+2) // offset 0, held
	for range manyRejected {
		l := reserve(t, many, epoch, manyRejected+2)
		require.NoError(t, many.Reject(epoch, l.Handle))
	}
	require.Equal(t, 1, many.Available(epoch, manyRejected+2), "offset 301 alone")
	require.Equal(t, 0, many.Available(epoch, manyRejected+1), "offset 0 held, the rest quarantined")
	require.True(t, many.Requeue(epoch, 7))
	require.Equal(t, 1, many.Available(epoch, manyRejected+1), "a requeued record counts")
	require.True(t, many.Discard(epoch, 8))
	require.Equal(t, 1, many.Available(epoch, manyRejected+1), "a discarded record is acked ahead")
}

// A restored quarantine is counted as it is: an offset the state has both acked ahead and
// quarantined (no shard writes that) once, as quarantined, so that a requeue delivers it; and
// one at or above the log's high watermark (a log that lost its tail) not at all.
func TestAvailableCountsARestoredQuarantine(t *testing.T) {
	s, _ := newTestShard(t, Config{}, State{Frontier: -1, AckedAhead: []Run{{First: 2, Last: 4}}, Quarantined: []int64{3, 6, 9}})
	require.Equal(t, 5, s.Available(epoch, 10), "offsets 0, 1, 5, 7 and 8")
	require.Equal(t, 4, s.Available(epoch, 8), "offsets 0, 1, 5 and 7")
	require.Equal(t, []int64{3, 6, 9}, s.Quarantined())
	require.True(t, s.Requeue(epoch, 3))
	require.Equal(t, 6, s.Available(epoch, 10), "offset 3 too")
	var got []int64
	for {
		l, err := s.ReserveNext(epoch, 10)
		if err != nil {
			break
		}
		got = append(got, l.Offset)
	}
	require.Equal(t, []int64{0, 1, 3, 5, 7, 8}, got)
}
