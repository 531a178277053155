package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/examples/internal/procs"
	"narad.dev/consume/examples/internal/queueclient"
	"narad.dev/consume/examples/internal/traffic"
	"narad.dev/consume/router"
)

// victim is the node killed midway: an owner.
const victim = "node-1"

// A clusterRun is the parent: it starts the nodes, plays the clients, kills and restarts
// the victim, and checks what came of it.
type clusterRun struct {
	cfg        config
	cc         clusterConfig
	exe        string
	configPath string
	api        *queueclient.Client
	led        *ledger
	*traffic.Lines

	mu    sync.Mutex
	procs map[string]*proc
	down  string // a node killed on purpose and not started again yet
}

// report is what a run found.
type report struct {
	tally
	elapsed  time.Duration
	drained  bool                          // the run finished: every partition's owner reported it drained
	remote   map[string]router.RemoteStats // each node's counters at the end
	stopErrs []error                       // nodes that did not shut down cleanly
	failures []string                      // what broke a promise, or the run
}

// runCluster is the demo. Its error says why it failed, if it did: a record lost, an acked
// record delivered again outside the crash window, a node that failed, or the run itself.
func runCluster(ctx context.Context, cfg config, out io.Writer) (report, error) {
	r, cc, cleanup, err := launch.NewRun(cfg.Dir, "cluster-", "the state directory", cfg.Exe, func(dir string) (clusterConfig, error) {
		return newClusterConfig(dir, cfg.Visibility)
	})
	if err != nil {
		return report{}, err
	}
	defer cleanup()
	dir, configPath, exe := r.Dir, r.ConfigPath, r.Exe
	c := &clusterRun{
		cfg: cfg, cc: cc, exe: exe, configPath: configPath, Lines: traffic.NewLines(out),
		api: queueclient.NewLocal(topic), led: newLedger(cc),
		procs: map[string]*proc{},
	}
	defer c.api.HTTP.CloseIdleConnections()
	// Whatever is left running after an early return (every goroutine of the run has
	// returned by then).
	defer procs.KillAll(c.procs)
	var rep report

	fmt.Fprintf(out, "cluster: 3 node processes on 127.0.0.1, topic %q with %d partitions\n", topic, len(cc.partitions()))
	for _, n := range cc.Nodes {
		p, err := startNode(ctx, exe, configPath, n.ID)
		if err != nil {
			return rep, err
		}
		c.procs[n.ID] = p
		owns := "owns none: a gateway"
		if len(n.Partitions) > 0 {
			owns = "owns partitions " + strings.Trim(fmt.Sprint(n.Partitions), "[]")
		}
		fmt.Fprintf(out, "  %s  %-15s  %-22s pid %d\n", n.ID, n.Addr, owns, p.Pid())
	}
	fmt.Fprintf(out, "each: a router.Node over its own file log, serving peers at /node (nodehttp), clients at /queue (httpapi)\n")
	fmt.Fprintf(out, "config: %s; state: %s (%s)\n", configPath, dir, r.DirNote())
	rate := "as fast as the owners take them"
	if cfg.rate > 0 {
		rate = fmt.Sprintf("%d/s", cfg.rate)
	}
	fmt.Fprintf(out, "%d records produced through their owners at %s; %d clients on each node, long-polls of %v,\n", cfg.Records, rate, cfg.Clients, traffic.ConsumeWait)
	fmt.Fprintf(out, "  a batch of up to %d one consume in four; %.0f%% nacked, %.0f%% abandoned; visibility timeout %v\n",
		traffic.BatchMax, traffic.NackPerMille/10.0, traffic.AbandonPerMille/10.0, cfg.Visibility)
	if !cfg.noKill {
		fmt.Fprintf(out, "%s is killed with SIGKILL once half the records are produced, and started again %v later\n", victim, cfg.downtime)
	}
	fmt.Fprintln(out)

	runErr := c.play(ctx)
	rep = c.finish(runErr)
	rep.print(out, c)
	if len(rep.failures) > 0 {
		return rep, errors.New(strings.Join(rep.failures, "; "))
	}
	return rep, nil
}

// play runs the clients until every record is acked and every partition drained, and
// stops them.
func (c *clusterRun) play(ctx context.Context) error {
	c.SetStart(time.Now())
	owners := c.cc.owners()
	pl := &traffic.Play{
		API: c.api, Ledger: c.led, Records: c.cfg.Records, Seed: c.cfg.Seed,
		PerNode: c.cfg.Clients, BatchAcks: true,
		Partitions: c.cc.partitions(),
		Owner: func(p int32) string {
			owner, _ := launch.NodeOf(c.cc.Nodes, owners[p])
			return owner.URL()
		},
		Pace: func(t time.Time) float64 {
			if c.cfg.rate == 0 {
				return math.Inf(1)
			}
			return t.Sub(c.Start()).Seconds() * float64(c.cfg.rate)
		},
		Progress: c.cfg.Progress, ProgressLine: c.progress, Timeout: c.cfg.Timeout,
		Check: c.checkNodes,
		// Every record acked as far as the clients know, and every owner drained.
		Done: func(ctx context.Context) bool { return c.led.allAcked() && c.drained(ctx) },
	}
	for _, n := range c.cc.Nodes {
		pl.Nodes = append(pl.Nodes, n.Node)
	}
	if !c.cfg.noKill {
		pl.Script = c.killAndRestart // midway
	}
	return pl.Run(ctx)
}

