package router

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"narad.dev/consume/internal/acklane"
	"narad.dev/consume/internal/budget"
	"narad.dev/consume/internal/wire"
)

// Forwarding settles to another node: the lanes to each owner, the RPCs that carry one
// settle or an AckBatch and read the owner's answers, and exchange, the Call with a budget
// that every RPC to another node makes (settles, consumes, registrations, notifications,
// cancels, a topic's statuses and purges).

// Transport carries node-to-node frames: one request frame to a node, its reply frame back.
// err != nil means no reply came back (a 502 for the acks it carried); a peer's refusal
// travels inside the reply. It must be safe for concurrent use. The receiving host hands the
// frame to that node's Node.Serve.
type Transport interface {
	Call(ctx context.Context, to string, frame []byte) ([]byte, error)
}

// ContextTransport is an optional capability of a Transport, found by type assertion: its
// Call returns promptly once ctx is done, as an http.Client's does (nodehttp.Transport and
// routertest's network are such). The node then makes each call from the goroutine that
// waits for its reply. A plain Transport's calls each run in a goroutine of their own, which
// the node stops waiting for at the call's deadline, so that a Call that ignores its context
// cannot hold an ack, a consume or Close past its budget; that goroutine is more than half
// of what a lone forwarded ack costs over an in-memory network.
type ContextTransport interface {
	Transport
	// HonorsContext is never called: implementing it is the promise above.
	HonorsContext()
}

// Forwarded acks (see docs/protocol.md, "Forwarded acks and the node wire"). An ack, extend or nack whose partition another
// node owns goes to the owner with a 2 s budget. While fewer than AckWindow RPCs to the owner
// are in flight it goes at once, alone; past that, acks queue, and each freed slot sends the
// queue as one AckBatch of up to 64 records (a queue of one as a single op). Batches form only
// when more acks to one owner overlap than the window holds.
//
// Every ack keeps its own budget, batched or not. A batch's RPC runs until its youngest
// member's budget ends, and carries each member's remaining budget so that the owner does not
// apply a member whose budget ran out before the owner reached it (it answers that member
// 503, unapplied). The requester answers each member by the member's own deadline: as the
// owner answered if the reply came in time; ErrUnavailable (503) if the member never left
// (it waited for a slot all along, or its budget was spent before its batch left), which
// guarantees it is never applied; and ErrTransport (502) if it left and no reply came back in
// time, as for a single op, since the owner may have applied it. The node enforces the
// deadlines itself: a Transport that ignores its context is abandoned at the deadline, its
// late reply discarded, and the goroutine that ran the Call ends when the Call returns.
const (
	// ForwardBudget bounds a forwarded ack: the wait for a slot and the round trip.
	ForwardBudget = 2 * time.Second
	// olderPeerMemory is how long an owner that refused AckBatch gets single ops only.
	olderPeerMemory = 2 * time.Minute
)

// Errors of forwarded acks.
var (
	// ErrUnavailable: the owner is down or could not apply the ack in time (a 503).
	ErrUnavailable = errors.New("router: owner unavailable")
	// ErrTransport: no reply came back from the owner (a 502).
	ErrTransport = errors.New("router: transport failure")
)

// defaultAckWindow is max(128, 8 × GOMAXPROCS): twice an owner's handler bound, since an ack
// holds the owner's slot only while it runs there, not while it crosses the network.
func defaultAckWindow() int { return max(128, 8*runtime.GOMAXPROCS(0)) }

// lane is the forwarding state of one owner (see internal/acklane), with the node's own
// state of that owner as its Peer.
type lane = acklane.Lane[*peer]

// peer is what the node keeps of one owner besides its lane's forwarding.
type peer struct {
	budgets budget.Set // of the calls to the owner in flight

	mu sync.Mutex
	// slow: a consume's RPC to the owner ran out of its budget, and no reply of its came
	// back since; recheckAt is when it is asked again in the background (see answering).
	slow      bool
	recheckAt time.Time

	consumes consumeQueue // the probes and claims to the owner (see consumebatch.go)
	batches  batchQueue   // the AckBatches of several callers to the owner (see settle.go)
}

func newPeer(string) *peer { return &peer{consumes: consumeQueue{window: consumeWindow()}} }

