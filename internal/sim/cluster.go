package sim

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing/synctest"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// topic is the one topic of a run.
const topic = "orders"

// node is one member of the cluster, across its restarts.
type node struct {
	id          string
	parts       []int32 // the partitions of the topic it owns; none on a gateway
	version     uint8   // Config.WireVersion
	noCallbacks bool
	remote      map[string][]int32 // the other owners' partitions, as its routes answer
	everOwned   map[int32]bool     // the partitions it owned at some time in the run

	fs     *crashfs.FS
	rn     *router.Node // nil while down
	epochs []*epoch     // its processes, the last one live unless down

	down      atomic.Bool   // what the host's failure detector says (Liveness)
	downUntil time.Time     // a stopped node comes back then
	isolated  bool          // taken off the network (calls to it fail) without a restart
	hungUntil time.Time     // hung (frames sent to it lost, unnoticed) until then; zero: not hung
	skew      time.Duration // its clock's offset from the bubble's

	diskFull, syncErr *period // the disk faults in force
	periods           []*period

	// Ownership in time (ownership.go, zombie.go). frozen is the reading its clock stands
	// still at while it is paused (nil: its clock runs). paused and cut say it is paused or
	// cut off, until until, its partitions failing over at failoverAt (zero: not); pauses
	// are its pauses so far. view is what its routes answer while they are stale (nil: the
	// routes as they are; guarded by sim.routesMu), until staleUntil.
	frozen                        atomic.Pointer[time.Time]
	paused, cut                   bool
	until, failoverAt, staleUntil time.Time
	pauses                        []span
	view                          *routeView
}

// epoch is one process of a node: from its start to the end of its Close.
type epoch struct {
	nd    *node
	n     int
	start time.Time
	stop  time.Time // when the process began to end (the crash); zero while it runs
	end   time.Time // when its Close returned
	kind  endKind
	// closeErr is what a graceful Close answered: its final writeout failed.
	closeErr error
	// What the owner promised other nodes (see promise.go).
	notified int
	holds    []hold
	credit   map[string]time.Time
	stats    router.RemoteStats // its counters as it ended
	// touched is when the model first knew each partition to be loaded by this process.
	touched map[int32]time.Time
	// movedOut lists the partitions moved away from the node while this process ran: its
	// promises made before a move may name their records.
	movedOut []int32
	// movedIn counts the moves of each partition to the node while this process ran: a
	// failover's state carries no corrupt skips (the set is memory only), so the adopter
	// skips them again; a hand-off's does, counted all the same (the bound errs high).
	movedIn map[int32]int
	// saved lists, per partition, the saves of it by this process (to the shared state
	// store) that returned success: when (the call and its return are one instant) and under
	// which ownership epoch; crashed says the process died (a crash or a power cut): its
	// saves from then on fail, as a dead process makes none.
	saved   map[int32][]save
	crashed bool
	// lostGrant says a grant of this process lapsed: a give-back it applied may not have
	// been saved (quarantine.go).
	lostGrant bool
	// forgedPassed counts the lying peer's notifications this process answered with a pass:
	// its Stats().Remote.Unbacked counts at least as many.
	forgedPassed uint64
}

func (e *epoch) touch(p int32, at time.Time) {
	if e.touched == nil {
		e.touched = map[int32]time.Time{}
	}
	if t, ok := e.touched[p]; !ok || at.Before(t) {
		e.touched[p] = at
	}
}

type endKind uint8

const (
	running endKind = iota
	graceful
	processCrash
	powerCut
)

func (k endKind) String() string {
	return [...]string{"running", "graceful stop", "process crash", "power cut"}[k]
}

// period is a disk fault in force on a node from start to end (zero: still in force).
type period struct {
	kind       string // "full" or "sync"
	start, end time.Time
}

func (nd *node) cur() *epoch { return nd.epochs[len(nd.epochs)-1] }

func (nd *node) up() bool { return nd.rn != nil }

func (nd *node) owner() bool { return len(nd.parts) > 0 }

// epochAt returns the process of nd that was live at t: started at or before it and ended at
// or after it.
func (nd *node) epochAt(t time.Time) *epoch {
	for i := len(nd.epochs) - 1; i >= 0; i-- {
		e := nd.epochs[i]
		if !t.Before(e.start) {
			if e.end.IsZero() || !t.After(e.end) {
				return e
			}
			return nil
		}
	}
	return nil
}

