package router_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// The ops of the node wire's version 12, by their first byte.
const (
	opStatusFrame = 18
	opPurgeFrame  = 19
)

// depths is each status's partition, owner and backlog, for comparing a queue's statuses.
type depth struct {
	Partition int32
	Owner     string
	Backlog   int64
	Leased    int
}

func depths(statuses []router.PartitionStatus) []depth {
	out := make([]depth, len(statuses))
	for i, s := range statuses {
		out[i] = depth{s.Partition, s.Owner, s.Backlog, s.Leased}
	}
	return out
}

// QueueStatus counts every partition of a topic, wherever it is owned, with one Status frame
// per other owner: a gateway that owns nothing counts the whole queue, an owner counts its
// own partitions as TopicStatus does and the others' as their owners report them, a node
// that has loaded nothing since it started counts its persisted state, and what is leased
// at an owner counts as leased.
func TestQueueStatusCountsEveryPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen frames
		c := newCluster(t, 0, map[string][]int32{"a": {0, 1}, "b": {2, 3}, "c": {4}, "g": nil}, nil)
		c.net.Observe = seen.observe
		defer c.close()
		ctx := context.Background()
		for p, n := range []int{3, 0, 5, 2, 4} {
			c.produce(int32(p), n)
		}
		b := c.nodes["b"]
		leased := b.consume(ctx, router.ConsumeOptions{Max: 2, Pinned: true, Partition: 2})
		require.Len(t, leased, 2)
		// On partition 3: one acked ahead of the hole below it, one nacked with a delay.
		held := b.consume(ctx, router.ConsumeOptions{Max: 2, Pinned: true, Partition: 3})
		require.Len(t, held, 2)
		require.NoError(t, b.ack(held[1]))
		require.NoError(t, b.node.Nack(ctx, "orders", held[0].Receipt, time.Minute))

		fromGateway, err := c.nodes["g"].node.QueueStatus(ctx, "orders")
		require.NoError(t, err)
		assert.Equal(t, []depth{{0, "a", 3, 0}, {1, "a", 0, 0}, {2, "b", 5, 2}, {3, "b", 2, 0}, {4, "c", 4, 0}}, depths(fromGateway))
		assert.Equal(t, 3, seen.of(opStatusFrame), "one frame per owner")
		ownB, err := b.node.TopicStatus("orders")
		require.NoError(t, err)
		for i := range ownB {
			ownB[i].Owner = "b"
		}
		assert.Equal(t, ownB, fromGateway[2:4], "b's partitions as b itself reports them")
		assert.Equal(t, 1, fromGateway[3].Delayed)
		assert.Equal(t, 1, fromGateway[3].AckedAhead)
		assert.False(t, fromGateway[4].Loaded, "c loaded nothing: its status is its persisted state")
		assert.True(t, fromGateway[2].Loaded)
		for _, s := range fromGateway {
			assert.NoError(t, s.Err)
			assert.Equal(t, s.Backlog, s.HighWatermark, "nothing settled yet: partition %d", s.Partition)
		}
		sum := router.Summarize(fromGateway)
		assert.Equal(t, int64(14), sum.Backlog)
		assert.Zero(t, sum.Uncounted)

		fromOwner, err := c.nodes["a"].node.QueueStatus(ctx, "orders")
		require.NoError(t, err)
		assert.Equal(t, []depth{{0, "", 3, 0}, {1, "", 0, 0}, {2, "b", 5, 2}, {3, "b", 2, 0}, {4, "c", 4, 0}}, depths(fromOwner))
		own, err := c.nodes["a"].node.TopicStatus("orders")
		require.NoError(t, err)
		assert.Equal(t, own, fromOwner[:2], "its own partitions as TopicStatus reports them")

		// c settles two records and restarts: a fresh node, its partition not loaded,
		// counts what its files say.
		cn := c.nodes["c"]
		for _, m := range cn.consume(ctx, router.ConsumeOptions{Max: 2, Pinned: true, Partition: 4}) {
			require.NoError(t, cn.ack(m))
		}
		require.NoError(t, cn.node.Close())
		cn.start()
		again, err := c.nodes["g"].node.QueueStatus(ctx, "orders")
		require.NoError(t, err)
		require.Len(t, again, 5)
		assert.False(t, again[4].Loaded)
		assert.Equal(t, int64(1), again[4].Frontier)
		assert.Equal(t, int64(2), again[4].Backlog)

		// A partition whose log b cannot resolve: b's error crosses the wire, uncounted.
		c.mu.Lock()
		c.owned["b"] = []int32{2, 3, 9}
		c.mu.Unlock()
		again, err = c.nodes["g"].node.QueueStatus(ctx, "orders")
		require.NoError(t, err)
		require.Len(t, again, 6)
		assert.Equal(t, int32(9), again[5].Partition)
		assert.ErrorIs(t, again[5].Err, router.ErrRemote)
		assert.ErrorContains(t, again[5].Err, "routertest: no log for orders/9")
		assert.Equal(t, 1, router.Summarize(again).Uncounted)

		_, err = c.nodes["g"].node.QueueStatus(ctx, "nope")
		require.ErrorIs(t, err, router.ErrUnknownTopic)
	})
}

