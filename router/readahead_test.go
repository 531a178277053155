package router_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// The tests of reading ahead (docs/protocol.md, "Reading ahead"): a gateway reserves records
// at their owners before its consumers ask, and hands them over from memory.

// aheadHold is the hold of the cluster's topic: min(50 ms, vt/10).
const aheadHold = router.MaxReadAheadHold

// topicWith returns a tune function that gives every node's topic cfg (its visibility timeout
// the cluster's unless cfg sets one).
func topicWith(cfg router.TopicConfig) func(string, *router.Config) {
	if cfg.VisibilityTimeout == 0 {
		cfg.VisibilityTimeout = vt
	}
	return func(_ string, c *router.Config) {
		c.Topic = func(string) router.TopicConfig { return cfg }
	}
}

// Issue 35, point 1 and the latency goal: a busy consumer's next record comes from the
// gateway's memory with no round trip, and one refill carries many records.
func TestReadAheadServesFromMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		c.produce(0, 200)

		start := time.Now()
		first := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, first, 1)
		assert.Equal(t, rtt, time.Since(start), "the first record costs the refill's round trip")
		require.NoError(t, g.ack(first[0]))
		got := 1
		for got < 100 {
			start := time.Now()
			msgs := g.consume(ctx, router.ConsumeOptions{})
			require.Len(t, msgs, 1)
			if time.Since(start) == 0 {
				got++
			} else {
				got++ // a refill the consume waited for (the buffer ran dry): one round trip
				assert.Equal(t, rtt, time.Since(start))
			}
			require.NoError(t, g.ack(msgs[0]))
		}
		st := g.node.Stats()
		assert.Less(t, st.Ahead.Refills, uint64(20), "records came many to a refill: %+v", st.Ahead)
		assert.GreaterOrEqual(t, st.Ahead.HandedOver, uint64(99))
		assert.Equal(t, uint64(1), st.Remote.Probes, "only the first consume asked an owner itself")
	})
}

// Reading ahead at any batch size: a consumer taking batches as large as a probe of the
// owner carries gets its next batch from memory too, and a busy gateway's refill reserves
// more than such a batch in one round trip (aheadBatch, not remoteBatch), so records cross
// several batches to a consume RPC.
func TestReadAheadServesBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, topicWith(router.TopicConfig{MaxInFlight: 1 << 16}))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		const batches = 60
		c.produce(0, batches*router.RemoteBatch)

		fromMemory := 0
		for range batches {
			start := time.Now()
			msgs := g.consume(ctx, router.ConsumeOptions{Max: router.RemoteBatch})
			require.Len(t, msgs, router.RemoteBatch)
			if time.Since(start) == 0 {
				fromMemory++
			}
			// The consumer's work, as long as the refill's round trip; then its ack's.
			time.Sleep(rtt)
			for _, err := range g.node.AckBatch(ctx, "orders", receipts(msgs)) {
				require.NoError(t, err)
			}
		}
		st := g.node.Stats()
		assert.Equal(t, uint64(1), st.Remote.Probes, "only the first consume asked an owner itself")
		assert.Equal(t, batches-1, fromMemory, "every batch but the first came from memory")
		assert.LessOrEqual(t, st.Ahead.Refills, uint64(batches*router.RemoteBatch/(2*router.RemoteBatch)),
			"a refill reserves more than a probe's batch: %+v", st.Ahead)
		assert.Equal(t, uint64(batches*router.RemoteBatch), st.Ahead.HandedOver, "%+v", st.Ahead)
	})
}

