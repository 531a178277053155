package nodehttp_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/nodehttp"
)

var _ router.ContextTransport = (*nodehttp.Transport)(nil)

// A frame goes as the body of one POST, in the mode asked for, with the caller's name
// (escaped on the way, intact at the other end); the reply's body comes back whole.
func TestRoundTrip(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		srv := startServer(t, &nodehttp.Handler{Serve: echo})
		self := "node a/ü%+ é"
		tr := newTransport(t, m, self, peers{"b": srv.URL})
		ctx := context.Background()

		reply, err := tr.Call(ctx, "b", []byte("frame"))
		require.NoError(t, err)
		assert.Equal(t, self+":frame", string(reply))
		reply, err = tr.Call(ctx, "b", nil)
		require.NoError(t, err)
		assert.Equal(t, self+":", string(reply), "an empty frame")
		assert.True(t, srv.sawOnly(m.proto), "every request came in %s", m.proto)
	})
}

// Replies are read to their end, so calls one after another share one connection in
// either mode.
func TestConnectionReuse(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		srv := startServer(t, &nodehttp.Handler{Serve: echo})
		tr := newTransport(t, m, "a", peers{"b": srv.URL})
		for i := range 50 {
			frame := bytes.Repeat([]byte{byte(i)}, i*997) // some above the handler's small-write buffering
			reply, err := tr.Call(context.Background(), "b", frame)
			require.NoError(t, err)
			require.Equal(t, append([]byte("a:"), frame...), reply)
		}
		// One connection serves them all. Once in a few thousand runs, on a loaded machine
		// under -race, the standard library's HTTP/2 client dialled a second one (seen once in
		// CI); a reply left unread would instead cost a connection per call.
		assert.LessOrEqual(t, srv.conns.Load(), int64(2), "one connection for every call")
	})
}

func TestUnknownNode(t *testing.T) {
	srv := startServer(t, &nodehttp.Handler{Serve: echo})
	tr := newTransport(t, modes[0], "a", peers{"b": srv.URL})
	_, err := tr.Call(context.Background(), "c", []byte("x"))
	require.ErrorIs(t, err, nodehttp.ErrUnknownNode)
	assert.Contains(t, err.Error(), `"c"`)
	assert.Zero(t, srv.requests.Load())
}

func TestNewTransportRefusesAnIncompleteConfig(t *testing.T) {
	resolve := peers{}.resolve
	for _, cfg := range []nodehttp.TransportConfig{
		{Resolve: resolve},
		{Self: "a"},
		{Self: "a", Resolve: resolve, MaxConnsPerHost: -1},
		{Self: "a", Resolve: resolve, MaxIdleConnsPerHost: -1},
	} {
		_, err := nodehttp.NewTransport(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
}

// A peer that is down (nothing listens at its address) is an error at once: the call has no
// deadline, so a call that waited would hang the test.
func TestPeerDown(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		tr := newTransport(t, m, "a", peers{"b": "http://" + addr + "/node"})
		_, err = tr.Call(context.Background(), "b", []byte("x"))
		require.Error(t, err)
		var opErr *net.OpError
		assert.ErrorAs(t, err, &opErr, "the dial failed")
	})
}

// A peer that does not answer holds the call until the caller's context ends, and the call
// then fails with the context's error: a handler that hangs, and a listener that accepts
// connections and never reads them.
func TestPeerHangs(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		t.Run("handler", func(t *testing.T) {
			entered := make(chan struct{}, 1)
			released := make(chan error, 1)
			srv := startServer(t, &nodehttp.Handler{Serve: func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
				entered <- struct{}{}
				<-ctx.Done() // the caller gave up: the request's context ends
				released <- ctx.Err()
				return nil, ctx.Err()
			}})
			tr := newTransport(t, m, "a", peers{"b": srv.URL})
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				<-entered
				cancel()
			}()
			_, err := tr.Call(ctx, "b", []byte("x"))
			require.ErrorIs(t, err, context.Canceled)
			assert.ErrorIs(t, <-released, context.Canceled, "the handler's context ended with the call")
		})
		t.Run("listener", func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer ln.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				if c, err := ln.Accept(); err == nil {
					accepted <- c
				}
			}()
			tr := newTransport(t, m, "a", peers{"b": "http://" + ln.Addr().String()})
			ctx, cancel := context.WithCancel(context.Background())
			held := make(chan net.Conn, 1)
			go func() {
				c := <-accepted // the request reached a peer that will never answer
				cancel()
				held <- c
			}()
			_, err = tr.Call(ctx, "b", []byte("x"))
			require.ErrorIs(t, err, context.Canceled)
			require.NoError(t, (<-held).Close())
		})
	})
}

