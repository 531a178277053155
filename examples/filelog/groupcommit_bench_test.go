package filelog

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"narad.dev/consume/internal/cputime"
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
			b.ResetTimer()
			start, cpu := time.Now(), cputime.Process()
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				wg.Go(func() {
					for i := w; i < b.N; i += writers {
						if _, err := l.Append(key, value, now); err != nil {
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
		})
	}
}
