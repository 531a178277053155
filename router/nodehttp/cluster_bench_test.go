package nodehttp_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/cputime"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/router/nodehttp"
	"narad.dev/consume/router/routertest"
)

// benchTransport chooses how the nodes of BenchmarkClusterConsumeAck talk: "framed" (the
// default, framed connections, as a zero TransportConfig has it), "h2c" (Unframed, HTTP/2
// cleartext) or "http1" (Unframed with HTTP1, HTTP/1.1 keep-alive). Passed after -args.
var benchTransport = flag.String("nodehttp.transport", "framed", "the transport BenchmarkClusterConsumeAck's nodes speak: framed, h2c or http1")

// BenchmarkClusterShapes is a whole cluster's CPU per record in the shapes that send records
// across nodes, against one node holding every partition: three nodes owning four of the
// topic's twelve partitions each, over the transport -nodehttp.transport names.
//
//	shape=one-node  the baseline: node a owns all twelve partitions; the consumers are on it
//	shape=spread    records on every partition, the consumers spread over the three nodes
//	                in turn (one consumer: on a alone, so two thirds of its records cross)
//	shape=hot       records on a's four partitions alone (a hot owner), the consumers spread
//	                over the three nodes in turn: two thirds of them take every record from a
//
// Each consumer consumes one record at a time and acks it with AckAsync, as
// BenchmarkClusterConsumeAck's batch 1 does; it reports the same metrics.
func BenchmarkClusterShapes(b *testing.B) {
	three := map[string][]int32{"a": {0, 1, 2, 3}, "b": {4, 5, 6, 7}, "c": {8, 9, 10, 11}}
	one := map[string][]int32{"a": {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}
	for _, consumers := range []int{1, 8, 64} {
		for _, shape := range []string{"one-node", "spread", "hot"} {
			b.Run(fmt.Sprintf("consumers=%d/shape=%s", consumers, shape), func(b *testing.B) {
				owned, holding := three, 12
				switch shape {
				case "one-node":
					owned = one
				case "hot":
					holding = 4
				}
				// Enough for b.N and what the consumers and the read-ahead hold at the end.
				per := (b.N+consumers+2*router.DefaultReadAhead)/holding + 1
				c := newBenchCluster(b, owned, func(p int32) int {
					if shape == "hot" && p >= 4 {
						return 0
					}
					return per
				})
				ids := []string{"a", "b", "c"}
				on := func(i int) *router.Node {
					if shape == "one-node" {
						return c.nodes["a"]
					}
					return c.nodes[ids[i%3]]
				}
				benchConsumeAck(b, c, on, 1, consumers)
			})
		}
	}
}

// BenchmarkClusterConsumeAck is a cluster's throughput over the real transport: three
// nodes in one process, each behind its own loopback server (a nodehttp.Handler) and
// calling the others through a nodehttp.Transport. Owners "a" and "b" hold six partitions
// each of one topic; "g" owns none.
//
//	path=gateway  the consumers are on g: every consume is a probe of an owner (one RPC,
//	              starting at an owner that rotates), every ack is forwarded
//	path=local    the consumers are on the owners, half on each (one consumer: on a), and
//	              find their records on their own node
//
// Each consumer consumes a batch (Max 1 or 100, with a wait of a second that the full logs
// never let it spend; a consume whose reply did not come back in time asks again) and acks every record it got:
// with AckAsync at batch 1 (at most 128 unanswered per consumer) and AckBatch at batch 100,
// until b.N records are consumed and acked between them. One op is one record consumed and
// acked. Every record is produced before the timer starts (each owner holds b.N plus a
// batch per consumer, spread over its partitions), so no consume finds the topic empty.
// The topic's caps are raised out of the way.
//
// Reported: cpu-ns/rec (the process's CPU time, both ends of every RPC and all three
// nodes, over the records), rpcs/rec (the frames the three handlers served, over the
// records) and consume-rpcs/rec (of them, the Consume frames), wire-bytes/rec (the node
// wire's bytes of those frames and their replies, over the records), crossed/rec (the share of
// records consumed on a node that does not own them), records/s, allocations per record,
// and at batch 100 the consumes' latency, consume-p50-µs and consume-p99-µs. The nodes speak over framed connections (the default transport);
// -args -nodehttp.transport=h2c makes them speak HTTP/2 cleartext, and
// -args -nodehttp.transport=http1 HTTP/1.1.
func BenchmarkClusterConsumeAck(b *testing.B) {
	for _, path := range []string{"gateway", "local"} {
		for _, batch := range []int{1, 100} {
			for _, consumers := range []int{1, 8, 64} {
				b.Run(fmt.Sprintf("path=%s/batch=%d/consumers=%d", path, batch, consumers), func(b *testing.B) {
					c := newBenchCluster(b, benchOwned, func(int32) int { return (b.N+consumers*batch)/len(benchOwned["a"]) + 1 })
					on := func(i int) *router.Node { // the node consumer i consumes on
						switch {
						case path == "gateway":
							return c.nodes["g"]
						case i%2 == 0:
							return c.nodes["a"]
						}
						return c.nodes["b"]
					}
					benchConsumeAck(b, c, on, batch, consumers)
				})
			}
		}
	}
}

// benchCluster is the nodes of BenchmarkClusterConsumeAck and BenchmarkClusterShapes.
type benchCluster struct {
	nodes    map[string]*router.Node
	owners   map[int32]*router.Node // each partition's owner
	frames   atomic.Int64           // frames served, by every node
	consumes atomic.Int64           // of them, Consume frames
	bytes    atomic.Int64           // the node wire's bytes of those frames and their replies
}

// benchOwned is the partitions each node of a benchCluster owns.
var benchOwned = map[string][]int32{"a": {0, 1, 2, 3, 4, 5}, "b": {6, 7, 8, 9, 10, 11}, "g": nil}

// newBenchCluster starts a node per entry of owned (its partitions of topic "t"), partition p
// holding records(p) records, over the transport -nodehttp.transport names. Everything
// closes when the benchmark ends.
func newBenchCluster(b *testing.B, owned map[string][]int32, records func(p int32) int) *benchCluster {
	b.Helper()
	c := &benchCluster{nodes: map[string]*router.Node{}, owners: map[int32]*router.Node{}}
	logs := &routertest.MemLogs{}
	value := []byte("a payload of 32 bytes, or so...")
	addrs := peers{}
	servers := map[string]*server{}
	for id, parts := range owned {
		servers[id] = newServer(b)
		addrs[id] = servers[id].base + "/consume/node"
		for _, p := range parts {
			log := logs.Log("t", p)
			for range records(p) {
				log.Append(nil, value, time.Time{})
			}
		}
	}
	http1, unframed := false, false
	switch *benchTransport {
	case "framed":
	case "h2c":
		unframed = true
	case "http1":
		http1, unframed = true, true
	default:
		b.Fatalf("-nodehttp.transport=%s: framed, h2c or http1", *benchTransport)
	}
	topic := func(string) router.TopicConfig {
		return router.TopicConfig{MaxInFlight: 1 << 20, MaxAckedAhead: 1 << 20}
	}
	for id, parts := range owned {
		routes := &routertest.Routes{}
		routes.Set("t", parts...)
		for other, theirs := range owned {
			if other != id && len(theirs) > 0 {
				routes.SetRemote("t", other, theirs...)
			}
		}
		tr := newTransportWith(b, nodehttp.TransportConfig{Self: id, Resolve: addrs.resolve, HTTP1: http1, Unframed: unframed})
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state-" + id, FS: crashfs.New(),
			Transport: tr, Topic: topic})
		if err != nil {
			b.Fatal(err)
		}
		c.nodes[id] = node
		for _, p := range parts {
			c.owners[p] = node
		}
		b.Cleanup(func() { node.Close() }) // before the transports and the servers close
		handler := &nodehttp.Handler{Serve: func(ctx context.Context, from string, frame []byte) ([]byte, error) {
			c.frames.Add(1)
			if len(frame) > 0 && frame[0] == wire.OpConsume {
				c.consumes.Add(1)
			}
			reply, err := node.Serve(ctx, from, frame)
			c.bytes.Add(int64(len(frame) + len(reply)))
			return reply, err
		}}
		mux := http.NewServeMux()
		mux.Handle("POST /consume/node", handler)
		servers[id].Config.Handler = mux
		servers[id].Start()
	}
	return c
}

