package router_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// A cluster that degrades gracefully: what one bad owner, one lost reply or one pinned
// consumer costs the others.

// blackhole makes the frames sent to node vanish while it is on, as a host that hangs (it
// neither answers nor refuses) makes them: a caller learns nothing until its budget ends.
type blackhole struct {
	node string
	on   atomic.Bool
}

func (b *blackhole) fault(_, to string, _ []byte) routertest.Fault {
	if to == b.node && b.on.Load() {
		return routertest.DropRequest
	}
	return routertest.Deliver
}

// Checklist 110, 113: one hung owner stalls no consume elsewhere. Before, every consume
// probed the owners one after another with a 2 s budget each: with one owner blackholed a
// consume with no wait took 2 s, a 100 ms long-poll 2 s, and a live owner's records waited
// behind it. Now a consume returns within its wait plus ConsumeOverrun, a live owner's
// records come at once (a hung owner costs a probe ProbeHedge at most), the owner that let a
// probe run out is passed over from then on, and it is probed again once a background
// recheck finds it answering.
func TestHungOwnerStallsNoConsume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "b": {1}, "g": nil}, probesOnly(nil))
		hole := &blackhole{node: "b"}
		hole.on.Store(true)
		c.net.Fault = hole.fault
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]

		c.produce(0, 6)
		for i := range 6 {
			start := time.Now()
			msgs := g.consume(ctx, router.ConsumeOptions{})
			require.Len(t, msgs, 1, "consume %d", i)
			assert.Equal(t, int32(0), msgs[0].Partition)
			assert.LessOrEqual(t, time.Since(start), router.ProbeHedge+rtt, "consume %d: the live owner's record waits for no hung owner", i)
			require.NoError(t, g.ack(msgs[0]))
		}
		// Nothing anywhere: a consume with no wait returns within the overrun, a long-poll
		// within its wait plus the overrun.
		for _, wait := range []time.Duration{0, 100 * time.Millisecond, time.Second} {
			start := time.Now()
			msgs, err := g.node.Consume(ctx, "orders", router.ConsumeOptions{Wait: wait})
			assert.Empty(t, msgs)
			_ = err // ErrTransport or nothing: the hung owner's probe may have been the last out
			assert.LessOrEqual(t, time.Since(start), wait+router.ConsumeOverrun, "a consume waiting %v", wait)
		}
		st := g.node.Stats().Remote
		assert.Equal(t, uint64(1), st.SlowOwners, "b was found slow once")

		// Passed over now: a consume costs one round trip to the live owner, and records
		// still reach it.
		c.produce(0, 1)
		start := time.Now()
		require.Len(t, g.consume(ctx, router.ConsumeOptions{}), 1)
		assert.Equal(t, rtt, time.Since(start), "the slow owner is not probed")

		// b answers again: the background recheck (sent by a consume that passed over it,
		// at most every SlowOwnerRecheck) finds it, and its records are served again.
		hole.on.Store(false)
		c.produce(1, 1)
		time.Sleep(router.SlowOwnerRecheck)
		g.consume(ctx, router.ConsumeOptions{}) // passes over b, and sends its recheck
		time.Sleep(rtt)
		synctest.Wait()
		msgs := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		assert.Equal(t, int32(1), msgs[0].Partition, "b probed again")
	})
}

// A long-poll whose probe of a hung owner is still out keeps its wait: a live owner's
// record that arrives meanwhile reaches it through its token.
func TestHungOwnerLeavesTheWaitAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "b": {1}, "g": nil}, nil)
		hole := &blackhole{node: "b"}
		hole.on.Store(true)
		c.net.Fault = hole.fault
		defer c.close()
		g := c.nodes["g"]
		got := g.async(context.Background(), router.ConsumeOptions{Wait: 10 * time.Second})
		time.Sleep(router.ProbeBudget + time.Second) // the hung owner's probe ran out meanwhile
		synctest.Wait()
		c.produceTo(got, 0, 2*rtt, "notify, then claim")
	})
}

