package sim

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/tokens"
)

// The lying peer. In some runs (drawn from a stream of its own) a peer that is no
// router.Node joins the network, named by no node's routes, and now and then sends the
// nodes frames for requests it never had: notifications of records of the topic (it owns
// no partition of it), cancels naming request ids (at random, or ids it saw other nodes
// send an owner: a cancel is keyed by its requester, so it must give back nothing of
// theirs), passes of holds it was never given, and registrations of tokens of its own. It
// answers the notifications its tokens bring it with yes (and never claims), a pass, or
// silence; once the faults heal it passes every one and forges nothing more.
//
// A node believes a peer only where its routes and tokens back it: each forged
// notification must be passed (StatusPass), and counted in the node's
// Stats().Remote.Unbacked; no node ever sends the peer a consume, a cancel or a settle
// (only notifications, for its own tokens); and nothing it forged may make a consumer
// receive a record not produced, not leased by its owner, or leased twice (the other
// checks).

// liarID names the lying peer on the network.
const liarID = "x0"

// liar is the lying peer of a run.
type liar struct {
	rng *rand.Rand // its own stream: what it forges, to whom
	wg  sync.WaitGroup
	// sniffed holds, per node, the request ids of the latest consumes other nodes sent it,
	// and answers counts the notifications the peer answered; healed says the faults
	// healed. Guarded by sim.mu.
	sniffed map[string][]uint64
	answers uint64
	healed  bool
}

// planLiar turns the lying peer on in some runs: it joins the network, and forging is a
// step of the workload.
func (s *sim) planLiar() {
	lr, on := s.degradeClass(0x6c6961722e73696d, s.opts.Liar) // "liar.sim"
	if !on {
		return
	}
	s.liar = &liar{rng: lr, sniffed: map[string][]uint64{}}
	s.nw.Join(liarID, s.liarServe)
	s.weights = append(s.weights, weighted{"forge", 2, s.forgeFrames})
}

// forgeFrames sends one to three forged frames to nodes, each in a goroutine of its own
// that gives up after a second (a node that hangs never answers).
func (s *sim) forgeFrames() {
	lr := s.liar.rng
	tr := s.nw.Transport(liarID)
	for range 1 + lr.IntN(3) {
		to := s.nodes[lr.IntN(len(s.nodes))]
		req := wire.Request{Topic: topic}
		switch lr.IntN(7) {
		case 0, 1, 2:
			req.Op, req.Hold = wire.OpNotify, tokens.DefaultHold
		case 3, 4:
			req.Op, req.RequestID = wire.OpCancel, lr.Uint64()
			s.mu.Lock()
			if ids := s.liar.sniffed[to.id]; len(ids) > 0 && lr.IntN(2) == 0 {
				req.RequestID = ids[lr.IntN(len(ids))]
			}
			s.mu.Unlock()
		case 5:
			req.Op = wire.OpPass
		default:
			req.Op, req.Topic = wire.OpRegister, ""
			req.Registrations = []wire.Registration{{Topic: topic, TTL: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}[lr.IntN(2)]}}
		}
		frame, err := wire.EncodeRequest(req)
		if err != nil {
			s.fatalf("forging op %d: %v", req.Op, err)
		}
		s.mu.Lock()
		s.report.Faults.Forged++
		if req.Op == wire.OpNotify {
			s.report.Faults.ForgedNotifies++
		}
		s.mu.Unlock()
		s.logf("the lying peer sends %s to %s", describeFrame(frame), to.id)
		s.liar.wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			tr.Call(ctx, to.id, frame)
		})
	}
}

// liarServe is the lying peer's side of the network: it answers a notification its own
// tokens brought it with yes, a pass or silence (a pass once the faults healed), drawn
// from the seed and how many it answered, so that concurrent calls do not move the draws
// of one another. No node has any other reason to call it (see liar.observe).
func (s *sim) liarServe(ctx context.Context, from string, frame []byte) ([]byte, error) {
	if len(frame) == 0 || frame[0] != wire.OpNotify {
		return wire.EncodeReply([]wire.Answer{{Status: wire.StatusUnsupported, Message: "the lying peer serves nothing"}}), nil
	}
	s.mu.Lock()
	s.liar.answers++
	answer := mix(s.seed, hashString(from), s.liar.answers) % 3
	if s.liar.healed {
		answer = 1
	}
	switch answer {
	case 0: // yes, and no claim follows: the hold lapses
		s.mu.Unlock()
		return wire.EncodeReply([]wire.Answer{{Status: wire.StatusOK}}), nil
	case 1: // a pass: the owner retires the hold when the answer reaches it
		if owner := s.byID[from]; owner != nil && len(owner.epochs) > 0 {
			s.retire(owner.cur(), liarID)
		}
		s.mu.Unlock()
		return wire.EncodeReply([]wire.Answer{{Status: wire.StatusPass}}), nil
	}
	s.unanswered(from, liarID)
	s.mu.Unlock()
	// Silence until the caller gives up; a duplicated frame's copy, whose context never
	// ends, gives up after a second.
	if err := sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	return nil, context.DeadlineExceeded
}

// observe sees a frame from or to the lying peer (it reports whether it was one): no node
// sends the peer anything but a notification, and it remembers the request ids of the
// consumes the nodes send each other, for the peer's cancels. Called with s.mu held.
func (l *liar) observe(s *sim, from, to string, frame []byte) bool {
	switch {
	case to == liarID:
		if frame[0] != wire.OpNotify {
			s.failKind(KindBelievedLiar, "%s sent the lying peer %s, which no route names and which has nothing to serve", from, describeFrame(frame))
		}
		return true
	case from == liarID:
		return true
	case !l.healed:
		for _, member := range consumesOf(frame) {
			if req, err := wire.DecodeRequest(member, wire.Newest); err == nil {
				ids := append(l.sniffed[to], req.Consume.RequestID)
				l.sniffed[to] = ids[max(0, len(ids)-8):]
			}
		}
	}
	return false
}

// forgedServed checks process e's answer to a frame the lying peer sent it: a
// notification is passed, and counted unbacked (checkStep compares the count).
func (s *sim) forgedServed(e *epoch, frame, reply []byte) {
	if len(frame) == 0 || frame[0] != wire.OpNotify {
		return
	}
	answers, err := wire.DecodeReply(reply)
	if err != nil || len(answers) != 1 {
		s.failfKind(KindBelievedLiar, "%s#%d answered a forged notification with an unreadable reply (%v)", e.nd.id, e.n, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch answers[0].Status {
	case wire.StatusPass:
		e.forgedPassed++
	case wire.StatusOK:
		s.failKind(KindBelievedLiar, "%s#%d answered yes to a notification of the lying peer, which owns no partition of %s and holds no token of it",
			e.nd.id, e.n, topic)
	}
}

// healLiar has the lying peer pass every notification from now on, and forge nothing more.
func (s *sim) healLiar() {
	if s.liar == nil {
		return
	}
	s.mu.Lock()
	s.liar.healed = true
	s.mu.Unlock()
}