// newLanes makes the node's lanes to owners, window RPCs in flight to each.
func (n *Node) newLanes(window int) *acklane.Lanes[*peer] {
	maxSettles := maxBatch
	if !n.wireVersion.Knows(wire.OpAckBatch) {
		maxSettles = 1
	}
	return acklane.New(acklane.Config[*peer]{
		Clock: n.clock, Window: window, MaxBatch: maxSettles,
		Send: n.call, Run: n.background, Answered: n.answered,
		NoReply: statusTransport, NewPeer: newPeer,
	})
}

// answered gives an AckAsync's done its answer, and its call then leaves the fence: Close
// returns once every done has.
func (n *Node) answered(done func(error), a wire.Answer) {
	defer n.life.fence.leave()
	done(errorOf(a))
}

func (n *Node) lane(owner string) *lane { return n.lanes.Lane(owner) }

// forward sends one ack, extend or nack to the owner of its partition and returns what the
// owner answered, as the local op would have returned it.
func (n *Node) forward(ctx context.Context, owner, topic string, rec wireRecord) (time.Time, error) {
	if len(topic) > MaxTopicLength {
		return time.Time{}, fmt.Errorf("%w: a topic of %d bytes (at most %d)", ErrInvalidArgument, len(topic), MaxTopicLength)
	}
	n.aheadSettled(topic, rec.handle)
	now := n.clock.Now()
	deadline := now.Add(ForwardBudget)
	l := n.lane(owner)
	r := rec.wire()
	q := l.Admit(ctx, topic, r, deadline)
	if q == nil {
		// It leaves at once, from this goroutine: the RPC ends by its deadline (see
		// exchange), and its answer is the reply's.
		one := acklane.Ack{Topic: topic, Record: r, Deadline: deadline, Values: ctx}
		var answer [1]wire.Answer
		n.call(l, now, []*acklane.Ack{&one}, answer[:])
		l.HandOn()
		return answerResult(answer[0])
	}
	// It queued: when ctx ends before it left, it is never applied; once it left, the
	// owner may apply it, so it is answered as the owner answers, or at its deadline as a
	// single op whose reply did not come back.
	a, err := l.Wait(ctx, q)
	if err != nil {
		return time.Time{}, err
	}
	return answerResult(a)
}

// forwardAsync queues one ack, extend or nack (of a topic checkTopic passed) for the owner of
// its partition and returns at once; done is given what the owner answered, or what the
// budget did, from the goroutine that learns it, and the call that entered the node's fence
// then leaves it. With a slot free, a goroutine of the node takes it and sends what has
// queued by the time it runs (this ack, and any queued just after it): nothing waits for a
// round trip that is not its own, and the caller never waits for the network. (Holding
// acks back until a busy slot came back was tried: it shared frames a little more, 0.239
// to 0.221 per record through a gateway with 64 consumers, and would break that.)
//
// t is the topic's state when the caller has it (nil: looked up here).
func (n *Node) forwardAsync(owner, topic string, t *topicState, rec wireRecord, done func(error)) {
	n.aheadSettledIn(t, topic, rec.handle)
	n.lane(owner).Enqueue(topic, rec.wire(), n.clock.Now().Add(ForwardBudget), done)
}

func answerResult(a wire.Answer) (time.Time, error) {
	return wire.Time(a.Expiry), errorOf(a)
}

// budget is ctx, ending at deadline on the node's clock too: for a ctx that can end by
// itself (the exchange of a context that never ends uses its lane's budgets instead).
func (n *Node) budget(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	budget, cancel := context.WithCancel(ctx)
	stop := n.clock.AfterFunc(deadline.Sub(n.clock.Now()), cancel)
	return budget, func() { stop(); cancel() }
}

// call sends batch to the owner and puts one answer per ack in answers. An owner that
// refuses AckBatch (a release before it) is remembered for two minutes: in that time a batch
// goes one ack at a time, each on what is left of its budget, and so does the refused batch.
// A node that speaks no AckBatch sends every batch one ack at a time. now is a clock reading
// taken just before.
func (n *Node) call(l *lane, now time.Time, batch []*acklane.Ack, answers []wire.Answer) {
	if len(batch) > 1 && l.Singles(now) {
		n.oneByOne(l, now, batch, answers)
		return
	}
	if refused := n.rpc(l, now, batch, answers); refused && len(batch) > 1 {
		now = n.clock.Now()
		l.Refuse(acklane.AckBatch, now.Add(olderPeerMemory))
		n.oneByOne(l, now, batch, answers)
	}
}