// cutOff makes the frames between two nodes vanish, both ways, as a network split between
// them alone does: each learns nothing of the other until its budget ends, while both still
// reach every other node.
func cutOff(x, y string) func(from, to string, _ []byte) routertest.Fault {
	return func(from, to string, _ []byte) routertest.Fault {
		if (from == x && to == y) || (from == y && to == x) {
			return routertest.DropRequest
		}
		return routertest.Deliver
	}
}

// A requester cut off from one owner gets another owner's records, and its own, within a few
// round trips: the probe of the owner it cannot reach holds up a consume with a wait for
// ProbeHedge at most, then it parks and leaves its tokens. Before, it waited for that probe's
// whole budget before it parked: a record that landed meanwhile on a reachable owner (or on
// the requester's own partition) waited for it, 1.9 s here (and 1.0-1.26 s for a consumer
// polling with a 1 s wait, whose probe ran out at its wait plus ConsumeOverrun).
func TestCutOffOwnerDelaysNoOtherRecords(t *testing.T) {
	for _, tc := range []struct {
		name      string
		owned     map[string][]int32
		partition int32 // where the record lands
	}{
		{"gateway, record on a reachable owner", map[string][]int32{"a": nil, "b": {1}, "c": {0}}, 0},
		{"owner, record on a reachable owner", map[string][]int32{"a": {2}, "b": {1}, "c": {0}}, 0},
		{"owner, record on its own partition", map[string][]int32{"a": {2}, "b": {1}, "c": {0}}, 2},
		{"owner, the cut-off owner the only other", map[string][]int32{"a": {2}, "b": {1}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, rtt, tc.owned, nil)
				c.net.Fault = cutOff("a", "b")
				defer c.close()
				a := c.nodes["a"]
				// Twice: the probes start at an owner that rotates, so with two owners the
				// cut-off one is probed first once, and last once. Its probes run out only
				// after both.
				for i := range 2 {
					got := a.async(context.Background(), router.ConsumeOptions{Wait: 30 * time.Second})
					time.Sleep(75 * time.Millisecond) // its probes are out, and b's hangs
					m := c.produceTo(got, tc.partition, router.ProbeHedge+3*rtt,
						"consume %d: b costs ProbeHedge at most, then a registration, a notification and a claim", i)
					require.NoError(t, a.ack(m))
				}
				assert.Zero(t, a.node.Stats().Remote.SlowOwners, "both records came before b's probes ran out")
			})
		})
	}
}

// Checklist 114: the cancel of a probe whose reply was lost arrives while the owner still
// remembers the reply, so its records are visible again at once. Before, the owner
// remembered a reply for 2 s, the probe's own budget: the cancel sent at the end of that
// budget found nothing, and the record stayed leased for its visibility timeout.
func TestCancelAfterLostReplyGivesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "g": nil}, nil)
		var lost atomic.Bool
		c.net.Fault = func(_, to string, frame []byte) routertest.Fault {
			if to == "a" && frame[0] == opConsumeFrame && lost.CompareAndSwap(false, true) {
				return routertest.DropReply // the first probe's reply alone
			}
			return routertest.Deliver
		}
		defer c.close()
		g := c.nodes["g"]
		c.produce(0, 1)
		start := time.Now()
		msgs := <-g.async(context.Background(), router.ConsumeOptions{Wait: 10 * time.Second})
		require.Len(t, msgs, 1)
		assert.Equal(t, int64(0), msgs[0].Offset)
		assert.Less(t, time.Since(start), router.ProbeBudget+time.Second, "given back by the cancel, not after %v", vt)
		assert.Equal(t, uint64(1), c.nodes["a"].node.Stats().Remote.Cancelled)
	})
}

