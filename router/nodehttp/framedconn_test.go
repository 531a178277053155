package nodehttp

import (
	"bufio"
	"context"
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
	"testing/synctest"
	"time"
)

// upgradeAnswer is what a handler writes to switch a connection to framed calls.
const upgradeAnswer = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + Upgrade + "\r\n\r\n"

// acceptUpgrade reads a connection's upgrade request and switches it: what a Handler does
// before it serves frames.
func acceptUpgrade(conn net.Conn, br *bufio.Reader) error {
	req, err := http.ReadRequest(br)
	if err != nil {
		return err
	}
	if !wantsUpgrade(req) {
		return fmt.Errorf("not an upgrade: %v", req.Header)
	}
	_, err = io.WriteString(conn, upgradeAnswer)
	return err
}

// scriptedPeer is a loopback listener whose n-th connection (from 0) is upgraded and then
// handed to script(n, conn, reader); it closes when the test ends, once its connections did.
func scriptedPeer(t *testing.T, script func(n int, conn net.Conn, br *bufio.Reader)) (target string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(accepted.Add(1) - 1)
			wg.Go(func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				if acceptUpgrade(conn, br) == nil {
					script(n, conn, br)
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String() + "/node", accepted
}

// echoFrames answers every call on conn with "reply:" and its frame, and every ping, until
// the connection ends.
func echoFrames(conn net.Conn, br *bufio.Reader) {
	var hdr [framedHeaderSize]byte
	for {
		f, err := readFramed(br, &hdr, false)
		if err != nil {
			return
		}
		switch f.kind {
		case kindCall:
			conn.Write(appendFramed(nil, kindReply, f.id, append([]byte("reply:"), f.payload...)))
		case kindPing:
			conn.Write(appendFramed(nil, kindPong, f.id, nil))
		}
	}
}

// framedTransport is a Transport calling target, with the zero config's framed connections.
func framedTransport(t *testing.T, target string) *Transport {
	t.Helper()
	tr, err := NewTransport(TransportConfig{Self: "a", Resolve: func(string) (string, bool) { return target, true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// A peer that closes its connection in the middle of a reply fails the call in flight (the
// reply was cut short); the next call dials a new connection and is answered. So does a
// peer whose reply declares a length over the bound, or one below the header's: the
// connection is closed, its call fails, and the next call dials again.
func TestFramedPeerBreaksMidFrame(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wrong func(id uint64) []byte
		want  error
	}{
		{"cut", func(id uint64) []byte { return appendFramed(nil, kindReply, id, []byte("reply"))[:framedHeaderSize+2] }, io.ErrUnexpectedEOF},
		{"over the bound", func(id uint64) []byte { return header(9+MaxFrame+1, kindReply, id) }, ErrFrameTooLarge},
		{"below the header", func(id uint64) []byte { return header(3, kindReply, id) }, ErrMalformed},
		{"a call sent back", func(id uint64) []byte { return appendFramed(nil, kindCall, id, nil) }, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, accepted := scriptedPeer(t, func(n int, conn net.Conn, br *bufio.Reader) {
				if n > 0 {
					echoFrames(conn, br)
					return
				}
				var hdr [framedHeaderSize]byte
				if f, err := readFramed(br, &hdr, false); err == nil {
					conn.Write(tc.wrong(f.id)) // and the connection closes
				}
			})
			tr := framedTransport(t, target)
			reply, err := tr.Call(context.Background(), "b", []byte("x"))
			if !errors.Is(err, tc.want) || reply != nil {
				t.Fatalf("%q, %v; want %v", reply, err, tc.want)
			}
			reply, err = tr.Call(context.Background(), "b", []byte("y"))
			if err != nil || string(reply) != "reply:y" {
				t.Fatalf("the next call: %q, %v", reply, err)
			}
			if accepted.Load() != 2 {
				t.Fatalf("%d connections, want 2", accepted.Load())
			}
		})
	}
}

// Calls in flight on one connection are answered in whatever order the peer answers them,
// each with its own reply.
func TestFramedRepliesInAnyOrder(t *testing.T) {
	const calls = 8
	target, accepted := scriptedPeer(t, func(_ int, conn net.Conn, br *bufio.Reader) {
		var hdr [framedHeaderSize]byte
		var got []framed
		for len(got) < calls {
			f, err := readFramed(br, &hdr, false)
			if err != nil {
				return
			}
			got = append(got, f)
		}
		for i := len(got) - 1; i >= 0; i-- { // the last first
			conn.Write(appendFramed(nil, kindReply, got[i].id, append([]byte("reply:"), got[i].payload...)))
		}
		echoFrames(conn, br)
	})
	tr := framedTransport(t, target)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			frame := fmt.Sprint("call ", i)
			reply, err := tr.Call(context.Background(), "b", []byte(frame))
			if err != nil || string(reply) != "reply:"+frame {
				t.Errorf("call %d: %q, %v", i, reply, err)
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 1 {
		t.Fatalf("%d connections, want 1", accepted.Load())
	}
}

// A peer that vanished without closing the connection (it reads, and answers nothing, not
// even a ping) fails the calls in flight once a ping got no answer: one health check finds
// nothing read, pings, and the next, pingTimeout later, closes the connection. A peer that
// answers pings holds a slow call as long as it likes.
func TestFramedPeerVanishes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pongs   bool
		release time.Duration // when a peer that pongs answers the call
	}{
		{"silent", false, 0},
		{"slow", true, 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := framedTransport(t, "http://peer/node")
				pinged := make(chan struct{}, 1)
				var peer sync.WaitGroup
				defer peer.Wait()
				tr.framed.dial = func(context.Context, string, string) (net.Conn, error) {
					client, server := net.Pipe()
					peer.Go(func() {
						defer server.Close()
						br := bufio.NewReader(server)
						if acceptUpgrade(server, br) != nil {
							return
						}
						var hdr [framedHeaderSize]byte
						var call framed
						for {
							f, err := readFramed(br, &hdr, false)
							if err != nil {
								return
							}
							switch {
							case f.kind == kindCall:
								call = f
								if tc.pongs {
									time.AfterFunc(tc.release, func() {
										server.Write(appendFramed(nil, kindReply, call.id, []byte("late")))
									})
								}
							case f.kind == kindPing && tc.pongs:
								server.Write(appendFramed(nil, kindPong, f.id, nil))
							case f.kind == kindPing:
								select {
								case pinged <- struct{}{}:
								default:
								}
							}
						}
					})
					return client, nil
				}
				start := time.Now()
				reply, err := tr.Call(context.Background(), "b", []byte("x"))
				if tc.pongs {
					if err != nil || string(reply) != "late" || time.Since(start) != tc.release {
						t.Fatalf("%q, %v after %v", reply, err, time.Since(start))
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), "ping") {
					t.Fatalf("%q, %v", reply, err)
				}
				if took := time.Since(start); took != pingAfter+pingTimeout {
					t.Fatalf("failed after %v, want %v", took, pingAfter+pingTimeout)
				}
				select {
				case <-pinged:
				default:
					t.Fatal("no ping reached the peer")
				}
			})
		})
	}
}

