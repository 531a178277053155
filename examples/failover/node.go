package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
	"narad.dev/consume/router/nodehttp"
)

// A node process: what a host runs on each machine of its cluster.
//
//	an etcd member        one of three (embed), data in DIR/node-N/etcd
//	an etcd session       a lease of leaseTTL, kept alive; nodes/<id> → its address under it
//	a view of etcd        Routes, OwnerFinder and Liveness of the router.Node (view.go)
//	a router.Node         its ack state in etcd (etcdStore, Config.Store), its logs the
//	                      shared log's partitions it owns (logs.go)
//	a campaign            for the controller's election; the winner runs the controller
//	one HTTP server:
//	  POST /node            nodehttp.Handler: the peers' frames (node.Serve)
//	  /queue/...            httpapi: the clients' consume API
//	  POST /produce         ?partition=N, body = value: append (the partition's owner only)
//	  GET  /status          the partitions this node owns, as the node sees them
//	  POST /admin/handoff   ?partition=N: fence the partition's appends, HandOff, answer its bytes
//	  POST /admin/adopt     ?partition=N, body = a HandOff's bytes, or &from=store: Load
//	                        them from etcd (a failover); open the log, Adopt
//	  POST /admin/drop      ?partition=N: forget an adopted partition the assignment did not take
//
// It prints "ready" once it serves, "event ..." lines for the parent to show, and on SIGTERM
// it closes the node and its server ("closed"), then waits for its standard input to close
// (the parent has every node closed) before it stops its etcd member, so that no node's last
// saves go to a cluster that lost its quorum. A node whose lease lapses exits at once: the
// controller may be failing its partitions over.

// leaseTTL is each node's etcd lease, in seconds: a node killed is found down this long
// after its last keep-alive.
const leaseTTL = 2

// maxValue bounds a produced value.
const maxValue = 1 << 20

// lines writes whole lines to the parent, from any goroutine.
type lines struct {
	mu  sync.Mutex
	out io.Writer
}

func (l *lines) say(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, format+"\n", args...)
}

