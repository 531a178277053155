package offsets

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkPrimeFresh measures, on the real disk, how long Run takes to prime 16,000 fresh
// partitions (one ack each): from the first MarkDirty until every partition is primed. One op
// is the whole set.
func BenchmarkPrimeFresh(b *testing.B) {
	const n = 16000
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		root := b.TempDir()
		dir := func(_ string, p int32) string { return filepath.Join(root, strconv.Itoa(int(p))) }
		for p := range int32(n) {
			if err := os.Mkdir(dir("", p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		c, err := New(Config{Dir: dir, Source: &benchSource{}})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		b.StartTimer()
		for p := range int32(n) {
			c.MarkDirty("bench", p)
		}
		go func() { defer close(done); _ = c.Run(ctx, nil) }()
		for c.Stats().Primes < n {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		cancel()
		<-done
		_ = c.Close()
		b.StartTimer()
	}
}