// The latency goal with many consumers: 64 consumers of batches of 100 on one gateway take
// some 2,100 records a round trip, more than a refill of 1,024 brought; what was held ran dry
// between refills, and most consumes asked an owner themselves. Each refill now asks an owner
// for up to 4,096 records and leaves once 2,048 are missing, so nearly every batch comes from
// memory.
func TestReadAheadServesManyConsumersFromMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parts := []int32{0, 1, 2, 3}
		c := newCluster(t, rtt, map[string][]int32{"b": parts, "g": nil}, topicWith(router.TopicConfig{MaxInFlight: 1 << 16}))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		// Rounds long enough for the gateway to measure its consumers' rate (over half a
		// hold at least); the work of a batch about twice the round trip, a little longer
		// for each consumer, so that they do not all ask at the same instant.
		// The first rounds are the gateway's to learn the rate: counted are the others.
		const consumers, rounds, learning = 64, 30, 10
		for _, p := range parts {
			c.produce(p, consumers*rounds*router.RemoteBatch/len(parts))
		}

		var fromMemory, consumes atomic.Int64
		var wg sync.WaitGroup
		for i := range consumers {
			work := 2*rtt + time.Duration(i)*rtt/consumers
			wg.Go(func() {
				for round := range rounds {
					start := time.Now()
					msgs := g.consume(ctx, router.ConsumeOptions{Max: router.RemoteBatch})
					if len(msgs) == 0 {
						t.Error("a consume found nothing, with records left")
						return
					}
					if round >= learning {
						consumes.Add(1)
						if time.Since(start) == 0 {
							fromMemory.Add(1)
						}
					}
					time.Sleep(work)
					for _, err := range g.node.AckBatch(ctx, "orders", receipts(msgs)) {
						assert.NoError(t, err)
					}
				}
			})
		}
		wg.Wait()
		st := g.node.Stats()
		assert.GreaterOrEqual(t, 20*fromMemory.Load(), 19*consumes.Load(),
			"%d of %d consumes came from memory; %d probes, %+v", fromMemory.Load(), consumes.Load(), st.Remote.Probes, st.Ahead)
	})
}

// A refill's records are decoded into the slice of an earlier refill whose records were all
// taken (deliveriesPool), and made messages as consumes take them: no consumer may see a
// message it holds change under it. Four
// consumers each keep three batches unacked while they take more, check every message they
// hold against its record at each batch, and ack the oldest; every record comes once, and
// every ack lands.
func TestReadAheadReusedArraysChangeNothingHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parts := []int32{0, 1}
		c := newCluster(t, rtt, map[string][]int32{"b": parts, "g": nil}, topicWith(router.TopicConfig{MaxInFlight: 1 << 16}))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		const perPartition = 20_000
		valueOf := func(p int32, off int64) string { return fmt.Sprintf("%d/%d", p, off) }
		for _, p := range parts {
			log := c.logs.Log("orders", p)
			for off := range int64(perPartition) {
				log.Append(nil, []byte(valueOf(p, off)), time.Now())
			}
			c.owner(p).node.Appended("orders", p, perPartition)
		}

		var mu sync.Mutex
		seen := map[string]bool{}
		check := func(m router.Message) {
			if want := valueOf(m.Partition, m.Offset); string(m.Value) != want ||
				m.Receipt.Partition != m.Partition || m.Receipt.Offset != m.Offset {
				t.Errorf("a message held changed: %q at %d/%d, receipt %d/%d", m.Value, m.Partition, m.Offset, m.Receipt.Partition, m.Receipt.Offset)
			}
		}
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				var holding [][]router.Message
				for {
					msgs := g.consume(ctx, router.ConsumeOptions{Max: 50 + 25*i})
					if len(msgs) == 0 {
						break
					}
					mu.Lock()
					for _, m := range msgs {
						key := valueOf(m.Partition, m.Offset)
						if seen[key] {
							t.Errorf("%s delivered twice", key)
						}
						seen[key] = true
					}
					mu.Unlock()
					holding = append(holding, msgs)
					for _, batch := range holding {
						for _, m := range batch {
							check(m)
						}
					}
					if len(holding) > 3 {
						for _, err := range g.node.AckBatch(ctx, "orders", receipts(holding[0])) {
							assert.NoError(t, err)
						}
						holding = holding[1:]
					}
					time.Sleep(rtt / 4)
				}
				for _, batch := range holding {
					for _, err := range g.node.AckBatch(ctx, "orders", receipts(batch)) {
						assert.NoError(t, err)
					}
				}
			})
		}
		wg.Wait()
		assert.Len(t, seen, len(parts)*perPartition)
		st := g.node.Stats()
		assert.Greater(t, st.Ahead.Refills, uint64(10), "refills enough to reuse arrays: %+v", st.Ahead)
	})
}

