package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"narad.dev/consume/router"
)

// What a worker does with a message. Most are acked. Some need more time: the worker
// extends the lease, then acks. Some it cannot handle now: it nacks them, and they come back
// after nackDelay. A few it drops, as if it crashed holding them: their lease lapses after
// the visibility timeout and they are delivered again.
type action int

const (
	doAck action = iota
	doExtend
	doNack
	doDrop
)

const (
	nackDelay   = 200 * time.Millisecond
	consumeMax  = 16          // records a consume takes at most
	consumeWait = time.Second // how long a consume long-polls when nothing is there
)

// choose draws an action for a message's first delivery; a message delivered again is
// acked, so every message is eventually settled.
func choose(rng *rand.Rand, m *router.Message) action {
	if m.Attempt > 1 {
		return doAck
	}
	switch n := rng.IntN(1000); {
	case n < 30: // 3%
		return doNack
	case n < 80: // 5%
		return doExtend
	case n < 85: // 0.5%
		return doDrop
	}
	return doAck
}

// A worker consumes the topic until its context ends.
type worker struct {
	node       *router.Node
	rng        *rand.Rand
	visibility time.Duration
	stats      *stats
	journal    *journal // the crash demo's record of acks; nil in the plain demo

	// Kept by this worker alone, handed to stats when it stops.
	ackLatency, consumeLatency []time.Duration
}

func (w *worker) run(ctx context.Context) error {
	defer func() { w.stats.addLatencies(w.ackLatency, w.consumeLatency) }()
	var handles []router.Handle
	var acking []*router.Message
	var msgs []router.Message // reused batch after batch: no allocation for the messages
	for {
		start := time.Now()
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
		w.consumeLatency = append(w.consumeLatency, time.Since(start))

		handles, acking = handles[:0], acking[:0]
		for i := range msgs {
			m := &msgs[i]
			w.stats.delivered(m)
			handle := m.Receipt
			switch choose(w.rng, m) {
			case doDrop:
				w.stats.dropped.Add(1)
				continue
			case doNack:
				if err := w.node.Nack(ctx, topic, handle, nackDelay); err != nil {
					if !errors.Is(err, router.ErrGone) {
						return fmt.Errorf("nack: %w", err)
					}
					w.stats.gone.Add(1) // the lease lapsed first: delivered again anyway
					continue
				}
				w.stats.nacked.Add(1)
				continue
			case doExtend:
				if _, err := w.node.Extend(ctx, topic, handle, w.visibility); err != nil {
					if !errors.Is(err, router.ErrGone) {
						return fmt.Errorf("extend: %w", err)
					}
					w.stats.gone.Add(1) // too late: the lease lapsed, and an ack would fail
					continue
				}
				w.stats.extended.Add(1)
			}
			handles = append(handles, handle)
			acking = append(acking, m)
		}
		if len(handles) == 0 {
			continue
		}
		if err := w.journal.intend(acking); err != nil {
			return err
		}
		errs := w.node.AckBatch(ctx, topic, handles)
		now := time.Now()
		for i, err := range errs {
			switch {
			case err == nil:
				w.ackLatency = append(w.ackLatency, now.Sub(acking[i].Timestamp))
				w.stats.acked(acking[i])
			case errors.Is(err, router.ErrGone):
				// The lease lapsed before the ack (a slow worker): the message is
				// delivered again, to this worker or another.
				w.stats.gone.Add(1)
			default:
				return fmt.Errorf("ack: %w", err)
			}
		}
		if err := w.journal.settled(acking, errs, now); err != nil {
			return err
		}
	}
}
