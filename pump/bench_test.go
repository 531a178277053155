package pump

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// benchSource serves one partition of one topic from a counter; every other topic and partition
// is empty. It is cheap, so the benchmarks measure the pump.
type benchSource struct {
	avail atomic.Int64
}

func (s *benchSource) Take(topic string, pinned int32) (int64, bool) {
	if topic != "hot" || pinned > 0 {
		return 0, false
	}
	for {
		n := s.avail.Load()
		if n == 0 {
			return 0, false
		}
		if s.avail.CompareAndSwap(n, n-1) {
			return n, true
		}
	}
}

func (s *benchSource) Release(string, int64) { s.avail.Add(1) }

// startBenchPump starts a pump over a benchSource with Run in a goroutine; stop closes the pump,
// which answers every parked waiter, and waits for Run to return.
func startBenchPump() (p *Pump[int64], src *benchSource, stop func()) {
	src = &benchSource{}
	p = New[int64](src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.Run(ctx)
		close(done)
	}()
	return p, src, func() {
		p.Close()
		cancel()
		<-done
	}
}

// parkElsewhere parks n waiters that are never served: half on 100 other topics, half pinned to
// partitions 1..64 of the hot topic. It returns once they are all parked; their goroutines return
// ErrClosed when the pump closes.
func parkElsewhere(p *Pump[int64], n int, wg *sync.WaitGroup) {
	for i := range n {
		topic, pinned := fmt.Sprintf("other-%d", i%100), int32(-1)
		if i%2 == 1 {
			topic, pinned = "hot", int32(1+i%64)
		}
		wg.Go(func() { p.Wait(context.Background(), topic, pinned) })
	}
	waitParked(p, n, func(yield func(string) bool) {
		for i := range min(n, 100) {
			if !yield(fmt.Sprintf("other-%d", i)) {
				return
			}
		}
		yield("hot")
	})
}

// waitParked spins (setup only, off the clock) until n waiters are parked on the topics given.
func waitParked(p *Pump[int64], n int, topics func(func(string) bool)) {
	for {
		total := 0
		for t := range topics {
			total += p.Parked(t)
		}
		if total >= n {
			return
		}
		runtime.Gosched()
	}
}

// BenchmarkAppendedNoWaiter is the produce path's wake with nobody waiting: it must not allocate
// nor take a lock (item 86).
func BenchmarkAppendedNoWaiter(b *testing.B) {
	p, _, stop := startBenchPump()
	defer stop()
	// "known" has had a waiter, which left: its queue state exists and is empty.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Wait(ctx, "known", 3); close(done) }()
	waitParked(p, 1, func(yield func(string) bool) { yield("known") })
	cancel()
	<-done
	for _, name := range []string{"known", "unknown"} {
		b.Run("Notify/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Notify(name)
			}
		})
		b.Run("NotifyPartition/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.NotifyPartition(name, 3)
			}
		})
	}
	b.Run("Notify/known/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p.Notify("known")
			}
		})
	})
}

// BenchmarkDeliver is the cost of one delivered record (Wait, the pump's pass and Take, the
// hand-over) while n other waiters are parked on other topics and on other partitions of the same
// topic. It must not grow with n (items 79, 78).
func BenchmarkDeliver(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("parked=%d", n), func(b *testing.B) {
			p, src, stop := startBenchPump()
			var wg sync.WaitGroup
			parkElsewhere(p, n, &wg)
			src.avail.Store(int64(b.N))
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := p.Wait(ctx, "hot", -1); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stop()
			wg.Wait()
		})
	}
}

// BenchmarkDeliverSameTopic is the cost of one delivered record when n consumers loop on the
// same topic's shared FIFO: each record goes to the head, which parks again at the tail, so every
// delivery wakes a different goroutine.
func BenchmarkDeliverSameTopic(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("parked=%d", n), func(b *testing.B) {
			p, src, stop := startBenchPump()
			var delivered atomic.Int64
			all := make(chan struct{})
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					for {
						if _, err := p.Wait(context.Background(), "hot", -1); err != nil {
							return
						}
						if delivered.Add(1) == int64(b.N) {
							close(all)
						}
					}
				})
			}
			waitParked(p, n, func(yield func(string) bool) { yield("hot") })
			b.ReportAllocs()
			b.ResetTimer()
			src.avail.Store(int64(b.N))
			p.NotifyPartition("hot", 0)
			<-all
			b.StopTimer()
			stop()
			wg.Wait()
		})
	}
}

// endAtParkCtx is a context that ends the moment Wait blocks on it: Err reports nothing until
// Done has been called. It lets one goroutine measure park-then-cancel without a scheduler
// round trip.
type endAtParkCtx struct {
	context.Context
	ended bool
}

var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *endAtParkCtx) Done() <-chan struct{} { c.ended = true; return closedDone }

func (c *endAtParkCtx) Err() error {
	if c.ended {
		return context.Canceled
	}
	return nil
}

// BenchmarkWaitCancel parks a waiter and cancels it, behind n live waiters of the same FIFO: the
// mark in place and the amortized sweep, which must not grow with n (item 88).
func BenchmarkWaitCancel(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("parked=%d", n), func(b *testing.B) {
			p, _, stop := startBenchPump()
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() { p.Wait(context.Background(), "t", -1) })
			}
			waitParked(p, n, func(yield func(string) bool) { yield("t") })
			ctx := &endAtParkCtx{Context: context.Background()}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ctx.ended = false
				if _, err := p.Wait(ctx, "t", -1); err != context.Canceled {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stop()
			wg.Wait()
		})
	}
}
