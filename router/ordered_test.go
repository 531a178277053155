package router_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// Ordered topics through the node: records of one key in order, one holder per key, keys in
// parallel, through batches, long-polls, nacks and a restart.

// orderedHarness is a one-partition node whose topic is ordered, with records keyed as keys
// says.
func orderedHarness(t *testing.T, keys ...string) *harness {
	t.Helper()
	h := newHarness(t, 0)
	h.cfg.Topic = func(string) router.TopicConfig {
		return router.TopicConfig{VisibilityTimeout: vt, Ordered: true}
	}
	h.restart(nil)
	h.produceKeyed(keys...)
	return h
}

// produceKeyed appends one record to partition 0 per key ("" for no key) and tells the node.
func (h *harness) produceKeyed(keys ...string) {
	log := h.logs.Log("orders", 0)
	for _, k := range keys {
		var key []byte
		if k != "" {
			key = []byte(k)
		}
		off := log.Append(key, []byte("v"), time.Now())
		h.node.Appended("orders", 0, off+1)
	}
}

func TestOrderedTopicBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := orderedHarness(t, "a", "a", "b", "a", "b", "")
		defer h.close()
		first := h.consume(router.ConsumeOptions{Max: 2})
		require.Equal(t, []int64{0, 1}, offsetsOf(first), "one batch takes consecutive records of a key")
		second := h.consume(router.ConsumeOptions{Max: 10})
		require.Equal(t, []int64{2, 4, 5}, offsetsOf(second), "a's 3 waits behind the first consumer; the other keys go")
		require.Empty(t, h.consume(router.ConsumeOptions{Max: 10}))
		require.Equal(t, uint64(1), h.node.Stats().Shards.Deferred)
		ps, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		require.Equal(t, router.KeyStats{HeldKeys: 2, BlockedKeys: 1, Deferred: 1, ParkedKeys: 1, Parked: 1, OldestBlockedSince: time.Now()}, ps.Keys)

		// A consumer parked meanwhile gets 3 as the first consumer acks its last record of a.
		got := h.async(router.ConsumeOptions{Wait: time.Second})
		synctest.Wait()
		require.NoError(t, h.ack(first[0]))
		synctest.Wait()
		require.NoError(t, h.ack(first[1]))
		msgs := <-got
		require.Equal(t, []int64{3}, offsetsOf(msgs))
		require.Equal(t, uint32(1), msgs[0].Attempt)
	})
}

func TestOrderedTopicNackKeepsTheOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := orderedHarness(t, "a", "a", "b")
		defer h.close()
		m := h.one()
		require.Equal(t, int64(0), m.Offset)
		require.NoError(t, h.node.Nack(context.Background(), "orders", m.Receipt, time.Second))
		require.Equal(t, []int64{2}, offsetsOf(h.consume(router.ConsumeOptions{Max: 10})), "a is blocked by its nacked record")
		time.Sleep(time.Second) // the fake clock: the nack's delay ends
		again := h.consume(router.ConsumeOptions{Max: 10})
		require.Equal(t, []int64{0}, offsetsOf(again), "the nacked record first, alone of its key")
		require.Equal(t, uint32(2), again[0].Attempt)
		require.NoError(t, h.ack(again[0]))
		require.Equal(t, []int64{1}, offsetsOf(h.consume(router.ConsumeOptions{Max: 10})))
	})
}

// After a restart the first record of a key delivered is its lowest unacked one, whatever
// was deferred behind it before.
func TestOrderedTopicAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := orderedHarness(t, "a", "b", "a", "b", "a")
		first := h.consume(router.ConsumeOptions{Max: 2})
		require.Equal(t, []int64{0, 1}, offsetsOf(first))
		require.NoError(t, h.ack(first[1]))
		// b is free again: its 3 goes; a's 2 and 4 wait behind 0.
		require.Equal(t, []int64{3}, offsetsOf(h.consume(router.ConsumeOptions{Max: 10})))
		h.restart(nil)
		defer h.close()
		// The leases died with the process: a from its lowest unacked record, in order.
		require.Equal(t, []int64{0, 2, 3, 4}, offsetsOf(h.consume(router.ConsumeOptions{Max: 10})))
	})
}

