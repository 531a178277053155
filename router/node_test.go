package router_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
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

// The tests run the whole node inside a synctest bubble: the system clock is fake there and
// moves only when every goroutine is blocked, so "exactly one visibility timeout" is exact
// and nothing sleeps.

const vt = 30 * time.Second

type harness struct {
	t      *testing.T
	logs   *routertest.MemLogs
	routes *routertest.Routes
	fs     *crashfs.FS
	dir    string
	node   *router.Node
	cfg    router.Config
}

func newHarness(t *testing.T, partitions ...int32) *harness {
	t.Helper()
	h := &harness{t: t, logs: &routertest.MemLogs{}, routes: &routertest.Routes{}, fs: crashfs.New(), dir: "/state"}
	h.routes.Set("orders", partitions...)
	for _, p := range partitions {
		h.logs.Log("orders", p)
	}
	h.cfg = router.Config{
		Logs:   h.logs,
		Routes: h.routes,
		Dir:    h.dir,
		FS:     h.fs,
		Topic:  func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: vt} },
	}
	h.start()
	return h
}

func (h *harness) start() {
	h.t.Helper()
	h.cfg.FS = h.fs
	node, err := router.New(h.cfg)
	require.NoError(h.t, err)
	h.node = node
}

func (h *harness) close() {
	h.t.Helper()
	require.NoError(h.t, h.node.Close())
}

// produce appends n records to a partition and tells the node.
func (h *harness) produce(p int32, n int) {
	log := h.logs.Log("orders", p)
	for range n {
		off := log.Append(nil, []byte("v"), time.Now())
		h.node.Appended("orders", p, off+1)
	}
}

func (h *harness) consume(opts router.ConsumeOptions) []router.Message {
	h.t.Helper()
	msgs, err := h.node.Consume(context.Background(), "orders", opts)
	require.NoError(h.t, err)
	return msgs
}

func (h *harness) one() router.Message {
	h.t.Helper()
	msgs := h.consume(router.ConsumeOptions{})
	require.Len(h.t, msgs, 1)
	return msgs[0]
}

func (h *harness) ack(m router.Message) error {
	return h.node.Ack(context.Background(), "orders", m.Receipt)
}

// async runs a consume in its own goroutine; the result arrives on the channel.
func (h *harness) async(opts router.ConsumeOptions) <-chan []router.Message {
	ch := make(chan []router.Message, 1)
	go func() {
		msgs, err := h.node.Consume(context.Background(), "orders", opts)
		if err != nil {
			h.t.Error(err)
		}
		ch <- msgs
	}()
	return ch
}

func offsetsOf(msgs []router.Message) []int64 {
	var out []int64
	for _, m := range msgs {
		out = append(out, m.Offset)
	}
	return out
}

func TestConsumeAckAndEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		assert.Empty(t, h.consume(router.ConsumeOptions{}), "nothing there: the 204")
		h.produce(0, 3)
		m := h.one()
		assert.Equal(t, int64(0), m.Offset)
		assert.Equal(t, uint32(1), m.Attempt)
		assert.Equal(t, time.Now().Add(vt), m.Expiry)
		require.NoError(t, h.ack(m))
		assert.ErrorIs(t, h.ack(m), inflight.ErrAlreadySettled)
		assert.ErrorIs(t, h.node.Ack(context.Background(), "orders", router.Handle{Offset: -1, Nonce: 1}), inflight.ErrMalformedHandle)
		assert.ErrorIs(t, h.node.Ack(context.Background(), "orders", router.Handle{Partition: 7, Nonce: 1}), router.ErrNotLocal)
		assert.ErrorIs(t, h.node.Ack(context.Background(), "nope", router.Handle{Nonce: 1}), router.ErrUnknownTopic)
		st := h.node.Stats()
		assert.Equal(t, uint64(1), st.Delivered)
		assert.Equal(t, uint64(1), st.EmptyConsumes)
	})
}

// Checklist 80, 81: a parked consumer is served the moment a record lands.
func TestLongPollWakesOnAppend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		defer h.close()
		start := time.Now()
		got := h.async(router.ConsumeOptions{Wait: 10 * time.Second})
		synctest.Wait()
		time.Sleep(3 * time.Second) // fake time: the consumer waits three seconds
		h.produce(1, 1)
		msgs := <-got
		require.Len(t, msgs, 1)
		assert.Equal(t, int32(1), msgs[0].Partition)
		assert.Equal(t, 3*time.Second, time.Since(start), "delivered at the instant of the append")

		empty := h.async(router.ConsumeOptions{Wait: 10 * time.Second})
		assert.Empty(t, <-empty, "a wait that finds nothing ends with a 204")
	})
}

