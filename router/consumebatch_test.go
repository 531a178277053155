package router_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// opConsumeBatchFrame is the ConsumeBatch op's first byte.
const opConsumeBatchFrame = wire.OpConsumeBatch

// consumeWindow is the consume window of a node started while GOMAXPROCS is 2 (see
// withTwoProcs): two consumes to one owner in flight before the next queue.
const consumeWindow = 2

// withTwoProcs sets GOMAXPROCS to 2 until the test ends, so the nodes it starts have a
// consume window of two whatever the machine.
func withTwoProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// startConsumers starts n consumes of opts on m at once, and returns their results in the
// order they were started.
func startConsumers(ctx context.Context, m *member, n int, opts router.ConsumeOptions) []<-chan []router.Message {
	got := make([]<-chan []router.Message, n)
	for i := range got {
		got[i] = m.async(ctx, opts)
	}
	return got
}

// Consumes a gateway sends one owner past its consume window share frames: with 20
// consumers at once, the first two go alone, and the 18 that queued behind them leave in one
// ConsumeBatch when the first comes back. Each consumer gets records of its own (none given
// to two), in two round trips at most.
func TestConsumesShareAFrame(t *testing.T) {
	withTwoProcs(t)
	synctest.Test(t, func(t *testing.T) {
		var seen frames
		c := newCluster(t, rtt, map[string][]int32{"b": {0, 1}, "g": nil}, probesOnly(func(id string, cfg *router.Config) {
			cfg.Transport = observedTransport{cfg.Transport, &seen}
		}))
		defer c.close()
		c.produce(0, 30)
		c.produce(1, 30)
		g := c.nodes["g"]
		const consumers = 20
		start := time.Now()
		got := startConsumers(context.Background(), g, consumers, router.ConsumeOptions{Max: 2})
		leased := map[router.Handle]bool{}
		for i, ch := range got {
			msgs := <-ch
			require.Len(t, msgs, 2, "consumer %d", i)
			for _, m := range msgs {
				assert.False(t, leased[m.Receipt], "record %d/%d given to two consumers", m.Partition, m.Offset)
				leased[m.Receipt] = true
			}
		}
		assert.Equal(t, 2*rtt, time.Since(start), "the queued ones waited for one round trip")
		assert.Equal(t, consumeWindow, seen.of(opConsumeFrame), "the first ones went alone")
		assert.Equal(t, 1, seen.of(opConsumeBatchFrame), "the rest shared one frame")
		assert.Equal(t, uint64(consumers), c.nodes["b"].node.Stats().Remote.Served, "every consume served")

		// Alone again once nothing is in flight.
		msgs := g.consume(context.Background(), router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		assert.Equal(t, consumeWindow+1, seen.of(opConsumeFrame))
	})
}

// A batch asks for RemoteBatch records at most, and a full one does not wait for a slot: two
// consumes of 40 queued behind the window leave together at once (a third would take the
// frame past 100, and waits for a slot), and a consume of RemoteBatch records goes alone,
// whatever is in flight.
func TestFullBatchLeavesAtOnce(t *testing.T) {
	withTwoProcs(t)
	synctest.Test(t, func(t *testing.T) {
		var seen frames
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, probesOnly(func(id string, cfg *router.Config) {
			cfg.Transport = observedTransport{cfg.Transport, &seen}
		}))
		defer c.close()
		c.produce(0, 500)
		g := c.nodes["g"]
		ctx := context.Background()
		start := time.Now()
		first := startConsumers(ctx, g, consumeWindow, router.ConsumeOptions{})
		time.Sleep(rtt / 10) // the window is taken
		forty := startConsumers(ctx, g, 3, router.ConsumeOptions{Max: 40})
		hundred := startConsumers(ctx, g, 1, router.ConsumeOptions{Max: router.RemoteBatch})
		all := append(append(first, forty...), hundred...)
		took := make([]time.Duration, len(all))
		var wg sync.WaitGroup
		for i, ch := range all {
			wg.Go(func() {
				assert.NotEmpty(t, <-ch)
				took[i] = time.Since(start)
			})
		}
		wg.Wait()
		pair, third := rtt+rtt/10, 2*rtt
		assert.Equal(t, []time.Duration{rtt, rtt}, took[:2], "the window")
		slices.Sort(took[2:5])
		assert.Equal(t, []time.Duration{pair, pair, third}, took[2:5], "the full pair at once, the third behind a slot")
		assert.Equal(t, pair, took[5], "the hundred alone, at once")
		assert.Equal(t, 1, seen.of(opConsumeBatchFrame), "the pair")
		assert.Equal(t, consumeWindow+2, seen.of(opConsumeFrame), "the window, the third and the hundred alone")
	})
}

