// Command failover runs a queue over three node processes whose routes, ownership, liveness
// and ack state live in etcd, and shows a partition moved gracefully and an owner's
// partitions failed over while it is paused, while it is cut off, and after it is killed for
// good.
//
// Each node process embeds one member of a three-member etcd cluster
// (go.etcd.io/etcd/server/v3/embed) and a router.Node:
//
//   - routes, ownership and liveness come from etcd: each node keeps a lease (TTL 2 s) alive
//     itself, timing each keep-alive, with its key under it, /failover/nodes/<id>; each
//     partition is granted to a node by its owner key, /failover/owner/<topic>/<p>, under
//     that node's lease (the key's mod revision is the grant's epoch), and routed by
//     /failover/assign/<topic>/<p>; every node watches them and serves router.Routes (and
//     OwnerFinder, Liveness) and router.Ownership (Config.Ownership: a grant lives until its
//     lease's last keep-alive's TTL runs out on the node's clock) from what it saw last, and
//     calls RoutesChanged when they change. A controller, in whichever node holds an etcd
//     election, fails over the partitions whose owner key is gone, waiting out the old
//     grant first, and makes the moves asked for: grant, adopt, then routes.
//   - the ack state goes to etcd through the library's store seam (Config.Store): etcdStore,
//     a Get to load, a Txn of up to 128 puts per batch to save, refused (router.ErrFenced)
//     when the partition was granted under a newer epoch since, a prefix delete.
//   - the log is a directory all three reach (examples/filelog, one Store per partition),
//     standing for the host's replicated log; only the node a partition is granted to
//     opens and appends to its files, fenced by the grant's epoch.
//
// The parent starts the three (this program again, with hidden flags), then plays clients
// through every node's consume API (router/httpapi) while producing through each
// partition's owner, in five phases: steady; one partition moved by hand-off (HandOff,
// grant, bytes, Adopt, assignment Txn); a zombie: an owner stopped with SIGSTOP past its
// lease, its partitions failed over, then continued (SIGCONT) while its clients keep calling
// it; a partition: an owner cut off from its peers and from etcd's control plane while its
// clients and the store still reach it, failed over, then healed; and the controller's node
// killed with SIGKILL for good, its lease expiring and its partitions failed over from the
// state etcd holds. It keeps a ledger of every record and prints, per phase, what was lost,
// acked again outside the window the library allows, and held by two clients at once, and
// exits non-zero on any violation.
//
//	cd examples/failover && go run .
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"narad.dev/consume/examples/internal/launch"
)

// topic is the one topic of the cluster.
const topic = "orders"

// config is what the flags set.
type config struct {
	records        int           // confirmed produces to make
	duration       time.Duration // how long the production takes: three equal phases
	partitions     int           // of the topic
	clients        int           // consumers per node
	visibility     time.Duration // the topic's visibility timeout
	commitInterval time.Duration // each node's Config.CommitInterval: how often ack state goes to etcd
	dir            string        // the run's directory; empty: a temporary one, removed at the end
	progress       time.Duration // between progress lines; 0: none
	timeout        time.Duration // the whole run's bound
	seed           uint64        // of the clients' choices
	phases         []phase       // the phases to run, in order
	exe            string        // the program started as the nodes; empty: this one

	// A node process (hidden flags).
	node       bool
	configPath string
	id         string
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	cfg := config{}
	visible := flag.NewFlagSet("failover", flag.ContinueOnError)
	visible.SetOutput(errOut)
	visible.IntVar(&cfg.records, "records", 3000, "records to produce, spread over the phases")
	visible.DurationVar(&cfg.duration, "duration", 9*time.Second, "how long the timed phases take (steady, move and kill share it equally; zombie and partition last about 3 lease TTLs each)")
	visible.IntVar(&cfg.partitions, "partitions", 6, "partitions of the topic (at least 3)")
	visible.IntVar(&cfg.clients, "clients", 2, "consumers on each node")
	visible.DurationVar(&cfg.visibility, "visibility", 2*time.Second, "visibility timeout of a lease")
	visible.DurationVar(&cfg.commitInterval, "commit-interval", 200*time.Millisecond, "how often a node saves dirty ack state to etcd (router.Config.CommitInterval)")
	visible.StringVar(&cfg.dir, "dir", "", "the run's directory, kept afterwards (default: a temporary directory, removed)")
	visible.DurationVar(&cfg.progress, "progress", 0, "interval between progress lines (0: none)")
	visible.DurationVar(&cfg.timeout, "timeout", 90*time.Second, "give up after this long")
	visible.Uint64Var(&cfg.seed, "seed", 1, "seed of the clients' random choices")
	phaseList := visible.String("phases", strings.Join(phaseFlags[:], ","), "the phases to run, comma-separated, in this order whatever the list's: "+strings.Join(phaseFlags[:], ", "))

	all := flag.NewFlagSet("failover", flag.ContinueOnError)
	all.SetOutput(errOut)
	visible.VisitAll(func(f *flag.Flag) { all.Var(f.Value, f.Name, f.Usage) })
	all.BoolVar(&cfg.node, "node", false, "")
	all.StringVar(&cfg.configPath, "config", "", "")
	all.StringVar(&cfg.id, "id", "", "")
	all.Usage = func() {
		fmt.Fprintf(errOut, "usage: go run . [flags]   (from examples/failover)\n\n"+
			"A queue over three node processes with routes, ownership, liveness and ack state in\n"+
			"etcd: a graceful move, an owner paused past its lease (a zombie), an owner cut off\n"+
			"(a partition), then a node killed for good, each failed over. See README.md.\n\n")
		visible.PrintDefaults()
	}
	if err := all.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.phases, err = parsePhases(*phaseList); err != nil {
		return cfg, err
	}
	switch {
	case all.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", all.Args())
	case cfg.node && (cfg.configPath == "" || cfg.id == ""):
		return cfg, errors.New("-node needs -config and -id")
	case cfg.records < 1 || cfg.clients < 1 || cfg.visibility <= 0 || cfg.timeout <= 0 || cfg.duration <= 0:
		return cfg, errors.New("-records, -clients, -visibility, -duration and -timeout must be positive")
	case cfg.partitions < 3:
		return cfg, errors.New("-partitions must be at least 3")
	case cfg.commitInterval < 10*time.Millisecond || cfg.commitInterval > time.Minute:
		return cfg, errors.New("-commit-interval must lie within 10ms and 1m")
	case cfg.progress < 0:
		return cfg, errors.New("-progress must not be negative")
	}
	return cfg, nil
}

// parsePhases parses -phases: names of phaseFlags, comma-separated, each at most once.
func parsePhases(list string) ([]phase, error) {
	var out []phase
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.Index(phaseFlags[:], name)
		if i < 0 {
			return nil, fmt.Errorf("-phases: no phase %q (the phases: %s)", name, strings.Join(phaseFlags[:], ", "))
		}
		if slices.Contains(out, phase(i)) {
			return nil, fmt.Errorf("-phases: %q twice", name)
		}
		out = append(out, phase(i))
	}
	slices.Sort(out)
	return out, nil
}

func main() {
	launch.Main("failover", parseFlags, run)
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.node {
		return runNode(ctx, cfg, out, os.Stdin)
	}
	_, err := runCluster(ctx, cfg, out)
	return err
}
