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
	"errors"
	"flag"
	"io"
	"time"

	"narad.dev/consume/examples/internal/launch"
)

// topic is the one topic of the cluster.
const topic = "orders"

// config is what the flags set.
type config struct {
	launch.ParentFlags               // records, clients, visibility, dir (the state), ...
	rate               int           // records produced per second; 0 means as fast as possible
	downtime           time.Duration // between the kill and the restart
	noKill             bool          // leave every node running

	launch.NodeFlags // a node process's (hidden)
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	cfg := config{}
	visible := flag.NewFlagSet("cluster", flag.ContinueOnError)
	cfg.Register(visible, launch.ParentFlags{Records: 6000, Clients: 3, Visibility: 2 * time.Second,
		Progress: time.Second, Timeout: 2 * time.Minute, Seed: 1})
	visible.Lookup("dir").Usage = "state directory, kept afterwards (default: a temporary directory, removed)"
	visible.IntVar(&cfg.rate, "rate", 1500, "records produced per second (0: as fast as possible)")
	visible.DurationVar(&cfg.downtime, "downtime", 500*time.Millisecond, "how long the killed node stays down")
	visible.BoolVar(&cfg.noKill, "no-kill", false, "kill no node")
	if err := cfg.Parse(visible, args, errOut, "usage: cluster [flags]\n\nA queue over three node processes; see the package documentation.\n\n"); err != nil {
		return cfg, err
	}
	if cfg.rate < 0 || cfg.downtime < 0 {
		return cfg, errors.New("-rate and -downtime must not be negative")
	}
	return cfg, cfg.Check()
}

func main() {
	// Ctrl-C stops the run (and SIGTERM a node) gracefully: the nodes persist every ack as
	// they close.
	launch.Main("cluster", parseFlags, run)
}

// run is a node process, with the hidden flags, or else the demo.
var run = launch.NodeOrParent(runNode, runCluster)
