package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/examples/internal/filequeue"
)

// runDemo produces cfg.messages operations while cfg.workers apply them, until every one is
// acked or quarantined, and reports what the ledger saw. With cfg.quarantineKeys it then
// fixes the poison and requeues the quarantine, until every operation is acked.
func runDemo(ctx context.Context, cfg config, out io.Writer) (summary, error) {
	dir, cleanup, err := filequeue.StateDir(cfg.dir, "ordered-")
	if err != nil {
		return summary{}, err
	}
	defer cleanup()
	out = &lockedWriter{w: out} // the progress lines and the requeue's come from two goroutines
	p := planOperations(cfg.messages, cfg.accounts, cfg.partitions, cfg.seed)
	l := newLedger(p, maxDeliveries, cfg.quarantineKeys)
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
	exit := "its account goes on"
	switch {
	case cfg.unordered:
		kind = "a topic NOT ordered (planted: the checks must fail)"
	case cfg.keysGoOn:
		kind, exit = "an ordered topic NOT quarantining keys (planted: the checks must fail)", "its account should go with it"
	case cfg.quarantineKeys:
		kind, exit = "an ordered topic quarantining keys", "its account goes with it, until the poison is fixed and requeued"
	}
	poisoned := p.ops[p.poisoned]
	fmt.Fprintf(out, "ordered: %d operations on %d accounts into %d partitions of %q, %s, applied by %d workers\n",
		cfg.messages, cfg.accounts, cfg.partitions, topic, kind, cfg.workers)
	fmt.Fprintf(out, "state: %s (%s)\n", dir, filequeue.StateNote(cfg.dir))
	fmt.Fprintf(out, "visibility timeout %v; %v always fails (nacked until MaxDeliveries %d quarantines it; %s)\n\n",
		cfg.visibility, opRef{poisoned.account, poisoned.seq}, maxDeliveries, exit)

	st := &stats{}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, cfg.workers+1)
	var poisonFixed atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		if err := produce(runCtx, q.Store, p, cfg.rate, st); err != nil && runCtx.Err() == nil {
			errc <- err
		}
	})
	for i := range cfg.workers {
		w := &worker{
			id: i, node: q.Node, ledger: l, stats: st, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i))),
			crashChance: cfg.crashChance, nackChance: cfg.nackChance, poisonFixed: &poisonFixed,
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
	if cfg.quarantineKeys && runErr == nil {
		runErr = requeue(ctx, q, l, &poisonFixed, errc, cfg.visibility, out)
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	shards := q.Node.Stats().Shards
	// Close persists every ack: run again over a kept -dir and nothing is delivered again.
	if err := q.Close(); err != nil && runErr == nil {
		runErr = err
	}
	sum := summarize(cfg, p, l, st, elapsed)
	sum.deferred, sum.deferredStalls, sum.spilled = shards.Deferred, shards.DeferredStalls, shards.Spilled
	sum.print(out)
	if f := sum.failures(); len(f) > 0 && runErr == nil {
		runErr = errors.New(strings.Join(f, "; "))
	}
	return sum, runErr
}

// requeue fixes the poison, requeues every partition holding quarantined records (the
// poisoned account's, under QuarantineKeys), and waits for them to be applied.
func requeue(ctx context.Context, q *filequeue.Queue, l *ledger, poisonFixed *atomic.Bool, errc <-chan error, visibility time.Duration, out io.Writer) error {
	l.mu.Lock()
	held := len(l.quarantined)
	var partitions []int32
	for _, r := range l.quarantined {
		if !slices.Contains(partitions, r.partition) {
			partitions = append(partitions, r.partition)
		}
	}
	l.mu.Unlock()
	poisonFixed.Store(true) // before the requeue: the operation must not fail again
	requeued := 0
	for _, part := range partitions {
		n, err := q.Node.RequeueAll(topic, part)
		if err != nil {
			return fmt.Errorf("requeue partition %d: %w", part, err)
		}
		requeued += n
	}
	l.requeue(requeued)
	fmt.Fprintf(out, "\neverything else settled with %d records quarantined: the poison fixed, RequeueAll on partition(s) %v requeued %d\n\n",
		held, partitions, requeued)
	return wait(ctx, l, errc, visibility)
}

// wait returns once every operation is settled, a worker fails, the demo is interrupted, or
// nothing has settled for long enough that what is missing must be lost.
func wait(ctx context.Context, l *ledger, errc <-chan error, visibility time.Duration) error {
	// Every operation settles within a few visibility timeouts and nack delays of the last
	// change; ten of them, and never less than 5 s, is well past that.
	stallLimit := max(5*time.Second, 10*visibility)
	check := time.NewTicker(stallLimit / 10)
	defer check.Stop()
	done := l.settled()
	for {
		select {
		case <-done:
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
		unordered: cfg.unordered, quarantineKeys: cfg.quarantineKeys, keysGoOn: cfg.keysGoOn,
		elapsed: elapsed, visibility: cfg.visibility,

		produced: st.produced.Load(), delivered: st.deliveries.Load(),
		afterExpiry: st.afterExpiry.Load(), afterNack: st.afterNack.Load(),
		crashes: st.crashes.Load(), crashedOps: st.crashedOps.Load(), nacked: st.nacked.Load(),
		released: st.released.Load(), poisonFailures: st.poisonFailures.Load(), ackLapsed: st.ackLapsed.Load(),

		applied: l.applied, poisoned: opRef{poisoned.account, poisoned.seq},
		quarantined: append([]quarantine(nil), l.quarantined...), requeued: l.requeued,

		orderViolations: l.orderViolations, overlaps: l.overlaps, ackedDelivered: l.ackedDelivered,
		overdrafts: l.overdrafts, lateDeliveries: l.lateDeliveries,
		staleRefused: l.staleRefused, reapplied: l.reapplied,
		examples: append([]string(nil), l.examples...),
	}
	// What should be quarantined: the poisoned operation, and under QuarantineKeys its
	// account's later ones.
	sum.keyOps = []opRef{sum.poisoned}
	if cfg.quarantineKeys {
		for _, op := range p.ops {
			if op.account == poisoned.account && op.seq > poisoned.seq {
				sum.keyOps = append(sum.keyOps, opRef{op.account, op.seq})
			}
		}
	}
	isApplied := func(ref opRef) bool {
		a := &l.accounts[ref.account]
		return ref.seq < len(a.ops) && a.ops[ref.seq].applied
	}
	quarantined := map[opRef]bool{}
	for _, q := range l.quarantined {
		if !quarantined[q.op] && isApplied(q.op) {
			sum.appliedAfterRequeue++
		}
		quarantined[q.op] = true
	}
	for _, op := range p.ops {
		ref := opRef{op.account, op.seq}
		// A quarantined operation is settled, until it is requeued.
		if !isApplied(ref) && (!quarantined[ref] || l.requeued > 0) {
			sum.lost++
		}
	}
	for i := range l.accounts {
		want := p.balances[i]
		if cfg.quarantineKeys && i == poisoned.account {
			want += poisoned.amount // fixed and requeued, it is applied
		}
		if l.accounts[i].balance != want {
			sum.wrongBalances++
		}
	}
	return sum
}

// A lockedWriter serializes its writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
