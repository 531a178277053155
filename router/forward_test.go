package router_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/inflight"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// pair is two nodes, "a" owning partition 0 of orders and "b" owning partition 1, on one
// in-memory network.
type pair struct {
	a, b *harness
	net  *routertest.Network
}

func newPair(t *testing.T, rtt time.Duration, window int) *pair {
	t.Helper()
	return newPairWith(t, rtt, window, nil)
}

// newPairWith is newPair with edit, if not nil, applied to each node's Config before the
// node starts.
func newPairWith(t *testing.T, rtt time.Duration, window int, edit func(id string, cfg *router.Config)) *pair {
	t.Helper()
	net := &routertest.Network{RTT: rtt}
	logs := &routertest.MemLogs{}
	logs.Log("orders", 0)
	logs.Log("orders", 1)
	mk := func(id string, local int32, other string, remote int32) *harness {
		h := &harness{t: t, logs: logs, routes: &routertest.Routes{}, fs: crashfs.New(), dir: "/state-" + id}
		h.routes.Set("orders", local)
		h.routes.SetRemote("orders", other, remote)
		h.cfg = router.Config{Logs: logs, Routes: h.routes, Dir: h.dir, Transport: net.Transport(id), AckWindow: window,
			Topic: func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: vt} }}
		if edit != nil {
			edit(id, &h.cfg)
		}
		h.start()
		net.Join(id, h.node.Serve)
		return h
	}
	p := &pair{net: net}
	p.a = mk("a", 0, "b", 1)
	p.b = mk("b", 1, "a", 0)
	return p
}

func (p *pair) close() {
	p.a.close()
	p.b.close()
}

// partitionsOnly hides every optional capability of the routes it wraps (OwnerFinder among
// them): the node finds a partition's owner in what Partitions returns.
type partitionsOnly struct{ router.Routes }

// routesModes runs test with the routes as routertest gives them (an OwnerFinder) and with
// Partitions only, the two ways a node finds the owner of a forwarded ack's partition.
func routesModes(t *testing.T, test func(t *testing.T, edit func(id string, cfg *router.Config))) {
	t.Run("OwnerFinder", func(t *testing.T) { test(t, nil) })
	t.Run("PartitionsOnly", func(t *testing.T) {
		test(t, func(_ string, cfg *router.Config) { cfg.Routes = partitionsOnly{cfg.Routes} })
	})
}

// Checklist 158, 164: an ack, extend or nack for a partition another node owns is forwarded
// and answered as the owner answers.
func TestForwardedSettles(t *testing.T) {
	routesModes(t, testForwardedSettles)
}

func testForwardedSettles(t *testing.T, edit func(id string, cfg *router.Config)) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, time.Millisecond, 0, edit)
		defer p.close()
		p.a.produce(0, 3)
		msgs := p.a.consume(router.ConsumeOptions{Max: 3})
		require.Len(t, msgs, 3)
		ctx := context.Background()

		require.NoError(t, p.b.node.Ack(ctx, "orders", msgs[0].Receipt), "acked through b")
		assert.ErrorIs(t, p.b.node.Ack(ctx, "orders", msgs[0].Receipt), inflight.ErrAlreadySettled)
		sent := time.Now()
		expiry, err := p.b.node.Extend(ctx, "orders", msgs[1].Receipt, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, sent.Add(time.Minute), expiry, "the time left at the owner, counted from when the extend left: never later than the owner's expiry")
		require.NoError(t, p.b.node.Nack(ctx, "orders", msgs[2].Receipt, 0))
		again := p.a.one()
		assert.Equal(t, msgs[2].Offset, again.Offset, "the forwarded nack made it visible at once")

		stale := msgs[2].Receipt
		err = p.b.node.Ack(ctx, "orders", stale)
		assert.ErrorIs(t, err, inflight.ErrGone)
		assert.Equal(t, 410, router.HTTPStatus(err))
		assert.ErrorIs(t, p.b.node.Ack(ctx, "orders", router.Handle{Partition: -1, Nonce: 1}), inflight.ErrMalformedHandle, "refused here, no RPC")
		assert.Equal(t, uint64(1), p.a.node.Stats().Shards.Acked, "applied on the owner")
	})
}

