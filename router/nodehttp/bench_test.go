package nodehttp

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"narad.dev/consume/internal/cputime"
)

// BenchmarkRoundTrip measures one RPC over loopback (rpc: Transport.Call of an empty frame to
// a Handler whose Serve answers an empty reply at once) against a bare round trip of the
// same size in the same run, in each mode:
//
//	h2c, http1  bare: a POST of an empty body, through the transport's own HTTP client (the
//	            same connections), to a handler that writes nothing, read to its end
//	framed      bare: one TCP connection, each op writing a framed connection's header (13
//	            bytes) and reading the 13 a goroutine echoes: what any framing over one
//	            connection costs at least
//
// and rpc-parallel: the same RPC from 64 goroutines at once. Reported: ns/op, cpu-ns/op (the
// process's CPU, both ends, over the ops) and allocations per op. Target: rpc at most 1.2x
// bare in ns/op for h2c and http1.
func BenchmarkRoundTrip(b *testing.B) {
	for _, mode := range []struct {
		name          string
		http1, framed bool
	}{{"h2c", false, false}, {"http1", true, false}, {"framed", false, true}} {
		b.Run(mode.name, func(b *testing.B) {
			mux := http.NewServeMux()
			mux.Handle("/rpc", &Handler{Serve: func(context.Context, string, []byte) ([]byte, error) {
				return nil, nil
			}})
			mux.HandleFunc("/bare", func(http.ResponseWriter, *http.Request) {})
			srv := httptest.NewUnstartedServer(mux)
			ConfigureServer(srv.Config)
			srv.Start()
			defer srv.Close()
			rpcURL := srv.URL + "/rpc"
			tr, err := NewTransport(TransportConfig{Self: "bench", HTTP1: mode.http1, Unframed: !mode.framed,
				Resolve: func(string) (string, bool) { return rpcURL, true }})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.CloseIdleConnections()
			ctx := context.Background()
			call := func(b *testing.B) {
				if reply, err := tr.Call(ctx, "peer", nil); err != nil || len(reply) != 0 {
					b.Fatal(len(reply), err)
				}
			}

			b.Run("rpc", func(b *testing.B) {
				call(b) // the connection, dialled (and upgraded) before the timer
				b.ReportAllocs()
				b.ResetTimer()
				cpu := cputime.Process()
				for b.Loop() {
					call(b)
				}
				reportCPU(b, cpu)
			})
			b.Run("rpc-parallel", func(b *testing.B) {
				call(b)
				b.ReportAllocs()
				b.SetParallelism(32) // 64 callers on two processors
				b.ResetTimer()
				cpu := cputime.Process()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						call(b)
					}
				})
				reportCPU(b, cpu)
			})
			b.Run("bare", func(b *testing.B) {
				if mode.framed {
					benchTCPRoundTrip(b)
					return
				}
				url := srv.URL + "/bare"
				post := func() {
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, http.NoBody)
					if err != nil {
						b.Fatal(err)
					}
					resp, err := tr.rt.RoundTrip(req) // the same client, the same connections
					if err != nil {
						b.Fatal(err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK || len(body) != 0 {
						b.Fatal(resp.StatusCode, len(body), err)
					}
				}
				post()
				b.ReportAllocs()
				b.ResetTimer()
				cpu := cputime.Process()
				for b.Loop() {
					post()
				}
				reportCPU(b, cpu)
			})
		})
	}
}

// benchTCPRoundTrip is framed's bare round trip: 13 bytes each way over one loopback TCP
// connection, echoed by a goroutine.
func benchTCPRoundTrip(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	echoed := make(chan struct{})
	go func() {
		defer close(echoed)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, framedHeaderSize)
		for {
			if _, err := io.ReadFull(conn, buf); err != nil {
				return
			}
			if _, err := conn.Write(buf); err != nil {
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	frame := appendFramed(nil, kindCall, 1, nil)
	got := make([]byte, len(frame))
	trip := func() {
		if _, err := conn.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, got); err != nil || !bytes.Equal(got, frame) {
			b.Fatal(err)
		}
	}
	trip()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	for b.Loop() {
		trip()
	}
	reportCPU(b, cpu)
	conn.Close()
	<-echoed
}

// reportCPU reports the process's CPU time since cpu, per op.
func reportCPU(b *testing.B, cpu int64) {
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
}
