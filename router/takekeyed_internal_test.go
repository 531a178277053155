package router

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
)

// An ordered partition's one-record consume reads before it reserves, holding no scan lock
// while it reads (checks 151-153: key exclusivity and order, whichever way a scan takes a
// record); a batch reads under the lock.

// probedLog is an in-memory log of keyed records that calls onRead before each read. It
// is here rather than routertest's MemLog: routertest imports this package.
type probedLog struct {
	keys   [][]byte
	onRead func(offset int64)
}

func (l *probedLog) Read(offset int64) (Record, error) {
	if l.onRead != nil {
		l.onRead(offset)
	}
	return Record{Key: l.keys[offset], Value: fmt.Appendf(nil, "v%d", offset)}, nil
}
func (l *probedLog) HighWatermark() int64 { return int64(len(l.keys)) }
func (l *probedLog) Oldest() int64        { return 0 }

type probedLogs struct{ log *probedLog }

func (l probedLogs) Get(string, int32) (Log, error) { return l.log, nil }

type onePartition struct{}

func (onePartition) Partitions(string) ([]int32, map[string][]int32, bool) {
	return []int32{0}, nil, true
}

func newProbedNode(t *testing.T, log *probedLog) *Node {
	t.Helper()
	n, err := New(Config{Logs: probedLogs{log}, Routes: onePartition{}, Dir: "/state", FS: crashfs.New(),
		Topic: func(string) TopicConfig { return TopicConfig{Ordered: true, MaxInFlight: 1 << 10} }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Close()) })
	return n
}

func TestOrderedConsumeOfOneReadsWithoutTheScanLock(t *testing.T) {
	ctx := context.Background()
	log := &probedLog{keys: [][]byte{[]byte("a"), []byte("a"), []byte("b"), []byte("a"), []byte("c")}}
	n := newProbedNode(t, log)
	// The first consume opens the shard (and verifies nothing: a fresh partition).
	first, err := n.Consume(ctx, "t", ConsumeOptions{})
	require.NoError(t, err)
	require.Len(t, first, 1)
	require.Equal(t, int64(0), first[0].Offset)
	shard, err := n.localShard("t", 0)
	require.NoError(t, err)

	var lockedDuringRead []bool
	log.onRead = func(int64) {
		free := shard.ScanLock().TryLock()
		if free {
			shard.ScanLock().Unlock()
		}
		lockedDuringRead = append(lockedDuringRead, !free)
	}
	// Offset 1 waits behind offset 0's key: read, deferred, and offset 2 taken, every read
	// without the lock.
	second, err := n.Consume(ctx, "t", ConsumeOptions{})
	require.NoError(t, err)
	require.Len(t, second, 1)
	require.Equal(t, int64(2), second[0].Offset)
	require.Equal(t, []byte("v2"), second[0].Value)
	require.Equal(t, []bool{false, false}, lockedDuringRead)
	require.Equal(t, 1, shard.Stats().Keys.Deferred)

	// A batch reserves, reads and binds under the lock.
	lockedDuringRead = nil
	batch, err := n.Consume(ctx, "t", ConsumeOptions{Max: 5})
	require.NoError(t, err)
	require.Equal(t, []int64{4}, offsetsOf(batch), "key a is held: only c's record")
	require.NotEmpty(t, lockedDuringRead)
	for _, locked := range lockedDuringRead {
		require.True(t, locked)
	}

	// Key a frees: its next records come in order, the due one (deferred) under the lock.
	require.NoError(t, n.Ack(ctx, "t", first[0].Receipt))
	lockedDuringRead = nil
	third, err := n.Consume(ctx, "t", ConsumeOptions{})
	require.NoError(t, err)
	require.Equal(t, []int64{1}, offsetsOf(third))
	require.Equal(t, []bool{true}, lockedDuringRead, "a record due again is read under the lock")
}

// TestOrderedConsumesOfOneKeepKeysApart: consumers taking one record at a time, all at
// once, on an ordered partition of few keys: no key has two holders, and each key's
// records come in offset order.
func TestOrderedConsumesOfOneKeepKeysApart(t *testing.T) {
	const records, keys, consumers = 2000, 5, 8
	log := &probedLog{}
	for i := range records {
		log.keys = append(log.keys, fmt.Appendf(nil, "k%d", i%keys))
	}
	n := newProbedNode(t, log)
	ctx := context.Background()
	var mu sync.Mutex
	holder := map[string]int{} // key -> the consumer holding it
	next := map[string]int64{} // key -> the offset due next
	for k := range keys {
		next[fmt.Sprintf("k%d", k)] = int64(k)
	}
	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	for c := range consumers {
		wg.Go(func() {
			for {
				mu.Lock()
				left := 0
				for k := range keys {
					if next[fmt.Sprintf("k%d", k)] < records {
						left++
					}
				}
				mu.Unlock()
				if left == 0 {
					return
				}
				msgs, err := n.Consume(ctx, "t", ConsumeOptions{})
				if err != nil {
					errs <- err
					return
				}
				for _, m := range msgs {
					key := string(m.Key)
					mu.Lock()
					if h, held := holder[key]; held {
						mu.Unlock()
						errs <- fmt.Errorf("offset %d of key %s delivered to consumer %d while consumer %d holds the key", m.Offset, key, c, h)
						return
					}
					if m.Offset != next[key] {
						mu.Unlock()
						errs <- fmt.Errorf("offset %d of key %s delivered, offset %d due", m.Offset, key, next[key])
						return
					}
					holder[key] = c
					next[key] += keys
					mu.Unlock()
					runtime.Gosched() // held a while: another consume of the key would show
					mu.Lock()
					delete(holder, key) // before the ack: once acked, another may take the key
					mu.Unlock()
					if err := n.Ack(ctx, "t", m.Receipt); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	shard, err := n.localShard("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(records-1), shard.Stats().Frontier)
}

func offsetsOf(msgs []Message) []int64 {
	var offs []int64
	for _, m := range msgs {
		offs = append(offs, m.Offset)
	}
	return offs
}