// routes is a node's view of the ownership table, which changes only when a partition
// moves (the move step); the driver replaces a node's parts and remote whole, under
// s.routesMu, and never edits them in place.
type routes struct {
	nd *node
	s  *sim
}

func (r routes) Partitions(t string) ([]int32, map[string][]int32, bool) {
	if t != topic || r.s.topicGone.Load() {
		return nil, nil, false
	}
	r.s.routesMu.RLock()
	defer r.s.routesMu.RUnlock()
	if v := r.nd.view; v != nil {
		return v.parts, v.remote, true
	}
	return r.nd.parts, r.nd.remote, true
}

// Owner implements router.OwnerFinder.
func (r routes) Owner(t string, partition int32) (string, bool) {
	if t != topic || r.s.topicGone.Load() {
		return "", false
	}
	r.s.routesMu.RLock()
	defer r.s.routesMu.RUnlock()
	remote := r.nd.remote
	if v := r.nd.view; v != nil {
		remote = v.remote
	}
	for owner, parts := range remote {
		if slices.Contains(parts, partition) {
			return owner, true
		}
	}
	return "", false
}

// liveRoutes adds the host's failure detector.
type liveRoutes struct{ routes }

func (r liveRoutes) Down(id string) bool { return r.s.byID[id].down.Load() }

// partitionsOnly offers the node nothing but Partitions (no OwnerFinder), and the failure
// detector when live is set.
type partitionsOnly struct{ r routes }

func (r partitionsOnly) Partitions(t string) ([]int32, map[string][]int32, bool) {
	return r.r.Partitions(t)
}

type livePartitionsOnly struct{ partitionsOnly }

func (r livePartitionsOnly) Down(id string) bool { return liveRoutes{r.r}.Down(id) }

// setup draws the cluster's shape and starts every node.
func (s *sim) setup() {
	rng := s.rng
	n := s.opts.Nodes
	if n == 0 {
		n = 2 + rng.IntN(4)
	}
	n = min(max(n, 2), 5)
	owners := n
	if rng.IntN(8) != 0 {
		owners = 1 + rng.IntN(n-1)
	}
	parts := owners + rng.IntN(4)
	parts = min(max(parts, owners), 6)
	for i := range n {
		id := fmt.Sprintf("o%d", i)
		if i >= owners {
			id = fmt.Sprintf("g%d", i-owners)
		}
		nd := &node{id: id, fs: crashfs.New()}
		s.nodes = append(s.nodes, nd)
	}
	for p := range parts {
		nd := s.nodes[p%owners]
		nd.parts = append(nd.parts, int32(p))
	}
	s.byID = map[string]*node{}
	for _, nd := range s.nodes {
		s.byID[nd.id] = nd
	}
	s.firstOwner = map[int32]*node{}
	s.holder = map[int32]*node{}
	for _, nd := range s.nodes {
		nd.everOwned = map[int32]bool{}
		for _, p := range nd.parts {
			nd.everOwned[p] = true
			s.firstOwner[p] = nd
			s.holder[p] = nd
		}
	}
	s.rebuildRemote()
	// Older releases on some nodes: a rolling upgrade in progress.
	if rng.IntN(3) == 0 {
		for _, nd := range s.nodes {
			nd.version = []uint8{2, 3, 4, 5, 0, 0}[rng.IntN(6)]
		}
	}
	for _, nd := range s.nodes {
		if !nd.owner() && rng.IntN(8) == 0 {
			nd.noCallbacks = true
		}
	}
	s.liveness = rng.IntN(2) == 0
	s.vt = []time.Duration{2 * time.Second, 3 * time.Second, 5 * time.Second}[rng.IntN(3)]
	caps := []int{4, 8, 64}
	s.topicCfg = router.TopicConfig{VisibilityTimeout: s.vt, MaxInFlight: caps[rng.IntN(3)], MaxAckedAhead: caps[rng.IntN(3)]}

	rtt := []time.Duration{time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond}[rng.IntN(3)]
	jitter := []time.Duration{0, rtt / 2, rtt, 2 * rtt}[rng.IntN(4)]
	s.nw = &routertest.Network{RTT: rtt, Jitter: jitter, Seed: rng.Uint64(), Fault: s.fault, Observe: s.observe}
	s.maxTrip = rtt/2 + jitter
	s.drawSkew()
	s.drawMaxDeliveries()
	s.planRejects()
	if s.ord != nil {
		s.topicCfg.Ordered = true
	}
	s.planQuarantineKeys()
	s.planSpill()

	s.report.Nodes, s.report.Owners, s.report.Gateways, s.report.Parts = n, owners, n-owners, parts
	s.report.Liveness = s.liveness
	for _, nd := range s.nodes {
		s.report.Versions = append(s.report.Versions, nd.version)
	}
	s.logf("cluster: %d nodes (%d owners), %d partitions, versions %v, liveness %v, no callbacks %v, VT %v, caps %d/%d, RTT %v, jitter %v, state store %v",
		n, owners, parts, s.report.Versions, s.liveness, s.noCallbackIDs(), s.vt, s.topicCfg.MaxInFlight, s.topicCfg.MaxAckedAhead, rtt, jitter, s.store != nil)
	if s.report.Skew != nil || s.topicCfg.MaxDeliveries > 0 {
		s.logf("cluster: clock offsets %v, max deliveries %d", s.report.Skew, s.topicCfg.MaxDeliveries)
	}
	if s.ord != nil {
		s.logf("cluster: the topic is ordered, %d keys (planted unordered nodes: %v)", s.ord.keys, s.opts.Plant == PlantUnordered)
	}
	if s.topicCfg.QuarantineKeys {
		s.logf("cluster: quarantined records take their keys with them (planted nodes without: %v)", s.opts.Plant == PlantUnquarantinedKeys)
	}
	for _, nd := range s.nodes {
		for _, p := range nd.parts {
			s.logs.Log(topic, p)
		}
	}
	for _, nd := range s.nodes {
		s.start(nd)
	}
}