// PurgeQueue purges every partition of a topic across the nodes that own them, durably: a
// power cut of every owner after it returns brings nothing back, and what is produced
// after it is delivered. Purge, beside it, purges only the node's own partitions.
func TestPurgeQueueAcrossNodesDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen frames
		c := newCluster(t, 0, map[string][]int32{"a": {0}, "b": {1, 2}, "g": nil}, nil)
		c.net.Observe = seen.observe
		defer c.close() // the nodes running at the end: those restarted after the power cut
		ctx := context.Background()
		for p := range int32(3) {
			c.produce(p, 3)
		}
		b := c.nodes["b"]
		held := b.consume(ctx, router.ConsumeOptions{Max: 1, Pinned: true, Partition: 1})
		require.Len(t, held, 1)

		moved, err := c.nodes["g"].node.Purge(ctx, "orders")
		require.NoError(t, err)
		require.Zero(t, moved, "Purge: the gateway's own partitions, none")

		moved, err = c.nodes["g"].node.PurgeQueue(ctx, "orders")
		require.NoError(t, err)
		require.Equal(t, int64(9), moved)
		assert.Equal(t, 2, seen.of(opPurgeFrame), "one frame per owner")
		require.ErrorIs(t, b.ack(held[0]), router.ErrAlreadySettled)

		for _, id := range []string{"a", "b"} {
			m := c.nodes[id]
			cut := m.fs.PowerCut(crashfs.PowerCut{})
			m.node.Close() // its writes fail: the file system crashed
			m.fs = cut
			m.start()
		}
		status, err := c.nodes["g"].node.QueueStatus(ctx, "orders")
		require.NoError(t, err)
		assert.Equal(t, []depth{{0, "a", 0, 0}, {1, "b", 0, 0}, {2, "b", 0, 0}}, depths(status), "the purge was durable at every owner when it returned")
		assert.Empty(t, b.consume(ctx, router.ConsumeOptions{Max: 10}))
		c.produce(1, 1)
		assert.Equal(t, []int64{3}, offsetsOf(b.consume(ctx, router.ConsumeOptions{Max: 10})), "what came after the purge is delivered")
	})
}

