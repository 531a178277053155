// Command ordered shows an ordered topic (router.TopicConfig.Ordered): the operations of one
// account are applied in order, one worker holding an account at a time, accounts in
// parallel, through crashes, nacks and a poisoned operation.
//
// It opens the segmented file log of narad.dev/consume/examples/filelog with one topic,
// "accounts", and a router.Node over it. It produces 20,000 deposits and withdrawals on 200
// accounts: each record's key is its account, its partition a hash of the key (as a producer
// picks it), its value the operation's sequence number within the account and its amount.
// Meanwhile 8 workers long-poll for batches of up to 16 records and apply each operation to
// an in-memory ledger, then ack it. Now and then a worker crashes holding a batch (it drops
// it unacked: the leases lapse after the 1 s visibility timeout and the records come back
// before any later operation of their accounts), some operations fail for a moment (nacked,
// visible again 100 ms later), and one operation of one account always fails: it is nacked
// until TopicConfig.MaxDeliveries quarantines it, Config.OnQuarantine reports it, and its
// account goes on with its next operation, the one place where the order is knowingly
// broken.
//
// With -quarantine-keys the topic takes the other exit (TopicConfig.QuarantineKeys): the
// poisoned operation takes its account with it into the quarantine, its account's later
// operations following it there in order rather than being applied, while the other accounts
// go on. Once everything else is acked, the demo fixes the poison (the operation stops
// failing) and requeues the quarantine (Node.RequeueAll on the partitions holding it): the
// account's operations are then applied in order, and every balance comes out right.
//
// The ledger checks each operation as it applies it: it must be its account's next one (no
// gap, no reordering), except right after the quarantined one (with no exception under
// -quarantine-keys), and no two workers may hold one account at once. A progress line comes
// each second, and a summary at the end; the exit status is non-zero if a check failed or an
// operation was lost.
//
//	go run ./examples/ordered
//	go run ./examples/ordered -quarantine-keys
//	go run ./examples/ordered -h   # the flags
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"narad.dev/consume/examples/internal/filequeue"
	"narad.dev/consume/router"
)

// topic is the one topic of the demo.
const topic = "accounts"

// maxDeliveries is the topic's MaxDeliveries: the deliveries after which the poisoned
// operation is quarantined. Every other operation is delivered at most a few times (a crash,
// a nack), well below it.
const maxDeliveries = 5

// config is what the flags set.
type config struct {
	messages   int           // account operations to produce
	accounts   int           // the keys
	partitions int           // of the topic
	workers    int           // consumer goroutines
	rate       int           // operations produced per second; 0 means as fast as possible
	visibility time.Duration // the topic's visibility timeout
	dir        string        // state directory; empty means a temporary one, removed at the end
	progress   time.Duration // between progress lines; 0 means none
	seed       uint64        // of the operations and the workers' choices
	// quarantineKeys sets the topic's QuarantineKeys: the poisoned operation's account is
	// quarantined with it, then requeued once the poison is fixed.
	quarantineKeys bool

	// Not flags: the tests set them.
	crashChance float64 // a batch of first deliveries dropped as if its worker crashed
	nackChance  float64 // a first delivery failed for a moment and nacked
	// unordered runs the same program over a topic that is not ordered: the checks must
	// catch it.
	unordered bool
	// keysGoOn, with quarantineKeys, runs the topic without QuarantineKeys while the ledger
	// holds it to them: the checks must catch the account going on past its poisoned
	// operation.
	keysGoOn bool
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	cfg := config{crashChance: 0.003, nackChance: 0.02}
	fs := flag.NewFlagSet("ordered", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.IntVar(&cfg.messages, "messages", 20_000, "account operations to produce")
	fs.IntVar(&cfg.accounts, "accounts", 200, "accounts (the records' keys)")
	fs.IntVar(&cfg.partitions, "partitions", 4, "partitions of the topic")
	fs.IntVar(&cfg.workers, "workers", 8, "consumer goroutines")
	fs.IntVar(&cfg.rate, "rate", 10_000, "operations produced per second (0: as fast as possible)")
	fs.DurationVar(&cfg.visibility, "visibility", time.Second, "visibility timeout of a lease: how long a crashed worker's accounts stay blocked")
	fs.StringVar(&cfg.dir, "dir", "", "state directory, kept afterwards (default: a temporary directory, removed)")
	fs.DurationVar(&cfg.progress, "progress", time.Second, "interval between progress lines (0: none)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the operations and the workers' random choices")
	fs.BoolVar(&cfg.quarantineKeys, "quarantine-keys", false, "quarantine the poisoned operation's account with it (TopicConfig.QuarantineKeys), then fix the poison and requeue them at the end")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: ordered [flags]\n\nAccount operations consumed in order per account from an ordered topic; see the package documentation.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case cfg.messages < 1 || cfg.accounts < 1 || cfg.partitions < 1 || cfg.workers < 1 || cfg.visibility <= 0:
		return cfg, errors.New("-messages, -accounts, -partitions, -workers and -visibility must be positive")
	case cfg.rate < 0:
		return cfg, errors.New("-rate must not be negative")
	}
	return cfg, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ordered:", err)
		os.Exit(2)
	}
	// Ctrl-C stops the demo gracefully: the node persists every ack as it closes.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := runDemo(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ordered:", err)
		os.Exit(1)
	}
}

// openQueue opens (or creates) the queue whose state is in dir: the records in dir/log,
// the consumers' ack state in dir/consumer. onQuarantine is the node's OnQuarantine.
func openQueue(dir string, cfg config, onQuarantine func(topic string, partition int32, offset int64, attempts uint32)) (*filequeue.Queue, error) {
	return filequeue.Open(dir, topic, cfg.partitions, router.Config{
		Topic: func(string) router.TopicConfig {
			return router.TopicConfig{
				VisibilityTimeout: cfg.visibility,
				Ordered:           !cfg.unordered,
				// Without it the poisoned operation would be delivered again forever and
				// block its account for good.
				MaxDeliveries:  maxDeliveries,
				QuarantineKeys: cfg.quarantineKeys && !cfg.keysGoOn,
			}
		},
		OnQuarantine: onQuarantine,
	})
}