// Consumers in parallel over many keys: no two ever hold records of one key at once, and
// each key's records are delivered in offset order, exactly once when every one is acked.
func TestOrderedTopicConsumersInParallel(t *testing.T) {
	const records, keyCount, consumers = 2000, 16, 8
	keys := make([]string, records)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", (i*7+i/5)%keyCount)
	}
	synctest.Test(t, func(t *testing.T) { consumeInParallel(t, keys, consumers) })
}

func consumeInParallel(t *testing.T, keys []string, consumers int) {
	h := orderedHarness(t, keys...)
	defer h.close()
	checkKeyOrder(t, len(keys), consumers, func(int) *router.Node { return h.node })
}

// checkKeyOrder runs consumers, each on the node nodeOf gives it, until records are acked,
// and checks that no two held records of one key at once and that each key's records came
// in offset order, each once.
func checkKeyOrder(t *testing.T, records, consumers int, nodeOf func(consumer int) *router.Node) {
	var mu sync.Mutex
	holder := map[string]int{}        // key → the consumer holding it
	delivered := map[string][]int64{} // key → offsets, in delivery order
	total := 0
	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				node := nodeOf(c)
				msgs, err := node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 1 + c%4, Wait: 50 * time.Millisecond})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if len(msgs) == 0 && total == records {
					mu.Unlock()
					return
				}
				for _, m := range msgs {
					k := string(m.Key)
					if other, held := holder[k]; held && other != c {
						mu.Unlock()
						errs <- fmt.Errorf("key %s delivered to consumer %d while consumer %d holds it", k, c, other)
						return
					}
					holder[k] = c
					delivered[k] = append(delivered[k], int64(m.Partition)<<40|m.Offset)
				}
				mu.Unlock()
				for i, m := range msgs {
					k := string(m.Key)
					mu.Lock()
					last := true
					for _, later := range msgs[i+1:] {
						last = last && string(later.Key) != k
					}
					if last {
						delete(holder, k) // released before the ack that frees the key
					}
					total++
					mu.Unlock()
					if err := node.Ack(context.Background(), "orders", m.Receipt); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := 0
	for k, offs := range delivered {
		for i := 1; i < len(offs); i++ {
			require.Less(t, offs[i-1], offs[i], "key %s delivered out of order: %v", k, offs)
		}
		n += len(offs)
	}
	require.Equal(t, records, n, "every record delivered once")
}

// orderedTrio is newTrio with the topic ordered, and records of keys on a's partition 0.
func orderedTrio(t *testing.T, keys ...string) *trio {
	t.Helper()
	tr := newTrioOf(t, time.Millisecond, router.TopicConfig{VisibilityTimeout: vt, Ordered: true})
	log := tr.logs.Log("orders", 0)
	for _, k := range keys {
		off := log.Append([]byte(k), []byte("v"), time.Now())
		tr.a.node.Appended("orders", 0, off+1)
	}
	return tr
}

// A move keeps a key with the consumer that holds it: the new owner learns the keys of the
// leases it adopts and hands out no later record of theirs until they end.
func TestOrderedTopicMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := orderedTrio(t, "a", "a", "b")
		defer tr.close()
		ctx := context.Background()
		held := tr.a.consume(router.ConsumeOptions{Max: 1, Pinned: true, Partition: 0})
		require.Equal(t, []int64{0}, offsetsOf(held))
		tr.move(t, 0, tr.a, tr.b, "b", map[int32]string{0: "a", 1: "b"})
		require.Equal(t, []int64{2}, offsetsOf(tr.b.consume(router.ConsumeOptions{Max: 10, Pinned: true, Partition: 0})),
			"a's 1 waits behind the lease that moved")
		require.NoError(t, tr.c.node.Ack(ctx, "orders", held[0].Receipt), "through the gateway")
		require.Equal(t, []int64{1}, offsetsOf(tr.b.consume(router.ConsumeOptions{Max: 10, Pinned: true, Partition: 0})))
	})
}

