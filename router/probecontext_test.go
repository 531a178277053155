package router_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

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
