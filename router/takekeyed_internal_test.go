package router

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/inflight"
)

// An ordered partition's consume reads the next fresh records before it reserves them,
// holding no scan lock while it reads (checks 151-153: key exclusivity and order, whichever
// way a scan takes a record); what is due again is read under the lock.

// probedLog is an in-memory log of keyed records that calls onRead before each read. It
// is here rather than routertest's MemLog: routertest imports this package.
type probedLog struct {
	keys    [][]byte
	onRead  func(offset int64)
	corrupt map[int64]bool // offsets whose reads answer ErrCorrupt
}

func (l *probedLog) Read(offset int64) (Record, error) {
	if l.onRead != nil {
		l.onRead(offset)
	}
	if l.corrupt[offset] {
		return Record{}, ErrCorrupt
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

	lockedDuringRead := scanLockedAtReads(log, shard)
	// Offset 1 waits behind offset 0's key: read, deferred, and offset 2 taken, every read
	// without the lock.
	second, err := n.Consume(ctx, "t", ConsumeOptions{})
	require.NoError(t, err)
	require.Len(t, second, 1)
	require.Equal(t, int64(2), second[0].Offset)
	require.Equal(t, []byte("v2"), second[0].Value)
	require.Equal(t, []bool{false, false}, *lockedDuringRead)
	require.Equal(t, 1, shard.Stats().Keys.Deferred)

	// A batch reads before it reserves too: offset 3 waits behind key a, offset 4 is taken.
	*lockedDuringRead = nil
	batch, err := n.Consume(ctx, "t", ConsumeOptions{Max: 5})
	require.NoError(t, err)
	require.Equal(t, []int64{4}, offsetsOf(batch), "key a is held: only c's record")
	require.Equal(t, []bool{false, false}, *lockedDuringRead)
	require.Equal(t, 2, shard.Stats().Keys.Deferred)

	// Key a frees: its next record comes in order, due again (deferred), its key known, so
	// it is reserved and bound before its read, which holds no lock either.
	require.NoError(t, n.Ack(ctx, "t", first[0].Receipt))
	*lockedDuringRead = nil
	third, err := n.Consume(ctx, "t", ConsumeOptions{Max: 5})
	require.NoError(t, err)
	require.Equal(t, []int64{1}, offsetsOf(third))
	require.Equal(t, []bool{false}, *lockedDuringRead, "a record due again whose key is known")
	require.Equal(t, 1, shard.Stats().Keys.Deferred, "offset 3 waits behind offset 1's holder")

	// Nacked, it is due again, before offset 3 of its key; a consume of one takes what is
	// due under the lock.
	require.NoError(t, n.Nack(ctx, "t", third[0].Receipt, 0))
	*lockedDuringRead = nil
	fourth, err := n.Consume(ctx, "t", ConsumeOptions{})
	require.NoError(t, err)
	require.Equal(t, []int64{1}, offsetsOf(fourth))
	require.Equal(t, []bool{true}, *lockedDuringRead)
	require.NoError(t, n.Ack(ctx, "t", fourth[0].Receipt))
	*lockedDuringRead = nil
	fifth, err := n.Consume(ctx, "t", ConsumeOptions{Max: 5})
	require.NoError(t, err)
	require.Equal(t, []int64{3}, offsetsOf(fifth))
	require.Equal(t, []bool{false}, *lockedDuringRead)
}

// TestOrderedRecordGivenBackUnboundIsReadUnderTheLock: a record given back before its read
// bound it to its key is due again with its key unknown: a scan reserves, reads and binds it
// under the scan lock, as it does a fresh record it cannot read first.
func TestOrderedRecordGivenBackUnboundIsReadUnderTheLock(t *testing.T) {
	ctx := context.Background()
	log := &probedLog{keys: [][]byte{[]byte("a"), []byte("b"), []byte("a")}}
	n := newProbedNode(t, log)
	first, err := n.Consume(ctx, "t", ConsumeOptions{}) // opens the shard: offset 0, key a
	require.NoError(t, err)
	shard, err := n.localShard("t", 0)
	require.NoError(t, err)
	unbound, err := shard.ReserveNext(n.clock.Now(), log.HighWatermark())
	require.NoError(t, err)
	require.Equal(t, int64(1), unbound.Offset)
	require.NoError(t, shard.GiveBack(n.clock.Now(), unbound.Handle))
	locked := scanLockedAtReads(log, shard)
	batch, err := n.Consume(ctx, "t", ConsumeOptions{Max: 5})
	require.NoError(t, err)
	require.Equal(t, []int64{1}, offsetsOf(batch), "offset 2 waits behind key a")
	require.Equal(t, []bool{true, true}, *locked, "offsets 1 and 2, under the lock")
	require.NoError(t, n.Ack(ctx, "t", first[0].Receipt))
}

// TestOrderedBatchTakesWhatItReadAfterAnotherConsume: a batch that read a run of fresh
// records while another consume took the first of them takes the rest of what it read, with
// no read again and no lock held while it read.
func TestOrderedBatchTakesWhatItReadAfterAnotherConsume(t *testing.T) {
	ctx := context.Background()
	log := &probedLog{keys: [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}}
	n := newProbedNode(t, log)
	_, err := n.Consume(ctx, "t", ConsumeOptions{Max: 1}) // opens the shard: offset 0
	require.NoError(t, err)
	var reads []int64
	var other []Message
	log.onRead = func(off int64) {
		reads = append(reads, off)
		if off == 3 && other == nil { // the batch's last read: another consume goes first
			other, err = n.Consume(ctx, "t", ConsumeOptions{Max: 1})
			require.NoError(t, err)
		}
	}
	batch, err := n.Consume(ctx, "t", ConsumeOptions{Max: 3})
	require.NoError(t, err)
	require.Equal(t, []int64{1}, offsetsOf(other))
	require.Equal(t, []int64{2, 3}, offsetsOf(batch))
	require.Equal(t, []byte("v3"), batch[1].Value)
	require.Equal(t, []int64{1, 2, 3, 1}, reads, "the batch read 1 to 3 once, the other consume 1")
}

// TestOrderedBatchLeavesAFailedReadToTheLockedScan: a batch that reads before it reserves
// takes the records read before one that fails, and leaves that one to the scan under the
// lock, which skips a corrupt record as always.
func TestOrderedBatchLeavesAFailedReadToTheLockedScan(t *testing.T) {
	ctx := context.Background()
	log := &probedLog{keys: [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}, corrupt: map[int64]bool{2: true}}
	n := newProbedNode(t, log)
	_, err := n.Consume(ctx, "t", ConsumeOptions{Max: 1}) // opens the shard: offset 0
	require.NoError(t, err)
	shard, err := n.localShard("t", 0)
	require.NoError(t, err)
	locked := scanLockedAtReads(log, shard)
	batch, err := n.Consume(ctx, "t", ConsumeOptions{Max: 4})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 3}, offsetsOf(batch))
	// 1 read and taken first; 2 fails twice (first, then under the lock, which skips it);
	// 3 under the lock, the scan's reserve being the next one.
	require.Equal(t, []bool{false, false, false, true, true}, *locked)
	require.Equal(t, uint64(1), n.Stats().Shards.CorruptSkipped)
}

