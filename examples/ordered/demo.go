package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"narad.dev/consume/examples/internal/filequeue"
)

// runDemo produces cfg.messages operations while cfg.workers apply them, until every one is
// acked or quarantined, and reports what the ledger saw.
func runDemo(ctx context.Context, cfg config, out io.Writer) (summary, error) {
	dir, cleanup, err := filequeue.StateDir(cfg.dir, "ordered-")
	if err != nil {
		return summary{}, err
	}
	defer cleanup()
	p := planOperations(cfg.messages, cfg.accounts, cfg.seed)
	l := newLedger(cfg.accounts, cfg.messages, maxDeliveries)
	q, err := openQueue(dir, cfg, func(_ string, partition int32, offset int64, attempts uint32) {
		l.quarantine(partition, offset, attempts)
	})
	if err != nil {
		return summary{}, err
	}
	defer q.Close() // for the early returns; closing again after the Close below is harmless
	if err := q.RequireEmpty("records"); err != nil {
		return summary{}, err
	}
	kind := "an ordered topic"
	if cfg.unordered {
		kind = "a topic NOT ordered (planted: the checks must fail)"
	}
	poisoned := p.ops[p.poisoned]
	fmt.Fprintf(out, "ordered: %d operations on %d accounts into %d partitions of %q, %s, applied by %d workers\n",
		cfg.messages, cfg.accounts, cfg.partitions, topic, kind, cfg.workers)
	fmt.Fprintf(out, "state: %s (%s)\n", dir, filequeue.StateNote(cfg.dir))
	fmt.Fprintf(out, "visibility timeout %v; %v always fails (nacked until MaxDeliveries %d quarantines it)\n\n",
		cfg.visibility, opRef{poisoned.account, poisoned.seq}, maxDeliveries)

	st := &stats{}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, cfg.workers+1)
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		if err := produce(runCtx, q.Store, p, cfg.partitions, cfg.rate, st); err != nil && runCtx.Err() == nil {
			errc <- err
		}
	})
	for i := range cfg.workers {
		w := &worker{
			id: i, node: q.Node, ledger: l, stats: st, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i))),
			crashChance: cfg.crashChance, nackChance: cfg.nackChance,
		}
		wg.Go(func() {
			if err := w.run(runCtx); err != nil {
				errc <- fmt.Errorf("worker %d: %w", i, err)
			}
		})
	}
	if cfg.progress > 0 {
		wg.Go(func() { progress(runCtx.Done(), cfg.progress, start, out, st, l, q.Node, cfg.partitions) })
	}

	runErr := wait(ctx, l, errc, cfg.visibility)
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	shards := q.Node.Stats().Shards
	// Close persists every ack: run again over a kept -dir and nothing is delivered again.
	if err := q.Close(); err != nil && runErr == nil {
		runErr = err
	}
	sum := summarize(cfg, p, l, st, elapsed)
	sum.deferred, sum.deferredStalls = shards.Deferred, shards.DeferredStalls
	sum.print(out)
	if f := sum.failures(); len(f) > 0 && runErr == nil {
		runErr = errors.New(strings.Join(f, "; "))
	}
	return sum, runErr
}

// wait returns once every operation is settled, a worker fails, the demo is interrupted, or
// nothing has settled for long enough that what is missing must be lost.
func wait(ctx context.Context, l *ledger, errc <-chan error, visibility time.Duration) error {
	// Every operation settles within a few visibility timeouts and nack delays of the last
	// change; ten of them, and never less than 5 s, is well past that.
	stallLimit := max(5*time.Second, 10*visibility)
	check := time.NewTicker(stallLimit / 10)
	defer check.Stop()
	for {
		select {
		case <-l.done:
			return nil
		case err := <-errc:
			return err
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case <-check.C:
			if since := l.sinceChange(); since > stallLimit {
				return fmt.Errorf("nothing settled for %v: operations are missing", since.Round(time.Millisecond))
			}
		}
	}
}

// summarize puts together what the ledger saw and what the plan says it should have.
func summarize(cfg config, p plan, l *ledger, st *stats, elapsed time.Duration) summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	poisoned := p.ops[p.poisoned]
	sum := summary{
		operations: cfg.messages, accounts: cfg.accounts, partitions: cfg.partitions, workers: cfg.workers,
		unordered: cfg.unordered, elapsed: elapsed, visibility: cfg.visibility,

		produced: st.produced.Load(), delivered: st.deliveries.Load(),
		afterExpiry: st.afterExpiry.Load(), afterNack: st.afterNack.Load(),
		crashes: st.crashes.Load(), crashedOps: st.crashedOps.Load(), nacked: st.nacked.Load(),
		released: st.released.Load(), poisonFailures: st.poisonFailures.Load(), ackLapsed: st.ackLapsed.Load(),

		applied: l.applied, poisoned: opRef{poisoned.account, poisoned.seq},
		quarantined: append([]quarantine(nil), l.quarantined...),

		orderViolations: l.orderViolations, overlaps: l.overlaps, ackedDelivered: l.ackedDelivered,
		overdrafts: l.overdrafts, lateDeliveries: l.lateDeliveries,
		staleRefused: l.staleRefused, reapplied: l.reapplied,
		examples: append([]string(nil), l.examples...),
	}
	quarantined := map[opRef]bool{}
	for _, q := range l.quarantined {
		quarantined[q.op] = true
	}
	for _, op := range p.ops {
		a := &l.accounts[op.account]
		ref := opRef{op.account, op.seq}
		if (op.seq >= len(a.ops) || !a.ops[op.seq].applied) && !quarantined[ref] {
			sum.lost++
		}
	}
	for i := range l.accounts {
		if l.accounts[i].balance != p.balances[i] {
			sum.wrongBalances++
		}
	}
	return sum
}
