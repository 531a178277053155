package traffic

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/examples/internal/queueclient"
)

// A Play is one run's clients and what ends it: consumers on every node, a producer per
// partition, and a script beside them, until every record is acked and every partition
// drained.
type Play struct {
	API     *queueclient.Client
	Ledger  Ledger
	Records int    // produces to make
	Seed    uint64 // of the consumers' choices

	// The consumers: PerNode on each of Nodes, as Consumer says (Gone is asked of the node
	// each consumes through).
	Nodes      []launch.Node
	PerNode    int
	BatchAcks  bool
	AckRetries int
	Gone       func(node string) bool

	// The producers: one per partition, each to Owner(p) at 1/len(Partitions) of Pace.
	Partitions        []int32
	Owner             func(p int32) string
	Pace              func(time.Time) float64
	ProduceRetryPause time.Duration

	// Script runs beside the clients (a kill and a restart, the phases), and ends the run
	// with its error; nil: none.
	Script func(ctx context.Context) error
	// Progress calls ProgressLine every Progress; 0: never.
	Progress     time.Duration
	ProgressLine func()
	// Timeout bounds the run.
	Timeout time.Duration
	// Check runs every 100 ms, and ends the run with its error (a node that exited).
	Check func() error
	// Done is asked every 100 ms once the producers have every record and the script has
	// returned: whether the run is over (every record acked, every partition drained).
	Done func(ctx context.Context) bool
}

// Run plays the clients until Done, an error or the timeout, and stops them: the consumers
// first, their last settles answered, then the rest.
func (p *Play) Run(ctx context.Context) error {
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	consumeCtx, stopConsumers := context.WithCancel(runCtx)
	defer stopConsumers()
	errc := make(chan error, 1)
	fail := func(err error) { // the first failure ends the run
		select {
		case errc <- err:
		default:
		}
	}
	var consumers, others sync.WaitGroup
	defer others.Wait()
	defer cancelRun()
	defer consumers.Wait() // the consumers stop first, their last settles answered
	defer stopConsumers()

	for i, n := range p.Nodes {
		for j := range p.PerNode {
			cons := &Consumer{Via: n.ID, Base: n.URL(), API: p.API, Ledger: p.Ledger,
				Rand: rand.New(rand.NewPCG(p.Seed, uint64(i*1000+j))), BatchAcks: p.BatchAcks, AckRetries: p.AckRetries}
			if p.Gone != nil {
				cons.Gone = func() bool { return p.Gone(n.ID) }
			}
			consumers.Go(func() {
				if err := cons.Run(consumeCtx, runCtx); err != nil {
					fail(err)
				}
			})
		}
	}
	var slots, seq atomic.Int64
	slots.Store(int64(p.Records))
	var producers sync.WaitGroup
	for _, part := range p.Partitions {
		prod := &Producer{Partition: part, API: p.API, Ledger: p.Ledger, Owner: func() string { return p.Owner(part) },
			Pace: p.Pace, Share: 1 / float64(len(p.Partitions)), RetryPause: p.ProduceRetryPause, Slots: &slots, Seq: &seq}
		producers.Go(func() { prod.Run(runCtx) })
	}
	produced := make(chan struct{})
	others.Go(func() { producers.Wait(); close(produced) })
	scripted := make(chan struct{})
	others.Go(func() {
		defer close(scripted)
		if p.Script == nil {
			return
		}
		if err := p.Script(runCtx); err != nil && runCtx.Err() == nil {
			fail(err)
		}
	})
	if p.Progress > 0 {
		others.Go(func() { p.progress(runCtx) })
	}

	check := time.NewTicker(100 * time.Millisecond)
	defer check.Stop()
	deadline := time.NewTimer(p.Timeout)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case err := <-errc:
			return err
		case <-deadline.C:
			return fmt.Errorf("not done after %v", p.Timeout)
		case <-check.C:
		}
		if err := p.Check(); err != nil {
			return err
		}
		if !closed(produced) || !closed(scripted) {
			continue
		}
		if slots.Load() > 0 {
			return errors.New("the producers stopped short")
		}
		// Every record acked as far as the clients know; the owners say whether every
		// offset below their high watermark is settled (a record whose produce got no
		// answer but landed, an ack whose answer was lost).
		if p.Done(runCtx) {
			return nil
		}
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// progress calls ProgressLine every Progress until ctx ends.
func (p *Play) progress(ctx context.Context) {
	t := time.NewTicker(p.Progress)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.ProgressLine()
	}
}
