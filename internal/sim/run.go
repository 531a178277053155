package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
	"narad.dev/consume/tokens"
)

// sim is one run.
type sim struct {
	seed uint64
	opts Options
	rng  *rand.Rand // the driver's; every draw of the run comes from it
	// asyncAcks draws whether an ack waits (Ack) or not (AckAsync), from a stream of its
	// own so that the driver's draws are what they were before AckAsync was simulated.
	asyncAcks *rand.Rand
	// rejects draws which settles are rejects, in runs with rejects (reject.go); nil: none.
	rejects *rand.Rand

	nodes     []*node
	byID      map[string]*node
	nw        *routertest.Network
	logs      *routertest.MemLogs
	liveness  bool
	inc       int         // the topic's incarnation: a delete and create starts the next
	topicGone atomic.Bool // the topic is deleted: the routes do not know it
	vt        time.Duration
	topicCfg  router.TopicConfig
	maxTrip   time.Duration // the longest one-way trip

	// routesMu guards the nodes' parts and remote as their routes read them; the driver
	// replaces them (a move) holding it and mu.
	routesMu   sync.RWMutex
	firstOwner map[int32]*node // each partition's owner as the run began
	moves      []*move         // the partition moves so far, in order, from their Adopt on

	mu         sync.Mutex // guards what the network's hooks and the nodes' goroutines reach
	prof       profile    // the network faults in force
	faultProf  profile    // the run's network faults, when on
	linkCalls  map[link]uint64
	group      map[string]int         // the partition in force; nil: none
	netDown    map[string]bool        // nodes the network fails calls to at once
	hung       map[string]bool        // nodes every frame sent to is lost (hang.go)
	dupHandles map[router.Handle]bool // handles a duplicated frame settled, maybe first
	refusals   map[refusal]time.Time  // when an older owner last refused each op or field
	// consumesRefused are the consume frames an older owner refused as malformed (a field
	// it does not know), in the order their replies came.
	consumesRefused []consumeRefused
	records         map[key]*record
	leases          []*lease
	held            []*lease
	report          Report
	failure         *Violation

	// holder is the node holding each partition's state, which applies its settles: its
	// owner, but while a move is under way, the old owner until Adopt returns.
	holder map[int32]*node
	moving *move // the move under way (moveStep), if any
	// handedOff lists the partitions each node handed off (HandOff) and has not adopted
	// since: the planted bug PlantUnfencedSettle answers their settles.
	handedOff map[*node]map[int32]bool
	// served names the node that granted each lease a consume reply carried between nodes.
	served map[router.Handle]servedLease

	polls []*poll

	// store is the state store every node keeps its ack state in, shared, surviving every
	// crash and power cut (nil: each node keeps it in files on its disk). deposed lists the
	// partitions each node handed off and has not begun to adopt again since: it must not
	// save them.
	store   *routertest.MemStore
	deposed map[*node]map[int32]bool

	planted        map[string][]byte
	plantedReplays int
	plantedSettles int

	// The fault classes of graceful degradation, each nil when the run draws it off: hung
	// nodes (hang.go) and the lying peer (liar.go).
	hangs *hangs
	liar  *liar
	// ord is the ordered class's state (ordered.go), nil when the run's topic is unordered.
	ord *ordered

	// Ownership in time (ownership.go, zombie.go), nil when the run draws neither paused
	// nor cut-off owners: the controller of the grants, the two classes' streams (nil when
	// off), and the stream that makes some acks durable. pausedCh holds, for each paused
	// node, the channel that closes when it resumes; cutOff the nodes cut off (both guarded
	// by mu).
	ctl                       *controller
	zombies, cutoffs, durable *rand.Rand
	pausedCh                  map[string]chan struct{}
	cutOff                    map[string]bool

	weights []weighted
	began   time.Time
	healAt  time.Time

	traceMu     sync.Mutex
	ring        []string
	ringNext    int
	fingerprint uint64
}

// profile is how likely a frame is lost on its way, loses its reply, or is duplicated.
type profile struct{ drop, dropReply, dup float64 }

type weighted struct {
	name string
	w    int
	f    func()
}

// poll is a consume running in the background.
type poll struct {
	spanned bool // its topic was deleted and created again while it ran
	via     *node
	vis     time.Duration
	cancel  context.CancelFunc
	done    chan polled
	// start is when it began, wait its ConsumeOptions.Wait, and ctxEnd when its context
	// ended (cancelled, or its deadline came), if it did before it returned: the bound on
	// its return holds until then (returns.go).
	start, ctxEnd time.Time
	wait          time.Duration
}

type polled struct {
	msgs []router.Message
	err  error
	at   time.Time
}

// abort ends a run from the driver at its first violation.
type abort struct{}

// Run runs one simulation of a cluster under faults, drawn from seed, and checks it; it
// returns what the run did and the first violation it caught (a *Violation), if any. It must
// be called inside a testing/synctest bubble (synctest.Test): time is the bubble's fake clock,
// so a run of minutes of cluster time takes milliseconds and replays from its seed. Run
// starts and stops every node itself; it leaves no goroutine behind.
func Run(seed uint64, opts Options) (rep Report, err error) {
	s := &sim{
		seed: seed, opts: opts,
		rng:        rand.New(rand.NewPCG(seed, 0x73696d2e6e617261)), // "sim.nara"
		asyncAcks:  rand.New(rand.NewPCG(seed, 0x61636b732e617379)), // "acks.asy"
		logs:       &routertest.MemLogs{},
		linkCalls:  map[link]uint64{},
		dupHandles: map[router.Handle]bool{},
		refusals:   map[refusal]time.Time{},
		netDown:    map[string]bool{},
		hung:       map[string]bool{},
		records:    map[key]*record{},
		handedOff:  map[*node]map[int32]bool{},
		served:     map[router.Handle]servedLease{},
		planted:    map[string][]byte{},
		deposed:    map[*node]map[int32]bool{},
		pausedCh:   map[string]chan struct{}{},
		cutOff:     map[string]bool{},
		began:      time.Now(),
	}
	// The shared state store, on in some runs, drawn from a stream of its own so that a run
	// without it draws what it drew before the store was simulated.
	sr := rand.New(rand.NewPCG(seed, 0x73746f72652e7369)) // "store.si"
	if opts.Store || !opts.NoStore && sr.IntN(100) < 30 {
		s.store = &routertest.MemStore{}
		s.report.Store = true
	}
	s.planOwnership()
	s.planOrdered()
	s.report.Seed = seed
	s.report.Frames = map[byte]int{}
	s.report.AckedRedeliveredBy = map[string]int{}
	s.report.Tolerated = map[string]int{}
	s.report.FirstTolerated = map[string]string{}
	h := fnv.New64a()
	h.Write([]byte("sim"))
	s.fingerprint = h.Sum64()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(abort); !ok {
				panic(r)
			}
		}
		s.unpauseAll()
		s.shutdown()
		s.report.SimTime = time.Since(s.began)
		s.report.Fingerprint = s.fingerprint
		rep = s.report
		if s.failure != nil {
			err = s.failure
		}
	}()
	s.run()
	return
}

