package router_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
)

// settleFrames records the frames an owner is sent that carry acks, and holds the first
// held of the Acks frames (the AckBatches out) until release is closed.
type settleFrames struct {
	serve   func(ctx context.Context, from string, frame []byte) ([]byte, error)
	held    int
	release chan struct{}

	mu     sync.Mutex
	frames [][2]int // op, acks carried (a consume's riding acks; 0 for none)
}

func (s *settleFrames) Serve(ctx context.Context, from string, frame []byte) ([]byte, error) {
	req, err := wire.DecodeRequest(frame, wire.Newest)
	s.mu.Lock()
	hold := false
	if err == nil && (req.Op == wire.OpAcks || req.Op == wire.OpAckBatch || req.Op == wire.OpConsume) {
		s.frames = append(s.frames, [2]int{int(req.Op), len(req.Records)})
		if req.Op == wire.OpAcks && s.held > 0 {
			s.held--
			hold = true
		}
	}
	s.mu.Unlock()
	if hold {
		<-s.release
	}
	return s.serve(ctx, from, frame)
}

func (s *settleFrames) Frames() [][2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][2]int(nil), s.frames...)
}

// ridingCluster is a gateway g reading ahead from an owner b, tuned by tune, with three
// batches of 100 records leased at b, and b's frames recorded with the first two Acks
// frames held.
func ridingCluster(t *testing.T, tune func(string, *router.Config)) (*cluster, *settleFrames, [][]router.Handle) {
	c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, tune)
	c.produce(0, 400)
	var batches [][]router.Handle
	for range 3 {
		msgs := c.nodes["b"].consume(context.Background(), router.ConsumeOptions{Max: 100})
		require.Len(t, msgs, 100)
		batches = append(batches, receipts(msgs))
	}
	s := &settleFrames{serve: c.nodes["b"].node.Serve, held: 2, release: make(chan struct{})}
	c.net.Join("b", s.Serve)
	return c, s, batches
}

// ackBatchesOneByOne acks each batch through g from a goroutine of its own, waiting for
// each to be at the owner or queued before the next, and returns their errors once done is closed
// and they all came back.
func ackBatchesOneByOne(g *member, batches [][]router.Handle) func() [][]error {
	errs := make([][]error, len(batches))
	var wg sync.WaitGroup
	for i, handles := range batches {
		wg.Go(func() { errs[i] = g.node.AckBatch(context.Background(), "orders", handles) })
		time.Sleep(rtt) // at the owner, or queued
		synctest.Wait()
	}
	return func() [][]error {
		wg.Wait()
		return errs
	}
}

// Issue 35, point 9: the acks a gateway's consumers queued for an owner (while two
// AckBatches are out to it) leave in the frame of the gateway's next reservations from that
// owner, and are answered in its reply: the queued batch comes back with the consume, each
// ack applied, with no frame of its own.
func TestAcksRideWithReservations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, batches := ridingCluster(t, nil)
		defer c.close()
		g := c.nodes["g"]
		wait := ackBatchesOneByOne(g, batches)
		assert.Equal(t, [][2]int{{wireAcks, 100}, {wireAcks, 100}}, s.Frames(), "two out, the third queued")

		msgs := g.consume(context.Background(), router.ConsumeOptions{Max: 10})
		require.Len(t, msgs, 10)
		synctest.Wait()
		frames := s.Frames()
		require.GreaterOrEqual(t, len(frames), 3)
		assert.Equal(t, [2]int{int(wire.OpConsume), 100}, frames[2], "the queued acks rode with the reservations: %v", frames)
		assert.Equal(t, uint64(100), c.nodes["b"].node.Stats().Shards.Acked, "applied before the two held")

		close(s.release)
		for i, errs := range wait() {
			for _, err := range errs {
				require.NoError(t, err, "batch %d", i)
			}
		}
		assert.Equal(t, uint64(300), c.nodes["b"].node.Stats().Shards.Acked)
		for _, f := range s.Frames()[3:] {
			assert.NotEqual(t, wireAcks, f[0], "no frame carried the riding acks again")
			assert.Zero(t, f[1], "nothing left to ride")
		}
	})
}

// Issue 35, point 9: the acks a gateway's lane queued past its window (AckAsync's here, with
// a window of one) leave in the frame of its next reservations from their owner and are
// answered in its reply, as AckBatches waiting for a slot do; the one out is answered by its
// own frame.
//
// An owner before version 16 refuses the consume carrying them, applying none: they go in
// frames of their own, each applied once and answered OK.
func TestQueuedAcksRideWithReservations(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprintf("older owner=%v", older), func(t *testing.T) { queuedAcksRide(t, older) })
	}
}

