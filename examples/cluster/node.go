package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"

	"narad.dev/consume/examples/filelog"
	"narad.dev/consume/examples/internal/nodeproc"
	"narad.dev/consume/examples/internal/queueclient"
	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
	"narad.dev/consume/router/nodehttp"
)

// A node process: what a host runs on each machine of its cluster. One router.Node over
// the file log of the partitions it owns, whose Routes come from the config file, calling
// its peers through a nodehttp.Transport; and one HTTP server for everyone:
//
//	POST /node        nodehttp.Handler: frames from the other nodes (node.Serve)
//	/queue/...        httpapi.Handler: the clients' consume API (consume, ack, nack, ...)
//	POST /produce     ?partition=N, body = value: append to the file log (owners only)
//	GET  /status      this example's own: the partitions' status and the node's counters
//
// It prints "ready" on its standard output once it serves, and shuts down gracefully on
// SIGTERM or Ctrl-C, or when its standard input closes (the parent is gone).

// runNode is a node process.
func runNode(ctx context.Context, cfg config, out io.Writer, stdin io.Reader) error {
	cc, self, err := readConfig(cfg.ConfigPath, cfg.ID)
	if err != nil {
		return err
	}

	// The file log. filelog makes partitions 0 to n-1 of a topic, so an owner of partitions
	// 2 and 3 has empty logs of 0 and 1 too; the node reads only the partitions its Routes
	// say it owns. A gateway has no topic in its log at all.
	var node *router.Node
	store, err := filelog.Open(filepath.Join(self.Dir, "log"), filelog.Options{
		SegmentBytes: 256 << 10,
		// Each append tells the node, which wakes a consumer parked here, or fires a
		// token another node left. node is set below, before the server takes a produce.
		OnAppend: func(topic string, p int32, hwm int64) { node.Appended(topic, p, hwm) },
	})
	if err != nil {
		return err
	}
	defer store.Close()
	if len(self.Partitions) > 0 {
		if err := store.CreateTopic(cc.Topic, int(slices.Max(self.Partitions))+1); err != nil {
			return err
		}
	}

	// The transport: the zero config's framed connections, one to each peer's /node,
	// upgraded from HTTP/1.1, every frame to that peer multiplexed over it.
	peers := map[string]string{}
	for _, n := range cc.Nodes {
		peers[n.ID] = n.PeerURL()
	}
	transport, err := nodehttp.NewTransport(nodehttp.TransportConfig{
		Self:    self.ID,
		Resolve: func(id string) (string, bool) { u, ok := peers[id]; return u, ok },
	})
	if err != nil {
		return err
	}
	defer transport.CloseIdleConnections()
	// A host passes the nodehttp.Transport itself; this example counts the calls too (see
	// countingTransport).

	node, err = router.New(router.Config{
		Logs:      store,
		Routes:    cc.routes(self.ID),
		Dir:       filepath.Join(self.Dir, "consumer"),
		Transport: countingTransport{transport},
		Topic:     cc.topicConfig,
		Logger:    nodeproc.Logger(self.ID, slog.LevelWarn),
	})
	if err != nil {
		return err
	}
	defer node.Close() // for the early returns; the shutdown below closes it first

	api, err := httpapi.New(node, httpapi.Options{})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	peerHandler := &nodehttp.Handler{Serve: node.Serve}
	mux.Handle("POST /node", peerHandler)
	mux.Handle("/queue/", http.StripPrefix("/queue", countCalls(api)))
	if len(self.Partitions) > 0 {
		mux.Handle("POST /produce", nodeproc.Produce(func(p int32, value []byte) (int64, error) {
			if !slices.Contains(self.Partitions, p) {
				return 0, &nodeproc.Refusal{Status: http.StatusNotFound, Text: fmt.Sprintf("partition %d is not this node's", p)}
			}
			return store.Append(cc.Topic, p, nil, value)
		}))
	}
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, node, cc.Topic)
	})
	srv, err := nodeproc.Serve(self.Addr, mux)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	srv.Wait(ctx, nodeproc.InputClosed(stdin))

	// The shutdown, in the order nodehttp documents: the node first (it waits for the calls
	// in progress, persists every ack, and answers what comes later with a refusal), then
	// the server, then the peers' framed connections (the handler's: the server's Shutdown
	// does not wait for them), then the connections to the peers (deferred above), then the
	// log.
	closeErr := node.Close()
	shutErr := srv.Shutdown()
	err = errors.Join(closeErr, shutErr, peerHandler.Close(), store.Close())
	if err == nil {
		fmt.Fprintln(out, "stopped")
	}
	return err
}

// The example's instrumentation: how many calls to its peers a node made on a consume's
// behalf, which tells the client how the records reached it. A node makes a consume's probes
// and claims with the consume's own context (a client that leaves ends them), and its other
// calls (registrations, notifications, forwarded acks, cancels) with contexts of their own.
// So a transport that counts the calls it makes under a consume's context counts exactly
// that consume's probes and claims, and the answer carries the count in the header
// queueclient.PeerCallsHeader. A consume that took records from another node without
// waiting probed at most once per other owner; one that waited probed every one of them,
// then claimed.

type callsKey struct{}

// countingTransport counts each call made under a context countCalls marked.
type countingTransport struct{ router.Transport }

// HonorsContext passes on nodehttp's promise that Call returns once ctx is done.
func (t countingTransport) HonorsContext() {}

func (t countingTransport) Call(ctx context.Context, to string, frame []byte) ([]byte, error) {
	if n, ok := ctx.Value(callsKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
	return t.Transport.Call(ctx, to, frame)
}

// countCalls marks each request's context for countingTransport, and writes the count in
// the answer's header: a consume calls its peers before the handler writes anything.
func countCalls(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := new(atomic.Int32)
		h.ServeHTTP(&callsWriter{ResponseWriter: w, calls: n}, r.WithContext(context.WithValue(r.Context(), callsKey{}, n)))
	})
}

type callsWriter struct {
	http.ResponseWriter
	calls   *atomic.Int32
	stamped bool
}

func (w *callsWriter) stamp() {
	if !w.stamped {
		w.stamped = true
		w.Header().Set(queueclient.PeerCallsHeader, strconv.Itoa(int(w.calls.Load())))
	}
}

func (w *callsWriter) WriteHeader(code int) {
	w.stamp()
	w.ResponseWriter.WriteHeader(code)
}

func (w *callsWriter) Write(b []byte) (int, error) {
	w.stamp()
	return w.ResponseWriter.Write(b)
}

func (w *callsWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// nodeStatus is the status endpoint's answer: this node's partitions, its counters of
// consumption across nodes, and how many partitions its committer primed.
type nodeStatus struct {
	Partitions []nodeproc.PartitionStatus `json:"partitions"`
	Remote     router.RemoteStats         `json:"remote"`
	Primes     uint64                     `json:"primes"`
}

func writeStatus(w http.ResponseWriter, node *router.Node, topic string) {
	parts, ok := nodeproc.Partitions(w, node, topic)
	if !ok {
		return
	}
	stats := node.Stats()
	nodeproc.WriteJSON(w, nodeStatus{Partitions: parts, Remote: stats.Remote, Primes: stats.Committer.Primes})
}
