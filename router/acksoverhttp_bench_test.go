package router_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/internal/cputime"
	"narad.dev/consume/router"
	"narad.dev/consume/router/nodehttp"
)

// BenchmarkAcksOverHTTP acks records of a partition node "owner" holds through node "fwd",
// which forwards them over real loopback HTTP/2 cleartext (a nodehttp.Transport to the
// owner's nodehttp.Handler), with 512 acks unanswered at a time: from 512 goroutines each
// calling Ack (ack=blocking), or from one goroutine calling AckAsync (ack=async). The records
// are consumed on the owner before the timer starts. Reported: acks/s, the process's CPU time
// per ack (both nodes and both ends of HTTP), and RPCs per ack.
func BenchmarkAcksOverHTTP(b *testing.B) {
	for _, async := range []bool{false, true} {
		name := "ack=blocking/inflight=512"
		if async {
			name = "ack=async/inflight=512"
		}
		b.Run(name, func(b *testing.B) { benchAcksOverHTTP(b, async, 512) })
	}
}

func benchAcksOverHTTP(b *testing.B, async bool, inFlight int) {
	var owner *router.Node // set below, before any frame is sent
	var rpcs atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("/node", &nodehttp.Handler{Serve: func(ctx context.Context, from string, frame []byte) ([]byte, error) {
		rpcs.Add(1)
		return owner.Serve(ctx, from, frame)
	}})
	srv := httptest.NewUnstartedServer(mux)
	nodehttp.ConfigureServer(srv.Config)
	srv.Start()
	defer srv.Close()
	tr, err := nodehttp.NewTransport(nodehttp.TransportConfig{Self: "fwd", Unframed: true, // HTTP/2, as measured
		Resolve: func(string) (string, bool) { return srv.URL + "/node", true }})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	owner, fwd := forwardingPair(b, tr, 0)
	handles := make([]router.Handle, 0, b.N)
	for len(handles) < b.N {
		msgs, err := owner.Consume(context.Background(), "t", router.ConsumeOptions{Max: min(100, b.N-len(handles))})
		if err != nil || len(msgs) == 0 {
			b.Fatal(err, len(msgs))
		}
		for _, m := range msgs {
			handles = append(handles, m.Receipt)
		}
	}
	var taken, failed atomic.Int64
	take := func() (router.Handle, bool) {
		if i := taken.Add(1) - 1; i < int64(len(handles)) {
			return handles[i], true
		}
		return router.Handle{}, false
	}
	fail := func(error) { failed.Add(1) }
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cputime.Process()
	if async {
		ackAsyncAll(fwd, inFlight, take, fail)
	} else {
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				for h, ok := take(); ok; h, ok = take() {
					if err := fwd.Ack(context.Background(), "t", h); err != nil {
						fail(err)
					}
				}
			})
		}
		wg.Wait()
	}
	elapsed, used := time.Since(start), cputime.Process()-cpu
	b.StopTimer()
	if err := fwd.Close(); err != nil {
		b.Fatal(err)
	}
	if failed.Load() > 0 {
		b.Fatalf("%d acks failed", failed.Load())
	}
	if acked := owner.Stats().Shards.Acked; acked != uint64(b.N) {
		b.Fatalf("the owner acked %d of %d", acked, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acks/s")
	b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/ack")
	b.ReportMetric(float64(rpcs.Load())/float64(b.N), "rpcs/ack")
}