func (n *Node) oneByOne(l *lane, now time.Time, batch []*acklane.Ack, answers []wire.Answer) {
	for i, q := range batch {
		if i > 0 {
			now = n.clock.Now()
		}
		n.rpc(l, now, []*acklane.Ack{q}, answers[i:i+1])
	}
}

// rpc makes one RPC for acks of one topic and puts an answer per ack in answers: the
// owner's; the owner's refusal of the whole frame for each (refused reports an op it does not
// know); 502 for all of them when no reply came back by the youngest one's deadline; 503 for
// an ack whose budget was spent before it left, which is not sent; 400 for acks the frame
// cannot carry (a topic over MaxTopicLength). An AckBatch carries each member's remaining
// budget. An owner that refuses the version 7 settles, the version 10 reject, the version 11
// confirm or the version 14 nack-now (an older release) is remembered for olderPeerMemory,
// and the frame goes again at once in the form that owner reads (see wireAs), on what is
// left of its budgets: once for each of those it refuses at most, since each refusal lowers
// the form. So is one that refuses a batch past wire.MaxBatch records (the
// version 13 count): the batch goes again in batches of maxBatch.
func (n *Node) rpc(l *lane, now time.Time, batch []*acklane.Ack, answers []wire.Answer) (refused bool) {
	form := n.settleForm(l, now)
	refused, older := n.rpcAs(l.Owner(), now, batch, answers, form)
	for older != 0 {
		now = n.clock.Now()
		until := now.Add(olderPeerMemory)
		switch {
		case older >= wire.V16:
			l.Refuse(acklane.PlainAcks, until) // plain acks go in an AckBatch
			form = min(form, wire.V15)
		case older >= wire.V14:
			l.Refuse(acklane.NackNow, until) // a nack-now goes as a nack
			form = min(form, wire.V13)
		case older >= wire.V13:
			// A batch past wire.MaxBatch, refused by a release that reads none: it goes
			// again in batches it reads, each as call sends a batch.
			l.Refuse(acklane.LargeBatch, until)
			for start := 0; start < len(batch); start += maxBatch {
				end := min(start+maxBatch, len(batch))
				n.call(l, n.clock.Now(), batch[start:end], answers[start:end])
			}
			return false
		case older >= wire.V11:
			l.Refuse(acklane.Reserve, until) // nothing reserved there to confirm, nor read ahead
			form = min(form, wire.V10)
		case older >= wire.V10:
			l.Refuse(acklane.Reject, until)
			form = min(form, wire.V9)
		default:
			l.Refuse(acklane.OlderSettles, until)
			form = min(form, wire.V6)
		}
		refused, older = n.rpcAs(l.Owner(), now, batch, answers, form)
	}
	return refused
}

// settleForm is the version whose settles go to the owner of l at now: this node's, less
// what the owner refused within the last olderPeerMemory (the version 16 plain acks, the
// version 14 nack-now, the version 11 confirm and reservations, the version 10 reject, the
// version 7 settles).
func (n *Node) settleForm(l *lane, now time.Time) wire.Version {
	switch {
	case l.Refuses(acklane.OlderSettles, now):
		return min(n.wireVersion, wire.V6)
	case l.Refuses(acklane.Reject, now):
		return min(n.wireVersion, wire.V9)
	case l.Refuses(acklane.Reserve, now):
		return min(n.wireVersion, wire.V10)
	case l.Refuses(acklane.NackNow, now):
		return min(n.wireVersion, wire.V13)
	case l.Refuses(acklane.PlainAcks, now):
		return min(n.wireVersion, wire.V15)
	}
	return n.wireVersion
}