// killAndRestart kills the victim with SIGKILL once half the records are produced, and
// starts it again over the same directory after the downtime.
func (c *clusterRun) killAndRestart(ctx context.Context) error {
	// Midway, and once the victim's committer primed its partitions: a partition's acks
	// wait for its prime (at its first touch after a start) before any reaches the page
	// cache, the one exception to the tick's window a kill this early could run into.
	node, _ := launch.NodeOf(c.cc.Nodes, victim)
	for c.led.produced.Load() < int64(c.cfg.Records/2) || !c.primed(ctx, node) {
		if launch.Pause(ctx, 5*time.Millisecond); ctx.Err() != nil {
			return nil
		}
	}
	c.mu.Lock()
	p := c.procs[victim]
	c.down = victim
	c.mu.Unlock()
	at := time.Now()
	p.Kill() // SIGKILL: no deferred call, no Close, nothing
	c.led.kill(victim, at)
	c.Say("%s killed with SIGKILL (pid %d), %d records produced", victim, p.Pid(), c.led.produced.Load())
	if launch.Pause(ctx, c.cfg.downtime); ctx.Err() != nil {
		return nil
	}
	// Every ack the new process answers comes after this.
	c.led.restarted(time.Now())
	p, err := startNode(ctx, c.exe, c.configPath, victim)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("starting %s again: %w", victim, err)
	}
	c.mu.Lock()
	c.procs[victim] = p
	c.down = ""
	c.mu.Unlock()
	c.Say("%s started again over the same directory (pid %d)", victim, p.Pid())
	return nil
}

// primed asks node n whether its committer primed all of its partitions.
func (c *clusterRun) primed(ctx context.Context, n nodeConfig) bool {
	st, err := queueclient.StatusOf[nodeStatus](ctx, c.api, n.URL())
	return err == nil && st.Primes >= uint64(len(n.Partitions))
}

// checkNodes fails if a node exited that was not killed on purpose.
func (c *clusterRun) checkNodes() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return procs.CheckAlive(c.procs, c.down)
}

// drained asks every owner whether each of its partitions is drained: every record below
// its high watermark settled.
func (c *clusterRun) drained(ctx context.Context) bool {
	for _, n := range c.cc.Nodes {
		if len(n.Partitions) == 0 {
			continue
		}
		st, err := queueclient.StatusOf[nodeStatus](ctx, c.api, n.URL())
		if err != nil || len(st.Partitions) != len(n.Partitions) {
			return false
		}
		for _, p := range st.Partitions {
			if !p.Drained {
				return false
			}
		}
	}
	return true
}

// finish collects the nodes' counters, stops every node gracefully (SIGTERM: node.Close,
// then server.Shutdown), and tallies the run.
func (c *clusterRun) finish(runErr error) report {
	rep := report{elapsed: time.Since(c.Start()), remote: map[string]router.RemoteStats{}}
	ctx := context.Background()
	if runErr == nil {
		rep.drained = true
	}
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for _, n := range c.cc.Nodes {
		p := procs[n.ID]
		if p == nil || !p.Alive() {
			continue
		}
		if st, err := queueclient.StatusOf[nodeStatus](ctx, c.api, n.URL()); err == nil {
			rep.remote[n.ID] = st.Remote
		}
	}
	for _, n := range c.cc.Nodes {
		if p := procs[n.ID]; p != nil {
			if err := p.stop(); err != nil {
				rep.stopErrs = append(rep.stopErrs, err)
			}
		}
	}
	rep.tally = c.led.tally()
	if runErr != nil {
		rep.failures = append(rep.failures, runErr.Error())
	}
	if n := len(rep.lost); n > 0 && rep.drained {
		rep.failures = append(rep.failures, fmt.Sprintf("%d records lost", n))
	}
	if n := len(rep.violations); n > 0 {
		rep.failures = append(rep.failures, fmt.Sprintf("%d acked records delivered again outside the crash window", n))
	}
	if n := len(rep.mismatches); n > 0 {
		rep.failures = append(rep.failures, fmt.Sprintf("%d records delivered with another value than produced", n))
	}
	for _, err := range rep.stopErrs {
		rep.failures = append(rep.failures, "shutdown: "+err.Error())
	}
	return rep
}