// rebuildRemote gives every node a fresh map of the other owners' partitions.
func (s *sim) rebuildRemote() {
	for _, nd := range s.nodes {
		remote := map[string][]int32{}
		for _, o := range s.nodes {
			if o != nd && o.owner() {
				remote[o.id] = o.parts
			}
		}
		nd.remote = remote
	}
}

func (s *sim) noCallbackIDs() []string {
	var ids []string
	for _, nd := range s.nodes {
		if nd.noCallbacks {
			ids = append(ids, nd.id)
		}
	}
	return ids
}

// start starts a new process of nd on its file system. Its routes name only the partitions
// whose state it holds: not those failed over from it while it was down.
func (s *sim) start(nd *node) {
	for _, p := range nd.parts {
		if s.holder[p] != nd {
			s.fatalf("starting %s with routes naming partition %d, whose state %s holds", nd.id, p, s.holder[p].idOr("no node"))
		}
	}
	if nd.view != nil {
		s.routesMu.Lock()
		nd.view = nil // a new process reads the routes as they are
		s.routesMu.Unlock()
		nd.staleUntil = time.Time{}
	}
	time.Sleep(time.Microsecond) // the new process's leases are granted after the old one ended
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], s.rng.Uint64())
	binary.LittleEndian.PutUint64(seed[8:], s.rng.Uint64())
	var r router.Routes = routes{nd, s}
	switch plain := seed[0]&2 == 0; { // half the processes' routes offer no OwnerFinder
	case s.liveness && plain:
		r = livePartitionsOnly{partitionsOnly{routes{nd, s}}}
	case s.liveness:
		r = liveRoutes{routes{nd, s}}
	case plain:
		r = partitionsOnly{routes{nd, s}}
	}
	// Half the processes say their transport honours its context (every wait in it watches
	// ctx), so that both ways a node makes its calls are run.
	var tr router.Transport = transport{s: s, nd: nd, inner: s.nw.Transport(nd.id)}
	if seed[0]&1 == 0 {
		tr = promptTransport{transport{s: s, nd: nd, inner: s.nw.Transport(nd.id), prompt: true}}
	}
	topicCfg := s.topicCfg
	if s.opts.Plant == PlantUnordered {
		topicCfg.Ordered = false // the model still expects order
	}
	if s.opts.Plant == PlantUnquarantinedKeys {
		topicCfg.QuarantineKeys = false // the model still expects it
	}
	cfg := router.Config{
		Logs: s.logs, Routes: r, Dir: "/state", FS: nd.fs, Transport: tr,
		Topic:       func(string) router.TopicConfig { return topicCfg },
		Seeds:       rand.NewChaCha8(seed),
		WireVersion: nd.version,
		NoCallbacks: nd.noCallbacks,
		Logger:      s.logger(nd.id),
		Clock:       s.clockOf(nd),
	}
	start := time.Now()
	e := &epoch{nd: nd, n: len(nd.epochs), start: start}
	if s.ctl != nil {
		s.ctl.begin(e)
		if s.opts.Plant != PlantUnfencedZombie {
			cfg.Ownership = nodeOwnership{s.ctl, e}
		}
	}
	if s.topicCfg.MaxDeliveries > 0 || s.rejects != nil {
		cfg.OnQuarantine = func(t string, p int32, off int64, attempts uint32) { s.quarantined(e, t, p, off, attempts) }
	}
	if s.store != nil {
		cfg.Store = &nodeStore{s: s, e: e}
	}
	rn, err := router.New(cfg)
	if err != nil {
		s.fatalf("starting %s: %v", nd.id, err)
	}
	s.mu.Lock()
	nd.epochs = append(nd.epochs, e)
	nd.rn = rn
	s.mu.Unlock()
	s.nw.Join(nd.id, s.serveOf(nd, e, rn))
	s.mu.Lock()
	s.netDown[nd.id] = nd.isolated
	s.mu.Unlock()
	if !nd.isolated {
		s.nw.SetDown(nd.id, false)
	}
	nd.down.Store(false)
	for _, p := range nd.parts {
		rn.Appended(topic, p, s.logs.Log(topic, p).HighWatermark())
	}
	s.logf("start %s#%d", nd.id, e.n)
}

