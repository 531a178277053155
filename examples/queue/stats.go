package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/examples/internal/latency"
	"narad.dev/consume/router"
)

// stats counts what the workers do. The counters are read while they run, for the progress
// lines.
type stats struct {
	produced, deliveries atomic.Int64
	acks                 atomic.Int64 // successful acks
	nacked, extended     atomic.Int64
	dropped              atomic.Int64 // left to lapse on purpose
	gone                 atomic.Int64 // an ack, extend or nack too late: the lease had lapsed
	again                [4]atomic.Int64

	target int64         // acks that settle every message
	done   chan struct{} // closed when acks reaches target
	once   sync.Once

	mu             sync.Mutex
	ackedTimes     map[position]int // how many times each message was acked
	ackLatency     []time.Duration
	consumeLatency []time.Duration
}

// A position is where a message is: partition and offset.
type position struct {
	partition int32
	offset    int64
}

func newStats(target int) *stats {
	return &stats{target: int64(target), done: make(chan struct{}), ackedTimes: map[position]int{}}
}

func (s *stats) delivered(m *router.Message) {
	s.deliveries.Add(1)
	if m.Attempt > 1 && int(m.Reason) < len(s.again) {
		s.again[m.Reason].Add(1)
	}
}

func (s *stats) acked(m *router.Message) {
	s.mu.Lock()
	s.ackedTimes[position{m.Partition, m.Offset}]++
	s.mu.Unlock()
	if s.acks.Add(1) == s.target {
		s.once.Do(func() { close(s.done) })
	}
}

func (s *stats) redelivered() int64 {
	var n int64
	for i := range s.again {
		n += s.again[i].Load()
	}
	return n
}

func (s *stats) addLatencies(ack, consume []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ackLatency = append(s.ackLatency, ack...)
	s.consumeLatency = append(s.consumeLatency, consume...)
}

// progress prints a line every interval until done closes.
func (s *stats) progress(done <-chan struct{}, every time.Duration, start time.Time, out io.Writer) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			acks := s.acks.Load()
			fmt.Fprintf(out, "%5.1fs  produced %6d  delivered %6d  acked %6d (%6.0f/s)  nacked %4d  delivered again %4d\n",
				now.Sub(start).Seconds(), s.produced.Load(), s.deliveries.Load(), acks,
				float64(acks-last)/every.Seconds(), s.nacked.Load(), s.redelivered())
			last = acks
		}
	}
}

// summary is what the demo reports at the end.
type summary struct {
	messages, partitions, workers int
	elapsed                       time.Duration

	produced, delivered, redelivered, acked int64
	nacked, extended, dropped, gone         int64
	again                                   map[router.Reason]int64

	ackedTwice, neverAcked int // both 0 unless the library broke its promise

	ackLatency, consumeLatency percentiles
}

func (s *stats) summary(cfg config, elapsed time.Duration) summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := summary{
		messages: cfg.messages, partitions: cfg.partitions, workers: cfg.workers, elapsed: elapsed,
		produced: s.produced.Load(), delivered: s.deliveries.Load(), redelivered: s.redelivered(),
		acked: s.acks.Load(), nacked: s.nacked.Load(), extended: s.extended.Load(),
		dropped: s.dropped.Load(), gone: s.gone.Load(),
		again:          map[router.Reason]int64{},
		neverAcked:     cfg.messages - len(s.ackedTimes),
		ackLatency:     percentilesOf(s.ackLatency),
		consumeLatency: percentilesOf(s.consumeLatency),
	}
	for r := range s.again {
		if n := s.again[r].Load(); n > 0 {
			sum.again[router.Reason(r)] = n
		}
	}
	for _, n := range s.ackedTimes {
		if n > 1 {
			sum.ackedTwice++
		}
	}
	return sum
}

func (sum summary) print(out io.Writer) {
	w := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	w("")
	w("summary: %d messages, %d partitions, %d workers, %.2fs", sum.messages, sum.partitions, sum.workers, sum.elapsed.Seconds())
	w("  delivered    %7d   %d of them again: %d after a nack, %d after their lease lapsed",
		sum.delivered, sum.redelivered, sum.again[router.ReasonNacked], sum.again[router.ReasonExpired])
	exactly := "every message exactly once"
	if sum.ackedTwice > 0 || sum.neverAcked > 0 {
		exactly = fmt.Sprintf("BROKEN: %d acked twice, %d never", sum.ackedTwice, sum.neverAcked)
	}
	w("  acked        %7d   %s", sum.acked, exactly)
	w("  nacked       %7d   each visible again %v later", sum.nacked, nackDelay)
	w("  extended     %7d   lease extended, then acked", sum.extended)
	w("  dropped      %7d   left to lapse, as if the worker had crashed holding them", sum.dropped)
	if sum.gone > 0 {
		w("  too late     %7d   acked, extended or nacked after the lease lapsed (a 410)", sum.gone)
	}
	w("  throughput   %7.0f   acks per second", float64(sum.acked)/sum.elapsed.Seconds())
	w("  latency, produce to ack:  %v", sum.ackLatency)
	w("      from the record's append to its ack's return; nacks and lapsed leases make the tail")
	w("  latency, consume call:    %v", sum.consumeLatency)
	w("      calls that returned records, time parked in the long-poll included")
}

// percentiles of a set of durations, as the report prints them.
type percentiles latency.Percentiles

func percentilesOf(d []time.Duration) percentiles { return percentiles(latency.Of(d)) }

func (p percentiles) String() string {
	r := latency.Round
	return fmt.Sprintf("p50 %v  p90 %v  p99 %v  max %v  (%d samples)", r(p.P50), r(p.P90), r(p.P99), r(p.Max), p.N)
}
