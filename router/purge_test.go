package router_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
)

// Purge settles a topic's backlog at the call, durably: leased, nacked, acked-ahead and
// never delivered records alike; a held handle then answers ErrAlreadySettled, records
// produced after it are delivered, and a power cut after it brings nothing purged back.
func TestPurge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		ctx := context.Background()
		h.produce(0, 6)
		h.produce(1, 4)
		held := h.consume(router.ConsumeOptions{Max: 4, Pinned: true, Partition: 0})
		require.Len(t, held, 4)
		require.NoError(t, h.ack(held[1]), "acked ahead of a hole")
		require.NoError(t, h.node.Nack(ctx, "orders", held[2].Receipt, time.Minute))

		moved, err := h.node.Purge(ctx, "orders")
		require.NoError(t, err)
		require.Equal(t, int64(10), moved)
		require.Empty(t, h.consume(router.ConsumeOptions{Max: 10}))
		require.ErrorIs(t, h.ack(held[0]), router.ErrAlreadySettled)
		for _, p := range []int32{0, 1} {
			st, err := h.node.PartitionStatus("orders", p)
			require.NoError(t, err)
			require.True(t, st.Drained())
			require.Zero(t, st.Leased+st.Delayed+st.AckedAhead)
		}
		again, err := h.node.Purge(ctx, "orders")
		require.NoError(t, err)
		require.Zero(t, again, "nothing left to purge")

		h.produce(0, 2)
		after := h.consume(router.ConsumeOptions{Max: 10})
		require.Equal(t, []int64{6, 7}, offsetsOf(after), "what came after the purge is delivered")

		cut := h.fs.PowerCut(crashfs.PowerCut{})
		h.node.Close()
		h.fs = cut
		h.start()
		defer h.close()
		require.Equal(t, []int64{6, 7}, offsetsOf(h.consume(router.ConsumeOptions{Max: 10})),
			"the purge was durable when it returned; the two leases after it died with the process")
	})
}

// PurgePartition answers for a partition this node does not serve as the other
// per-partition calls do, and changes nothing.
func TestPurgePartitionNotLocal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		_, err := h.node.PurgePartition(context.Background(), "orders", 7)
		require.ErrorIs(t, err, router.ErrNotLocal)
		_, err = h.node.Purge(context.Background(), "nope")
		require.ErrorIs(t, err, router.ErrUnknownTopic)
	})
}
