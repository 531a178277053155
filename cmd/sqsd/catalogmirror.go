package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/sqsapi"
)

// The catalogue in cluster mode: the home node (the cluster file's first) keeps queues.json
// as one server does, and serves it to the others at its peer endpoints; every other node
// keeps a mirror of it (its own queues.json, a copy of the home's queues), forwards the
// writes to the home, and refreshes the mirror periodically, on a miss, and from the home's
// answer to a write it forwarded.

// Timings of a mirror.
const (
	// syncEvery is how often a mirror asks the home for the catalogue.
	syncEvery = time.Second
	// syncSpacing is the least time between the starts of two fetches: misses arriving
	// faster share fetches.
	syncSpacing = 50 * time.Millisecond
	// missBudget bounds how long a request that missed a queue waits for the home.
	missBudget = 2 * time.Second
	// announceBudget bounds how long the home waits for the other nodes to take a change.
	announceBudget = time.Second
)

// errCatalogConflict: a forwarded write based on a record the home no longer has (another
// node's write came first). The node answers ServiceUnavailable, which the SDKs retry.
var errCatalogConflict = errors.New("sqsd: the queue changed at the home meanwhile")

// A catalogSnapshot is the home's catalogue as it serves it. Epoch names the home's start,
// Gen counts its commits since then: a mirror applies no snapshot older than the one it has.
type catalogSnapshot struct {
	ID     string                  `json:"id"` // the catalogue's (catalogFile.ID)
	Epoch  string                  `json:"epoch"`
	Gen    uint64                  `json:"gen"`
	Queues map[string]catalogQueue `json:"queues"`
}

// A catalogPut is a write of one queue forwarded to the home: Record replaces Base (Exists:
// the queue existed), unless the home's record is no longer Base.
type catalogPut struct {
	Name   string             `json:"name"`
	Exists bool               `json:"exists"`
	Base   sqsapi.QueueRecord `json:"base"`
	Record sqsapi.QueueRecord `json:"record"`
}

// catalogPutAnswer is the home's answer to a catalogPut: the record stored, and the
// catalogue after it.
type catalogPutAnswer struct {
	Record  sqsapi.QueueRecord `json:"record"`
	Catalog catalogSnapshot    `json:"catalog"`
}

// catalogDelete is a DeleteQueue forwarded to the home.
type catalogDelete struct {
	Name string `json:"name"`
}

// snapshot is the catalogue as the home serves it.
func (c *catalog) snapshot(epoch string) catalogSnapshot {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return catalogSnapshot{ID: c.file.ID, Epoch: epoch, Gen: c.gen, Queues: c.file.Queues}
}

// sameRecord reports whether two records are the same queue's same version: as the home
// writes them, so that a record read back from JSON compares equal to the one it was.
func sameRecord(a, b sqsapi.QueueRecord) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && string(ja) == string(jb)
}

// catalogHome serves the catalogue to the other nodes, at the home.
type catalogHome struct {
	cat   *catalog
	epoch string
}

// newCatalogHome serves cat, naming it first if it has no ID yet (its first start in
// cluster mode).
func newCatalogHome(cat *catalog) (*catalogHome, error) {
	if err := cat.name(); err != nil {
		return nil, err
	}
	return &catalogHome{cat: cat, epoch: randomHex()}, nil
}

// randomHex is 8 random bytes in hex.
func randomHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// name gives the catalogue an ID if it has none, durably.
func (c *catalog) name() error {
	c.writes.Lock()
	defer c.writes.Unlock()
	next := c.next()
	if next.ID != "" {
		return nil
	}
	next.ID = randomHex()
	return c.commit(next)
}

// errOtherCatalog: the home serves a catalogue other than the one this node copied (the
// home started on another directory): refused, rather than dropping every queue the node
// has.
var errOtherCatalog = errors.New("sqsd: the home serves another cluster's catalogue")

