package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/examples/filelog"
	"narad.dev/consume/router"
	"narad.dev/consume/router/nodehttp"
	"narad.dev/consume/router/sqsapi"
)

// shutdownGrace bounds how long a stop waits for requests in progress (a long-poll's
// receive ends at once: its context is cancelled) before the node is closed.
const shutdownGrace = 5 * time.Second

// A server is the queue server's parts: the catalogue of queues, the file log of their
// messages, the node that consumes it, and the SQS front end.
type server struct {
	dir    string
	logger *slog.Logger
	cat    *catalog
	store  *filelog.Store
	node   *router.Node
	api    *sqsapi.Handler
	routes router.Routes
	next   atomic.Uint32 // round robin over a queue's partitions
	// readAhead is a standard queue's TopicConfig.ReadAhead (config.readAhead).
	readAhead int

	// Cluster mode (nil cluster: one process serves every queue; see cluster.go).
	cluster     *cluster
	home        *catalogHome // this node keeps the catalogue (nil on the others)
	transport   *nodehttp.Transport
	peerSrv     *http.Server
	peerHandler *nodehttp.Handler
	peerDone    chan struct{}

	// With -fsync=false: the loop that syncs the log each second (stopSync ends it, and
	// syncDone says it has).
	stopSync chan struct{}
	syncDone chan struct{}

	generated       *generated // credentials made at this start
	credentialsPath string
	keys            int
}

// openServer opens (or creates) the server's state in cfg.dir. Close closes it.
func openServer(cfg config, logger *slog.Logger) (_ *server, err error) {
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return nil, err
	}
	s := &server{dir: cfg.dir, logger: logger, readAhead: cfg.readAhead}
	if s.cat, err = openCatalog(cfg.dir, cfg.partitions); err != nil {
		return nil, err
	}
	moves, err := openMoveTasks(cfg.dir) // the message move tasks (movetasks.go)
	if err != nil {
		return nil, err
	}
	s.routes = routes{s}
	if cfg.clusterPath != "" {
		cf, self, err := readClusterFile(cfg.clusterPath, cfg.nodeID)
		if err != nil {
			return nil, err
		}
		s.cluster = newCluster(cf, self)
		s.routes = clusterRoutes{s}
		s.cat.noPurge = true
		if s.cluster.isHome() {
			if s.home, err = newCatalogHome(s.cat); err != nil {
				return nil, err
			}
			s.cat.announce = func(ctx context.Context) { s.home.announce(ctx, s.cluster, logger) }
		} else {
			s.cat.mirror = newCatalogMirror(s.cat, s.cluster, logger)
		}
		if err := s.startTransport(); err != nil {
			return nil, err
		}
	}
	logDir := filepath.Join(cfg.dir, "log")
	dropped := s.cat.dropped()
	for _, topic := range dropped { // deleted and purged lives: their records go
		if err := os.RemoveAll(filepath.Join(logDir, url.PathEscape(topic))); err != nil {
			return nil, err
		}
	}
	opts := filelog.Options{
		// Each append tells the node, which wakes a parked receive. s.node is set below,
		// before anything is appended.
		OnAppend: func(topic string, p int32, hwm int64) { s.node.Appended(topic, p, hwm) },
	}
	if cfg.fsync {
		opts.Sync = filelog.SyncEveryAppend
	}
	if s.store, err = filelog.Open(logDir, opts); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	for topic, partitions := range s.cat.queues() { // a queue whose creation a crash cut short
		if err := s.createTopic(topic, partitions); err != nil {
			return nil, err
		}
	}
	var transport router.Transport
	if s.transport != nil {
		transport = s.transport
	}
	s.node, err = router.New(router.Config{
		Logs:         s.store,
		Routes:       s.routes,
		Transport:    transport,
		Dir:          filepath.Join(cfg.dir, "consumer"),
		Logger:       logger,
		Topic:        s.topicConfig,
		OnQuarantine: s.onQuarantine,
		NotBefore:    sqsapi.NotBefore, // DelaySeconds: a message waits out its delay
	})
	if err != nil {
		return nil, err
	}
	for _, topic := range dropped {
		if err := s.node.DeleteTopic(topic); err != nil {
			return nil, err
		}
	}
	if err := s.cat.forgetDropped(dropped); err != nil {
		return nil, err
	}
	// Every partition loaded now, so that the queues' counts (GetQueueAttributes) are right
	// from the start: the node counts a partition once something has loaded it.
	for topic := range s.cat.queues() {
		for _, p := range s.localPartitions(topic) {
			if _, err := s.node.Quarantined(topic, p); err != nil {
				return nil, err
			}
		}
	}
	s.cat.createTopic = s.createTopic
	s.cat.dropTopic = s.node.DeleteTopic
	s.cat.changed = s.node.ReloadTopic

	creds, err := s.credentials(cfg)
	if err != nil {
		return nil, err
	}
	key, err := s.receiptKey()
	if err != nil {
		return nil, err
	}
	s.api, err = sqsapi.New(durableAcks{s.node, s.isLocal}, sqsapi.Config{
		Store:         s.cat,
		BaseURL:       cfg.baseURL,
		ProduceRecord: s.produce,
		Credentials:   creds,
		Region:        cfg.region,
		ReceiptKey:    key,
		Logger:        logger,
		Routes:        s.routes,
		Now:           cfg.now,
		MoveTasks:     moves,
	})
	if err != nil {
		return nil, err
	}
	if !cfg.fsync {
		s.stopSync, s.syncDone = make(chan struct{}), make(chan struct{})
		go s.syncEach(time.Second, s.store.Sync)
	}
	if err := s.redriveQuarantined(); err != nil {
		return nil, err
	}
	if s.cluster != nil {
		if err := s.listenPeers(); err != nil {
			return nil, err
		}
		if m := s.cat.mirror; m != nil {
			if err := m.fresh(context.Background()); err != nil { // bounded by peerBudget
				logger.Warn("sqsd: no catalogue from its home; serving the queues as last seen", "home", s.cluster.nodes[0].ID, "err", err)
			}
			m.start()
		}
	}
	return s, nil
}

