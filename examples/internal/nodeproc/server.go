package nodeproc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"narad.dev/consume/router/nodehttp"
)

// ShutdownTimeout bounds a server's graceful shutdown: the requests in progress get this long.
const ShutdownTimeout = 5 * time.Second

// A Server is a node's one HTTP server: the peers' frames (nodehttp: framed connections
// upgraded from HTTP/1.1, or HTTP/2 cleartext) and the clients' calls (HTTP/1.1) on one
// listener.
type Server struct {
	srv    *http.Server
	served chan error // what Serve returned, once it has
	err    error      // what Serve returned, if Wait saw it first
	done   bool       // Wait saw it
}

// Serve listens on addr and serves h there, until Shutdown.
func Serve(addr string, h http.Handler) (*Server, error) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	nodehttp.ConfigureServer(srv) // peers upgrade to framed connections (or speak HTTP/2 cleartext), clients HTTP/1.1
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{srv: srv, served: make(chan error, 1)}
	go func() { s.served <- srv.Serve(ln) }()
	return s, nil
}

// InputClosed returns a channel closed once in reaches its end. A node's standard input is a
// pipe its parent never writes: it closes when the parent closes it, or is gone.
func InputClosed(in io.Reader) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, in)
		close(gone)
	}()
	return gone
}

// Wait blocks until ctx ends (SIGTERM or Ctrl-C), gone is closed, or the server stops
// serving on its own (an error Shutdown returns).
func (s *Server) Wait(ctx context.Context, gone <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-gone:
	case s.err = <-s.served:
		s.done = true
	}
}

// Shutdown stops the server gracefully, giving the requests in progress ShutdownTimeout, and
// returns what went wrong: the shutdown's error, and the server's own unless it was just
// closed. It does not wait for upgraded connections: in the order nodehttp documents, a
// node closes its router.Node first, then its server, then its nodehttp.Handler (the
// peers' framed connections), then its transport's connections.
func (s *Server) Shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	shutErr := s.srv.Shutdown(ctx)
	if !s.done {
		s.err, s.done = <-s.served, true
	}
	if errors.Is(s.err, http.ErrServerClosed) {
		s.err = nil
	}
	return errors.Join(shutErr, s.err)
}

// Logger is a node's logger: text on standard error, from level up, each record naming the
// node.
func Logger(id string, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("node", id)
}
