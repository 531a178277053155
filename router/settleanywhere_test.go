package router_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
)

// Settles the same on every node, no clock on the wire, records nobody saw not counted, and
// peers believed only where the routes back them.

// tokensKeep is how soon a node registers again after a notification spent its token.
const tokensKeep = 500 * time.Millisecond

// skewedClock is the host's clock read off by offset, as a machine whose clock is wrong
// reads it: durations (AfterFunc) are right, times are not.
type skewedClock struct{ offset time.Duration }

func (c skewedClock) Now() time.Time { return time.Now().Add(c.offset) }

func (skewedClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Checklist 19, 86: a skewed clock costs no duplicate. Before, a lease's expiry crossed the
// wire as the owner's time and Work scheduled its extends from it on its own clock: with the
// owner 3 s ahead and a 2 s visibility, a record was delivered 3 times in 8 s while its
// handler still worked; with the owner 3 s behind, Work extended in a loop. Now the lease
// crosses as the time it has left, so each record is delivered once and extended every half
// of its visibility, whichever way the clock is off.
func TestSkewedOwnerClockCostsNoDuplicate(t *testing.T) {
	for _, offset := range []time.Duration{3 * time.Second, -3 * time.Second} {
		t.Run(offset.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const visibility = 2 * time.Second
				f := &frames{}
				c := newCluster(t, rtt, map[string][]int32{"a": {0}, "g": nil}, func(id string, cfg *router.Config) {
					if id == "a" {
						cfg.Clock = skewedClock{offset}
					}
					cfg.Topic = func(string) router.TopicConfig {
						return router.TopicConfig{VisibilityTimeout: visibility, MaxLeaseLifetime: time.Minute}
					}
				})
				c.net.Observe = f.observe
				defer c.close()
				c.produce(0, 1)
				ctx, cancel := context.WithCancel(context.Background())
				var handled atomic.Int32
				done := make(chan error, 1)
				go func() {
					done <- c.nodes["g"].node.Work(ctx, "orders", func(ctx context.Context, m router.Message) error {
						handled.Add(1)
						time.Sleep(8 * time.Second)
						return nil
					}, router.WorkOptions{Wait: time.Second})
				}()
				time.Sleep(10 * time.Second)
				synctest.Wait()
				cancel()
				require.NoError(t, <-done)
				assert.Equal(t, int32(1), handled.Load(), "delivered once")
				assert.LessOrEqual(t, f.of(wire.OpExtendLeft), 10, "extended every half visibility, not in a loop")
				assert.GreaterOrEqual(t, f.of(wire.OpExtendLeft), 7)
				msgs, err := c.nodes["g"].node.Consume(context.Background(), "orders", router.ConsumeOptions{})
				require.NoError(t, err)
				assert.Empty(t, msgs, "acked")
			})
		})
	}
}

// Checklist 40, 63: records nobody saw are not counted as delivered. A gateway gives back at
// their owner the records cut from a response (FitResponse) with a release, which does not
// count an attempt: with MaxDeliveries 1 they come again, first time, rather than
// quarantined without ever reaching a consumer.
func TestRecordsNobodySawAreNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var quarantined []int64
		var mu sync.Mutex
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "g": nil}, func(id string, cfg *router.Config) {
			cfg.Topic = func(string) router.TopicConfig {
				return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 1}
			}
			cfg.OnQuarantine = func(_ string, _ int32, off int64, _ uint32) {
				mu.Lock()
				quarantined = append(quarantined, off)
				mu.Unlock()
			}
		})
		defer c.close()
		g := c.nodes["g"].node
		c.produce(0, 5)
		msgs, err := g.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 5})
		require.NoError(t, err)
		require.Len(t, msgs, 5)
		kept := g.FitResponse(msgs, func(*router.Message) int { return 1 }, 2)
		require.Len(t, kept, 2)
		time.Sleep(10 * rtt) // the releases cross to the owner
		synctest.Wait()

		again, err := g.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 5})
		require.NoError(t, err)
		require.Len(t, again, 3, "visible again at once")
		for i, m := range again {
			assert.Equal(t, int64(2+i), m.Offset)
			assert.Equal(t, uint32(1), m.Attempt, "the cut delivery was not counted")
			assert.Equal(t, router.ReasonFirst, m.Reason)
		}
		mu.Lock()
		assert.Empty(t, quarantined)
		mu.Unlock()
	})
}