func (s *sim) run() {
	s.setup()
	s.plan()
	steps := s.opts.Steps
	if steps == 0 {
		steps = 150
	}
	for i := 0; i < steps && !s.failed(); i++ {
		s.revive()
		s.step()
		synctest.Wait()
		s.collect()
		s.checkStep()
		s.report.Steps++
	}
	if s.failed() {
		return
	}
	s.heal()
	s.drain()
	if s.failed() {
		return
	}
	s.sparse()
	if s.failed() {
		return
	}
	s.restartAll()
}

// plan draws the run's mix of steps and faults (a swarm: each fault class is on in some
// runs and off in others, at a strength of its own).
func (s *sim) plan() {
	on := func(p int) bool { return !s.opts.Calm && s.rng.IntN(100) < p }
	w := func(p, weight int) int {
		if on(p) {
			return weight
		}
		return 0
	}
	s.weights = []weighted{
		{"produce", 14, s.produce},
		{"consume", 8, s.consume},
		{"longPoll", 10, s.longPoll},
		{"settle", 22, s.settle},
		{"ackBatch", 2, s.ackBatch},
		{"staleSettle", 2, s.staleSettle},
		{"forge", 1, s.forge},
		{"abandon", 2, s.abandon},
		{"cancelPoll", 2, s.cancelPoll},
		{"replay", 2, s.replay},
		{"sleep", 10, s.sleep},
		{"trim", w(50, 1), s.trim},
		{"corrupt", w(50, 1), s.corrupt},
		{"graceful", w(60, 1), func() { s.restart(graceful) }},
		{"processCrash", w(70, 2), func() { s.restart(processCrash) }},
		{"powerCut", w(60, 1), func() { s.restart(powerCut) }},
		{"isolate", w(40, 1), s.isolate},
		{"partition", w(40, 1), s.partition},
		{"netFaults", w(70, 2), s.toggleNetFaults},
		{"diskFull", w(30, 1), s.diskFull},
		{"syncErrors", w(30, 1), s.syncErrors},
		{"deleteTopic", w(30, 1), s.deleteTopic},
	}
	// Partition moves and failovers, each on in some runs, drawn from a stream of their own
	// so that a run without them draws what it drew before moves were simulated.
	mr := rand.New(rand.NewPCG(s.seed, 0x6d6f7665732e7369)) // "moves.si"
	switch {
	case s.opts.NoMoves:
	case s.opts.Moves:
		s.weights = append(s.weights, weighted{"move", 4, s.moveStep})
	case !s.opts.Calm && mr.IntN(100) < 30:
		s.weights = append(s.weights, weighted{"move", 2, s.moveStep})
	}
	if !s.opts.Calm && !s.opts.NoMoves && mr.IntN(100) < 30 {
		s.weights = append(s.weights, weighted{"failover", 1, s.failoverStep})
	}
	s.planHangs()
	s.planLiar()
	s.planZombies()
	if !s.opts.Calm {
		p := []float64{0, 0.01, 0.05, 0.2}
		s.faultProf = profile{drop: p[s.rng.IntN(4)], dropReply: p[s.rng.IntN(4)], dup: []float64{0, 0.05, 0.3}[s.rng.IntN(3)]}
	}
	var names []string
	for _, x := range s.weights {
		if x.w > 0 {
			names = append(names, x.name)
		}
	}
	s.logf("plan: steps %v; network faults when on: %+v", names, s.faultProf)
}

func (s *sim) step() {
	total := 0
	for _, x := range s.weights {
		total += x.w
	}
	n := s.rng.IntN(total)
	for _, x := range s.weights {
		if n < x.w {
			x.f()
			return
		}
		n -= x.w
	}
}

// failed reports whether the run caught a violation.
func (s *sim) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure != nil
}

// failLocked records a violation (the first one counts). Called with s.mu held.
func (s *sim) failLocked(format string, args ...any) { s.failKind(KindOther, format, args...) }

// failKind records a violation of a kind, and reports whether the run ends: a violation of
// a kind Options.Tolerate lists is counted and the run goes on. Called with s.mu held.
func (s *sim) failKind(kind, format string, args ...any) (ends bool) {
	if s.failure != nil {
		return true
	}
	what := fmt.Sprintf(format, args...)
	if slices.Contains(s.opts.Tolerate, kind) {
		s.trace("tolerated (%s): %s", kind, what)
		if s.report.Tolerated[kind] == 0 {
			s.report.FirstTolerated[kind] = what
		}
		s.report.Tolerated[kind]++
		return false
	}
	s.trace("VIOLATION (%s): %s", kind, what)
	s.failure = &Violation{Kind: kind, Seed: s.seed, At: time.Since(s.began), What: what, Trace: s.lastEvents(80)}
	return true
}

func (s *sim) failf(format string, args ...any) { s.failfKind(KindOther, format, args...) }

func (s *sim) failfKind(kind, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failKind(kind, format, args...)
}

// fatalf records a violation and ends the run (from the driver only).
func (s *sim) fatalf(format string, args ...any) {
	s.failf(format, args...)
	panic(abort{})
}

// --- the workload ----------------------------------------------------------------------------

func (s *sim) upNodes() []*node {
	var up []*node
	for _, nd := range s.nodes {
		if nd.up() && !nd.paused { // a paused node takes no call
			up = append(up, nd)
		}
	}
	return up
}

