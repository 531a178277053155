package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/tokens"
)

// One record, one promise (invariant 16): an owner never has more records promised to other
// nodes (notified and held for a claim) than it could hand out.
//
// The tracker mirrors each owner process's holds from the frames: a Notify the owner sends
// (seen by its Transport, at the instant it fired the token) makes a hold for the node told, until
// tokens.DefaultHold later; a claim (a Consume frame with the Claim byte) or a Pass arriving
// from that node ends its oldest live hold, as does a Notify to a node the network fails at
// once. An answer other than yes to the Notify ends the hold that Notify made and no other,
// when it reaches the owner's Transport, just before the owner reads it
// (tokens.Queue.End): a Notify the network delivered twice draws two answers, a claim from
// the copy that spent the node's token and a pass from the other, which found none, and
// the pass arriving after the claim retired the node's oldest hold must not also end a
// later one, whose Notify is still on its way (the owner did, seed 70578). A Notify whose
// answer has not reached the owner when the notification's budget runs out ends its hold
// then, when the owner abandons it, whatever kept the answer away (the network lost it or its
// reply, a partition cut it off, its node hangs or is paused past the budget, the lying peer
// keeps silent). A process's holds end with it.
//
// What the owner could hand out is bounded from above by the model: the offsets of its
// partitions below the high watermark that are neither certainly settled in its live
// process nor certainly leased by it (a lease with a settle on its way counts as not
// leased: the owner may have applied the settle already; so does one granted, and an ack
// answered, at the instant of the check, which may have come after the owner fired the
// token). The owner's own estimate (inflight.Shard.Available, which errs high) never exceeds
// that bound, so more live holds than the bound is a broken promise, checked at every
// notification and after every step.

type hold struct {
	to          string
	made, until time.Time
	id          int  // which of its process's notifications made it
	answered    bool // the Notify's answer reached the owner within the notification's budget
}

// notifyBudget is how long an owner waits for the answer to a notification before it
// abandons the hold it made: the router's budget for a Notify, 250 ms or half of
// Config.HoldTimeout if shorter (the run's nodes keep the default hold, a second).
const notifyBudget = 250 * time.Millisecond

// notifySent records a Notify that owner sent to node to, and returns the process that sent
// it and which of its notifications it is, for notifyAnswered. Called with s.mu held.
func (s *sim) notifySent(owner, to string) (e *epoch, id int) {
	nd := s.byID[owner]
	if nd == nil || len(nd.epochs) == 0 {
		return nil, 0
	}
	e = nd.cur()
	now := time.Now()
	e.notified++
	if at, ok := e.credit[to]; ok && at.Equal(now) {
		// A claim from to arrived at this very instant, before this Notify was seen
		// leaving: the owner retired the hold it made for it.
		delete(e.credit, to)
		return e, e.notified
	}
	e.holds = append(e.holds, hold{to: to, made: now, until: now.Add(tokens.DefaultHold), id: e.notified})
	s.checkPromises(e)
	return e, e.notified
}

// notifyAnswered sees the answer reply to process e's notification id reach it: an answer
// other than yes ends the hold it made; a yes within the notification's budget keeps it; at
// the budget's end or later, the owner abandoned it then. Called with s.mu held.
func (s *sim) notifyAnswered(e *epoch, id int, reply []byte) {
	now := time.Now()
	answers, err := wire.DecodeReply(reply)
	yes := err == nil && len(answers) == 1 && answers[0].Status == wire.StatusOK
	for i := range e.holds {
		h := &e.holds[i]
		switch {
		case h.id != id:
			continue
		case !yes:
			e.holds = slices.Delete(e.holds, i, i+1)
		case now.Before(h.made.Add(notifyBudget)):
			h.answered = true
		}
		return
	}
}

// unanswered records that the Notify owner sent to node to will get no answer: the owner
// abandons its hold when the notification's budget runs out. Called with s.mu held.
func (s *sim) unanswered(owner, to string) {
	nd := s.byID[owner]
	if nd == nil || len(nd.epochs) == 0 {
		return
	}
	e := nd.cur()
	for i := len(e.holds) - 1; i >= 0; i-- {
		if h := &e.holds[i]; h.to == to && h.until.After(h.made.Add(notifyBudget)) {
			h.until = h.made.Add(notifyBudget)
			return
		}
	}
}

