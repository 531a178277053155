package router_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// shortLog returns a log holding the first n records of keys: a log that lost its tail.
func shortLog(keys []string, n int) *routertest.MemLog {
	l := routertest.NewMemLog()
	for _, k := range keys[:n] {
		l.Append([]byte(k), []byte("v"), time.Now())
	}
	return l
}

// A state adopted onto a log that lost its tail (a failover to a log shorter than the one the
// state was kept over): the records its key tails name at or above the log's high watermark
// are gone, and verified away as records below retention are. Before, the verification read
// them, failed, and stopped there for good: every consume of the partition failed, every
// settle answered ErrUnavailable, and a purge that found the verification short of the high
// watermark answered ErrUnverified, all until the log grew past the state's runs.
func TestAdoptOntoALogThatLostItsTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, kept = 100, 50
		tr, held, pinned := hungOnA(t, n)
		defer tr.close()
		ctx := context.Background()
		state, err := tr.a.node.HandOff(ctx, "orders", 0)
		require.NoError(t, err)
		tr.logs.Replace("orders", 0, shortLog(hungKeys(n), kept))
		require.NoError(t, tr.b.node.Adopt(ctx, "orders", 0, state))
		tr.route(map[int32]string{0: "b", 1: "b"})
		require.NoError(t, tr.b.node.Ack(ctx, "orders", held.Receipt))
		// The hung key's records the log still holds, in order; those it lost are gone.
		var rest []int64
		for {
			msgs, err := tr.b.node.Consume(ctx, "orders", pinned)
			require.NoError(t, err)
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				require.Equal(t, "h", string(m.Key), "offset %d was acked before the move", m.Offset)
				require.NoError(t, tr.b.node.Ack(ctx, "orders", m.Receipt))
				rest = append(rest, m.Offset)
			}
		}
		require.Equal(t, []int64{5, 10, 15, 20, 25, 30, 35, 40, 45}, rest)
		// (What the state acked past the log's tail stays acked, as an adopted state's runs
		// there always were: the frontier passes them.)
		ps, err := tr.b.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		require.Equal(t, int64(n-1), ps.Frontier)
	})
}

// A purge of a shard whose restored key tails are not verified yet verifies them first, as a
// settle does: the log's reads failed when the state was adopted, and the tails reach past the
// log's high watermark (it lost its tail). Before, the purge answered ErrUnverified for as long
// as no consume verified the tails, and a consume could not (see above).
func TestPurgeVerifiesTheKeyTailsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, kept = 100, 50
		tr, _, pinned := hungOnA(t, n)
		defer tr.close()
		ctx := context.Background()
		state, err := tr.a.node.HandOff(ctx, "orders", 0)
		require.NoError(t, err)
		short := shortLog(hungKeys(n), kept)
		tr.logs.Replace("orders", 0, short)
		short.FailReads(errors.New("disk unavailable"))
		require.Error(t, tr.b.node.Adopt(ctx, "orders", 0, state), "the tails cannot be verified")
		tr.route(map[int32]string{0: "b", 1: "b"}) // the host names b anyway
		_, err = tr.b.node.PurgePartition(ctx, "orders", 0)
		require.ErrorIs(t, err, router.ErrUnavailable, "the tails cannot be read yet")

		short.FailReads(nil)
		moved, err := tr.b.node.PurgePartition(ctx, "orders", 0)
		require.NoError(t, err)
		require.Equal(t, int64(kept), moved)
		require.Empty(t, tr.b.consume(pinned))
	})
}

// A restart over a log that lost its tail and whose oldest records retention took: the load
// clamps the state below the high watermark, and the verification passes what retention took,
// so the hung key's records left come in order and a purge goes.
func TestRestartOverALogThatLostItsEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, kept, oldest = 100, 50, 22
		h := newHarness(t, 0)
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: time.Hour, Ordered: true, MaxAckedAheadRuns: 4, MaxInFlight: 1000}
		}
		h.restart(nil)
		h.produceKeyed(hungKeys(n)...)
		require.Equal(t, []int64{0}, offsetsOf(h.consume(router.ConsumeOptions{Max: 1})))
		acked := consumeOthers(t, func() []router.Message { return h.consume(router.ConsumeOptions{Max: 7}) }, h.ack)
		require.Len(t, acked, n-n/5)
		h.close()
		short := shortLog(hungKeys(n), kept)
		short.Trim(oldest)
		h.logs.Replace("orders", 0, short)
		h.start()
		defer h.close()
		var rest []int64
		for {
			msgs := h.consume(router.ConsumeOptions{Max: 3})
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				require.Equal(t, "h", string(m.Key), "offset %d was acked before the restart", m.Offset)
				rest = append(rest, m.Offset)
			}
			if len(rest) == 2 {
				break // the rest are left unsettled for the purge
			}
		}
		require.Equal(t, []int64{25, 30}, rest)
		moved, err := h.node.PurgePartition(context.Background(), "orders", 0)
		require.NoError(t, err)
		require.Equal(t, int64(kept-25), moved, "from below 25, held")
		require.Empty(t, h.consume(router.ConsumeOptions{Max: 3}))
		ps, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		require.Equal(t, int64(kept-1), ps.Frontier)
	})
}
