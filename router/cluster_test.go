package router_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// cluster is several nodes in one process on one routertest.Network, sharing one set of
// logs: each owns the partitions of "orders" it was given (a gateway owns none).
type cluster struct {
	t     testing.TB
	net   *routertest.Network
	logs  *routertest.MemLogs
	mu    sync.RWMutex // guards owned
	owned map[string][]int32
	nodes map[string]*member
	down  sync.Map // node → true: what every member's Liveness answers
}

// member is one node of a cluster.
type member struct {
	id     string
	c      *cluster
	routes *clusterRoutes
	fs     *crashfs.FS
	cfg    router.Config
	node   *router.Node
}

// clusterRoutes is a member's view of who owns what: the cluster's table, with this member's
// partitions local and the others remote; it answers Liveness from the cluster.
type clusterRoutes struct {
	c  *cluster
	id string
}

func (r *clusterRoutes) Partitions(topic string) ([]int32, map[string][]int32, bool) {
	r.c.mu.RLock()
	defer r.c.mu.RUnlock()
	if topic != "orders" {
		return nil, nil, false
	}
	remote := map[string][]int32{}
	for id, parts := range r.c.owned {
		if id != r.id && len(parts) > 0 {
			remote[id] = parts
		}
	}
	return r.c.owned[r.id], remote, true
}

func (r *clusterRoutes) Down(node string) bool {
	_, down := r.c.down.Load(node)
	return down
}

// newCluster starts a node per entry of owned (its partitions of "orders"; none for a
// gateway), each configured further by tune when it is not nil.
func newCluster(t testing.TB, rtt time.Duration, owned map[string][]int32, tune func(id string, cfg *router.Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, net: &routertest.Network{RTT: rtt}, logs: &routertest.MemLogs{}, owned: owned, nodes: map[string]*member{}}
	for _, parts := range owned {
		for _, p := range parts {
			c.logs.Log("orders", p)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(owned)) {
		m := &member{id: id, c: c, routes: &clusterRoutes{c: c, id: id}, fs: crashfs.New()}
		m.cfg = router.Config{Logs: c.logs, Routes: m.routes, Dir: "/state-" + id, FS: m.fs,
			Transport: c.net.Transport(id),
			Topic:     func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: vt} }}
		if tune != nil {
			tune(id, &m.cfg)
		}
		m.start()
		c.nodes[id] = m
	}
	return c
}

func (m *member) start() {
	m.c.t.Helper()
	m.cfg.FS = m.fs
	node, err := router.New(m.cfg)
	require.NoError(m.c.t, err)
	m.node = node
	m.c.net.Join(m.id, node.Serve)
}

func (c *cluster) close() {
	for _, m := range c.nodes {
		require.NoError(c.t, m.node.Close())
	}
}

// owner returns the member owning partition p.
func (c *cluster) owner(p int32) *member {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for id, parts := range c.owned {
		if slices.Contains(parts, p) {
			return c.nodes[id]
		}
	}
	c.t.Fatalf("nobody owns partition %d", p)
	return nil
}

// produce appends n records to partition p and tells its owner.
func (c *cluster) produce(p int32, n int) {
	log := c.logs.Log("orders", p)
	owner := c.owner(p)
	for range n {
		off := log.Append(nil, []byte("v"), time.Now())
		owner.node.Appended("orders", p, off+1)
	}
}

// produceTo appends one record to partition p and returns the one record the consume behind
// got delivers, checking it arrived within bound of the append (why, with args, says what
// the bound allows).
func (c *cluster) produceTo(got <-chan []router.Message, p int32, bound time.Duration, why string, args ...any) router.Message {
	c.t.Helper()
	produced := time.Now()
	c.produce(p, 1)
	msgs := <-got
	require.Len(c.t, msgs, 1)
	assert.LessOrEqual(c.t, time.Since(produced), bound, append([]any{why}, args...)...)
	return msgs[0]
}

// assign changes who owns what, as the host's metadata would.
func (c *cluster) assign(id string, parts ...int32) {
	c.mu.Lock()
	c.owned[id] = parts
	c.mu.Unlock()
	for _, p := range parts {
		c.logs.Log("orders", p)
	}
}

func (m *member) consume(ctx context.Context, opts router.ConsumeOptions) []router.Message {
	m.c.t.Helper()
	msgs, err := m.node.Consume(ctx, "orders", opts)
	require.NoError(m.c.t, err)
	return msgs
}

// async runs a consume on m in its own goroutine; the result arrives on the channel.
func (m *member) async(ctx context.Context, opts router.ConsumeOptions) <-chan []router.Message {
	ch := make(chan []router.Message, 1)
	go func() {
		msgs, err := m.node.Consume(ctx, "orders", opts)
		if err != nil && ctx.Err() == nil {
			m.c.t.Error(err)
		}
		ch <- msgs
	}()
	return ch
}

func (m *member) ack(msg router.Message) error {
	return m.node.Ack(context.Background(), "orders", msg.Receipt)
}

// frames counts the frames of one op sent on the network (by its first byte).
type frames struct {
	mu    sync.Mutex
	count map[byte]int
}

func (f *frames) observe(_, _ string, frame []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.count == nil {
		f.count = map[byte]int{}
	}
	if len(frame) > 0 {
		f.count[frame[0]]++
	}
}

func (f *frames) of(op byte) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[op]
}

func (f *frames) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	total := 0
	for _, n := range f.count {
		total += n
	}
	return total
}

// The ops of the node wire, by their first byte.
const (
	opAckFrame      = 1
	opConsumeFrame  = 5
	opRegisterFrame = 6
	opNotifyFrame   = 7
	opPassFrame     = 8
	opCancelFrame   = 10
)

// probesOnly tunes a node as tune does (when not nil), with reading ahead off: for the tests
// of the probes, the claims and their frames, which a consume served from what the node read
// ahead would skip (readahead_test.go tests reading ahead).
func probesOnly(tune func(id string, cfg *router.Config)) func(id string, cfg *router.Config) {
	return func(id string, cfg *router.Config) {
		if tune != nil {
			tune(id, cfg)
		}
		topic := cfg.Topic
		cfg.Topic = func(name string) router.TopicConfig {
			var tc router.TopicConfig
			if topic != nil {
				tc = topic(name)
			}
			tc.ReadAhead = router.ReadAheadOff
			return tc
		}
	}
}