// A lease that came back in a batch counts its time left from when the batch left, not from
// when its consume queued: its Expiry is what the owner granted, less the trip out, however
// long it waited for a slot.
func TestQueuedConsumeCountsItsLeaseFromItsFrame(t *testing.T) {
	withTwoProcs(t)
	synctest.Test(t, func(t *testing.T) {
		const trip = 10 * time.Millisecond
		c := newCluster(t, trip, map[string][]int32{"b": {0}, "g": nil}, probesOnly(nil))
		defer c.close()
		c.produce(0, 4)
		g := c.nodes["g"]
		ctx := context.Background()
		start := time.Now()
		first := startConsumers(ctx, g, consumeWindow, router.ConsumeOptions{})
		time.Sleep(time.Millisecond) // the window is taken: the next ones queue
		queued := startConsumers(ctx, g, 2, router.ConsumeOptions{})
		for _, ch := range first {
			msgs := <-ch
			require.Len(t, msgs, 1)
			assert.Equal(t, start.Add(vt), msgs[0].Expiry, "alone: from when it was sent")
		}
		for _, ch := range queued {
			msgs := <-ch
			require.Len(t, msgs, 1)
			assert.Equal(t, start.Add(trip+vt), msgs[0].Expiry, "from when its batch left, a round trip in")
		}
	})
}

// A consumer that leaves while its batch is out (its context ends) is answered at once, and
// the records its member of the reply carried are given back when the reply comes: visible
// again at the owner, well before their visibility timeout, while the other members keep
// theirs. The Cancel the leaver sends is lost here, so the reply's give-back alone brings
// them back.
func TestLeavingMemberGivesItsRecordsBack(t *testing.T) {
	withTwoProcs(t)
	synctest.Test(t, func(t *testing.T) {
		const trip = 10 * time.Millisecond
		c := newCluster(t, trip, map[string][]int32{"b": {0}, "g": nil}, probesOnly(nil))
		defer c.close()
		c.net.Fault = (&dropFrames{from: "g", to: "b", op: opCancelFrame, what: routertest.DropRequest, on: true}).fault
		c.produce(0, 5) // two for the first, two for the leaver, one for the one that stays
		g, b := c.nodes["g"], c.nodes["b"]
		ctx := context.Background()
		start := time.Now()
		first, stay, leave := queueALeaver(ctx, g)
		time.Sleep(trip + trip/2) // the first came back; the batch of two is halfway there
		require.ErrorIs(t, leave(), context.Canceled, "answered as it left, before the reply")
		for _, ch := range append(first, stay...) {
			require.Len(t, <-ch, 1)
		}
		time.Sleep(2 * trip) // the reply came back, and the leaver's records went home
		synctest.Wait()
		assert.Equal(t, uint64(consumeWindow+2), b.node.Stats().Remote.Served, "the leaver's consume was served")
		assert.Zero(t, b.node.Stats().Remote.Cancelled, "its cancel was lost")
		again := b.consume(ctx, router.ConsumeOptions{Max: 10})
		assert.Len(t, again, 2, "the leaver's two records, visible again")
		assert.Less(t, time.Since(start), vt, "well before their visibility timeout")
	})
}

// A consume queued behind consumes to an owner that does not answer still returns by its
// own deadline (a consume with no wait: ConsumeOverrun), like the ones in flight.
func TestQueuedConsumeEndsByItsDeadline(t *testing.T) {
	withTwoProcs(t)
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		c.produce(0, 5)
		c.net.Fault = (&dropFrames{from: "g", to: "b", op: opConsumeFrame, what: routertest.DropRequest, on: true}).fault
		g := c.nodes["g"]
		start := time.Now()
		done := make(chan error, consumeWindow+3)
		for range consumeWindow + 3 {
			go func() {
				_, err := g.node.Consume(context.Background(), "orders", router.ConsumeOptions{})
				done <- err
			}()
		}
		for range consumeWindow + 3 {
			assert.ErrorIs(t, <-done, router.ErrTransport)
		}
		assert.Equal(t, router.ConsumeOverrun, time.Since(start), "every one by its deadline")
	})
}

