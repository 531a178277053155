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
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"narad.dev/consume/examples/internal/launch"
)

// topic is the one topic of the cluster.
const topic = "orders"

// config is what the flags set.
type config struct {
	launch.ParentFlags               // records, clients, visibility, dir, ...
	duration           time.Duration // how long the production takes: three equal phases
	partitions         int           // of the topic
	commitInterval     time.Duration // each node's Config.CommitInterval: how often ack state goes to etcd
	phases             []phase       // the phases to run, in order

	launch.NodeFlags // a node process's (hidden)
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	cfg := config{}
	visible := flag.NewFlagSet("failover", flag.ContinueOnError)
	cfg.Register(visible, launch.ParentFlags{Records: 3000, Clients: 2, Visibility: 2 * time.Second, Timeout: 90 * time.Second, Seed: 1})
	visible.Lookup("records").Usage = "records to produce, spread over the phases"
	visible.DurationVar(&cfg.duration, "duration", 9*time.Second, "how long the timed phases take (steady, move and kill share it equally; zombie and partition last about 3 lease TTLs each)")
	visible.IntVar(&cfg.partitions, "partitions", 6, "partitions of the topic (at least 3)")
	visible.DurationVar(&cfg.commitInterval, "commit-interval", 200*time.Millisecond, "how often a node saves dirty ack state to etcd (router.Config.CommitInterval)")
	phaseList := visible.String("phases", strings.Join(phaseFlags[:], ","), "the phases to run, comma-separated, in this order whatever the list's: "+strings.Join(phaseFlags[:], ", "))
	if err := cfg.Parse(visible, args, errOut, "usage: go run . [flags]   (from examples/failover)\n\n"+
		"A queue over three node processes with routes, ownership, liveness and ack state in\n"+
		"etcd: a graceful move, an owner paused past its lease (a zombie), an owner cut off\n"+
		"(a partition), then a node killed for good, each failed over. See README.md.\n\n"); err != nil {
		return cfg, err
	}
	var err error
	if cfg.phases, err = parsePhases(*phaseList); err != nil {
		return cfg, err
	}
	switch {
	case cfg.duration <= 0:
		return cfg, errors.New("-duration must be positive")
	case cfg.partitions < 3:
		return cfg, errors.New("-partitions must be at least 3")
	case cfg.commitInterval < 10*time.Millisecond || cfg.commitInterval > time.Minute:
		return cfg, errors.New("-commit-interval must lie within 10ms and 1m")
	}
	return cfg, cfg.Check()
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

// run is a node process, with the hidden flags, or else the scenario.
var run = launch.NodeOrParent(runNode, runCluster)
