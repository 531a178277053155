package router_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// BenchmarkGatewayWithAHungOwner is the throughput of consumers on a gateway that owns
// nothing, served by three owners over a routertest.Network (in memory, no round-trip
// delay), with all three healthy and with one of them hung (every frame to it lost: it
// neither answers nor refuses). The two live owners hold the records in both cases; eight
// consumers on the gateway take one record at a time with no wait and ack it, until b.N
// records are acked. The hung owner's first probes run out before the timer starts (it is
// then passed over, and rechecked in the background every SlowOwnerRecheck): what is
// measured is the steady state. Reported: records/s, and ns/op per record. Target: hung at
// least 0.8x of healthy (records/s).
func BenchmarkGatewayWithAHungOwner(b *testing.B) {
	for _, hung := range []bool{false, true} {
		name := "healthy"
		if hung {
			name = "hung"
		}
		b.Run(name, func(b *testing.B) { benchHungOwner(b, hung) })
	}
}

func benchHungOwner(b *testing.B, hung bool) {
	hole := &blackhole{node: "o1"}
	hole.on.Store(hung)
	nw := &routertest.Network{Fault: hole.fault}
	logs := &routertest.MemLogs{}
	owners := []string{"o0", "o1", "o2"}
	routesOf := func(id string) *routertest.Routes {
		r := &routertest.Routes{}
		r.Set("orders")
		for i, o := range owners {
			if o == id {
				r.Set("orders", int32(i))
			} else {
				r.SetRemote("orders", o, int32(i))
			}
		}
		return r
	}
	nodes := map[string]*router.Node{}
	for _, id := range append(owners, "g") {
		node, err := router.New(router.Config{Logs: logs, Routes: routesOf(id), Dir: "/state-" + id, FS: crashfs.New(),
			Transport: nw.Transport(id), Topic: func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: vt} }})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { node.Close() })
		nw.Join(id, node.Serve)
		nodes[id] = node
	}
	for i := range owners {
		logs.Log("orders", int32(i))
	}
	live := []int32{0, 2}
	produce := func(n int) {
		for i := range n {
			p := live[i%2]
			off := logs.Log("orders", p).Append(nil, []byte("v"), time.Now())
			nodes[owners[p]].Appended("orders", p, off+1)
		}
	}
	g := nodes["g"]
	ctx := context.Background()
	// The warm-up: the hung owner's probes run out (a consume with no wait gives one
	// ConsumeOverrun), and it is passed over from then on.
	produce(64)
	for warm := time.Now(); time.Since(warm) < router.ConsumeOverrun+100*time.Millisecond; {
		if msgs, _ := g.Consume(ctx, "orders", router.ConsumeOptions{}); len(msgs) == 1 {
			g.Ack(ctx, "orders", msgs[0].Receipt)
		}
	}
	produce(b.N + 64)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var acked sync.WaitGroup
	var mu sync.Mutex
	left := b.N
	for range 8 {
		acked.Go(func() {
			for {
				mu.Lock()
				if left == 0 {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				for {
					msgs, _ := g.Consume(ctx, "orders", router.ConsumeOptions{})
					if len(msgs) == 1 {
						g.Ack(ctx, "orders", msgs[0].Receipt)
						break
					}
				}
			}
		})
	}
	acked.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}
