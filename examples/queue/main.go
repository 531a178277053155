// Command queue is an in-process durable queue: the segmented file log of
// narad.dev/consume/examples/filelog, with a router.Node over it that hands its records to
// workers under leases (receipt handles, visibility timeouts, ack / extend / nack,
// long-polls) and keeps a durable ack frontier.
//
// With no flags it produces 20,000 messages into 4 partitions while 8 workers long-poll,
// ack, sometimes extend and sometimes nack, prints a progress line each second, and ends
// with a summary. Its state lives in a fresh temporary directory, removed at the end
// (-dir keeps it somewhere of your choosing).
//
//	go run ./examples/queue
//
// With -crash it shows what survives a crash: it starts itself as a child process that
// produces and consumes, kills the child with SIGKILL in the middle, restarts a consumer
// over the same directory, and shows that nothing acked was lost and how much was delivered
// again, against the window the library documents.
//
//	go run ./examples/queue -crash
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

// topic is the one topic the demos use.
const topic = "orders"

// config is what the flags set.
type config struct {
	messages   int           // to produce
	partitions int           // of the topic
	workers    int           // consumer goroutines
	rate       int           // messages produced per second; 0 means as fast as possible
	visibility time.Duration // the topic's visibility timeout
	ackedAhead int           // the topic's acked-ahead cap per partition
	dir        string        // state directory; empty means a temporary one, removed at the end
	progress   time.Duration // between progress lines; 0 means none
	seed       uint64        // of the workers' choices

	crash     bool   // run the crash demonstration
	killAfter int    // acks the child makes before it is killed; 0 means half the messages
	exe       string // the program the crash demo starts as its child; empty: this one
	child     bool   // this process is the crash demo's child (a hidden flag)
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	cfg := config{}
	visible := flag.NewFlagSet("queue", flag.ContinueOnError)
	visible.SetOutput(errOut)
	visible.IntVar(&cfg.messages, "messages", 20_000, "messages to produce")
	visible.IntVar(&cfg.partitions, "partitions", 4, "partitions of the topic")
	visible.IntVar(&cfg.workers, "workers", 8, "consumer goroutines")
	visible.IntVar(&cfg.rate, "rate", 10_000, "messages produced per second (0: as fast as possible)")
	visible.DurationVar(&cfg.visibility, "visibility", time.Second, "visibility timeout of a lease")
	visible.IntVar(&cfg.ackedAhead, "acked-ahead", 0, "acked-ahead offsets cap per partition (0: the library's default; the cap that binds is its runs, router.DefaultMaxAckedAheadRuns)")
	visible.StringVar(&cfg.dir, "dir", "", "state directory, kept afterwards (default: a temporary directory, removed)")
	visible.DurationVar(&cfg.progress, "progress", time.Second, "interval between progress lines (0: none)")
	visible.Uint64Var(&cfg.seed, "seed", 1, "seed of the workers' random choices")
	visible.BoolVar(&cfg.crash, "crash", false, "kill a child process in the middle and check what survived")
	visible.IntVar(&cfg.killAfter, "kill-after", 0, "with -crash: acks the child makes before it is killed (default: half the messages)")

	// The same flags and the hidden one the crash demo starts its child with.
	all := flag.NewFlagSet("queue", flag.ContinueOnError)
	all.SetOutput(errOut)
	visible.VisitAll(func(f *flag.Flag) { all.Var(f.Value, f.Name, f.Usage) })
	all.BoolVar(&cfg.child, "crash-child", false, "")
	all.Usage = func() {
		fmt.Fprintf(errOut, "usage: queue [flags]\n\nAn in-process durable queue over a file log; see the package documentation.\n\n")
		visible.PrintDefaults()
	}
	if err := all.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case all.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", all.Args())
	case cfg.messages < 1 || cfg.partitions < 1 || cfg.workers < 1 || cfg.rate < 0 || cfg.visibility <= 0 || cfg.ackedAhead < 0 || cfg.killAfter < 0:
		return cfg, errors.New("-messages, -partitions, -workers and -visibility must be positive, -rate, -acked-ahead and -kill-after not negative")
	}
	return cfg, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "queue:", err)
		os.Exit(2)
	}
	// Ctrl-C stops the demo gracefully: the node persists every ack as it closes.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "queue:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	var err error
	switch {
	case cfg.child:
		err = runChild(ctx, cfg, out, os.Stdin)
	case cfg.crash:
		_, err = runCrash(ctx, cfg, out)
	default:
		_, err = runDemo(ctx, cfg, out)
	}
	return err
}

// openQueue opens (or creates) the queue whose state is in dir: the records in dir/log,
// the consumers' ack state in dir/consumer.
func openQueue(dir string, cfg config) (*filequeue.Queue, error) {
	return filequeue.Open(dir, topic, cfg.partitions, router.Config{
		Topic: func(string) router.TopicConfig {
			return router.TopicConfig{
				VisibilityTimeout: cfg.visibility,
				// Once this many messages are acked past a partition's oldest unsettled
				// one (a nacked message waiting out its delay, or one whose consumer died
				// holding it), the partition hands out only that one until it is settled.
				MaxAckedAhead: cfg.ackedAhead,
			}
		},
	})
}
