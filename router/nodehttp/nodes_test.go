package nodehttp_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/router/nodehttp"
	"narad.dev/consume/router/routertest"
)

// cluster is real router.Nodes on real loopback servers, each calling the others through
// its nodehttp.Transport.
type cluster struct {
	t        *testing.T
	logs     *routertest.MemLogs
	nodes    map[string]*router.Node
	servers  map[string]*server
	handlers map[string]*nodehttp.Handler
	// frames, when set before the cluster starts, sees every frame a node's handler takes,
	// before the node serves it.
	frames func(to, from string, frame []byte)
}

// newCluster starts a node per entry of owned, each owning the given partitions of topic
// "orders", in mode m. Everything closes when the test ends: the nodes, then the servers,
// then the transports' idle connections.
func newCluster(t *testing.T, m mode, owned map[string][]int32, frames func(to, from string, frame []byte)) *cluster {
	t.Helper()
	c := &cluster{t: t, logs: &routertest.MemLogs{}, nodes: map[string]*router.Node{}, servers: map[string]*server{},
		handlers: map[string]*nodehttp.Handler{}, frames: frames}
	addrs := peers{}
	ids := slices.Sorted(maps.Keys(owned))
	for _, id := range ids {
		s := newServer(t)
		c.servers[id] = s
		addrs[id] = s.base + "/consume/node"
		for _, p := range owned[id] {
			c.logs.Log("orders", p)
		}
	}
	for _, id := range ids {
		routes := &routertest.Routes{}
		routes.Set("orders", owned[id]...)
		for other, parts := range owned {
			if other != id && len(parts) > 0 {
				routes.SetRemote("orders", other, parts...)
			}
		}
		node, err := router.New(router.Config{Logs: c.logs, Routes: routes, Dir: "/state-" + id, FS: crashfs.New(),
			Transport: newTransport(t, m, id, addrs)})
		require.NoError(t, err)
		c.nodes[id] = node
		t.Cleanup(func() { assert.NoError(t, node.Close()) }) // before the servers close
		serve := node.Serve
		if frames != nil {
			serve = func(ctx context.Context, from string, frame []byte) ([]byte, error) {
				frames(id, from, frame)
				return node.Serve(ctx, from, frame)
			}
		}
		mux := http.NewServeMux()
		c.handlers[id] = &nodehttp.Handler{Serve: serve}
		mux.Handle("POST /consume/node", c.handlers[id])
		c.servers[id].start(mux)
	}
	return c
}

// down takes node id's server away, as a host shutting it down does: the server closes,
// then its handler, which ends the framed connections the server no longer knows of.
func (c *cluster) down(id string) {
	c.servers[id].Close()
	require.NoError(c.t, c.handlers[id].Close())
}

// produce appends n records to partition p, which owner owns, and tells it.
func (c *cluster) produce(owner string, p int32, n int) {
	log := c.logs.Log("orders", p)
	for range n {
		off := log.Append(nil, []byte("v"), time.Now())
		c.nodes[owner].Appended("orders", p, off+1)
	}
}

// An ack, extend or nack of a record another node owns crosses real HTTP to the owner and
// is answered as the owner answers; an owner whose server is gone is a 502.
func TestForwardedAckOverHTTP(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		c := newCluster(t, m, map[string][]int32{"a": {0}, "b": {1}}, nil)
		a, b := c.nodes["a"], c.nodes["b"]
		ctx := context.Background()
		c.produce("a", 0, 4)
		msgs, err := a.Consume(ctx, "orders", router.ConsumeOptions{Max: 4})
		require.NoError(t, err)
		require.Len(t, msgs, 4)

		require.NoError(t, b.Ack(ctx, "orders", msgs[0].Receipt), "acked through b")
		err = b.Ack(ctx, "orders", msgs[0].Receipt)
		assert.ErrorIs(t, err, router.ErrAlreadySettled, "the owner's answer, carried back")
		assert.Equal(t, 410, router.HTTPStatus(err))
		expiry, err := b.Extend(ctx, "orders", msgs[1].Receipt, time.Hour)
		require.NoError(t, err)
		assert.True(t, expiry.After(msgs[1].Expiry), "the owner's new expiry")
		require.NoError(t, b.Nack(ctx, "orders", msgs[2].Receipt, 0))
		again, err := a.Consume(ctx, "orders", router.ConsumeOptions{})
		require.NoError(t, err)
		require.Len(t, again, 1)
		assert.Equal(t, msgs[2].Offset, again[0].Offset, "the forwarded nack made it visible at once")
		errs := b.AckBatch(ctx, "orders", []router.Handle{msgs[1].Receipt, again[0].Receipt})
		assert.Equal(t, []error{nil, nil}, errs, "one AckBatch to the owner")
		assert.Equal(t, uint64(3), a.Stats().Shards.Acked, "applied on the owner")
		assert.NotZero(t, c.servers["a"].requests.Load())
		assert.True(t, c.servers["a"].sawOnly(m.proto))

		c.down("a") // the owner's server goes: nothing listens there any more
		err = b.Ack(ctx, "orders", msgs[3].Receipt)
		assert.ErrorIs(t, err, router.ErrTransport)
		assert.Equal(t, 502, router.HTTPStatus(err))
	})
}