// syncEach syncs the log (sync: its Sync) every interval until stopSync closes: with
// -fsync=false, what a crash of the machine may lose is about the last interval's sends. A
// failed sync is logged and tried again at the next tick.
func (s *server) syncEach(interval time.Duration, sync func() error) {
	defer close(s.syncDone)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.stopSync:
			return
		case <-tick.C:
			if err := sync(); err != nil {
				s.logger.Error("sqsd: syncing the log", "err", err)
			}
		}
	}
}

// createTopic creates the partitions of a queue's topic (of partitions partitions) this
// node owns in its file log: every one of them, or in cluster mode its own alone, so that a
// send appended here (filelog.Store.AppendAny picks among the log's partitions) lands on a
// partition this node serves.
func (s *server) createTopic(topic string, partitions int) error {
	if s.cluster == nil {
		return s.store.CreateTopic(topic, partitions)
	}
	return s.store.CreatePartitions(topic, s.cluster.routes(partitions).local)
}

// localPartitions returns the partitions of topic this node owns.
func (s *server) localPartitions(topic string) []int32 {
	local, _, _ := s.routes.Partitions(topic)
	return local
}

// isLocal reports whether this node owns partition p of topic.
func (s *server) isLocal(topic string, p int32) bool {
	return s.cluster == nil || s.cluster.owner(p) == s.cluster.self
}

