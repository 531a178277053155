package traffic

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"narad.dev/consume/examples/internal/delivery"
	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/examples/internal/queueclient"
)

// What a client does (see the package documentation).
const (
	BatchMax        = 8
	ConsumeWait     = time.Second
	NackPerMille    = 40
	AbandonPerMille = 20
	RetryPause      = 50 * time.Millisecond // after a failed consume
	AckRetryPause   = 100 * time.Millisecond
	ProduceEvery    = 20 * time.Millisecond // a producer's bursts
)

// A Ledger is what a run keeps of its records, as its clients tell it. It must be safe for
// concurrent use.
type Ledger interface {
	// Produced records a produce the owner answered at at.
	Produced(pos delivery.Position, value string, at time.Time)
	// ProduceFailed records a produce that got no offset: another attempt takes its place.
	ProduceFailed()
	// Delivered records the delivery of m to a client that consumed through node via, in a
	// consume that began at start, returned at end, and made calls calls to other nodes (the
	// answer's queueclient.PeerCallsHeader; 0 without it). It returns the delivery's number,
	// for Settled, and whether the record was delivered before.
	Delivered(via string, m *queueclient.Message, calls int, start, end time.Time) (n int, again bool)
	// Settled records how delivery n of the record at pos ended: by an answer at at to a
	// settle sent at sent; retried says a 503 came first.
	Settled(pos delivery.Position, n int, o delivery.Outcome, sent, at time.Time, retried bool)
	// ConsumeFailed records a consume that failed: the node was down, restarting, or said to
	// try again.
	ConsumeFailed()
}

// A Consumer is one client goroutine consuming through one node.
type Consumer struct {
	Via    string // the node it consumes through
	Base   string // http://addr of that node
	API    *queueclient.Client
	Ledger Ledger
	Rand   *rand.Rand
	// BatchAcks acks the records of one consume in one request (ack-batch) when there are
	// several, after the consume's nacks; without it each is acked in turn.
	BatchAcks bool
	// AckRetries is how many times an ack refused unapplied (503: its partition is between
	// owners, or its owner is down) is sent again, AckRetryPause apart.
	AckRetries int
	// Gone reports whether the node died for good: its consumer stops then. Nil: never.
	Gone func() bool
}

// Run consumes until consumeCtx ends; settles go on ctx, so that a settle already sent when
// the run is told to stop gets its answer.
func (c *Consumer) Run(consumeCtx, ctx context.Context) error {
	var acks []pending
	for consumeCtx.Err() == nil {
		batch := 1
		if c.Rand.IntN(4) == 0 {
			batch = BatchMax
		}
		start := time.Now()
		msgs, header, err := c.API.ConsumeHeader(consumeCtx, c.Base, batch, ConsumeWait)
		calls, _ := strconv.Atoi(header.Get(queueclient.PeerCallsHeader))
		end := time.Now()
		if consumeCtx.Err() != nil {
			// The run is over (every record settled), or was interrupted: a record handed
			// over as the consume ended goes back when its lease lapses, or at once if the
			// node saw the client leave.
			return nil
		}
		if err != nil {
			if ae, ok := errors.AsType[*queueclient.Error](err); ok && ae.Status < 500 {
				return fmt.Errorf("consume through %s: %w", c.Via, err)
			}
			if c.Gone != nil && c.Gone() {
				return nil
			}
			c.Ledger.ConsumeFailed()
			launch.Pause(consumeCtx, RetryPause)
			continue
		}
		acks = acks[:0]
		for i := range msgs {
			m := &msgs[i]
			pos := delivery.Position{Partition: m.Partition, Offset: m.Offset}
			n, again := c.Ledger.Delivered(c.Via, m, calls, start, end)
			if !again {
				switch r := c.Rand.IntN(1000); {
				case r < AbandonPerMille:
					c.Ledger.Settled(pos, n, delivery.Abandoned, end, end, false)
					continue
				case r < AbandonPerMille+NackPerMille:
					// Noted first: the record may be delivered again before the nack's
					// answer comes back. A nack that fails leaves the lease to lapse.
					now := time.Now()
					c.Ledger.Settled(pos, n, delivery.Nacked, now, now, false)
					c.API.Nack(ctx, c.Base, m.Receipt)
					continue
				}
			}
			p := pending{handle: m.Receipt, pos: pos, n: n}
			if c.BatchAcks {
				acks = append(acks, p)
			} else if err := c.ack(ctx, p); err != nil {
				return err
			}
		}
		if err := c.ackBatch(ctx, acks); err != nil {
			return err
		}
	}
	return nil
}