// Issue 35, point 2: a reservation is not a delivery. Records read ahead and never handed
// over go back unused, their attempts uncounted: with MaxDeliveries 1 none is quarantined,
// and each is delivered later as its first attempt.
func TestUnusedReservationIsNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, topicWith(router.TopicConfig{MaxDeliveries: 1}))
		defer c.close()
		ctx := context.Background()
		b, g := c.nodes["b"], c.nodes["g"]
		c.produce(0, 20)

		msgs := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		assert.Equal(t, uint32(1), msgs[0].Attempt)
		require.NoError(t, g.ack(msgs[0]))
		time.Sleep(aheadHold + 2*rtt) // the rest outstay the hold and go back
		synctest.Wait()
		st := g.node.Stats().Ahead
		require.Positive(t, st.Unused, "%+v", st)
		assert.Equal(t, st.Reserved, st.HandedOver+st.Unused, "every reservation handed over or given back")

		owner := b.node.Stats().Shards
		assert.Zero(t, owner.Quarantined, "no unused reservation counted as an attempt")
		rest := b.consume(ctx, router.ConsumeOptions{Max: 100})
		require.Len(t, rest, 19)
		for _, m := range rest {
			assert.Equal(t, uint32(1), m.Attempt, "offset %d: its first delivery", m.Offset)
		}
	})
}

// Issue 35, point 2: a record handed over counts, though its consumer never settles it: the
// confirm reaches the owner, so the lapse of its lease quarantines it under MaxDeliveries 1.
func TestHandedOverRecordCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, topicWith(router.TopicConfig{MaxDeliveries: 1, ReadAhead: 4}))
		defer c.close()
		ctx := context.Background()
		b, g := c.nodes["b"], c.nodes["g"]
		c.produce(0, 1)

		msgs := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		time.Sleep(vt + time.Second) // the consumer died: its lease lapses at the owner
		synctest.Wait()
		owner := b.node.Stats().Shards
		assert.Equal(t, uint64(1), owner.Quarantined, "the delivery counted: %+v", owner)
		assert.Equal(t, uint64(1), owner.Delivered)
	})
}

// Issue 35, point 3: a bounded hold. No record waits on the gateway past the hold plus a round
// trip: the owner has every unused reservation back by then.
func TestReadAheadHoldIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		ctx := context.Background()
		b, g := c.nodes["b"], c.nodes["g"]
		c.produce(0, 50)

		require.Len(t, g.consume(ctx, router.ConsumeOptions{}), 1) // the refill arrived with it
		assert.Positive(t, g.node.Stats().Ahead.HeldNow, "the rest held")
		time.Sleep(aheadHold + rtt) // the hold, and the give-back's round trip
		synctest.Wait()
		status, err := b.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, 1, status.Leased, "only the record handed over is leased")
		assert.Zero(t, g.node.Stats().Ahead.HeldNow)
		held := g.node.Stats().Ahead.Wait
		assert.LessOrEqual(t, held.Sum, time.Duration(held.Count())*aheadHold)
	})
}

// Issue 35, point 4: an honest lease. The lease handed over is the owner's, counted from the
// reservation's departure: at most the hold and the round trip shorter than the visibility
// timeout.
func TestReadAheadLeaseIsHonest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		c.produce(0, 10)

		require.Len(t, g.consume(ctx, router.ConsumeOptions{}), 1)
		time.Sleep(aheadHold - rtt - time.Millisecond) // within the hold
		msgs := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		left := time.Until(msgs[0].Expiry)
		assert.LessOrEqual(t, left, vt-aheadHold+time.Millisecond)
		assert.GreaterOrEqual(t, left, vt-aheadHold-rtt)
		assert.Equal(t, uint64(1), g.node.Stats().Remote.Probes, "the first consume's alone")
	})
}

// Issue 35, point 4: a reservation whose reply came back with less than half the visibility
// timeout left is given back, not handed over.
func TestReadAheadFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slow = 600 * time.Millisecond // a round trip beyond half the visibility timeout
		c := newCluster(t, slow, map[string][]int32{"b": {0}, "g": nil}, topicWith(router.TopicConfig{VisibilityTimeout: time.Second}))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		c.produce(0, 5)

		g.node.Consume(ctx, "orders", router.ConsumeOptions{Wait: 3 * time.Second}) //nolint:errcheck // what it gets is the probe's, if anything
		time.Sleep(2 * time.Second)
		synctest.Wait()
		st := g.node.Stats().Ahead
		assert.Equal(t, uint64(1), st.HandedOver, "the probe's own record alone: %+v", st)
		assert.Equal(t, uint64(4), st.Unused, "those it read ahead came with less than the floor left: %+v", st)
	})
}