// Checklist 16, 18: a consumer that dies holding a record: the record is delivered again one
// visibility timeout later (plus at most the purger's second), and the late ack is gone.
func TestRedeliveryAfterVisibilityTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 1)
		start := time.Now()
		dead := h.one()
		got := h.async(router.ConsumeOptions{Wait: time.Minute})
		msgs := <-got
		require.Len(t, msgs, 1)
		assert.Equal(t, vt, time.Since(start), "exactly one visibility timeout: the purger wakes at the deadline")
		assert.Equal(t, dead.Offset, msgs[0].Offset)
		assert.Equal(t, uint32(2), msgs[0].Attempt)
		assert.Equal(t, inflight.ReasonExpired, msgs[0].Reason)
		assert.ErrorIs(t, h.ack(dead), inflight.ErrGone)
		require.NoError(t, h.ack(msgs[0]))
	})
}

// Checklist 13, 14: a nack wakes a parked consumer at once; a nack with a delay on a
// partition nobody touches wakes it when the delay ends, not at the purger's next sweep.
func TestNackWakesParkedConsumer(t *testing.T) {
	for _, delay := range []time.Duration{0, 200 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, 0)
				defer h.close()
				h.produce(0, 1)
				first := h.one()
				got := h.async(router.ConsumeOptions{Wait: time.Minute})
				synctest.Wait()
				start := time.Now()
				require.NoError(t, h.node.Nack(context.Background(), "orders", first.Receipt, delay))
				msgs := <-got
				require.Len(t, msgs, 1)
				assert.Equal(t, delay, time.Since(start))
				assert.Equal(t, inflight.ReasonNacked, msgs[0].Reason)
			})
		})
	}
}

// Checklist 90-92: a pinned consumer waiting on an empty partition never stalls unpinned ones.
func TestPinnedHeadOfLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		defer h.close()
		pinned := h.async(router.ConsumeOptions{Wait: time.Minute, Pinned: true, Partition: 1})
		synctest.Wait()
		unpinned := h.async(router.ConsumeOptions{Wait: time.Minute})
		synctest.Wait()
		h.produce(0, 1)
		msgs := <-unpinned
		require.Len(t, msgs, 1)
		assert.Equal(t, int32(0), msgs[0].Partition)
		h.produce(1, 1)
		msgs = <-pinned
		require.Len(t, msgs, 1)
		assert.Equal(t, int32(1), msgs[0].Partition)

		_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Pinned: true, Partition: 9})
		assert.ErrorIs(t, err, router.ErrNotLocal)
	})
}

// Checklist 84: cancellation racing delivery loses nothing and strands nothing: every record
// is either received by a consumer or visible again at once (no visibility timeout passes).
func TestCancelRacingDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		defer h.close()
		const records = 200
		var mu sync.Mutex
		received := map[int64]bool{}
		var wg sync.WaitGroup
		for i := range records {
			ctx, cancel := context.WithCancel(context.Background())
			wg.Add(1)
			go func() {
				defer wg.Done()
				msgs, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{Wait: time.Hour})
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled)
					return
				}
				mu.Lock()
				for _, m := range msgs {
					received[int64(m.Partition)<<32|m.Offset] = true
				}
				mu.Unlock()
			}()
			if i%2 == 0 {
				synctest.Wait()
			}
			h.produce(int32(i%2), 1)
			cancel()
		}
		wg.Wait()
		// Without any time passing, what was not received is visible again.
		rest := h.consume(router.ConsumeOptions{Max: 1000})
		for _, m := range rest {
			key := int64(m.Partition)<<32 | m.Offset
			assert.False(t, received[key], "record %d/%d delivered twice", m.Partition, m.Offset)
			received[key] = true
		}
		assert.Len(t, received, records, "every record received or given back at once")
	})
}

// Invariant 5, checklist 59: a graceful close persists everything; a restart delivers exactly
// what was not acked, and nothing acked.
func TestRestartDeliversExactlyTheUnacked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.produce(0, 10)
		msgs := h.consume(router.ConsumeOptions{Max: 10})
		require.Len(t, msgs, 10)
		for _, i := range []int{0, 1, 2, 5, 7, 8} {
			require.NoError(t, h.ack(msgs[i]))
		}
		h.close()

		h.start()
		again := h.consume(router.ConsumeOptions{Max: 10})
		assert.Equal(t, []int64{3, 4, 6, 9}, offsetsOf(again))
		assert.ErrorIs(t, h.ack(msgs[3]), inflight.ErrGone, "a handle from before the restart never matches")
		assert.ErrorIs(t, h.ack(msgs[5]), inflight.ErrAlreadySettled)
		for _, m := range again {
			require.NoError(t, h.ack(m))
		}
		h.close()

		h.start()
		defer h.close()
		assert.Empty(t, h.consume(router.ConsumeOptions{Max: 10}), "after a graceful close nothing acked comes back")
	})
}

