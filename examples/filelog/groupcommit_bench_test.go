package filelog

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/internal/cputime"
	"narad.dev/consume/router"
)

// BenchmarkAppendConcurrent appends 100-byte records to one partition with SyncEveryAppend
// from 1, 4 and 16 goroutines at once, each waiting for its append (a server's concurrent
// sends to one partition): with group commit, the appends made during an fsync share the
// next. Reported: appends a second (ns/op is wall time an append) and the process's CPU time
// an append.
func BenchmarkAppendConcurrent(b *testing.B) {
	for _, writers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			l := benchLog(b, SyncEveryAppend)
			key, value := make([]byte, 16), make([]byte, 100)
			now := time.Now()
			benchWriters(b, writers, func() error {
				_, err := l.Append(key, value, now)
				return err
			})
		})
	}
}

// BenchmarkAppendTopic appends 100-byte records to a topic of 4 partitions with
// SyncEveryAppend from 4 and 16 goroutines at once, each waiting for its append (a server's
// concurrent sends to a queue): spread round robin over the partitions (pick=roundrobin:
// Store.AppendRecord, what cmd/sqsd did) or where the store picks (pick=any: AppendAny,
// which joins a partition whose appends await an fsync). Reported besides appends/s and the
// process's CPU time an append: the fsyncs an append.
func BenchmarkAppendTopic(b *testing.B) {
	for _, pick := range []string{"roundrobin", "any"} {
		for _, writers := range []int{4, 16} {
			b.Run(fmt.Sprintf("pick=%s/writers=%d", pick, writers), func(b *testing.B) {
				var fsyncs atomic.Int64
				s, err := Open(b.TempDir(), Options{Sync: SyncEveryAppend, MaxSegments: 8,
					syncFile: func(f *os.File) error { fsyncs.Add(1); return f.Sync() }})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				const partitions = 4
				if err := s.CreateTopic("bench", partitions); err != nil {
					b.Fatal(err)
				}
				rec := router.Record{Key: make([]byte, 16), Value: make([]byte, 100), Timestamp: time.Now()}
				var turn atomic.Uint32
				appendOne := func() error {
					if pick == "any" {
						_, _, err := s.AppendAny("bench", rec)
						return err
					}
					_, err := s.AppendRecord("bench", int32(turn.Add(1)%partitions), rec)
					return err
				}
				benchWriters(b, writers, appendOne)
				b.ReportMetric(float64(fsyncs.Load())/float64(b.N), "fsyncs/append")
			})
		}
	}
}

// benchWriters runs b.N appends (appendOne) from writers goroutines at once, each waiting
// for its own, and reports appends a second and the process's CPU time an append. The
// timer stops when the appends are done.
func benchWriters(b *testing.B, writers int, appendOne func() error) {
	b.ResetTimer()
	start, cpu := time.Now(), cputime.Process()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < b.N; i += writers {
				if err := appendOne(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed, used := time.Since(start), cputime.Process()-cpu
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/append")
}