// A pending ack: the record's receipt, where it is, and which of its deliveries it settles.
type pending struct {
	handle string
	pos    delivery.Position
	n      int
}

// ack acks one delivery, trying again while the answer is a 503 (refused unapplied: only the
// last attempt can have been applied, after it was sent).
func (c *Consumer) ack(ctx context.Context, p pending) error {
	for attempt := 0; ; attempt++ {
		sent := time.Now()
		o, fatal := delivery.OutcomeOf(c.API.Ack(ctx, c.Base, p.handle))
		if fatal != nil {
			return fmt.Errorf("through %s: %w", c.Via, fatal)
		}
		if o != delivery.AckRefused || attempt >= c.AckRetries || ctx.Err() != nil {
			c.Ledger.Settled(p.pos, p.n, o, sent, time.Now(), attempt > 0)
			return nil
		}
		launch.Pause(ctx, AckRetryPause)
	}
}

// ackBatch acks the deliveries: one alone, several in one request.
func (c *Consumer) ackBatch(ctx context.Context, acks []pending) error {
	switch len(acks) {
	case 0:
		return nil
	case 1:
		return c.ack(ctx, acks[0])
	}
	handles := make([]string, len(acks))
	for i, p := range acks {
		handles[i] = p.handle
	}
	sent := time.Now()
	errs, err := c.API.AckBatch(ctx, c.Base, handles)
	at := time.Now()
	if err != nil {
		// The request got no answer (or one the consume API would not give): every ack in
		// it may or may not have been applied.
		if ae, ok := errors.AsType[*queueclient.Error](err); ok && ae.Status < 500 {
			return fmt.Errorf("ack-batch through %s: %w", c.Via, err)
		}
		for _, p := range acks {
			c.Ledger.Settled(p.pos, p.n, delivery.AckUnsure, sent, at, false)
		}
		return nil
	}
	for i, p := range acks {
		o, fatal := delivery.OutcomeOf(errs[i])
		if fatal != nil {
			return fmt.Errorf("through %s: %w", c.Via, fatal)
		}
		c.Ledger.Settled(p.pos, p.n, o, sent, at, false)
	}
	return nil
}

// A Producer appends records to one partition through its owner, at its share of the pace,
// until the run has its records. Production comes in bursts every ProduceEvery, which is what
// leaves consumers parked on other nodes something to be told about.
type Producer struct {
	Partition int32
	API       *queueclient.Client
	Ledger    Ledger
	// Owner returns http://addr of the partition's owner, asked before each produce.
	Owner func() string
	// Pace returns how many records the run may have produced by then, over every partition
	// (+Inf: as fast as the owners take them); Share is this partition's part of them.
	Pace  func(time.Time) float64
	Share float64
	// RetryPause is how long to wait after a failed produce; 0: until the next burst.
	RetryPause time.Duration
	Slots      *atomic.Int64 // records the run still wants, shared by the producers
	Seq        *atomic.Int64 // numbers the records' values
}

// Run produces until the run has its records or ctx ends.
func (p *Producer) Run(ctx context.Context) {
	sent := 0
	tick := time.NewTicker(ProduceEvery)
	defer tick.Stop()
	for {
		due := int(min(p.Pace(time.Now())*p.Share, 1<<30)) - sent
		for ; due > 0; due-- {
			if p.Slots.Add(-1) < 0 {
				p.Slots.Add(1)
				return // the run has every record it wants, or will once the others' calls return
			}
			value := fmt.Sprintf(`{"order":%d}`, p.Seq.Add(1))
			offset, err := p.API.Produce(ctx, p.Owner(), p.Partition, value)
			if err != nil {
				// Not the owner (409), the owner down (refused: nothing was appended), or
				// the answer never came (the record may have landed all the same: the
				// ledger meets it when it is delivered). Another attempt takes the slot.
				p.Slots.Add(1)
				if ctx.Err() != nil {
					return
				}
				p.Ledger.ProduceFailed()
				launch.Pause(ctx, p.RetryPause)
				break
			}
			sent++
			p.Ledger.Produced(delivery.Position{Partition: p.Partition, Offset: offset}, value, time.Now())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
