package router_test

import (
	"context"
	"fmt"
	iofs "io/fs"
	"path"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/testflags"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Issue 25 item 1: calls that name topics which do not exist keep nothing: any HTTP client
// can name as many as it likes. 20,000 distinct unknown names through every call that takes
// a topic leave the heap as it was (before: about 1.9 MiB, and each call slowed from 0.3 ms
// to 1.7 ms), and each answers ErrUnknownTopic or, for a handle, what an unknown topic's
// handle answers.
func TestUnknownTopicsLeaveNothing(t *testing.T) {
	routes := &routertest.Routes{}
	routes.Set("real", 0)
	logs := &routertest.MemLogs{}
	logs.Log("real", 0).Append(nil, []byte("r"), time.Unix(0, 0))
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New()})
	require.NoError(t, err)
	defer node.Close()
	ctx := context.Background()
	calls := func(from, to int) {
		for i := from; i < to; i++ {
			topic := fmt.Sprintf("no-such-topic-%d", i)
			_, err := node.Consume(ctx, topic, router.ConsumeOptions{})
			require.ErrorIs(t, err, router.ErrUnknownTopic)
			_, err = node.Consume(ctx, topic, router.ConsumeOptions{Pinned: true, Partition: 3})
			require.ErrorIs(t, err, router.ErrUnknownTopic)
			require.Error(t, node.Ack(ctx, topic, router.Handle{Nonce: 12345}))
			require.Error(t, node.Nack(ctx, topic, router.Handle{Nonce: 12345}, 0))
			_, err = node.Extend(ctx, topic, router.Handle{Nonce: 12345}, time.Second)
			require.Error(t, err)
			for _, err := range node.AckBatch(ctx, topic, []router.Handle{{Nonce: 1}, {Partition: 1, Offset: 2, Nonce: 3}}) {
				require.Error(t, err)
			}
			_, err = node.TopicStatus(topic)
			require.ErrorIs(t, err, router.ErrUnknownTopic)
			_, err = node.PartitionStatus(topic, 0)
			require.ErrorIs(t, err, router.ErrUnknownTopic)
			_, err = node.Replay(ctx, topic, 0, 0, 1)
			require.ErrorIs(t, err, router.ErrUnknownTopic)
			_, err = node.Requeue(topic, 0, 0)
			require.ErrorIs(t, err, router.ErrUnknownTopic)
		}
	}
	calls(0, 1000) // whatever the node sets up once
	before := heapInUse()
	calls(1000, 21_000)
	after := heapInUse()
	grew := int64(after) - int64(before)
	t.Logf("heap grew %d bytes over 20,000 unknown topics", grew)
	require.Less(t, grew, int64(200<<10), "unknown topics keep nothing (200 KiB of slack for the runtime)")
}

// churnHost is routes and logs for a churn of topics: the live ones exist, each with one
// partition here whose log holds one record (and, unlike a MemLog, keeps no account of its
// reads: the heap measured is the node's).
type churnHost struct {
	live sync.Map // topic → struct{}
	log  oneRecord
}

type oneRecord struct{}

func (oneRecord) Read(offset int64) (router.Record, error) {
	if offset != 0 {
		return router.Record{}, router.ErrNotFound
	}
	return router.Record{Value: []byte("r")}, nil
}
func (oneRecord) HighWatermark() int64 { return 1 }
func (oneRecord) Oldest() int64        { return 0 }

func (h *churnHost) Partitions(topic string) ([]int32, map[string][]int32, bool) {
	if _, ok := h.live.Load(topic); ok {
		return []int32{0}, nil, true
	}
	return nil, nil, false
}

func (h *churnHost) Get(topic string, _ int32) (router.Log, error) {
	if _, ok := h.live.Load(topic); ok {
		return h.log, nil
	}
	return nil, router.ErrUnknownTopic
}

// Issue 25 item 1: topics created, consumed, acked (their state written) and deleted, one
// after another, leave nothing behind: 100,000 of them (10,000 under -short or the race
// detector) leave the heap as it was and no directory.
func TestTopicChurnLeavesNothing(t *testing.T) {
	n := 100_000
	if testing.Short() || testflags.Race {
		n = 10_000
	}
	host := &churnHost{}
	fs := crashfs.New()
	node, err := router.New(router.Config{Logs: host, Routes: host, Dir: "/state", FS: fs})
	require.NoError(t, err)
	defer node.Close()
	ctx := context.Background()
	churn := func(from, to int) {
		for i := from; i < to; i++ {
			topic := fmt.Sprintf("churn-%d", i)
			host.live.Store(topic, struct{}{})
			msgs, err := node.Consume(ctx, topic, router.ConsumeOptions{})
			require.NoError(t, err)
			require.Len(t, msgs, 1)
			require.NoError(t, node.AckDurable(ctx, topic, msgs[0].Receipt))
			host.live.Delete(topic)
			dir := path.Dir(node.PartitionDir(topic, 0))
			require.NoError(t, node.DeleteTopic(topic))
			_, err = fs.Stat(dir)
			require.ErrorIs(t, err, iofs.ErrNotExist, "a deleted topic's directory is removed")
		}
	}
	churn(0, 1000)
	before := heapInUse()
	churn(1000, 1000+n)
	// The least of three readings: what the node's goroutines hold for a moment (a buffer
	// in flight) is no leak, and a busy machine caught one once; what the churn keeps stays
	// in all three.
	after := min(heapInUse(), heapInUse(), heapInUse())
	grew := int64(after) - int64(before)
	t.Logf("heap grew %d bytes over %d topics created and deleted", grew, n)
	require.Less(t, grew, int64(200<<10), "deleted topics keep nothing (200 KiB of slack for the runtime)")
}
