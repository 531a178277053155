package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"narad.dev/consume/examples/internal/launch"
)

// The script: the phases one after the other. Each begins once the one before has lasted
// its planned length and its event is over (the move made; the zombie failed over, continued
// and live again; the partition failed over, healed and live again), so a phase that runs
// long delays the next rather than overlapping it.
//
// Production is paced by the plan: each phase has a share of the records in proportion to
// its planned length, produced over that length from the moment the phase began. A phase that
// runs past its length produces nothing more until the next begins; the last produces on at
// its pace until the run has every record.

// moved is the partition the graceful move takes to the next node.
const moved = 0

// disruptLength is the planned length of the zombie and partition phases: the owner's lease
// running out (a TTL), the controller waiting out its grant (a TTL and 10%), the node back
// and live again, and a second of its clients calling it afterwards.
const disruptLength = 3*leaseTTL*time.Second + time.Second

// plan returns each phase's planned length: the timed phases (steady, move, kill) share
// duration equally, the zombie and the partition last disruptLength each.
func plan(cfg config) map[phase]time.Duration {
	timed := 0
	for _, ph := range cfg.phases {
		if ph != zombie && ph != partitioned {
			timed++
		}
	}
	lengths := map[phase]time.Duration{}
	for _, ph := range cfg.phases {
		if ph == zombie || ph == partitioned {
			lengths[ph] = disruptLength
		} else {
			lengths[ph] = cfg.duration / time.Duration(timed)
		}
	}
	return lengths
}

// A pacer says how many records the run may have produced by a given time.
type pacer struct {
	order   []phase
	lengths map[phase]time.Duration
	budget  map[phase]float64 // records

	mu     sync.Mutex
	starts map[phase]time.Time
}

func newPacer(cfg config) *pacer {
	p := &pacer{order: cfg.phases, lengths: plan(cfg), budget: map[phase]float64{}, starts: map[phase]time.Time{}}
	var total time.Duration
	for _, d := range p.lengths {
		total += d
	}
	for ph, d := range p.lengths {
		p.budget[ph] = float64(cfg.Records) * d.Seconds() / total.Seconds()
	}
	return p
}

func (p *pacer) begin(ph phase, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts[ph] = at
}

// allowed returns how many records may have been produced by now, over every partition.
func (p *pacer) allowed(now time.Time) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0.0
	for i, ph := range p.order {
		start, ok := p.starts[ph]
		if !ok {
			break
		}
		f := now.Sub(start).Seconds() / p.lengths[ph].Seconds()
		if f < 0 {
			f = 0
		}
		if f > 1 && i < len(p.order)-1 {
			f = 1
		}
		total += p.budget[ph] * f
	}
	return total
}

// begin marks the beginning of phase ph at at, for the ledger and the pacer.
func (c *clusterRun) begin(ph phase, at time.Time) {
	c.led.begin(ph, at)
	c.pace.begin(ph, at)
}

// note adds a line to phase ph's part of the summary.
func (c *clusterRun) note(ph phase, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes[ph] = append(c.notes[ph], fmt.Sprintf(format, args...))
}

// phaseLabel is "phase N name", N its place in this run.
func (c *clusterRun) phaseLabel(ph phase) string {
	return fmt.Sprintf("phase %d %s", slices.Index(c.cfg.phases, ph)+1, phaseNames[ph])
}

