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

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// work runs Work in its own goroutine; cancel stops it and returns its error.
func (h *harness) work(handler router.Handler, opts router.WorkOptions) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.node.Work(ctx, "orders", handler, opts) }()
	return func() error {
		cancel()
		return <-done
	}
}

func TestWorkAcksWithinTheConcurrencyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		defer h.close()
		h.produce(0, 10)
		h.produce(1, 10)
		var running, most, handled atomic.Int32
		stop := h.work(func(ctx context.Context, m router.Message) error {
			now := running.Add(1)
			for {
				prev := most.Load()
				if now <= prev || most.CompareAndSwap(prev, now) {
					break
				}
			}
			time.Sleep(time.Second)
			running.Add(-1)
			handled.Add(1)
			return nil
		}, router.WorkOptions{Concurrency: 3})
		time.Sleep(time.Minute)
		synctest.Wait()
		require.NoError(t, stop())
		assert.Equal(t, int32(20), handled.Load())
		assert.Equal(t, int32(3), most.Load(), "at most Concurrency handlers at once")
		assert.Equal(t, uint64(20), h.node.Stats().Shards.Acked)
		assert.Empty(t, h.consume(router.ConsumeOptions{}))
	})
}

// A handler slower than the visibility timeout keeps its record: the worker extends it.
func TestWorkExtendsWhileTheHandlerRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 1)
		stop := h.work(func(ctx context.Context, m router.Message) error {
			time.Sleep(5 * vt)
			return nil
		}, router.WorkOptions{})
		time.Sleep(4 * vt)
		assert.Empty(t, h.consume(router.ConsumeOptions{}), "still leased after four visibility timeouts")
		time.Sleep(2 * vt)
		synctest.Wait()
		require.NoError(t, stop())
		st := h.node.Stats().Shards
		assert.Equal(t, uint64(1), st.Acked)
		assert.Zero(t, st.Expired)
		assert.Positive(t, st.Extended)
	})
}

// An error or a panic nacks the record; it comes again, as a new attempt.
func TestWorkNacksOnErrorAndPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 1)
		var mu sync.Mutex
		var attempts []uint32
		var reported []error
		stop := h.work(func(ctx context.Context, m router.Message) error {
			mu.Lock()
			attempts = append(attempts, m.Attempt)
			n := len(attempts)
			mu.Unlock()
			switch n {
			case 1:
				return errors.New("dependency down")
			case 2:
				panic("bug")
			}
			return nil
		}, router.WorkOptions{OnError: func(_ router.Message, err error) {
			mu.Lock()
			reported = append(reported, err)
			mu.Unlock()
		}})
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, stop())
		assert.Equal(t, []uint32{1, 2, 3}, attempts)
		require.Len(t, reported, 2)
		assert.ErrorIs(t, reported[1], router.ErrHandlerPanic)
		assert.Equal(t, uint64(2), h.node.Stats().Shards.Nacked)
		assert.Equal(t, uint64(1), h.node.Stats().Shards.Acked)
	})
}

// Cancelling Work releases every record it holds at once, unprocessed: no lease is left to
// run out, and the release is not counted as an attempt.
func TestWorkReleasesEverythingOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 5)
		var started atomic.Int32
		stop := h.work(func(ctx context.Context, m router.Message) error {
			started.Add(1)
			<-ctx.Done()
			return ctx.Err()
		}, router.WorkOptions{Concurrency: 3})
		synctest.Wait()
		assert.Equal(t, int32(3), started.Load())
		require.NoError(t, stop())
		msgs := h.consume(router.ConsumeOptions{Max: 10})
		assert.Len(t, msgs, 5, "everything is visible again without any time passing")
		for _, m := range msgs {
			assert.Equal(t, uint32(1), m.Attempt, "a release is not an attempt")
		}
		assert.Zero(t, h.node.Stats().Shards.Nacked)
	})
}

// A handler that cancels Work's context once it is done, and returns nil, finished its
// record: it is acked, not released, and it does not come again.
func TestWorkAcksAHandlerThatCancelsWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 3)
		ctx, cancel := context.WithCancel(context.Background())
		var handled atomic.Int32
		var reported []error
		err := h.node.Work(ctx, "orders", func(_ context.Context, m router.Message) error {
			handled.Add(1)
			cancel() // one record is all this worker wanted
			return nil
		}, router.WorkOptions{OnError: func(_ router.Message, err error) { reported = append(reported, err) }})
		require.NoError(t, err)
		assert.Equal(t, int32(1), handled.Load())
		assert.Empty(t, reported)
		st := h.node.Stats().Shards
		assert.Equal(t, uint64(1), st.Acked, "returning nil acks it, whoever ended ctx")
		assert.Zero(t, st.Nacked)
		assert.Equal(t, []int64{1, 2}, offsetsOf(h.consume(router.ConsumeOptions{Max: 10})), "the handled record does not come again")
	})
}