// An owner on a release before ConsumeBatch refuses the first batch as an unknown op; its
// members go again one by one, each getting its record, and the owner gets no batch for
// two minutes, then is asked again: one refused request per two minutes.
func TestOwnerBeforeConsumeBatchGetsThemAlone(t *testing.T) {
	withTwoProcs(t)
	synctest.Test(t, func(t *testing.T) {
		var seen frames
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, func(id string, cfg *router.Config) {
			switch id {
			case "b":
				cfg.WireVersion = 7
			case "g":
				// Version 8, so that its consumes carry no field the owner refuses alone
				// (the Headers flag, each consume's own refusal: TestHeadersOlderOwner).
				cfg.WireVersion = 8
			}
			cfg.Transport = observedTransport{cfg.Transport, &seen}
		})
		defer c.close()
		c.produce(0, 30)
		g := c.nodes["g"]
		round := func() {
			t.Helper()
			got := startConsumers(context.Background(), g, consumeWindow+3, router.ConsumeOptions{})
			var offsets []int64
			for _, ch := range got {
				msgs := <-ch
				require.Len(t, msgs, 1)
				offsets = append(offsets, msgs[0].Offset)
			}
			slices.Sort(offsets)
			assert.Len(t, slices.Compact(offsets), consumeWindow+3, "a record each")
		}
		round()
		assert.Equal(t, 1, seen.of(opConsumeBatchFrame), "refused once")
		assert.Equal(t, consumeWindow+3, seen.of(opConsumeFrame), "then one by one")
		round()
		assert.Equal(t, 1, seen.of(opConsumeBatchFrame), "remembered: no batch")
		time.Sleep(2*time.Minute + time.Second)
		round()
		assert.Equal(t, 2, seen.of(opConsumeBatchFrame), "asked again after two minutes")
	})
}

// An owner bounds a ConsumeBatch's whole reply at ResponseLimit: each member's records are
// cut at what the members before it left of the bound (the first always carried, the rest
// given back), and a member past the bound is answered unavailable and leases nothing.
func TestConsumeBatchReplyIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}}, nil)
		defer c.close()
		const mib = 1 << 20 // a record's value: a batch scan stops at 4 of them (BatchPayloadBytes)
		log := c.logs.Log("orders", 0)
		for range 12 {
			off := log.Append(nil, make([]byte, mib), time.Time{})
			c.nodes["b"].node.Appended("orders", 0, off+1)
		}
		member := func(id uint64, max int32) wire.Consume {
			return wire.Consume{RequestID: id, Pinned: -1, Max: max, Budget: time.Second}
		}
		frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpConsumeBatch, Topic: "orders",
			Consumes: []wire.Consume{member(1, 1), member(2, 8), member(3, 8), member(4, 8), member(5, 8)}})
		require.NoError(t, err)
		raw, err := c.nodes["b"].node.Serve(context.Background(), "g", frame)
		require.NoError(t, err)
		reply, err := wire.DecodeConsumeBatchReply(raw, 5)
		require.NoError(t, err)
		var statuses []byte
		var carried []int
		served := 0
		for _, m := range reply.Members {
			r, err := wire.DecodeConsumeReply(m)
			require.NoError(t, err)
			statuses = append(statuses, r.Status)
			carried = append(carried, len(r.Deliveries))
			served += len(r.Deliveries)
		}
		// 1 MiB, then 4 (5 in all), then 2 of the 4 scanned (under 8), then the one always
		// carried (past 8), then none.
		assert.Equal(t, []int{1, 4, 2, 1, 0}, carried)
		assert.Equal(t, []byte{wire.StatusOK, wire.StatusOK, wire.StatusOK, wire.StatusOK, wire.StatusUnavailable}, statuses)
		left := c.nodes["b"].consume(context.Background(), router.ConsumeOptions{Max: 12})
		assert.Len(t, left, 12-served, "what no member carried was not left leased")
	})
}

// A member of a ConsumeBatch whose budget ran out while the owner served the members before
// it is answered unavailable, unserved: its requester no longer waits for it.
func TestConsumeBatchMemberPastItsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := routertest.NewClock(time.Now())
		c := newCluster(t, rtt, map[string][]int32{"b": {0}}, func(_ string, cfg *router.Config) { cfg.Clock = clock })
		defer c.close()
		c.produce(0, 2)
		c.logs.Log("orders", 0).OnRead(func(int64) { clock.Advance(2 * time.Millisecond) }) // serving takes 2 ms
		frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpConsumeBatch, Topic: "orders", Consumes: []wire.Consume{
			{RequestID: 1, Pinned: -1, Max: 1, Budget: time.Second},
			{RequestID: 2, Pinned: -1, Max: 1, Budget: time.Millisecond},
		}})
		require.NoError(t, err)
		raw, err := c.nodes["b"].node.Serve(context.Background(), "g", frame)
		require.NoError(t, err)
		reply, err := wire.DecodeConsumeBatchReply(raw, 2)
		require.NoError(t, err)
		second, err := wire.DecodeConsumeReply(reply.Members[1])
		require.NoError(t, err)
		assert.Equal(t, wire.StatusUnavailable, second.Status)
		assert.Empty(t, second.Deliveries)
		c.logs.Log("orders", 0).OnRead(nil)
		assert.Len(t, c.nodes["b"].consume(context.Background(), router.ConsumeOptions{}), 1, "the second record was not leased")
	})
}

