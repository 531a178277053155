package nodehttp_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router/nodehttp"
)

// mode is one way the transport speaks.
type mode struct {
	name   string
	http1  bool
	framed bool   // framed connections, upgraded from HTTP/1.1
	proto  string // what the server sees
}

var modes = []mode{{"h2c", false, false, "HTTP/2.0"}, {"http1", true, false, "HTTP/1.1"}, {"framed", false, true, "HTTP/1.1"}}

// eachMode runs f as a subtest per mode.
func eachMode(t *testing.T, f func(t *testing.T, m mode)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}

// server is a real loopback server, set up with nodehttp.ConfigureServer, that counts the
// connections it accepted and the requests it saw. It closes when the test ends, after the
// test's transports closed their idle connections.
type server struct {
	*httptest.Server
	base     string // http://host:port, known before the server starts
	conns    atomic.Int64
	requests atomic.Int64
	mu       sync.Mutex
	protos   map[string]int
}

func startServer(t *testing.T, h http.Handler) *server {
	t.Helper()
	s := newServer(t)
	s.start(h)
	return s
}

// newServer is a server listening, not serving yet: its address is known (base), and calls
// to it wait until start.
func newServer(t testing.TB) *server {
	t.Helper()
	s := &server{Server: httptest.NewUnstartedServer(nil), protos: map[string]int{}}
	nodehttp.ConfigureServer(s.Config)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.base = "http://" + s.Listener.Addr().String()
	t.Cleanup(s.Close)
	return s
}

func (s *server) start(h http.Handler) {
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		s.protos[r.Proto]++
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
	s.Start()
}

// sawOnly reports whether every request the server saw came in proto.
func (s *server) sawOnly(proto string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.protos) == 1 && s.protos[proto] > 0
}

// peers resolves node names to URLs.
type peers map[string]string

func (p peers) resolve(node string) (string, bool) {
	u, ok := p[node]
	return u, ok
}

// newTransport returns node self's transport in mode m, its idle connections closed when
// the test ends (before the servers close).
func newTransport(t *testing.T, m mode, self string, p peers) *nodehttp.Transport {
	t.Helper()
	return newTransportWith(t, nodehttp.TransportConfig{Self: self, Resolve: p.resolve, HTTP1: m.http1, Unframed: !m.framed})
}

func newTransportWith(t testing.TB, cfg nodehttp.TransportConfig) *nodehttp.Transport {
	t.Helper()
	tr, err := nodehttp.NewTransport(cfg)
	require.NoError(t, err)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// echo is a Serve that answers every frame with "from:" and the frame.
func echo(_ context.Context, from string, frame []byte) ([]byte, error) {
	return append([]byte(from+":"), frame...), nil
}

// rawClient is a plain HTTP client speaking as m does, for requests the transport would
// never send.
func rawClient(t *testing.T, m mode) *http.Client {
	t.Helper()
	var p http.Protocols
	if m.http1 || m.framed {
		p.SetHTTP1(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