// Checklist 100, 111: a node whose only parked consumer is pinned to one owner's partition
// leaves no token with the other owners, and passes at once a notification none of its
// consumers can use. Before, it kept tokens everywhere and took the notifications it could
// not use, and a consumer on another node waited a hold's length for each record.
func TestPinnedConsumerHoldsNoOtherOwnersRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "b": {1}, "g": nil, "h": nil}, nil)
		defer c.close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pinned := c.nodes["g"].async(ctx, router.ConsumeOptions{Wait: 30 * time.Second, Pinned: true, Partition: 0})
		time.Sleep(10 * rtt) // g parks first, so its token would be first at b
		synctest.Wait()
		other := c.nodes["h"].async(ctx, router.ConsumeOptions{Wait: 30 * time.Second})
		time.Sleep(10 * rtt)
		synctest.Wait()
		for i := range 3 {
			m := c.produceTo(other, 1, 2*rtt, "record %d: no hold for a node that cannot use it", i)
			assert.Equal(t, int32(1), m.Partition)
			require.NoError(t, c.nodes["h"].ack(m))
			other = c.nodes["h"].async(ctx, router.ConsumeOptions{Wait: 30 * time.Second})
			time.Sleep(10 * rtt)
			synctest.Wait()
		}
		assert.Zero(t, c.nodes["b"].node.Stats().Remote.Passed, "b never told g")
		select {
		case msgs := <-pinned:
			t.Fatalf("the pinned consumer got %v", msgs)
		default:
		}
		c.produce(0, 1)
		msgs := <-pinned
		require.Len(t, msgs, 1)
		assert.Equal(t, int32(0), msgs[0].Partition)
		cancel()
		<-other
	})
}

// Checklist 86: the caller's context values reach Transport.Call for everything it sends
// on the caller's behalf (forwarded acks, extends, nacks, batch acks, consumes), though not
// its cancellation: a trace is not broken at the node wire.
func TestContextValuesCrossTheNodeWire(t *testing.T) {
	type traceKey struct{}
	for _, prompt := range []bool{true, false} {
		t.Run(map[bool]string{true: "ContextTransport", false: "Transport"}[prompt], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				traced := map[byte]int{} // frames by op that carried the trace
				untraced := map[byte]int{}
				c := newCluster(t, rtt, map[string][]int32{"a": {0}, "g": nil}, func(id string, cfg *router.Config) {
					if id != "g" {
						return
					}
					inner := cfg.Transport
					call := func(ctx context.Context, to string, frame []byte) ([]byte, error) {
						mu.Lock()
						if ctx.Value(traceKey{}) == "trace-1" {
							traced[frame[0]]++
						} else {
							untraced[frame[0]]++
						}
						mu.Unlock()
						return inner.Call(ctx, to, frame)
					}
					if prompt {
						cfg.Transport = promptFunc(call)
					} else {
						cfg.Transport = transportFunc(call)
					}
				})
				defer c.close()
				g := c.nodes["g"]
				ctx := context.WithValue(context.Background(), traceKey{}, "trace-1")
				c.produce(0, 4)
				msgs, err := g.node.Consume(ctx, "orders", router.ConsumeOptions{Max: 4})
				require.NoError(t, err)
				require.Len(t, msgs, 4)
				require.NoError(t, g.node.Ack(ctx, "orders", msgs[0].Receipt))
				_, err = g.node.Extend(ctx, "orders", msgs[1].Receipt, time.Minute)
				require.NoError(t, err)
				require.NoError(t, g.node.Nack(ctx, "orders", msgs[1].Receipt, 0))
				for _, err := range g.node.AckBatch(ctx, "orders", []router.Handle{msgs[2].Receipt, msgs[3].Receipt}) {
					require.NoError(t, err)
				}
				mu.Lock()
				defer mu.Unlock()
				assert.Equal(t, 1, traced[opConsumeFrame], "the consume")
				assert.Equal(t, 1, traced[opAckFrame], "the ack")
				assert.Equal(t, 1, traced[wire.OpExtendLeft], "the extend")
				assert.Equal(t, 1, traced[3], "the nack")
				assert.Equal(t, 1, traced[wire.OpAcks], "the batch ack")
				assert.Empty(t, untraced)
			})
		})
	}
}
