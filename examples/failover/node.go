package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"narad.dev/consume/examples/internal/nodeproc"
	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
	"narad.dev/consume/router/nodehttp"
)

// A node process: what a host runs on each machine of its cluster.
//
//	an etcd member        one of three (embed), data in DIR/node-N/etcd
//	an etcd lease         of leaseTTL, kept alive by the node itself (lease.go): its session;
//	                      nodes/<id> → its address under it, and the owner keys of the
//	                      partitions granted to it
//	a view of etcd        Routes, OwnerFinder and Liveness of the router.Node, and its
//	                      Ownership (view.go, ownership.go); RoutesChanged on every change of
//	                      its partitions' routes or grants
//	a router.Node         its ack state in etcd (etcdStore, Config.Store, fenced by epoch), its
//	                      logs the shared log's partitions granted to it (logs.go)
//	a campaign            for the controller's election; the winner runs the controller
//	one HTTP server:
//	  POST /node            nodehttp.Handler: the peers' frames (node.Serve)
//	  /queue/...            httpapi: the clients' consume API
//	  POST /produce         ?partition=N, body = value: append (the partition's owner only)
//	  GET  /status          the partitions this node owns, as the node sees them
//	  POST /admin/handoff   ?partition=N: fence the partition's appends, HandOff, answer its bytes
//	  POST /admin/adopt     ?partition=N&epoch=E, body = a HandOff's bytes, or &from=store:
//	                        Load them from etcd (a failover); once this node's view has the
//	                        grant of epoch E, open the log under it, Adopt
//	  POST /admin/cut       ?on=1 or 0: the partition phase's test hook (see cutOff)
//
// It prints "ready" once it serves, "event ..." lines for the parent to show, and on SIGTERM
// it closes the node and its server ("closed"), then waits for its standard input to close
// (the parent has every node closed) before it stops its etcd member, so that no node's last
// saves go to a cluster that lost its quorum. A node whose lease expired (it was paused, or
// cut off from etcd) does not exit: its grants lapsed with the lease on its own clock, so it
// serves nothing of its old partitions, and it takes a new lease and serves on, through its
// peers, with no partition until the controller grants it one.

// leaseTTL is each node's etcd lease, in seconds: a node killed is found down this long
// after its last keep-alive, and a failover waits this long and 10% more besides. It must
// outlast an etcd leader election (1 to 2 s with etcd's default election timeout of 1 s,
// during which no keep-alive is answered) with the keep-alive interval to spare: the
// library deposes a partition the moment its grant lapses, even if the same grant comes
// back a moment later, and a 2 s lease lapsed in about one run in four at the kill of the
// raft leader.
const leaseTTL = 3

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

// errCut: the node is cut off from its peers (the partition's test hook).
var errCut = errors.New("cut off from its peers (the partition's test hook)")

// cutTransport is the node's Transport, with the partition's test hook: while cut, a call
// to a peer fails at once, as if the network dropped it (no reply: the 502 case).
type cutTransport struct {
	*nodehttp.Transport
	cut *atomic.Bool
}

func (t cutTransport) Call(ctx context.Context, to string, frame []byte) ([]byte, error) {
	if t.cut.Load() {
		return nil, errCut
	}
	return t.Transport.Call(ctx, to, frame)
}