// Issue 35, point 5: fair. A slow consumer on one gateway beside a fast one on another each
// get records at their own rate (within 20 %): neither gateway hoards the backlog.
func TestReadAheadFairToSlowAndFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0, 1}, "g1": nil, "g2": nil}, nil)
		defer c.close()
		c.produce(0, 5000)
		c.produce(1, 5000)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var counts [2]atomic.Int64
		for i, every := range []time.Duration{10 * time.Millisecond, time.Millisecond} {
			m := c.nodes[[]string{"g1", "g2"}[i]]
			wg.Go(func() {
				for ctx.Err() == nil {
					msgs, err := m.node.Consume(ctx, "orders", router.ConsumeOptions{Wait: time.Second})
					if err != nil {
						return
					}
					for _, msg := range msgs {
						counts[i].Add(1)
						_ = m.ack(msg)
					}
					time.Sleep(every)
				}
			})
		}
		time.Sleep(2 * time.Second)
		cancel()
		wg.Wait()
		slow, fast := counts[0].Load(), counts[1].Load()
		// Each consumer's own pace: a record every 10 ms and every 1 ms, each with its ack's
		// round trip, and no round trip for the consumes, served from the gateways' memory.
		assert.InEpsilon(t, 2*time.Second/(10*time.Millisecond+rtt), slow, 0.2, "slow: %d, fast: %d", slow, fast)
		assert.InEpsilon(t, 2*time.Second/(time.Millisecond+rtt), fast, 0.2, "slow: %d, fast: %d", slow, fast)
		for _, id := range []string{"g1", "g2"} {
			st := c.nodes[id].node.Stats().Ahead
			assert.Less(t, st.Unused, st.HandedOver/10, "%s gave back little: its reservations follow its rate: %+v", id, st)
		}
	})
}

// Issue 35, point 6: nothing stranded. Close gives every reservation back at once, unused.
func TestCloseGivesReservationsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		ctx := context.Background()
		b, g := c.nodes["b"], c.nodes["g"]
		c.produce(0, 50)
		m := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, m, 1)
		require.NoError(t, g.ack(m[0]))
		require.NoError(t, g.node.Close())
		status, err := b.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.Zero(t, status.Leased, "every reservation back before Close returned")
		st := g.node.Stats().Ahead
		assert.Equal(t, st.Reserved-1, st.Unused)
		assert.Zero(t, st.HeldNow)
		require.NoError(t, b.node.Close())
	})
}

// Issue 35, point 6: the context of the last consume waiting on the gateway ending gives back
// what it holds at once.
func TestConsumerLeavingGivesReservationsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		b, g := c.nodes["b"], c.nodes["g"]
		c.produce(0, 50)
		ctx, cancel := context.WithCancel(context.Background())
		got := g.async(ctx, router.ConsumeOptions{})
		cancel() // as the refill is on its way
		<-got
		time.Sleep(2 * rtt)
		synctest.Wait()
		status, err := b.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.Zero(t, status.Leased, "nothing held once the consumer left")
	})
}

// Issue 35, point 7: a topic's read-ahead of ReadAheadOff reserves nothing: each consume asks
// the owners itself.
func TestReadAheadOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, topicWith(router.TopicConfig{ReadAhead: router.ReadAheadOff}))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		c.produce(0, 10)
		for range 3 {
			msgs := g.consume(ctx, router.ConsumeOptions{})
			require.Len(t, msgs, 1)
			require.NoError(t, g.ack(msgs[0]))
		}
		st := g.node.Stats()
		assert.Zero(t, st.Ahead.Reserved)
		assert.Equal(t, uint64(3), st.Remote.Probes)
	})
}

// A reservation that spans partitions: the owner reserves what is left of the request on the
// next partition, down to a single record.
func TestReadAheadAcrossPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0, 1}, "g": nil}, topicWith(router.TopicConfig{ReadAhead: 1}))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		c.produce(0, 1)
		c.produce(1, 1)

		first := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, first, 1)
		start := time.Now()
		second := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, second, 1)
		assert.Zero(t, time.Since(start), "the other partition's record was read ahead with the first")
		assert.NotEqual(t, first[0].Partition, second[0].Partition)
		for _, m := range append(first, second...) {
			require.NoError(t, g.ack(m))
		}
	})
}

// A topic that reads one record ahead: each refill reserves a single record, which the owner
// serves without the machinery of a batch.
func TestReadAheadOneRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, topicWith(router.TopicConfig{ReadAhead: 1}))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		c.produce(0, 5)
		for i := range 5 {
			msgs := g.consume(ctx, router.ConsumeOptions{})
			require.Len(t, msgs, 1)
			assert.Equal(t, int64(i), msgs[0].Offset)
			require.NoError(t, g.ack(msgs[0]))
			time.Sleep(rtt) // the refill of one record comes back
		}
		st := g.node.Stats().Ahead
		assert.Positive(t, st.Refills, "%+v", st)
		assert.Equal(t, uint64(5), st.HandedOver)
		assert.Equal(t, uint64(1), g.node.Stats().Remote.Probes, "every consume but the first served from memory")
		assert.Zero(t, g.node.Stats().HostPanics, "no refill failed")
	})
}