// announce tells every other node that the catalogue changed, and waits, within
// announceBudget, for each to have fetched it: so a queue created, changed or deleted is
// known to every node that answers by the time its write is answered. A node that does not
// answer in time learns it at its next periodic fetch (or its next miss, or start).
func (h *catalogHome) announce(ctx context.Context, c *cluster, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), announceBudget)
	defer cancel()
	var wg sync.WaitGroup
	for i := range c.nodes {
		if i == c.self {
			continue
		}
		wg.Go(func() {
			var ack struct{}
			if err := c.call(ctx, i, "/sqsd/catalog/changed", struct{}{}, &ack); err != nil {
				logger.Debug("sqsd: a node did not take a change of the catalogue at once", "node", c.nodes[i].ID, "err", err)
			}
		})
	}
	wg.Wait()
}

// register mounts the home's endpoints on a peer mux (behind the cluster's token).
func (h *catalogHome) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /sqsd/catalog", func(w http.ResponseWriter, r *http.Request) {
		writePeerAnswer(w, h.cat.snapshot(h.epoch))
	})
	mux.HandleFunc("POST /sqsd/catalog/put", h.servePut)
	mux.HandleFunc("POST /sqsd/catalog/delete", h.serveDelete)
}

// servePut applies a catalogPut, as PutQueue would have at the home with the record the
// forwarding node's change returned.
func (h *catalogHome) servePut(w http.ResponseWriter, r *http.Request) {
	var in catalogPut
	if !readPeerRequest(w, r, &in) {
		return
	}
	if in.Name == "" || len(in.Name) > 80 {
		peerError(w, fmt.Errorf("%w: queue name %q", errBadPeerRequest, in.Name))
		return
	}
	rec, err := h.cat.PutQueue(r.Context(), in.Name, func(cur sqsapi.QueueRecord, exists bool) (sqsapi.QueueRecord, error) {
		switch {
		case exists != in.Exists || exists && !sameRecord(cur, in.Base):
			return sqsapi.QueueRecord{}, fmt.Errorf("%w: queue %q", errCatalogConflict, in.Name)
		case !exists && in.Record.Topic != "", exists && in.Record.Topic != cur.Topic:
			// The home names a new queue's topic, and a queue keeps its own.
			return sqsapi.QueueRecord{}, fmt.Errorf("%w: queue %q with topic %q", errBadPeerRequest, in.Name, in.Record.Topic)
		}
		return in.Record, nil
	})
	if err != nil {
		peerError(w, err)
		return
	}
	writePeerAnswer(w, catalogPutAnswer{Record: rec, Catalog: h.cat.snapshot(h.epoch)})
}

func (h *catalogHome) serveDelete(w http.ResponseWriter, r *http.Request) {
	var in catalogDelete
	if !readPeerRequest(w, r, &in) {
		return
	}
	if err := h.cat.DeleteQueue(r.Context(), in.Name); err != nil {
		if errors.Is(err, sqsapi.ErrQueueNotFound) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		peerError(w, err)
		return
	}
	writePeerAnswer(w, h.cat.snapshot(h.epoch))
}

// A catalogMirror keeps a node's catalogue a copy of the home's.
type catalogMirror struct {
	cat     *catalog
	cluster *cluster
	logger  *slog.Logger

	// The last snapshot applied.
	applied     sync.Mutex
	epoch       string
	gen         uint64
	haveApplied bool

	// The fetches: at most one at a time, no two starting within syncSpacing; a caller
	// waits for one that starts after it asked (so a miss sees what the home held then).
	mu        sync.Mutex
	waiters   []chan error
	running   bool
	lastStart time.Time
	closed    bool
	ctx       context.Context // ends at close: a fetch in progress ends
	cancel    context.CancelFunc
	loops     sync.WaitGroup
	failing   bool // the periodic fetch's own: the last failed (logged once until one succeeds)
	kicked    bool // a kick waits for the next fetch
}

func newCatalogMirror(cat *catalog, c *cluster, logger *slog.Logger) *catalogMirror {
	m := &catalogMirror{cat: cat, cluster: c, logger: logger}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// start runs the periodic fetch until close.
func (m *catalogMirror) start() {
	m.loops.Go(func() {
		t := time.NewTicker(syncEvery)
		defer t.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case <-t.C:
			}
			err := m.fresh(m.ctx)
			switch {
			case err != nil && !m.failing && m.ctx.Err() == nil:
				m.failing = true
				m.logger.Warn("sqsd: no catalogue from its home; serving the queues as last seen", "home", m.cluster.nodes[0].ID, "err", err)
			case err == nil && m.failing:
				m.failing = false
				m.logger.Info("sqsd: the catalogue comes from its home again", "home", m.cluster.nodes[0].ID)
			}
		}
	})
}