// A connection with no call in flight is closed once nothing was read on it for
// idleConnTimeout (found by the next health check), and the next call dials again.
func TestFramedIdleConnectionCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := framedTransport(t, "http://peer/node")
		var dials atomic.Int64
		closed := make(chan time.Time, 2)
		var peer sync.WaitGroup
		defer peer.Wait()
		tr.framed.dial = func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			client, server := net.Pipe()
			peer.Go(func() {
				defer server.Close()
				br := bufio.NewReader(server)
				if acceptUpgrade(server, br) == nil {
					echoFrames(server, br)
				}
				closed <- time.Now()
			})
			return client, nil
		}
		reply, err := tr.Call(context.Background(), "b", []byte("x"))
		if err != nil || string(reply) != "reply:x" {
			t.Fatal(reply, err)
		}
		last := time.Now()
		at := <-closed
		if idle := at.Sub(last); idle < idleConnTimeout || idle > idleConnTimeout+pingAfter {
			t.Fatalf("closed after %v idle, want %v to %v", idle, idleConnTimeout, idleConnTimeout+pingAfter)
		}
		if reply, err := tr.Call(context.Background(), "b", []byte("y")); err != nil || string(reply) != "reply:y" || dials.Load() != 2 {
			t.Fatalf("the next call: %q, %v after %d dials", reply, err, dials.Load())
		}
	})
}

// A handler that does not upgrade (a release before framed connections, or something between
// the nodes that drops the Upgrade header) answers the upgrade with a plain reply: the call
// goes as a plain POST, and so do the calls after it, without asking again.
func TestFramedFallsBackToPlainHTTP(t *testing.T) {
	var upgrades, posts atomic.Int64
	h := &Handler{Serve: func(_ context.Context, from string, frame []byte) ([]byte, error) {
		return append([]byte(from+":"), frame...), nil
	}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wantsUpgrade(r) {
			upgrades.Add(1)
			r.Header.Del("Upgrade") // an older handler does not see it
		} else {
			posts.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	ConfigureServer(srv.Config)
	srv.Start()
	defer srv.Close()
	tr := framedTransport(t, srv.URL)
	for i := range 3 {
		reply, err := tr.Call(context.Background(), "b", []byte(fmt.Sprint(i)))
		if err != nil || string(reply) != fmt.Sprint("a:", i) {
			t.Fatalf("call %d: %q, %v", i, reply, err)
		}
	}
	if upgrades.Load() != 1 || posts.Load() != 3 {
		t.Fatalf("%d upgrades and %d plain posts, want 1 and 3", upgrades.Load(), posts.Load())
	}
}

// Handler.Close ends the framed connections it serves: a call in progress sees its context
// end and the caller's call fails; an upgrade after it is refused with 503.
func TestFramedHandlerClose(t *testing.T) {
	entered := make(chan struct{})
	ended := make(chan error, 1)
	h := &Handler{Serve: func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		close(entered)
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := framedTransport(t, srv.URL)
	failed := make(chan error, 1)
	go func() {
		_, err := tr.Call(context.Background(), "b", []byte("x"))
		failed <- err
	}()
	<-entered
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call's context: %v", err)
	}
	if err := <-failed; err == nil {
		t.Fatal("the call in progress did not fail")
	}
	_, err := tr.Call(context.Background(), "b", []byte("y"))
	if status, ok := errors.AsType[*StatusError](err); !ok || status.Code != http.StatusServiceUnavailable {
		t.Fatalf("after Close: %v", err)
	}
}