func queuedAcksRide(t *testing.T, older bool) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, func(id string, cfg *router.Config) {
			if id == "g" {
				cfg.AckWindow = 1
			}
			if id == "b" && older {
				cfg.WireVersion = 15
			}
		})
		defer c.close()
		c.produce(0, 100)
		leased := c.nodes["b"].consume(context.Background(), router.ConsumeOptions{Max: 10})
		require.Len(t, leased, 10)
		release := make(chan struct{})
		var mu sync.Mutex
		var frames [][2]int // op, acks carried
		holding := true     // the first ack frame is held until release
		c.net.Join("b", func(ctx context.Context, from string, frame []byte) ([]byte, error) {
			req, err := wire.DecodeRequest(frame, wire.Newest)
			mu.Lock()
			hold := false
			if err == nil {
				frames = append(frames, [2]int{int(req.Op), len(req.Records)})
				if holding && (frame[0] == wireAck || frame[0] == wireAckBatch || frame[0] == wireAcks) {
					holding, hold = false, true
				}
			}
			mu.Unlock()
			if hold {
				<-release
			}
			return c.nodes["b"].node.Serve(ctx, from, frame)
		})
		g := c.nodes["g"]
		var answered sync.WaitGroup
		var failed atomic.Int32
		for _, m := range leased {
			answered.Add(1)
			g.node.AckAsync("orders", m.Receipt, func(err error) {
				if err != nil {
					failed.Add(1)
				}
				answered.Done()
			})
			synctest.Wait() // the first out and held, the others queued behind its slot
		}
		require.Zero(t, c.nodes["b"].node.Stats().Shards.Acked)

		msgs := g.consume(context.Background(), router.ConsumeOptions{Max: 10})
		require.Len(t, msgs, 10)
		synctest.Wait()
		seen := func() [][2]int {
			mu.Lock()
			defer mu.Unlock()
			return append([][2]int(nil), frames...)
		}
		riding := 0
		for _, f := range seen() {
			if f[0] == int(wire.OpConsume) && f[1] > 0 {
				riding += f[1]
			}
		}
		if older {
			assert.Equal(t, 9, riding, "they rode once, refused: %v", seen())
			time.Sleep(10 * rtt) // their frames of their own, each refused form once at most
			synctest.Wait()
			assert.Equal(t, uint64(9), c.nodes["b"].node.Stats().Shards.Acked, "in frames of their own: %v", seen())
		} else {
			assert.Equal(t, 9, riding, "the queued acks rode with the reservations: %v", seen())
			assert.Equal(t, uint64(9), c.nodes["b"].node.Stats().Shards.Acked, "applied before the one held")
		}

		close(release)
		answered.Wait()
		assert.Zero(t, failed.Load(), "every ack answered OK")
		assert.Equal(t, uint64(10), c.nodes["b"].node.Stats().Shards.Acked)
	})
}

// An owner before version 16 refuses a consume carrying acks, applying none of them: the
// acks go in a frame of their own (an AckBatch, once it refused the Acks op too), the consume
// again without them, and no ack rides to it for two minutes.
func TestAcksRideNotToAnOlderOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, batches := ridingCluster(t, atVersion("b", 15))
		defer c.close()
		g := c.nodes["g"]
		wait := ackBatchesOneByOne(g, batches)
		msgs := g.consume(context.Background(), router.ConsumeOptions{Max: 10})
		require.Len(t, msgs, 10)
		close(s.release)
		for i, errs := range wait() {
			for _, err := range errs {
				require.NoError(t, err, "batch %d", i)
			}
		}
		synctest.Wait()
		assert.Equal(t, uint64(300), c.nodes["b"].node.Stats().Shards.Acked, "each applied once")
		riding := 0
		for _, f := range s.Frames() {
			if f[0] == int(wire.OpConsume) && f[1] > 0 {
				riding++
			}
		}
		assert.Equal(t, 1, riding, "refused once, then remembered: %v", s.Frames())

		// Two batches out again, a third queued: it waits for its turn, not for a consume.
		c.produce(0, 300)
		batches = nil
		for range 3 {
			batches = append(batches, receipts(c.nodes["b"].consume(context.Background(), router.ConsumeOptions{Max: 100})))
		}
		for _, errs := range ackBatchesOneByOne(g, batches)() {
			for _, err := range errs {
				require.NoError(t, err)
			}
		}
		g.consume(context.Background(), router.ConsumeOptions{Max: 10})
		riding = 0
		for _, f := range s.Frames() {
			if f[0] == int(wire.OpConsume) && f[1] > 0 {
				riding++
			}
		}
		assert.Equal(t, 1, riding, "none rode again")
	})
}

// A gateway before version 16 lets no ack ride: its queued batch waits for a slot, and
// leaves in a frame of its own.
func TestAcksRideNotFromAnOlderGateway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s, batches := ridingCluster(t, atVersion("g", 15))
		defer c.close()
		s.mu.Lock()
		s.held = 0 // the gateway sends AckBatches: none is held
		s.mu.Unlock()
		g := c.nodes["g"]
		wait := ackBatchesOneByOne(g, batches)
		g.consume(context.Background(), router.ConsumeOptions{Max: 10})
		for _, errs := range wait() {
			for _, err := range errs {
				require.NoError(t, err)
			}
		}
		batched := 0
		for _, f := range s.Frames() {
			switch f[0] {
			case int(wire.OpConsume):
				assert.Zero(t, f[1], "nothing rode: %v", s.Frames())
			case wireAckBatch:
				batched += f[1]
			default:
				t.Errorf("a frame of op %d: %v", f[0], s.Frames())
			}
		}
		assert.Equal(t, 300, batched, "each ack in an AckBatch of its own")
		assert.Equal(t, uint64(300), c.nodes["b"].node.Stats().Shards.Acked)
	})
}