// When that ack fails (here the node closed under the handler), OnError is told.
func TestWorkReportsTheAckOfAHandlerThatCancelsWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.produce(0, 1)
		ctx, cancel := context.WithCancel(context.Background())
		var reported []error
		err := h.node.Work(ctx, "orders", func(_ context.Context, m router.Message) error {
			cancel()
			h.close()
			return nil
		}, router.WorkOptions{OnError: func(_ router.Message, err error) { reported = append(reported, err) }})
		require.NoError(t, err)
		require.Len(t, reported, 1)
		assert.ErrorIs(t, reported[0], router.ErrClosed)
	})
}

// A handler that goes on after Work's context ended keeps its record: its lease is still
// extended, nobody else gets it meanwhile, and what it returns decides (nil: acked). A panic
// then is told, and the record released.
func TestWorkKeepsTheLeaseOfAHandlerThatGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 2)
		var reported []error
		var mu sync.Mutex
		stop := h.work(func(ctx context.Context, m router.Message) error {
			<-ctx.Done()
			time.Sleep(3 * vt) // finishing its work regardless
			if m.Offset == 1 {
				panic("bug")
			}
			return nil
		}, router.WorkOptions{Concurrency: 2, OnError: func(_ router.Message, err error) {
			mu.Lock()
			reported = append(reported, err)
			mu.Unlock()
		}})
		synctest.Wait()
		done := make(chan error, 1)
		go func() { done <- stop() }()
		time.Sleep(2 * vt)
		assert.Empty(t, h.consume(router.ConsumeOptions{}), "both still leased two visibility timeouts after the cancel")
		require.NoError(t, <-done)
		st := h.node.Stats().Shards
		assert.Equal(t, uint64(1), st.Acked)
		assert.Zero(t, st.Expired)
		require.Len(t, reported, 1)
		assert.ErrorIs(t, reported[0], router.ErrHandlerPanic)
		again := h.consume(router.ConsumeOptions{Max: 10})
		require.Len(t, again, 1, "the panicked record is released")
		assert.Equal(t, int64(1), again[0].Offset)
		assert.Equal(t, uint32(1), again[0].Attempt, "a release is not an attempt")
	})
}

func TestWorkStopsWhenTheNodeCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		done := make(chan error, 1)
		go func() {
			done <- h.node.Work(context.Background(), "orders", func(context.Context, router.Message) error { return nil }, router.WorkOptions{})
		}()
		synctest.Wait()
		h.close()
		assert.ErrorIs(t, <-done, router.ErrClosed)
	})
}

// With MaxDeliveries, a record that always fails is quarantined and reported to the host;
// Requeue brings it back.
func TestQuarantineThroughTheNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		var dead []int64
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 2}
		}
		h.cfg.OnQuarantine = func(topic string, p int32, offset int64, attempts uint32) {
			dead = append(dead, offset)
		}
		h.close()
		h.start()
		defer h.close()
		h.produce(0, 2)
		poisoned := func(ctx context.Context, m router.Message) error {
			if m.Offset == 0 {
				return errors.New("poison")
			}
			return nil
		}
		stop := h.work(poisoned, router.WorkOptions{})
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, stop())
		assert.Equal(t, []int64{0}, dead)
		q, err := h.node.Quarantined("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, []int64{0}, q)
		assert.Empty(t, h.consume(router.ConsumeOptions{}), "the frontier passed the poison record")

		ok, err := h.node.Requeue("orders", 0, 0)
		require.NoError(t, err)
		assert.True(t, ok)
		m := h.one()
		assert.Equal(t, int64(0), m.Offset)
		assert.Equal(t, inflight.ReasonRequeued, m.Reason)
		require.NoError(t, h.ack(m))
		q, _ = h.node.Quarantined("orders", 0)
		assert.Empty(t, q)
	})
}

// Transient consume errors do not stop a worker: a closed log is ridden out parked, and a
// host failing to resolve a log is told and tried again after a pause, not in a hot loop.
func TestWorkRidesOutTransientErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 1)
		h.logs.Log("orders", 0).Close()
		var handled atomic.Int32
		var resolveErrs atomic.Int32
		stop := h.work(func(context.Context, router.Message) error {
			handled.Add(1)
			return nil
		}, router.WorkOptions{Wait: 200 * time.Millisecond, OnError: func(_ router.Message, err error) {
			if !errors.Is(err, router.ErrLogClosed) {
				resolveErrs.Add(1)
			}
		}})
		time.Sleep(time.Second)
		synctest.Wait()
		fresh := routertest.NewMemLog()
		fresh.Append(nil, []byte("again"), time.Now())
		h.logs.Replace("orders", 0, fresh)
		h.node.Appended("orders", 0, 1)
		synctest.Wait()
		assert.Equal(t, int32(1), handled.Load(), "served once the log is back")

		h.routes.Set("orders", 7)          // a partition whose log the host cannot resolve
		time.Sleep(300 * time.Millisecond) // the consume parked before the change ends
		synctest.Wait()
		before := resolveErrs.Load()
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, stop())
		assert.InDelta(t, 10, resolveErrs.Load()-before, 1, "one attempt per 100 ms pause, not a hot loop")
	})
}

