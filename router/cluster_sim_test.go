package router_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"narad.dev/consume/inflight"
	"narad.dev/consume/router"
)

// A cluster under random schedules: two owners ("a" owns partition 0, "b" partition 1) and a
// gateway ("g", owning nothing) on one network with a 1 ms round trip and jitter that
// reorders frames. Consumers take records on any node, with and without waiting (long-polls
// parked on tokens, notified and claiming), ack and nack them through any node (forwarded to
// the owner), while time passes, nodes restart (gracefully or crashing: their tokens and
// leases go), and nodes drop off the network for a while. After every step the promises hold
// (DESIGN invariants 1 to 5, 8):
//
//   - a record is never leased to two live holders, whichever nodes they consumed on;
//   - an ack, extend or nack takes effect only with the live lease's handle; through a node
//     cut off from the owner it answers an error and changes nothing;
//   - a record acked comes back only after its owner crashed within the documented window;
//   - nothing is lost and nothing is stuck: at the end, with every node up, every record
//     produced is delivered and acked, through the gateway alone.
//
// simSlack bounds how much earlier than the owner's a lease's Expiry is on the node that
// consumed it: a one-way trip with its jitter (the simulation's network: rtt/2 plus jitter
// below rtt), rounded up.
const simSlack = 2 * rtt

type clusterSim struct {
	c        *cluster
	rt       *rapid.T
	ids      []string
	produced map[int32]int64
	held     []simLease
	live     map[simKey]simLease
	ackedAt  map[simKey]time.Time
	mayBack  map[simKey]bool
	dead     map[inflight.Handle]bool
	polls    []chan polled // long-polls in flight
	down     map[string]bool
	started  map[string]time.Time // when each node last (re)started
}

// polled is what a long-poll returned, and when.
type polled struct {
	msgs []router.Message
	err  error
	at   time.Time
}

var partitionOwner = map[int32]string{0: "a", 1: "b"}

func (s *clusterSim) node(rt *rapid.T) *member {
	return s.c.nodes[rapid.SampledFrom(s.ids).Draw(rt, "node")]
}

func (s *clusterSim) produce(rt *rapid.T) {
	p := int32(rapid.IntRange(0, 1).Draw(rt, "partition"))
	if s.down[partitionOwner[p]] {
		rt.Skip("its owner is cut off")
	}
	n := rapid.IntRange(1, 3).Draw(rt, "records")
	s.c.produce(p, n)
	s.produced[p] += int64(n)
}

func (s *clusterSim) consume(rt *rapid.T) {
	m := s.node(rt)
	msgs, err := m.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: rapid.IntRange(1, 4).Draw(rt, "max")})
	if err != nil && !errors.Is(err, router.ErrTransport) && !errors.Is(err, router.ErrUnavailable) {
		rt.Fatalf("Consume on %s: %v", m.id, err)
	}
	for _, msg := range msgs {
		s.delivered(msg, time.Now())
	}
}

// longPoll starts a consume that waits; what it returns is checked when it is collected.
func (s *clusterSim) longPoll(rt *rapid.T) {
	m := s.node(rt)
	wait := rapid.SampledFrom([]time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second}).Draw(rt, "wait")
	max := rapid.IntRange(1, 3).Draw(rt, "max")
	ch := make(chan polled, 1)
	go func() {
		msgs, err := m.node.Consume(context.Background(), "orders", router.ConsumeOptions{Wait: wait, Max: max})
		ch <- polled{msgs, err, time.Now()}
	}()
	s.polls = append(s.polls, ch)
	synctest.Wait()
	s.collect()
}

// collect takes what the finished long-polls returned, in the order they returned.
func (s *clusterSim) collect() {
	var done []polled
	keep := s.polls[:0]
	for _, ch := range s.polls {
		select {
		case p := <-ch:
			done = append(done, p)
		default:
			keep = append(keep, ch)
		}
	}
	s.polls = keep
	slices.SortStableFunc(done, func(x, y polled) int { return x.at.Compare(y.at) })
	for _, p := range done {
		if p.err != nil && !errors.Is(p.err, router.ErrTransport) && !errors.Is(p.err, router.ErrUnavailable) && !errors.Is(p.err, router.ErrClosed) {
			s.rt.Fatalf("long-poll: %v", p.err)
		}
		for _, msg := range p.msgs {
			s.delivered(msg, p.at)
		}
	}
}