// rpcAs is rpc's one RPC, its records in the form of version form (see wireAs). older is the
// version of the newest op the frame carried when the owner refused the frame for it, a
// version 7 or later op it does not know (an older release), and zero otherwise.
// An ExtendLeft's answer comes back converted to an expiry on this node's clock: the time
// left at the owner, counted from now, before the frame left, so a lease never looks longer
// here than it is there.
func (n *Node) rpcAs(owner string, now time.Time, batch []*acklane.Ack, answers []wire.Answer, form wire.Version) (refused bool, older wire.Version) {
	if len(batch) == 1 { // a lone ack, most often: nothing to sort out, nothing on the heap
		q := batch[0]
		if !now.Before(q.Deadline) {
			answers[0] = spentBeforeSent
			return false, 0
		}
		rec := recordOf(&q.Record)
		r, unsent := rec.wireAs(form)
		if unsent != nil {
			answers[0] = *unsent
			return false, 0
		}
		records := [1]wire.Record{r}
		status := n.exchangeRecords(q.Values, owner, q.Topic, records[:], q.Deadline, answers)
		return settled(now, records[:], answers, status)
	}
	scratch := rpcPool.Get().(*rpcScratch)
	defer rpcPool.Put(scratch)
	live := slices.Grow(scratch.live[:0], len(batch)) // the acks with budget left
	records := slices.Grow(scratch.records[:0], len(batch))
	var deadline time.Time
	// A caller's batch shares one deadline: its budget is worked out once, for the first
	// record of each deadline (== compares the representations, which is enough to reuse
	// a result computed from the same value).
	var last time.Time
	var spent bool
	var budget, least time.Duration
	plain := true // every record that leaves is a plain ack
	for i, q := range batch {
		if i == 0 || q.Deadline != last {
			last, spent, budget = q.Deadline, !now.Before(q.Deadline), q.Deadline.Sub(now)
		}
		if spent {
			answers[i] = spentBeforeSent
			continue
		}
		r := q.Record
		if r.Op != opAck { // a plain ack goes as it is, whatever the form
			rec := recordOf(&q.Record)
			var unsent *wire.Answer
			if r, unsent = rec.wireAs(form); unsent != nil {
				answers[i] = *unsent
				continue
			}
			plain = false
		}
		live = append(live, i)
		r.Budget = budget
		if budget < least || len(live) == 1 {
			least = budget
		}
		records = append(records, r)
		if q.Deadline != deadline && q.Deadline.After(deadline) {
			deadline = q.Deadline
		}
	}
	scratch.live, scratch.records = live[:0], records[:0]
	exchange := n.exchangeRecords
	switch {
	case len(live) == 0:
		return false, 0
	case len(live) == 1: // it leaves as a single op, whose RPC is its budget
		records[0].Budget = 0
	case plain && form >= wire.V16:
		// Plain acks in their compact form, on the least of their budgets: the owner
		// applies none whose budget ran out.
		for i := range records {
			records[i].Budget = least
		}
		exchange = n.exchangePlainAcks
	}
	if len(live) == len(batch) {
		status := exchange(batch[0].Values, owner, batch[0].Topic, records, deadline, answers)
		return settled(now, records, answers, status)
	}
	got := slices.Grow(scratch.answers[:0], len(live))[:len(live)]
	q := batch[live[0]]
	status := exchange(q.Values, owner, q.Topic, records, deadline, got)
	refused, older = settled(now, records, got, status)
	for j, i := range live {
		answers[i] = got[j]
	}
	clear(got) // their messages, not to be kept by the pool
	scratch.answers = got[:0]
	return refused, older
}

// settled reads the answers to records sent at now, given the frame's refusal status (zero
// when each record was answered): whether the owner refused the op (refused), or the version
// of the newest op the records carry when the owner refused them for an op of version 7 or
// later it does not know (older), and each ExtendLeft's time left made an expiry here.
func settled(now time.Time, records []wire.Record, answers []wire.Answer, status byte) (refused bool, older wire.Version) {
	if status == statusPlainAcksRefused {
		return false, wire.V16
	}
	if status != 0 {
		// A single op of version 7 or later refused as unknown, or a batch carrying one
		// refused as malformed: what an older release answers. A batch's refusal does not say
		// which op it is for: the newest is taken out first.
		newest := wire.Version(0)
		if len(records) > wire.MaxBatch {
			newest = wire.V13 // the count: an older release refuses it first
		}
		for i := range records {
			newest = max(newest, wire.Since(records[i].Op))
		}
		if newest >= wire.V7 && ((len(records) == 1 && status == wire.StatusUnsupported) || (len(records) > 1 && status == wire.StatusBadRequest)) {
			return false, newest
		}
	}
	for i := range records {
		if a := &answers[i]; records[i].Op == wire.OpExtendLeft && a.Status == wire.StatusOK {
			a.Expiry = now.Add(time.Duration(a.Expiry)).UnixNano()
		}
	}
	return status == wire.StatusUnsupported, 0
}

