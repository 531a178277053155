package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"narad.dev/consume/examples/internal/delivery"
	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/examples/internal/queueclient"
)

// What a client does (as in examples/cluster). Each consume asks for one record, or for a
// batch of up to batchMax one time in four, and long-polls for up to consumeWait. A
// record's first delivery is mostly acked; nackPerMille of them are nacked (visible again
// at once) and abandonPerMille abandoned: never settled, as if the client had died holding
// it, so that it is delivered again once its lease lapses. A record delivered again is
// acked. Acks go through the node the record was consumed through, which forwards those of
// another node's partitions to their owner. An ack refused unapplied (503: its partition is
// between owners, or its owner is down) is tried again a few times, as a client would.
const (
	batchMax        = 8
	consumeWait     = time.Second
	nackPerMille    = 40
	abandonPerMille = 20
	retryPause      = 50 * time.Millisecond // after a failed consume or produce
	ackRetries      = 8
	ackRetryPause   = 100 * time.Millisecond
)

// A consumer is one client goroutine consuming through one node.
type consumer struct {
	via  string // the node it consumes through
	base string // http://addr of that node
	api  *queueclient.Client
	led  *ledger
	rng  *rand.Rand
}

// run consumes until consumeCtx ends; settles go on ctx, so that a settle already sent
// when the run is told to stop gets its answer. A consumer on a node that died stops.
func (c *consumer) run(consumeCtx, ctx context.Context, dead func() bool) error {
	for consumeCtx.Err() == nil {
		batch := 1
		if c.rng.IntN(4) == 0 {
			batch = batchMax
		}
		start := time.Now()
		msgs, err := c.api.Consume(consumeCtx, c.base, batch, consumeWait)
		end := time.Now()
		if consumeCtx.Err() != nil {
			return nil // the run is over: what it handed over goes back when its lease lapses
		}
		if err != nil {
			if ae, ok := errors.AsType[*queueclient.Error](err); ok && ae.Status < 500 {
				return fmt.Errorf("consume through %s: %w", c.via, err)
			}
			if dead() {
				return nil
			}
			launch.Pause(consumeCtx, retryPause)
			continue
		}
		for i := range msgs {
			m := &msgs[i]
			pos := delivery.Position{Partition: m.Partition, Offset: m.Offset}
			n, again := c.led.delivered(m, c.via, start, end)
			if !again {
				switch r := c.rng.IntN(1000); {
				case r < abandonPerMille:
					c.led.settle(pos, n, delivery.Abandoned, end, end, false)
					continue
				case r < abandonPerMille+nackPerMille:
					// Noted first: the record may be delivered again before the nack's
					// answer comes back. A nack that fails leaves the lease to lapse.
					now := time.Now()
					c.led.settle(pos, n, delivery.Nacked, now, now, false)
					c.api.Nack(ctx, c.base, m.Receipt)
					continue
				}
			}
			if err := c.ack(ctx, m.Receipt, pos, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// ack acks delivery n of one record, trying again while the answer is a 503 (refused
// unapplied: only the last attempt can have been applied, after it was sent).
func (c *consumer) ack(ctx context.Context, handle string, pos delivery.Position, n int) error {
	for attempt := 0; ; attempt++ {
		sent := time.Now()
		o, fatal := delivery.OutcomeOf(c.api.Ack(ctx, c.base, handle))
		if fatal != nil {
			return fmt.Errorf("through %s: %w", c.via, fatal)
		}
		if o != delivery.AckRefused || attempt == ackRetries || ctx.Err() != nil {
			c.led.settle(pos, n, o, sent, time.Now(), attempt > 0)
			return nil
		}
		launch.Pause(ctx, ackRetryPause)
	}
}

// A producer appends records to one partition through its owner (as the parent's view of
// etcd names it), at its share of the pace, until the run has its records. A node that
// does not own the partition (any more, or whose grant lapsed) answers 409, a dead one does
// not answer: the producer looks the owner up again and retries.
type producer struct {
	partition int32
	share     float64 // of the records: 1 / partitions
	view      *view
	api       *queueclient.Client
	led       *ledger
	pace      func(time.Time) float64 // records the run may have produced by then, over every partition
	slots     *atomic.Int64           // records the run still wants, shared by the producers
	seq       *atomic.Int64           // numbers the records' values
}

const produceEvery = 20 * time.Millisecond

func (p *producer) run(ctx context.Context) {
	sent := 0
	tick := time.NewTicker(produceEvery)
	defer tick.Stop()
	for {
		due := int(p.pace(time.Now())*p.share) - sent
		for ; due > 0; due-- {
			if p.slots.Add(-1) < 0 {
				p.slots.Add(1)
				return // the run has every record it wants
			}
			s := p.view.snap()
			addr := s.known[s.owner(p.partition)]
			value := fmt.Sprintf(`{"order":%d}`, p.seq.Add(1))
			offset, err := p.api.Produce(ctx, "http://"+addr, p.partition, value)
			if err != nil {
				// Not the owner (409), the owner down (refused: nothing was appended), or
				// the answer never came (the record may have landed: the ledger meets it
				// when it is delivered). Another attempt takes the slot.
				p.slots.Add(1)
				if ctx.Err() != nil {
					return
				}
				launch.Pause(ctx, retryPause)
				break
			}
			sent++
			p.led.producedAt(delivery.Position{Partition: p.partition, Offset: offset}, value, time.Now())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
