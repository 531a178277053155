package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"narad.dev/consume/examples/internal/delivery"
	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/examples/internal/queueclient"
)

// What a client does. Each consume asks for one record, or for a batch of up to batchMax
// one time in four, and long-polls for up to consumeWait. A record's first delivery is
// mostly acked; nackPerMille of them are nacked (visible again at once) and
// abandonPerMille abandoned: never settled, as if the client had died holding it, so that
// it is delivered again once its lease lapses. A record delivered again is acked. Acks go
// through the node the record was consumed through, which forwards those of another
// node's partitions to their owner; a batch is acked in one request.
const (
	batchMax        = 8
	consumeWait     = time.Second
	nackPerMille    = 40
	abandonPerMille = 20
	retryPause      = 50 * time.Millisecond // after a failed consume
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
// when the run is told to stop gets its answer.
func (c *consumer) run(consumeCtx, ctx context.Context) error {
	var handles []string
	var acking []delivery.Position
	for consumeCtx.Err() == nil {
		batch := 1
		if c.rng.IntN(4) == 0 {
			batch = batchMax
		}
		start := time.Now()
		msgs, header, err := c.api.ConsumeHeader(consumeCtx, c.base, batch, consumeWait)
		calls, _ := strconv.Atoi(header.Get(peerCallsHeader)) // the calls to peers it took
		end := time.Now()
		if consumeCtx.Err() != nil {
			// The run is over (every record settled), or was interrupted: a record handed
			// over as the consume ended goes back when its lease lapses, or at once if the
			// node saw the client leave.
			return nil
		}
		if err != nil {
			if ae, ok := errors.AsType[*queueclient.Error](err); ok && ae.Status < 500 {
				return fmt.Errorf("consume through %s: %w", c.via, err)
			}
			// The node is down, or restarting, or said to try again.
			c.led.consumeFailures.Add(1)
			launch.Pause(consumeCtx, retryPause)
			continue
		}
		handles, acking = handles[:0], acking[:0]
		for i := range msgs {
			m := &msgs[i]
			pos := delivery.Position{Partition: m.Partition, Offset: m.Offset}
			again := c.led.delivered(c.via, m, calls, start, end)
			if !again {
				switch n := c.rng.IntN(1000); {
				case n < abandonPerMille:
					c.led.settle(pos, delivery.Abandoned, end)
					continue
				case n < abandonPerMille+nackPerMille:
					// Noted first: the record may be delivered again before the nack's
					// answer comes back. A nack that fails leaves the lease to lapse.
					c.led.settle(pos, delivery.Nacked, time.Now())
					if err := c.api.Nack(ctx, c.base, m.Receipt); err != nil {
						c.led.nackFailures.Add(1)
					}
					continue
				}
			}
			handles = append(handles, m.Receipt)
			acking = append(acking, pos)
		}
		if err := c.ack(ctx, handles, acking); err != nil {
			return err
		}
	}
	return nil
}

// ack acks the records: one alone, several in one batch request.
func (c *consumer) ack(ctx context.Context, handles []string, acking []delivery.Position) error {
	switch len(handles) {
	case 0:
		return nil
	case 1:
		err := c.api.Ack(ctx, c.base, handles[0])
		o, fatal := delivery.OutcomeOf(err)
		if fatal != nil {
			return fmt.Errorf("through %s: %w", c.via, fatal)
		}
		c.led.settle(acking[0], o, time.Now())
		return nil
	}
	errs, err := c.api.AckBatch(ctx, c.base, handles)
	at := time.Now()
	if err != nil {
		// The request got no answer (or one the consume API would not give): every ack
		// in it may or may not have been applied.
		if ae, ok := errors.AsType[*queueclient.Error](err); ok && ae.Status < 500 {
			return fmt.Errorf("ack-batch through %s: %w", c.via, err)
		}
		for _, pos := range acking {
			c.led.settle(pos, delivery.AckUnsure, at)
		}
		return nil
	}
	for i, pos := range acking {
		o, fatal := delivery.OutcomeOf(errs[i])
		if fatal != nil {
			return fmt.Errorf("through %s: %w", c.via, fatal)
		}
		c.led.settle(pos, o, at)
	}
	return nil
}

// A producer appends records to one partition through its owner, at its share of the
// rate, until the run has its records. Production comes in bursts every produceEvery,
// which is what leaves consumers parked on other nodes something to be told about.
type producer struct {
	partition int32
	base      string // http://addr of its owner
	api       *queueclient.Client
	led       *ledger
	rate      float64       // records per second; 0: as fast as it can
	slots     *atomic.Int64 // records the run still wants, shared by the producers
	seq       *atomic.Int64 // numbers the records' values
}

const produceEvery = 20 * time.Millisecond

func (p *producer) run(ctx context.Context) {
	start := time.Now()
	sent := 0
	tick := time.NewTicker(produceEvery)
	defer tick.Stop()
	for {
		due := 1 << 30
		if p.rate > 0 {
			due = int(time.Since(start).Seconds()*p.rate) - sent
		}
		for ; due > 0; due-- {
			if p.slots.Add(-1) < 0 {
				p.slots.Add(1)
				return // the run has every record it wants, or will once the others' calls return
			}
			value := fmt.Sprintf(`{"order":%d}`, p.seq.Add(1))
			offset, err := p.api.Produce(ctx, p.base, p.partition, value)
			if err != nil {
				// The owner is down (refused: nothing was appended), or the append's
				// answer never came (a record may have landed all the same: the
				// ledger meets it when it is delivered). Another attempt takes the slot.
				p.slots.Add(1)
				if ctx.Err() != nil {
					return
				}
				if !errors.Is(err, syscall.ECONNREFUSED) {
					p.led.produceUnsure.Add(1)
				}
				p.led.produceFailed.Add(1)
				break
			}
			sent++
			p.led.producedAt(delivery.Position{Partition: p.partition, Offset: offset}, value)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