// The bound holds both ways: a frame over it is not sent, a reply over it is not read past
// one byte over, a request body over it is refused with 413 (declared or not), and a
// reply over it is refused by the handler with 500. Frames of exactly the bound cross.
func TestOversizeFrames(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		over := make([]byte, nodehttp.MaxFrame+1)
		var served atomic.Int64
		mux := http.NewServeMux()
		mux.Handle("/echo", &nodehttp.Handler{Serve: func(_ context.Context, _ string, frame []byte) ([]byte, error) {
			served.Add(1)
			return frame, nil
		}})
		mux.Handle("/big-reply", &nodehttp.Handler{Serve: func(context.Context, string, []byte) ([]byte, error) {
			return over, nil
		}})
		mux.HandleFunc("/raw-declared", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(over)))
			w.Write(over)
		})
		mux.HandleFunc("/raw-streamed", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush() // no length declared: the reply streams
			for chunk := bytes.NewReader(over); chunk.Len() > 0; {
				if _, err := io.CopyN(w, chunk, 1<<20); err != nil {
					return // the caller stopped reading
				}
			}
		})
		srv := startServer(t, mux)
		tr := newTransport(t, m, "a", peers{
			"echo": srv.URL + "/echo", "big-reply": srv.URL + "/big-reply",
			"raw-declared": srv.URL + "/raw-declared", "raw-streamed": srv.URL + "/raw-streamed",
		})
		ctx := context.Background()

		_, err := tr.Call(ctx, "echo", over)
		require.ErrorIs(t, err, nodehttp.ErrFrameTooLarge, "not sent")
		assert.Zero(t, srv.requests.Load())

		at := over[:nodehttp.MaxFrame]
		reply, err := tr.Call(ctx, "echo", at)
		require.NoError(t, err, "a frame of exactly the bound, both ways")
		assert.Len(t, reply, nodehttp.MaxFrame)
		assert.Equal(t, int64(1), served.Load())

		_, err = tr.Call(ctx, "big-reply", []byte("x"))
		var status *nodehttp.StatusError
		require.ErrorAs(t, err, &status)
		assert.Equal(t, http.StatusInternalServerError, status.Code)
		assert.Contains(t, status.Text, "reply of")

		_, err = tr.Call(ctx, "raw-declared", []byte("x"))
		require.ErrorIs(t, err, nodehttp.ErrFrameTooLarge, "refused on its declared length")
		_, err = tr.Call(ctx, "raw-streamed", []byte("x"))
		require.ErrorIs(t, err, nodehttp.ErrFrameTooLarge, "refused one byte past the bound")

		client := rawClient(t, m)
		post := func(body io.Reader) int {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/echo", body)
			require.NoError(t, err)
			req.Header.Set(nodehttp.Header, "a")
			resp, err := client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			io.Copy(io.Discard, resp.Body)
			return resp.StatusCode
		}
		assert.Equal(t, http.StatusRequestEntityTooLarge, post(bytes.NewReader(over)), "declared length over the bound")
		assert.Equal(t, http.StatusRequestEntityTooLarge, post(struct{ io.Reader }{bytes.NewReader(over)}), "undeclared length, read past the bound")
		assert.Equal(t, int64(1), served.Load(), "the node saw neither")
	})
}