// notDurableThere answers a durable ack for an owner on a release before version 7, which
// would apply it without waiting for its disk: it is not sent.
var notDurableThere = wire.Answer{Status: wire.StatusUnavailable, Message: "the owner runs a release that cannot make an ack durable: not applied"}

// noRejectThere answers a reject for an owner on a release before version 10 (or from a node
// pinned below it), which knows no reject: it is not sent, and no other settle stands in for
// it (a nack would deliver the record again, an ack would lose it).
var noRejectThere = wire.Answer{Status: statusUnsupportedThere, Message: "the owner runs a release before node wire version 10, which cannot reject: not applied"}

// noConfirmThere answers a confirm for an owner on a release before version 11 (or from a
// node pinned below it), which grants no reservations to confirm: it is not sent.
var noConfirmThere = wire.Answer{Status: statusUnsupportedThere, Message: "the owner runs a release before node wire version 11, which reserves nothing to confirm: not applied"}

// spentBeforeSent answers an ack whose budget ran out before it could leave.
var spentBeforeSent = wire.Answer{Status: wire.StatusUnavailable, Message: "the budget was spent before it was sent: not applied"}

// rpcScratch is what rpc sorts a batch out in, pooled: a frame's worth of each, grown to
// the largest frame it sorted out.
type rpcScratch struct {
	live    []int
	records []wire.Record
	answers []wire.Answer
}

var rpcPool = sync.Pool{New: func() any { return new(rpcScratch) }}

// exchangeRecords sends records of topic (one op, or an AckBatch of several) to owner within
// deadline and puts the answer to each in answers: the owner's; the owner's refusal of the
// whole frame for each (status is then the refusal's: a single op's answer counts as one
// when it says the op is unknown); 502 for all of them when no reply came back; 400 when the
// frame cannot carry them.
func (n *Node) exchangeRecords(values context.Context, owner, topic string, records []wire.Record, deadline time.Time, answers []wire.Answer) (status byte) {
	each := func(a wire.Answer) {
		for i := range answers {
			answers[i] = a
		}
	}
	frame, err := encodeRecords(topic, records)
	if err != nil {
		each(wire.Answer{Status: wire.StatusBadRequest, Message: err.Error()})
		return 0
	}
	sent := n.clock.Now()
	reply, err := n.exchangeDetached(values, owner, frame, deadline)
	n.stats.forwardedAckRPC.observe(n.clock.Now().Sub(sent))
	if err != nil {
		each(wire.Answer{Status: statusTransport, Message: err.Error()})
		return 0
	}
	got, err := wire.DecodeReplyInto(answers[:0], reply)
	switch {
	case err != nil:
		each(wire.Answer{Status: statusTransport, Message: err.Error()})
	case len(got) == len(answers):
		if len(got) == 1 && got[0].Status == wire.StatusUnsupported {
			return wire.StatusUnsupported
		}
	case len(got) == 1 && (got[0].Status == wire.StatusBadRequest || got[0].Status == wire.StatusUnsupported):
		each(got[0])
		return got[0].Status
	default:
		each(wire.Answer{Status: statusTransport, Message: fmt.Sprintf("%d answers for %d acks", len(got), len(answers))})
	}
	return 0
}

// statusPlainAcksRefused is what exchangeAcks returns when the owner refused the Acks
// op (a release before version 16): none of the acks was applied. The requester's own,
// never on the wire.
const statusPlainAcksRefused byte = 253

// exchangePlainAcks is exchangeRecords for records that are all plain acks of one budget,
// in an Acks frame (wire version 16; see exchangeAcks).
func (n *Node) exchangePlainAcks(values context.Context, owner, topic string, records []wire.Record, deadline time.Time, answers []wire.Answer) (status byte) {
	frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpAcks, Topic: topic, Records: records})
	return n.exchangeAcks(values, owner, frame, err, deadline, answers)
}