func (s *sim) pickUp() *node {
	up := s.upNodes()
	if len(up) == 0 {
		return nil
	}
	return up[s.rng.IntN(len(up))]
}

func (s *sim) ownerOf(p int32) *node {
	for _, nd := range s.nodes {
		if slices.Contains(nd.parts, p) {
			return nd
		}
	}
	return nil
}

func (s *sim) partitions() int32 { return int32(s.report.Parts) }

// produce appends records to a partition, and tells its owner if it runs.
func (s *sim) produce() {
	p := int32(s.rng.IntN(int(s.partitions())))
	n := 1 + s.rng.IntN(4)
	s.append(p, n)
}

func (s *sim) append(p int32, n int) {
	log := s.logs.Log(topic, p)
	owner := s.ownerOf(p)
	for range n {
		s.mu.Lock()
		k := key{s.inc, p, log.HighWatermark()}
		rk := s.keyFor(k.off)
		r := &record{owner: owner, value: valueOf(k)}
		s.records[k] = r
		s.keyed(k, r, rk)
		s.report.Produced++
		s.mu.Unlock()
		off := log.Append([]byte(rk), []byte(valueOf(k)), time.Now())
		if off != k.off {
			s.fatalf("appended %v at offset %d", k, off)
		}
		if owner.up() && !owner.paused { // a paused host tells its node when it resumes
			owner.rn.Appended(topic, p, off+1)
		}
	}
	s.logf("produce %d records to %d (%s), hwm %d", n, p, owner.id, log.HighWatermark())
}

func (s *sim) consumeOptions() router.ConsumeOptions {
	return router.ConsumeOptions{
		Max:        []int{1, 1, 1, 2, 5, 20}[s.rng.IntN(6)],
		Visibility: []time.Duration{0, 0, time.Second, 2 * time.Second}[s.rng.IntN(4)],
	}
}

// consume takes records without waiting.
func (s *sim) consume() {
	if nd := s.pickUp(); nd != nil {
		s.consumeOn(nd)
	}
}

// consumeOn takes records without waiting through nd.
func (s *sim) consumeOn(nd *node) {
	if nd.view != nil {
		s.report.StaleConsumes++
	}
	opts := s.consumeOptions()
	start := time.Now()
	msgs, err := nd.rn.Consume(context.Background(), topic, opts)
	s.received(msgs)
	r := polled{msgs, err, time.Now()}
	s.checkReturn(nd, start, 0, time.Time{}, r)
	s.consumed(nd, opts.Visibility, r, false, false)
}

// longPoll starts a consume that waits, maybe cancelled before its wait ends.
func (s *sim) longPoll() {
	nd := s.pickUp()
	if nd == nil {
		return
	}
	opts := s.consumeOptions()
	opts.Wait = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second, 3 * time.Second}[s.rng.IntN(4)]
	ctx, cancel := context.WithCancel(context.Background())
	if s.rng.IntN(4) == 0 {
		ctx, cancel = context.WithTimeout(context.Background(), time.Duration(s.rng.Int64N(int64(opts.Wait))))
	}
	p := s.startPoll(nd, opts, ctx, cancel)
	if deadline, ok := ctx.Deadline(); ok {
		p.ctxEnd = deadline
	}
}

func (s *sim) startPoll(nd *node, opts router.ConsumeOptions, ctx context.Context, cancel context.CancelFunc) *poll {
	p := &poll{via: nd, vis: opts.Visibility, cancel: cancel, done: make(chan polled, 1), start: time.Now(), wait: opts.Wait}
	rn := nd.rn
	go func() {
		msgs, err := rn.Consume(ctx, topic, opts)
		s.received(msgs)
		p.done <- polled{msgs, err, time.Now()}
		cancel()
	}()
	s.polls = append(s.polls, p)
	s.report.Polls++
	s.logf("long-poll on %s: max %d, wait %v, visibility %v", nd.id, opts.Max, opts.Wait, opts.Visibility)
	return p
}

func (s *sim) cancelPoll() {
	if len(s.polls) == 0 {
		return
	}
	p := s.polls[s.rng.IntN(len(s.polls))]
	p.end()
	s.logf("cancel a long-poll on %s", p.via.id)
}

// end cancels p's context.
func (p *poll) end() {
	if now := time.Now(); p.ctxEnd.IsZero() || now.Before(p.ctxEnd) {
		p.ctxEnd = now
	}
	p.cancel()
}

// collect takes what the finished consumes returned, in the order they returned.
func (s *sim) collect() {
	type done struct {
		p *poll
		r polled
	}
	var finished []done
	keep := s.polls[:0]
	for _, p := range s.polls {
		select {
		case r := <-p.done:
			finished = append(finished, done{p, r})
		default:
			keep = append(keep, p)
		}
	}
	clear(s.polls[len(keep):])
	s.polls = keep
	slices.SortStableFunc(finished, func(a, b done) int { return a.r.at.Compare(b.r.at) })
	for _, d := range finished {
		s.checkReturn(d.p.via, d.p.start, d.p.wait, d.p.ctxEnd, d.r)
		s.consumed(d.p.via, d.p.vis, d.r, true, d.p.spanned)
	}
}

// consumed checks what a consume on nd returned.
func (s *sim) consumed(nd *node, vis time.Duration, r polled, waited, spanned bool) {
	resp := s.beginResponse(r)
	for _, m := range r.msgs {
		s.delivered(m, r.at, nd.id, vis, resp)
	}
	switch err := r.err; {
	case err == nil, errors.Is(err, router.ErrTransport), errors.Is(err, router.ErrUnavailable):
	case spanned:
		// Deleted and created again under it: the topic was unknown for a while.
	case waited && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		s.report.Faults.ContextCancels++
	case waited && errors.Is(err, router.ErrClosed):
	case errors.Is(err, router.ErrUnsupportedOp):
		s.failfKind(KindOldOwner400, "a consume on %s answered %v (HTTP %d): its owners run a release before the consume op; Consume documents ErrTransport or ErrUnavailable when every owner asked failed",
			nd.id, err, router.HTTPStatus(err))
	default:
		s.failfKind(KindConsumeError, "a consume on %s answered %v", nd.id, err)
	}
	if len(r.msgs) > 0 || r.err != nil {
		s.logf("consumed on %s: %d records, %v", nd.id, len(r.msgs), r.err)
	}
}

