package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"narad.dev/consume/examples/filelog"
	"narad.dev/consume/examples/internal/filequeue"
	"narad.dev/consume/router"
)

// runDemo is the plain demo: produce cfg.messages while cfg.workers consume them, until
// every message is acked.
func runDemo(ctx context.Context, cfg config, out io.Writer) (summary, error) {
	dir, cleanup, err := filequeue.StateDir(cfg.dir, "queue-")
	if err != nil {
		return summary{}, err
	}
	defer cleanup()
	q, err := openQueue(dir, cfg)
	if err != nil {
		return summary{}, err
	}
	defer q.Close() // for the early returns; closing again after the Close below is harmless
	if err := q.RequireEmpty("messages"); err != nil {
		return summary{}, err
	}
	fmt.Fprintf(out, "queue: %d messages into %d partitions of %q, consumed by %d workers\n", cfg.messages, cfg.partitions, topic, cfg.workers)
	fmt.Fprintf(out, "state: %s (%s)\n", dir, filequeue.StateNote(cfg.dir))
	ackedAhead := cfg.ackedAhead
	if ackedAhead == 0 {
		ackedAhead = router.DefaultMaxAckedAhead
	}
	fmt.Fprintf(out, "visibility timeout %v, acked-ahead cap %d per partition\n\n", cfg.visibility, ackedAhead)

	st := newStats(cfg.messages)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, cfg.workers+1)
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		if err := produce(runCtx, q.Store, cfg.messages, cfg.partitions, cfg.rate, st); err != nil && runCtx.Err() == nil {
			errc <- err
		}
	})
	for i := range cfg.workers {
		w := &worker{node: q.Node, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i))), visibility: cfg.visibility, stats: st}
		wg.Go(func() {
			if err := w.run(runCtx); err != nil {
				errc <- err
			}
		})
	}
	if cfg.progress > 0 {
		wg.Go(func() { st.progress(runCtx.Done(), cfg.progress, start, out) })
	}

	var runErr error
	select {
	case <-st.done: // every message acked
	case runErr = <-errc:
	case <-ctx.Done():
		runErr = fmt.Errorf("interrupted: %w", ctx.Err())
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	// Close persists every ack: run again over a kept -dir and nothing is delivered again.
	if err := q.Close(); err != nil && runErr == nil {
		runErr = err
	}
	sum := st.summary(cfg, elapsed)
	sum.print(out)
	return sum, runErr
}

// produce appends n messages, round-robin over the partitions, at rate messages per second
// (in bursts every 10 ms), or as fast as it can when rate is 0.
func produce(ctx context.Context, store *filelog.Store, n, partitions, rate int, st *stats) error {
	var tick <-chan time.Time
	burst := n
	if rate > 0 {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		tick, burst = t.C, max(1, rate/100)
	}
	var key, value []byte
	for i := 0; i < n; {
		if tick != nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick:
			}
		}
		for end := min(i+burst, n); i < end; i++ {
			key = fmt.Appendf(key[:0], "order-%d", i)
			value = fmt.Appendf(value[:0], `{"order":%d,"item":"sku-%d","quantity":%d}`, i, i%97, 1+i%5)
			// The store stamps the record with the time, and its OnAppend wakes a consumer.
			if _, err := store.Append(topic, int32(i%partitions), key, value); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			st.produced.Add(1)
		}
	}
	return nil
}
