package router_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
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

		// Untouched: not loaded, nothing created for it; its backlog read from what is
		// persisted (nothing: from the log's oldest record).
		h.produce(0, 5)
		all, err := h.node.TopicStatus("orders")
		require.NoError(t, err)
		require.Len(t, all, 2)
		assert.Equal(t, router.PartitionStatus{Topic: "orders", Partition: 0, Frontier: -1, HighWatermark: 5, Backlog: 5}, all[0])
		assert.Equal(t, router.PartitionStatus{Topic: "orders", Partition: 1, Frontier: -1, HighWatermark: 0}, all[1])
		assert.False(t, all[0].Drained())
		assert.False(t, status(1).Loaded, "asking loaded nothing")
		_, err = h.fs.Stat("/state/orders")
		assert.Error(t, err, "asking created no directory")

		msgs, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{Max: 3, Pinned: true, Partition: 0})
		require.NoError(t, err)
		require.Len(t, msgs, 3)
		require.NoError(t, h.ack(msgs[1]))
		require.NoError(t, h.node.Nack(ctx, "orders", msgs[2].Receipt, time.Minute))
		assert.Equal(t, router.PartitionStatus{Topic: "orders", Partition: 0, Loaded: true, Frontier: -1, HighWatermark: 5,
			Backlog: 5, Leased: 1, Delayed: 1, AckedAhead: 1, OldestUnsettledAge: 0}, status(0))

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

// OldestUnsettledAge is the age of the record just above the frontier, read from the log at
// each status call on the node's clock, and TopicSummary's is the greatest known of a
// topic's (checklist: issue 26, lag a dashboard can alert on).
func TestPartitionStatusOldestUnsettledAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1, 2)
		defer h.close()
		ctx := context.Background()
		status := func(p int32) router.PartitionStatus {
			t.Helper()
			st, err := h.node.PartitionStatus("orders", p)
			require.NoError(t, err)
			return st
		}
		load := func(p int32) {
			t.Helper()
			_, err := h.node.PartitionStatus("orders", p)
			require.NoError(t, err)
			require.NoError(t, h.node.Persist(ctx, "orders", p)) // touches (loads) the partition
		}

		// Drained and loaded: nothing is unsettled, and no Read is made for it.
		load(1)
		reads := h.logs.Log("orders", 1).Reads()
		assert.Equal(t, time.Duration(0), status(1).OldestUnsettledAge)
		assert.Equal(t, reads, h.logs.Log("orders", 1).Reads(), "a drained partition's status read the log")

		h.produce(0, 3) // stamped now
		assert.Equal(t, time.Duration(0), status(0).OldestUnsettledAge, "not loaded: its frontier read from disk")
		load(0)
		time.Sleep(90 * time.Second)
		h.produce(0, 1) // offset 3, 90 s younger
		log0 := h.logs.Log("orders", 0)
		before := log0.Reads()
		st := status(0)
		assert.Equal(t, 90*time.Second, st.OldestUnsettledAge)
		assert.Equal(t, before+1, log0.Reads(), "one Read per partition per status call")
		assert.Equal(t, int64(0), log0.ReadOffsets()[len(log0.ReadOffsets())-1], "the record just above the frontier")

		// Settling the three old records leaves the young one the oldest; leasing does not
		// settle, and neither does an ack ahead of a gap.
		msgs, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{Max: 3, Pinned: true, Partition: 0})
		require.NoError(t, err)
		require.Len(t, msgs, 3)
		require.NoError(t, h.ack(msgs[1]))
		assert.Equal(t, 90*time.Second, status(0).OldestUnsettledAge, "leased and acked ahead are not settled")
		require.NoError(t, h.ack(msgs[0]))
		require.NoError(t, h.ack(msgs[2]))
		time.Sleep(time.Second)
		assert.Equal(t, time.Second, status(0).OldestUnsettledAge)

		// A log that keeps no timestamps: not known.
		log2 := h.logs.Log("orders", 2)
		log2.Append(nil, []byte("v"), time.Time{})
		load(2)
		assert.Equal(t, time.Duration(-1), status(2).OldestUnsettledAge)

		sum := router.Summarize([]router.PartitionStatus{status(0), status(1), status(2)})
		assert.Equal(t, router.TopicSummary{Partitions: 3, Backlog: 2, OldestUnsettledAge: time.Second, AgeUnknown: 1}, sum)
		all, err := h.node.TopicStatus("orders")
		require.NoError(t, err)
		assert.Equal(t, sum, router.Summarize(all))
		assert.Equal(t, router.TopicSummary{OldestUnsettledAge: -1}, router.Summarize(nil))
	})
}