// delivered checks a delivery made at at against the promises and records its lease.
func (s *clusterSim) delivered(m router.Message, at time.Time) {
	k := simKey{m.Partition, m.Offset}
	if m.Offset >= s.produced[m.Partition] {
		s.rt.Fatalf("delivered %v, never produced", k)
	}
	// Replies cross the network at their own pace, so two deliveries of one record may come
	// in the other order than their leases were granted: the leases must not overlap,
	// unless one died with its owner's process. One leased by the owner's previous
	// process, whose reply was still on its way when it restarted, died with that process
	// (its ack answers ErrGone): it is neither a second holder nor a delivery after an ack.
	// A lease another node granted reaches the consumer with its time left counted from
	// when the request left, so its Expiry here is up to a trip (simSlack) before the
	// owner's: the estimates of its grant and end are early by as much, never late.
	granted := m.Expiry.Add(-simVisibility) // on the owner's clock, before it reached here at at
	l := simLease{msg: m, deadline: m.Expiry}
	s.held = append(s.held, l)
	if !granted.After(s.started[partitionOwner[k.partition]]) {
		s.dead[m.Receipt] = true
		return
	}
	if live, ok := s.live[k]; ok && !s.dead[live.msg.Receipt] &&
		granted.Add(simSlack).Before(live.deadline) && live.msg.Expiry.Add(-simVisibility).Before(m.Expiry) {
		s.rt.Fatalf("%v leased to a second holder at %v while another lease runs from %v to %v", k, granted, live.msg.Expiry.Add(-simVisibility), live.deadline)
	}
	if when, acked := s.ackedAt[k]; acked {
		if !s.mayBack[k] {
			s.rt.Fatalf("%v delivered again after its ack at %v, with no crash to explain it", k, when)
		}
		delete(s.ackedAt, k)
	}
	delete(s.mayBack, k)
	s.live[k] = l
}

// settle acks (waiting, or with AckAsync) or nacks a held handle through a random node.
func (s *clusterSim) settle(rt *rapid.T) {
	if len(s.held) == 0 {
		rt.Skip("nothing held")
	}
	i := rapid.IntRange(0, len(s.held)-1).Draw(rt, "held")
	l := s.held[i]
	via := s.node(rt)
	ack := rapid.Bool().Draw(rt, "ack")
	var err error
	sent := time.Now()
	switch {
	case ack && rapid.Bool().Draw(rt, "async"):
		answered := make(chan error, 1)
		via.node.AckAsync("orders", l.msg.Receipt, func(err error) { answered <- err })
		err = <-answered
	case ack:
		err = via.node.Ack(context.Background(), "orders", l.msg.Receipt)
	default:
		err = via.node.Nack(context.Background(), "orders", l.msg.Receipt, 0)
	}
	k := simKey{l.msg.Partition, l.msg.Offset}
	owner := partitionOwner[k.partition]
	if via.id != owner && s.down[owner] {
		if !errors.Is(err, router.ErrTransport) && !errors.Is(err, router.ErrUnavailable) {
			rt.Fatalf("a settle through %s, cut off from %s, answered %v", via.id, owner, err)
		}
		return // not applied: the handle is still held
	}
	s.held = slices.Delete(s.held, i, i+1)
	// The owner applies it somewhere between the call and its return: a lease that ends in
	// between may answer either way.
	liveLease, lapsing := false, false
	if live, ok := s.live[k]; ok && live.msg.Receipt == l.msg.Receipt && !s.dead[l.msg.Receipt] {
		liveLease = time.Now().Before(live.deadline)
		lapsing = !liveLease && sent.Before(live.deadline.Add(simSlack))
	}
	_, acked := s.ackedAt[k]
	switch {
	case liveLease && err != nil:
		rt.Fatalf("settling the live lease of %v answered %v", k, err)
	case lapsing && err == nil, liveLease:
		delete(s.live, k)
		if ack {
			s.ackedAt[k] = time.Now()
		}
	case lapsing:
		delete(s.live, k) // it lapsed first: ErrGone
	case err == nil:
		rt.Fatalf("settling a lapsed handle of %v succeeded", k)
	case acked && !s.mayBack[k] && !errors.Is(err, inflight.ErrAlreadySettled):
		rt.Fatalf("settling acked %v answered %v", k, err)
	case !acked && !errors.Is(err, inflight.ErrGone):
		rt.Fatalf("settling lapsed %v answered %v", k, err)
	}
}

