package router_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/cputime"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

func benchNode(b *testing.B, logs router.Logs, routes router.Routes) *router.Node {
	b.Helper()
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { node.Close() })
	return node
}

// BenchmarkDeliverParked is the cost per delivered record with N consumers parked: one
// consumer takes each record appended, acks it and parks again, while the N-1 others stay
// parked, half on other topics and half pinned to a partition of the same topic that gets
// nothing. The pump wakes exactly one consumer per record and no parked consumer is woken
// or scanned for it, so the cost should not grow with N (target: N=10000 at most 1.25x N=1).
func BenchmarkDeliverParked(b *testing.B) {
	for _, parked := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprint(parked), func(b *testing.B) {
			benchDeliver(b, parked, false)
		})
	}
}

// BenchmarkDeliverCycling is the worst case behind BenchmarkDeliverParked: all N consumers
// park on the same queue, so FIFO order hands each record to the consumer that has waited
// longest, a different goroutine every time, whose stack has gone cold. What grows with N
// here is the Go runtime's wake-up and stack scanning, not the library's work.
func BenchmarkDeliverCycling(b *testing.B) {
	for _, parked := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprint(parked), func(b *testing.B) {
			benchDeliver(b, parked, true)
		})
	}
}

func benchDeliver(b *testing.B, parked int, cycling bool) {
	logs := &routertest.MemLogs{}
	routes := &routertest.Routes{}
	routes.Set("t", 0, 1)
	log := logs.Log("t", 0)
	logs.Log("t", 1)
	for i := range 100 {
		routes.Set(fmt.Sprint("idle-", i), 0)
		logs.Log(fmt.Sprint("idle-", i), 0)
	}
	node := benchNode(b, logs, routes)
	ctx, cancel := context.WithCancel(context.Background())
	delivered := make(chan struct{}, parked)
	var wg sync.WaitGroup
	active := 1
	if cycling {
		active = parked
	}
	for range active {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				msgs, err := node.Consume(ctx, "t", router.ConsumeOptions{Wait: time.Hour})
				if err != nil {
					return
				}
				for _, m := range msgs {
					node.Ack(ctx, "t", m.Receipt)
				}
				delivered <- struct{}{}
			}
		}()
	}
	for i := range parked - active {
		topic, opts := "t", router.ConsumeOptions{Wait: time.Hour, Pinned: true, Partition: 1}
		if i%2 == 1 {
			topic, opts = fmt.Sprint("idle-", i%100), router.ConsumeOptions{Wait: time.Hour}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			node.Consume(ctx, topic, opts)
		}()
	}
	for parkedNow(node) < parked {
		runtime.Gosched() // setup: let every consumer park
	}
	value := []byte("payload")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		off := log.Append(nil, value, time.Time{})
		node.Appended("t", 0, off+1)
		<-delivered
	}
	b.StopTimer()
	cancel()
	wg.Wait()
}

func parkedNow(node *router.Node) int {
	n := node.Parked("t")
	for i := range 100 {
		n += node.Parked(fmt.Sprint("idle-", i))
	}
	return n
}

// BenchmarkEmptyScan is a consume that finds nothing over 8 and 12 local partitions,
// resolving the logs with one GetMany against one lookup each (target: getmany at least 18%
// and 22% cheaper).
func BenchmarkEmptyScan(b *testing.B) {
	for _, mode := range []string{"getmany", "each"} {
		for _, n := range []int{8, 12} {
			b.Run(fmt.Sprintf("%s/%d", mode, n), func(b *testing.B) {
				host := &hostLogs{logs: map[string][]router.Log{}}
				routes := &routertest.Routes{}
				var parts []int32
				for p := range int32(n) {
					parts = append(parts, p)
					host.logs["t"] = append(host.logs["t"], routertest.NewMemLog())
				}
				routes.Set("t", parts...)
				var logs router.Logs = host
				if mode == "each" {
					logs = getOnly{host}
				}
				node := benchNode(b, logs, routes)
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					msgs, err := node.Consume(ctx, "t", router.ConsumeOptions{})
					if err != nil || len(msgs) != 0 {
						b.Fatal(err, len(msgs))
					}
				}
			})
		}
	}
}