// Checklist 59, 62, 158: every settle works on every node. Release and AckDurable of a
// partition another node owns are forwarded to it, as acks, extends and nacks are; before,
// they answered ErrNotLocal, and Work on a gateway left what it held leased for a visibility
// timeout when its context ended.
func TestReleaseAndDurableAckThroughAGateway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "g": nil}, probesOnly(nil))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		c.produce(0, 2)

		m := g.consume(ctx, router.ConsumeOptions{})[0]
		require.NoError(t, g.node.Release(ctx, "orders", m.Receipt))
		again := g.consume(ctx, router.ConsumeOptions{})[0]
		assert.Equal(t, m.Offset, again.Offset, "visible again at once")
		assert.Equal(t, uint32(1), again.Attempt, "a release is not an attempt")
		require.NoError(t, g.node.AckDurable(ctx, "orders", again.Receipt))
		assert.ErrorIs(t, g.node.AckDurable(ctx, "orders", again.Receipt), router.ErrAlreadySettled)

		// Durable: the owner's process dies at once, and the ack survives it (an ack that is
		// not durable may not survive a power cut).
		a := c.nodes["a"]
		a.node.Close()
		a.fs = a.fs.PowerCut(crashfs.PowerCut{})
		a.start()
		next := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, next, 1)
		assert.Equal(t, int64(1), next[0].Offset, "the durable ack survived the power cut")

		// Work on the gateway releases what it holds at once when its context ends.
		workCtx, cancel := context.WithCancel(ctx)
		started := make(chan struct{})
		done := make(chan error, 1)
		require.NoError(t, g.node.Release(ctx, "orders", next[0].Receipt))
		go func() {
			done <- g.node.Work(workCtx, "orders", func(ctx context.Context, m router.Message) error {
				close(started)
				<-ctx.Done()
				return ctx.Err()
			}, router.WorkOptions{})
		}()
		<-started
		cancel()
		require.NoError(t, <-done)
		back := c.nodes["a"].consume(ctx, router.ConsumeOptions{})
		require.Len(t, back, 1, "released at once, not after %v", vt)
		assert.Equal(t, uint32(1), back[0].Attempt)
	})
}

// Checklist 152: an owner on a release before the node wire's version 7 gets the older
// settles: a nack with no delay for a release (counted there), an extend answered with its
// expiry, a consume without the relative expiry; a durable ack cannot go (ErrUnavailable,
// not applied). Each refusal is remembered, so it costs one refused request.
func TestOlderOwnerGetsTheOlderSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "g": nil}, atWire(6, "a"))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		c.produce(0, 2)
		msgs := g.consume(ctx, router.ConsumeOptions{Max: 2})
		require.Len(t, msgs, 2)
		assert.False(t, msgs[0].Expiry.IsZero())

		sent := time.Now()
		expiry, err := g.node.Extend(ctx, "orders", msgs[0].Receipt, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, sent.Add(rtt+rtt/2+time.Minute), expiry, "the older release's own expiry, after the refused ExtendLeft's round trip")
		assert.ErrorIs(t, g.node.AckDurable(ctx, "orders", msgs[0].Receipt), router.ErrUnavailable)
		require.NoError(t, g.node.Release(ctx, "orders", msgs[0].Receipt))
		again := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, again, 1)
		assert.Equal(t, int64(0), again[0].Offset)
		assert.Equal(t, router.ReasonNacked, again[0].Reason, "the older release's nack")
		require.NoError(t, g.ack(again[0]))
		require.NoError(t, g.ack(msgs[1]))
	})
}