// settlePathFaulty reports whether frames of a settle of partition p through via may be lost
// now: on their way to the node holding p's state, or, while p moves, to the owner the routes
// name.
func (s *sim) settlePathFaulty(via *node, p int32) bool {
	s.mu.Lock()
	holder := s.holder[p]
	s.mu.Unlock()
	// Stale routes (zombie.go) may send it to a node that holds nothing of p any more, or
	// that hangs as paused, or that is cut off: no reply is one answer.
	return s.pathFaulty(via, holder) || s.pathFaulty(via, s.ownerOf(p)) || s.staleFor(via, p)
}

// pathFaulty reports whether frames between via and owner may be lost now.
func (s *sim) pathFaulty(via, owner *node) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return owner != nil && via != owner && (s.prof != profile{} || s.cut(via.id, owner.id) || s.netDown[owner.id] || s.hung[owner.id] || !owner.up() || owner.down.Load() ||
		s.pausedCh[owner.id] != nil || s.cutOff[owner.id] || s.cutOff[via.id])
}

func (s *sim) pickHeld() (int, *lease) {
	if len(s.held) == 0 {
		return -1, nil
	}
	i := s.rng.IntN(len(s.held))
	return i, s.held[i]
}

func (s *sim) dropHeld(l *lease) {
	if i := slices.Index(s.held, l); i >= 0 {
		s.held = slices.Delete(s.held, i, i+1)
	}
	l.held = false
}

// settle acks, nacks, extends, releases or rejects (in runs with rejects) a held lease,
// through any node. A release goes
// through any node only in runs with MaxDeliveries, where a forwarded release must not
// count an attempt (quarantine.go); through its owner in the others, as before releases
// were forwarded.
func (s *sim) settle() {
	_, l := s.pickHeld()
	if l == nil {
		return
	}
	op := []settleOp{opAck, opAck, opAck, opAck, opAck, opNack, opNack, opExtend, opExtend, opRelease}[s.rng.IntN(10)]
	op = s.maybeReject(op)
	via := s.pickUp()
	if op == opRelease && s.topicCfg.MaxDeliveries == 0 {
		via = s.ownerOf(l.k.p)
	}
	if via == nil || !via.up() || via.paused {
		return
	}
	s.settleOne(l, op, via, false)
}

func (s *sim) settleOne(l *lease, op settleOp, via *node, forged bool) {
	h := l.h
	if forged {
		h.Nonce ^= 1 + s.rng.Uint64N(1<<63)
	}
	faulty := s.settlePathFaulty(via, l.k.p)
	ctx := context.Background()
	s.settling(l, 1)
	defer s.settling(l, -1)
	if via.view != nil {
		s.report.StaleSettles++
	}
	if op == opAck && !forged && s.durable != nil && s.durable.IntN(4) == 0 {
		op = opAckDurable // in runs with grants, a durable ack now and then
	}
	start := time.Now()
	var err error
	var expiry time.Time
	var d time.Duration
	switch op {
	case opAckDurable:
		err = via.rn.AckDurable(ctx, topic, h)
	case opAck:
		if s.asyncAcks.IntN(2) == 0 {
			answered := make(chan error, 1)
			via.rn.AckAsync(topic, h, func(err error) { answered <- err })
			err = <-answered
		} else {
			err = via.rn.Ack(ctx, topic, h)
		}
	case opNack:
		d = []time.Duration{0, 0, 0, 300 * time.Millisecond}[s.rng.IntN(4)]
		err = via.rn.Nack(ctx, topic, h, d)
	case opExtend:
		d = []time.Duration{time.Second, s.vt / 2, s.vt}[s.rng.IntN(3)]
		expiry, err = via.rn.Extend(ctx, topic, h, d)
		expiry = via.trueTime(expiry) // on via's clock
	case opRelease:
		err = via.rn.Release(ctx, topic, h)
	case opReject:
		s.rejecting(l.k, 1)
		defer s.rejecting(l.k, -1) // once settled below knows how it was answered
		err = via.rn.Reject(ctx, topic, h)
	}
	s.report.Settles++
	s.settled(l, op, via, start, time.Now(), err, expiry, d, forged, faulty)
	if !forged && (err == nil && op != opExtend || errors.Is(err, router.ErrGone) || op == opAckDurable && err != nil) {
		s.dropHeld(l) // a durable ack that failed may have been applied: its consumer lets it go
	}
}

func (s *sim) settling(l *lease, d int) {
	s.mu.Lock()
	l.settling += d
	s.mu.Unlock()
}

// ackBatch acks several held leases in one AckBatch through any node.
func (s *sim) ackBatch() {
	via := s.pickUp()
	if via == nil || len(s.held) == 0 {
		return
	}
	n := 1 + s.rng.IntN(min(len(s.held), 6))
	batch := slices.Clone(s.held)
	s.rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	s.ackAll(via, batch[:n])
}

// ackAll acks leases in one AckBatch through node via.
func (s *sim) ackAll(via *node, batch []*lease) {
	n := len(batch)
	handles := make([]router.Handle, n)
	faulty := make([]bool, n)
	for i, l := range batch {
		handles[i] = l.h
		faulty[i] = s.settlePathFaulty(via, l.k.p)
	}
	for _, l := range batch {
		s.settling(l, 1)
	}
	start := time.Now()
	errs := via.rn.AckBatch(context.Background(), topic, handles)
	for _, l := range batch {
		s.settling(l, -1)
	}
	end := time.Now()
	// The owner applies a batch in the caller's order, and so does the model, with one
	// exception: a batch may hold two leases of one record, an expired one and the live
	// one, and when its frame was duplicated the copy may have acked the live one before
	// the frame itself answered the expired one ErrAlreadySettled; those answers go last.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	rank := func(i int) int {
		switch {
		case !errors.Is(errs[i], router.ErrAlreadySettled):
			return 0
		case start.Before(batch[i].endMax): // maybe live: the copy may have acked it
			return 1
		}
		return 2
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rank(a), rank(b)) })
	for _, i := range order {
		l := batch[i]
		s.report.Settles++
		s.settled(l, opAck, via, start, end, errs[i], time.Time{}, 0, false, faulty[i])
		if errs[i] == nil || errors.Is(errs[i], router.ErrGone) {
			s.dropHeld(l)
		}
	}
}

