package nodehttp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// plainMemory is how long a peer whose handler answered the upgrade with a plain reply (a
// release before framed connections, or something between the nodes that dropped the
// Upgrade header) is called over plain HTTP before the upgrade is asked for again.
const plainMemory = 2 * time.Minute

// framedPool is a Transport's framed connections, one per peer URL.
type framedPool struct {
	from    string      // the Header's value: this node's name, path-escaped
	extra   http.Header // TransportConfig.Header, sent with the upgrade
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	tls     *tls.Config
	timings framedTimings

	peers sync.Map // URL → *framedPeer
}

// framedTimings are a framed connection's health checks (see check).
type framedTimings struct {
	pingAfter, pingTimeout, idleTimeout time.Duration
}

var defaultFramedTimings = framedTimings{pingAfter: pingAfter, pingTimeout: pingTimeout, idleTimeout: idleConnTimeout}

// framedPeer is the connection to one peer URL: at most one open, and at most one being
// dialled, at a time.
type framedPeer struct {
	target string
	conn   atomic.Pointer[framedConn] // the open one; nil: none

	mu         sync.Mutex
	dialing    chan struct{} // closed when the dial in progress ends; nil: none
	dialErr    error         // the last dial's error, for those who waited on it
	plainUntil time.Time     // calls go as plain HTTP until then
}

// errNotSent is a call whose connection ended before its frame was queued: it goes again,
// on a new connection.
var errNotSent = errors.New("nodehttp: the connection ended before the call was sent")

// call sends frame to node to at target over the peer's framed connection, dialling and
// upgrading one if there is none. plain reports that the peer does not upgrade (its handler
// answered with a plain reply): the call is to go over plain HTTP.
func (p *framedPool) call(ctx context.Context, to, target string, frame []byte) (reply []byte, plain bool, err error) {
	v, ok := p.peers.Load(target)
	if !ok {
		v, _ = p.peers.LoadOrStore(target, &framedPeer{target: target})
	}
	peer := v.(*framedPeer)
	for attempt := 0; ; attempt++ {
		c, plain, err := p.connection(ctx, peer)
		if plain || err != nil {
			return nil, plain, err
		}
		reply, err := c.call(ctx, frame)
		if errors.Is(err, errNotSent) && attempt == 0 {
			continue
		}
		return reply, false, err
	}
}

// connection returns the peer's open connection, or dials one (on the caller's goroutine,
// within ctx) while the other callers wait for it, each within its own context.
func (p *framedPool) connection(ctx context.Context, peer *framedPeer) (*framedConn, bool, error) {
	for {
		if c := peer.conn.Load(); c != nil {
			return c, false, nil
		}
		peer.mu.Lock()
		if c := peer.conn.Load(); c != nil {
			peer.mu.Unlock()
			return c, false, nil
		}
		if time.Now().Before(peer.plainUntil) {
			peer.mu.Unlock()
			return nil, true, nil
		}
		if wait := peer.dialing; wait != nil {
			peer.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, false, ctx.Err()
			}
			peer.mu.Lock()
			err := peer.dialErr
			peer.mu.Unlock()
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				return nil, false, err // the dial failed for everyone; one that ran out of its caller's time did not
			}
			continue
		}
		done := make(chan struct{})
		peer.dialing = done
		peer.mu.Unlock()

		c, plain, err := p.open(ctx, peer)
		peer.mu.Lock()
		peer.dialing, peer.dialErr = nil, err
		switch {
		case c != nil:
			peer.conn.Store(c)
		case plain:
			peer.plainUntil = time.Now().Add(plainMemory)
		}
		peer.mu.Unlock()
		close(done)
		return c, plain, err
	}
}

