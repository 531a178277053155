package router_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// settleOps are the settles of one handle, each with what it answered.
func settleOps(node *router.Node) map[string]func(ctx context.Context, topic string, h router.Handle) error {
	return map[string]func(ctx context.Context, topic string, h router.Handle) error{
		"ack":         func(ctx context.Context, topic string, h router.Handle) error { return node.Ack(ctx, topic, h) },
		"ack durable": func(ctx context.Context, topic string, h router.Handle) error { return node.AckDurable(ctx, topic, h) },
		"extend": func(ctx context.Context, topic string, h router.Handle) error {
			_, err := node.Extend(ctx, topic, h, time.Minute)
			return err
		},
		"nack":    func(ctx context.Context, topic string, h router.Handle) error { return node.Nack(ctx, topic, h, 0) },
		"release": func(ctx context.Context, topic string, h router.Handle) error { return node.Release(ctx, topic, h) },
		"reject":  func(ctx context.Context, topic string, h router.Handle) error { return node.Reject(ctx, topic, h) },
		"ack batch": func(ctx context.Context, topic string, h router.Handle) error {
			return node.AckBatch(ctx, topic, []router.Handle{h})[0]
		},
		"ack async": func(_ context.Context, topic string, h router.Handle) error {
			got := make(chan error, 1)
			node.AckAsync(topic, h, func(err error) { got <- err })
			return <-got
		},
	}
}

// Issue 37: a settle of a partition the topic lacks (above every partition the routes name,
// or named since the node started) is ErrNoPartition, a 400 (ErrInvalidArgument), for every
// settle, and changes nothing; one the routes leave out below the highest they name, or
// named before and dropped since (a failover, a move), is ErrNotLocal as before: retryable.
// Here without a transport.
func TestNoPartitionWithoutTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		defer h.close()
		ctx := context.Background()
		h.produce(0, 1)
		m := h.one()
		for name, op := range settleOps(h.node) {
			err := op(ctx, "orders", router.Handle{Partition: 5, Offset: 0, Nonce: 1})
			assert.ErrorIs(t, err, router.ErrNoPartition, name)
			assert.ErrorIs(t, err, router.ErrInvalidArgument, name)
			assert.Equal(t, 400, router.HTTPStatus(err), name)
			assert.ErrorContains(t, err, "orders/5", name)
		}
		st, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, 1, st.Leased, "nothing changed")

		h.routes.Set("orders", 0, 2) // 1 unassigned for a while: below 2
		for name, op := range settleOps(h.node) {
			err := op(ctx, "orders", router.Handle{Partition: 1, Offset: 0, Nonce: 1})
			assert.ErrorIs(t, err, router.ErrNotLocal, name)
			assert.Equal(t, 503, router.HTTPStatus(err), name)
		}
		h.routes.Set("orders", 0) // 2, named before, unassigned: still one of the topic's
		err = h.node.Ack(ctx, "orders", router.Handle{Partition: 2, Offset: 0, Nonce: 1})
		assert.ErrorIs(t, err, router.ErrNotLocal)
		err = h.node.Ack(ctx, "orders", router.Handle{Partition: 3, Offset: 0, Nonce: 1})
		assert.ErrorIs(t, err, router.ErrNoPartition)

		h.routes.Set("orders") // none named now (a failover): the highest named since the start counts
		err = h.node.Ack(ctx, "orders", router.Handle{Partition: 2, Offset: 0, Nonce: 1})
		assert.ErrorIs(t, err, router.ErrNotLocal)
		err = h.node.Ack(ctx, "orders", router.Handle{Partition: 3, Offset: 0, Nonce: 1})
		assert.ErrorIs(t, err, router.ErrNoPartition)
		h.routes.Set("fresh") // a topic whose partitions the routes never named: not assigned yet
		err = h.node.Ack(ctx, "fresh", router.Handle{Partition: 3, Offset: 0, Nonce: 1})
		assert.NotErrorIs(t, err, router.ErrNoPartition)
		assert.Equal(t, 503, router.HTTPStatus(err), "%v", err)
		h.routes.Set("orders", 0)
		require.NoError(t, h.ack(m), "the lease was untouched")
	})
}

// The same with a transport: a partition the topic lacks is ErrNoPartition with no RPC; one
// whose owner the routes stopped naming (its owner failed, say) is ErrUnavailable, a 503, as
// before, whether it was the highest partition or not, with the routes' OwnerFinder and
// without it.
func TestNoPartitionWithTransport(t *testing.T) {
	routesModes(t, func(t *testing.T, edit func(id string, cfg *router.Config)) {
		synctest.Test(t, func(t *testing.T) {
			p := newPairWith(t, 0, 0, edit)
			defer p.close()
			ctx := context.Background()
			p.b.produce(1, 1)
			msgs := p.a.consume(router.ConsumeOptions{Max: 1, Wait: time.Second}) // a learns the routes: 0 here, 1 at b
			require.Len(t, msgs, 1)
			calls := p.net.Calls()
			for name, op := range settleOps(p.a.node) {
				err := op(ctx, "orders", router.Handle{Partition: 2, Offset: 0, Nonce: 1})
				assert.ErrorIs(t, err, router.ErrNoPartition, name)
				assert.Equal(t, 400, router.HTTPStatus(err), name)
			}
			assert.Equal(t, calls, p.net.Calls(), "no RPC")

			p.a.routes.SetRemote("orders", "b") // b failed: 1, the highest, is unassigned
			for name, op := range settleOps(p.a.node) {
				err := op(ctx, "orders", msgs[0].Receipt)
				assert.ErrorIs(t, err, router.ErrUnavailable, name)
				assert.Equal(t, 503, router.HTTPStatus(err), name)
			}
			assert.Equal(t, calls, p.net.Calls(), "no RPC")
			p.a.routes.SetRemote("orders", "b", 1)
			require.NoError(t, p.a.node.Ack(ctx, "orders", msgs[0].Receipt), "retried once it is routed again")
		})
	})
}