// runNode is a node process.
func runNode(ctx context.Context, cfg config, out io.Writer, stdin io.Reader) (err error) {
	cc, err := readConfig(cfg.configPath)
	if err != nil {
		return err
	}
	self, ok := cc.node(cfg.id)
	if !ok {
		return fmt.Errorf("%s names no node %q", cfg.configPath, cfg.id)
	}
	visibility, _ := cc.visibility()
	interval, _ := cc.commitInterval()
	say := &lines{out: out}
	if err := os.MkdirAll(self.Dir, 0o755); err != nil {
		return err
	}

	// The etcd member, and a client of it (a node talks to its own member: both live and
	// die with the process).
	etcd, err := startMember(self.Member, initialCluster(cc.members()), filepath.Join(self.Dir, "etcd.log"))
	if err != nil {
		return err
	}
	stopEtcd := sync.OnceFunc(etcd.Close) // Close twice panics
	defer stopEtcd()
	cli, err := newClient(self.Member.ClientURL)
	if err != nil {
		return err
	}
	defer cli.Close()
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(leaseTTL))
	if err != nil {
		return fmt.Errorf("etcd session: %w", err)
	}

	// The router.Node, its Routes from the view, its logs the shared log's, its ack state in
	// etcd. node is set before the view publishes anything or the server takes a call.
	var node *router.Node
	logs := newSharedLogs(cc.LogDir, cc.Topic, func(p int32, hwm int64) { node.Appended(cc.Topic, p, hwm) })
	v := newView(cc.Topic, self.ID)
	routes := etcdRoutes{v}
	v.prepare = func(prev, next *snapshot) {
		// A partition the routes are about to name here: its log opens first, so the node
		// finds it. (One adopted here is open already.)
		for _, p := range next.local {
			if !slices.Contains(prev.local, p) {
				if err := logs.open(p); err != nil {
					say.say("event %v", err)
				}
			}
		}
	}
	v.changed = func(prev, next *snapshot) {
		for _, p := range prev.local {
			if !slices.Contains(next.local, p) {
				// Moved away: the fence of its hand-off ends, the log closes here.
				node.DropPartition(cc.Topic, p)
				logs.close(p)
			}
		}
		for _, p := range next.local {
			if !slices.Contains(prev.local, p) {
				node.Appended(cc.Topic, p, 0) // consumers parked here look at it
			}
		}
	}
	transport, err := nodehttp.NewTransport(nodehttp.TransportConfig{Self: self.ID, Resolve: routes.resolve})
	if err != nil {
		return err
	}
	defer transport.CloseIdleConnections()
	store := newEtcdStore(cli, statePrefix)
	node, err = router.New(router.Config{
		Logs:           logs,
		Routes:         routes,
		Dir:            filepath.Join(self.Dir, "consumer"), // locked; the state itself is in etcd
		Store:          store,
		CommitInterval: interval,
		Transport:      transport,
		Topic: func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: visibility, MaxAckedAhead: cc.AckedAhead}
		},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})).With("node", self.ID),
	})
	if err != nil {
		return err
	}
	defer node.Close() // for the early returns; the shutdown below closes it first
	defer logs.closeAll()

	api, err := httpapi.New(node, httpapi.Options{})
	if err != nil {
		return err
	}
	a := &admin{id: self.ID, topic: cc.Topic, node: node, logs: logs, store: store, view: v}
	mux := http.NewServeMux()
	mux.Handle("POST /node", &nodehttp.Handler{Serve: node.Serve})
	mux.Handle("/queue/", http.StripPrefix("/queue", api))
	mux.HandleFunc("POST /produce", a.produce)
	mux.HandleFunc("GET /status", a.status)
	mux.HandleFunc("POST /admin/handoff", a.handOff)
	mux.HandleFunc("POST /admin/adopt", a.adopt)
	mux.HandleFunc("POST /admin/drop", a.drop)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	nodehttp.ConfigureServer(srv)
	ln, err := net.Listen("tcp", self.Addr)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bg sync.WaitGroup
	defer bg.Wait()
	defer cancel()
	viewReady := make(chan struct{})
	bg.Go(func() { v.run(runCtx, cli, viewReady) })
	select {
	case <-viewReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Live from here: the node's key, under its lease.
	if _, err := cli.Put(ctx, nodeKey(self.ID), self.Addr, clientv3.WithLease(sess.Lease())); err != nil {
		return fmt.Errorf("put %s: %w", nodeKey(self.ID), err)
	}
	c := &controller{id: self.ID, cc: cc, cli: cli, view: v, say: say, http: &http.Client{Timeout: 10 * time.Second}}
	bg.Go(func() { c.campaign(runCtx, sess) })
	say.say("ready")

	parentGone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(parentGone)
	}()
	leaseLost := make(chan error, 1)
	bg.Go(func() { leaseLost <- keepLease(runCtx, cli, sess, say) })
	var serveErr error
	select {
	case <-ctx.Done():
	case <-parentGone:
	case serveErr = <-served:
	case err := <-leaseLost:
		// The lease lapsed (this process stalled, or lost its member's quorum for longer
		// than the TTL): the controller may be failing this node's partitions over. Stop
		// serving at once, as a deposed owner must; nothing of the node's is closed or saved.
		say.say("event lost its etcd lease (%v): exiting", err)
		os.Exit(3)
	}

	// The shutdown: the controller and the view stop, the node closes (its last saves go
	// to etcd while the quorum is there), then the server, then the logs.
	cancel()
	bg.Wait()
	closeErr := node.Close()
	shutCtx, cancelShut := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShut()
	shutErr := srv.Shutdown(shutCtx)
	if serveErr == nil {
		serveErr = <-served
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	err = errors.Join(closeErr, shutErr, serveErr, logs.closeAll())
	if err != nil {
		return err
	}
	say.say("closed")
	// The etcd member stops once the parent has every node closed (it closes our input), or
	// after a while in any case.
	select {
	case <-parentGone:
	case <-time.After(15 * time.Second):
	}
	cli.Close()
	stopEtcd()
	say.say("stopped")
	return nil
}

// keepLease keeps the node's lease alive until ctx ends, and returns why it could not once
// the lease is gone. A session's keep-alive gives up when no answer comes within the TTL,
// which happens to a live lease too while etcd elects a new leader (the new leader extends
// every lease): then it asks etcd whether the lease is still there, and keeps it alive
// again if it is. It returns an error only when etcd says the lease expired, or cannot say
// for longer than leaseCheckFor.
func keepLease(ctx context.Context, cli *clientv3.Client, sess *concurrency.Session, say *lines) error {
	const leaseCheckFor = 10 * time.Second
	lease := sess.Lease()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
		}
		deadline := time.Now().Add(leaseCheckFor)
		for {
			if ctx.Err() != nil {
				return nil
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := cli.TimeToLive(cctx, lease)
			cancel()
			if err == nil && resp.TTL <= 0 {
				return errors.New("etcd says it expired")
			}
			if err == nil {
				if sess, err = concurrency.NewSession(cli, concurrency.WithLease(lease), concurrency.WithTTL(leaseTTL)); err == nil {
					say.say("event its lease's keep-alive went unanswered for %ds (etcd was electing a leader); etcd says the lease is live: keeping it alive again", leaseTTL)
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("etcd could not say for %v: %w", leaseCheckFor, err)
			}
			launch.Pause(ctx, 200*time.Millisecond)
		}
	}
}

// admin is the node's HTTP endpoints beside the two handlers: produce, status, and the
// controller's hand-off, adopt and drop.
type admin struct {
	id    string
	topic string
	node  *router.Node
	logs  *sharedLogs
	store *etcdStore
	view  *view
}

