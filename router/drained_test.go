package router_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// The tests of passing over drained local partitions (drained.go): a consume whose local
// partitions were all found drained, and not woken since, takes what its node read ahead
// from other nodes without walking them again; anything that wakes them ends that.

// resolvingLogs counts the logs a node resolves (Get and GetMany).
type resolvingLogs struct {
	*routertest.MemLogs
	resolved atomic.Int64
}

func (l *resolvingLogs) Get(topic string, p int32) (router.Log, error) {
	l.resolved.Add(1)
	return l.MemLogs.Get(topic, p)
}

func (l *resolvingLogs) GetMany(topic string, ps []int32, into []router.Log) error {
	l.resolved.Add(int64(len(ps)))
	return l.MemLogs.GetMany(topic, ps, into)
}

// drainedCluster is a cluster where node a owns partitions 0 and 1, empty, and node b
// partition 2, with records: a's consumers take b's, read ahead. It returns a's logs.
func drainedCluster(t *testing.T) (*cluster, *resolvingLogs) {
	var logs *resolvingLogs
	c := newCluster(t, rtt, map[string][]int32{"a": {0, 1}, "b": {2}}, func(id string, cfg *router.Config) {
		if id == "a" {
			logs = &resolvingLogs{MemLogs: cfg.Logs.(*routertest.MemLogs)}
			cfg.Logs = logs
		}
	})
	c.produce(2, 400)
	return c, logs
}

// consumeOne consumes one record on m and acks it.
func consumeOne(t *testing.T, m *member) router.Message {
	t.Helper()
	msgs := m.consume(context.Background(), router.ConsumeOptions{})
	require.Len(t, msgs, 1)
	require.NoError(t, m.ack(msgs[0]))
	return msgs[0]
}

// A consume of records read ahead does not walk local partitions found drained: the logs of
// a's partitions are resolved at most once per DrainedPasses consumes, not by every one.
func TestDrainedPartitionsAreNotWalked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, logs := drainedCluster(t)
		defer c.close()
		a := c.nodes["a"]
		const consumes = 40
		for range consumes {
			assert.Equal(t, int32(2), consumeOne(t, a).Partition)
		}
		walks := 1 + consumes/router.DrainedPasses + 1 // the first, then one per mark's passes
		assert.LessOrEqual(t, logs.resolved.Load(), int64(2*walks), "a walk per consume resolves %d logs", 2*consumes)
	})
}

// Whatever wakes a drained partition ends the mark: a record appended (the host calls
// Appended), one released or nacked, is taken by the next consume, before what was read
// ahead.
func TestDrainedMarkEndsOnWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := drainedCluster(t)
		defer c.close()
		ctx := context.Background()
		a := c.nodes["a"]
		for range 3 { // marked drained, and records held
			require.Equal(t, int32(2), consumeOne(t, a).Partition)
		}

		c.produce(0, 1)
		msgs := a.consume(ctx, router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		local := msgs[0]
		require.Equal(t, int32(0), local.Partition, "the appended record first")
		for range 3 { // leased: marked drained again
			require.Equal(t, int32(2), consumeOne(t, a).Partition)
		}

		require.NoError(t, a.node.Release(ctx, "orders", local.Receipt))
		msgs = a.consume(ctx, router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		require.Equal(t, local.Offset, msgs[0].Offset, "the released record first")
		require.Equal(t, int32(0), msgs[0].Partition)
		local = msgs[0]
		for range 3 {
			require.Equal(t, int32(2), consumeOne(t, a).Partition)
		}

		require.NoError(t, a.node.Nack(ctx, "orders", local.Receipt, 0))
		msgs = a.consume(ctx, router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		assert.Equal(t, int32(0), msgs[0].Partition, "the nacked record first")
		assert.Equal(t, local.Offset, msgs[0].Offset)
		assert.Equal(t, uint32(2), msgs[0].Attempt)
	})
}

// A host that does not call Appended has a record appended to a drained partition taken
// within DrainedPasses consumes, while records read ahead are there to take.
func TestDrainedMarkLapsesWithoutAppended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := drainedCluster(t)
		defer c.close()
		a := c.nodes["a"]
		for range 3 {
			require.Equal(t, int32(2), consumeOne(t, a).Partition)
		}
		c.logs.Log("orders", 1).Append(nil, []byte("unannounced"), time.Now())
		for i := range router.DrainedPasses + 1 {
			if consumeOne(t, a).Partition == 1 {
				return
			}
			t.Logf("consume %d: not yet", i)
		}
		t.Fatalf("the record appended without Appended was not taken within %d consumes", router.DrainedPasses+1)
	})
}
