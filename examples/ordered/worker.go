package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"narad.dev/consume/router"
)

const (
	nackDelay   = 100 * time.Millisecond // a failed operation is visible again this much later
	consumeMax  = 16                     // records a consume takes at most
	consumeWait = time.Second            // how long a consume long-polls when nothing is there
)

// A delivery is a record of a batch and the operation it holds.
type delivery struct {
	msg *router.Message
	op  operation
}

func (d *delivery) ref() opRef { return opRef{d.op.account, d.op.seq} }

// A worker consumes the topic until its context ends, applying each operation to the ledger.
type worker struct {
	id          int
	node        *router.Node
	ledger      *ledger
	stats       *stats
	rng         *rand.Rand
	crashChance float64
	nackChance  float64
	// poisonFixed is set once the poisoned operation's currency gets a rate (the demo's fix,
	// before it requeues the quarantine): from then on it applies like any other.
	poisonFixed *atomic.Bool
}

func (w *worker) run(ctx context.Context) error {
	var msgs []router.Message // reused batch after batch
	var batch []delivery
	failed := map[int]bool{} // accounts with a failed operation in the batch at hand
	for {
		var err error
		msgs, err = w.node.ConsumeAppend(ctx, msgs[:0], topic, router.ConsumeOptions{Max: consumeMax, Wait: consumeWait})
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, router.ErrLogClosed):
			continue // transient: try again
		case err != nil:
			return fmt.Errorf("consume: %w", err)
		case len(msgs) == 0:
			continue // the long-poll ended with nothing: poll again
		}
		batch = batch[:0]
		for i := range msgs {
			op, err := decodeOperation(msgs[i].Key, msgs[i].Value)
			if err != nil {
				return err
			}
			batch = append(batch, delivery{msg: &msgs[i], op: op})
			w.stats.delivered(&msgs[i])
		}
		if err := w.ledger.receive(w.id, batch, time.Now()); err != nil {
			return err
		}
		if w.crashes(batch) {
			// The worker dies holding the batch, and a new one takes its place: nothing is
			// settled, and the leases lapse after the visibility timeout.
			for i := range batch {
				w.ledger.release(w.id, batch[i].op.account)
			}
			w.stats.crashes.Add(1)
			w.stats.crashedOps.Add(int64(len(batch)))
			continue
		}
		clear(failed)
		for i := range batch {
			if err := w.handle(ctx, batch, i, failed); err != nil {
				return err
			}
		}
	}
}

// crashes draws whether the worker crashes holding a batch. Only a batch of first deliveries
// may crash, as only a first delivery may fail for a moment, so that every operation settles
// within a few deliveries.
func (w *worker) crashes(batch []delivery) bool {
	for i := range batch {
		if batch[i].msg.Attempt > 1 {
			return false
		}
	}
	return w.rng.Float64() < w.crashChance
}

// handle applies and acks one operation of a batch, or nacks it if it fails. The records of
// an account come in order within a batch: once one fails, the account's later ones in the
// batch are given back unprocessed, to be delivered again after it.
func (w *worker) handle(ctx context.Context, batch []delivery, i int, failed map[int]bool) error {
	d := &batch[i]
	m, account := d.msg, d.op.account
	// The account's last record in the batch frees the account once settled: the worker's
	// hold ends first, or another worker could receive it while the ledger still saw this
	// one hold it.
	last := true
	for j := i + 1; j < len(batch) && last; j++ {
		last = batch[j].op.account != account
	}
	endHold := func() {
		if last {
			w.ledger.release(w.id, account)
		}
	}

	if failed[account] {
		endHold()
		w.stats.released.Add(1)
		return ignoreGone(w.node.Release(ctx, topic, m.Receipt))
	}
	poisoned := d.op.currency != currency && !w.poisonFixed.Load()
	if poisoned || (m.Attempt == 1 && w.rng.Float64() < w.nackChance) {
		failed[account] = true
		w.ledger.failed(d.ref(), m.Attempt)
		if poisoned {
			w.stats.poisonFailures.Add(1)
		} else {
			w.stats.nacked.Add(1)
		}
		endHold()
		return ignoreGone(w.node.Nack(ctx, topic, m.Receipt, nackDelay))
	}
	outcome, err := w.ledger.apply(d.op, m.Fence)
	if err != nil {
		return err
	}
	if outcome == stale {
		// This worker's lease lapsed and a later holder applied the operation: the account's
		// later records in the batch are stale too.
		failed[account] = true
		endHold()
		return nil
	}
	endHold()
	switch err := w.node.Ack(ctx, topic, m.Receipt); {
	case err == nil:
		w.ledger.confirm(d.ref())
	case errors.Is(err, router.ErrGone):
		// The lease lapsed before the ack (a stalled worker): the operation comes back, and
		// the account's later ones must wait for it.
		failed[account] = true
		w.stats.ackLapsed.Add(1)
	default:
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// ignoreGone drops ErrGone from a nack or a release: the lease lapsed first, and the record
// is delivered again anyway.
func ignoreGone(err error) error {
	if err == nil || errors.Is(err, router.ErrGone) {
		return nil
	}
	return err
}
