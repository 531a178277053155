// Command cluster runs a queue over three node processes on 127.0.0.1, as a host would run
// narad.dev/consume in its own cluster: each process is a router.Node over its own file log
// (narad.dev/consume/examples/filelog) and state directory, calling its peers through
// router/nodehttp and serving clients through router/httpapi, on one HTTP server.
//
//	node-1  owns partitions 0 and 1 of "orders"   POST /node (peers), /queue/... (clients), POST /produce
//	node-2  owns partitions 2 and 3               the same
//	node-3  owns none: a gateway                  POST /node, /queue/...
//
// The program starts itself three times as the nodes (a hidden flag), after writing the one
// small config file they all read: node IDs, addresses, state directories and which
// partitions each owns, the static stand-in for what a host's consensus or metadata store
// would say. Then it plays the clients: it produces records through the owners over HTTP,
// and runs consumers on every node that long-poll over the HTTP consume API, take some
// batches, ack, sometimes nack, and sometimes abandon a record (never settle it: it comes
// back once its 2 s visibility timeout lapses). Midway it kills node-1 with SIGKILL and
// starts it again over the same directory.
//
//	go run ./examples/cluster
//
// It prints a progress line a second and a summary: records produced, delivered, acked,
// delivered again and why, lost (0, or the run fails), and the latency of each delivery speed across
// nodes (local, probe, notify and claim). It exits non-zero if a record is lost, or if an
// acked record is delivered again other than in the window a crash of its owner documents
// (about one commit tick, 100 ms, of acks before the kill).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"narad.dev/consume/examples/internal/launch"
)

// topic is the one topic of the cluster.
const topic = "orders"

// config is what the flags set.
type config struct {
	records    int           // confirmed produces to make
	rate       int           // records produced per second; 0 means as fast as possible
	clients    int           // consumers per node
	visibility time.Duration // the topic's visibility timeout, in every node
	downtime   time.Duration // between the kill and the restart
	noKill     bool          // leave every node running
	dir        string        // state directory; empty means a temporary one, removed at the end
	progress   time.Duration // between progress lines; 0 means none
	timeout    time.Duration // the whole run's bound
	seed       uint64        // of the clients' choices
	exe        string        // the program started as the nodes; empty: this one

	// A node process (hidden flags).
	node       bool
	configPath string
	id         string
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	cfg := config{}
	visible := flag.NewFlagSet("cluster", flag.ContinueOnError)
	visible.SetOutput(errOut)
	visible.IntVar(&cfg.records, "records", 6000, "records to produce")
	visible.IntVar(&cfg.rate, "rate", 1500, "records produced per second (0: as fast as possible)")
	visible.IntVar(&cfg.clients, "clients", 3, "consumers on each node")
	visible.DurationVar(&cfg.visibility, "visibility", 2*time.Second, "visibility timeout of a lease")
	visible.DurationVar(&cfg.downtime, "downtime", 500*time.Millisecond, "how long the killed node stays down")
	visible.BoolVar(&cfg.noKill, "no-kill", false, "kill no node")
	visible.StringVar(&cfg.dir, "dir", "", "state directory, kept afterwards (default: a temporary directory, removed)")
	visible.DurationVar(&cfg.progress, "progress", time.Second, "interval between progress lines (0: none)")
	visible.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "give up after this long")
	visible.Uint64Var(&cfg.seed, "seed", 1, "seed of the clients' random choices")

	// The same flags and the hidden ones a node process is started with.
	all := flag.NewFlagSet("cluster", flag.ContinueOnError)
	all.SetOutput(errOut)
	visible.VisitAll(func(f *flag.Flag) { all.Var(f.Value, f.Name, f.Usage) })
	all.BoolVar(&cfg.node, "node", false, "")
	all.StringVar(&cfg.configPath, "config", "", "")
	all.StringVar(&cfg.id, "id", "", "")
	all.Usage = func() {
		fmt.Fprintf(errOut, "usage: cluster [flags]\n\nA queue over three node processes; see the package documentation.\n\n")
		visible.PrintDefaults()
	}
	if err := all.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case all.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", all.Args())
	case cfg.node && (cfg.configPath == "" || cfg.id == ""):
		return cfg, errors.New("-node needs -config and -id")
	case cfg.records < 1 || cfg.clients < 1 || cfg.visibility <= 0 || cfg.timeout <= 0:
		return cfg, errors.New("-records, -clients, -visibility and -timeout must be positive")
	case cfg.rate < 0 || cfg.downtime < 0 || cfg.progress < 0:
		return cfg, errors.New("-rate, -downtime and -progress must not be negative")
	}
	return cfg, nil
}

func main() {
	// Ctrl-C stops the run (and SIGTERM a node) gracefully: the nodes persist every ack as
	// they close.
	launch.Main("cluster", parseFlags, run)
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.node {
		return runNode(ctx, cfg, out, os.Stdin)
	}
	_, err := runCluster(ctx, cfg, out)
	return err
}

// stateNote says what becomes of the state directory.
func stateNote(dir string) string {
	if dir == "" {
		return "a temporary directory, removed at the end"
	}
	return "kept"
}