// arrived sees a frame reach process e from node from.
func (s *sim) arrived(e *epoch, from string, frame []byte) {
	if len(frame) == 0 {
		return
	}
	switch frame[0] {
	case wire.OpConsume:
		req, err := wire.DecodeRequest(frame, wire.Newest)
		if err != nil || !req.Consume.Claim || !e.nd.knows(wire.V5) {
			return
		}
	case wire.OpConsumeBatch:
		// Each claim of the batch retires a hold, as a claim of its own does.
		for _, member := range consumesOf(frame) {
			s.arrived(e, from, member)
		}
		return
	case wire.OpPass:
		if !e.nd.knows(wire.V4) {
			return
		}
	default:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retire(e, from)
}

// notifyFailed records that a Notify from owner to node to failed at once (to is off the
// network), so the owner retired the hold it made. Called with s.mu held.
func (s *sim) notifyFailed(owner, to string) {
	if nd := s.byID[owner]; nd != nil && len(nd.epochs) > 0 {
		s.retire(nd.cur(), to)
	}
}

// retire ends from's oldest live hold in process e, as tokens.Queue.Retire does. Called with
// s.mu held.
func (s *sim) retire(e *epoch, from string) {
	now := time.Now()
	s.expireHolds(e, now)
	for i, h := range e.holds {
		if h.to == from {
			e.holds = append(e.holds[:i], e.holds[i+1:]...)
			return
		}
	}
	if e.credit == nil {
		e.credit = map[string]time.Time{}
	}
	e.credit[from] = now
}

func (s *sim) expireHolds(e *epoch, now time.Time) {
	keep := e.holds[:0]
	for _, h := range e.holds {
		// At an equal instant the owner may have abandoned it already: it ends.
		if now.Before(h.until) && (h.answered || now.Before(h.made.Add(notifyBudget))) {
			keep = append(keep, h)
		}
	}
	e.holds = keep
}

// checkPromises checks process e's live holds against what it could hand out. Called with
// s.mu held.
func (s *sim) checkPromises(e *epoch) {
	if !e.end.IsZero() {
		return
	}
	now := time.Now()
	s.expireHolds(e, now)
	if len(e.holds) == 0 {
		return
	}
	if bound := s.couldHandOut(e, now); len(e.holds) > bound {
		s.failKind(KindPromise, "%s#%d holds %d records promised to other nodes (%v), more than the %d it could hand out (one record, one promise)",
			e.nd.id, e.n, len(e.holds), e.holds, bound)
	}
}

// couldHandOut bounds from above what process e could hand out at now. Called with s.mu
// held.
func (s *sim) couldHandOut(e *epoch, now time.Time) int {
	n := 0
	for _, p := range append(slices.Clone(e.nd.parts), e.movedOut...) {
		hwm := s.logs.Log(topic, p).HighWatermark()
		for off := range hwm {
			r := s.records[key{s.inc, p, off}]
			if r == nil {
				n++
				continue
			}
			// A quarantined record above the frontier may count in the owner's estimate
			// (inflight.Shard.Available errs high once a shard holds more than a few hundred
			// quarantined), so a rejected one is not taken for settled here (reject.go): the
			// bound stays an upper bound either way.
			if s.settledBefore(r, now) && !r.maybeRejected {
				continue
			}
			leased := false
			for _, l := range r.leases {
				// One granted at this very instant may have come after the owner fired the
				// token (its Transport sees the Notify after the firing, at the same instant).
				if l.ep == e && l.settling == 0 && l.granted.Before(now) && now.Before(l.endMin) {
					leased = true
					break
				}
			}
			if !leased {
				n++
			}
		}
	}
	return n
}

// settledBefore is settledSure by an ack answered before now: one answered at this very
// instant may have been applied after the owner fired the token.
func (s *sim) settledBefore(r *record, now time.Time) bool {
	if !r.deletedAt.IsZero() {
		return false // as settledSure
	}
	for _, a := range r.acks {
		if a.r.Before(now) && !s.undoable(r, a) {
			return true
		}
	}
	return false
}

// knows reports whether nd's release speaks wire version v.
func (nd *node) knows(v wire.Version) bool {
	return nd.version == 0 || wire.Version(nd.version) >= v
}

// One refusal per upgrade (invariant 14): an owner on an older release costs at most one
// refused request every 2 minutes per op or field it does not know. The tracker sits in
// each node's Transport, where a request leaves and its reply comes back: a refusal (status
// 6 for an op; 3 for a Consume frame, of the newest optional field it carries, which is how
// the requester reads it, in either reply format) is learned when its reply arrives, per
// requesting process, owner and what was refused; a request that left after the requester
// learned of a refusal, within 2 minutes of it, and is refused again breaks the promise.

// refusal is what an older owner refused a requesting process.
type refusal struct {
	from  *epoch
	owner string
	what  string
}

// transport is a node's side of the network, seen by the refusal tracker. prompt says it
// is a promptTransport.
type transport struct {
	s      *sim
	nd     *node
	inner  router.Transport
	prompt bool
}

// promptTransport is a transport that says so: its Call returns once ctx is done.
type promptTransport struct{ transport }

func (promptTransport) HonorsContext() {}

func (t transport) Call(ctx context.Context, to string, frame []byte) ([]byte, error) {
	sent := time.Now() // when the node decided to send it
	var notifier *epoch
	var notification int
	if len(frame) > 0 && frame[0] == wire.OpNotify {
		t.s.mu.Lock()
		notifier, notification = t.s.notifySent(t.nd.id, to)
		t.s.mu.Unlock()
	}
	if err := sleep(ctx, t.s.tieBreak(t.nd.id, to, frame)); err != nil {
		return nil, err
	}
	reply, err := t.inner.Call(ctx, to, frame)
	if err == nil {
		if notifier != nil {
			t.s.mu.Lock()
			t.s.notifyAnswered(notifier, notification, reply)
			t.s.mu.Unlock()
		}
		t.s.refused(t.nd, to, sent, frame, reply)
	}
	if t.s.opts.Plant == PlantLateReply && t.prompt && err == nil && len(consumesOf(frame)) > 0 {
		time.Sleep(time.Second) // whatever ctx does, though the transport says it honours it
	}
	return reply, err
}

// refused sees a reply reach node nd from owner to, for a frame that left at sent.
func (s *sim) refused(nd *node, to string, sent time.Time, frame, reply []byte) {
	what := ""
	malformed := false // a consume frame refused for a field the owner does not know
	switch {
	case len(frame) == 0:
	case len(reply) > 3 && reply[0] == 0 && reply[1] == 1 && reply[2] == wire.StatusUnsupported,
		len(reply) > 2 && reply[0] == 0xC5 && reply[1] == wire.StatusUnsupported:
		what = fmt.Sprintf("op %d", frame[0])
	case frame[0] == wire.OpConsume:
		r, err := wire.DecodeConsumeReply(memberReply(frame, reply, 0))
		if malformed = err == nil && r.Status == wire.StatusBadRequest; malformed {
			what = newestConsumeField(frame)
		}
	}
	if what == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if malformed {
		s.consumesRefused = append(s.consumesRefused, consumeRefused{from: nd, owner: to, sent: sent})
	}
	s.report.Refusals++
	k := refusal{nd.cur(), to, what}
	if learned, ok := s.refusals[k]; ok && sent.After(learned) && sent.Before(learned.Add(2*time.Minute)) {
		kind := KindRefusals
		if malformed {
			kind = KindFieldRefusals
		}
		if what == "op 5" || what == "op 10" || what == "op 11" {
			kind = KindOldOwner400 // the same root: the consume ops have no refusal memory
		}
		s.failKind(kind, "%s refused %s from %s#%d again: the request left %v after the requester learned of the last refusal (at most one refused request every 2 minutes per op or field)",
			to, what, nd.id, k.from.n, sent.Sub(learned))
	}
	if learned, ok := s.refusals[k]; !ok || now.After(learned.Add(2*time.Minute)) {
		s.refusals[k] = now
	}
}

// tieBreak is a delay below a microsecond, drawn from the seed, the link, the op and how
// many frames of the op the link carried before, so that frames and timers that would meet
// at one instant of the fake clock come in an order the seed decides, not the scheduler.
func (s *sim) tieBreak(from, to string, frame []byte) time.Duration {
	op := byte(0)
	if len(frame) > 0 {
		op = frame[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lk := link{from, to, op | 0x80}
	s.linkCalls[lk]++
	return time.Duration(1 + mix(s.seed, hashString(from), hashString(to), uint64(op), s.linkCalls[lk])%999)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newestConsumeField names the newest optional field a consume frame carries, the one an
// owner on an older release that refuses the frame does not know: the requester sends the
// frame again without it (and then without the next, should the owner refuse that too).
func newestConsumeField(frame []byte) string {
	req, err := wire.DecodeRequest(frame, wire.Newest)
	switch {
	case err != nil:
		return ""
	case len(req.Records) > 0:
		return "the consume frame's riding acks"
	case req.Consume.Compact:
		return "the consume frame's Compact flag"
	case req.Consume.Reserve:
		return "the consume frame's Reserve flag"
	case req.Consume.Headers:
		return "the consume frame's Headers flag"
	case req.Consume.RelativeExpiry:
		return "the consume frame's relative expiry"
	case req.Consume.Max > 1:
		return "the consume frame's Max"
	case req.Consume.Claim:
		return "the consume frame's Claim byte"
	}
	return ""
}

// consumeRefused is a consume frame an older owner refused as malformed.
type consumeRefused struct {
	from  *node
	owner string
	sent  time.Time
}

// consumeFields are the wire versions that brought each optional field of a consume frame
// (Claim, Max, relative expiry, Headers, Reserve, riding acks, compact deliveries): an owner
// on a release before one refuses a frame carrying it, and the requester sends it again
// without.
var consumeFields = []wire.Version{wire.V5, wire.V6, wire.V7, wire.V9, wire.V11, wire.V16, wire.V16}

// consumeFieldsLearnt is how many consume frames from requester that left at since or later
// owner refused as malformed, at most one per consume field requester knows and owner does
// not: the round trips requester spent learning owner's release.
func (s *sim) consumeFieldsLearnt(requester, owner *node, since time.Time) int {
	unknown := 0
	for _, v := range consumeFields {
		if requester.knows(v) && !owner.knows(v) {
			unknown++
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	refused := 0
	for _, r := range s.consumesRefused {
		if r.from == requester && r.owner == owner.id && !r.sent.Before(since) {
			refused++
		}
	}
	return min(refused, unknown)
}