// The handler refuses what is not a frame from a named, authorized node, before the node
// sees it, and a Serve error is a 500; the transport returns each refusal as a
// *StatusError.
func TestHandlerRefusals(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		var served atomic.Int64
		var authorized sync.Map
		h := &nodehttp.Handler{
			Serve: func(_ context.Context, from string, frame []byte) ([]byte, error) {
				served.Add(1)
				if string(frame) == "fail" {
					return nil, errors.New("the node failed")
				}
				return echo(context.Background(), from, frame)
			},
			Authorize: func(r *http.Request, from string) error {
				authorized.Store(from, r.Proto)
				if from == "intruder" {
					return errors.New("intruder may not speak here")
				}
				return nil
			},
		}
		srv := startServer(t, h)
		client := rawClient(t, m)
		do := func(method, from string, set bool, body string) (int, string) {
			req, err := http.NewRequest(method, srv.URL, strings.NewReader(body))
			require.NoError(t, err)
			if set {
				req.Header.Set(nodehttp.Header, from)
			}
			resp, err := client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			text, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(text)
		}
		code, _ := do(http.MethodPost, "", false, "x")
		assert.Equal(t, http.StatusBadRequest, code, "no header")
		code, _ = do(http.MethodPost, "", true, "x")
		assert.Equal(t, http.StatusBadRequest, code, "an empty header")
		code, _ = do(http.MethodPost, "%zz", true, "x")
		assert.Equal(t, http.StatusBadRequest, code, "a header that is not path-escaped")
		code, _ = do(http.MethodGet, "a", true, "")
		assert.Equal(t, http.StatusMethodNotAllowed, code)
		code, text := do(http.MethodPost, "intruder", true, "x")
		assert.Equal(t, http.StatusForbidden, code)
		assert.Contains(t, text, "intruder may not speak here")
		assert.Zero(t, served.Load(), "the node saw none of them")
		code, text = do(http.MethodPost, "a", true, "x")
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "a:x", text)
		proto, _ := authorized.Load("a")
		assert.Equal(t, m.proto, proto, "Authorize sees the request")

		tr := newTransport(t, m, "intruder", peers{"b": srv.URL})
		_, err := tr.Call(context.Background(), "b", []byte("x"))
		var status *nodehttp.StatusError
		require.ErrorAs(t, err, &status)
		assert.Equal(t, http.StatusForbidden, status.Code)
		assert.Equal(t, "b", status.Node)

		tr = newTransport(t, m, "a", peers{"b": srv.URL})
		_, err = tr.Call(context.Background(), "b", []byte("fail"))
		require.ErrorAs(t, err, &status)
		assert.Equal(t, http.StatusInternalServerError, status.Code)
		assert.Contains(t, status.Text, "the node failed")

		var none nodehttp.Handler
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x"))
		req.Header.Set(nodehttp.Header, "a")
		none.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusInternalServerError, rec.Code, "a handler without Serve")
	})
}

// Whatever keeps a complete 200 reply from coming back is an error: another status, a
// redirect (not followed), a reset before the reply, a reply cut short.
func TestBrokenReplies(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		mux := http.NewServeMux()
		mux.HandleFunc("/unavailable", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "draining", http.StatusServiceUnavailable)
		})
		mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		})
		mux.HandleFunc("/reset", func(w http.ResponseWriter, r *http.Request) {
			panic(http.ErrAbortHandler) // the connection (HTTP/1.1) or the stream (HTTP/2) is reset
		})
		mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.Write(make([]byte, 10))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		})
		mux.HandleFunc("/cut-streamed", func(w http.ResponseWriter, r *http.Request) {
			w.Write(make([]byte, 10))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		})
		srv := startServer(t, mux)
		p := peers{}
		for _, path := range []string{"unavailable", "redirect", "reset", "cut", "cut-streamed"} {
			p[path] = srv.URL + "/" + path
		}
		tr := newTransport(t, m, "a", p)
		ctx := context.Background()

		_, err := tr.Call(ctx, "unavailable", []byte("x"))
		var status *nodehttp.StatusError
		require.ErrorAs(t, err, &status)
		assert.Equal(t, http.StatusServiceUnavailable, status.Code)
		assert.Equal(t, "draining", status.Text)
		assert.Equal(t, "nodehttp: unavailable answered 503 Service Unavailable: draining", err.Error())

		_, err = tr.Call(ctx, "redirect", []byte("x"))
		require.ErrorAs(t, err, &status)
		assert.Equal(t, http.StatusTemporaryRedirect, status.Code)

		for _, node := range []string{"reset", "cut", "cut-streamed"} {
			reply, err := tr.Call(ctx, node, []byte("x"))
			assert.Error(t, err, node)
			assert.Nil(t, reply, node)
		}
		// The transport goes on working after all that.
		_, err = tr.Call(ctx, "unavailable", []byte("x"))
		require.ErrorAs(t, err, &status)
	})
}