// Checklist 166, 167: a down owner's handles get 502 (no reply came back), an owner the
// routes do not name 503 with no RPC, and the others are unaffected.
func TestForwardFailures(t *testing.T) {
	routesModes(t, testForwardFailures)
}

func testForwardFailures(t *testing.T, edit func(id string, cfg *router.Config)) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, 0, 0, edit)
		defer p.close()
		p.a.produce(0, 2)
		msgs := p.a.consume(router.ConsumeOptions{Max: 2})
		ctx := context.Background()
		p.net.SetDown("a", true)
		err := p.b.node.Ack(ctx, "orders", msgs[0].Receipt)
		assert.ErrorIs(t, err, router.ErrTransport)
		assert.Equal(t, 502, router.HTTPStatus(err))
		p.net.SetDown("a", false)

		calls := p.net.Calls()
		err = p.b.node.Ack(ctx, "orders", router.Handle{Partition: 9, Nonce: 1})
		assert.ErrorIs(t, err, router.ErrUnavailable)
		assert.Equal(t, 503, router.HTTPStatus(err))
		assert.Equal(t, calls, p.net.Calls(), "no RPC for an owner nobody names")

		errs := p.b.node.AckBatch(ctx, "orders", []router.Handle{msgs[0].Receipt, {Partition: 9, Nonce: 1}, msgs[1].Receipt, {}})
		require.NoError(t, errs[0])
		assert.ErrorIs(t, errs[1], router.ErrUnavailable)
		require.NoError(t, errs[2])
		assert.ErrorIs(t, errs[3], inflight.ErrMalformedHandle)
		assert.Equal(t, calls+1, p.net.Calls(), "one AckBatch for the owner's two handles")
	})
}

// Checklist 159, 160: below the window every ack is its own RPC; past it, acks queue and
// leave in batches, one per freed slot.
func TestForwardedAcksCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 10*time.Millisecond, 2)
		defer p.close()
		const acks = 40
		p.a.produce(0, acks)
		msgs := p.a.consume(router.ConsumeOptions{Max: acks})
		require.Len(t, msgs, acks)
		before := p.net.Calls()
		var wg sync.WaitGroup
		for _, m := range msgs {
			wg.Go(func() {
				assert.NoError(t, p.b.node.Ack(context.Background(), "orders", m.Receipt))
			})
		}
		wg.Wait()
		rpcs := p.net.Calls() - before
		assert.Less(t, rpcs, int64(acks/4), "batches formed behind a full window")
		assert.Equal(t, uint64(acks), p.a.node.Stats().Shards.Acked)
	})
}

// olderOwner is an owner on a release before AckBatch (a node at Config.WireVersion 1),
// counting the AckBatch frames it is sent: it refuses each as an op it does not know.
type olderOwner struct {
	node    *router.Node
	batches int
}

func (o *olderOwner) serve(ctx context.Context, from string, frame []byte) ([]byte, error) {
	if frame[0] == 4 { // AckBatch
		o.batches++
	}
	return o.node.Serve(ctx, from, frame)
}

// atVersion pins node id of a pair to a node-wire version.
func atVersion(id string, version uint8) func(string, *router.Config) {
	return func(node string, cfg *router.Config) {
		if node == id {
			cfg.WireVersion = version
		}
	}
}

// Checklist 165: an owner that refuses AckBatch gets the queued acks one at a time, and only
// single ops for two minutes.
func TestForwardToAnOlderOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPairWith(t, 10*time.Millisecond, 1, atVersion("a", 1))
		defer p.close()
		older := &olderOwner{node: p.a.node}
		p.net.Join("a", older.serve)
		p.a.produce(0, 20)
		msgs := p.a.consume(router.ConsumeOptions{Max: 20})
		var wg sync.WaitGroup
		for _, m := range msgs {
			wg.Go(func() {
				assert.NoError(t, p.b.node.Ack(context.Background(), "orders", m.Receipt))
			})
		}
		wg.Wait()
		assert.Equal(t, uint64(20), p.a.node.Stats().Shards.Acked, "every ack answered once, applied once")
		assert.Equal(t, 1, older.batches, "one refused batch, then single ops for two minutes")
	})
}