// staleSettle settles a lease no consumer holds any more: over, or abandoned.
func (s *sim) staleSettle() {
	if len(s.leases) == 0 {
		return
	}
	l := s.leases[s.rng.IntN(len(s.leases))]
	via := s.pickUp()
	if via == nil {
		return
	}
	s.dropHeld(l)
	s.settleOne(l, []settleOp{opAck, opNack, opExtend}[s.rng.IntN(3)], via, false)
}

// forge settles a handle that was never handed out: a lease's with another nonce.
func (s *sim) forge() {
	if len(s.leases) == 0 {
		return
	}
	l := s.leases[s.rng.IntN(len(s.leases))]
	via := s.pickUp()
	if via == nil {
		return
	}
	s.settleOne(l, []settleOp{opAck, opNack, opExtend}[s.rng.IntN(3)], via, true)
}

// abandon has a consumer walk away from a lease: it lapses.
func (s *sim) abandon() {
	if _, l := s.pickHeld(); l != nil {
		s.dropHeld(l)
		s.logf("abandon %v", l.k)
	}
}

// replay reads a partition's history through any node, and checks what it read.
func (s *sim) replay() {
	nd := s.pickUp()
	if nd == nil {
		return
	}
	p := int32(s.rng.IntN(int(s.partitions())))
	log := s.logs.Log(topic, p)
	oldest, hwm := log.Oldest(), log.HighWatermark()
	from := s.rng.Int64N(hwm + 2)
	limit := 1 + s.rng.IntN(8)
	msgs, err := nd.rn.Replay(context.Background(), topic, p, from, limit)
	s.report.Replays += len(msgs)
	s.logf("replay %d from %d on %s: %d records, %v", p, from, nd.id, len(msgs), err)
	s.mu.Lock()
	defer s.mu.Unlock()
	next := max(from, oldest)
	for _, m := range msgs {
		k := key{incOf(m.Value), m.Partition, m.Offset}
		r := s.records[k]
		switch {
		case m.Partition != p || m.Offset != next:
			s.failKind(KindReplay, "a replay of %d from %d on %s read %v where %d/%d was next", p, from, nd.id, k, p, next)
		case r == nil || string(m.Value) != r.value:
			s.failKind(KindReplay, "a replay on %s read %v with %q: not what was produced", nd.id, k, m.Value)
		case r.corrupt:
			s.failKind(KindReplay, "a replay on %s read %v, which is unreadable", nd.id, k)
		case len(msgs) > limit:
			s.failKind(KindReplay, "a replay on %s with limit %d read %d records", nd.id, limit, len(msgs))
		}
		next++
	}
}

func (s *sim) sleep() {
	d := []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 3 * time.Second, s.vt}[s.rng.IntN(7)]
	time.Sleep(d)
}

// trim drops the oldest records of a partition, as retention does.
func (s *sim) trim() {
	p := int32(s.rng.IntN(int(s.partitions())))
	log := s.logs.Log(topic, p)
	oldest := min(log.Oldest()+1+s.rng.Int64N(3), log.HighWatermark())
	now := time.Now()
	s.mu.Lock()
	for off := log.Oldest(); off < oldest; off++ {
		r := s.records[key{s.inc, p, off}]
		r.trimmedAt = now
		for _, l := range r.leases {
			l.endMin = earliest(l.endMin, now) // the frontier's jump drops it
		}
	}
	s.mu.Unlock()
	log.Trim(oldest)
	s.report.Faults.Trims++
	s.logf("trim %d below %d", p, oldest)
}

// corrupt makes a retained record permanently unreadable.
func (s *sim) corrupt() {
	p := int32(s.rng.IntN(int(s.partitions())))
	log := s.logs.Log(topic, p)
	if log.HighWatermark() == log.Oldest() {
		return
	}
	off := log.Oldest() + s.rng.Int64N(log.HighWatermark()-log.Oldest())
	s.mu.Lock()
	r := s.records[key{s.inc, p, off}]
	if !r.corrupt {
		r.corrupt, r.corruptAt = true, time.Now()
		s.report.Faults.Corrupted++
	}
	s.mu.Unlock()
	log.Corrupt(off)
	s.logf("corrupt %d/%d", p, off)
}

// deleteTopic deletes the topic and creates it again under its name with empty logs, as a
// host does: the routes forget it, every node drops it (DeleteTopic), the logs start afresh,
// the routes know it again. Nothing of the old incarnation (leases, acks, state) may serve
// the new one. Only with every node running: a node down would need its state removed by the
// host before it starts again.
func (s *sim) deleteTopic() {
	if len(s.upNodes()) < len(s.nodes) {
		return
	}
	for _, nd := range s.nodes {
		if nd.cut || nd.view != nil {
			return // a host out of touch with it would not hear of the delete
		}
	}
	start := time.Now()
	s.topicGone.Store(true)
	for _, p := range s.polls {
		p.spanned = true
	}
	for _, nd := range s.nodes {
		if err := nd.rn.DeleteTopic(topic); err != nil {
			s.failf("DeleteTopic on %s: %v", nd.id, err)
		}
	}
	end := time.Now()
	s.mu.Lock()
	for _, r := range s.records {
		if r.deletedAt.IsZero() {
			r.deletedAt, r.deletedBy = start, end
		}
	}
	for _, l := range s.leases {
		l.endMin, l.endMax = earliest(l.endMin, start), earliest(l.endMax, end)
	}
	for _, nd := range s.nodes {
		e := nd.cur()
		e.touched = nil // the new incarnation's partitions are primed afresh
		// DeleteTopic drops the owner's tokens and holds with the topic: the records they
		// held back are gone, and they count against none of the new incarnation's.
		e.holds, e.credit = nil, nil
	}
	clear(s.handedOff) // DeleteTopic ends the fences
	s.inc++
	s.mu.Unlock()
	for p := range s.partitions() {
		s.logs.Replace(topic, p, routertest.NewMemLog())
	}
	s.topicGone.Store(false)
	for _, nd := range s.nodes {
		for _, p := range nd.parts {
			nd.rn.Appended(topic, p, 0)
		}
	}
	s.report.Faults.TopicDeletes++
	s.logf("delete the topic and create it again: incarnation %d", s.inc)
}