// hostLogs resolves logs the way a broker's registry does, paying per lookup what the spec
// names: a read lock, a read of the topic's version (to notice a recreate) and a clock read
// (to stamp the log's last use). GetMany pays them once for all the partitions it resolves.
type hostLogs struct {
	mu       sync.RWMutex
	version  atomic.Uint64
	lastUsed atomic.Int64
	logs     map[string][]router.Log
}

func (h *hostLogs) Get(topic string, p int32) (router.Log, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	h.version.Load()
	h.lastUsed.Store(time.Now().UnixNano())
	logs := h.logs[topic]
	if int(p) >= len(logs) {
		return nil, fmt.Errorf("no log %s/%d", topic, p)
	}
	return logs[p], nil
}

func (h *hostLogs) GetMany(topic string, ps []int32, into []router.Log) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	h.version.Load()
	h.lastUsed.Store(time.Now().UnixNano())
	logs := h.logs[topic]
	for i, p := range ps {
		if int(p) >= len(logs) {
			return fmt.Errorf("no log %s/%d", topic, p)
		}
		into[i] = logs[p]
	}
	return nil
}

// getOnly hides GetMany, so the scan resolves one log at a time.
type getOnly struct{ logs router.Logs }

func (g getOnly) Get(topic string, p int32) (router.Log, error) { return g.logs.Get(topic, p) }