// Checklist 76: after a process crash the ack state on disk trails memory by about one
// tick; acks older than that are never delivered again, and nothing acked-ahead is lost.
func TestProcessCrashRedeliversAboutOneTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.produce(0, 6)
		msgs := h.consume(router.ConsumeOptions{Max: 6})
		for _, i := range []int{0, 1, 3} {
			require.NoError(t, h.ack(msgs[i]))
		}
		time.Sleep(250 * time.Millisecond) // more than a tick: these acks reach the page cache
		synctest.Wait()
		require.NoError(t, h.ack(msgs[4])) // inside the last tick: may be delivered again

		h.crash()
		h.start()
		defer h.close()
		again := offsetsOf(h.consume(router.ConsumeOptions{Max: 6}))
		assert.Subset(t, []int64{2, 4, 5}, again)
		assert.Subset(t, again, []int64{2, 5}, "nothing unacked is lost")
	})
}

// Checklist 140-143: a batch takes a partition's backlog in offset order, bounded by bytes;
// the response bound gives back what does not fit.
func TestBatchConsume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		defer h.close()
		h.produce(0, 3)
		h.produce(1, 3)
		msgs := h.consume(router.ConsumeOptions{Max: 4})
		require.Len(t, msgs, 4)
		assert.Equal(t, msgs[0].Partition, msgs[1].Partition, "stays on a partition until it is dry")
		assert.Equal(t, msgs[1].Partition, msgs[2].Partition)
		assert.Equal(t, []int64{0, 1, 2}, offsetsOf(msgs[:3]))

		fit := h.node.FitResponse(msgs, func(*router.Message) int { return 10 }, 25)
		assert.Len(t, fit, 2)
		rest := h.consume(router.ConsumeOptions{Max: 10})
		assert.Len(t, rest, 4, "the records past the bound are visible again at once")

		big := h.logs.Log("orders", 0)
		for range 3 {
			off := big.Append(nil, make([]byte, 3<<20), time.Now())
			h.node.Appended("orders", 0, off+1)
		}
		msgs = h.consume(router.ConsumeOptions{Max: 10, Pinned: true, Partition: 0})
		assert.Len(t, msgs, 2, "stops once 4 MiB are taken, keeping the record that crosses")
	})
}

// Checklist 147: a record delivered by the wait is topped up with a second local scan.
func TestBatchTopUpAfterWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		got := h.async(router.ConsumeOptions{Max: 5, Wait: time.Minute})
		synctest.Wait()
		log := h.logs.Log("orders", 0)
		for range 3 {
			log.Append(nil, []byte("v"), time.Now())
		}
		h.node.Appended("orders", 0, 3)
		assert.Equal(t, []int64{0, 1, 2}, offsetsOf(<-got))
	})
}

// Checklist 119-121: retention jump, corrupt skip, closed log, through the node.
func TestReadFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 10)
		log := h.logs.Log("orders", 0)
		first := h.one()
		log.Trim(4)
		log.Corrupt(5)
		msgs := h.consume(router.ConsumeOptions{Max: 2})
		assert.Equal(t, []int64{4, 6}, offsetsOf(msgs), "jumped to the oldest retained offset, skipped the corrupt one")
		assert.ErrorIs(t, h.ack(first), inflight.ErrAlreadySettled)
		st := h.node.Stats().Shards
		assert.Equal(t, uint64(1), st.RetentionJumps)
		assert.Equal(t, uint64(1), st.CorruptSkipped)

		log.Close()
		_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{})
		assert.ErrorIs(t, err, router.ErrLogClosed, "transient: the attempt fails")
		fresh := routertest.NewMemLog()
		h.logs.Replace("orders", 0, fresh)
		for range 10 {
			fresh.Append(nil, []byte("v"), time.Now())
		}
		msgs = h.consume(router.ConsumeOptions{Max: 1})
		assert.Equal(t, []int64{7}, offsetsOf(msgs), "no jump to the closed log's floor, no skip")
	})
}

// Checklist 130: a replay reads history without touching queue state.
func TestReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 5)
		msgs, err := h.node.Replay(context.Background(), "orders", 0, 1, 3)
		require.NoError(t, err)
		assert.Equal(t, []int64{1, 2, 3}, offsetsOf(msgs))
		assert.Zero(t, msgs[0].Receipt)
		assert.Equal(t, int64(0), h.one().Offset, "the queue is untouched")
		assert.Equal(t, uint64(3), h.node.Stats().Replayed)
		assert.Equal(t, uint64(1), h.node.Stats().Delivered)
	})
}