// What a failed Read or a stamp from the future makes of the age, table-driven.
func TestPartitionStatusOldestUnsettledAgeEdges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(log *routertest.MemLog, now time.Time)
		want  time.Duration
	}{
		{"stamped a minute ago", func(log *routertest.MemLog, now time.Time) { log.Append(nil, []byte("v"), now.Add(-time.Minute)) }, time.Minute},
		{"stamped after the node's now", func(log *routertest.MemLog, now time.Time) { log.Append(nil, []byte("v"), now.Add(time.Hour)) }, 0},
		{"corrupt", func(log *routertest.MemLog, now time.Time) {
			log.Append(nil, []byte("v"), now)
			log.Corrupt(0)
		}, -1},
		{"log closed", func(log *routertest.MemLog, now time.Time) {
			log.Append(nil, []byte("v"), now)
			log.Close()
		}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, 0)
				defer h.close()
				require.NoError(t, h.node.Persist(context.Background(), "orders", 0)) // loaded, frontier -1
				tc.setup(h.logs.Log("orders", 0), time.Now())
				st, err := h.node.PartitionStatus("orders", 0)
				require.NoError(t, err)
				assert.Equal(t, tc.want, st.OldestUnsettledAge)
				assert.Equal(t, int64(1), st.Backlog)
			})
		})
	}
}

// A partition no call has loaded since a restart reports what its files hold, read and not
// kept: an SQS front end's queue depth, or a dashboard's backlog, on a node just started.
func TestPartitionStatusNotLoadedReadsItsFiles(t *testing.T) {
	for _, withStore := range []bool{false, true} {
		t.Run(map[bool]string{false: "files", true: "state store"}[withStore], func(t *testing.T) {
			testPartitionStatusNotLoaded(t, withStore)
		})
	}
}

// testPartitionStatusNotLoaded: the status of a partition not loaded since a restart counts
// what its persisted state says, in its files or in the host's state store.
func testPartitionStatusNotLoaded(t *testing.T, withStore bool) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		if withStore {
			store := &routertest.MemStore{}
			h.restart(func(cfg *router.Config) { cfg.Store = store })
		}
		ctx := context.Background()
		h.produce(0, 10)
		msgs, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{Max: 7, Pinned: true, Partition: 0})
		require.NoError(t, err)
		require.Len(t, msgs, 7)
		for _, i := range []int{0, 1, 2, 3, 6} { // the frontier at 3, 6 acked ahead
			require.NoError(t, h.ack(msgs[i]))
		}
		require.NoError(t, h.node.Persist(ctx, "orders", 0))
		h.restart(nil)
		defer h.close()
		st, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, router.PartitionStatus{Topic: "orders", Partition: 0, Frontier: 3, HighWatermark: 10, Backlog: 6,
			AckedAhead: 1}, st)
		again, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.False(t, again.Loaded, "asking loaded nothing")
	})
}

// A negative partition is the caller's mistake, answered ErrInvalidArgument (400) by every
// call that names a partition, not ErrNotLocal (503, which says try again), and it changes
// nothing.
func TestNegativePartitionIsInvalidEverywhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 2)
		held := h.one()
		ctx := context.Background()
		for _, p := range []int32{-1, math.MinInt32} {
			calls := map[string]error{}
			_, calls["PartitionStatus"] = h.node.PartitionStatus("orders", p)
			_, calls["Replay"] = h.node.Replay(ctx, "orders", p, 0, 1)
			_, calls["PurgePartition"] = h.node.PurgePartition(ctx, "orders", p)
			_, calls["Requeue"] = h.node.Requeue("orders", p, 0)
			_, calls["RequeueAll"] = h.node.RequeueAll("orders", p)
			_, calls["Quarantined"] = h.node.Quarantined("orders", p)
			_, calls["Discard"] = h.node.Discard("orders", p, 0)
			calls["Persist"] = h.node.Persist(ctx, "orders", p)
			_, calls["HandOff"] = h.node.HandOff(ctx, "orders", p)
			_, calls["ReadState"] = router.ReadState(h.fs, h.dir, "orders", p)
			for name, err := range calls {
				assert.ErrorIs(t, err, router.ErrInvalidArgument, "%s of partition %d", name, p)
				assert.Equal(t, 400, router.HTTPStatus(err), "%s of partition %d", name, p)
			}
		}
		st, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, 1, st.Leased, "the lease held is still held")
		assert.Equal(t, int64(-1), st.Frontier, "nothing settled")
		assert.Equal(t, int64(2), st.Backlog)
		require.NoError(t, h.ack(held))
	})
}