// close ends the fetches and waits for them.
func (m *catalogMirror) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.loops.Wait()
}

// fresh waits for a fetch of the home's catalogue that starts after the call, and returns
// its error, or ctx's.
func (m *catalogMirror) fresh(ctx context.Context) error {
	done := make(chan error, 1)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return router.ErrClosed
	}
	m.waiters = append(m.waiters, done)
	if !m.running {
		m.running = true
		m.loops.Go(m.fetchLoop)
	}
	m.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetchLoop fetches while callers wait, each fetch answering those that asked before it
// started.
func (m *catalogMirror) fetchLoop() {
	for {
		m.mu.Lock()
		if len(m.waiters) == 0 || m.closed {
			waiters := m.waiters
			m.waiters, m.running = nil, false
			m.mu.Unlock()
			for _, w := range waiters {
				w <- router.ErrClosed
			}
			return
		}
		wait := syncSpacing - time.Since(m.lastStart)
		m.mu.Unlock()
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-m.ctx.Done():
			}
		}
		m.mu.Lock()
		batch := m.waiters
		m.waiters, m.lastStart, m.kicked = nil, time.Now(), false
		m.mu.Unlock()
		err := m.fetch(m.ctx)
		for _, w := range batch {
			w <- err
		}
	}
}

// fetch asks the home for its catalogue and applies it.
func (m *catalogMirror) fetch(ctx context.Context) error {
	var snap catalogSnapshot
	if err := m.cluster.call(ctx, 0, "/sqsd/catalog", nil, &snap); err != nil {
		return err
	}
	return m.apply(snap)
}

// serveChanged is a mirror's peer endpoint the home calls after a change: the mirror
// fetches the catalogue, and answers once it has it.
func (m *catalogMirror) serveChanged(w http.ResponseWriter, r *http.Request) {
	var in struct{}
	if !readPeerRequest(w, r, &in) {
		return
	}
	if err := m.fresh(r.Context()); err != nil {
		peerError(w, unavailable(err))
		return
	}
	writePeerAnswer(w, struct{}{})
}

// kick asks for a fetch soon without waiting for it (a topic the node was asked of and does
// not know: created meanwhile, perhaps). Kicks arriving before it starts share it.
func (m *catalogMirror) kick() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.kicked {
		return
	}
	m.kicked = true
	m.waiters = append(m.waiters, make(chan error, 1)) // answered, and read by nobody
	if !m.running {
		m.running = true
		m.loops.Go(m.fetchLoop)
	}
}

// refreshOnMiss asks the home for its catalogue, within missBudget, and reports whether it
// answered.
func (m *catalogMirror) refreshOnMiss() bool {
	ctx, cancel := context.WithTimeout(m.ctx, missBudget)
	defer cancel()
	return m.fresh(ctx) == nil
}

// apply makes snap the node's catalogue, unless it is older than the one applied (the same
// start of the home, fewer commits).
func (m *catalogMirror) apply(snap catalogSnapshot) error {
	if snap.Queues == nil {
		snap.Queues = map[string]catalogQueue{}
	}
	for name, q := range snap.Queues {
		if q.Record.Topic == "" || q.Partitions < 1 || q.Partitions > 1024 {
			return fmt.Errorf("%w: queue %q with topic %q and %d partitions", errBadPeerAnswer, name, q.Record.Topic, q.Partitions)
		}
	}
	m.applied.Lock()
	defer m.applied.Unlock()
	if m.haveApplied && snap.Epoch == m.epoch && snap.Gen < m.gen {
		return nil
	}
	if err := m.cat.replace(snap.ID, snap.Queues); err != nil {
		return err
	}
	m.epoch, m.gen, m.haveApplied = snap.Epoch, snap.Gen, true
	return nil
}