// BenchmarkAppendedToDelivery measures the latency from Appended to the parked consumer
// holding the record, and reports its p50 and p99.
func BenchmarkAppendedToDelivery(b *testing.B) {
	logs := &routertest.MemLogs{}
	routes := &routertest.Routes{}
	routes.Set("t", 0)
	log := logs.Log("t", 0)
	node := benchNode(b, logs, routes)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan time.Time)
	go func() {
		for {
			msgs, err := node.Consume(ctx, "t", router.ConsumeOptions{Wait: time.Hour})
			if err != nil {
				return
			}
			at := time.Now()
			node.Ack(ctx, "t", msgs[0].Receipt)
			got <- at
		}
	}()
	var lat []time.Duration
	for b.Loop() {
		for node.Parked("t") == 0 {
			runtime.Gosched() // let the consumer park: we measure the wake, not its loop
		}
		off := log.Append(nil, []byte("x"), time.Time{})
		start := time.Now()
		node.Appended("t", 0, off+1)
		lat = append(lat, (<-got).Sub(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkForwardedAcks acks records of a partition another node owns over an in-memory
// routertest.Network, with N acks in flight at once (each goroutine acks again as soon as its
// previous ack is answered) and a round trip of D. Sub-benchmarks:
//
//	baseline-rpc/rtt=D:       one bare round trip on the same network, what an unbatched ack costs
//	inflight=N/rtt=D:         the default window; past it, acks coalesce into AckBatches
//	single/inflight=N/rtt=D:  coalescing off: an AckWindow no ack ever waits behind, so every
//	                          ack is its own RPC and none ever queues
//	client-batch=64/...:      clients that ack 64 handles per Node.AckBatch
//	async/inflight=N/rtt=D:   one client calling Node.AckAsync, N acks unanswered at most
//	baseline-park/inflight=N: no node and no network: N goroutines each queue a request and
//	                          park on a channel until one goroutine, taking up to 64 at a
//	                          time, readies it; the runtime's share of a blocking ack with N
//	                          in flight, a floor under inflight=N
//
// Each reports rpcs/ack and cpu-ns/ack: the process's CPU time (user+sys, both nodes and the
// network, from getrusage) over the timed acks, divided by the acks. Targets: at most 0.25
// RPCs per ack at 512 in flight with a 1 ms round trip, never more than one RPC per ack, and
// at most 1.5 µs of CPU per forwarded ack.
func BenchmarkForwardedAcks(b *testing.B) {
	rtts := []struct {
		name string
		rtt  time.Duration
	}{{"0", 0}, {"200us", 200 * time.Microsecond}, {"1ms", time.Millisecond}}
	for _, rtt := range rtts {
		b.Run("baseline-rpc/rtt="+rtt.name, func(b *testing.B) {
			net := &routertest.Network{RTT: rtt.rtt}
			net.Join("owner", func(context.Context, string, []byte) ([]byte, error) { return []byte{0, 0}, nil })
			transport := net.Transport("fwd")
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				if _, err := transport.Call(context.Background(), "owner", []byte{1}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/ack")
		})
	}
	for _, inFlight := range []int{64, 512} {
		b.Run(fmt.Sprintf("baseline-park/inflight=%d", inFlight), func(b *testing.B) {
			benchParkReady(b, inFlight)
		})
	}
	for _, single := range []bool{false, true} {
		prefix := ""
		if single {
			prefix = "single/"
		}
		for _, inFlight := range []int{1, 64, 256, 512} {
			for _, rtt := range rtts {
				b.Run(fmt.Sprintf("%sinflight=%d/rtt=%s", prefix, inFlight, rtt.name), func(b *testing.B) {
					benchForwardedAcks(b, inFlight, rtt.rtt, single, blockingAcks)
				})
			}
		}
	}
	// Clients that ack many handles at once (Node.AckBatch, one RPC per 64 handles of an
	// owner): inFlight goroutines each acking 64 at a time.
	for _, inFlight := range []int{1, 8} {
		for _, rtt := range rtts {
			b.Run(fmt.Sprintf("client-batch=64/inflight=%d/rtt=%s", inFlight, rtt.name), func(b *testing.B) {
				benchForwardedAcks(b, inFlight, rtt.rtt, false, 64)
			})
		}
	}
	// A client that acks one record at a time without waiting (Node.AckAsync): one goroutine
	// with up to inFlight acks unanswered.
	for _, inFlight := range []int{1, 64, 512} {
		for _, rtt := range rtts {
			b.Run(fmt.Sprintf("async/inflight=%d/rtt=%s", inFlight, rtt.name), func(b *testing.B) {
				benchForwardedAcks(b, inFlight, rtt.rtt, false, asyncAcks)
			})
		}
	}
}

// benchParkReady is the floor under a blocking ack with inFlight in flight: goroutines that
// queue a request and park until a draining goroutine answers it, 64 at a time, and nothing
// else (a slot of the lane, with no RPC).
func benchParkReady(b *testing.B, inFlight int) {
	var mu sync.Mutex
	var queue []chan struct{}
	draining := false
	drain := func() {
		for {
			mu.Lock()
			batch := queue[:min(len(queue), 64)]
			queue = queue[len(batch):]
			if len(batch) == 0 {
				draining = false
				mu.Unlock()
				return
			}
			mu.Unlock() // appends go after batch: it stays as it is
			for _, answer := range batch {
				answer <- struct{}{}
			}
		}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			answer := make(chan struct{}, 1)
			for next.Add(1) <= int64(b.N) {
				mu.Lock()
				queue = append(queue, answer)
				start := !draining
				draining = true
				mu.Unlock()
				if start {
					go drain()
				}
				<-answer
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/ack")
}

// How benchForwardedAcks's clients ack: a number of handles per call (Ack for one,
// AckBatch for more), or asyncAcks.
const (
	blockingAcks = 1
	// asyncAcks: one goroutine calls AckAsync for every handle, with at most inFlight acks
	// not yet answered.
	asyncAcks = 0
)

// benchForwardedAcks runs b.N forwarded acks from inFlight goroutines, each acking perCall
// handles at a time: with Ack for one, with AckBatch for more; or, with perCall asyncAcks,
// from one goroutine that keeps up to inFlight AckAsyncs unanswered.
func benchForwardedAcks(b *testing.B, inFlight int, rtt time.Duration, single bool, perCall int) {
	net := &routertest.Network{RTT: rtt}
	window := 0 // the default
	if single {
		window = 1 << 30 // never reached: every ack leaves at once, alone
	}
	owner, fwd := forwardingPair(b, net.Transport("fwd"), window)
	net.Join("owner", owner.Serve)
	// A feeder delivers the records on the owner a little ahead of the acks, so that the
	// owner holds about as many leases as its consumers have in hand (a few times the acks
	// in flight) rather than all b.N of them, whose per-tick snapshot, map and expiry heap
	// would be charged to the acks. It runs on a thread of its own, whose CPU time is taken
	// out of the figure where the system reports a thread's time (Linux). It refills the
	// channel only once it is half empty (the ackers signal room): a thread locked to its
	// goroutine costs a futex wake-up and a handoff of the scheduler each time it is readied,
	// which, once per ack, would be charged to the acks (the thread's own CPU is subtracted,
	// not what readying it costs the others).
	handles := make(chan router.Handle, max(4*inFlight, 1024))
	room := make(chan struct{}, 1)
	take := func() (router.Handle, bool) {
		h, ok := <-handles
		if len(handles) <= cap(handles)/2 {
			select {
			case room <- struct{}{}:
			default:
			}
		}
		return h, ok
	}
	var feederCPU atomic.Int64
	feederDone := make(chan struct{})
	before := net.Calls()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	go func() {
		defer close(feederDone)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start, ok := cputime.Thread()
		var msgs []router.Message // reused: the feeder allocates little, for the GC to charge to the acks
		for fed := 0; fed < b.N; {
			for len(handles) > cap(handles)/2 {
				<-room
			}
			want := min(cap(handles)-len(handles), b.N-fed)
			for want > 0 {
				var err error
				msgs, err = owner.ConsumeAppend(context.Background(), msgs[:0], "t", router.ConsumeOptions{Max: min(100, want)})
				if err != nil || len(msgs) == 0 {
					b.Error(err, len(msgs))
					fed = b.N
					break
				}
				for _, m := range msgs {
					handles <- m.Receipt
				}
				fed += len(msgs)
				want -= len(msgs)
			}
		}
		close(handles)
		if end, _ := cputime.Thread(); ok {
			feederCPU.Store(end - start)
		}
	}()
	var wg sync.WaitGroup
	clients := inFlight
	if perCall == asyncAcks {
		clients = 0
		wg.Go(func() {
			ackAsyncAll(fwd, inFlight, take, func(err error) { b.Error(err) })
		})
	}
	for range clients {
		wg.Go(func() {
			if perCall == blockingAcks {
				for h, ok := take(); ok; h, ok = take() {
					if err := fwd.Ack(context.Background(), "t", h); err != nil {
						b.Error(err)
					}
				}
				return
			}
			batch := make([]router.Handle, 0, perCall)
			send := func() {
				for _, err := range fwd.AckBatch(context.Background(), "t", batch) {
					if err != nil {
						b.Error(err)
					}
				}
				batch = batch[:0]
			}
			for h, ok := take(); ok; h, ok = take() {
				if batch = append(batch, h); len(batch) == perCall {
					send()
				}
			}
			if len(batch) > 0 {
				send()
			}
		})
	}
	wg.Wait()
	<-feederDone
	cpu = cputime.Process() - cpu - feederCPU.Load()
	b.StopTimer()
	b.ReportMetric(float64(net.Calls()-before)/float64(b.N), "rpcs/ack")
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/ack")
}

// forwardingPair starts the two nodes of a forwarded-ack benchmark over one MemLogs, with
// b.N records on partition 0 of topic "t" and the topic's caps out of the way: the owner of
// the partition, which the caller makes reachable as "owner" on transport's network, and a
// node that forwards its acks there through transport with the given AckWindow (0: the
// default). Both close when b ends.
func forwardingPair(b *testing.B, transport router.Transport, window int) (owner, fwd *router.Node) {
	b.Helper()
	logs := &routertest.MemLogs{}
	log := logs.Log("t", 0)
	for range b.N {
		log.Append(nil, []byte("x"), time.Time{})
	}
	topic := func(string) router.TopicConfig {
		return router.TopicConfig{MaxInFlight: 1 << 30, MaxAckedAhead: 1 << 30, VisibilityTimeout: time.Hour}
	}
	ownerRoutes, fwdRoutes := &routertest.Routes{}, &routertest.Routes{}
	ownerRoutes.Set("t", 0)
	fwdRoutes.SetRemote("t", "owner", 0)
	owner, err := router.New(router.Config{Logs: logs, Routes: ownerRoutes, Dir: "/o", FS: crashfs.New(), Topic: topic})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { owner.Close() })
	fwd, err = router.New(router.Config{Logs: logs, Routes: fwdRoutes, Dir: "/f", FS: crashfs.New(), Transport: transport, AckWindow: window})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fwd.Close() }) // first: cleanups run last in, first out
	return owner, fwd
}

// ackAsyncAll calls fwd.AckAsync for every handle next gives, with at most inFlight acks
// unanswered (a buffered channel as the counting semaphore, released in done), and returns
// once every one has been answered; failed gets each error.
func ackAsyncAll(fwd *router.Node, inFlight int, next func() (router.Handle, bool), failed func(error)) {
	unanswered := make(chan struct{}, inFlight) // one token per ack not yet answered
	done := func(err error) {
		if err != nil {
			failed(err)
		}
		<-unanswered
	}
	for h, ok := next(); ok; h, ok = next() {
		unanswered <- struct{}{}
		fwd.AckAsync("t", h, done)
	}
	for range inFlight { // every ack answered
		unanswered <- struct{}{}
	}
}

// BenchmarkConsumeAck is the node's throughput with N consumers on one topic of 12
// partitions over routertest.MemLogs: each consumer consumes a batch (Max 1 or 100, no
// wait) and acks every record it got (Ack for one, AckBatch for a batch), until b.N records
// are consumed and acked between them. One op is one record consumed and acked. Every record
// is produced before the timer starts (b.N plus a batch per consumer, spread evenly over the
// partitions), so no consumer ever finds the topic empty; each consumer claims its batch
// size from what is left to do before it consumes, so together they take exactly b.N.
// The topic's caps are raised out of the way. Reported: ns/op, records/s and allocations
// per record. Targets: consumers=64 at least 0.9x
// the records/s of consumers=1 at each batch size; batch=100 at most 0.35x the cost per
// record of batch=1.
func BenchmarkConsumeAck(b *testing.B) {
	for _, batch := range []int{1, 100} {
		for _, consumers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("batch=%d/consumers=%d", batch, consumers), func(b *testing.B) {
				benchConsumeAck(b, batch, consumers, consumeAckOptions{})
			})
		}
	}
}

// BenchmarkConsumeAckGranted is BenchmarkConsumeAck with Config.Ownership: every partition
// granted for an hour, so what it measures is what the grant costs a node that holds it (a
// clock reading after each apply, and one after each partition's reads). Compare it with
// BenchmarkConsumeAck in one run: the target is under 3 % more per record.
func BenchmarkConsumeAckGranted(b *testing.B) {
	for _, batch := range []int{1, 100} {
		for _, consumers := range []int{1, 8} {
			b.Run(fmt.Sprintf("batch=%d/consumers=%d", batch, consumers), func(b *testing.B) {
				benchConsumeAck(b, batch, consumers, consumeAckOptions{ownership: hourGrant{time.Now().Add(time.Hour)}})
			})
		}
	}
}

// hourGrant grants every partition, under one epoch, until a time.
type hourGrant struct{ until time.Time }

func (g hourGrant) Grant(string, int32) (router.Grant, bool) {
	return router.Grant{Epoch: 1, Left: time.Until(g.until)}, true
}

// BenchmarkConsumeAckDeadLetter is BenchmarkConsumeAck with MaxDeliveries and without, in
// one run: what counting attempts costs a local delivery (each scan's leases count on disk
// once the scan hands them over, a lock of the shard's more a scan step, and the state
// written at every commit tick).
func BenchmarkConsumeAckDeadLetter(b *testing.B) {
	for _, batch := range []int{1, 100} {
		for _, consumers := range []int{1, 8} {
			for _, max := range []int{0, 5} {
				b.Run(fmt.Sprintf("batch=%d/consumers=%d/maxDeliveries=%d", batch, consumers, max), func(b *testing.B) {
					benchConsumeAck(b, batch, consumers, consumeAckOptions{maxDeliveries: max})
				})
			}
		}
	}
}

// BenchmarkConsumeAckHeaders is BenchmarkConsumeAck with one consumer, its records without
// headers and with two (a trace id and a content type, 50 bytes in all, as a Kafka
// producer's instrumentation adds): what headers cost a local delivery, MemLog's copy of
// them included. Compare the two in one run.
func BenchmarkConsumeAckHeaders(b *testing.B) {
	two := []router.Header{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-01")}, {Key: "content-type", Value: []byte("json")}}
	for _, batch := range []int{1, 100} {
		for _, headers := range [][]router.Header{nil, two} {
			b.Run(fmt.Sprintf("batch=%d/headers=%d", batch, len(headers)), func(b *testing.B) {
				benchConsumeAck(b, batch, 1, consumeAckOptions{headers: headers})
			})
		}
	}
}

// BenchmarkConsumeAckOrdered is BenchmarkConsumeAck with records keyed over 10,000 keys,
// on a topic that is not ordered and on one that is (TopicConfig.Ordered): what ordering by
// key costs per record (binding each record to its key as it is read, and a consume that
// finds a key held skipping its records). Compare the two in one run: the target is at most
// 1.3x the CPU per record.
func BenchmarkConsumeAckOrdered(b *testing.B) {
	for _, batch := range []int{1, 100} {
		for _, consumers := range []int{1, 64} {
			for _, ordered := range []bool{false, true} {
				b.Run(fmt.Sprintf("batch=%d/consumers=%d/ordered=%t", batch, consumers, ordered), func(b *testing.B) {
					benchConsumeAck(b, batch, consumers, consumeAckOptions{keys: 10_000, ordered: ordered})
				})
			}
		}
	}
}

// consumeAckOptions vary benchConsumeAck's records and topic.
type consumeAckOptions struct {
	headers   []router.Header
	ownership router.Ownership
	keys      int  // records keyed over this many keys, round robin; 0: no keys
	ordered   bool // TopicConfig.Ordered
	// maxDeliveries is TopicConfig.MaxDeliveries: attempts counted, and persisted.
	maxDeliveries int
}

func benchConsumeAck(b *testing.B, batch, consumers int, opts consumeAckOptions) {
	const partitions = 12
	logs := &routertest.MemLogs{}
	routes := &routertest.Routes{}
	parts := make([]int32, partitions)
	for p := range parts {
		parts[p] = int32(p)
	}
	routes.Set("t", parts...)
	value := []byte("a payload of 32 bytes, or so...")
	per := (b.N+consumers*batch)/partitions + 1
	var keys [][]byte
	for k := range opts.keys {
		keys = append(keys, fmt.Appendf(nil, "key-%d", k))
	}
	for i, p := range parts {
		log := logs.Log("t", p)
		for j := range per {
			rec := router.Record{Value: value, Headers: opts.headers}
			if len(keys) > 0 {
				rec.Key = keys[(j*partitions+i)%len(keys)]
			}
			log.AppendRecord(rec)
		}
	}
	// The caps are raised so that they never gate a consume: with 64 consumers acking
	// batches of 100 out of order, the acked-ahead set of a partition passes the default
	// 1024 and only its frontier hole would be handed out.
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New(), Ownership: opts.ownership,
		Topic: func(string) router.TopicConfig {
			return router.TopicConfig{MaxInFlight: 1 << 20, MaxAckedAhead: 1 << 20, Ordered: opts.ordered, MaxDeliveries: opts.maxDeliveries}
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	for range consumers {
		wg.Go(func() {
			handles := make([]router.Handle, 0, batch)
			var msgs []router.Message
			for {
				rest := left.Add(-int64(batch))
				want := int64(batch)
				if rest < 0 {
					want += rest
				}
				if want <= 0 {
					return
				}
				var err error
				msgs, err = node.ConsumeAppend(ctx, msgs[:0], "t", router.ConsumeOptions{Max: int(want)})
				if err == nil && len(msgs) == 0 && opts.ordered {
					// What is left waits behind keys other consumers hold: they ack soon.
					left.Add(want)
					runtime.Gosched()
					continue
				}
				if err != nil || len(msgs) == 0 {
					b.Error("starved:", err)
					return
				}
				left.Add(want - int64(len(msgs)))
				if batch == 1 {
					if err := node.Ack(ctx, "t", msgs[0].Receipt); err != nil {
						b.Error(err)
					}
					continue
				}
				handles = handles[:0]
				for i := range msgs {
					handles = append(handles, msgs[i].Receipt)
				}
				for _, err := range node.AckBatch(ctx, "t", handles) {
					if err != nil {
						b.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/rec")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	if opts.ordered {
		// Records deferred behind a key another consume held (each read twice), and
		// consumes that found nothing (every record left waiting behind held keys).
		st := node.Stats()
		b.ReportMetric(float64(st.Shards.Deferred)/float64(b.N), "deferred/rec")
		b.ReportMetric(float64(st.EmptyConsumes)/float64(b.N), "empty/rec")
	}
}