func (s *clusterSim) sleep(rt *rapid.T) {
	time.Sleep(rapid.SampledFrom([]time.Duration{10 * time.Millisecond, 200 * time.Millisecond, time.Second, 3 * time.Second, simVisibility}).Draw(rt, "sleep"))
	synctest.Wait()
	s.collect()
}

// restart restarts a node, gracefully or crashing; the leases of its partitions go.
func (s *clusterSim) restart(rt *rapid.T) {
	m := s.node(rt)
	crash := rapid.Bool().Draw(rt, "crash")
	now := time.Now()
	fsys := m.fs
	if crash {
		fsys = m.fs.ProcessCrash()
		for k, at := range s.ackedAt {
			if partitionOwner[k.partition] == m.id && now.Sub(at) < processCrashWindow {
				s.mayBack[k] = true
			}
		}
	}
	m.node.Close()
	s.started[m.id] = time.Now()
	synctest.Wait()
	s.collect()                  // long-polls on it answered ErrClosed
	time.Sleep(time.Microsecond) // so the next process's leases are granted after started
	m.fs = fsys
	m.start()
	for _, l := range s.held {
		if partitionOwner[l.msg.Partition] == m.id {
			s.dead[l.msg.Receipt] = true
		}
	}
	for k := range s.live {
		if partitionOwner[k.partition] == m.id {
			delete(s.live, k)
		}
	}
}

// cut makes a node unreachable (every call to it fails at once), or brings it back.
func (s *clusterSim) cut(rt *rapid.T) {
	m := s.node(rt)
	s.down[m.id] = !s.down[m.id]
	s.c.net.SetDown(m.id, s.down[m.id])
}

// drain ends a schedule: every node up, the long-polls answered, then everything consumed
// through the gateway and acked there. Every record produced must end acked.
func (s *clusterSim) drain() {
	for _, id := range s.ids {
		s.down[id] = false
		s.c.net.SetDown(id, false)
	}
	time.Sleep(10 * time.Second)
	synctest.Wait()
	s.collect()
	if len(s.polls) > 0 {
		s.rt.Fatalf("%d long-polls still waiting past their wait", len(s.polls))
	}
	time.Sleep(simVisibility) // what is held lapses
	s.held = nil
	g := s.c.nodes["g"]
	for round := 0; ; round++ {
		msgs, err := g.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 100})
		if err != nil {
			s.rt.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			s.delivered(m, time.Now())
			if err := g.ack(m); err != nil {
				s.rt.Fatalf("drain ack: %v", err)
			}
			s.ackedAt[simKey{m.Partition, m.Offset}] = time.Now()
		}
		if round > 1000 {
			s.rt.Fatal("the drain does not end")
		}
	}
	for p, n := range s.produced {
		for off := range n {
			if _, ok := s.ackedAt[simKey{p, off}]; !ok {
				s.rt.Fatalf("record %d/%d lost: produced, never acked", p, off)
			}
		}
	}
}

func TestClusterUnderRandomSchedules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(rt *rapid.T) {
			c := newCluster(t, rtt, map[string][]int32{"a": {0}, "b": {1}, "g": nil}, func(_ string, cfg *router.Config) {
				cfg.Topic = func(string) router.TopicConfig {
					return router.TopicConfig{VisibilityTimeout: simVisibility, MaxInFlight: 8, MaxAckedAhead: 8}
				}
			})
			c.net.Jitter = rtt
			c.net.Seed = rapid.Uint64().Draw(rt, "seed")
			s := &clusterSim{c: c, rt: rt, ids: []string{"a", "b", "g"},
				produced: map[int32]int64{}, live: map[simKey]simLease{}, ackedAt: map[simKey]time.Time{},
				mayBack: map[simKey]bool{}, dead: map[inflight.Handle]bool{}, down: map[string]bool{},
				started: map[string]time.Time{}}
			defer func() {
				for _, m := range c.nodes {
					m.node.Close() // a failed step may have left one closed
				}
				synctest.Wait()
			}()
			rt.Repeat(map[string]func(*rapid.T){
				"produce":  s.produce,
				"consume":  s.consume,
				"longPoll": s.longPoll,
				"settle":   s.settle,
				"settle2":  s.settle,
				"sleep":    s.sleep,
				"restart":  s.restart,
				"cut":      s.cut,
			})
			s.drain()
		})
	})
}
