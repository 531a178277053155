package filelog

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

type appended struct {
	topic     string
	partition int32
	hwm       int64
}

func TestStore(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var calls []appended
	opts := Options{OnAppend: func(topic string, p int32, hwm int64) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, appended{topic, p, hwm})
	}}
	s, err := Open(dir, opts)
	require.NoError(t, err)

	_, _, ok := s.Partitions("orders")
	require.False(t, ok, "unknown topic")
	require.NoError(t, s.CreateTopic("orders", 3))
	require.NoError(t, s.CreateTopic("a/b c%", 1), "any name is escaped into a directory name")
	require.NoError(t, s.CreateTopic("orders", 2), "never removes partitions")
	require.Equal(t, []string{"a/b c%", "orders"}, s.Topics())

	local, remote, ok := s.Partitions("orders")
	require.True(t, ok)
	require.Equal(t, []int32{0, 1, 2}, local)
	require.Nil(t, remote)

	off, err := s.Append("orders", 1, []byte("k"), []byte("v1"))
	require.NoError(t, err)
	require.Equal(t, int64(0), off)
	off, err = s.Append("orders", 1, nil, []byte("v2"))
	require.NoError(t, err)
	require.Equal(t, int64(1), off)
	_, err = s.Append("a/b c%", 0, nil, []byte("x"))
	require.NoError(t, err)
	require.Equal(t, []appended{{"orders", 1, 1}, {"orders", 1, 2}, {"a/b c%", 0, 1}}, calls)

	log, err := s.Get("orders", 1)
	require.NoError(t, err)
	rec, err := log.Read(1)
	require.NoError(t, err)
	require.Equal(t, "v2", string(rec.Value))
	require.False(t, rec.Timestamp.IsZero(), "Store.Append stamps the record")

	logs := make([]router.Log, 3)
	require.NoError(t, s.GetMany("orders", []int32{2, 0, 1}, logs))
	require.Equal(t, int64(2), logs[2].HighWatermark())
	require.Equal(t, int64(0), logs[0].HighWatermark())
	require.ErrorIs(t, s.GetMany("orders", []int32{0, 3}, logs), ErrUnknownPartition)

	_, err = s.Get("orders", 3)
	require.ErrorIs(t, err, ErrUnknownPartition)
	_, err = s.Get("nope", 0)
	require.ErrorIs(t, err, ErrUnknownPartition)
	_, err = s.Append("nope", 0, nil, nil)
	require.ErrorIs(t, err, ErrUnknownPartition)

	for _, bad := range []string{"", ".", ".."} {
		require.ErrorIs(t, s.CreateTopic(bad, 1), ErrInvalidName, "%q", bad)
	}
	require.Error(t, s.CreateTopic("zero", 0))

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "closing twice")
	log, err = s.Get("orders", 1)
	require.NoError(t, err, "a closed store still resolves its logs")
	_, err = log.Read(0)
	require.ErrorIs(t, err, router.ErrLogClosed)
	require.Equal(t, int64(2), log.HighWatermark())
	require.ErrorIs(t, s.CreateTopic("late", 1), router.ErrLogClosed)

	// Reopen: the topics and records are found again, and stray entries are left alone.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("hi"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "orders", "07"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "orders", "-1"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "%zz", "0"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "orders", "5"), nil, 0o644))
	s, err = Open(dir, Options{})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, []string{"a/b c%", "orders"}, s.Topics())
	local, _, _ = s.Partitions("orders")
	require.Equal(t, []int32{0, 1, 2}, local)
	log, err = s.Get("orders", 1)
	require.NoError(t, err)
	rec, err = log.Read(0)
	require.NoError(t, err)
	require.Equal(t, "k", string(rec.Key))
	require.NoError(t, s.Sync())
}

func TestOpenRejectsBadOptions(t *testing.T) {
	for _, opts := range []Options{
		{SegmentBytes: -1},
		{SegmentBytes: maxSegmentBytes + 1},
		{MaxSegments: -1},
		{MaxBytes: -1},
		{Sync: 7},
	} {
		_, err := Open(t.TempDir(), opts)
		require.Error(t, err, "%+v", opts)
	}
}

func TestStoreSyncEveryAppend(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Sync: SyncEveryAppend, SegmentBytes: 100, MaxSegments: 2})
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("t", 2))
	for range 10 {
		_, err := s.Append("t", 1, []byte("key"), []byte("a value of some length"))
		require.NoError(t, err)
	}
	l, err := s.Log("t", 1)
	require.NoError(t, err)
	require.Equal(t, int64(10), l.HighWatermark())
	require.Equal(t, int64(8), l.Oldest())
	require.NoError(t, s.Close())
}

// TestStoreUnderNode runs a router.Node over a Store: a parked long-poll is woken by an
// append through OnAppend, and an ack settles the record for good.
func TestStoreUnderNode(t *testing.T) {
	dir := t.TempDir()
	var node *router.Node
	s, err := Open(filepath.Join(dir, "log"), Options{
		OnAppend: func(topic string, p int32, hwm int64) { node.Appended(topic, p, hwm) },
	})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("t", 2))
	node, err = router.New(router.Config{Logs: s, Routes: s, Dir: filepath.Join(dir, "consumer")})
	require.NoError(t, err)
	defer node.Close()

	got := make(chan []router.Message, 1)
	go func() {
		msgs, err := node.Consume(t.Context(), "t", router.ConsumeOptions{Wait: time.Minute})
		if err != nil {
			msgs = nil
		}
		got <- msgs
	}()
	_, err = s.Append("t", 1, []byte("k"), []byte("hello"))
	require.NoError(t, err)
	msgs := <-got
	require.Len(t, msgs, 1)
	require.Equal(t, "hello", string(msgs[0].Value))
	require.Equal(t, int32(1), msgs[0].Partition)
	require.NoError(t, node.Ack(t.Context(), "t", msgs[0].Receipt))

	msgs, err = node.Consume(t.Context(), "t", router.ConsumeOptions{Max: 10})
	require.NoError(t, err)
	require.Empty(t, msgs, "acked")
}