// A move keeps a nacked record's place: the new owner queues a delayed record under its key,
// so the key's later records wait for it there too.
func TestOrderedTopicMoveKeepsANackedRecordFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := orderedTrio(t, "a", "a", "b")
		defer tr.close()
		ctx := context.Background()
		pinned := router.ConsumeOptions{Max: 10, Pinned: true, Partition: 0}
		first := tr.a.consume(router.ConsumeOptions{Max: 1, Pinned: true, Partition: 0})
		require.Equal(t, []int64{0}, offsetsOf(first))
		require.NoError(t, tr.a.node.Nack(ctx, "orders", first[0].Receipt, time.Minute))
		require.Equal(t, []int64{2}, offsetsOf(tr.a.consume(pinned)), "a's 1 waits behind the nacked 0")
		tr.move(t, 0, tr.a, tr.b, "b", map[int32]string{0: "a", 1: "b"})
		require.Empty(t, tr.b.consume(pinned), "a's 1 still waits behind 0, delayed")
		time.Sleep(time.Minute)
		// 0 first; 1, deferred behind it here, once 0 is acked; 2 is back, its lease lapsed.
		again := tr.b.consume(pinned)
		require.Equal(t, []int64{0, 2}, offsetsOf(again))
		require.NoError(t, tr.b.node.Ack(ctx, "orders", again[0].Receipt))
		require.Equal(t, []int64{1}, offsetsOf(tr.b.consume(pinned)))
	})
}

// Consumers on a gateway (reading ahead for them), and on the gateway and the owners, over
// keys spread on two partitions of two owners: the same promises across nodes.
func TestOrderedTopicAcrossNodes(t *testing.T) {
	for _, on := range []string{"c c c", "c a b c"} {
		t.Run("consumers on "+on, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := newTrioOf(t, time.Millisecond, router.TopicConfig{VisibilityTimeout: vt, Ordered: true})
				defer tr.close()
				const records = 1200
				for i := range records {
					p := int32(i % 2)
					key := fmt.Sprintf("k%d-%d", p, (i/2*5+i/7)%9)
					off := tr.logs.Log("orders", p).Append([]byte(key), []byte("v"), time.Now())
					owner := map[int32]*harness{0: tr.a, 1: tr.b}[p]
					owner.node.Appended("orders", p, off+1)
				}
				byID := map[string]*router.Node{"a": tr.a.node, "b": tr.b.node, "c": tr.c.node}
				var nodes []*router.Node
				for _, id := range strings.Fields(on) {
					nodes = append(nodes, byID[id])
				}
				checkKeyOrder(t, records, len(nodes), func(c int) *router.Node { return nodes[c] })
				if on == "c c c" {
					// The owners' own consumers take what they find a round trip sooner.
					require.NotZero(t, tr.c.node.Stats().Ahead.HandedOver, "the gateway read ahead")
				}
			})
		})
	}
}