// restart stops a node (gracefully, or crashing) and starts it again, at once or after a
// while down.
func (s *sim) restart(kind endKind) {
	nd := s.pickUp()
	if nd == nil || nd.cut {
		return
	}
	if kind == graceful {
		s.report.Faults.GracefulRestarts++
	}
	s.stop(nd, kind)
	down := []time.Duration{0, 0, 200 * time.Millisecond, time.Second, 4 * time.Second}[s.rng.IntN(5)]
	if down == 0 {
		s.start(nd)
		return
	}
	nd.downUntil = time.Now().Add(down)
}

// revive starts the nodes whose time down is over, and reconnects the isolated ones whose
// time is up.
func (s *sim) revive() {
	now := time.Now()
	s.reviveOwnership(now)
	s.reviveHung(now)
	for _, nd := range s.nodes {
		if !nd.downUntil.IsZero() && !now.Before(nd.downUntil) {
			nd.downUntil = time.Time{}
			if nd.isolated {
				s.connect(nd)
			}
			if !nd.up() {
				s.start(nd)
			}
		}
	}
}

// isolate cuts a running node off the network for a while: calls to it fail at once. The
// failure detector notices, or not.
func (s *sim) isolate() {
	nd := s.pickUp()
	if nd == nil || nd.isolated || nd.cut {
		return
	}
	nd.isolated = true
	nd.downUntil = time.Now().Add([]time.Duration{100 * time.Millisecond, time.Second, 3 * time.Second}[s.rng.IntN(3)])
	s.mu.Lock()
	s.netDown[nd.id] = true
	s.mu.Unlock()
	s.nw.SetDown(nd.id, true)
	nd.down.Store(s.rng.IntN(2) == 0)
	s.report.Faults.Isolations++
	s.logf("isolate %s until %v (detected %v)", nd.id, s.since(nd.downUntil), nd.down.Load())
}

func (s *sim) connect(nd *node) {
	nd.isolated = false
	s.mu.Lock()
	s.netDown[nd.id] = false
	s.mu.Unlock()
	s.nw.SetDown(nd.id, false)
	nd.down.Store(false)
	s.logf("reconnect %s", nd.id)
}

// partition splits the nodes in two groups that cannot reach each other, or heals the split.
func (s *sim) partition() {
	s.mu.Lock()
	partitioned := s.group != nil
	s.mu.Unlock()
	if partitioned {
		s.healPartition()
		return
	}
	ids := make([]string, len(s.nodes))
	for i, nd := range s.nodes {
		ids[i] = nd.id
	}
	s.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	k := 1 + s.rng.IntN(len(ids)-1)
	a, b := ids[:k], ids[k:]
	s.mu.Lock()
	s.group = map[string]int{}
	for _, id := range b {
		s.group[id] = 1
	}
	s.mu.Unlock()
	s.nw.Partition(a, b)
	s.report.Faults.Partitions++
	s.logf("partition %v | %v", a, b)
}

func (s *sim) healPartition() {
	s.mu.Lock()
	s.group = nil
	s.mu.Unlock()
	s.nw.Heal()
	s.logf("heal the partition")
}

// toggleNetFaults turns the run's frame losses and duplicates on or off.
func (s *sim) toggleNetFaults() {
	s.mu.Lock()
	if s.prof == (profile{}) {
		s.prof = s.faultProf
	} else {
		s.prof = profile{}
	}
	p := s.prof
	s.mu.Unlock()
	s.logf("network faults %+v", p)
}

// diskFull fills an owner's disk (ENOSPC), or frees it.
func (s *sim) diskFull() {
	nd := s.nodes[s.rng.IntN(len(s.nodes))]
	if !nd.owner() {
		return
	}
	if nd.diskFull != nil {
		nd.fs.SetFreeBytes(-1)
		s.endPeriod(nd, &nd.diskFull)
		return
	}
	nd.fs.SetFreeBytes(0)
	s.beginPeriod(nd, &nd.diskFull, "full")
	s.report.Faults.DiskFull++
}

// syncErrors makes an owner's fdatasync fail now and then (EIO), or stops it.
func (s *sim) syncErrors() {
	nd := s.nodes[s.rng.IntN(len(s.nodes))]
	if !nd.owner() || !nd.up() {
		return
	}
	if nd.syncErr != nil {
		nd.fs.Inject(nil)
		s.endPeriod(nd, &nd.syncErr)
		return
	}
	mode := crashfs.SyncKeepDirty
	if s.rng.IntN(2) == 0 {
		mode = crashfs.SyncDropDirty
	}
	nd.fs.SetSyncFailureMode(mode)
	r := rand.New(rand.NewPCG(s.rng.Uint64(), 2))
	nd.fs.Inject(crashfs.Random(r, []float64{0.3, 1}[s.rng.IntN(2)], crashfs.OnKind(crashfs.OpSyncData, crashfs.ErrInjected)))
	s.beginPeriod(nd, &nd.syncErr, "sync")
	s.report.Faults.SyncErrors++
}

func (s *sim) beginPeriod(nd *node, p **period, kind string) {
	s.mu.Lock()
	*p = &period{kind: kind, start: time.Now()}
	nd.periods = append(nd.periods, *p)
	s.mu.Unlock()
	s.logf("disk fault on %s: %s", nd.id, kind)
}

func (s *sim) endPeriod(nd *node, p **period) {
	s.mu.Lock()
	(*p).end = time.Now()
	kind := (*p).kind
	*p = nil
	s.mu.Unlock()
	s.logf("disk fault on %s over: %s", nd.id, kind)
}

