package nodehttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"narad.dev/consume/internal/wire"
)

// Header carries the calling node's ID on every request, path-escaped (url.PathEscape), so
// that any name Routes uses travels intact. The handler passes it to Serve as from.
const Header = "Narad-Consume-From"

// MaxFrame bounds every frame, request or reply, in bytes (16 MiB): the node wire's own bound.
const MaxFrame = wire.MaxFrame

// Pool sizes for the frames sent as HTTP requests (TransportConfig.Unframed, or to a peer
// that does not upgrade) when TransportConfig leaves them zero. Over HTTP/2 one connection
// carries many calls at once (up to the server's stream limit, 250 for Go's); over HTTP/1.1
// every call in flight holds a connection of its own, and a node keeps up to its ack window
// (at least 128) of forwarded acks in flight to one owner.
const (
	DefaultH2MaxConnsPerHost     = 4
	DefaultH2MaxIdleConnsPerHost = 4
	DefaultH1MaxConnsPerHost     = 256
	DefaultH1MaxIdleConnsPerHost = 128
)

// Connection lifetimes. These bound connections, never a call: a call ends when it is
// answered or its context ends.
const (
	// idleConnTimeout closes a connection left idle this long.
	idleConnTimeout = 90 * time.Second
	// pingAfter is how long an HTTP/2 connection may go without a frame from the peer
	// before a ping checks it; pingTimeout is how long the ping's answer may take before the
	// connection is closed. So a peer that vanished without closing its connections (a host
	// powered off) costs the calls multiplexed on them their own deadlines, and the
	// connection is replaced, instead of every later call timing out on it too.
	pingAfter   = 15 * time.Second
	pingTimeout = 15 * time.Second
	// maxStatusText is how much of a non-200 reply's body an error quotes.
	maxStatusText = 512
)

// Errors of a call. Each comes wrapped with the node called.
var (
	// ErrUnknownNode: the resolver knows no address for the node.
	ErrUnknownNode = errors.New("nodehttp: unknown node")
	// ErrFrameTooLarge: a frame over MaxFrame, to be sent or read.
	ErrFrameTooLarge = errors.New("nodehttp: frame over the bound")
)

// StatusError is a call answered with a status other than 200: the peer's handler refused
// the request (400, 403, 405, 413), its node failed (500), or something between the nodes
// answered instead.
type StatusError struct {
	Node string // the node called
	Code int    // the HTTP status
	Text string // the start of the reply's body, trimmed
}

func (e *StatusError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("nodehttp: %s answered %d %s", e.Node, e.Code, http.StatusText(e.Code))
	}
	return fmt.Sprintf("nodehttp: %s answered %d %s: %s", e.Node, e.Code, http.StatusText(e.Code), e.Text)
}