// claim takes up to batch of the records left to consume, and returns how many it took:
// never more than are left, so that no consumer stops while records are left unclaimed.
func claim(left *atomic.Int64, batch int64) int64 {
	for {
		cur := left.Load()
		if cur <= 0 {
			return 0
		}
		want := min(cur, batch)
		if left.CompareAndSwap(cur, cur-want) {
			return want
		}
	}
}

// benchConsumeAck runs consumers consumers, consumer i on node on(i), each consuming batches
// of batch records and acking them (AckAsync at batch 1, AckBatch otherwise) until b.N
// records are consumed and acked between them, and reports the metrics.
func benchConsumeAck(b *testing.B, c *benchCluster, on func(i int) *router.Node, batch, consumers int) {
	ctx := context.Background()
	var left, failed, retries, crossed atomic.Int64
	left.Store(int64(b.N))
	var acks sync.WaitGroup // the AckAsyncs unanswered
	var wg sync.WaitGroup
	// The consumes' latencies, batches only (a clock read on either side of each consume
	// would weigh on the CPU of a record at batch 1): one slice per consumer.
	latencies := make([][]time.Duration, consumers)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu, frames, consumes, wireBytes := time.Now(), cputime.Process(), c.frames.Load(), c.consumes.Load(), c.bytes.Load()
	for i := range consumers {
		node := on(i)
		lat := &latencies[i]
		wg.Go(func() {
			unanswered := make(chan struct{}, 128)
			done := func(err error) {
				if err != nil {
					failed.Add(1)
				}
				<-unanswered
				acks.Done()
			}
			handles := make([]router.Handle, 0, batch)
			var msgs []router.Message
			for {
				want := claim(&left, int64(batch))
				if want == 0 {
					// Nothing left to claim. A consumer whose consume came back short gives
					// the rest back to left and claims it again itself.
					return
				}
				var err error
				var began time.Time
				if batch > 1 {
					began = time.Now()
				}
				msgs, err = node.ConsumeAppend(ctx, msgs[:0], "t", router.ConsumeOptions{Max: int(want), Wait: time.Second})
				if batch > 1 {
					*lat = append(*lat, time.Since(began))
				}
				left.Add(want - int64(len(msgs)))
				for i := range msgs {
					if c.owners[msgs[i].Partition] != node {
						crossed.Add(1)
					}
				}
				if len(msgs) == 0 {
					// An owner's reply later than the wait's bound (the machine is shared):
					// its records were given back, the consume answered nothing (its wait
					// over) or ErrTransport, and the consumer asks again. Any other error is
					// the benchmark's failure; a cluster that hands out nothing at all leaves
					// b.N records unacked and hangs the benchmark, which go test's -timeout
					// ends.
					retries.Add(1)
					if err != nil && !errors.Is(err, router.ErrTransport) {
						b.Error("consume:", err)
						return
					}
					continue
				}
				if batch == 1 {
					unanswered <- struct{}{}
					acks.Add(1)
					node.AckAsync("t", msgs[0].Receipt, done)
					continue
				}
				handles = handles[:0]
				for i := range msgs {
					handles = append(handles, msgs[i].Receipt)
				}
				for _, err := range node.AckBatch(ctx, "t", handles) {
					if err != nil {
						failed.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	acks.Wait()
	elapsed, used := time.Since(start), cputime.Process()-cpu
	frames, consumes, wireBytes = c.frames.Load()-frames, c.consumes.Load()-consumes, c.bytes.Load()-wireBytes
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d acks failed", n)
	}
	var acked uint64
	for _, node := range c.nodes {
		acked += node.Stats().Shards.Acked
	}
	if acked != uint64(b.N) {
		b.Fatalf("the owners acked %d of %d", acked, b.N)
	}
	if r := retries.Load(); r > 0 {
		b.Logf("%d consumes asked again after one came back with nothing in time", r)
	}
	n := float64(b.N)
	b.ReportMetric(float64(used)/n, "cpu-ns/rec")
	b.ReportMetric(float64(frames)/n, "rpcs/rec")
	b.ReportMetric(float64(consumes)/n, "consume-rpcs/rec")
	b.ReportMetric(float64(wireBytes)/n, "wire-bytes/rec")
	b.ReportMetric(float64(crossed.Load())/n, "crossed/rec")
	b.ReportMetric(n/elapsed.Seconds(), "records/s")
	if all := slices.Concat(latencies...); len(all) > 0 {
		slices.Sort(all)
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "consume-p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "consume-p99-µs")
	}
}