// stop ends nd's process: gracefully, or by a crash of the process or of the machine. Its
// leases and holds go with it.
func (s *sim) stop(nd *node, kind endKind) {
	e := nd.cur()
	nd.down.Store(true)
	s.mu.Lock()
	s.netDown[nd.id] = true
	s.mu.Unlock()
	s.nw.SetDown(nd.id, true)
	stop := time.Now()
	if kind != graceful {
		s.mu.Lock()
		e.crashed = true // the dead process saves nothing more: its Close's saves fail
		s.mu.Unlock()
	}
	fsys := nd.fs
	switch kind {
	case processCrash:
		fsys = nd.fs.ProcessCrash()
		s.report.Faults.ProcessCrashes++
	case powerCut:
		opt := crashfs.PowerCut{}
		if s.rng.IntN(2) == 0 {
			opt.Rand = rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64()))
			opt.KeepUnsynced = []float64{0.25, 0.5, 1}[s.rng.IntN(3)]
		}
		if s.rng.IntN(2) == 0 {
			opt.TearLastWrite, opt.TearAt = true, s.rng.IntN(4097)
		}
		fsys = nd.fs.PowerCut(opt)
		s.report.Faults.PowerCuts++
	}
	err := nd.rn.Close()
	if s.ctl != nil {
		s.ctl.end(e) // after its Close, which saves under its grants
	}
	if kind == graceful && err != nil {
		s.logf("%s#%d: Close: %v", nd.id, e.n, err)
	}
	st := nd.rn.Stats()
	s.mu.Lock()
	e.stop, e.end, e.kind, e.stats = stop, time.Now(), kind, st.Remote
	s.report.AheadHandedOver += st.Ahead.HandedOver
	s.report.Deferred += st.Shards.Deferred
	s.report.Spilled += st.Shards.Spilled
	s.report.Refilled += st.Shards.Refilled
	if kind == graceful {
		e.closeErr = err
	}
	e.holds = nil
	nd.rn = nil
	s.endLeases(e)
	s.mu.Unlock()
	if kind != graceful && nd.syncErr != nil {
		// The injector does not survive the crash: the new file system has none.
		s.endPeriod(nd, &nd.syncErr)
	}
	nd.fs = fsys
	s.logf("stop %s#%d: %v", nd.id, e.n, kind)
	synctest.Wait()
	s.collect() // the long-polls parked on it answered ErrClosed
}