// TransportConfig configures a Transport. Self and Resolve are required.
type TransportConfig struct {
	// Self is this node's ID, as the other nodes' Routes name it: owners call back (notify)
	// the node by the name their handler was given.
	Self string
	// Resolve returns the URL a node's Handler is mounted at (as "http://10.0.0.7:7070/node"),
	// and false for a node it does not know. It is called on every Call, concurrently, and
	// must be cheap; an address that changes takes effect at the next Call.
	Resolve func(node string) (url string, ok bool)
	// HTTP1 speaks HTTP/1.1 with keep-alive instead of HTTP/2 cleartext wherever the
	// transport sends a frame as its own HTTP request: with Unframed, and to a peer that
	// answered the upgrade to a framed connection with a plain reply. Every call in flight
	// then holds a connection of its own. For a peer behind something that does not pass
	// HTTP/2 cleartext through. Framed connections are unchanged by it: they are opened
	// with an HTTP/1.1 upgrade either way.
	HTTP1 bool
	// MaxConnsPerHost bounds the connections to one peer (dialing, in use and idle) of the
	// HTTP requests (with Unframed, or to a peer that does not upgrade; a framed connection
	// is one per peer); a call that finds them all busy waits for one, within its context.
	// Zero is DefaultH2MaxConnsPerHost, or DefaultH1MaxConnsPerHost with HTTP1.
	MaxConnsPerHost int
	// MaxIdleConnsPerHost bounds the idle connections kept to one peer. Zero is
	// DefaultH2MaxIdleConnsPerHost, or DefaultH1MaxIdleConnsPerHost with HTTP1.
	MaxIdleConnsPerHost int
	// TLSClientConfig, when set, is used for https URLs: framed connections upgrade over TLS
	// (HTTP/1.1 negotiated), requests go as HTTP/2 over TLS (HTTP/1.1 with HTTP1); http URLs
	// stay cleartext.
	TLSClientConfig *tls.Config
	// Unframed sends each frame as its own HTTP request (HTTP/2 cleartext, or HTTP/1.1 with
	// HTTP1) instead of framed connections: for a network whose proxies between nodes break
	// upgraded connections in ways the fallback cannot see. The zero value carries the
	// frames over one connection to each peer, upgraded from HTTP/1.1 at the peer's Handler
	// (see the package documentation, "Framed connections"): the calls in flight to a peer
	// share the connection, each behind a header of 13 bytes, and what queues while a write
	// is in progress leaves in the next. A peer whose handler answers the upgrade with a
	// plain reply (a release before framed connections, a proxy that drops the Upgrade
	// header) is called as with Unframed for two minutes, then asked again.
	Unframed bool
	// Framed chose framed connections when they were not the default.
	//
	// Deprecated: framed connections are the default; Unframed turns them off. Framed has no
	// effect.
	Framed bool
	// Header, when set, holds headers sent with every frame's request and every upgrade to a
	// framed connection, besides the node's name: a credential the peer's Handler.Authorize
	// checks (a bearer token, say). The transport keeps a copy; its own headers (Header,
	// Connection, Upgrade) are not overridden.
	Header http.Header
}

// Transport carries a node's frames to its peers: over one framed connection to each peer,
// upgraded from HTTP/1.1 at the peer's Handler, or, with TransportConfig.Unframed (and to a
// peer that does not upgrade), each frame as the body of one HTTP POST to the peer's Handler,
// the reply's body the reply frame. It implements router.Transport and is safe for
// concurrent use.
type Transport struct {
	from    []string    // the Header's value
	extra   http.Header // TransportConfig.Header
	resolve func(string) (string, bool)
	rt      *http.Transport // every call with Unframed; without it, those to peers that do not upgrade
	framed  *framedPool     // nil with Unframed
}

// octetStream is the Content-Type of a long reply (never modified).
var octetStream = []string{"application/octet-stream"}

// NewTransport returns a Transport for cfg.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	if cfg.Self == "" {
		return nil, errors.New("nodehttp: TransportConfig.Self is empty")
	}
	if cfg.Resolve == nil {
		return nil, errors.New("nodehttp: TransportConfig.Resolve is nil")
	}
	if cfg.MaxConnsPerHost < 0 || cfg.MaxIdleConnsPerHost < 0 {
		return nil, errors.New("nodehttp: a negative pool size")
	}
	t := &Transport{
		from:    []string{url.PathEscape(cfg.Self)},
		extra:   cfg.Header.Clone(),
		resolve: cfg.Resolve,
		rt:      newRoundTripper(cfg),
	}
	if !cfg.Unframed {
		t.framed = &framedPool{from: t.from[0], extra: t.extra, dial: (&net.Dialer{}).DialContext, tls: t.rt.TLSClientConfig, timings: defaultFramedTimings}
	}
	return t, nil
}

// newRoundTripper is the HTTP client side of cfg.
func newRoundTripper(cfg TransportConfig) *http.Transport {
	var p http.Protocols
	conns, idle := DefaultH2MaxConnsPerHost, DefaultH2MaxIdleConnsPerHost
	if cfg.HTTP1 {
		p.SetHTTP1(true)
		conns, idle = DefaultH1MaxConnsPerHost, DefaultH1MaxIdleConnsPerHost
	} else {
		// Without HTTP1, http URLs go as HTTP/2 with prior knowledge.
		p.SetUnencryptedHTTP2(true)
		p.SetHTTP2(true)
	}
	if cfg.MaxConnsPerHost > 0 {
		conns = cfg.MaxConnsPerHost
	}
	if cfg.MaxIdleConnsPerHost > 0 {
		idle = cfg.MaxIdleConnsPerHost
	}
	idle = min(idle, conns)
	var tlsConfig *tls.Config
	if cfg.TLSClientConfig != nil {
		tlsConfig = cfg.TLSClientConfig.Clone()
	}
	return &http.Transport{
		Proxy:               nil, // peers are called directly, whatever HTTP_PROXY says
		DialContext:         (&net.Dialer{}).DialContext,
		TLSClientConfig:     tlsConfig,
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     idleConnTimeout,
		DisableCompression:  true, // frames are binary, and the bound is on what crosses
		Protocols:           &p,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: pingAfter,
			PingTimeout:     pingTimeout,
		},
	}
}

