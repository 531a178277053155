package router_test

import (
	"context"
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

// Checklist 110, 113: a probe left out when its consumer goes (an HTTP client that hangs up,
// a handler's context cancelled) runs on to its budget, so an owner that hangs is still
// found slow and passed over. The probes used the consumer's context: every consumer of a
// front end that gave up before ProbeBudget cancelled its probe of the hung owner, which was
// never marked slow and cost every later consume ProbeHedge.
func TestProbeOutlivesItsConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "b": {1}, "g": nil}, nil)
		hole := &blackhole{node: "b"}
		hole.on.Store(true)
		c.net.Fault = hole.fault
		defer c.close()
		g := c.nodes["g"]

		// Consumers that give up after twice the hedge: each one's probe of b is still out.
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*router.ProbeHedge)
			msgs, _ := g.node.Consume(ctx, "orders", router.ConsumeOptions{Wait: time.Second})
			cancel()
			assert.Empty(t, msgs)
		}
		time.Sleep(router.ProbeBudget) // the probes still out run out of their budget
		synctest.Wait()
		assert.NotZero(t, g.node.Stats().Remote.SlowOwners, "b was found slow by a probe its consumer left")
	})
}

// Checklist 125, 126, 103: a record a probe brings after its consume parked goes to that consume.
// Before, the consume had left the probe behind (it parks once every probe is out past the
// hedge), and the reply's record was given back: it reached the parked consumer only after a
// release, a notification and a claim, and from an owner on a release before the node wire's
// version 7 (the simulation's seed 9002267, a rolling upgrade) not at all under
// MaxDeliveries 1, since such an owner takes the give-back as a nack, which counts the
// attempt, and quarantined the record unread.
func TestLateProbeRecordGoesToItsParkedConsume(t *testing.T) {
	for _, tc := range []struct {
		name      string
		version   uint8 // b's Config.WireVersion; 0: the newest
		readAhead int   // the topic's TopicConfig.ReadAhead
	}{{"newest owner", 0, 0}, {"owner on version 5", 5, 0}, {"reading ahead off", 0, router.ReadAheadOff}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, rtt, map[string][]int32{"a": {0}, "b": {1}, "g": nil}, func(id string, cfg *router.Config) {
					cfg.Topic = func(string) router.TopicConfig {
						return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 1, ReadAhead: tc.readAhead}
					}
					if id == "b" {
						cfg.WireVersion = tc.version
					}
				})
				defer c.close()
				b := c.nodes["b"].node
				c.delayFirstLease("b", 300*time.Millisecond) // out when the consume parks
				var givenBack atomic.Int64
				c.net.Observe = func(_, to string, frame []byte) {
					if to == "b" && len(frame) > 0 && (frame[0] == wire.OpRelease || frame[0] == wire.OpNack) {
						givenBack.Add(1)
					}
				}
				c.produce(1, 1)

				msgs, err := c.nodes["g"].node.Consume(context.Background(), "orders", router.ConsumeOptions{Wait: 2 * time.Second})
				require.NoError(t, err)
				require.Len(t, msgs, 1, "the record b's probe brought")
				assert.Equal(t, int32(1), msgs[0].Partition)
				require.NoError(t, c.nodes["g"].node.Ack(context.Background(), "orders", msgs[0].Receipt))
				synctest.Wait()
				assert.Zero(t, givenBack.Load(), "frames that gave the record back to b")
				assert.Zero(t, b.Stats().Shards.Quarantined, "records quarantined at b")
				remote := c.nodes["g"].node.Stats().Remote
				assert.Equal(t, uint64(1), remote.LateTaken, "late replies taken")
				assert.Zero(t, remote.LateGivenBack, "late replies given back")
			})
		})
	}
}

// A record a probe brings while its parked consume is busy with something else than its
// wait (here a claim whose reply is lost, ClaimBudget long) is taken only within the hold of
// reading ahead: past it the record goes back, and the consume gets a lease as fresh as one
// read ahead would be (its lease left at least the visibility timeout less the hold and a
// round trip), never the late probe's lease, run down meanwhile.
func TestLateProbeRecordKeepsTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "b": {1}, "g": nil}, nil)
		defer c.close()
		c.delayFirstLease("b", 300*time.Millisecond) // the probe's reply: out when the consume parks
		start := time.Now()
		c.net.Fault = func(from, to string, frame []byte) routertest.Fault {
			if from == "g" && to == "a" && len(frame) > 0 && frame[0] == wire.OpConsume && time.Since(start) > 100*time.Millisecond {
				return routertest.DropReply // the claim of a's record: its reply lost
			}
			return routertest.Deliver
		}
		c.produce(1, 1)
		got := make(chan []router.Message, 1)
		go func() {
			msgs, err := c.nodes["g"].node.Consume(context.Background(), "orders", router.ConsumeOptions{Wait: 5 * time.Second})
			assert.NoError(t, err)
			got <- msgs
		}()
		time.Sleep(200 * time.Millisecond) // parked, b's probe still out
		c.produce(0, 1)                    // a notifies g, whose claim of it waits for its budget
		msgs := <-got
		require.NotEmpty(t, msgs)
		for _, m := range msgs {
			assert.GreaterOrEqual(t, time.Until(m.Expiry), vt-router.MaxReadAheadHold-2*rtt,
				"%d/%d handed over %v after it was leased", m.Partition, m.Offset, vt-time.Until(m.Expiry))
		}
		remote := c.nodes["g"].node.Stats().Remote
		assert.Zero(t, remote.LateTaken, "late replies taken")
		assert.Equal(t, uint64(1), remote.LateGivenBack, "late replies given back: b's, past the hold")
	})
}

// delayFirstLease makes the first reply of node id whose frame leased or reserved a record
// come d late; its other replies come at once.
func (c *cluster) delayFirstLease(id string, d time.Duration) {
	node := c.nodes[id].node
	leased := func() uint64 { s := node.Stats().Shards; return s.Delivered + s.Reserved }
	var delayed atomic.Bool
	c.net.Join(id, func(ctx context.Context, from string, frame []byte) ([]byte, error) {
		before := leased()
		reply, err := node.Serve(ctx, from, frame)
		if leased() > before && delayed.CompareAndSwap(false, true) {
			time.Sleep(d)
		}
		return reply, err
	})
}