// serveOf is what the network hands nd's frames to while process e runs: its Serve, seen by
// the promise tracker before and after, and bent by a planted bug.
func (s *sim) serveOf(nd *node, e *epoch, rn *router.Node) func(ctx context.Context, from string, frame []byte) ([]byte, error) {
	return func(ctx context.Context, from string, frame []byte) ([]byte, error) {
		if ch := s.pausedChan(nd); ch != nil {
			// Paused: the frame waits until the node resumes, and is served then if its
			// caller still waits for it.
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if s.opts.Plant == PlantClaimAsProbe && len(frame) > 0 && (frame[0] == wire.OpConsume || frame[0] == wire.OpConsumeBatch) {
			frame = claimAsProbe(frame)
		}
		if s.opts.Plant == PlantUnfencedSettle {
			if reply, ok := s.unfencedSettle(nd, frame); ok {
				return reply, nil
			}
		}
		sent := frame // as the requester sent it: a planted bug may bend what arrives
		switch s.opts.Plant {
		case PlantReleaseAsNack:
			frame = rewriteOp(frame, wire.OpRelease)
		case PlantRejectAsNack:
			frame = rewriteOp(frame, wire.OpReject)
		}
		s.arrived(e, from, frame)
		arrived := time.Now()
		reply, err := rn.Serve(ctx, from, frame)
		for i, member := range consumesOf(frame) {
			s.servedLeases(nd, member, memberReply(frame, reply, i))
		}
		s.releasesServed(e, sent, reply, arrived)
		if from == liarID {
			s.forgedServed(e, frame, reply)
		}
		if s.opts.Logf != nil {
			s.event(true, "frame %s>%s#%d: %s -> %s", from, nd.id, e.n, describeFrame(frame), describeReply(frame, reply))
		}
		if s.opts.Plant == PlantReplayReply && len(frame) > 0 && frame[0] == wire.OpConsume {
			reply = s.replayReply(nd, from, reply)
		}
		return reply, err
	}
}

// servedLeases records nd as the node that granted the leases of a consume reply it sent
// for request frame, and each lease's expiry in true time: the reply carries it as a time
// on nd's clock, or, for a request asking for relative expiries, as the time left from now,
// when nd sent the reply. The consumer's Expiry is then its node's count from when the
// request left, up to a trip early: the model judges a lease by the owner's. Each lease is
// a grant of its record (quarantine.go), whether a consumer receives it or not.
func (s *sim) servedLeases(nd *node, frame, reply []byte) {
	r, err := wire.DecodeConsumeReply(reply)
	if err != nil || len(r.Deliveries) == 0 {
		return
	}
	req, err := wire.DecodeRequest(frame, wire.Newest)
	relative := err == nil && req.Consume.RelativeExpiry
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range r.Deliveries {
		expiry := nd.trueTime(time.Unix(0, d.Expiry))
		if relative {
			expiry = now.Add(time.Duration(d.Expiry))
		}
		h := router.Handle{Partition: d.Partition, Offset: d.Offset, Nonce: d.Nonce}
		s.served[h] = servedLease{nd, expiry}
		s.grantedLocked(key{incOf(d.Value), d.Partition, d.Offset}, h)
	}
}

// consumesOf is the Consume frames a request frame carries: itself for a Consume, each
// member as a Consume frame of its own for a ConsumeBatch (the owner serves each as it
// serves a Consume), none for any other frame.
func consumesOf(frame []byte) [][]byte {
	if len(frame) == 0 || (frame[0] != wire.OpConsume && frame[0] != wire.OpConsumeBatch) {
		return nil
	}
	if frame[0] == wire.OpConsume {
		return [][]byte{frame}
	}
	req, err := wire.DecodeRequest(frame, wire.Newest)
	if err != nil {
		return nil
	}
	members := make([][]byte, 0, len(req.Consumes))
	for _, c := range req.Consumes {
		c.Budget = 0
		if out, err := wire.EncodeRequest(wire.Request{Op: wire.OpConsume, Topic: req.Topic, Consume: c}); err == nil {
			members = append(members, out)
		}
	}
	return members
}

// memberReply is the consume reply that answered the i-th of consumesOf(frame): reply
// itself for a Consume, the i-th member of a ConsumeBatch's reply (nil when the owner
// refused the whole frame).
func memberReply(frame, reply []byte, i int) []byte {
	req, err := wire.DecodeRequest(frame, wire.Newest)
	if frame[0] == wire.OpConsume {
		if err == nil && len(req.Records) > 0 {
			// The acks that rode with the consume (wire version 16) are answered first.
			acks, err := wire.DecodeAcksReply(nil, reply, len(req.Records))
			if err != nil || acks.Refused {
				return reply // a refusal of the whole frame, as a consume reply reads it
			}
			return acks.Rest
		}
		return reply
	}
	if err != nil {
		return nil
	}
	r, err := wire.DecodeConsumeBatchReply(reply, len(req.Consumes))
	if err != nil || i >= len(r.Members) {
		return nil
	}
	return r.Members[i]
}

// claimAsProbe rewrites a claim as a plain probe, and each claim of a ConsumeBatch (the
// planted bug PlantClaimAsProbe).
func claimAsProbe(frame []byte) []byte {
	req, err := wire.DecodeRequest(frame, wire.Newest)
	if err != nil {
		return frame
	}
	claims := req.Consume.Claim
	req.Consume.Claim = false
	for i := range req.Consumes {
		claims = claims || req.Consumes[i].Claim
		req.Consumes[i].Claim = false
	}
	if !claims {
		return frame
	}
	if out, err := wire.EncodeRequest(req); err == nil {
		return out
	}
	return frame
}

// replayReply answers the next consume from node from with the last reply carrying records
// that nd sent it (the planted bug PlantReplayReply).
func (s *sim) replayReply(nd *node, from string, reply []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := wire.DecodeConsumeReply(reply)
	if err != nil {
		return reply
	}
	k := nd.id + ">" + from
	if old, ok := s.planted[k]; ok {
		delete(s.planted, k)
		s.plantedReplays++
		return old
	}
	if len(r.Deliveries) > 0 {
		s.planted[k] = slices.Clone(reply)
	}
	return reply
}

// fault decides what becomes of a frame: its fate is drawn from the seed, the link, the op
// and how many frames of that op the link carried before, so that it does not depend on the
// order in which concurrent calls reach the network.
func (s *sim) fault(from, to string, frame []byte) routertest.Fault {
	op := byte(0)
	if len(frame) > 0 {
		op = frame[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hung[to] {
		s.report.Faults.HungFrames++
		s.event(true, "network: op %d from %s to %s lost: %s hangs", op, from, to, to)
		if op == wire.OpNotify {
			s.unanswered(from, to)
		}
		return routertest.DropRequest
	}
	if s.pausedCh[from] != nil || s.cutOff[from] || s.cutOff[to] {
		// A paused node sends nothing; a node cut off reaches no peer, nor a peer it.
		s.event(true, "network: op %d from %s to %s lost: paused or cut off", op, from, to)
		if op == wire.OpNotify {
			s.unanswered(from, to)
		}
		return routertest.DropRequest
	}
	fate := s.fate(from, to, op)
	if fate != routertest.Deliver {
		s.event(true, "network: %v of op %d from %s to %s", fate, op, from, to)
	}
	if op == wire.OpNotify && (fate == routertest.DropRequest || fate == routertest.DropReply || s.cut(from, to)) {
		s.unanswered(from, to)
	}
	settles := false
	switch op {
	case wire.OpAck, wire.OpExtend, wire.OpExtendLeft, wire.OpNack, wire.OpRelease, wire.OpReject, wire.OpAckBatch, wire.OpAckDurable, wire.OpAcks:
		settles = true
	case wire.OpConsume:
		settles = true // it may carry plain acks (wire version 16): none when it decodes with no records
	}
	if fate == routertest.Duplicate && settles {
		// The settles it carries may be applied by the copy first: remember their handles.
		if req, err := wire.DecodeRequest(frame, wire.Newest); err == nil {
			for _, r := range req.Records {
				s.dupHandles[router.Handle{Partition: r.Handle.Partition, Offset: r.Handle.Offset, Nonce: r.Handle.Nonce}] = true
			}
		}
	}
	if op == wire.OpNotify && fate != routertest.DropRequest && !s.cut(from, to) && s.netDown[to] {
		s.notifyFailed(from, to) // the call fails at once
	}
	return fate
}

// fate draws a frame's fate. Called with s.mu held.
func (s *sim) fate(from, to string, op byte) routertest.Fault {
	prof := s.prof
	if prof.drop == 0 && prof.dropReply == 0 && prof.dup == 0 {
		return routertest.Deliver
	}
	lk := link{from, to, op}
	s.linkCalls[lk]++
	u := float64(mix(s.seed, hashString(from), hashString(to), uint64(op), s.linkCalls[lk])>>11) / (1 << 53)
	switch {
	case u < prof.drop:
		s.report.Faults.DroppedRequests++
		return routertest.DropRequest
	case u < prof.drop+prof.dropReply:
		s.report.Faults.DroppedReplies++
		return routertest.DropReply
	case u < prof.drop+prof.dropReply+prof.dup:
		s.report.Faults.Duplicated++
		return routertest.Duplicate
	}
	return routertest.Deliver
}

// cut reports whether the partition in force separates nodes a and b. Called with s.mu held.
func (s *sim) cut(a, b string) bool {
	return s.group != nil && s.group[a] != s.group[b]
}

type link struct {
	from, to string
	op       byte
}

// observe counts every frame between the nodes by its op; in a run with the lying peer,
// that peer's frames are its own (liar.go), and it watches the others.
func (s *sim) observe(from, to string, frame []byte) {
	if len(frame) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.liar != nil && s.liar.observe(s, from, to, frame) {
		return
	}
	s.report.Frames[frame[0]]++
}

// mix hashes its arguments (splitmix64 steps).
func mix(vs ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, v := range vs {
		h ^= v
		h += 0x9e3779b97f4a7c15
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
		h = (h ^ (h >> 27)) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := range len(s) {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// describeFrame renders a request frame for the event log.
func describeFrame(frame []byte) string {
	req, err := wire.DecodeRequest(frame, wire.Newest)
	if err != nil {
		return fmt.Sprintf("undecodable frame (%v)", err)
	}
	switch req.Op {
	case wire.OpConsume:
		return fmt.Sprintf("consume id %x pinned %d claim %v max %d vis %v", req.Consume.RequestID%0xffff, req.Consume.Pinned, req.Consume.Claim, req.Consume.Max, req.Consume.Visibility)
	case wire.OpConsumeBatch:
		var b strings.Builder
		b.WriteString("consume batch")
		for _, c := range req.Consumes {
			fmt.Fprintf(&b, " [id %x pinned %d claim %v max %d vis %v]", c.RequestID%0xffff, c.Pinned, c.Claim, c.Max, c.Visibility)
		}
		return b.String()
	case wire.OpNotify:
		return fmt.Sprintf("notify hold %v", req.Hold)
	case wire.OpPass:
		return "pass"
	case wire.OpRegister:
		return fmt.Sprintf("register %v", req.Registrations)
	case wire.OpCancel:
		return fmt.Sprintf("cancel id %x", req.RequestID%0xffff)
	case wire.OpReplay:
		return fmt.Sprintf("replay %+v", req.Replay)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "op %d", req.Op)
	for _, r := range req.Records {
		fmt.Fprintf(&b, " [%d %d/%d %x %v]", r.Op, r.Handle.Partition, r.Handle.Offset, r.Handle.Nonce%0xffff, r.Arg)
	}
	return b.String()
}

func describeReply(frame, reply []byte) string {
	if members := consumesOf(frame); len(members) > 1 || (len(members) == 1 && frame[0] == wire.OpConsumeBatch) {
		var b strings.Builder
		for i, member := range members {
			fmt.Fprintf(&b, "[%s] ", describeReply(member, memberReply(frame, reply, i)))
		}
		return b.String()
	}
	if len(frame) > 0 && (frame[0] == wire.OpConsume || frame[0] == wire.OpReplay) {
		if frame[0] == wire.OpConsume {
			reply = memberReply(frame, reply, 0)
		}
		r, err := wire.DecodeConsumeReply(reply)
		if err == nil {
			var b strings.Builder
			fmt.Fprintf(&b, "status %d", r.Status)
			for _, d := range r.Deliveries {
				fmt.Fprintf(&b, " %d/%d", d.Partition, d.Offset)
			}
			return b.String()
		}
	}
	answers, err := wire.DecodeReply(reply)
	if err != nil {
		return fmt.Sprintf("undecodable reply (%v)", err)
	}
	var b strings.Builder
	for _, a := range answers {
		fmt.Fprintf(&b, "%d ", a.Status)
	}
	return b.String()
}