func partitionParam(w http.ResponseWriter, r *http.Request) (int32, bool) {
	n, err := strconv.ParseInt(r.URL.Query().Get("partition"), 10, 32)
	if err != nil || n < 0 {
		http.Error(w, "partition: a partition number, please", http.StatusBadRequest)
		return 0, false
	}
	return int32(n), true
}

// produced is the produce endpoint's answer.
type produced struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// produce appends the body to the partition's log, if this node owns it (409 otherwise,
// naming the owner etcd names).
func (a *admin) produce(w http.ResponseWriter, r *http.Request) {
	p, ok := partitionParam(w, r)
	if !ok {
		return
	}
	if owner := a.view.snap().owner(p); owner != a.id {
		http.Error(w, "owner "+owner, http.StatusConflict)
		return
	}
	value, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxValue))
	if err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	offset, err := a.logs.append(p, value)
	switch {
	case errors.Is(err, errNotHere):
		http.Error(w, err.Error(), http.StatusConflict) // fenced for a hand-off
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, produced{Partition: p, Offset: offset})
}

// nodeStatus is the status endpoint's answer.
type nodeStatus struct {
	Node       string            `json:"node"`
	Revision   int64             `json:"revision"` // of the view the node's routes come from
	Partitions []partitionStatus `json:"partitions"`
}

type partitionStatus struct {
	Partition     int32 `json:"partition"`
	Frontier      int64 `json:"frontier"`
	HighWatermark int64 `json:"high_watermark"`
	Leased        int   `json:"leased"`
	Drained       bool  `json:"drained"`
}

func (a *admin) status(w http.ResponseWriter, r *http.Request) {
	rev := a.view.snap().rev
	parts, err := a.node.TopicStatus(a.topic)
	if err != nil {
		http.Error(w, err.Error(), router.HTTPStatus(err))
		return
	}
	st := nodeStatus{Node: a.id, Revision: rev, Partitions: []partitionStatus{}}
	for _, p := range parts {
		st.Partitions = append(st.Partitions, partitionStatus{Partition: p.Partition, Frontier: p.Frontier,
			HighWatermark: p.HighWatermark, Leased: p.Leased, Drained: p.Drained()})
	}
	writeJSON(w, st)
}

// handOff fences the partition's appends here, hands it off and answers its state. The
// Leased and Frontier headers say what it carries.
func (a *admin) handOff(w http.ResponseWriter, r *http.Request) {
	p, ok := partitionParam(w, r)
	if !ok {
		return
	}
	if owner := a.view.snap().owner(p); owner != a.id {
		http.Error(w, fmt.Sprintf("partition %d is %s's", p, owner), http.StatusConflict)
		return
	}
	a.logs.fence(p) // from here the produce path refuses it (409): no append after the bytes
	st, _ := a.node.PartitionStatus(a.topic, p)
	state, err := a.node.HandOff(r.Context(), a.topic, p)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError) // fenced; a retry answers the same state
		return
	}
	w.Header().Set("Leased", strconv.Itoa(st.Leased))
	w.Header().Set("Frontier", strconv.FormatInt(st.Frontier, 10))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(state)
}

// adopt opens the partition's log here and adopts its state: the body (a hand-off's bytes),
// or with from=store what etcd holds of it (a failover: the dead owner's last save). It
// answers the state's size.
func (a *admin) adopt(w http.ResponseWriter, r *http.Request) {
	p, ok := partitionParam(w, r)
	if !ok {
		return
	}
	if owner := a.view.snap().owner(p); owner == a.id {
		http.Error(w, fmt.Sprintf("partition %d is this node's already", p), http.StatusConflict)
		return
	}
	var state []byte
	var err error
	start := time.Now()
	if r.URL.Query().Get("from") == "store" {
		state, err = a.store.Load(r.Context(), a.topic, p)
	} else {
		state, err = io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if err := a.logs.open(p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	loaded := time.Now()
	if len(state) > 0 { // none stored: nothing was ever acked, the partition loads empty
		if err := a.node.Adopt(r.Context(), a.topic, p, state); err != nil {
			http.Error(w, err.Error(), router.HTTPStatus(err))
			return
		}
	}
	writeJSON(w, adopted{StateBytes: len(state), Read: loaded.Sub(start).String(), Adopt: time.Since(loaded).String()})
}

// adopted is the adopt endpoint's answer: the state's size, how long reading it took (from
// etcd, for a failover) and how long the Adopt (until the state was durable here, in etcd).
type adopted struct {
	StateBytes int    `json:"state_bytes"`
	Read       string `json:"read"`
	Adopt      string `json:"adopt"`
}

// drop forgets a partition adopted here that the assignment then did not name here.
func (a *admin) drop(w http.ResponseWriter, r *http.Request) {
	p, ok := partitionParam(w, r)
	if !ok {
		return
	}
	if owner := a.view.snap().owner(p); owner == a.id {
		http.Error(w, fmt.Sprintf("partition %d is this node's", p), http.StatusConflict)
		return
	}
	a.node.DropPartition(a.topic, p)
	a.logs.close(p)
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