// put serves PutQueue at a mirror: change is applied to the home's record, fetched first,
// and the result sent to the home, which stores it unless its record changed meanwhile
// (errCatalogConflict, ServiceUnavailable: the SDKs retry).
func (m *catalogMirror) put(ctx context.Context, name string, change func(rec sqsapi.QueueRecord, exists bool) (sqsapi.QueueRecord, error)) (sqsapi.QueueRecord, error) {
	if err := m.fresh(ctx); err != nil {
		return sqsapi.QueueRecord{}, unavailable(err)
	}
	base, exists := m.cat.lookup(name)
	rec, err := change(base, exists)
	if err != nil {
		return sqsapi.QueueRecord{}, err
	}
	var ans catalogPutAnswer
	err = m.cluster.call(ctx, 0, "/sqsd/catalog/put", catalogPut{Name: name, Exists: exists, Base: base, Record: rec}, &ans)
	if err != nil {
		return sqsapi.QueueRecord{}, unavailable(err)
	}
	if err := m.apply(ans.Catalog); err != nil {
		return sqsapi.QueueRecord{}, err
	}
	return ans.Record, nil
}

// delete serves DeleteQueue at a mirror, through the home.
func (m *catalogMirror) delete(ctx context.Context, name string) error {
	var snap catalogSnapshot
	err := m.cluster.call(ctx, 0, "/sqsd/catalog/delete", catalogDelete{Name: name}, &snap)
	if status, ok := errors.AsType[*peerStatusError](err); ok && status.Code == http.StatusNotFound {
		m.fresh(ctx) // the mirror had it: it learns it is gone
		return fmt.Errorf("%w: %q", sqsapi.ErrQueueNotFound, name)
	}
	if err != nil {
		return unavailable(err)
	}
	return m.apply(snap)
}

// unavailable is err, a failed call to the home, as an error the SDKs retry
// (ServiceUnavailable): the home down, or a conflict with another node's write.
func unavailable(err error) error {
	if router.HTTPStatus(err) == http.StatusServiceUnavailable {
		return err
	}
	return fmt.Errorf("%w: the catalogue's home: %w", router.ErrUnavailable, err)
}

// replace makes queues the catalogue (a mirror's, from its home), durably: the topics of
// queues new to it are created in the log, those of queues gone (deleted, or purged by the
// topic's change) dropped from the node and listed for removal at the next start, and those
// of queues changed reloaded.
func (c *catalog) replace(id string, queues map[string]catalogQueue) error {
	c.writes.Lock()
	defer c.writes.Unlock()
	cur := c.next()
	switch {
	case id == "":
		return fmt.Errorf("%w: a catalogue without an ID", errBadPeerAnswer)
	case cur.ID != "" && id != cur.ID:
		return fmt.Errorf("%w: %s, this node's copy is of %s (was the home started on another directory? move this node's queues.json away to take the home's)", errOtherCatalog, id, cur.ID)
	case cur.ID == "" && len(cur.Queues) > 0:
		return fmt.Errorf("%w: this node's directory holds the queues of a server of one process, which the home's would drop (start the node on a new directory)", errOtherCatalog)
	case cur.ID == id && jsonOf(cur.Queues) == jsonOf(queues):
		return nil
	}
	next := catalogFile{Queues: queues, Dropped: cur.Dropped, ID: id}
	live := map[string]bool{}
	for _, q := range queues {
		live[q.Record.Topic] = true
	}
	var gone, changed []string
	for name, q := range cur.Queues {
		switch nq, ok := queues[name]; {
		case !live[q.Record.Topic]:
			gone = append(gone, q.Record.Topic)
		case ok && nq.Record.Topic == q.Record.Topic && !sameRecord(nq.Record, q.Record):
			changed = append(changed, q.Record.Topic)
		}
	}
	next.Dropped = append(next.Dropped, gone...)
	if err := c.commit(next); err != nil {
		return err
	}
	for _, q := range queues {
		if err := c.createTopic(q.Record.Topic, q.Partitions); err != nil {
			return err
		}
	}
	for _, topic := range gone {
		if err := c.dropTopic(topic); err != nil {
			return err
		}
	}
	for _, topic := range changed {
		c.changed(topic)
	}
	return nil
}

// jsonOf is v as JSON, to compare: "" when it cannot be written.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