// An owner on a release before node wire version 12 refuses Status and Purge: its
// partitions are reported uncounted (ErrUnsupportedOp) and not purged (a *PurgeError names
// them), and the rest of the queue is counted and purged. A node pinned below version 12
// asks nothing of the owners.
func TestQueueWideWithAnOlderOwner(t *testing.T) {
	for _, tc := range []struct {
		name, older string
		frames      int // Status frames sent, and Purge frames
	}{
		{"older owner", "b", 1},
		{"requester pinned below 12", "a", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var seen frames
				c := newCluster(t, 0, map[string][]int32{"a": {0}, "b": {1}}, func(id string, cfg *router.Config) {
					if id == tc.older {
						cfg.WireVersion = 11
					}
				})
				c.net.Observe = seen.observe
				defer c.close()
				ctx := context.Background()
				c.produce(0, 2)
				c.produce(1, 2)
				a := c.nodes["a"].node

				status, err := a.QueueStatus(ctx, "orders")
				require.NoError(t, err)
				require.Len(t, status, 2)
				assert.Equal(t, int64(2), status[0].Backlog)
				assert.ErrorIs(t, status[1].Err, router.ErrUnsupportedOp)
				assert.Equal(t, int64(-1), status[1].HighWatermark, "not counted")
				assert.Equal(t, 1, router.Summarize(status).Uncounted)
				assert.Equal(t, tc.frames, seen.of(opStatusFrame))

				moved, err := a.PurgeQueue(ctx, "orders")
				assert.Equal(t, int64(2), moved, "a's partition is purged all the same")
				var purge *router.PurgeError
				require.ErrorAs(t, err, &purge)
				assert.Equal(t, []int32{1}, keys(purge.Failed))
				assert.ErrorIs(t, err, router.ErrUnsupportedOp)
				assert.Equal(t, tc.frames, seen.of(opPurgeFrame))
				assert.Len(t, c.nodes["b"].consume(ctx, router.ConsumeOptions{Max: 10}), 2, "b's records were not purged")
			})
		})
	}
}

// An ordered partition's spilled keys and records cross the wire from version 15: a
// gateway's QueueStatus reports them as the owner's own PartitionStatus does. An owner before
// 15 refuses the Status's flags byte as malformed, is asked again at once without it (its
// spilled counts are zero, the rest counted), and is not asked for them again for a while.
func TestQueueStatusCarriesSpilledKeys(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprintf("older owner %v", older), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var seen frames
				c := newCluster(t, 0, map[string][]int32{"a": {0}, "g": nil}, func(id string, cfg *router.Config) {
					cfg.Topic = func(string) router.TopicConfig {
						return router.TopicConfig{VisibilityTimeout: time.Hour, Ordered: true, MaxDeferredPerKey: 2}
					}
					if older && id == "a" {
						cfg.WireVersion = 14
					}
				})
				c.net.Observe = seen.observe
				defer c.close()
				ctx := context.Background()
				a := c.nodes["a"]
				log := c.logs.Log("orders", 0)
				for i := range 40 { // a held key with every fourth record, beside others
					key := fmt.Sprintf("k%d", i)
					if i%4 == 0 {
						key = "held"
					}
					off := log.Append([]byte(key), []byte("v"), time.Now())
					a.node.Appended("orders", 0, off+1)
				}
				require.Len(t, a.consume(ctx, router.ConsumeOptions{Max: 1}), 1, "the held key's first record")
				for {
					got := a.consume(ctx, router.ConsumeOptions{Max: 16})
					if len(got) == 0 {
						break
					}
					for _, m := range got {
						require.NoError(t, a.ack(m))
					}
				}
				own, err := a.node.PartitionStatus("orders", 0)
				require.NoError(t, err)
				require.Equal(t, 1, own.Keys.SpilledKeys)
				require.Equal(t, 7, own.Keys.Spilled, "nine deferred, two kept in memory")

				status, err := c.nodes["g"].node.QueueStatus(ctx, "orders")
				require.NoError(t, err)
				require.Len(t, status, 1)
				require.NoError(t, status[0].Err)
				want := own.Keys
				frames := 1
				if older {
					want.SpilledKeys, want.Spilled = 0, 0
					frames = 2 // refused, then asked again without the flags byte
				}
				got := status[0].Keys
				// An age on the wire: blocked since the same instant, at least a nanosecond ago.
				assert.WithinDuration(t, want.OldestBlockedSince, got.OldestBlockedSince, time.Nanosecond)
				got.OldestBlockedSince = want.OldestBlockedSince
				assert.Equal(t, want, got)
				assert.Equal(t, frames, seen.of(opStatusFrame))
				_, err = c.nodes["g"].node.QueueStatus(ctx, "orders")
				require.NoError(t, err)
				assert.Equal(t, frames+1, seen.of(opStatusFrame), "one frame: the older owner's refusal remembered")
			})
		})
	}
}

