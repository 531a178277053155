package filelog

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/router"
)

// BenchmarkAppend appends 100-byte records (16-byte keys) to one partition in 1 MiB
// segments.
func BenchmarkAppend(b *testing.B) {
	for _, policy := range []struct {
		name string
		sync SyncPolicy
	}{{"SyncNone", SyncNone}, {"SyncEveryAppend", SyncEveryAppend}} {
		b.Run(policy.name, func(b *testing.B) {
			l := benchLog(b, policy.sync)
			key, value := make([]byte, 16), make([]byte, 100)
			now := time.Now()
			b.SetBytes(int64(len(key) + len(value)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Append(key, value, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead reads 100-byte records at scattered offsets of a 100,000-record partition
// (in the page cache).
func BenchmarkRead(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateTopic("bench", 1); err != nil {
		b.Fatal(err)
	}
	l, _ := s.Log("bench", 0)
	const n = 100_000
	for i := range n {
		if _, err := l.Append(fmt.Appendf(nil, "key-%012d", i), make([]byte, 100), time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(116)
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		off = (off + 7919) % n // a prime stride: every offset, out of order
		if _, err := l.Read(off); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadConsecutive reads 100-byte records in order, 100 at a time: one Read per
// record, or one ReadRange (one pread) per 100. One op is one record.
func BenchmarkReadConsecutive(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateTopic("bench", 1); err != nil {
		b.Fatal(err)
	}
	l, _ := s.Log("bench", 0)
	const n = 100_000
	for i := range n {
		if _, err := l.Append(fmt.Appendf(nil, "key-%012d", i), make([]byte, 100), time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	const per = 100
	b.Run("read=single", func(b *testing.B) {
		b.SetBytes(116)
		b.ReportAllocs()
		off := int64(0)
		for b.Loop() {
			if _, err := l.Read(off); err != nil {
				b.Fatal(err)
			}
			off = (off + 1) % n
		}
	})
	b.Run("read=range", func(b *testing.B) {
		b.SetBytes(116)
		b.ReportAllocs()
		var recs []router.Record
		for i := 0; i < b.N; i += per {
			recs, err = l.ReadRange(int64(i%n), min(per, b.N-i), 1<<20, recs[:0])
			if err != nil || len(recs) == 0 {
				b.Fatal(len(recs), err)
			}
			i -= per - len(recs) // a range stops at a segment's end: go on from there
		}
	})
}

// BenchmarkConsumeAck consumes and acks records through a router.Node over a Store: 12
// partitions, records written (to the page cache) before the timer starts, each consumer
// consuming batches and acking every record it gets. One op is one record consumed and
// acked. read=range is the Store as it is; read=single hides ReadRange from the node, which
// then reads one record per Read.
func BenchmarkConsumeAck(b *testing.B) {
	for _, batch := range []int{1, 100} {
		for _, consumers := range []int{1, 8, 64} {
			for _, read := range []string{"range", "single"} { // side by side, so drift hits both
				b.Run(fmt.Sprintf("batch=%d/consumers=%d/read=%s", batch, consumers, read), func(b *testing.B) {
					benchConsumeAck(b, read == "range", batch, consumers)
				})
			}
		}
	}
}

func benchConsumeAck(b *testing.B, ranges bool, batch, consumers int) {
	const partitions = 12
	dir := b.TempDir()
	s, err := Open(filepath.Join(dir, "log"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateTopic("bench", partitions); err != nil {
		b.Fatal(err)
	}
	key, value := make([]byte, 16), make([]byte, 100)
	for i := range b.N {
		if _, err := s.Append("bench", int32(i%partitions), key, value); err != nil {
			b.Fatal(err)
		}
	}
	var logs router.Logs = s
	if !ranges {
		logs = hideRanges(s, "bench")
	}
	node, err := router.New(router.Config{Logs: logs, Routes: s, Dir: filepath.Join(dir, "consumer")})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	ctx := context.Background()
	var acked atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range consumers {
		wg.Go(func() {
			var msgs []router.Message
			for acked.Load() < int64(b.N) {
				var err error
				msgs, err = node.ConsumeAppend(ctx, msgs[:0], "bench", router.ConsumeOptions{Max: batch})
				if err != nil {
					b.Error(err)
					return
				}
				if len(msgs) == 0 {
					runtime.Gosched() // the rest are leased to others, about to be acked
					continue
				}
				for i := range msgs {
					if err := node.Ack(ctx, "bench", msgs[i].Receipt); err != nil {
						b.Error(err)
						return
					}
				}
				acked.Add(int64(len(msgs)))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// singleReads hides the logs' ReadRange from the node: each log it hands out is a
// router.Log and nothing more. The wrappers are made once, so a lookup allocates no more
// than the Store's own.
type singleReads struct {
	s    *Store
	logs map[int32]router.Log
}

type singleLog struct{ router.Log }

func hideRanges(s *Store, topic string) singleReads {
	r := singleReads{s: s, logs: map[int32]router.Log{}}
	local, _, _ := s.Partitions(topic)
	for _, p := range local {
		l, _ := s.Get(topic, p)
		r.logs[p] = singleLog{l}
	}
	return r
}

func (r singleReads) Get(topic string, p int32) (router.Log, error) {
	if _, err := r.s.Get(topic, p); err != nil {
		return nil, err
	}
	return r.logs[p], nil
}

func (r singleReads) GetMany(topic string, partitions []int32, into []router.Log) error {
	if err := r.s.GetMany(topic, partitions, into); err != nil {
		return err
	}
	for i, p := range partitions {
		into[i] = r.logs[p]
	}
	return nil
}

var (
	_ router.ManyGetter = singleReads{}
	_ router.Log        = singleLog{}
)

// benchLog opens a store in a temporary directory, closed when b ends, with one partition of
// topic "bench" under sync, and returns its log.
func benchLog(b *testing.B, sync SyncPolicy) *Log {
	b.Helper()
	s, err := Open(b.TempDir(), Options{Sync: sync, MaxSegments: 8})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.CreateTopic("bench", 1); err != nil {
		b.Fatal(err)
	}
	l, _ := s.Log("bench", 0)
	return l
}