// Checklist 133-135: the first partition is resolved alone; the rest with one GetMany only
// when it is empty; a partition that cannot be resolved fails only when reached.
func TestScanResolution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1, 2, 3)
		defer h.close()
		assert.Empty(t, h.consume(router.ConsumeOptions{}), "loads every shard")
		for p := range int32(4) {
			h.produce(p, 1)
		}
		gets, many := h.logs.Lookups()
		h.one()
		gets2, many2 := h.logs.Lookups()
		assert.Equal(t, 1, gets2-gets, "a hit on the first partition resolves only it")
		assert.Equal(t, many, many2)

		for range 3 {
			h.one()
		}
		assert.Empty(t, h.consume(router.ConsumeOptions{}))
		_, many3 := h.logs.Lookups()
		assert.Greater(t, many3, many2, "an empty first partition resolves the rest in one GetMany")

		h.routes.Set("orders", 0, 1, 2, 3, 4)
		_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{})
		assert.Error(t, err, "partition 4 has no log: the scan fails when it reaches it")
		h.produce(1, 1)
		for range 5 {
			msgs, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{})
			if err == nil && len(msgs) == 1 {
				assert.Equal(t, int32(1), msgs[0].Partition)
				return
			}
		}
		t.Fatal("a broken partition hid a record on another one")
	})
}

// A topic deleted and created again under its name starts afresh: its ack state on disk went
// with it, so the new incarnation's offsets are not skipped.
func TestRecreatedTopicStartsAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 5)
		for _, m := range h.consume(router.ConsumeOptions{Max: 5}) {
			require.NoError(t, h.ack(m))
		}
		time.Sleep(2 * time.Second) // the frontier (4) is on disk
		synctest.Wait()

		assert.Equal(t, "/state/orders/0", h.node.PartitionDir("orders", 0))
		h.routes.Delete("orders")
		require.NoError(t, h.node.DeleteTopic("orders"))
		_, err := h.fs.Stat("/state/orders")
		assert.ErrorIs(t, err, fs.ErrNotExist)

		h.logs.Replace("orders", 0, routertest.NewMemLog())
		h.routes.Set("orders", 0)
		h.produce(0, 2)
		assert.Equal(t, []int64{0, 1}, offsetsOf(h.consume(router.ConsumeOptions{Max: 5})))
	})
}

func TestDeleteTopicAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		parked := make(chan error, 1)
		go func() {
			_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Wait: time.Hour})
			parked <- err
		}()
		synctest.Wait()
		require.NoError(t, h.node.DeleteTopic("orders"))
		assert.Error(t, <-parked, "parked consumers of a deleted topic are told")

		closing := make(chan error, 1)
		go func() {
			_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Wait: time.Hour})
			closing <- err
		}()
		synctest.Wait()
		h.close()
		assert.ErrorIs(t, <-closing, router.ErrClosed)
		_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{})
		assert.ErrorIs(t, err, router.ErrClosed)
		assert.ErrorIs(t, h.node.Close(), router.ErrClosed)
	})
}

// Many producers and consumers over several partitions: every record is delivered and acked
// exactly once, consumers that die hold records one visibility timeout, and at the end the
// frontier of every partition is at its high watermark.
func TestManyProducersAndConsumers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parts := []int32{0, 1, 2, 3}
		h := newHarness(t, parts...)
		defer h.close()
		const perProducer = 50
		var wg sync.WaitGroup
		for _, p := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perProducer {
					h.produce(p, 1)
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
		var mu sync.Mutex
		acked := map[string]int{}
		for c := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					msgs, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 3, Wait: 2 * time.Minute})
					if err != nil {
						t.Error(err)
						return
					}
					if len(msgs) == 0 {
						return
					}
					for j, m := range msgs {
						if c == 0 && i%5 == 0 && j == 0 {
							continue // this consumer "dies" holding the record
						}
						if err := h.ack(m); err != nil {
							t.Error(err)
							continue
						}
						mu.Lock()
						acked[fmt.Sprintf("%d/%d", m.Partition, m.Offset)]++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		assert.Len(t, acked, len(parts)*perProducer)
		for key, n := range acked {
			assert.Equal(t, 1, n, "record %s acked twice", key)
		}
	})
}

