package nodehttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// maxCallsPerConn bounds the calls one framed connection has served at once: past it, the
// connection's next call waits to be read until one of them is answered, as an HTTP/2
// server bounds a connection's streams.
const maxCallsPerConn = 256

// framedConns is what a Handler keeps of the framed connections it serves, for Close.
type framedConns struct {
	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // one per connection served
}

// wantsUpgrade reports whether r asks to switch its connection to framed calls.
func wantsUpgrade(r *http.Request) bool {
	if r.ProtoMajor != 1 {
		return false
	}
	for _, v := range r.Header.Values("Upgrade") {
		if strings.EqualFold(strings.TrimSpace(v), Upgrade) {
			return true
		}
	}
	return false
}

// upgrade switches r's connection to framed calls from node from and serves them until the
// connection ends or the handler is closed. The request has passed the handler's checks.
func (h *Handler) upgrade(w http.ResponseWriter, r *http.Request, from string) {
	fc := &h.framed
	fc.mu.Lock()
	if fc.closed {
		fc.mu.Unlock()
		http.Error(w, "nodehttp: the handler is closed", http.StatusServiceUnavailable)
		return
	}
	fc.wg.Add(1)
	fc.mu.Unlock()
	defer fc.wg.Done()
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "nodehttp: this connection cannot be upgraded: "+err.Error(), http.StatusBadRequest)
		return
	}
	fc.mu.Lock()
	if fc.closed {
		fc.mu.Unlock()
		conn.Close()
		return
	}
	if fc.open == nil {
		fc.open = map[net.Conn]struct{}{}
	}
	fc.open[conn] = struct{}{}
	fc.mu.Unlock()
	defer func() {
		fc.mu.Lock()
		delete(fc.open, conn)
		fc.mu.Unlock()
		conn.Close()
	}()
	conn.SetDeadline(time.Time{}) // the server's, for the request: not the connection's
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + Upgrade + "\r\n\r\n")
	if rw.Flush() != nil {
		return
	}
	s := &framedServer{serve: h.Serve, from: from, w: newFrameWriter(conn), calls: map[uint64]context.CancelFunc{}, work: make(chan framedCall)}
	s.run(r.Context(), rw.Reader)
}

// Close ends every framed connection the handler serves (the calls in progress see their
// contexts end, and their answers are not sent) and waits for their goroutines; from then
// on it refuses upgrades with 503, and serves plain requests as before. An http.Server's
// Shutdown does not wait for upgraded connections: a host shutting down closes its node,
// then shuts its server down, then closes the handler.
func (h *Handler) Close() error {
	fc := &h.framed
	fc.mu.Lock()
	fc.closed = true
	for conn := range fc.open {
		conn.Close()
	}
	fc.mu.Unlock()
	fc.wg.Wait()
	return nil
}

// framedServer serves the calls of one framed connection: it reads them in order, hands
// each to a worker (started as the calls in progress need them, up to maxCallsPerConn, and
// kept for the connection's life, so a call costs no goroutine of its own), and answers
// pings itself.
type framedServer struct {
	serve func(ctx context.Context, from string, frame []byte) ([]byte, error)
	from  string
	w     *frameWriter

	mu    sync.Mutex
	calls map[uint64]context.CancelFunc // the calls in progress

	work    chan framedCall
	workers sync.WaitGroup
	started int // workers started (the reader's alone)
}

// framedCall is one call for a worker.
type framedCall struct {
	ctx   context.Context
	id    uint64
	frame []byte
}

func (s *framedServer) run(base context.Context, br *bufio.Reader) {
	ctx, cancel := context.WithCancel(base)
	err := s.read(ctx, br)
	cancel() // every call in progress
	close(s.work)
	s.workers.Wait()
	s.w.stop(err)
}

// read takes the connection's frames until it ends or the peer sends what is not one.
func (s *framedServer) read(ctx context.Context, br *bufio.Reader) error {
	var hdr [framedHeaderSize]byte
	for {
		f, err := readFramed(br, &hdr, false)
		if err != nil {
			return err
		}
		switch f.kind {
		case kindPing:
			if s.w.queue(func(b []byte) []byte { return appendFramed(b, kindPong, f.id, nil) }) != nil {
				return errors.New("nodehttp: the connection failed")
			}
		case kindCancel:
			s.mu.Lock()
			cancel := s.calls[f.id]
			s.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		case kindCall:
			callCtx, ok := s.begin(ctx, f.id)
			if !ok {
				return fmt.Errorf("%w: call %d while it is in progress", ErrMalformed, f.id)
			}
			s.dispatch(framedCall{ctx: callCtx, id: f.id, frame: f.payload})
		}
	}
}

// begin counts call id in progress, and returns its context, which a cancel of it ends; an
// id already in progress is refused.
func (s *framedServer) begin(ctx context.Context, id uint64) (context.Context, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.calls[id]; dup {
		return nil, false
	}
	callCtx, cancel := context.WithCancel(ctx)
	s.calls[id] = cancel
	return callCtx, true
}

// dispatch hands c to an idle worker, starting one if none is idle and fewer than
// maxCallsPerConn run, or else waits for one.
func (s *framedServer) dispatch(c framedCall) {
	select {
	case s.work <- c:
		return
	default:
	}
	if s.started < maxCallsPerConn {
		s.started++
		s.workers.Go(func() {
			s.answer(c)
			for c := range s.work {
				s.answer(c)
			}
		})
		return
	}
	s.work <- c
}

// answer serves one call and queues its reply or refusal, unless the caller gave up on it.
func (s *framedServer) answer(c framedCall) {
	reply, err := s.serve(c.ctx, s.from, c.frame)
	s.mu.Lock()
	cancel := s.calls[c.id]
	delete(s.calls, c.id)
	s.mu.Unlock()
	gaveUp := c.ctx.Err() != nil
	cancel()
	if gaveUp {
		return // cancelled, or the connection is ending: nobody reads the answer
	}
	switch {
	case err != nil:
		s.w.queue(func(b []byte) []byte {
			return appendRefusal(b, c.id, http.StatusInternalServerError, "nodehttp: serving the frame: "+err.Error())
		})
	case len(reply) > MaxFrame:
		s.w.queue(func(b []byte) []byte {
			return appendRefusal(b, c.id, http.StatusInternalServerError, fmt.Sprintf("nodehttp: a reply of %d bytes (at most %d)", len(reply), MaxFrame))
		})
	default:
		s.w.queueFrame(kindReply, c.id, reply) // the reply is the node's to give: not copied
	}
}
