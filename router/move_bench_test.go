package router_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// BenchmarkHandOff moves every partition of a topic from one node to another and back, on
// the real file system (b.TempDir): HandOff of each on its owner, then Adopt of each on the
// other, 64 partitions at a time (their durability waits share syncs), then the routes. Each
// partition holds an acked-ahead gap and live leases. One op is the move of all partitions;
// handoff-ms and adopt-ms split it, µs/partition is the whole per partition. Compare with
// BenchmarkBareSync: a lone partition's move is about two syncs, one per side.
func BenchmarkHandOff(b *testing.B) {
	for _, n := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) { benchHandOff(b, n) })
	}
}

func benchHandOff(b *testing.B, partitions int) {
	logs := &routertest.MemLogs{}
	net := &routertest.Network{}
	var ids []int32
	for p := range int32(partitions) {
		ids = append(ids, p)
		log := logs.Log("t", p)
		for range 8 {
			log.Append(nil, []byte("payload"), time.Time{})
		}
	}
	routesOf := map[string]*routertest.Routes{"a": {}, "b": {}}
	nodes := map[string]*router.Node{}
	for id, routes := range routesOf {
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: b.TempDir(), Transport: net.Transport(id)})
		if err != nil {
			b.Fatal(err)
		}
		defer node.Close()
		net.Join(id, node.Serve)
		nodes[id] = node
	}
	route := func(owner, other string) {
		routesOf[owner].Set("t", ids...)
		routesOf[owner].SetRemote("t", other)
		routesOf[other].Set("t")
		routesOf[other].SetRemote("t", owner, ids...)
	}
	route("a", "b")
	ctx := context.Background()
	for _, p := range ids {
		msgs, err := nodes["a"].Consume(ctx, "t", router.ConsumeOptions{Pinned: true, Partition: p, Max: 6})
		if err != nil || len(msgs) != 6 {
			b.Fatalf("consume: %d, %v", len(msgs), err)
		}
		for _, i := range []int{0, 1, 3} { // frontier 1, 3 acked ahead, 2, 4 and 5 leased
			if err := nodes["a"].Ack(ctx, "t", msgs[i].Receipt); err != nil {
				b.Fatal(err)
			}
		}
	}
	// parallel runs f for every partition, 64 at a time.
	parallel := func(f func(p int32) error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(64, partitions) {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(partitions); i = next.Add(1) - 1 {
					if err := f(ids[i]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	from, to := "a", "b"
	var handoffs, adopts time.Duration
	states := make([][]byte, partitions)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		parallel(func(p int32) (err error) {
			states[p], err = nodes[from].HandOff(ctx, "t", p)
			return err
		})
		handedOff := time.Now()
		parallel(func(p int32) error { return nodes[to].Adopt(ctx, "t", p, states[p]) })
		handoffs += handedOff.Sub(start)
		adopts += time.Since(handedOff)
		route(to, from)
		from, to = to, from
	}
	b.StopTimer()
	b.ReportMetric(float64(handoffs.Milliseconds())/float64(b.N), "handoff-ms")
	b.ReportMetric(float64(adopts.Milliseconds())/float64(b.N), "adopt-ms")
	b.ReportMetric(float64((handoffs+adopts).Microseconds())/float64(b.N)/float64(partitions), "µs/partition")
}