// scanLockedAtReads records, for each read of log from now on, whether shard's scan lock was
// held while it read.
func scanLockedAtReads(log *probedLog, shard *inflight.Shard) *[]bool {
	locked := new([]bool)
	log.onRead = func(int64) {
		free := shard.ScanLock().TryLock()
		if free {
			shard.ScanLock().Unlock()
		}
		*locked = append(*locked, !free)
	}
	return locked
}

// rangedProbedLog is a probedLog that reads ranges, counting them.
type rangedProbedLog struct {
	*probedLog
	ranges int
}

func (l *rangedProbedLog) ReadRange(offset int64, max, maxBytes int, dst []Record) ([]Record, error) {
	l.ranges++
	for i := range max {
		if offset+int64(i) >= l.HighWatermark() {
			break
		}
		rec, _ := l.Read(offset + int64(i))
		dst = append(dst, rec)
	}
	return dst, nil
}

type rangedProbedLogs struct{ log *rangedProbedLog }

func (l rangedProbedLogs) Get(string, int32) (Log, error) { return l.log, nil }

// TestOrderedBatchReadsARangeBeforeItReserves: a batch of an ordered partition reads its run
// with one ReadRange, without the scan lock, and delivers the records whose keys are free.
func TestOrderedBatchReadsARangeBeforeItReserves(t *testing.T) {
	ctx := context.Background()
	log := &rangedProbedLog{probedLog: &probedLog{}}
	for i := range 10 {
		log.keys = append(log.keys, fmt.Appendf(nil, "k%d", i%4))
	}
	n, err := New(Config{Logs: rangedProbedLogs{log}, Routes: onePartition{}, Dir: "/state", FS: crashfs.New(),
		Topic: func(string) TopicConfig { return TopicConfig{Ordered: true, MaxInFlight: 1 << 10} }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Close()) })
	_, err = n.Consume(ctx, "t", ConsumeOptions{Max: 1}) // opens the shard: offset 0, key k0
	require.NoError(t, err)
	shard, err := n.localShard("t", 0)
	require.NoError(t, err)
	locked := scanLockedAtReads(log.probedLog, shard)
	batch, err := n.Consume(ctx, "t", ConsumeOptions{Max: 6})
	require.NoError(t, err)
	// 1..6 read in one range: 4 waits behind k0's holder, 5 goes with 1 (one holder takes
	// consecutive records of its key). The last record of the budget is read alone, and
	// each record left (7, 8, 9) waits behind a key the batch's first call holds.
	require.Equal(t, []int64{1, 2, 3, 5, 6}, offsetsOf(batch))
	require.Equal(t, 1, log.ranges)
	require.Len(t, *locked, 9)
	for _, l := range *locked {
		require.False(t, l)
	}
	require.Equal(t, 4, shard.Stats().Keys.Deferred)
}

// TestOrderedConsumesKeepKeysApart: consumers taking one record at a time, or batches, all
// at once, on an ordered partition of few keys: no key has two holders, and each key's
// records come in offset order (a batch may take several of a key, in order).
func TestOrderedConsumesKeepKeysApart(t *testing.T) {
	for _, max := range []int{1, 7} {
		t.Run(fmt.Sprintf("max=%d", max), func(t *testing.T) { consumeKeepingKeysApart(t, max) })
	}
}

func consumeKeepingKeysApart(t *testing.T, max int) {
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
				msgs, err := n.Consume(ctx, "t", ConsumeOptions{Max: max})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, m := range msgs {
					key := string(m.Key)
					if h, held := holder[key]; held && h != c {
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
				}
				mu.Unlock()
				runtime.Gosched() // held a while: another consume of the keys would show
				mu.Lock()
				for _, m := range msgs {
					delete(holder, string(m.Key)) // before the ack: once acked, another may take the key
				}
				mu.Unlock()
				for _, m := range msgs {
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