// Close closes the node (which persists every ack and reports what it could not), then the
// log.
func (s *server) Close() error {
	var errs []error
	if s.api != nil {
		s.api.Close() // its message move tasks end
	}
	if s.cat.mirror != nil {
		s.cat.mirror.close()
	}
	if s.node != nil {
		if err := s.node.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the node: %w", err))
		}
	}
	if err := s.closePeers(); err != nil {
		errs = append(errs, fmt.Errorf("closing the peer listener: %w", err))
	}
	if s.stopSync != nil {
		close(s.stopSync)
		<-s.syncDone
	}
	if err := s.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the log: %w", err))
	}
	return errors.Join(errs...)
}

// topicConfig is the node's Config.Topic: a queue's settings (sqsapi.TopicConfig): its
// RedrivePolicy's maxReceiveCount as the topic's MaxDeliveries, so that the node quarantines
// a message received that many times without a delete and onQuarantine moves it to the
// dead-letter queue; a FIFO queue's topic ordered by key, its messages' MessageGroupId; its
// visibility timeout; and a standard queue's read-ahead, -read-ahead's.
func (s *server) topicConfig(topic string) router.TopicConfig {
	_, rec, ok := s.cat.queueOfTopic(topic)
	if !ok {
		return router.TopicConfig{}
	}
	cfg := sqsapi.TopicConfig(rec)
	if cfg.ReadAhead != router.ReadAheadOff { // a FIFO queue reads none ahead
		cfg.ReadAhead = s.readAhead
	}
	return cfg
}

// produce is the front end's Config.ProduceRecord: one record in a partition of the queue's
// topic: for a record with a key (a message's MessageGroupId) the key's, by its hash, so
// that a FIFO queue's group stays in one partition, where the node orders it; otherwise the
// file log's choice among this node's partitions (filelog.Store.AppendAny): with -fsync, one
// whose fsync concurrent sends share, the partitions kept near even. (A queue's partitions
// are fixed when it is created: -partitions at a restart changes new queues only.) In
// cluster mode a key's partition another node owns gets the record through that node, and
// so does a standard queue's record on a node that owns none of the queue's partitions (see
// "Cluster mode").
func (s *server) produce(ctx context.Context, topic string, rec router.Record) (int32, int64, error) {
	n, ok := s.cat.partitionsOf(topic)
	if !ok {
		return 0, 0, router.ErrUnknownTopic
	}
	if len(rec.Key) > 0 {
		p := int32(crc32.ChecksumIEEE(rec.Key) % uint32(n))
		if !s.isLocal(topic, p) {
			return s.forwardProduce(ctx, s.cluster.owner(p), topic, p, rec)
		}
		off, err := s.store.AppendRecord(topic, p, rec)
		return p, off, err
	}
	local := s.localPartitions(topic)
	if len(local) == 0 {
		if s.cluster == nil {
			return 0, 0, router.ErrUnknownTopic
		}
		return s.produceAnywhere(ctx, topic, n, rec)
	}
	return s.store.AppendAny(topic, rec)
}

// routes are the node's Routes: every partition of a queue's live topic is this node's;
// the topics of deleted and purged lives are no one's.
type routes struct{ s *server }

func (r routes) Partitions(topic string) ([]int32, map[string][]int32, bool) {
	if !r.s.cat.live(topic) {
		return nil, nil, false
	}
	return r.s.store.Partitions(topic)
}

// durableAcks makes every DeleteMessage durable before it is answered: a message whose
// delete succeeded is never delivered again, whatever crashes (router.Node.AckDurable, and
// Persist for a batch: group-committed, a sync shared by the deletes that arrive
// meanwhile). In cluster mode a batch's handles of partitions other nodes own go to their
// owners one by one, each answered once it is on the owner's disk (AckDurable forwarded).
type durableAcks struct {
	*router.Node
	local func(topic string, p int32) bool
}

func (d durableAcks) Ack(ctx context.Context, topic string, h router.Handle) error {
	return d.Node.AckDurable(ctx, topic, h)
}