// A record another node owns is acked without holding its handler's slot: with one slot and
// an owner that takes a second to answer each ack, the next records are handled meanwhile,
// and Work returns once every ack has been answered.
func TestWorkDoesNotWaitForAForwardedAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 10*time.Millisecond, 0)
		defer p.close()
		p.net.Join("a", func(ctx context.Context, from string, frame []byte) ([]byte, error) {
			req, err := wire.DecodeRequest(frame, wire.Newest)
			if frame[0] == wireAck || frame[0] == wireAckBatch || frame[0] == wireAcks ||
				err == nil && req.Op == wire.OpConsume && len(req.Records) > 0 {
				time.Sleep(time.Second) // a slow owner, for acks only (those riding with reservations too)
			}
			return p.a.node.Serve(ctx, from, frame)
		})
		const records = 5
		p.a.produce(0, records)
		start := time.Now()
		var mu sync.Mutex
		var began []time.Duration
		stop := p.b.work(func(ctx context.Context, m router.Message) error {
			mu.Lock()
			defer mu.Unlock()
			began = append(began, time.Since(start))
			return nil
		}, router.WorkOptions{Concurrency: 1, OnError: func(m router.Message, err error) {
			t.Errorf("offset %d: %v", m.Offset, err)
		}})
		for {
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			n := len(began)
			mu.Unlock()
			if n == records {
				break
			}
		}
		assert.Less(t, began[records-1], 500*time.Millisecond, "every record handled before the first ack's answer: %v", began)
		assert.Zero(t, p.a.node.Stats().Shards.Acked, "no ack answered yet")
		require.NoError(t, stop())
		assert.Equal(t, uint64(records), p.a.node.Stats().Shards.Acked, "Work returned once its acks were answered")
		assert.GreaterOrEqual(t, time.Since(start), time.Second)
	})
}

// Work refuses what it cannot run before it consumes anything: a nil handler (which would
// otherwise panic on each record and nack it), a negative Concurrency or Wait (which were
// taken for the defaults), and consume options out of range.
func TestWorkRefusesBadOptionsAndChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		// A record quarantined at its second delivery: without the check, the nil handler's
		// panics would nack the records round and round without ever blocking.
		h.close()
		h.cfg.Topic = func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 2} }
		h.start()
		defer h.close()
		h.produce(0, 3)
		handler := func(context.Context, router.Message) error { return nil }
		cases := []struct {
			name    string
			handler router.Handler
			opts    router.WorkOptions
		}{
			{"nil handler", nil, router.WorkOptions{}},
			{"negative concurrency", handler, router.WorkOptions{Concurrency: -1}},
			{"negative wait", handler, router.WorkOptions{Wait: -time.Second}},
			{"wait above MaxWait", handler, router.WorkOptions{Wait: router.MaxWait + 1}},
			{"negative visibility", handler, router.WorkOptions{Visibility: -1}},
			{"visibility above MaxVisibility", handler, router.WorkOptions{Visibility: router.MaxVisibility + 1}},
			{"pinned to a negative partition", handler, router.WorkOptions{Pinned: true, Partition: -1}},
		}
		for _, c := range cases {
			// Bounded, so that a Work that takes its options runs a while, returns nil and
			// fails the test rather than hang it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := h.node.Work(ctx, "orders", c.handler, c.opts)
			cancel()
			assert.ErrorIs(t, err, router.ErrInvalidArgument, c.name)
		}
		st := h.node.Stats().Shards
		assert.Zero(t, st.Nacked)
		assert.Zero(t, st.Acked)
		msgs := h.consume(router.ConsumeOptions{Max: 10})
		require.Len(t, msgs, 3, "every record is still there")
		for _, m := range msgs {
			assert.Equal(t, uint32(1), m.Attempt, "no delivery was spent")
		}
	})
}

// A Concurrency above MaxBatch runs: each consume asks for at most MaxBatch records, however
// many handlers are free.
func TestWorkRunsAConcurrencyAboveMaxBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, router.MaxBatch+10)
		var handled atomic.Int32
		var reported []error
		var mu sync.Mutex
		stop := h.work(func(ctx context.Context, m router.Message) error {
			handled.Add(1)
			return nil
		}, router.WorkOptions{Concurrency: 2 * router.MaxBatch, OnError: func(_ router.Message, err error) {
			mu.Lock()
			reported = append(reported, err)
			mu.Unlock()
		}})
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, stop())
		assert.Empty(t, reported)
		assert.Equal(t, int32(router.MaxBatch+10), handled.Load())
	})
}