// open dials target and asks its handler to upgrade the connection, within ctx. plain
// reports a handler that answered with a plain reply instead (it does not upgrade); any
// other status is a *StatusError.
func (p *framedPool) open(ctx context.Context, peer *framedPeer) (*framedConn, bool, error) {
	u, err := url.Parse(peer.target)
	if err != nil {
		return nil, false, err
	}
	switch u.Scheme {
	case "http", "https":
	default:
		return nil, false, fmt.Errorf("nodehttp: unsupported scheme %q", u.Scheme)
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	raw, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	// Whatever ends ctx ends the handshake: the connection's deadline is moved to the past.
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	conn, br, plain, err := p.handshake(ctx, u, raw)
	if !stop() && err == nil && !plain {
		err = ctx.Err() // it ended just as the handshake did
	}
	if err != nil || plain {
		raw.Close()
		return nil, plain, err
	}
	raw.SetDeadline(time.Time{})
	return newFramedConn(peer, conn, br, p.timings), false, nil
}

// handshake asks for the upgrade over raw (TLS first, for https), and returns the
// connection to carry the frames and its reader.
func (p *framedPool) handshake(ctx context.Context, u *url.URL, raw net.Conn) (net.Conn, *bufio.Reader, bool, error) {
	conn := raw
	if u.Scheme == "https" {
		cfg := &tls.Config{}
		if p.tls != nil {
			cfg = p.tls.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, nil, false, err
		}
		conn = tc
	}
	hdr := make(http.Header, len(p.extra)+3)
	for k, v := range p.extra {
		hdr[k] = v
	}
	hdr[Header], hdr["Connection"], hdr["Upgrade"] = []string{p.from}, []string{"Upgrade"}, []string{Upgrade}
	req := &http.Request{Method: http.MethodPost, URL: u, Host: u.Host, ProtoMajor: 1, ProtoMinor: 1, Header: hdr}
	if err := req.Write(conn); err != nil {
		return nil, nil, false, err
	}
	br := bufio.NewReaderSize(conn, framedChunk)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, nil, false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols && strings.EqualFold(resp.Header.Get("Upgrade"), Upgrade):
		return conn, br, false, nil
	case resp.StatusCode == http.StatusOK:
		return nil, nil, true, nil
	case resp.StatusCode == http.StatusSwitchingProtocols:
		return nil, nil, false, fmt.Errorf("%w: switched to %q, not %q", ErrMalformed, resp.Header.Get("Upgrade"), Upgrade)
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusText))
	return nil, nil, false, &StatusError{Code: resp.StatusCode, Text: strings.TrimSpace(string(text))}
}

// framedConn is one framed connection of a Transport: its calls in flight by id, the
// goroutine that reads their answers, and the one that writes (see frameWriter).
type framedConn struct {
	peer    *framedPeer
	conn    net.Conn
	w       *frameWriter
	timings framedTimings
	reads   atomic.Uint64 // frames read so far, for the health checks
	done    chan struct{} // closed when the reader returned
	// answers holds the answer channels of calls that were answered, for the next ones.
	// The connection's own, not the process's: a channel made inside a testing/synctest
	// bubble may not be used outside it.
	answers sync.Pool

	mu      sync.Mutex
	pending map[uint64]chan framedAnswer
	nextID  uint64
	err     error // why the connection ended; nil while it is open
	// The health checks' state (see check).
	timer            *time.Timer
	seen, seenAtPing uint64
	pinged           bool
	idleChecks       int
}

// framedAnswer is what came back for a call.
type framedAnswer struct {
	reply []byte
	code  int // a refusal's status; 0 for a reply
	text  string
	err   error // the connection ended first
}

func newFramedConn(peer *framedPeer, conn net.Conn, br *bufio.Reader, timings framedTimings) *framedConn {
	c := &framedConn{peer: peer, conn: conn, w: newFrameWriter(conn), timings: timings,
		done: make(chan struct{}), pending: map[uint64]chan framedAnswer{}}
	c.timer = time.AfterFunc(timings.pingAfter, c.check)
	go c.read(br)
	return c
}

// answerChan returns a channel for a call's one answer, reused if one is free.
func (c *framedConn) answerChan() chan framedAnswer {
	if ch, ok := c.answers.Get().(chan framedAnswer); ok {
		return ch
	}
	return make(chan framedAnswer, 1)
}

// call sends frame and waits for its answer, or for ctx to end (the call is then cancelled
// at the peer). errNotSent: the connection had ended before the frame was queued.
func (c *framedConn) call(ctx context.Context, frame []byte) ([]byte, error) {
	answer := c.answerChan()
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		c.answers.Put(answer)
		return nil, errNotSent
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = answer
	c.mu.Unlock()
	if err := c.w.queue(func(b []byte) []byte { return appendFramed(b, kindCall, id, frame) }); err != nil {
		if c.forget(id) {
			c.answers.Put(answer)
			if c.ended() {
				return nil, errNotSent
			}
			return nil, err
		}
		// The reader failed it meanwhile: its answer is on its way.
	}
	var a framedAnswer
	select {
	case a = <-answer:
	case <-ctx.Done():
		if c.forget(id) {
			c.answers.Put(answer)
			c.w.queue(func(b []byte) []byte { return appendFramed(b, kindCancel, id, nil) })
			return nil, ctx.Err()
		}
		a = <-answer // answered at the same instant
	}
	c.answers.Put(answer)
	switch {
	case a.err != nil:
		return nil, a.err
	case a.code != 0:
		return nil, &StatusError{Code: a.code, Text: a.text}
	}
	return a.reply, nil
}