// Checklist 97, 100: a node believes a peer only where its routes and tokens back it. A
// Notify from a node that owns nothing of the topic, or from an owner it left no token with,
// is passed and feeds no consumer, however many come; before, one fed a fabricated record to
// a consumer, and 10,000 forged ones kept a real record from it for 10 s. A record in a reply
// of a partition the routes do not give the replier is given back to it, not delivered.
func TestPeersAreBelievedOnlyWhereTheRoutesBackThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "g": nil}, nil)
		defer c.close()
		g := c.nodes["g"]
		got := g.async(context.Background(), router.ConsumeOptions{Wait: time.Minute})
		time.Sleep(10 * rtt)
		synctest.Wait()
		notify, err := wire.EncodeRequest(wire.Request{Op: wire.OpNotify, Topic: "orders", Hold: time.Second})
		require.NoError(t, err)
		for _, from := range []string{"evil", "a"} {
			for i := range 5000 {
				reply, err := g.node.Serve(context.Background(), from, notify)
				require.NoError(t, err)
				answers, err := wire.DecodeReply(reply)
				require.NoError(t, err)
				if from == "a" && i == 0 {
					// The owner's first spends the token g left with it: it is believed,
					// and g's consumer claims, finds nothing and waits on.
					require.Equal(t, wire.StatusOK, answers[0].Status)
					continue
				}
				require.Equal(t, wire.StatusPass, answers[0].Status, "a notification from %s that spends no token", from)
			}
		}
		time.Sleep(tokensKeep) // g registers again
		synctest.Wait()
		assert.Equal(t, uint64(9999), g.node.Stats().Remote.Unbacked)
		select {
		case msgs := <-got:
			t.Fatalf("a forged notification fed the consumer %v", msgs)
		default:
		}
		c.produceTo(got, 0, 2*rtt, "the real record is not held up")
	})
}

// A request id is drawn at random, so one seen id predicts nothing of the next.
func TestRequestIDsAreUnpredictable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var ids []uint64
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "g": nil}, nil)
		c.net.Observe = func(_, _ string, frame []byte) {
			if req, err := wire.DecodeRequest(frame, wire.Newest); err == nil && req.Op == wire.OpConsume {
				mu.Lock()
				ids = append(ids, req.Consume.RequestID)
				mu.Unlock()
			}
		}
		defer c.close()
		for range 20 {
			c.nodes["g"].consume(context.Background(), router.ConsumeOptions{})
		}
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, ids, 20)
		near := 0
		for i := 1; i < len(ids); i++ {
			if d := ids[i] - ids[i-1]; d < 1<<32 || -d < 1<<32 {
				near++
			}
		}
		assert.Zero(t, near, "ids %x", ids)
	})
}

// hidePartition is routes that do not give node owner the partition p (a node whose routes
// are behind, or a peer that serves what it does not own).
type hidePartition struct {
	router.Routes
	owner string
	p     int32
}

func (h hidePartition) Partitions(topic string) ([]int32, map[string][]int32, bool) {
	local, remote, ok := h.Routes.Partitions(topic)
	out := map[string][]int32{}
	for owner, parts := range remote {
		for _, p := range parts {
			if owner != h.owner || p != h.p {
				out[owner] = append(out[owner], p)
			}
		}
	}
	return local, out, ok
}

// A record in a reply of a partition the routes do not give the replier is not handed to a
// consumer: it is given back to the replier at once, uncounted.
func TestRecordsOfAPartitionTheRoutesDoNotGiveAreGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0, 1}, "g": nil}, func(id string, cfg *router.Config) {
			if id == "g" {
				cfg.Routes = hidePartition{Routes: cfg.Routes, owner: "a", p: 1}
			}
		})
		defer c.close()
		c.produce(1, 1)
		assert.Empty(t, c.nodes["g"].consume(context.Background(), router.ConsumeOptions{}))
		assert.Equal(t, uint64(1), c.nodes["g"].node.Stats().Remote.Unbacked)
		time.Sleep(10 * rtt)
		synctest.Wait()
		back := c.nodes["a"].consume(context.Background(), router.ConsumeOptions{})
		require.Len(t, back, 1, "given back at once")
		assert.Equal(t, int32(1), back[0].Partition)
		assert.Equal(t, uint32(1), back[0].Attempt)
	})
}
