package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/examples/internal/nodeproc"
	"narad.dev/consume/examples/internal/procs"
	"narad.dev/consume/examples/internal/queueclient"
	"narad.dev/consume/examples/internal/traffic"
)

// A clusterRun is the parent: it starts the nodes, plays the clients, runs the phases
// (script.go), and checks what came of it.
type clusterRun struct {
	cfg            config
	cc             clusterConfig
	api            *queueclient.Client
	led            *ledger
	pace           *pacer
	cli            *clientv3.Client   // of every member (every one but a stopped node's, once one was)
	clients        []*clientv3.Client // every client it made, closed at the end
	view           *view              // of etcd, as the parent sees it: the producers' routes
	*traffic.Lines                    // the run's output; the nodes' event lines read its start

	viewMu   sync.Mutex
	stopView func() // ends the view's watch through its current client, and waits for it

	mu      sync.Mutex
	procs   map[string]*proc
	victim  string // the node killed, once it is
	stopped string // the node stopped with SIGSTOP, while it is
	cutOff  string // the node cut off, while it is
	notes   [phases][]string
	later   []func() // notes written once the run is over
}

// report is what a run found.
type report struct {
	tally
	elapsed  time.Duration
	drained  bool    // every partition's owner reported it drained
	stopErrs []error // nodes that did not shut down cleanly
	failures []string
}

// runCluster is the demo. Its error says why it failed, if it did.
func runCluster(ctx context.Context, cfg config, out io.Writer) (report, error) {
	r, cc, cleanup, err := launch.NewRun(cfg.Dir, "failover-", "the run's directory", cfg.Exe, func(dir string) (clusterConfig, error) {
		return newClusterConfig(dir, cfg.partitions, cfg.Visibility, cfg.commitInterval)
	})
	if err != nil {
		return report{}, err
	}
	defer cleanup()
	c := &clusterRun{cfg: cfg, cc: cc, Lines: traffic.NewLines(out), procs: map[string]*proc{}, pace: newPacer(cfg),
		api: queueclient.NewLocal(topic), led: newLedger(cfg.Visibility, cfg.commitInterval, cfg.phases)}
	defer c.api.HTTP.CloseIdleConnections()
	// Whatever is left running after an early return (every goroutine of the run has
	// returned by then).
	defer procs.KillAll(c.procs)
	var rep report

	w := c.Print
	w("failover: 3 node processes on 127.0.0.1, each an etcd member (embed) and a router.Node; topic %q, %d partitions", topic, cfg.partitions)
	c.SetStart(time.Now())
	for _, n := range cc.Nodes {
		p, err := startProc(r.Exe, r.ConfigPath, n.ID, c.event)
		if err != nil {
			return rep, err
		}
		c.procs[n.ID] = p
	}
	for _, n := range cc.Nodes {
		if err := c.procs[n.ID].waitReady(); err != nil {
			return rep, err
		}
	}
	if c.cli, err = newClient(cc.endpoints()...); err != nil {
		return rep, err
	}
	c.clients = append(c.clients, c.cli)
	defer func() {
		for _, cli := range c.clients {
			cli.Close()
		}
	}()
	c.view = newView(topic, "")
	c.view.changed = func(_, next *snapshot) { c.led.granted(next) }
	defer func() {
		c.viewMu.Lock()
		defer c.viewMu.Unlock()
		c.stopView()
	}()
	if err := c.watch(ctx, c.cli); err != nil {
		return rep, err
	}
	if err := c.assigned(ctx); err != nil {
		return rep, err
	}
	for _, n := range cc.Nodes {
		w("  %s  http %-15s  etcd client %s  peer %s  pid %-7d first owns %s", n.ID, n.Addr,
			strings.TrimPrefix(n.Member.ClientURL, "http://"), strings.TrimPrefix(n.Member.PeerURL, "http://"),
			c.procs[n.ID].Pid(), partitionList(n.Initial))
	}
	w("etcd: grants /failover/owner/ (under the owner's lease of %ds; epoch = mod revision), routes /failover/assign/,", leaseTTL)
	w("  liveness /failover/nodes/, ack state /failover/state/ (router.Config.Store; saved at most once per commit interval,")
	w("  %v, only under the partition's newest epoch, /failover/epoch/)", cfg.commitInterval)
	w("log: %s, a directory all three reach: it stands for the host's replicated log", cc.LogDir)
	w("run directory: %s (%s)", r.Dir, r.DirNote())
	w("%d records over %v through each partition's owner; %d clients on each node, long-polls of %v,", cfg.Records, cfg.duration, cfg.Clients, traffic.ConsumeWait)
	w("  a batch of up to %d one consume in four; %.0f%% nacked, %.0f%% abandoned; visibility timeout %v", traffic.BatchMax, traffic.NackPerMille/10.0, traffic.AbandonPerMille/10.0, cfg.Visibility)
	lengths := plan(cfg)
	var script []string
	for i, ph := range cfg.phases {
		script = append(script, fmt.Sprintf("%d %s (%v)", i+1, phaseNames[ph], lengths[ph]))
	}
	w("phases: %s", strings.Join(script, ", "))
	w("")

	c.SetStart(time.Now())
	c.begin(cfg.phases[0], c.Start())
	runErr := c.play(ctx)
	rep = c.finish(runErr)
	rep.print(c)
	if len(rep.failures) > 0 {
		return rep, errors.New(strings.Join(rep.failures, "; "))
	}
	return rep, nil
}