// exchangeAcks sends owner frame, an Acks frame (or nothing, when encodeErr says why there is
// none: each answered 400), within deadline and puts the answer to each of its plain acks in
// answers, as its acks reply gives them: the owner's answer of each (the count applied,
// and the others' answers); its refusal of the whole frame for each (status is then
// statusPlainAcksRefused when it does not know the op, and the refusal's status otherwise);
// 502 for all of them when no reply came back or it could not be read.
func (n *Node) exchangeAcks(values context.Context, owner string, frame []byte, encodeErr error, deadline time.Time, answers []wire.Answer) (status byte) {
	if encodeErr != nil {
		eachAnswer(answers, wire.Answer{Status: wire.StatusBadRequest, Message: encodeErr.Error()})
		return 0
	}
	sent := n.clock.Now()
	raw, err := n.exchangeDetached(values, owner, frame, deadline)
	n.stats.forwardedAckRPC.observe(n.clock.Now().Sub(sent))
	if err != nil {
		eachAnswer(answers, wire.Answer{Status: statusTransport, Message: err.Error()})
		return 0
	}
	reply, err := wire.DecodeAcksReply(answers[:0], raw, len(answers))
	switch {
	case err == nil && reply.Refused:
		eachAnswer(answers, reply.Refusal)
		if reply.Refusal.Status == wire.StatusUnsupported {
			return statusPlainAcksRefused
		}
		return reply.Refusal.Status
	case err == nil && len(reply.Rest) > 0:
		err = fmt.Errorf("%w: trailing data after an acks reply", wire.ErrBadFrame)
	}
	if err != nil {
		eachAnswer(answers, wire.Answer{Status: statusTransport, Message: err.Error()})
	}
	return 0
}

// eachAnswer gives every one of answers a.
func eachAnswer(answers []wire.Answer, a wire.Answer) {
	for i := range answers {
		answers[i] = a
	}
}

// errNoReplyInBudget is what exchange answers when a call's budget ended before its reply.
var errNoReplyInBudget = fmt.Errorf("no reply within the budget: %w", context.DeadlineExceeded)

// exchange makes one Call, and stops waiting for it at deadline (on the node's clock) even if
// the Transport ignores its context: unless the Transport is a ContextTransport, the Call
// runs in a goroutine of its own, which ends when the Call returns, and a reply that comes
// after the deadline is discarded.
func (n *Node) exchange(ctx context.Context, owner string, frame []byte, deadline time.Time) ([]byte, error) {
	if ctx.Done() == nil { // only the deadline ends it: no timer of its own (see internal/budget)
		return n.exchangeDetached(ctx, owner, frame, deadline)
	}
	ctx, cancel := n.budget(ctx, deadline)
	defer cancel()
	return n.callWithin(ctx, owner, frame)
}

// exchangeDetached is exchange carrying the values of values (a trace, the caller's
// credentials; nil: none) but not its cancellation, as context.WithoutCancel would: only the
// deadline ends the call. A settle that left is answered as the owner answers it, whatever
// its caller's context does meanwhile, and the owner still sees the caller's trace.
func (n *Node) exchangeDetached(values context.Context, owner string, frame []byte, deadline time.Time) ([]byte, error) {
	budgets := &n.lane(owner).Peer.budgets
	b := budgets.Open(n.clock, deadline, values)
	defer budgets.Close(b)
	return n.callWithin(b, owner, frame)
}

// transportCall is Transport.Call with a panic of the host's Transport recovered as the
// call's error (see recoverHostPanic): it runs on the node's goroutines as well as the
// caller's, and a Call that panicked is one that brought no reply.
func (n *Node) transportCall(ctx context.Context, owner string, frame []byte) (reply []byte, err error) {
	defer n.recoverHostPanic("Transport.Call", owner, &err)
	return n.transport.Call(ctx, owner, frame)
}

// callWithin makes exchange's Call within ctx, the call's budget.
func (n *Node) callWithin(ctx context.Context, owner string, frame []byte) ([]byte, error) {
	if n.promptTransport {
		reply, err := n.transportCall(ctx, owner, frame)
		if err != nil && ctx.Err() != nil {
			return nil, errNoReplyInBudget
		}
		return reply, err
	}
	type result struct {
		reply []byte
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := n.transportCall(ctx, owner, frame)
		done <- result{reply, err}
	}()
	select {
	case r := <-done:
		return r.reply, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // it returned at the same instant
			return r.reply, r.err
		default:
			return nil, errNoReplyInBudget
		}
	}
}