// forget takes call id out of the calls in flight, and reports whether it was there (no
// answer was given to it).
func (c *framedConn) forget(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; !ok {
		return false
	}
	delete(c.pending, id)
	return true
}

func (c *framedConn) ended() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// read hands each answer to its call until the connection ends, then fails the calls left.
func (c *framedConn) read(br *bufio.Reader) {
	defer close(c.done)
	var hdr [framedHeaderSize]byte
	for {
		f, err := readFramed(br, &hdr, true)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the peer closed with calls in flight, or at any time
			}
			c.end(fmt.Errorf("nodehttp: the connection ended: %w", err))
			return
		}
		c.reads.Add(1)
		var a framedAnswer
		switch f.kind {
		case kindPong:
			continue
		case kindReply:
			a.reply = f.payload
		case kindRefusal:
			a.code, a.text = refusalOf(f.payload)
		}
		c.mu.Lock()
		answer, ok := c.pending[f.id]
		delete(c.pending, f.id)
		c.mu.Unlock()
		if ok { // else the call was given up: its answer is dropped
			answer <- a
		}
	}
}

// end closes the connection for err, fails every call in flight with it, and takes the
// connection out of its peer's hands, so the next call dials a new one.
func (c *framedConn) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	c.timer.Stop()
	c.mu.Unlock()
	c.peer.conn.CompareAndSwap(c, nil)
	c.w.fail(err)
	for _, answer := range pending {
		answer <- framedAnswer{err: err}
	}
}

// close ends the connection and waits for its goroutines.
func (c *framedConn) close(err error) {
	c.end(err)
	<-c.w.stopped
	<-c.done
}

// closeIfIdle closes the connection if no call is in flight on it.
func (c *framedConn) closeIfIdle() {
	c.mu.Lock()
	idle := len(c.pending) == 0
	c.mu.Unlock()
	if idle {
		c.close(errIdleClosed)
	}
}

var errIdleClosed = errors.New("nodehttp: the connection was closed while idle")

// check is the connection's health check, every pingAfter: a connection with calls in
// flight from which nothing was read since the last check is pinged, and closed if the
// ping brings nothing back within pingTimeout, so a peer that vanished without closing the
// connection costs the calls on it their own deadlines, and the next call a new connection;
// one with no call in flight and nothing read for idleTimeout is closed.
func (c *framedConn) check() {
	seen := c.reads.Load()
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	next := c.timings.pingAfter
	var ping bool
	var fail, idle bool
	switch {
	case c.pinged && seen == c.seenAtPing:
		fail = true
	case c.pinged:
		c.pinged = false
	case len(c.pending) > 0 && seen == c.seen:
		c.pinged, c.seenAtPing, ping = true, seen, true
		next = c.timings.pingTimeout
	}
	if len(c.pending) == 0 && seen == c.seen {
		c.idleChecks++
		idle = time.Duration(c.idleChecks)*c.timings.pingAfter >= c.timings.idleTimeout
	} else {
		c.idleChecks = 0
	}
	c.seen = seen
	if !fail && !idle {
		c.timer.Reset(next)
	}
	c.mu.Unlock()
	switch {
	case fail:
		c.end(fmt.Errorf("nodehttp: the peer answered no ping within %v", c.timings.pingTimeout))
	case idle:
		c.end(errIdleClosed)
	case ping:
		c.w.queue(func(b []byte) []byte { return appendFramed(b, kindPing, 0, nil) })
	}
}

// closeIdle closes the pool's connections with no call in flight.
func (p *framedPool) closeIdle() {
	p.peers.Range(func(_, v any) bool {
		if c := v.(*framedPeer).conn.Load(); c != nil {
			c.closeIfIdle()
		}
		return true
	})
}