// A frame this node cannot read is refused inside the reply, not with a transport error.
func TestServeRefusesMalformedFrames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 0, 0)
		defer p.close()
		for _, frame := range [][]byte{nil, {1}, {1, 0, 6, 'o'}, {4, 0, 0, 0, 0}, {99, 0, 0}} {
			reply, err := p.a.node.Serve(context.Background(), "b", frame)
			require.NoError(t, err)
			assert.NotEmpty(t, reply)
		}
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		p.a.produce(0, 1)
		m := p.a.one()
		reply, err := p.a.node.Serve(cancelled, "b", forwardFrame(t, m))
		require.NoError(t, err)
		assert.NotEmpty(t, reply)
		require.NoError(t, p.a.ack(m), "a frame whose requester gave up is not applied")
	})
}

// forwardFrame captures the frame b sends to forward an ack of m.
func forwardFrame(t *testing.T, m router.Message) []byte {
	var frame []byte
	capture := transportFunc(func(ctx context.Context, to string, f []byte) ([]byte, error) {
		frame = f
		return nil, errors.New("captured")
	})
	routes := &routertest.Routes{}
	routes.SetRemote("orders", "a", 0)
	node, err := router.New(router.Config{Logs: &routertest.MemLogs{}, Routes: routes, Dir: "/x", FS: crashfs.New(), Transport: capture})
	require.NoError(t, err)
	defer node.Close()
	node.Ack(context.Background(), "orders", m.Receipt)
	return frame
}

type transportFunc func(ctx context.Context, to string, frame []byte) ([]byte, error)

func (f transportFunc) Call(ctx context.Context, to string, frame []byte) ([]byte, error) {
	return f(ctx, to, frame)
}

// promptFunc is a transportFunc that promises to return once its context is done.
type promptFunc transportFunc

func (f promptFunc) Call(ctx context.Context, to string, frame []byte) ([]byte, error) {
	return f(ctx, to, frame)
}

func (promptFunc) HonorsContext() {}

// A ContextTransport is called from the goroutine that waits for the reply, with the
// call's budget as its context: a Call that returns only when that context ends makes a
// forwarded ack, a client's batch ack and a remote consume answer at their budgets.
func TestContextTransportCallsEndAtTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		hang := promptFunc(func(ctx context.Context, to string, frame []byte) ([]byte, error) {
			calls.Add(1)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		routes := &routertest.Routes{}
		routes.SetRemote("orders", "a", 0)
		node, err := router.New(router.Config{Logs: &routertest.MemLogs{}, Routes: routes, Dir: "/x", FS: crashfs.New(), Transport: hang})
		require.NoError(t, err)
		defer node.Close()
		h := router.Handle{Partition: 0, Offset: 1, Nonce: 1}

		start := time.Now()
		err = node.Ack(context.Background(), "orders", h)
		assert.ErrorIs(t, err, router.ErrTransport)
		assert.Equal(t, router.ForwardBudget, time.Since(start), "answered at its budget")

		start = time.Now()
		for _, err := range node.AckBatch(context.Background(), "orders", []router.Handle{h, h}) {
			assert.ErrorIs(t, err, router.ErrTransport)
		}
		assert.Equal(t, router.ForwardBudget, time.Since(start))

		ctx, cancel := context.WithTimeout(context.Background(), router.ConsumeOverrun/2)
		defer cancel()
		start = time.Now()
		_, err = node.Consume(ctx, "orders", router.ConsumeOptions{})
		assert.Error(t, err)
		assert.Equal(t, router.ConsumeOverrun/2, time.Since(start), "the consume's own context ends the probe")
		synctest.Wait() // the probe's cancel goes in the background, after the consume returned
		assert.Equal(t, int32(4), calls.Load(), "the ack, the batch, the probe and its cancel")
	})
}
