package router_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

type consumed struct {
	msgs []router.Message
	err  error
}

// goConsume runs a consume in its own goroutine; the result arrives on the channel.
func goConsume(ctx context.Context, node *router.Node, topic string, opts router.ConsumeOptions) <-chan consumed {
	ch := make(chan consumed, 1)
	go func() {
		msgs, err := node.Consume(ctx, topic, opts)
		ch <- consumed{msgs, err}
	}()
	return ch
}

func returned(ch <-chan consumed) (consumed, bool) {
	select {
	case c := <-ch:
		return c, true
	default:
		return consumed{}, false
	}
}

// gate makes every Read of log block until the gate opens; entered receives the offset of
// each read that blocked.
func gate(log *routertest.MemLog) (entered <-chan int64, open func()) {
	in := make(chan int64, 16)
	opened := make(chan struct{})
	log.OnRead(func(off int64) {
		in <- off
		<-opened
	})
	return in, func() { close(opened) }
}

func newTopicsNode(t *testing.T, logs *routertest.MemLogs, topics ...string) *router.Node {
	routes := &routertest.Routes{}
	for _, topic := range topics {
		routes.Set(topic, 0)
		logs.Log(topic, 0)
	}
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New(),
		Topic: func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: vt} }})
	require.NoError(t, err)
	return node
}

// A parked consumer reads the record it is handed on its own goroutine: while one topic's log
// read blocks, a consumer parked on another topic is woken and served at once.
func TestSlowLogReadDelaysNoOtherTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &routertest.MemLogs{}
		node := newTopicsNode(t, logs, "slow", "fast")
		defer node.Close()
		slow, fast := logs.Log("slow", 0), logs.Log("fast", 0)
		entered, open := gate(slow)
		opened := false
		defer func() {
			if !opened {
				open()
			}
		}()
		ctx := context.Background()
		wait := router.ConsumeOptions{Wait: time.Minute}

		a := goConsume(ctx, node, "slow", wait)
		synctest.Wait()
		slow.Append(nil, []byte("slow"), time.Now())
		node.Appended("slow", 0, 1)
		synctest.Wait()
		require.Len(t, entered, 1, "the consumer parked on slow reads its record, and that read blocks")

		b := goConsume(ctx, node, "fast", wait)
		synctest.Wait()
		fast.Append(nil, []byte("fast"), time.Now())
		node.Appended("fast", 0, 1)
		synctest.Wait()
		got, ok := returned(b)
		require.True(t, ok, "the consumer parked on fast is served while the slow read blocks")
		require.NoError(t, got.err)
		require.Len(t, got.msgs, 1)
		assert.Equal(t, "fast", string(got.msgs[0].Value))
		_, ok = returned(a)
		require.False(t, ok)

		open()
		opened = true
		synctest.Wait()
		got, ok = returned(a)
		require.True(t, ok)
		require.NoError(t, got.err)
		require.Len(t, got.msgs, 1)
		assert.Equal(t, "slow", string(got.msgs[0].Value))
		assert.Equal(t, uint64(2), node.Stats().Delivered)
	})
}

// A consumer that leaves while it reads the record it was handed gives the record back at
// once: the next consumer gets it without waiting for its visibility timeout.
func TestReservedGivenBackWhenConsumerLeavesDuringRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &routertest.MemLogs{}
		node := newTopicsNode(t, logs, "t")
		defer node.Close()
		log := logs.Log("t", 0)
		entered, open := gate(log)
		ctx, cancel := context.WithCancel(context.Background())
		a := goConsume(ctx, node, "t", router.ConsumeOptions{Wait: time.Minute})
		synctest.Wait()
		log.Append(nil, []byte("v"), time.Now())
		node.Appended("t", 0, 1)
		synctest.Wait()
		require.Len(t, entered, 1)
		cancel()
		log.OnRead(nil)
		open()
		synctest.Wait()
		got, ok := returned(a)
		require.True(t, ok)
		require.ErrorIs(t, got.err, context.Canceled)
		require.Empty(t, got.msgs)

		msgs, err := node.Consume(context.Background(), "t", router.ConsumeOptions{})
		require.NoError(t, err)
		require.Len(t, msgs, 1, "given back at once, not after the visibility timeout")
		assert.Equal(t, int64(0), msgs[0].Offset)
	})
}

// A reserved record the consumer finds below retention or unreadable is passed over as the
// scan does, and the consumer waits on for the next one rather than answer empty.
func TestReservedSkipsAndWaitsOn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(log *routertest.MemLog)
	}{
		{"below retention", func(log *routertest.MemLog) { log.Trim(1) }},
		{"corrupt", func(log *routertest.MemLog) { log.Corrupt(0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := &routertest.MemLogs{}
				node := newTopicsNode(t, logs, "t")
				defer node.Close()
				log := logs.Log("t", 0)
				a := goConsume(context.Background(), node, "t", router.ConsumeOptions{Wait: time.Minute})
				synctest.Wait()
				log.Append(nil, []byte("lost"), time.Now())
				tc.damage(log)
				node.Appended("t", 0, 1)
				synctest.Wait()
				_, ok := returned(a)
				require.False(t, ok, "skipped, and still waiting")

				log.Append(nil, []byte("next"), time.Now())
				node.Appended("t", 0, 2)
				synctest.Wait()
				got, ok := returned(a)
				require.True(t, ok)
				require.NoError(t, got.err)
				require.Len(t, got.msgs, 1)
				assert.Equal(t, int64(1), got.msgs[0].Offset)
			})
		})
	}
}

// A reserved record whose log turns out closed goes back, and the consumer waits for the
// next wake rather than reading the closed log over and over: the log the host installs in
// its place serves it.
func TestReservedClosedLogWaitsForNextWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &routertest.MemLogs{}
		node := newTopicsNode(t, logs, "t")
		defer node.Close()
		closed := logs.Log("t", 0)
		a := goConsume(context.Background(), node, "t", router.ConsumeOptions{Wait: time.Minute})
		synctest.Wait()
		closed.Append(nil, []byte("v"), time.Now())
		closed.Close()
		node.Appended("t", 0, 1)
		synctest.Wait()
		_, ok := returned(a)
		require.False(t, ok, "still waiting")
		assert.Equal(t, 1, closed.Reads(), "one read of the closed log, no spinning")

		fresh := routertest.NewMemLog()
		fresh.Append(nil, []byte("again"), time.Now())
		logs.Replace("t", 0, fresh)
		node.Appended("t", 0, 1)
		synctest.Wait()
		got, ok := returned(a)
		require.True(t, ok)
		require.NoError(t, got.err)
		require.Len(t, got.msgs, 1)
		assert.Equal(t, "again", string(got.msgs[0].Value))
		assert.Equal(t, 1, closed.Reads())
	})
}