// watch (re)starts the parent's view on cli, and waits for its first read.
func (c *clusterRun) watch(ctx context.Context, cli *clientv3.Client) error {
	c.viewMu.Lock()
	defer c.viewMu.Unlock()
	if c.stopView != nil {
		c.stopView() // one watch publishes at a time
	}
	vctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	c.stopView = func() { stop(); <-done }
	ready := make(chan struct{})
	go func() {
		defer close(done)
		c.view.run(vctx, cli, ready)
	}()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(startTimeout):
		return errors.New("the parent's view of etcd did not read")
	}
}

func partitionList(ps []int32) string {
	if len(ps) == 0 {
		return "none"
	}
	return strings.Trim(strings.ReplaceAll(fmt.Sprint(ps), " ", ", "), "[]")
}

// assigned waits until etcd assigns every partition to a live node, and each node's routes
// say so (its status lists its partitions).
func (c *clusterRun) assigned(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	s := c.view.wait(ctx, func(s *snapshot) bool { return len(s.assign) == c.cc.Partitions && len(s.live) == len(c.cc.Nodes) })
	if s == nil {
		return errors.New("the controller did not assign the partitions")
	}
	for _, n := range c.cc.Nodes {
		for {
			st, err := queueclient.StatusOf[nodeStatus](ctx, c.api, n.URL())
			if err == nil && st.Revision >= s.rev {
				break
			}
			if launch.Pause(ctx, 20*time.Millisecond); ctx.Err() != nil {
				return fmt.Errorf("%s's routes did not catch up with etcd", n.ID)
			}
		}
	}
	return nil
}

// event shows a node's event line. A lapse of its grants ("lapsed <unix ns>
// <p>:<epoch>,... unanswered|revoked") is recorded in the ledger: its acks within the window
// before may come back.
func (c *clusterRun) event(id, text string) {
	rest, ok := strings.CutPrefix(text, "lapsed ")
	if !ok {
		c.Say("%s: %s", id, text)
		return
	}
	fields := strings.Fields(rest)
	ns, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil || len(fields) != 3 {
		c.Say("%s: %s (unreadable)", id, text)
		return
	}
	anchor := time.Unix(0, ns)
	parts, saved := map[int32]int64{}, map[int32]time.Time{}
	for item := range strings.SplitSeq(fields[1], ",") {
		f := strings.Split(item, ":")
		if len(f) != 3 {
			continue // "-": none
		}
		p, perr := strconv.ParseInt(f[0], 10, 32)
		e, eerr := strconv.ParseInt(f[1], 10, 64)
		t, terr := strconv.ParseInt(f[2], 10, 64)
		if perr == nil && eerr == nil && terr == nil {
			parts[int32(p)] = e
			if t > 0 {
				saved[int32(p)] = time.Unix(0, t)
			}
		}
	}
	why := "no keep-alive answered before its lease's end: etcd electing a leader?"
	if fields[2] == "revoked" {
		why = "etcd revoked its lease before its end on the node's clock"
	}
	if c.led.lapse(id, parts, saved, anchor, leaseTTL*time.Second, why) {
		c.Say("%s: its grants (%s/%s) lapsed at %.2fs on its clock, no phase's doing (%s): deposed, the failover's window applies",
			id, topic, partsList(parts), c.Since(anchor), why)
	} else {
		c.Say("%s: its grants (%s/%s) lapsed at %.2fs on its clock", id, topic, partsList(parts), c.Since(anchor))
	}
}

// ackRetries is how many times a client sends an ack again that was refused unapplied (503:
// its partition is between owners, or its owner is down), as a client would.
const ackRetries = 8

