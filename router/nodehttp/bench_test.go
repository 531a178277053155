package nodehttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkRoundTrip measures one RPC over loopback (rpc: Transport.Call of a small frame to
// a Handler whose Serve echoes it at once) against a bare HTTP round trip in the same run
// (bare: a POST of the same frame, through the same client, to a handler that just writes a
// small body, read to its end), in both modes. Target: rpc at most 1.2x bare.
func BenchmarkRoundTrip(b *testing.B) {
	frame := bytes.Repeat([]byte{0x5a}, 48) // about an ack's frame
	for _, mode := range []struct {
		name  string
		http1 bool
	}{{"h2c", false}, {"http1", true}} {
		b.Run(mode.name, func(b *testing.B) {
			mux := http.NewServeMux()
			mux.Handle("/rpc", &Handler{Serve: func(_ context.Context, _ string, frame []byte) ([]byte, error) {
				return frame, nil
			}})
			mux.HandleFunc("/bare", func(w http.ResponseWriter, _ *http.Request) { w.Write(frame) })
			srv := httptest.NewUnstartedServer(mux)
			ConfigureServer(srv.Config)
			srv.Start()
			defer srv.Close()
			rpcURL := srv.URL + "/rpc"
			tr, err := NewTransport(TransportConfig{Self: "bench", HTTP1: mode.http1,
				Resolve: func(string) (string, bool) { return rpcURL, true }})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.CloseIdleConnections()
			ctx := context.Background()

			b.Run("rpc", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					reply, err := tr.Call(ctx, "peer", frame)
					if err != nil || len(reply) != len(frame) {
						b.Fatal(len(reply), err)
					}
				}
			})
			b.Run("bare", func(b *testing.B) {
				b.ReportAllocs()
				url := srv.URL + "/bare"
				for b.Loop() {
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(frame))
					if err != nil {
						b.Fatal(err)
					}
					resp, err := tr.rt.RoundTrip(req) // the same client, the same connections
					if err != nil {
						b.Fatal(err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK || len(body) != len(frame) {
						b.Fatal(resp.StatusCode, len(body), err)
					}
				}
			})
		})
	}
}