// checkStep checks, after a step, each node's counters against what the network and the
// model saw. (An owner's promises are checked as it makes them: a hold may outlive the
// record it was made for, which a local consumer of the owner may take meanwhile.)
func (s *sim) checkStep() {
	for _, nd := range s.upNodes() {
		s.mu.Lock()
		forgedPassed := nd.cur().forgedPassed // counted after the node's own count
		s.mu.Unlock()
		st := nd.rn.Stats()
		s.mu.Lock()
		e := nd.cur()
		if st.Remote.Unbacked < forgedPassed {
			s.failKind(KindBelievedLiar, "%s#%d counts %d unbacked notifications and records; it passed %d forged notifications of the lying peer",
				nd.id, e.n, st.Remote.Unbacked, forgedPassed)
		}
		if st.Remote.Notified != uint64(e.notified) {
			s.failKind(KindCounters, "%s#%d counts %d notifications sent; the network saw %d", nd.id, e.n, st.Remote.Notified, e.notified)
		}
		corrupt := 0
		for k, r := range s.records {
			if nd.everOwned[k.p] && r.corrupt {
				corrupt += 1 + e.movedIn[k.p]
			}
		}
		if st.Shards.CorruptSkipped > uint64(corrupt) {
			s.failKind(KindCounters, "%s#%d skipped %d records as corrupt; %d of its records are", nd.id, e.n, st.Shards.CorruptSkipped, corrupt)
		}
		s.mu.Unlock()
	}
}

// --- the end of a run: heal, drain (liveness), the sparse stream, a graceful restart ----------

// heal ends every fault: the network, the partitions, the disks, and every node runs.
func (s *sim) heal() {
	s.mu.Lock()
	s.prof = profile{}
	s.mu.Unlock()
	s.healPartition()
	s.healHangs()
	s.healLiar()
	s.healOwnership()
	for _, nd := range s.nodes {
		if nd.isolated {
			s.connect(nd)
		}
		if nd.diskFull != nil {
			nd.fs.SetFreeBytes(-1)
			s.endPeriod(nd, &nd.diskFull)
		}
		if nd.syncErr != nil {
			nd.fs.Inject(nil)
			s.endPeriod(nd, &nd.syncErr)
		}
		nd.downUntil = time.Time{}
		if !nd.up() {
			s.start(nd)
		}
	}
	for _, l := range s.held {
		l.held = false
	}
	s.held = nil // the consumers walk away; their leases lapse
	s.healAt = time.Now()
	s.logf("heal: every fault ends")
}

// drainBound is how long after the faults heal every record must be acked: what a consumer
// that walked away holds lapses within a visibility timeout (an extend reaches at most one
// more), a lapsed hold within a second, and the consumers ask every owner at each turn.
func (s *sim) drainBound() time.Duration {
	return s.vt + 6*time.Second
}

// drain consumes and acks everything on every node until every record is settled, and holds
// the cluster to the liveness bound (invariant "nothing lost"): each node runs a
// consumer that long-polls and acks what it got (one AckBatch through that node), again and
// again.
func (s *sim) drain() {
	bound := s.drainBound()
	s.report.DrainBound = bound
	deadline := s.healAt.Add(bound)
	var last time.Time
	active := map[*node]*poll{}
	for !s.failed() && time.Now().Before(deadline) {
		if len(s.polls) == 0 && s.allSettledSure() {
			break
		}
		for _, nd := range s.nodes {
			if p := active[nd]; p != nil && slices.Contains(s.polls, p) {
				continue
			}
			opts := router.ConsumeOptions{Max: []int{1, 10, 100}[s.rng.IntN(3)], Wait: 500 * time.Millisecond}
			ctx, cancel := context.WithCancel(context.Background())
			active[nd] = s.startPoll(nd, opts, ctx, cancel)
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		before := s.report.Acked
		got := slices.Clone(s.held)
		s.collect()
		byVia := map[*node][]*lease{}
		for _, l := range slices.Clone(s.held) {
			if !slices.Contains(got, l) {
				byVia[s.byID[l.via]] = append(byVia[s.byID[l.via]], l)
			}
		}
		for _, nd := range s.nodes {
			if ls := byVia[nd]; len(ls) > 0 {
				s.ackAll(nd, ls)
			}
		}
		if s.report.Acked > before {
			last = time.Now()
		}
	}
	if s.failed() {
		return
	}
	for _, p := range s.polls {
		p.end()
	}
	synctest.Wait()
	s.collect()
	for _, l := range slices.Clone(s.held) {
		s.settleOne(l, opAck, s.byID[l.via], false)
	}
	if !last.IsZero() {
		s.report.Drain = last.Sub(s.healAt)
	}
	// The verdict (the Jepsen-style history check): every record produced is acked, unless
	// unreadable or removed by retention; an ack answered 502 and never followed by a
	// delivery counts as applied.
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.sortedKeys() {
		r := s.records[k]
		switch {
		case r.corrupt || !r.trimmedAt.IsZero() || !r.deletedAt.IsZero() || r.quarantined:
		case len(r.acks) > 0:
			// Not delivered again by now: the acks that a crash could have undone held.
			r.acks = []ack{{s: time.Now(), r: time.Now(), l: r.acks[len(r.acks)-1].l, owner: s.ownerOf(k.p)}}
		case len(r.maybe) > 0:
		default:
			s.report.Lost++
			if s.failure == nil {
				s.failKind(KindLost, "%v lost: produced, retained, readable, not acked %v after the faults healed (delivered %d times, ever acked %v)",
					k, bound, len(r.leases), r.everAcked)
			}
		}
	}
	s.logf("drained: the last ack %v after the heal", s.report.Drain)
}

// allSettledSure reports whether every record is acked for good, unreadable or removed.
func (s *sim) allSettledSure() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.records {
		if r.corrupt || !r.trimmedAt.IsZero() || !r.deletedAt.IsZero() || r.quarantined {
			continue
		}
		if !s.settledSure(r) {
			return false
		}
	}
	return true
}

func (s *sim) sortedKeys() []key {
	keys := make([]key, 0, len(s.records))
	for k := range s.records {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.inc != b.inc {
			return a.inc - b.inc
		}
		if a.p != b.p {
			return int(a.p - b.p)
		}
		return int(a.off - b.off)
	})
	return keys
}