// play runs the clients and the script until every record is acked and every partition
// drained, and stops them.
func (c *clusterRun) play(ctx context.Context) error {
	pl := &traffic.Play{
		API: c.api, Ledger: c.led, Records: c.cfg.Records, Seed: c.cfg.Seed,
		PerNode: c.cfg.Clients, AckRetries: ackRetries,
		// A consumer on a node that died stops.
		Gone:       func(node string) bool { c.mu.Lock(); defer c.mu.Unlock(); return c.victim == node },
		Partitions: c.cc.partitions(),
		// Each partition's owner as the parent's view of etcd names it: a node that does
		// not own it (any more) answers 409, a dead one does not answer, and the producer
		// looks the owner up again.
		Owner:             func(p int32) string { s := c.view.snap(); return launch.Node{Addr: s.known[s.owner(p)]}.URL() },
		Pace:              c.pace.allowed,
		ProduceRetryPause: traffic.RetryPause,
		Script:            c.script,
		Progress:          c.cfg.Progress,
		ProgressLine: func() {
			c.Say("produced %6d  delivered %6d  acked %6d", c.led.produced.Load(), c.led.deliveries.Load(), c.led.acks.Load())
		},
		Timeout: c.cfg.Timeout,
		Check:   c.checkNodes,
		Done:    func(ctx context.Context) bool { return c.led.allAcked() && c.drained(ctx) },
	}
	for _, n := range c.cc.Nodes {
		pl.Nodes = append(pl.Nodes, n.Node)
	}
	return pl.Run(ctx)
}

// checkNodes fails if a node exited that was not killed on purpose.
func (c *clusterRun) checkNodes() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return procs.CheckAlive(c.procs, c.victim)
}

// drained asks each partition's owner, as etcd names it, whether the partition is drained:
// every record below its high watermark settled.
func (c *clusterRun) drained(ctx context.Context) bool {
	s := c.view.snap()
	status := map[string]nodeStatus{}
	for _, p := range c.cc.partitions() {
		owner := s.owner(p)
		st, ok := status[owner]
		if !ok {
			var err error
			if st, err = queueclient.StatusOf[nodeStatus](ctx, c.api, "http://"+s.known[owner]); err != nil {
				return false
			}
			status[owner] = st
		}
		i := slices.IndexFunc(st.Partitions, func(ps nodeproc.PartitionStatus) bool { return ps.Partition == p })
		if i < 0 || !st.Partitions[i].Drained {
			return false
		}
	}
	return true
}

