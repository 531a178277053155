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

// Checklist 107, 110: a record a probe brings after its consume parked goes to that consume.
// Before, the consume had left the probe behind (it parks once every probe is out past the
// hedge), and the reply's record was given back: it reached the parked consumer only after a
// release, a notification and a claim, and from an owner on a release before the node wire's
// version 7 (the simulation's seed 9002267, a rolling upgrade) not at all under
// MaxDeliveries 1, since such an owner takes the give-back as a nack, which counts the
// attempt, and quarantined the record unread.
func TestLateProbeRecordGoesToItsParkedConsume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version uint8 // b's Config.WireVersion; 0: the newest
	}{{"newest owner", 0}, {"owner on version 5", 5}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, rtt, map[string][]int32{"a": {0}, "b": {1}, "g": nil}, func(id string, cfg *router.Config) {
					cfg.Topic = func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 1} }
					if id == "b" {
						cfg.WireVersion = tc.version
					}
				})
				defer c.close()
				// b serves consumes late: a probe of it is still out when the consume parks.
				const late = 300 * time.Millisecond
				b := c.nodes["b"].node
				c.net.Join("b", func(ctx context.Context, from string, frame []byte) ([]byte, error) {
					if len(frame) > 0 && frame[0] == wire.OpConsume {
						time.Sleep(late)
					}
					return b.Serve(ctx, from, frame)
				})
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
			})
		})
	}
}