// Issue 35, point 6: a gateway that dies holding reservations creates no second holder and
// counts no attempt: its reservations lapse at the owner after their visibility timeout,
// as a consumer's crash would strand them, and the records come back as the first attempt
// they still are (MaxDeliveries 1 quarantines none).
func TestDeadGatewayStrandsReservationsUncounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, topicWith(router.TopicConfig{MaxDeliveries: 1}))
		defer c.close()
		var dead atomic.Bool // nothing the gateway sends reaches anyone any more
		c.net.Fault = func(from, _ string, _ []byte) routertest.Fault {
			if from == "g" && dead.Load() {
				return routertest.DropRequest
			}
			return routertest.Deliver
		}
		b, g := c.nodes["b"], c.nodes["g"]
		c.produce(0, 20)
		msgs := g.consume(context.Background(), router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		require.NoError(t, g.ack(msgs[0]))
		held := g.node.Stats().Ahead.Reserved - g.node.Stats().Ahead.HandedOver
		require.Positive(t, held)
		dead.Store(true)
		status, err := b.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, int(held), status.Leased, "held for the dead gateway: nobody else holds them")
		time.Sleep(vt + time.Second)
		synctest.Wait()
		rest := b.consume(context.Background(), router.ConsumeOptions{Max: 100})
		require.Len(t, rest, 19, "every record the gateway held is back")
		for _, m := range rest {
			assert.Equal(t, uint32(1), m.Attempt, "offset %d: still its first delivery", m.Offset)
		}
		assert.Zero(t, b.node.Stats().Shards.Quarantined)
	})
}

// Issue 35, point 1: reading ahead never waits on an owner that hangs while another has
// records: the consumes are served from the live owner at the pace of its round trips, and
// what is read ahead comes from it.
func TestReadAheadPassesAHungOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "b": {1}, "g": nil}, nil)
		defer c.close()
		hole := &blackhole{node: "b"}
		hole.on.Store(true)
		c.net.Fault = hole.fault
		g := c.nodes["g"]
		c.produce(0, 50)
		start := time.Now()
		for i := range 30 {
			msgs := g.consume(context.Background(), router.ConsumeOptions{})
			require.Len(t, msgs, 1, "consume %d", i)
			assert.Equal(t, int32(0), msgs[0].Partition)
			require.NoError(t, g.ack(msgs[0]))
		}
		// The first consume may lose a probe hedge to the hung owner; the rest are served
		// from memory or a refill from the live owner.
		assert.Less(t, time.Since(start), router.ProbeHedge+40*rtt, "no consume waited on the hung owner")
		assert.Positive(t, g.node.Stats().Ahead.HandedOver)
	})
}

// A consume that names the topic's visibility timeout (a front end passing a queue's
// default) is served from what was read ahead, as one that names none; one that names
// another asks the owners itself.
func TestReadAheadServesTheTopicsVisibilityByName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, topicWith(router.TopicConfig{VisibilityTimeout: 40 * time.Second}))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		c.produce(0, 50)
		for i := range 10 {
			msgs := g.consume(ctx, router.ConsumeOptions{Visibility: 40 * time.Second})
			require.Len(t, msgs, 1)
			left := time.Until(msgs[0].Expiry) // the owner's lease, less its time on the way and held here
			assert.True(t, left <= 40*time.Second && left >= 40*time.Second-aheadHold-2*rtt, "consume %d: %v left", i, left)
			require.NoError(t, g.ack(msgs[0]))
		}
		st := g.node.Stats()
		assert.GreaterOrEqual(t, st.Ahead.HandedOver, uint64(9), "%+v", st.Ahead)
		assert.Equal(t, uint64(1), st.Remote.Probes, "only the first consume asked an owner itself")

		msgs := g.consume(ctx, router.ConsumeOptions{Visibility: time.Minute})
		require.Len(t, msgs, 1)
		left := time.Until(msgs[0].Expiry)
		assert.True(t, left <= time.Minute && left > 40*time.Second, "a lease of its own, from the owner: %v left", left)
		assert.Equal(t, uint64(2), g.node.Stats().Remote.Probes)
	})
}