// script runs the phases.
func (c *clusterRun) script(ctx context.Context) error {
	lengths := plan(c.cfg)
	for i, ph := range c.cfg.phases {
		if i > 0 {
			prev := c.cfg.phases[i-1]
			if pauseUntil(ctx, c.led.startOf(prev).Add(lengths[prev])); ctx.Err() != nil {
				return nil
			}
		}
		var err error
		switch ph {
		case steady:
			c.begin(steady, time.Now())
		case moving:
			err = c.move(ctx)
		case zombie:
			err = c.zombie(ctx)
		case partitioned:
			err = c.partition(ctx)
		case failing:
			err = c.kill(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func pauseUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// move asks the controller to move partition moved to the next node, and waits until etcd
// says it did.
func (c *clusterRun) move(ctx context.Context) error {
	s := c.view.snap()
	from := s.owner(moved)
	to := c.cc.Nodes[(slices.IndexFunc(c.cc.Nodes, func(n nodeConfig) bool { return n.ID == from })+1)%len(c.cc.Nodes)].ID
	c.begin(moving, time.Now())
	if _, err := c.cli.Put(ctx, moveKey(topic, moved), to); err != nil {
		return fmt.Errorf("asking for the move: %w", err)
	}
	c.Say("%s: asked the controller to move %s/%d from %s to %s (put %s)", c.phaseLabel(moving), topic, moved, from, to, moveKey(topic, moved))
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	s = c.view.wait(wctx, func(s *snapshot) bool { return s.owner(moved) == to && s.settled(moved) })
	cancel()
	if s == nil {
		return fmt.Errorf("%s/%d was not moved to %s within 15s", topic, moved, to)
	}
	c.Say("%s: etcd names %s the owner of %s/%d (epoch %d, routed at revision %d)", c.phaseLabel(moving), to, topic, moved,
		s.owners[moved].modRev, s.assign[moved].modRev)
	return nil
}

// controllerID returns the node that holds the controller's election.
func (c *clusterRun) controllerID(ctx context.Context) (string, error) {
	resp, err := c.cli.Get(ctx, electionName, clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return "", fmt.Errorf("finding the controller: %v", orFailed(err))
	}
	return string(resp.Kvs[0].Value), nil
}

// pickOwner returns the live node, other than the controller, that is granted the most
// partitions (the first by ID among equals), and those partitions with their epochs.
func (c *clusterRun) pickOwner(ctx context.Context) (string, map[int32]int64, error) {
	ctrl, err := c.controllerID(ctx)
	if err != nil {
		return "", nil, err
	}
	s := c.view.snap()
	best, most := "", 0
	for _, n := range c.cc.Nodes {
		if _, live := s.live[n.ID]; live && n.ID != ctrl && len(s.granted(n.ID)) > most {
			best, most = n.ID, len(s.granted(n.ID))
		}
	}
	if best == "" {
		return "", nil, fmt.Errorf("no live node but the controller (%s) owns a partition", ctrl)
	}
	parts := map[int32]int64{}
	for _, p := range s.granted(best) {
		parts[p] = s.owners[p].modRev
	}
	return best, parts, nil
}

func partsList(parts map[int32]int64) string {
	ps := make([]int32, 0, len(parts))
	for p := range parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return partitionList(ps)
}

// failedOver waits, up to d, until every partition of parts is granted anew (an epoch above
// the one it had) and routed to its new owner.
func (c *clusterRun) failedOver(ctx context.Context, parts map[int32]int64, d time.Duration) *snapshot {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.view.wait(wctx, func(s *snapshot) bool {
		for p, epoch := range parts {
			if g, ok := s.owners[p]; !ok || g.modRev <= epoch || !s.settled(p) {
				return false
			}
		}
		return true
	})
}

// rejoined waits, up to d, until node is live again under a lease other than old.
func (c *clusterRun) rejoined(ctx context.Context, node string, old int64, d time.Duration) *snapshot {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.view.wait(wctx, func(s *snapshot) bool {
		l, live := s.leases[node]
		return live && l != old
	})
}

// failoverTimeout bounds each failover the script waits for.
const failoverTimeout = 30 * time.Second

// zombie stops an owner (not the controller) with SIGSTOP, waits until its partitions are
// failed over (its lease expires, the controller waits out its grant, grants, adopts,
// routes), then continues it with SIGCONT: it finds its grants lapsed on its own clock and
// serves nothing of its old partitions, its clients keep calling it, and it rejoins under a
// new lease.
func (c *clusterRun) zombie(ctx context.Context) error {
	victim, parts, err := c.pickOwner(ctx)
	if err != nil {
		return err
	}
	label := c.phaseLabel(zombie)
	// The parent's own etcd client must not wait on the stopped member (its connections
	// stay open, unanswered): it watches through the others from now on.
	if err := c.watchWithout(ctx, victim); err != nil {
		return err
	}
	if moved, err := c.moveLeaderOff(ctx, victim); err != nil {
		return err
	} else if moved != "" {
		c.Say("%s: %s's etcd member was the raft leader: leadership moved to %s's first (see README: a raft leader paused and continued revokes live leases in etcd 3.7)",
			label, victim, moved)
	}
	oldLease := c.view.snap().leases[victim]
	c.mu.Lock()
	p := c.procs[victim]
	c.mu.Unlock()
	if err := pause(p.Pid(), true); err != nil {
		return fmt.Errorf("SIGSTOP %s: %w", victim, err)
	}
	at := time.Now()
	c.mu.Lock()
	c.stopped = victim
	c.mu.Unlock()
	c.begin(zombie, at)
	c.led.failover(zombie, victim, parts, at, "the SIGSTOP")
	c.Say("%s: %s (granted %s/%s) stopped with SIGSTOP (pid %d): its lease runs out in at most %ds", label, victim, topic,
		partsList(parts), p.Pid(), leaseTTL)
	s := c.failedOver(ctx, parts, failoverTimeout)
	failed := time.Since(at)
	if s != nil {
		c.Say("%s: every partition of %s failed over while it was stopped, %v after the SIGSTOP", label, victim, failed.Round(10*time.Millisecond))
	}
	if err := pause(p.Pid(), false); err != nil {
		return fmt.Errorf("SIGCONT %s: %w", victim, err)
	}
	cont := time.Now()
	c.mu.Lock()
	c.stopped = ""
	c.mu.Unlock()
	c.Say("%s: %s continued with SIGCONT after %v stopped; its clients call it still", label, victim, cont.Sub(at).Round(10*time.Millisecond))
	if s == nil {
		return fmt.Errorf("%s's partitions were not failed over within %v of its SIGSTOP", victim, failoverTimeout)
	}
	if s = c.rejoined(ctx, victim, oldLease, 15*time.Second); s == nil {
		return fmt.Errorf("%s did not rejoin under a new lease within 15s of its SIGCONT", victim)
	}
	c.Say("%s: %s is live again under a new lease, %v after its SIGCONT, with no partition", label, victim, time.Since(cont).Round(10*time.Millisecond))
	c.note(zombie, "%s (granted %s) stopped for %v: failed over %v after the SIGSTOP, live again under a new lease %v after the SIGCONT",
		victim, partsList(parts), cont.Sub(at).Round(10*time.Millisecond), failed.Round(10*time.Millisecond), time.Since(cont).Round(10*time.Millisecond))
	c.afterwards(zombie, victim, cont, "the SIGCONT")
	return nil
}

// moveLeaderOff moves etcd's raft leadership off node's member, if it has it, to another live
// member, and returns that member's node. The zombie phase stops a whole node process, its
// etcd member with it, which a host that runs etcd apart from its nodes never does; and
// etcd 3.7.3 lets a raft leader that was paused and continues revoke every lease its stale
// clock says expired: its lessor's expiry pass runs before its raft loop hears of the new
// term (the leadership check it makes first, ensureLeadership, trusts a raft tick that
// fires at once after the pause), and the revocations it proposes once it has stepped down
// are forwarded to the new leader and committed, live nodes' leases with them.
func (c *clusterRun) moveLeaderOff(ctx context.Context, node string) (string, error) {
	vn, _ := launch.NodeOf(c.cc.Nodes, node)
	st, err := c.cli.Status(ctx, vn.Member.ClientURL)
	if err != nil {
		return "", fmt.Errorf("etcd status of %s's member: %w", node, err)
	}
	if st.Leader != st.Header.MemberId {
		return "", nil
	}
	members, err := c.cli.MemberList(ctx)
	if err != nil {
		return "", err
	}
	var others []nodeConfig
	c.mu.Lock()
	for _, n := range c.cc.Nodes {
		if p := c.procs[n.ID]; n.ID != node && p != nil && p.Alive() {
			others = append(others, n)
		}
	}
	c.mu.Unlock()
	for _, n := range others {
		for _, m := range members.Members {
			if m.Name != n.Member.Name {
				continue
			}
			// MoveLeader goes to the leader itself.
			cli, err := newClient(vn.Member.ClientURL)
			if err != nil {
				return "", err
			}
			mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = cli.MoveLeader(mctx, m.ID)
			cancel()
			cli.Close()
			if err != nil {
				return "", fmt.Errorf("moving etcd's raft leadership off %s: %w", node, err)
			}
			return n.ID, nil
		}
	}
	return "", fmt.Errorf("no other live etcd member to move the raft leadership to from %s", node)
}

// watchWithout points the parent's etcd client and view at every live member but node's.
func (c *clusterRun) watchWithout(ctx context.Context, node string) error {
	var eps []string
	c.mu.Lock()
	for _, n := range c.cc.Nodes {
		if p := c.procs[n.ID]; n.ID != node && p != nil && p.Alive() {
			eps = append(eps, n.Member.ClientURL)
		}
	}
	c.mu.Unlock()
	cli, err := newClient(eps...)
	if err != nil {
		return err
	}
	c.clients = append(c.clients, cli)
	c.cli = cli
	return c.watch(ctx, cli)
}

// partition cuts an owner (not the controller) off from its peers and from etcd's control
// plane (its Transport and /node handler refuse, its view hears nothing, its keep-alives
// stop) while its clients and the state store still reach it; waits until its partitions
// are failed over; then heals it: it finds its grants lapsed, and rejoins under a new lease.
func (c *clusterRun) partition(ctx context.Context) error {
	victim, parts, err := c.pickOwner(ctx)
	if err != nil {
		return err
	}
	label := c.phaseLabel(partitioned)
	oldLease := c.view.snap().leases[victim]
	var ans cutAnswer
	if err := c.cut(ctx, victim, true, &ans); err != nil {
		return fmt.Errorf("cutting %s off: %w", victim, err)
	}
	at := time.Now()
	lapse := at.Add(time.Duration(ans.LapseInNs))
	c.mu.Lock()
	c.cutOff = victim
	c.mu.Unlock()
	c.begin(partitioned, at)
	c.led.failover(partitioned, victim, parts, lapse, "its grants' lapse on its clock")
	c.Say("%s: %s (granted %s/%s) cut off from its peers and from etcd's control plane; its clients and the store still reach it; its grants lapse in %v",
		label, victim, topic, partsList(parts), time.Duration(ans.LapseInNs).Round(time.Millisecond))
	s := c.failedOver(ctx, parts, failoverTimeout)
	failed := time.Since(at)
	if s != nil {
		c.Say("%s: every partition of %s failed over while it was cut off, %v after the cut", label, victim, failed.Round(10*time.Millisecond))
	}
	if err := c.cut(ctx, victim, false, nil); err != nil {
		return fmt.Errorf("healing %s: %w", victim, err)
	}
	healed := time.Now()
	c.mu.Lock()
	c.cutOff = ""
	c.mu.Unlock()
	c.Say("%s: %s healed after %v cut off", label, victim, healed.Sub(at).Round(10*time.Millisecond))
	if s == nil {
		return fmt.Errorf("%s's partitions were not failed over within %v of its cut", victim, failoverTimeout)
	}
	if s = c.rejoined(ctx, victim, oldLease, 15*time.Second); s == nil {
		return fmt.Errorf("%s did not rejoin under a new lease within 15s of its healing", victim)
	}
	c.Say("%s: %s is live again under a new lease, %v after its healing, with no partition", label, victim, time.Since(healed).Round(10*time.Millisecond))
	c.note(partitioned, "%s (granted %s) cut off for %v: its grants lapsed %v after the cut, failed over %v after the cut, live again under a new lease %v after the healing",
		victim, partsList(parts), healed.Sub(at).Round(10*time.Millisecond), time.Duration(ans.LapseInNs).Round(time.Millisecond),
		failed.Round(10*time.Millisecond), time.Since(healed).Round(10*time.Millisecond))
	c.afterwards(partitioned, victim, healed, "the healing")
	return nil
}

// afterwards notes, at the end of the run, what node's clients got through it after the
// moment after: they kept calling it, and it served them through its peers.
func (c *clusterRun) afterwards(ph phase, node string, after time.Time, what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.later = append(c.later, func() {
		d, a := c.led.through(node, after)
		c.notes[ph] = append(c.notes[ph], fmt.Sprintf("from %s to the end of the run its clients kept calling it: %d deliveries and %d acks answered 204 through it",
			what, d, a))
	})
}

// cut calls node's /admin/cut.
func (c *clusterRun) cut(ctx context.Context, node string, on bool, into *cutAnswer) error {
	addr := c.view.snap().known[node]
	v := "0"
	if on {
		v = "1"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/admin/cut?on="+v, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	if into != nil {
		return json.NewDecoder(resp.Body).Decode(into)
	}
	return nil
}

// kill kills the controller's node with SIGKILL, for good, and waits until its partitions
// are failed over.
func (c *clusterRun) kill(ctx context.Context) error {
	victim, err := c.controllerID(ctx)
	if err != nil {
		return err
	}
	label := c.phaseLabel(failing)
	s := c.view.snap()
	parts := map[int32]int64{}
	for _, p := range s.granted(victim) {
		parts[p] = s.owners[p].modRev
	}
	role := "the controller"
	if vn, err := launch.NodeOf(c.cc.Nodes, victim); err == nil {
		if st, err := c.cli.Status(ctx, vn.Member.ClientURL); err == nil && st.Leader == st.Header.MemberId {
			role += ", and its etcd member the raft leader"
		}
	}
	c.mu.Lock()
	p := c.procs[victim]
	c.victim = victim
	c.mu.Unlock()
	at := time.Now()
	p.Kill()
	c.begin(failing, at)
	c.led.failover(failing, victim, parts, at, "the kill")
	c.Say("%s: %s (%s) killed with SIGKILL (pid %d), for good; it was granted %s/%s", label, victim, role, p.Pid(), topic, partsList(parts))
	if s = c.failedOver(ctx, parts, failoverTimeout); s == nil {
		return fmt.Errorf("%s's partitions were not failed over within %v", victim, failoverTimeout)
	}
	c.Say("%s: every partition of %s failed over, %v after the kill", label, victim, time.Since(at).Round(10*time.Millisecond))
	c.note(failing, "%s (%s; granted %s) killed: failed over %v after the kill", victim, strings.TrimPrefix(role, "the "),
		partsList(parts), time.Since(at).Round(10*time.Millisecond))
	return nil
}