// sparse times a sparse stream through a node that owns none of the records: one record at
// a time, each appended while the consumer is parked, must reach it in a notification and a
// claim, a few one-way trips, never after a lapsed hold (a hold a claim failed to retire
// keeps the next record back for up to a second).
func (s *sim) sparse() {
	var owner, via *node
	for _, o := range s.nodes {
		if !o.owner() || !o.knows(5) {
			continue
		}
		for _, r := range s.nodes {
			if r != o && r.knows(5) && !r.noCallbacks && (via == nil || !r.owner()) {
				owner, via = o, r
			}
		}
		if via != nil {
			break
		}
	}
	if via == nil {
		return
	}
	bound := 6*s.maxTrip + 10*time.Millisecond
	s.report.SparseBound = bound
	p := owner.parts[0]
	// The drain's holds lapse, and so do the owner's leases still running: one left to
	// lapse on a record made unreadable since (the drain does not wait for those) frees the
	// record when it ends, and the owner, which learns that the record is unreadable only
	// when a claim reads it, would wake the consumer for nothing.
	wait := tokens.DefaultHold + 100*time.Millisecond
	now := time.Now()
	s.mu.Lock()
	for _, l := range s.leases {
		if l.holder.nd == owner && l.endMax.After(now) {
			wait = max(wait, l.endMax.Sub(now)+100*time.Millisecond)
		}
	}
	s.mu.Unlock()
	time.Sleep(wait)
	s.logf("sparse stream: %s's partition %d to a consumer on %s", owner.id, p, via.id)
	for i := range 4 {
		ctx, cancel := context.WithCancel(context.Background())
		pl := s.startPoll(via, router.ConsumeOptions{Wait: 5 * time.Second}, ctx, cancel)
		// The record is appended once the consumer is parked and its registration had time
		// to reach the owner: before that, its probes of each owner in turn (one round trip
		// each) may still be under way, and a notification on the token of the consumer before
		// it is rightly passed, as the token is stale.
		for start := time.Now(); via.rn.Parked(topic) == 0 && time.Since(start) < time.Second; {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(max(100*time.Millisecond, 2*s.maxTrip+10*time.Millisecond))
		synctest.Wait()
		sent := time.Now()
		s.sparseAppend(p)
		r := <-pl.done
		pl.done <- r
		s.collect()
		took := r.at.Sub(sent)
		s.report.Sparse++
		s.report.SparseMax = max(s.report.SparseMax, took)
		// A claim an older owner refuses for a field it does not know goes again without
		// it, a round trip per field the first time (then remembered for 2 minutes).
		learning := s.consumeFieldsLearnt(via, owner, sent)
		if len(r.msgs) != 1 || took > bound+time.Duration(2*learning)*s.maxTrip {
			s.failfKind(KindSparseLatency, "sparse stream: record %d reached the consumer on %s in %v with %d records (bound %v, and a round trip for each of %d consume fields %s refused): a notification and a claim take a few trips",
				i, via.id, took, len(r.msgs), bound, learning, owner.id)
			return
		}
		l := s.held[len(s.held)-1]
		s.settleOne(l, opAck, via, false)
		time.Sleep(100 * time.Millisecond)
	}
}

// restartAll stops every node gracefully and starts it again: nothing acked comes back
// (invariant 6: after a graceful close, never), checked by a last sweep on every node.
func (s *sim) restartAll() {
	for _, nd := range s.nodes {
		s.stop(nd, graceful)
		s.start(nd)
	}
	for range 3 {
		for _, nd := range s.nodes {
			start := time.Now()
			msgs, err := nd.rn.Consume(context.Background(), topic, router.ConsumeOptions{Max: 100})
			s.received(msgs)
			r := polled{msgs, err, time.Now()}
			s.checkReturn(nd, start, 0, time.Time{}, r)
			s.consumed(nd, 0, r, false, false)
		}
	}
}

// shutdown stops every node and waits for every goroutine the run started.
func (s *sim) shutdown() {
	for _, p := range s.polls {
		p.end()
	}
	for _, nd := range s.nodes {
		if nd.rn != nil {
			nd.rn.Close()
		}
	}
	time.Sleep(5 * time.Second) // duplicated frames still on their way arrive
	synctest.Wait()
	if s.liar != nil {
		s.liar.wg.Wait() // its calls gave up long ago
	}
}

// --- events ----------------------------------------------------------------------------------

func (s *sim) since(t time.Time) time.Duration { return t.Sub(s.began) }

// logf records an event of the run (trace's other name, for the driver).
func (s *sim) logf(format string, args ...any) { s.trace(format, args...) }

// trace records an event: into the ring of recent events a violation shows, the run's
// fingerprint, and Options.Logf.
func (s *sim) trace(format string, args ...any) { s.event(false, format, args...) }

// event records an event of the driver, or (fromNode) a node's log line, which is left out
// of the fingerprint: the nodes' goroutines log in whatever order they run.
func (s *sim) event(fromNode bool, format string, args ...any) {
	line := fmt.Sprintf("%9.3fs ", time.Since(s.began).Seconds()) + fmt.Sprintf(format, args...)
	s.traceMu.Lock()
	defer s.traceMu.Unlock()
	if len(s.ring) < 400 {
		s.ring = append(s.ring, line)
	} else {
		s.ring[s.ringNext] = line
		s.ringNext = (s.ringNext + 1) % len(s.ring)
	}
	if !fromNode {
		s.fingerprint = mix(s.fingerprint, hashString(line))
	}
	if s.opts.Logf != nil {
		s.opts.Logf("%s", line)
	}
}

// logger returns the logger of node id: its warnings and errors join the run's events.
func (s *sim) logger(id string) *slog.Logger { return slog.New(logHandler{s, id}) }

type logHandler struct {
	s  *sim
	id string
}

func (h logHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteByte(' ')
		b.WriteString(a.String())
		return true
	})
	h.s.event(true, "%s logs: %s", h.id, b.String())
	return nil
}

func (h logHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logHandler) WithGroup(string) slog.Handler      { return h }

func (s *sim) lastEvents(n int) []string {
	s.traceMu.Lock()
	defer s.traceMu.Unlock()
	out := append(slices.Clone(s.ring[s.ringNext:]), s.ring[:s.ringNext]...)
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