// An owner before consumption across nodes (wire version 2) refuses the consume op once per
// two minutes, queued consumes included: the window's consumes go alone and are refused, the
// consumes that queued behind them leave as one ConsumeBatch (it left as the refusals came
// back) and, that refused too, are answered unavailable without going again one by one (they
// used to, each a refused consume frame after the refusal was known).
func TestOwnerBeforeConsumeRefusesQueuedOnce(t *testing.T) {
	withTwoProcs(t)
	synctest.Test(t, func(t *testing.T) {
		var seen frames
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, probesOnly(func(id string, cfg *router.Config) {
			if id == "b" {
				cfg.WireVersion = 2
			}
			cfg.Transport = observedTransport{cfg.Transport, &seen}
		}))
		defer c.close()
		c.produce(0, 10)
		g := c.nodes["g"]
		errs := make(chan error, consumeWindow+3)
		for range consumeWindow + 3 {
			go func() {
				_, err := g.node.Consume(context.Background(), "orders", router.ConsumeOptions{})
				errs <- err
			}()
		}
		for range consumeWindow + 3 {
			assert.ErrorIs(t, <-errs, router.ErrUnavailable)
		}
		assert.Equal(t, consumeWindow, seen.of(opConsumeFrame), "the window's consumes, refused; none of the queued ones alone")
		assert.LessOrEqual(t, seen.of(opConsumeBatchFrame), 1, "the queued ones, in one frame at most")
	})
}

// queueALeaver starts on m, inside a synctest bubble, the window's consumes of one record
// (first), then a consume of two that queues behind them and leaves when leave is called
// (leave waits for the bubble, then returns its error), then one more consume of one that
// queues with it and stays.
func queueALeaver(ctx context.Context, m *member) (first, stay []<-chan []router.Message, leave func() error) {
	first = startConsumers(ctx, m, consumeWindow, router.ConsumeOptions{})
	time.Sleep(time.Millisecond) // the first ones left alone
	leaving, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() {
		_, err := m.node.Consume(leaving, "orders", router.ConsumeOptions{Max: 2})
		left <- err
	}()
	stay = startConsumers(ctx, m, 1, router.ConsumeOptions{})
	return first, stay, func() error {
		cancel()
		synctest.Wait()
		return <-left
	}
}

// maxFrames counts the consume frames that ask for more than one record (Consume's Max, a
// field an owner before wire version 6 refuses).
type maxFrames struct {
	router.Transport
	mu   sync.Mutex
	sent int
}

func (f *maxFrames) Call(ctx context.Context, to string, frame []byte) ([]byte, error) {
	if len(frame) > 0 && frame[0] == opConsumeFrame {
		if r, err := wire.DecodeRequest(frame, wire.Newest); err == nil && r.Consume.Max > 1 {
			f.mu.Lock()
			f.sent++
			f.mu.Unlock()
		}
	}
	return f.Transport.Call(ctx, to, frame)
}

func (f *maxFrames) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent
}

// A consumer that left while its queued consume was out: the owner's reply to it refuses a
// field (an older release), and the node learns it all the same, so that the next consume
// does not carry the field to be refused again (one refused request per field and owner:
// the simulation's seed 400341).
func TestLeavingMemberLearnsTheFieldRefused(t *testing.T) {
	withTwoProcs(t)
	synctest.Test(t, func(t *testing.T) {
		const trip = 10 * time.Millisecond
		var sent *maxFrames
		c := newCluster(t, trip, map[string][]int32{"b": {0}, "g": nil}, probesOnly(func(id string, cfg *router.Config) {
			switch id {
			case "b":
				cfg.WireVersion = 5 // before Consume's Max, and before ConsumeBatch
			case "g":
				cfg.WireVersion = 8 // relative expiry, Max, ConsumeBatch; no later field
				sent = &maxFrames{Transport: cfg.Transport}
				cfg.Transport = sent
			}
		}))
		defer c.close()
		c.produce(0, 20)
		g := c.nodes["g"]
		ctx := context.Background()
		// The owner refuses relative expiry first (the newest field): learnt once, here.
		require.Len(t, g.consume(ctx, router.ConsumeOptions{}), 1)
		first, stay, leave := queueALeaver(ctx, g)
		time.Sleep(trip + trip/2) // the batch went, to be refused as an op, then each alone
		require.ErrorIs(t, leave(), context.Canceled)
		for _, ch := range append(first, stay...) {
			require.Len(t, <-ch, 1)
		}
		time.Sleep(4 * trip) // the leaver's own frame came back refused: Max, learnt
		synctest.Wait()
		require.Equal(t, 1, sent.count(), "the leaver's frame asked for two")
		got := g.consume(ctx, router.ConsumeOptions{Max: 2})
		assert.Len(t, got, 1, "one record a consume while the owner refuses Max")
		assert.Equal(t, 1, sent.count(), "not asked again within two minutes")
	})
}