// HonorsContext says that Call returns once its context is done (the request carries it),
// so a node makes its calls from the goroutine that waits for the reply (see
// router.ContextTransport).
func (t *Transport) HonorsContext() {}

// Call sends frame to node to and returns the reply frame. It returns an error when no
// complete reply came back: the node is unknown to the resolver, the frame is over MaxFrame
// (nothing is sent), the peer could not be reached, the connection failed, ctx ended, the
// peer answered a status other than 200 (a *StatusError), or its reply was cut short or
// over MaxFrame. A peer node's refusal of the frame travels inside a 200 reply.
func (t *Transport) Call(ctx context.Context, to string, frame []byte) ([]byte, error) {
	if len(frame) > MaxFrame {
		return nil, fmt.Errorf("nodehttp: call to %s: a frame of %d bytes (at most %d): %w", to, len(frame), MaxFrame, ErrFrameTooLarge)
	}
	target, ok := t.resolve(to)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownNode, to)
	}
	if t.framed != nil {
		reply, plain, err := t.framed.call(ctx, to, target, frame)
		if !plain {
			if status, ok := errors.AsType[*StatusError](err); ok {
				status.Node = to
				return nil, status
			}
			if err != nil {
				return nil, callError(ctx, to, err)
			}
			return reply, nil
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(frame))
	if err != nil {
		return nil, fmt.Errorf("nodehttp: call to %s: %w", to, err)
	}
	for k, v := range t.extra {
		req.Header[k] = v
	}
	req.Header[Header] = t.from
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return nil, callError(ctx, to, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusText))
		return nil, &StatusError{Node: to, Code: resp.StatusCode, Text: strings.TrimSpace(string(text))}
	}
	reply, err := readFrame(resp.Body, resp.ContentLength)
	if err != nil {
		return nil, callError(ctx, to, fmt.Errorf("reading the reply: %w", err))
	}
	return reply, nil
}

// CloseIdleConnections closes the connections no call is using. A host shutting down closes
// its node first (Close waits for the calls in progress), then calls this; calls made after
// it open connections again.
func (t *Transport) CloseIdleConnections() {
	t.rt.CloseIdleConnections()
	if t.framed != nil {
		t.framed.closeIdle()
	}
}

// callError wraps err, a failed call to node to, with ctx's error if ctx ended, so that
// errors.Is finds context.Canceled or context.DeadlineExceeded whatever net/http said.
func callError(ctx context.Context, to string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("nodehttp: call to %s: %w: %w", to, cerr, err)
	}
	return fmt.Errorf("nodehttp: call to %s: %w", to, err)
}

// readFrame reads r to its end and returns what it read: at most MaxFrame bytes, and
// ErrFrameTooLarge past that, having read at most MaxFrame+1. size is the length the peer
// declared (-1: none), which sizes the buffer; a declared length over MaxFrame is refused
// before anything is read.
func readFrame(r io.Reader, size int64) ([]byte, error) {
	if size > MaxFrame {
		return nil, fmt.Errorf("a frame of %d bytes (at most %d): %w", size, MaxFrame, ErrFrameTooLarge)
	}
	n := 512
	if size >= 0 {
		n = int(size) + 1 // room for the read that finds the end
	}
	buf := make([]byte, 0, n)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), MaxFrame+1-len(buf)))
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), MaxFrame+1)])
		buf = buf[:len(buf)+m]
		if len(buf) > MaxFrame {
			return nil, fmt.Errorf("a frame of more than %d bytes: %w", MaxFrame, ErrFrameTooLarge)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
