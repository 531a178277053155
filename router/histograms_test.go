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

// observed checks that h holds exactly the observations want, each in its bucket, on the
// node's clock (a synctest bubble's: exact).
func observed(t *testing.T, h router.Histogram, what string, want ...time.Duration) {
	t.Helper()
	var expect router.Histogram
	bounds := router.HistogramBounds()
	for _, d := range want {
		bucket := router.HistogramBuckets
		for i := router.HistogramBuckets - 1; i >= 0; i-- {
			if d <= bounds[i] {
				bucket = i
			}
		}
		expect.Counts[bucket]++
		expect.Sum += d
	}
	assert.Equal(t, expect, h, what)
}

// Stats.ConsumeWait holds the consumes that waited, from the call to the return, whether a
// record came or not, and none that was served at once (issue 26: histograms).
func TestConsumeWaitHistogram(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 1)
		m := h.consume(router.ConsumeOptions{Wait: time.Minute})
		require.NoError(t, h.ack(m[0]))
		observed(t, h.node.Stats().ConsumeWait, "served at once: no wait")

		got := h.async(router.ConsumeOptions{Wait: time.Minute})
		time.Sleep(5 * time.Second)
		h.produce(0, 1)
		require.Len(t, <-got, 1)
		assert.Empty(t, h.consume(router.ConsumeOptions{Wait: 2 * time.Second}))
		assert.Empty(t, h.consume(router.ConsumeOptions{}), "no wait asked: not observed")
		observed(t, h.node.Stats().ConsumeWait, "parked until a record came, then until the wait ran out",
			5*time.Second, 2*time.Second)
		observed(t, h.node.Stats().RemoteDelivery, "no other node")
	})
}

// Stats.RemoteDelivery holds the consumes served with an owner's records, from the call to
// their arrival; Stats.ForwardedAckRPC each RPC of forwarded acks, send to reply.
func TestCrossNodeHistograms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]

		c.produce(0, 1)
		msgs := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		require.NoError(t, g.ack(msgs[0]))
		st := g.node.Stats()
		observed(t, st.RemoteDelivery, "the probe's round trip", rtt)
		observed(t, st.ForwardedAckRPC, "the forwarded ack's round trip", rtt)
		observed(t, st.ConsumeWait, "served by the probe: no wait")

		got := g.async(ctx, router.ConsumeOptions{Wait: 10 * time.Second})
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, 1, g.node.Parked("orders"))
		m := c.produceTo(got, 0, 2*rtt, "notify, then claim")
		st = g.node.Stats()
		// The 100 ms from the call (its probe's round trip among them) to the produce, the
		// notification's half round trip (the registration had landed) and the claim's.
		waited := 100*time.Millisecond + rtt/2 + rtt
		observed(t, st.RemoteDelivery, "the parked consume, from its call", rtt, waited)
		observed(t, st.ConsumeWait, "the parked consume", waited)
		require.NoError(t, g.ack(m))
		observed(t, g.node.Stats().ForwardedAckRPC, "two forwarded acks", rtt, rtt)
		observed(t, c.nodes["b"].node.Stats().ForwardedAckRPC, "the owner forwarded nothing")
		observed(t, c.nodes["b"].node.Stats().RemoteDelivery, "the owner's consumes are its own")
	})
}

// A consume held for a topic no node serves is observed once, whether it then parks or not.
func TestHeldConsumeWaitIsObservedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": nil, "g": nil}, nil)
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		assert.Empty(t, g.consume(ctx, router.ConsumeOptions{Wait: time.Second}))
		observed(t, g.node.Stats().ConsumeWait, "held for its whole wait", time.Second)

		got := g.async(ctx, router.ConsumeOptions{Wait: 10 * time.Second})
		time.Sleep(time.Second)
		c.assign("b", 0)
		time.Sleep(time.Second)
		c.produce(0, 1)
		require.Len(t, <-got, 1)
		assert.Equal(t, uint64(2), g.node.Stats().ConsumeWait.Count(), "held, then parked: one observation")
	})
}