// A gateway that owns nothing serves a consume from the owner over HTTP, both ways the
// wire has: a probe that finds the record at once, and a token left with the owner, whose
// notification comes back to the gateway over the gateway's own server and is claimed.
// Acks go back to the owner through the gateway.
func TestGatewayConsumeOverHTTP(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		var once sync.Once
		registered := make(chan struct{})
		c := newCluster(t, m, map[string][]int32{"b": {0}, "g": nil}, func(to, from string, frame []byte) {
			if to == "b" && from == "g" && len(frame) > 0 && frame[0] == wire.OpRegister {
				once.Do(func() { close(registered) })
			}
		})
		b, g := c.nodes["b"], c.nodes["g"]
		ctx := context.Background()

		c.produce("b", 0, 1)
		// A wait, so that a busy machine's slow round trip is not the consume's end: the
		// probe answers it all the same.
		msgs, err := g.Consume(ctx, "orders", router.ConsumeOptions{Wait: time.Minute})
		require.NoError(t, err)
		require.Len(t, msgs, 1, "the probe's round trip")
		assert.Equal(t, int64(0), msgs[0].Offset)
		assert.Equal(t, uint64(1), g.Stats().Remote.ProbeHits)
		require.NoError(t, g.Ack(ctx, "orders", msgs[0].Receipt), "forwarded to the owner")
		assert.Equal(t, uint64(1), b.Stats().Shards.Acked)

		got := make(chan []router.Message, 1)
		go func() {
			msgs, err := g.Consume(ctx, "orders", router.ConsumeOptions{Wait: time.Minute})
			assert.NoError(t, err)
			got <- msgs
		}()
		<-registered // the gateway's consumer parked and left its token with the owner
		c.produce("b", 0, 1)
		msgs = <-got
		require.Len(t, msgs, 1, "notified, then claimed")
		assert.Equal(t, int64(1), msgs[0].Offset)
		st := g.Stats().Remote
		assert.NotZero(t, st.Notifications)
		assert.Equal(t, uint64(1), st.ClaimHits)
		assert.NotZero(t, b.Stats().Remote.Notified, "the owner called the gateway back")
		assert.NotZero(t, c.servers["g"].requests.Load(), "over the gateway's own server")
		require.NoError(t, g.Ack(ctx, "orders", msgs[0].Receipt))
		assert.Equal(t, uint64(2), b.Stats().Shards.Acked)
		assert.True(t, c.servers["b"].sawOnly(m.proto))
		assert.True(t, c.servers["g"].sawOnly(m.proto))
	})
}

// An owner that hangs over real HTTP (its handler takes frames and never answers) stalls no
// consume of a gateway: the live owner's records are served while a probe of the hung one is
// still out, and once a probe ran out of its budget the hung owner is passed over. The
// consumes wait, so that how fast a busy machine answers decides nothing: with no wait a
// consume's probes had ConsumeOverrun for a round trip, and under load with the race detector
// the live owner's answer came later than that.
func TestHungOwnerOverHTTP(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		var hanging atomic.Bool
		release := make(chan struct{})
		c := newCluster(t, m, map[string][]int32{"a": {0}, "b": {1}, "g": nil}, func(to, _ string, _ []byte) {
			if to == "b" && hanging.Load() {
				<-release // held until the test ends, as a hung process holds a request
			}
		})
		t.Cleanup(func() { close(release) }) // before the nodes close
		hanging.Store(true)
		g := c.nodes["g"]
		ctx := context.Background()
		c.produce("a", 0, 20)
		for i := range 20 {
			msgs, err := g.Consume(ctx, "orders", router.ConsumeOptions{Wait: time.Minute})
			require.NoError(t, err, "consume %d", i)
			require.Len(t, msgs, 1, "consume %d: the live owner's record", i)
			assert.Equal(t, int32(0), msgs[0].Partition)
			require.NoError(t, g.Ack(ctx, "orders", msgs[0].Receipt))
		}
		// Nothing at a: a wait past a probe's budget, by which b's probes ran out. The probe
		// that ran out marks b slow from its own goroutine, which a busy machine may run only
		// after the consume's wait ended: consumes wait again, each for as long, until it did.
		for i := 0; i == 0 || g.Stats().Remote.SlowOwners == 0 && i < 10; i++ {
			msgs, _ := g.Consume(ctx, "orders", router.ConsumeOptions{Wait: router.ProbeBudget + 100*time.Millisecond})
			assert.Empty(t, msgs)
		}
		st := g.Stats().Remote
		assert.Equal(t, uint64(1), st.SlowOwners, "b passed over")
		assert.NotZero(t, st.Hedges, "a probed while b's probe was out")
	})
}