// Many calls at once, to two peers, each answered with its own reply, over a bounded pool.
// Over HTTP/1.1 a connection carries one call at a time, so the bound shows as the calls a
// peer serves at once; over HTTP/2 as the connections it accepts (an HTTP/1.1 connection
// may be closed and replaced under load, an HTTP/2 one is not). A framed transport keeps
// one connection to each peer, whatever the bound: one request (its upgrade) carries every
// call.
func TestConcurrentCalls(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		const maxConns = 2
		type peer struct {
			srv                    *server
			inFlight, peak, served atomic.Int64
		}
		p := peers{}
		var all []*peer
		for _, id := range []string{"b", "c"} {
			pe := &peer{}
			pe.srv = startServer(t, &nodehttp.Handler{Serve: func(ctx context.Context, from string, frame []byte) ([]byte, error) {
				n := pe.inFlight.Add(1)
				defer pe.inFlight.Add(-1)
				pe.served.Add(1)
				for peak := pe.peak.Load(); n > peak && !pe.peak.CompareAndSwap(peak, n); peak = pe.peak.Load() {
				}
				return echo(ctx, from, frame)
			}})
			p[id] = pe.srv.URL
			all = append(all, pe)
		}
		tr := newTransportWith(t, nodehttp.TransportConfig{Self: "a", Resolve: p.resolve, HTTP1: m.http1, Unframed: !m.framed, MaxConnsPerHost: maxConns})
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 50 {
					to := []string{"b", "c"}[(g+i)%2]
					frame := fmt.Appendf(nil, "%d/%d", g, i)
					reply, err := tr.Call(context.Background(), to, frame)
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, "a:"+string(frame), string(reply))
				}
			})
		}
		wg.Wait()
		for _, pe := range all {
			assert.Equal(t, int64(16*50/2), pe.served.Load())
			assert.True(t, pe.srv.sawOnly(m.proto))
			switch {
			case m.framed:
				assert.Equal(t, int64(1), pe.srv.requests.Load(), "the upgrade alone")
				assert.Equal(t, int64(1), pe.srv.conns.Load(), "connections")
			case m.http1:
				assert.LessOrEqual(t, pe.peak.Load(), int64(maxConns), "calls served at once")
				assert.Equal(t, int64(16*50/2), pe.srv.requests.Load())
			default:
				assert.LessOrEqual(t, pe.srv.conns.Load(), int64(maxConns), "connections")
				assert.Equal(t, int64(16*50/2), pe.srv.requests.Load())
			}
		}
	})
}

// With a TLS client configuration, https URLs work: HTTP/2 over TLS by default, HTTP/1.1
// over TLS with HTTP1, and a framed connection upgraded from HTTP/1.1 over TLS with Framed;
// Authorize sees the TLS state.
func TestTLS(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		var sawTLS atomic.Bool
		var proto atomic.Value
		srv := httptest.NewUnstartedServer(&nodehttp.Handler{Serve: echo, Authorize: func(r *http.Request, _ string) error {
			sawTLS.Store(r.TLS != nil)
			proto.Store(r.Proto)
			return nil
		}})
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		roots := srv.Client().Transport.(*http.Transport).TLSClientConfig
		tr := newTransportWith(t, nodehttp.TransportConfig{Self: "a", Resolve: peers{"b": srv.URL}.resolve,
			HTTP1: m.http1, Unframed: !m.framed, TLSClientConfig: &tls.Config{RootCAs: roots.RootCAs}})
		reply, err := tr.Call(context.Background(), "b", []byte("x"))
		require.NoError(t, err)
		assert.Equal(t, "a:x", string(reply))
		assert.True(t, sawTLS.Load())
		assert.Equal(t, m.proto, proto.Load())
	})
}

// A server set up with ConfigureServer keeps what it was given and adds HTTP/2 cleartext.
func TestConfigureServer(t *testing.T) {
	var srv http.Server
	nodehttp.ConfigureServer(&srv)
	assert.True(t, srv.Protocols.HTTP1())
	assert.True(t, srv.Protocols.HTTP2())
	assert.True(t, srv.Protocols.UnencryptedHTTP2())

	var only http.Protocols
	only.SetHTTP1(true)
	srv = http.Server{Protocols: &only}
	nodehttp.ConfigureServer(&srv)
	assert.True(t, srv.Protocols.HTTP1())
	assert.False(t, srv.Protocols.HTTP2())
	assert.True(t, srv.Protocols.UnencryptedHTTP2())
	assert.False(t, only.UnencryptedHTTP2(), "the host's value is not modified")
}