// An owner that does not answer costs QueueStatus and PurgeQueue their budget, or ctx's
// deadline when it is earlier, and no more: its partitions are uncounted (ErrTransport) or
// not known to be purged; one the host says is down is not asked at all (ErrUnavailable).
func TestQueueWideWithAnUnreachableOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen frames
		drop := &dropFrames{from: "a", to: "b", op: opPurgeFrame, what: routertest.DropReply}
		c := newCluster(t, 0, map[string][]int32{"a": {0}, "b": {1}}, nil)
		c.net.Observe, c.net.Fault = seen.observe, drop.fault
		defer c.close()
		a := c.nodes["a"].node
		c.produce(0, 1)
		c.produce(1, 3)

		c.net.Partition([]string{"a"}, []string{"b"})
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		status, err := a.QueueStatus(ctx, "orders")
		cancel()
		require.NoError(t, err)
		assert.Equal(t, time.Second, time.Since(start), "ctx's deadline bounds the call")
		assert.ErrorIs(t, status[1].Err, router.ErrTransport)
		assert.ErrorIs(t, status[1].Err, context.DeadlineExceeded)
		assert.Equal(t, int64(1), status[0].Backlog)

		start = time.Now()
		status, err = a.QueueStatus(context.Background(), "orders")
		require.NoError(t, err)
		assert.Equal(t, router.StatusBudget, time.Since(start), "the budget bounds the call")
		assert.ErrorIs(t, status[1].Err, router.ErrTransport)
		c.net.Heal()

		// The purge reaches b, and its reply is lost: b's partition is not known to be
		// purged, and is not reported purged.
		drop.set(true)
		start = time.Now()
		moved, err := a.PurgeQueue(context.Background(), "orders")
		assert.Equal(t, router.PurgeBudget, time.Since(start))
		assert.Equal(t, int64(1), moved)
		var purge *router.PurgeError
		require.ErrorAs(t, err, &purge)
		assert.Equal(t, []int32{1}, keys(purge.Failed))
		assert.ErrorIs(t, err, router.ErrTransport)
		drop.set(false)

		c.down.Store("b", true)
		before := seen.of(opStatusFrame)
		status, err = a.QueueStatus(context.Background(), "orders")
		require.NoError(t, err)
		assert.ErrorIs(t, status[1].Err, router.ErrUnavailable)
		_, err = a.PurgeQueue(context.Background(), "orders")
		assert.ErrorIs(t, err, router.ErrUnavailable)
		assert.Equal(t, before, seen.of(opStatusFrame), "a node down is not asked")
	})
}

// keys returns a map's keys, ascending.
func keys(m map[int32]error) []int32 { return slices.Sorted(maps.Keys(m)) }

// An owner of more partitions than a frame carries is asked with a frame per
// wire.MaxPartitions of them, and every partition is counted.
func TestQueueStatusOfManyPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const count = 1030 // a frame carries 1024
		parts := make([]int32, count)
		for i := range parts {
			parts[i] = int32(i)
		}
		var seen frames
		c := newCluster(t, 0, map[string][]int32{"b": parts, "g": nil}, nil)
		c.net.Observe = seen.observe
		defer c.close()
		c.produce(count-1, 2)
		status, err := c.nodes["g"].node.QueueStatus(context.Background(), "orders")
		require.NoError(t, err)
		require.Len(t, status, count)
		assert.Equal(t, 2, seen.of(opStatusFrame))
		sum := router.Summarize(status)
		assert.Equal(t, int64(2), sum.Backlog)
		assert.Zero(t, sum.Uncounted)
		assert.Equal(t, int32(count-1), status[count-1].Partition)
	})
}