// progress prints a progress line.
func (c *clusterRun) progress() {
	l := c.led
	c.Say("produced %6d  delivered %6d  acked %6d  nacked %4d  abandoned %4d  delivered again %4d  failed consumes %3d",
		l.produced.Load(), l.deliveries.Load(), l.acks.Load(), l.nacks.Load(), l.abandons.Load(), l.again.Load(), l.consumeFailures.Load())
}

func (rep *report) print(out io.Writer, c *clusterRun) {
	w := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	w("")
	w("summary: %d records, 3 nodes, %d clients, %.2fs", c.cfg.Records, c.cfg.Clients*len(c.cc.Nodes), rep.elapsed.Seconds())
	produced := traffic.ProducedNote(rep.landed)
	if rep.produceFailures > 0 {
		produced += fmt.Sprintf("; %d produce calls failed (the owner down) and went again", rep.produceFailures)
	}
	w("  produced    %7d   %s", rep.produced, produced)
	w("  delivered   %7d   to %d records; %d of them again:", rep.delivered, rep.records, rep.delivered-rep.records)
	w("                        %d after a nack, %d after an abandoned lease lapsed, %d after %s's crash,",
		rep.reasons[againNack], rep.reasons[againAbandoned], rep.reasons[againCrash], victim)
	w("                        %d after an ack too late, %d otherwise", rep.reasons[againLate], rep.reasons[againOther])
	w("  acked       %7d   %s", rep.acked+rep.ackedUnsure, traffic.AckedNote(len(rep.lost), rep.ackedUnsure))
	w("  nacked      %7d   visible again at once", rep.nacks)
	w("  abandoned   %7d   never settled: delivered again once their lease lapsed (%v)", rep.abandoned, c.cfg.Visibility)
	w("  unanswered  %7d   acks that got no answer (%s killed); %d refused unapplied (503), %d too late (410)",
		rep.unsure, victim, rep.refused, rep.late)
	w("  failed      %7d   consumes, through a node down or restarting, tried again", rep.consumeFailures)
	if rep.drained {
		w("  lost        %7d   produced, never acked", len(rep.lost))
	} else {
		w("  not acked   %7d   when the run stopped short (lost, or not delivered yet)", len(rep.lost))
	}
	for i, pos := range rep.lost {
		if i == 5 {
			w("                        ...")
			break
		}
		w("                        %v", pos)
	}
	if !rep.killAt.IsZero() {
		if rep.inWindow > 0 {
			w("  window: the %d acked records delivered again had been acked at most %v before %s's kill;",
				rep.inWindow, rep.windowOldest.Round(time.Millisecond), victim)
		} else {
			w("  window: no acked record of %s's partitions was delivered again;", victim)
		}
		w("    the library documents about one committer tick (%v) of acks delivered again after a", commitTick)
		w("    process crash; clients had %d acks of %s's partitions answered in its last %v", rep.lastTick, victim, commitTick)
		w("    (allowed here: %v, for a writeout that waits for its sync)", crashWindow)
	}
	for _, v := range rep.violations[:min(len(rep.violations), 5)] {
		w("  BROKEN: %s", v)
	}
	for _, m := range rep.mismatches[:min(len(rep.mismatches), 5)] {
		w("  BROKEN: %s", m)
	}
	w("  latency of first deliveries, by speed:")
	for s, name := range speedNames {
		w("    %-15s %v", name, rep.latency[s])
	}
	w("    to the consume's return from its start, or from the record's append (its timestamp) if")
	w("    that came later. local: the node consumed through owns the record (no round trip);")
	w("    probe: another node owns it and the consume took it without waiting (one round trip);")
	w("    notify + claim: the consume waited, the owner told its node and the node claimed the")
	w("    record (two round trips). The node says which in a header: the calls it made to peers.")
	if len(rep.remote) > 0 {
		w("  across nodes (each node's counters; %s's since it started again):", victim)
		for _, n := range c.cc.Nodes {
			st, ok := rep.remote[n.ID]
			if !ok {
				continue
			}
			w("    %s  probes %4d (hits %4d), notifications %3d, claims %3d (hits %3d); as an owner: served %4d, notified %3d",
				n.ID, st.Probes, st.ProbeHits, st.Notifications, st.Claims, st.ClaimHits, st.Served, st.Notified)
		}
	}
	if len(rep.stopErrs) == 0 {
		w("  shutdown: every node stopped on SIGTERM (node.Close, then server.Shutdown)")
	}
	if len(rep.failures) > 0 {
		w("FAILED: %s", strings.Join(rep.failures, "; "))
	} else {
		w("ok: nothing lost, and no acked record delivered again outside %s's crash window", victim)
	}
}