// The zero config (only Self and Resolve) talks framed connections to a Handler: its first
// call upgrades one connection and every call after it, one after another or many at once,
// travels over that connection, so the server sees one request (the upgrade) on one
// connection. So do the deprecated Framed and HTTP1 (framed connections are an HTTP/1.1
// upgrade either way). Unframed sends every frame as a request of its own, none asking to
// upgrade: HTTP/2 cleartext, or HTTP/1.1 with HTTP1.
func TestDefaultIsFramed(t *testing.T) {
	const sequential, goroutines, each = 5, 16, 10
	for _, c := range []struct {
		name   string
		cfg    nodehttp.TransportConfig
		framed bool
		proto  string // of the requests the server sees
	}{
		{"zero", nodehttp.TransportConfig{}, true, "HTTP/1.1"},
		{"framed-deprecated", nodehttp.TransportConfig{Framed: true}, true, "HTTP/1.1"},
		{"http1", nodehttp.TransportConfig{HTTP1: true}, true, "HTTP/1.1"},
		{"unframed", nodehttp.TransportConfig{Unframed: true}, false, "HTTP/2.0"},
		{"unframed-http1", nodehttp.TransportConfig{Unframed: true, HTTP1: true}, false, "HTTP/1.1"},
		{"unframed-framed-deprecated", nodehttp.TransportConfig{Unframed: true, Framed: true}, false, "HTTP/2.0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var upgrades atomic.Int64
			h := &nodehttp.Handler{Serve: echo}
			srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Upgrade") != "" {
					upgrades.Add(1)
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(func() { h.Close() }) // after the transport's idle connections, before the server
			cfg := c.cfg
			cfg.Self, cfg.Resolve = "a", peers{"b": srv.URL}.resolve
			tr := newTransportWith(t, cfg)
			call := func(msg string) error {
				reply, err := tr.Call(context.Background(), "b", []byte(msg))
				if err == nil && string(reply) != "a:"+msg {
					err = fmt.Errorf("%q answered %q", msg, reply)
				}
				return err
			}
			for i := range sequential {
				require.NoError(t, call(fmt.Sprint("s", i)))
			}
			errs := make(chan error, goroutines*each)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range each {
						errs <- call(fmt.Sprint("c", g, ".", i))
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			calls := int64(sequential + goroutines*each)
			if c.framed {
				assert.Equal(t, int64(1), upgrades.Load(), "one upgrade")
				assert.Equal(t, int64(1), srv.requests.Load(), "every call over the upgraded connection")
				assert.Equal(t, int64(1), srv.conns.Load(), "one connection")
			} else {
				assert.Zero(t, upgrades.Load(), "no upgrade")
				assert.Equal(t, calls, srv.requests.Load(), "a request per call")
			}
			assert.True(t, srv.sawOnly(c.proto), "the requests came in %s", c.proto)
		})
	}
}

// TransportConfig.Header travels with every frame, and with the upgrade of a framed
// connection, where Authorize sees it; the transport's own headers are not overridden by
// it. A transport without it is refused by a handler that checks it.
func TestTransportHeader(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		h := &nodehttp.Handler{
			Serve: echo,
			Authorize: func(r *http.Request, from string) error {
				if r.Header.Get("Authorization") != "Bearer s3cret" {
					return errors.New("no token")
				}
				return nil
			},
		}
		srv := startServer(t, h)
		header := http.Header{"Authorization": {"Bearer s3cret"}, nodehttp.Header: {"impostor"}}
		tr := newTransportWith(t, nodehttp.TransportConfig{Self: "a", Resolve: peers{"b": srv.URL}.resolve, HTTP1: m.http1, Unframed: !m.framed, Header: header})
		header.Set("Authorization", "changed after") // the transport keeps its own copy
		reply, err := tr.Call(context.Background(), "b", []byte("x"))
		require.NoError(t, err)
		assert.Equal(t, "a:x", string(reply), "the node's name is the transport's, not the extra header's")

		without := newTransport(t, m, "a", peers{"b": srv.URL})
		_, err = without.Call(context.Background(), "b", []byte("x"))
		var status *nodehttp.StatusError
		require.ErrorAs(t, err, &status)
		assert.Equal(t, http.StatusForbidden, status.Code)
	})
}