func (d durableAcks) AckBatch(ctx context.Context, topic string, hs []router.Handle) []error {
	var remote []int // indexes of the handles other nodes own
	for i, h := range hs {
		if !d.local(topic, h.Partition) {
			remote = append(remote, i)
		}
	}
	if len(remote) == 0 {
		return d.ackLocal(ctx, topic, hs)
	}
	errs := make([]error, len(hs))
	var wg sync.WaitGroup
	for _, i := range remote {
		wg.Go(func() { errs[i] = d.Node.AckDurable(ctx, topic, hs[i]) })
	}
	var here []router.Handle
	var at []int
	for i, h := range hs {
		if d.local(topic, h.Partition) {
			here, at = append(here, h), append(at, i)
		}
	}
	if len(here) > 0 {
		for j, err := range d.ackLocal(ctx, topic, here) {
			errs[at[j]] = err
		}
	}
	wg.Wait()
	return errs
}

// ackLocal acks handles of this node's partitions, then persists each partition once.
func (d durableAcks) ackLocal(ctx context.Context, topic string, hs []router.Handle) []error {
	errs := d.Node.AckBatch(ctx, topic, hs)
	failed := map[int32]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	seen := map[int32]bool{}
	for i, err := range errs {
		p := hs[i].Partition
		if err != nil || seen[p] {
			continue
		}
		seen[p] = true
		wg.Go(func() {
			if err := d.Node.Persist(ctx, topic, p); err != nil {
				mu.Lock()
				failed[p] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil && failed[hs[i].Partition] != nil {
			errs[i] = failed[hs[i].Partition]
		}
	}
	return errs
}

// receiptKey is the key of the receipt handles' tags, dir/receipt.key, made at the first
// start: handles stay valid across a restart. In cluster mode it is derived from the
// cluster's secret, so that a handle is valid on every node.
func (s *server) receiptKey() ([]byte, error) {
	if s.cluster != nil {
		return s.cluster.receiptKey, nil
	}
	const name = "receipt.key"
	key, err := os.ReadFile(filepath.Join(s.dir, name))
	switch {
	case err == nil && len(key) == 32:
		return key, nil
	case err == nil:
		return nil, fmt.Errorf("sqsd: %s is %d bytes, not 32: damaged (remove it to make another; receipt handles issued before then stop working)", filepath.Join(s.dir, name), len(key))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	key = make([]byte, 32)
	rand.Read(key)
	return key, writeFileAtomic(s.dir, name, name+".tmp", key, 0o600)
}

// run serves until ctx ends, then stops gracefully: requests in progress end (long-polls
// at once), the node closes, persisting every ack, and its error is returned.
func run(ctx context.Context, cfg config, logger *slog.Logger, out io.Writer) (err error) {
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if cfg.baseURL == "" {
		cfg.baseURL = defaultURL(ln.Addr().String(), cfg.tlsCert != "")
	}
	s, err := openServer(cfg, logger)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		} else if err == nil {
			logger.Info("sqsd: stopped; every ack is on disk")
		}
	}()
	if err := s.announce(cfg, out); err != nil {
		return err
	}

	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	mux := http.NewServeMux()
	mux.Handle("/", s.api)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() {
		if cfg.tlsCert != "" {
			served <- srv.ServeTLS(ln, cfg.tlsCert, cfg.tlsKey)
		} else {
			served <- srv.Serve(ln)
		}
	}()
	logger.Info("sqsd: serving", "url", cfg.baseURL, "addr", ln.Addr().String(), "dir", cfg.dir)
	if cfg.ready != nil {
		cfg.ready(cfg.baseURL)
	}
	select {
	case err = <-served:
		return err
	case <-ctx.Done():
	}
	logger.Info("sqsd: stopping")
	cancel() // long-polls end
	sctx, scancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("sqsd: requests still in progress at shutdown", "err", err)
	}
	<-served
	return nil
}

// defaultURL is the URL of a server listening on addr.
func defaultURL(addr string, tls bool) string {
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
