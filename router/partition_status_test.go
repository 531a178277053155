package router_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// PartitionStatus and TopicStatus say how far behind each partition is and whether it is
// drained, and never load or create anything.
func TestPartitionStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		defer h.close()
		ctx := context.Background()
		status := func(p int32) router.PartitionStatus {
			t.Helper()
			st, err := h.node.PartitionStatus("orders", p)
			require.NoError(t, err)
			return st
		}

		// Untouched: not loaded, nothing created for it.
		h.produce(0, 5)
		all, err := h.node.TopicStatus("orders")
		require.NoError(t, err)
		require.Len(t, all, 2)
		assert.Equal(t, router.PartitionStatus{Topic: "orders", Partition: 0, Frontier: -1, HighWatermark: 5}, all[0])
		assert.Equal(t, router.PartitionStatus{Topic: "orders", Partition: 1, Frontier: -1, HighWatermark: 0}, all[1])
		assert.False(t, all[0].Drained())
		assert.False(t, status(1).Loaded, "asking loaded nothing")
		_, err = h.fs.Stat("/state/orders")
		assert.Error(t, err, "asking created no directory")

		msgs, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{Max: 3, Pinned: true, Partition: 0})
		require.NoError(t, err)
		require.Len(t, msgs, 3)
		require.NoError(t, h.ack(msgs[1]))
		require.NoError(t, h.node.Nack(ctx, "orders", msgs[2].Receipt.String(), time.Minute))
		assert.Equal(t, router.PartitionStatus{Topic: "orders", Partition: 0, Loaded: true, Frontier: -1, HighWatermark: 5,
			Backlog: 5, Leased: 1, Delayed: 1, AckedAhead: 1}, status(0))

		require.NoError(t, h.ack(msgs[0]))
		st := status(0)
		assert.Equal(t, int64(1), st.Frontier)
		assert.Equal(t, int64(3), st.Backlog)
		assert.Equal(t, 0, st.AckedAhead)

		// A consumer parked on the topic, and one pinned to partition 1.
		parked := h.async(router.ConsumeOptions{Wait: time.Hour, Pinned: true, Partition: 1})
		synctest.Wait()
		st = status(1)
		assert.Equal(t, 1, st.ParkedOnTopic)
		assert.Equal(t, 1, st.ParkedOnPartition)
		assert.Equal(t, 0, status(0).ParkedOnPartition)
		h.produce(1, 1)
		served := <-parked
		require.Len(t, served, 1)
		require.NoError(t, h.ack(served[0]))
		assert.True(t, status(1).Drained())

		// Drained: every record settled.
		time.Sleep(time.Minute) // the nack delay ends
		for {
			msgs, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{Max: 10})
			require.NoError(t, err)
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				require.NoError(t, h.ack(m))
			}
		}
		all, err = h.node.TopicStatus("orders")
		require.NoError(t, err)
		for _, st := range all {
			assert.True(t, st.Drained(), "partition %d: %+v", st.Partition, st)
		}
		assert.Equal(t, int64(4), all[0].Frontier)
	})
}

func TestPartitionStatusRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		_, err := h.node.PartitionStatus("nope", 0)
		assert.ErrorIs(t, err, router.ErrUnknownTopic)
		_, err = h.node.TopicStatus("nope")
		assert.ErrorIs(t, err, router.ErrUnknownTopic)
		_, err = h.node.PartitionStatus("orders", 7)
		assert.ErrorIs(t, err, router.ErrNotLocal)

		// A partition routed here whose log the host cannot resolve.
		h.routes.Set("orders", 0, 3)
		st, err := h.node.PartitionStatus("orders", 3)
		require.NoError(t, err)
		assert.Error(t, st.Err)
		assert.Equal(t, int64(-1), st.HighWatermark)
		assert.False(t, st.Drained())

		h.close()
		_, err = h.node.PartitionStatus("orders", 0)
		assert.ErrorIs(t, err, router.ErrClosed)
		_, err = h.node.TopicStatus("orders")
		assert.ErrorIs(t, err, router.ErrClosed)
	})
}

// A partition whose state cannot be loaded shows as set aside, never drained.
func TestPartitionStatusSetAside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		h.close()
		require.NoError(t, h.fs.MkdirAll("/state/orders/1/consumer.ahead")) // a state file that is a directory
		h.start()
		defer h.close()
		h.produce(1, 2)
		_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Pinned: true, Partition: 1})
		var setAside *router.SetAsideError
		require.ErrorAs(t, err, &setAside)

		st, err := h.node.PartitionStatus("orders", 1)
		require.NoError(t, err)
		require.NotNil(t, st.SetAside)
		assert.Equal(t, int32(1), st.SetAside.Partition)
		assert.False(t, st.Loaded)
		assert.False(t, st.Drained())
		st, err = h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.Nil(t, st.SetAside)
	})
}
