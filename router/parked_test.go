package router_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// A key held for long on an ordered topic: the other keys flow past many more of its records
// than the acked-ahead run cap, and a restart or a move brings its records back in order with
// no acked record delivered again.

// hungKeys returns n keys where every fifth is the hung key "h" (offset 0 the first) and the
// others distinct.
func hungKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		if i%5 == 0 {
			keys[i] = "h"
		}
	}
	return keys
}

// consumeOthers takes and acks every record it is given until a consume comes back empty,
// and returns the offsets acked; a record of the hung key fails the test.
func consumeOthers(t *testing.T, consume func() []router.Message, ack func(router.Message) error) map[int64]bool {
	t.Helper()
	acked := map[int64]bool{}
	for {
		msgs := consume()
		if len(msgs) == 0 {
			return acked
		}
		for _, m := range msgs {
			require.NotEqual(t, "h", string(m.Key), "offset %d of the hung key while its head is held", m.Offset)
			require.NoError(t, ack(m))
			acked[m.Offset] = true
		}
	}
}

// requireHungInOrder consumes the hung key's records after its holder is gone: in order, one
// at a time, and nothing acked before.
func requireHungInOrder(t *testing.T, n int, consume func() []router.Message, ack func(router.Message) error) {
	t.Helper()
	var got []int64
	for len(got) < n/5 {
		msgs := consume()
		require.NotEmpty(t, msgs, "the hung key's records wait for nothing (after %v)", got)
		for _, m := range msgs {
			require.Equal(t, "h", string(m.Key), "offset %d was acked before", m.Offset)
			got = append(got, m.Offset)
			require.NoError(t, ack(m))
		}
	}
	for i, off := range got {
		require.Equal(t, int64(5*i), off, "the hung key's records in order")
	}
	require.Empty(t, consume())
}

func TestOrderedTopicHungKeyAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 500 // 100 records of the hung key: 25 times the run cap
		h := newHarness(t, 0)
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: time.Hour, Ordered: true, MaxAckedAheadRuns: 4, MaxInFlight: 1000}
		}
		h.restart(nil)
		h.produceKeyed(hungKeys(n)...)
		held := h.consume(router.ConsumeOptions{Max: 1})
		require.Equal(t, []int64{0}, offsetsOf(held))
		acked := consumeOthers(t, func() []router.Message { return h.consume(router.ConsumeOptions{Max: 7}) }, h.ack)
		require.Len(t, acked, n-n/5, "every other key's record went past the hung key")
		require.Zero(t, h.node.Stats().Shards.AckedAheadStalls)
		ps, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		require.Equal(t, n/5-1, ps.Keys.Deferred)

		h.restart(nil) // the holder dies with the process
		defer h.close()
		requireHungInOrder(t, n, func() []router.Message { return h.consume(router.ConsumeOptions{Max: 3}) }, h.ack)
	})
}

// hungOnA is an ordered trio whose partition 0, on a, holds n records of hungKeys: the hung
// key's head held (held), every other key's record acked; pinned consumes partition 0.
func hungOnA(t *testing.T, n int) (tr *trio, held router.Message, pinned router.ConsumeOptions) {
	t.Helper()
	tr = orderedTrio(t, hungKeys(n)...)
	pinned = router.ConsumeOptions{Max: 7, Pinned: true, Partition: 0}
	first := tr.a.consume(router.ConsumeOptions{Max: 1, Pinned: true, Partition: 0})
	require.Equal(t, []int64{0}, offsetsOf(first))
	ackA := func(m router.Message) error { return tr.a.node.Ack(context.Background(), "orders", m.Receipt) }
	acked := consumeOthers(t, func() []router.Message { return tr.a.consume(pinned) }, ackA)
	require.Len(t, acked, n-n/5)
	return tr, first[0], pinned
}

func TestOrderedTopicHungKeyAcrossMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 200
		tr, held, pinned := hungOnA(t, n)
		defer tr.close()
		ctx := context.Background()
		tr.move(t, 0, tr.a, tr.b, "b", map[int32]string{0: "a", 1: "b"})
		require.Empty(t, tr.b.consume(pinned), "the moved lease still holds the key")
		require.NoError(t, tr.c.node.Ack(ctx, "orders", held.Receipt), "through the gateway")
		requireMovedHungInOrder(t, tr, n, pinned)
	})
}

// requireMovedHungInOrder consumes on b, the partition's new owner, the hung key's records
// left after its head (acked): in order, and none acked before the move.
func requireMovedHungInOrder(t *testing.T, tr *trio, n int, pinned router.ConsumeOptions) {
	t.Helper()
	var rest []int64
	for range 100 {
		msgs := tr.b.consume(pinned)
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			require.Equal(t, "h", string(m.Key), "offset %d was acked before the move", m.Offset)
			require.NoError(t, tr.b.node.Ack(context.Background(), "orders", m.Receipt))
			rest = append(rest, m.Offset)
		}
	}
	require.Len(t, rest, n/5-1)
	for i, off := range rest {
		require.Equal(t, int64(5*(i+1)), off, "in order")
	}
}

// A settle never reaches a shard whose restored key tails it cannot verify (the log's reads
// fail): it would take the settled record for a parked one after a restart and deliver it
// again. The settle answers ErrUnavailable, applied to nothing, and goes through once the
// reads work again.
func TestSettleWaitsForTheKeyTailsVerification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100
		tr, held, pinned := hungOnA(t, n)
		defer tr.close()
		ctx := context.Background()
		log := tr.logs.Log("orders", 0)
		log.FailReads(errors.New("disk unavailable"))
		state, err := tr.a.node.HandOff(ctx, "orders", 0)
		require.NoError(t, err)
		require.Error(t, tr.b.node.Adopt(ctx, "orders", 0, state), "the tails cannot be verified")
		tr.route(map[int32]string{0: "b", 1: "b"}) // the host names b anyway
		err = tr.b.node.Ack(ctx, "orders", held.Receipt)
		require.ErrorIs(t, err, router.ErrUnavailable)
		_, err = tr.b.node.Discard("orders", 0, 0)
		require.ErrorIs(t, err, router.ErrUnavailable)

		log.FailReads(nil)
		require.NoError(t, tr.b.node.Ack(ctx, "orders", held.Receipt))
		requireMovedHungInOrder(t, tr, n, pinned)
	})
}
