package offsets

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchSource is a Source whose every partition has the same state, moved on by the benchmark.
type benchSource struct {
	frontier int64
	ahead    []int64
}

func (s *benchSource) State(_ string, _ int32, into *State) bool {
	into.Frontier, into.Ahead = s.frontier, AppendRuns(into.Ahead[:0], s.ahead)
	return true
}

var benchSizes = []int{12, 64, 256}

// BenchmarkTickWriteout measures, on the real disk, a tick that writes a window for each of N
// changed partitions and writes every one of them out (D = T, as Close does), beside N bare
// 4 KiB pwrite+fdatasync pairs in the same run (the spec's target: within 1.3x), the same bare
// work batched as a tick does it (all N writes, then the N syncs), and the page-cache tick
// alone (windows, no sync). One op is one tick.
func BenchmarkTickWriteout(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) { benchTick(b, n, modeNormal, 100*time.Millisecond) })
		b.Run("baseline-"+strconv.Itoa(n), func(b *testing.B) { benchBaseline(b, n, false) })
		b.Run("baseline-batched-"+strconv.Itoa(n), func(b *testing.B) { benchBaseline(b, n, true) })
		b.Run("pagecache-"+strconv.Itoa(n), func(b *testing.B) { benchTick(b, n, modePageCache, time.Second) })
	}
}

func benchTick(b *testing.B, n int, mode tickMode, d time.Duration) {
	root := b.TempDir()
	src := &benchSource{ahead: []int64{3, 5, 6, 7, 40, 41, 900}}
	dir := func(_ string, p int32) string { return filepath.Join(root, strconv.Itoa(int(p))) }
	c, err := New(Config{Dir: dir, Source: src, Interval: d})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for p := range int32(n) {
		if err := os.Mkdir(dir("", p), 0o755); err != nil {
			b.Fatal(err)
		}
		c.MarkDirty("bench", p)
	}
	now := time.Unix(0, 0)
	tick := func() {
		now = now.Add(c.period)
		src.frontier++
		for i := range src.ahead {
			src.ahead[i]++
		}
		for p := range int32(n) {
			c.MarkDirty("bench", p)
		}
		if _, err := c.step(now, mode); err != nil {
			b.Fatal(err)
		}
	}
	for range 3 { // prime, first writeouts and their levelling
		tick()
	}
	before := c.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tick()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/partition")
	b.StopTimer()
	s := c.Stats()
	wantWriteouts := uint64(b.N * n)
	if mode == modePageCache {
		wantWriteouts = 0
	}
	if s.Windows-before.Windows != uint64(b.N*n) || s.Writeouts-before.Writeouts != wantWriteouts {
		b.Fatalf("%d ticks of %d partitions: %d windows, %d writeouts", b.N, n,
			s.Windows-before.Windows, s.Writeouts-before.Writeouts)
	}
}

func benchBaseline(b *testing.B, n int, batched bool) {
	root := b.TempDir()
	files := make([]*osFile, n)
	for i := range files {
		d := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(d, AheadFile), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Truncate(AheadFileSize); err != nil {
			b.Fatal(err)
		}
		files[i] = newOSFile(f) // the same pwrite and data sync (fdatasync on Linux) the committer uses
	}
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	buf := make([]byte, SlotSize)
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		i++
		buf[0] = byte(i)
		for _, f := range files {
			if _, err := f.WriteAt(buf, int64(i%2)*SlotSize); err != nil {
				b.Fatal(err)
			}
			if !batched {
				syncData(b, f)
			}
		}
		if batched {
			for _, f := range files {
				syncData(b, f)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/partition")
}

func syncData(b *testing.B, f *osFile) {
	if err := f.SyncData(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMarkDirty is the ack path's cost for a known partition, from many goroutines: every
// goroutine marks one partition over and over (partitions=1), or the goroutines spread over 12
// partitions (partitions=12), as the acks of a node's consumers do.
func BenchmarkMarkDirty(b *testing.B) {
	for _, n := range []int32{1, 12} {
		b.Run("partitions="+strconv.Itoa(int(n)), func(b *testing.B) {
			c, err := New(Config{Dir: func(string, int32) string { return b.TempDir() }, Source: &benchSource{}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for p := range n {
				c.MarkDirty("topic", p)
			}
			var next atomic.Int32
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				p := next.Add(1) % n
				for pb.Next() {
					c.MarkDirty("topic", p)
				}
			})
		})
	}
}

// BenchmarkDurable measures the durable wait on the real disk: N goroutines each report an ack
// (MarkDirty) and wait for Durable on one partition, over and over, while Run ticks with the
// shortest durability interval (D = T = 10 ms). One op is one Durable call. syncs/waiter is
// the partition's writeouts (one SyncData each) per call: group commit makes it about 1/N;
// ns/wait is how long a call waited, about one tick plus the writeout.
func BenchmarkDurable(b *testing.B) {
	for _, n := range []int{1, 8, 64, 512} {
		b.Run(strconv.Itoa(n), func(b *testing.B) { benchDurable(b, n) })
	}
}

func benchDurable(b *testing.B, n int) {
	root := b.TempDir()
	src := &benchSource{frontier: 99, ahead: []int64{101, 105}}
	c, err := New(Config{Dir: func(string, int32) string { return root }, Source: src, Interval: MinInterval})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Add(1)
	go func() {
		defer run.Done()
		_ = c.Run(ctx, nil)
	}()
	defer run.Wait()
	defer cancel()
	c.MarkDirty("bench", 0)
	if err := c.Durable(ctx, "bench", 0); err != nil { // primed and written out once
		b.Fatal(err)
	}
	before := c.Stats()
	var calls, waited atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for calls.Add(1) <= int64(b.N) {
				c.MarkDirty("bench", 0)
				start := time.Now()
				if err := c.Durable(ctx, "bench", 0); err != nil {
					b.Error(err)
					return
				}
				waited.Add(int64(time.Since(start)))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	s := c.Stats()
	b.ReportMetric(float64(s.Writeouts-before.Writeouts)/float64(b.N), "syncs/waiter")
	b.ReportMetric(float64(waited.Load())/float64(b.N), "ns/wait")
	if got := s.Durables - before.Durables; got != uint64(b.N) {
		b.Fatalf("%d calls answered, want %d", got, b.N)
	}
}