// A failed persistence never fails an ack: the ack is in memory and the committer retries.
func TestAckSurvivesCommitterErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.fs.Inject(crashfs.OnKind(crashfs.OpWrite, errors.New("disk on fire")))
		h.produce(0, 1)
		require.NoError(t, h.ack(h.one()))
		time.Sleep(time.Second)
		synctest.Wait()
		h.fs.Inject(nil)
		assert.Empty(t, h.consume(router.ConsumeOptions{}))
	})
}

// Checklist 127, 128: a long-poll on a topic whose partitions are not assigned yet is held
// for its wait, looking at the routes every 50 ms, and answered empty once a partition is
// assigned, so the next poll takes the local path with its full wait.
func TestLongPollOnUnassignedTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.routes.Set("fresh")
		start := time.Now()
		msgs, err := h.node.Consume(context.Background(), "fresh", router.ConsumeOptions{Wait: time.Second})
		require.NoError(t, err)
		assert.Empty(t, msgs)
		assert.Equal(t, time.Second, time.Since(start), "held for the whole wait, not answered at once")

		start = time.Now()
		got := make(chan time.Duration, 1)
		go func() {
			h.node.Consume(context.Background(), "fresh", router.ConsumeOptions{Wait: time.Minute})
			got <- time.Since(start)
		}()
		time.Sleep(120 * time.Millisecond)
		h.logs.Log("fresh", 0)
		h.routes.Set("fresh", 0)
		assert.Equal(t, 150*time.Millisecond, <-got, "answered at the next look at the routes")

		_, err = h.node.Consume(context.Background(), "missing", router.ConsumeOptions{Wait: time.Second})
		assert.ErrorIs(t, err, router.ErrUnknownTopic, "a topic that does not exist is an error at once")
	})
}

// Checklist 135: past 16 local partitions the scan resolves each log as it reaches it.
func TestScanManyPartitionsResolvesEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parts := make([]int32, 20)
		for i := range parts {
			parts[i] = int32(i)
		}
		h := newHarness(t, parts...)
		defer h.close()
		assert.Empty(t, h.consume(router.ConsumeOptions{}), "loads every shard")
		gets, many := h.logs.Lookups()
		assert.Empty(t, h.consume(router.ConsumeOptions{}))
		gets2, many2 := h.logs.Lookups()
		assert.Equal(t, 20, gets2-gets, "one lookup per partition")
		assert.Equal(t, many, many2, "no GetMany past 16 partitions")
	})
}

// A partition moves between nodes: persisted on the first, its files copied, dropped around
// the install on the second, which delivers exactly what was not acked.
func TestPartitionMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newHarness(t, 0)
		a.produce(0, 6)
		msgs := a.consume(router.ConsumeOptions{Max: 6})
		for _, i := range []int{0, 1, 2, 4} {
			require.NoError(t, a.ack(msgs[i]))
		}
		require.NoError(t, a.node.Persist(context.Background(), "orders", 0))

		b := &harness{t: t, logs: a.logs, routes: &routertest.Routes{}, fs: a.fs, dir: "/other"}
		b.routes.Set("orders", 0)
		b.cfg = a.cfg
		b.cfg.Routes, b.cfg.Dir = b.routes, b.dir
		b.start()
		defer b.close()
		b.node.DropPartition("orders", 0)
		from, to := a.node.PartitionDir("orders", 0), b.node.PartitionDir("orders", 0)
		require.NoError(t, a.fs.MkdirAll(to))
		for _, name := range []string{"consumer.id", "consumer.ahead", "consumer.offset"} {
			data, err := a.fs.ReadFile(from + "/" + name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			require.NoError(t, err)
			require.NoError(t, a.fs.WriteFile(to+"/"+name, data))
		}
		b.node.DropPartition("orders", 0)
		a.routes.Delete("orders")
		a.node.DropPartition("orders", 0)
		a.close()

		got, err := b.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 6})
		require.NoError(t, err)
		assert.Equal(t, []int64{3, 5}, offsetsOf(got))
	})
}

// A consume whose context already ended leases nothing; ReloadTopic applies new settings to
// loaded partitions and wakes parked consumers a raised cap frees records for.
func TestCancelledConsumeAndReloadTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		inFlight := 1
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: vt, MaxInFlight: inFlight}
		}
		h.close()
		h.start()
		defer h.close()
		h.produce(0, 2)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{})
		assert.ErrorIs(t, err, context.Canceled)

		first := h.one()
		assert.Equal(t, int64(0), first.Offset)
		got := h.async(router.ConsumeOptions{Wait: time.Minute})
		synctest.Wait()
		inFlight = 2
		h.node.ReloadTopic("orders")
		msgs := <-got
		require.Len(t, msgs, 1)
		assert.Equal(t, int64(1), msgs[0].Offset, "served at once under the raised cap")
	})
}