// TopicConfig.QuarantineKeys through the node: a rejected record takes its key's records with
// it, in order, as OnQuarantine tells; a restart learns the quarantined key before anything
// goes; once every record of the key is discarded, its new records flow again.
func TestOrderedTopicQuarantinesTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var told []int64
		h := newHarness(t, 0)
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: vt, Ordered: true, QuarantineKeys: true, MaxDeliveries: 3}
		}
		h.cfg.OnQuarantine = func(_ string, _ int32, off int64, _ uint32) {
			mu.Lock()
			told = append(told, off)
			mu.Unlock()
		}
		quarantined := func() []int64 {
			mu.Lock()
			defer mu.Unlock()
			return append([]int64(nil), told...)
		}
		h.restart(nil)
		defer func() { h.close() }()
		h.produceKeyed("a", "b", "a", "b", "a", "c")
		head := h.consume(router.ConsumeOptions{Max: 1})
		require.Equal(t, []int64{0}, offsetsOf(head))
		others := h.consume(router.ConsumeOptions{Max: 10})
		require.Equal(t, []int64{1, 3, 5}, offsetsOf(others), "a's 2 and 4 wait behind 0")
		require.NoError(t, h.node.Reject(context.Background(), "orders", head[0].Receipt))
		require.Equal(t, []int64{0, 2, 4}, quarantined(), "the key's records follow its head, in order")
		for _, m := range others {
			require.NoError(t, h.ack(m))
		}
		h.produceKeyed("a") // 6
		require.Empty(t, h.consume(router.ConsumeOptions{Max: 10}))
		require.Equal(t, []int64{0, 2, 4, 6}, quarantined())

		h.restart(nil)
		h.produceKeyed("a", "b") // 7, 8
		require.Equal(t, []int64{8}, offsetsOf(h.consume(router.ConsumeOptions{Max: 10})), "learnt again after the restart")
		require.Equal(t, []int64{0, 2, 4, 6, 7}, quarantined())
		ps, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		require.Equal(t, 1, ps.Keys.QuarantinedKeys)

		for _, off := range []int64{0, 2, 4, 6, 7} {
			ok, err := h.node.Discard("orders", 0, off)
			require.NoError(t, err)
			require.True(t, ok)
		}
		h.produceKeyed("a") // 9
		require.Equal(t, []int64{9}, offsetsOf(h.consume(router.ConsumeOptions{Max: 10})), "the key flows again")
	})
}

// A key held for long with a steady share of the records keeps TopicConfig.MaxDeferredPerKey
// of them in memory and spills the rest: the other keys flow past MaxDeferred, and once the
// key frees, its records come in order, read back as they run low, through a restart too.
func TestOrderedTopicSpillsAHeldKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const perKey, records = 4, 400
		h := newHarness(t, 0)
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: time.Hour, Ordered: true, MaxDeferred: 20, MaxDeferredPerKey: perKey}
		}
		h.restart(nil)
		defer h.close()
		keys := make([]string, records)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i%50)
			if i%4 == 0 {
				keys[i] = "hot" // 100 records: five times MaxDeferred
			}
		}
		h.produceKeyed(keys...)
		held := h.consume(router.ConsumeOptions{Max: 1})
		require.Equal(t, []int64{0}, offsetsOf(held))
		others := 0
		for {
			got := h.consume(router.ConsumeOptions{Max: 16})
			if len(got) == 0 {
				break
			}
			for _, m := range got {
				require.NotEqual(t, "hot", string(m.Key), "offset %d: the held key's records wait", m.Offset)
				require.NoError(t, h.ack(m))
				others++
			}
		}
		require.Equal(t, records-100, others, "the other keys flowed past MaxDeferred")
		st := h.node.Stats().Shards
		require.Zero(t, st.DeferredStalls)
		require.Equal(t, uint64(99-perKey), st.Spilled)
		ps, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		require.Equal(t, 1, ps.Keys.SpilledKeys)
		require.Equal(t, perKey, ps.Keys.Deferred)

		// The process dies holding the key: its records come from the lowest, in order, each
		// once, read back past what a restore keeps in memory.
		h.restart(nil)
		var hot []int64
		for range records {
			got := h.consume(router.ConsumeOptions{Max: 3})
			if len(got) == 0 {
				break
			}
			for _, m := range got {
				require.Equal(t, "hot", string(m.Key), "offset %d was acked before the restart", m.Offset)
				hot = append(hot, m.Offset)
				require.NoError(t, h.ack(m))
			}
		}
		require.Len(t, hot, 100)
		for i, off := range hot {
			require.Equal(t, int64(4*i), off, "the held key's records in order")
		}
		st = h.node.Stats().Shards
		require.NotZero(t, st.Refilled)
		require.Equal(t, st.Spilled, st.Refilled, "every record spilled after the restart was read back")
		ps, err = h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		require.Equal(t, int64(records-1), ps.Frontier)
	})
}