// finish stops every node gracefully and tallies the run: the controller is halted first
// (haltKey) so that nothing fails over while the nodes stop; every node closes (its last acks
// saved to etcd) before any etcd member stops.
func (c *clusterRun) finish(runErr error) report {
	rep := report{elapsed: time.Since(c.Start()), drained: runErr == nil}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A run that failed midway may leave a node stopped or cut off.
	c.mu.Lock()
	stopped, cutOff := c.stopped, c.cutOff
	c.mu.Unlock()
	if p := c.procs[stopped]; p != nil {
		pause(p.Pid(), false)
	}
	if cutOff != "" {
		c.cut(ctx, cutOff, false, nil)
	}
	if c.cli != nil {
		// Tried again: the client's connection may be to the dead member.
		var err error
		for range 10 {
			if _, err = c.cli.Put(ctx, haltKey, "stopping"); err == nil {
				break
			}
			launch.Pause(ctx, 200*time.Millisecond)
		}
		if err != nil {
			rep.stopErrs = append(rep.stopErrs, fmt.Errorf("halting the controller: %w", err))
		}
	}
	c.mu.Lock()
	var live []*proc
	for _, n := range c.cc.Nodes {
		if p := c.procs[n.ID]; p != nil && p.Alive() {
			live = append(live, p)
		}
	}
	c.mu.Unlock()
	errs := make([]error, len(live))
	var wg sync.WaitGroup
	for i, p := range live {
		wg.Go(func() { errs[i] = p.closeNode() })
	}
	wg.Wait()
	for i, p := range live {
		wg.Go(func() { errs[i] = errors.Join(errs[i], p.finish()) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			rep.stopErrs = append(rep.stopErrs, err)
		}
	}
	rep.tally = c.led.tally()
	c.mu.Lock()
	later := c.later
	c.mu.Unlock()
	for _, f := range later {
		f()
	}
	if runErr != nil {
		rep.failures = append(rep.failures, runErr.Error())
	}
	var lost, again, two, mism int
	for _, pc := range rep.c {
		again += pc.ackedAgainOut
		two += pc.twoHolders
		mism += pc.mismatches
	}
	lost = len(rep.lost)
	if lost > 0 && rep.drained {
		rep.failures = append(rep.failures, fmt.Sprintf("%d records lost", lost))
	}
	if again > 0 {
		rep.failures = append(rep.failures, fmt.Sprintf("%d acked records delivered again outside the window", again))
	}
	if two > 0 {
		rep.failures = append(rep.failures, fmt.Sprintf("%d records held by two clients at once", two))
	}
	if mism > 0 {
		rep.failures = append(rep.failures, fmt.Sprintf("%d records delivered with another value than produced", mism))
	}
	for _, err := range rep.stopErrs {
		rep.failures = append(rep.failures, "shutdown: "+err.Error())
	}
	return rep
}

func (rep *report) print(c *clusterRun) {
	w := c.Print
	w("")
	w("summary: %d records, 3 nodes, %d clients, %.2fs", c.cfg.Records, c.cfg.Clients*len(c.cc.Nodes), rep.elapsed.Seconds())
	for i, ph := range c.cfg.phases {
		pc := &rep.c[ph]
		from, to := rep.starts[ph], c.Start().Add(rep.elapsed)
		if i+1 < len(c.cfg.phases) && !rep.starts[c.cfg.phases[i+1]].IsZero() {
			to = rep.starts[c.cfg.phases[i+1]]
		}
		span := fmt.Sprintf("%4.1fs-%4.1fs", from.Sub(c.Start()).Seconds(), to.Sub(c.Start()).Seconds())
		if from.IsZero() {
			span = "  (not reached)"
		}
		w("  %-22s %s  produced %5d  delivered %5d (%d again: %d after a nack, %d after an abandoned lease lapsed)",
			fmt.Sprintf("phase %d %s", i+1, phaseNames[ph]), span, pc.produced, pc.delivered, pc.again, pc.nackAgain, pc.abandonedAgain)
		w("      acked %5d  nacked %4d  abandoned %4d  acks: %d too late (410), %d refused (503) after %d tries, %d unanswered",
			pc.acked, pc.nacked, pc.abandoned, pc.late, pc.refused, ackRetries+1, pc.unsure)
		w("      lost %d  acked again outside the window %d  two holders at once %d", pc.lost, pc.ackedAgainOut, pc.twoHolders)
		for _, n := range c.notes[ph] {
			w("      %s", n)
		}
		if ph == moving {
			w("      acks refused (503) while %s/%d was between owners, then answered after a retry: %d", topic, moved, pc.retried)
		}
		for _, f := range rep.failovers {
			if f.phase != ph {
				continue
			}
			if !f.scripted {
				w("      %s's grants of %s lapsed at %.2fs, not by this phase's doing (%s):",
					f.victim, partsList(f.parts), f.anchor.Sub(c.Start()).Seconds(), f.why)
				w("        the library deposed them, so the window below applies as to a failover")
			}
			w("      the window: acks applied within one commit interval + tick (%v + %v = %v) before %s stopped acting on its",
				c.cfg.commitInterval, saveSlack, rep.window, f.victim)
			w("        partitions (%s, at %.2fs) may come back: ack state reaches etcd at most once per commit interval;",
				f.how, f.anchor.Sub(c.Start()).Seconds())
			if len(f.from) > 0 {
				var ext []string
				for _, p := range slices.Sorted(maps.Keys(f.from)) {
					ext = append(ext, fmt.Sprintf("%d since %.2fs", p, f.from[p].Sub(c.Start()).Seconds()))
				}
				w("        or since its last save that reached etcd, where that was earlier (etcd did not take its saves")
				w("        meanwhile): partitions %s", strings.Join(ext, ", "))
			}
			w("        clients had %d such acks of its partitions (sent by then, answered within the window before or after)", f.windowAcks)
			if f.ackedAgainIn > 0 {
				dying := ""
				if f.answeredDying > 0 {
					dying = fmt.Sprintf(" (%d answered after it: the answer was on its way)", f.answeredDying)
				}
				w("        %d came back, answered at most %v before%s", f.ackedAgainIn, f.windowOldest.Round(time.Millisecond), dying)
			} else {
				w("        none came back")
			}
			w("      records %s had leased, leased again while the old lease's time ran: %d (a failover carries no leases; the", f.victim, f.leasesDropped)
			w("        old ones were not settleable any more: no ack of one sent after was answered 204, or it would count above)")
		}
		if ph != moving && pc.retried > 0 {
			w("      acks refused (503) while a partition was between owners, then answered after a retry: %d", pc.retried)
		}
		for _, v := range pc.violations {
			w("      BROKEN: %s", v)
		}
	}
	w("  produced    %6d   %s", rep.produced, traffic.ProducedNote(rep.landed))
	w("  acked       %6d   %s", rep.acked+rep.unsure, traffic.AckedNote(len(rep.lost), rep.unsure))
	for i, pos := range rep.lost {
		if i == 5 {
			w("                       ...")
			break
		}
		w("    not acked: %v", pos)
	}
	if len(rep.stopErrs) == 0 {
		w("  shutdown: the controller halted, every node closed (its last acks saved to etcd), then the etcd members stopped")
	}
	if len(rep.failures) > 0 {
		w("FAILED: %s", strings.Join(rep.failures, "; "))
	} else {
		w("ok: nothing lost, no acked record delivered again outside a failover's window, no record held twice")
	}
}