// runNode is a node process.
func runNode(ctx context.Context, cfg config, out io.Writer, stdin io.Reader) (err error) {
	cc, self, err := readConfig(cfg.ConfigPath, cfg.ID)
	if err != nil {
		return err
	}
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
	lease, err := newNodeLease(ctx, cli, say)
	if err != nil {
		return err
	}
	lease.rejoin = func(ctx context.Context, id clientv3.LeaseID) error {
		_, err := cli.Put(ctx, nodeKey(self.ID), self.Addr, clientv3.WithLease(id))
		return err
	}

	// The router.Node, its Routes from the view, its Ownership from the view and the lease,
	// its logs the shared log's, its ack state in etcd. node is set before the view
	// publishes anything or the server takes a call.
	var node *router.Node
	v := newView(cc.Topic, self.ID)
	own := &etcdOwnership{topic: cc.Topic, self: self.ID, view: v, lease: lease}
	// Every lapse of its grants is told to the parent, with the partitions it held: the
	// library deposes them at once, so the acks it answered within a commit interval before
	// may come back, and their leases are dropped, as in a failover (the ledger's window).
	held := &heldGrants{}
	// Each partition comes with when its last save reached etcd (0: none in this process):
	// the acks applied since may be lost, which is one commit interval while etcd answers.
	var store *etcdStore
	lease.lapsed = func(st *leaseState, at time.Time, revoked bool) {
		parts := []string{}
		for p, epoch := range held.of(int64(st.id)) {
			var saved int64
			if t, ok := store.lastSaved(cc.Topic, p); ok {
				saved = t.UnixNano()
			}
			parts = append(parts, fmt.Sprintf("%d:%d:%d", p, epoch, saved))
		}
		if len(parts) == 0 {
			parts = append(parts, "-")
		}
		why := "unanswered" // no keep-alive answered before the lease's end
		if revoked {
			why = "revoked" // etcd said the lease is gone before its end on this node's clock
		}
		say.say("event lapsed %d %s %s", at.UnixNano(), strings.Join(parts, ","), why)
	}

	logs := newSharedLogs(cc.LogDir, cc.Topic, func(p int32, hwm int64) { node.Appended(cc.Topic, p, hwm) }, own.holds)
	routes := etcdRoutes{v}
	v.prepare = func(prev, next *snapshot) {
		// A partition the routes are about to name here: its log opens first, under its
		// grant, so the node finds it. (One adopted here is open already.)
		for _, p := range next.local {
			if g, ok := next.owners[p]; ok && g.node == self.ID && !slices.Contains(prev.local, p) {
				if err := logs.open(p, uint64(g.modRev)); err != nil {
					say.say("event %v", err)
				}
			}
		}
	}
	v.changed = func(prev, next *snapshot) {
		held.update(next, self.ID, int64(lease.state().id))
		if routesChanged(prev, next) {
			// Deposes at once what is no longer routed or granted here.
			node.RoutesChanged(cc.Topic)
		}
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
	var cut atomic.Bool
	transport, err := nodehttp.NewTransport(nodehttp.TransportConfig{Self: self.ID, Resolve: routes.resolve})
	if err != nil {
		return err
	}
	defer transport.CloseIdleConnections()
	store = newEtcdStore(cli, statePrefix, epochPrefix)
	node, err = router.New(router.Config{
		Logs:           logs,
		Routes:         routes,
		Ownership:      own,
		Dir:            filepath.Join(self.Dir, "consumer"), // locked; the state itself is in etcd
		Store:          store,
		CommitInterval: time.Duration(cc.CommitInterval),
		Transport:      cutTransport{transport, &cut},
		Topic:          cc.topicConfig,
		Logger:         nodeproc.Logger(self.ID, slog.LevelError),
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
	a := &admin{id: self.ID, topic: cc.Topic, node: node, logs: logs, store: store, view: v, own: own, lease: lease,
		cut: &cut, adopted: map[int32]uint64{}}
	mux := http.NewServeMux()
	peerHandler := &nodehttp.Handler{Serve: func(ctx context.Context, from string, frame []byte) ([]byte, error) {
		if cut.Load() {
			return nil, errCut
		}
		return node.Serve(ctx, from, frame)
	}}
	mux.Handle("POST /node", peerHandler)
	mux.Handle("/queue/", http.StripPrefix("/queue", api))
	mux.Handle("POST /produce", nodeproc.Produce(a.produce))
	mux.HandleFunc("GET /status", a.status)
	mux.HandleFunc("POST /admin/handoff", a.handOff)
	mux.HandleFunc("POST /admin/adopt", a.adopt)
	mux.HandleFunc("POST /admin/cut", a.cutOff)
	srv, err := nodeproc.Serve(self.Addr, mux)
	if err != nil {
		return err
	}

	// The view and the lease run until the node has closed (its last saves need its
	// grants); the controller's campaign stops first.
	infraCtx, stopInfra := context.WithCancel(ctx)
	defer stopInfra()
	var infra sync.WaitGroup
	defer infra.Wait()
	defer stopInfra()
	viewReady := make(chan struct{})
	infra.Go(func() { v.run(infraCtx, cli, viewReady) })
	select {
	case <-viewReady:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Live from here: the node's key, under its lease.
	if err := lease.rejoin(ctx, lease.state().id); err != nil {
		return fmt.Errorf("put %s: %w", nodeKey(self.ID), err)
	}
	infra.Go(func() { lease.run(infraCtx) })
	ctlCtx, stopCtl := context.WithCancel(infraCtx)
	defer stopCtl()
	var ctl sync.WaitGroup
	defer ctl.Wait()
	defer stopCtl()
	c := &controller{id: self.ID, cc: cc, cli: cli, view: v, say: say, store: store, http: &http.Client{Timeout: 10 * time.Second}}
	ctl.Go(func() { c.campaign(ctlCtx, lease) })
	say.say("ready")

	parentGone := nodeproc.InputClosed(stdin)
	srv.Wait(ctx, parentGone)

	// The shutdown: the controller stops, the node closes (its last saves go to etcd while
	// the quorum is there and its grants hold), then the server, then the peers' framed
	// connections (the handler's: the server's Shutdown does not wait for them), then the
	// view, the lease and the logs.
	stopCtl()
	ctl.Wait()
	closeErr := node.Close()
	shutErr := srv.Shutdown()
	handlerErr := peerHandler.Close()
	stopInfra()
	infra.Wait()
	err = errors.Join(closeErr, shutErr, handlerErr, logs.closeAll())
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

// routesChanged reports whether the view's change touches this node's routes or grants: its
// local partitions changed, or the owner key of one of them (before or after) did. The node
// calls RoutesChanged then, and not on other changes: between an Adopt here and the routes
// that name the partition here, a RoutesChanged would depose the partition just adopted (the
// routes do not name it here yet), and with it the live leases a hand-off carried.
func routesChanged(prev, next *snapshot) bool {
	if !slices.Equal(prev.local, next.local) {
		return true
	}
	for _, p := range next.local {
		if prev.owners[p] != next.owners[p] {
			return true
		}
	}
	return false
}

// admin is the node's HTTP endpoints beside the two handlers: produce, status, and the
// controller's hand-off and adopt, and the partition phase's test hook.
type admin struct {
	id    string
	topic string
	node  *router.Node
	logs  *sharedLogs
	store *etcdStore
	view  *view
	own   *etcdOwnership
	lease *nodeLease
	cut   *atomic.Bool

	adoptMu sync.Mutex
	adopted map[int32]uint64 // partition → the epoch of the grant it was last adopted under here
}

// produce appends value to partition p's log (POST /produce), if this node owns it: 409
// otherwise, naming the owner etcd names.
func (a *admin) produce(p int32, value []byte) (int64, error) {
	if owner := a.view.snap().owner(p); owner != a.id {
		return 0, &nodeproc.Refusal{Status: http.StatusConflict, Text: "owner " + owner}
	}
	offset, err := a.logs.append(p, value)
	if errors.Is(err, errNotHere) {
		return 0, &nodeproc.Refusal{Status: http.StatusConflict, Text: err.Error()} // fenced for a hand-off
	}
	return offset, err
}

// nodeStatus is the status endpoint's answer.
type nodeStatus struct {
	Node       string                     `json:"node"`
	Revision   int64                      `json:"revision"` // of the view the node's routes come from
	Partitions []nodeproc.PartitionStatus `json:"partitions"`
}

func (a *admin) status(w http.ResponseWriter, r *http.Request) {
	rev := a.view.snap().rev
	if parts, ok := nodeproc.Partitions(w, a.node, a.topic); ok {
		nodeproc.WriteJSON(w, nodeStatus{Node: a.id, Revision: rev, Partitions: parts})
	}
}

// refusedWhileCut answers 503 while the node is cut off from its peers (the partition's
// test hook): the controller's calls do not reach it.
func (a *admin) refusedWhileCut(w http.ResponseWriter) bool {
	if a.cut.Load() {
		http.Error(w, errCut.Error(), http.StatusServiceUnavailable)
		return true
	}
	return false
}

// handOff fences the partition's appends here, hands it off and answers its state. The
// Leased and Frontier headers say what it carries.
func (a *admin) handOff(w http.ResponseWriter, r *http.Request) {
	p, ok := nodeproc.Partition(w, r)
	if !ok || a.refusedWhileCut(w) {
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
		http.Error(w, err.Error(), router.HTTPStatus(err)) // fenced; a retry answers the same state
		return
	}
	w.Header().Set("Leased", strconv.Itoa(st.Leased))
	w.Header().Set("Frontier", strconv.FormatInt(st.Frontier, 10))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(state)
}

// grantWaitHere bounds how long an adopt waits for this node's view to see the grant it is
// told of: the controller's Txn has committed it, the watch brings it within milliseconds.
const grantWaitHere = 5 * time.Second

// adopt adopts the partition's state here under the grant of epoch: the body (a hand-off's
// bytes), or with from=store what etcd holds of it (a failover: the old owner's last save).
// It waits until this node's view has the grant (the library's Adopt installs only what the
// node's Ownership grants), opens the log under it, and adopts. Adopting from the store
// again under the same grant answers at once (a pass of the controller that stopped midway
// asks again; the state here is newer than the store's by then); adopting a hand-off's bytes
// again is the library's Adopt again, which installs nothing. It answers the state's size.
func (a *admin) adopt(w http.ResponseWriter, r *http.Request) {
	p, ok := nodeproc.Partition(w, r)
	if !ok || a.refusedWhileCut(w) {
		return
	}
	epoch, err := strconv.ParseUint(r.URL.Query().Get("epoch"), 10, 64)
	if err != nil || epoch == 0 {
		http.Error(w, "epoch: the grant's epoch, please", http.StatusBadRequest)
		return
	}
	fromStore := r.URL.Query().Get("from") == "store"
	a.adoptMu.Lock()
	defer a.adoptMu.Unlock()
	if fromStore && a.adopted[p] == epoch {
		nodeproc.WriteJSON(w, adopted{Again: true})
		return
	}
	start := time.Now()
	for !a.own.holds(p, epoch) {
		if time.Since(start) > grantWaitHere {
			http.Error(w, fmt.Sprintf("partition %d: this node holds no grant of epoch %d", p, epoch), http.StatusServiceUnavailable)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	granted := time.Now()
	var state []byte
	if fromStore {
		state, err = a.store.Load(r.Context(), a.topic, p)
	} else {
		state, err = io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if err := a.logs.open(p, epoch); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	loaded := time.Now()
	if len(state) > 0 { // none stored: nothing was ever acked, the partition loads empty
		if err := a.node.Adopt(r.Context(), a.topic, p, state); err != nil {
			http.Error(w, err.Error(), router.HTTPStatus(err))
			return
		}
	}
	a.adopted[p] = epoch
	nodeproc.WriteJSON(w, adopted{StateBytes: len(state), Granted: granted.Sub(start).String(), Read: loaded.Sub(granted).String(),
		Adopt: time.Since(loaded).String()})
}

// adopted is the adopt endpoint's answer: the state's size, how long this node's view took to
// see the grant, how long reading the state took (from etcd, for a failover) and opening the
// log, and how long the Adopt (until the state was durable here, in etcd).
type adopted struct {
	StateBytes int    `json:"state_bytes"`
	Granted    string `json:"granted"`
	Read       string `json:"read"`
	Adopt      string `json:"adopt"`
	Again      bool   `json:"again,omitempty"` // adopted under this grant already
}

// cutOff is the partition's test hook: with on=1 the node is cut off from its peers and from
// etcd's control plane, while its clients and its state store still reach it. Its Transport
// fails every call to a peer and its /node handler refuses every peer's call (each side sees
// no reply), the controller's calls here are refused, its view hears nothing more, and it
// sends no keep-alive, so its lease expires and its grants lapse on its clock at the end of
// the last keep-alive's TTL; it answers how long until then (lapse_in_ns). With on=0 all of
// it ends: the view reads afresh, the next keep-alive finds the lease gone, and the node
// takes a new one.
func (a *admin) cutOff(w http.ResponseWriter, r *http.Request) {
	on := r.URL.Query().Get("on") == "1"
	var left time.Duration
	if on {
		a.cut.Store(true)
		a.view.hold(true)
		left = a.lease.pause(true)
	} else {
		a.lease.pause(false)
		a.view.hold(false)
		a.cut.Store(false)
	}
	nodeproc.WriteJSON(w, cutAnswer{Cut: on, LapseInNs: int64(left)})
}

// cutAnswer is the cut endpoint's answer.
type cutAnswer struct {
	Cut       bool  `json:"cut"`
	LapseInNs int64 `json:"lapse_in_ns"` // with on=1: how long this node's grants live from the answer
}
