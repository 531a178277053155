package router

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"narad.dev/consume/inflight"
)

// Scan limits (see docs/protocol.md, "The pump and long-polls").
const (
	// manyLookupLimit: past this many local partitions, or when GetMany fails, the scan
	// resolves each log as it reaches it.
	manyLookupLimit = 16
	// BatchPayloadBytes bounds a batch scan: it stops once the records taken carry this
	// many bytes of keys, payloads and headers (Record.PayloadBytes). The first record is always taken, and the record
	// that crosses the bound is kept.
	BatchPayloadBytes = 4 << 20
	// orderedDefersPerScan bounds the records one scan of an ordered partition defers behind
	// held keys before it stops: a partition whose keys are nearly all held would otherwise
	// have one consume read up to MaxDeferred records while the leases it took age.
	orderedDefersPerScan = 256
)

// A Message is a record delivered to a consumer, with its lease.
type Message struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Timestamp time.Time
	// Headers are the record's headers, as the host's log read them (Record.Headers). A
	// record delivered through another node carries them only when both nodes speak wire
	// version 9 or later (see Config.WireVersion): an older node on the way drops them.
	Headers []Header
	// Receipt is the handle that acks, extends or nacks this delivery, passed as it is to
	// Ack and the other settles; its text form (Receipt.String(), parsed by ParseHandle) is
	// what a remote consumer holds. Zero for a replayed record.
	Receipt Handle
	Attempt uint32    // delivery attempt, 1 for the first; 0 for a replayed record
	Reason  Reason    // why this delivery happens
	Expiry  time.Time // when the lease lapses unless extended; zero for a replay
	// Fence is the lease's fencing token: it grows with every lease of the partition, so
	// a handler can refuse, in its own store, a write carrying a smaller token than one
	// it already accepted for the record (a superseded lease that still thinks it holds
	// the record). Zero for a replay.
	Fence uint64
}

// payloadBytes is what the batch bound counts: keys, payloads and headers.
func (m *Message) payloadBytes() int { return payloadBytes(m.Key, m.Value, m.Headers) }

// scanRequest is one non-blocking pass over a topic's local partitions.
type scanRequest struct {
	topic      string
	gen        *inflight.Generation // taken before the routes; set by scan unless the caller did
	local      []int32              // the routes' local partitions, read after gen; nil: scan reads them
	remote     map[string][]int32   // the routes' remote partitions, read with local
	state      *topicState          // the topic's state, when the caller looked it up (nil: not yet)
	pinned     int32                // -1: any local partition
	max        int                  // records to take at most (>= 1)
	visibility time.Duration
	calledAt   time.Time // when the consume was called: park observes its wait from then (zero: not)
	// reserve: the records are reservations of a node reading ahead (inflight.Shard.ReserveAhead),
	// not deliveries: their attempts count once that node confirms them.
	reserve bool
	// ahead is how many of max are asked for to be held ahead of the consumes to come (with
	// reserve): an owner that reserves nothing is asked for the rest alone.
	ahead int
	// handLater: the caller hands the records over itself (handOver) once they leave, not
	// the scan: an owner's reply to another node may still be trimmed to its bound, or its
	// requester gone, and what goes back then was never an attempt (see takeFrom).
	handLater bool
	// refill, for a refill of reading ahead, receives the reply's records as it carried them
	// (remoteConsume returns no messages then): they are made messages only as consumes
	// take them (see aheadRecords); nil for any other consume.
	refill *refillReply
}

// logsScratch holds what a GetMany resolves, pooled so an empty scan allocates nothing.
type logsScratch struct {
	partitions [manyLookupLimit]int32
	logs       [manyLookupLimit]Log
}

var scratchPool = sync.Pool{New: func() any { return new(logsScratch) }}

// scan takes up to req.max records from the topic's local partitions, appending them to out.
// It starts at the partition after the one the previous scan of the topic started at, so
// partitions drain evenly, and stays on a partition until it is dry or at its in-flight cap,
// so a batch takes a partition's backlog in offset order.
//
// The first partition's log is resolved alone, so a consume that finds a record there
// resolves nothing else. Only when it has nothing are the rest resolved, in one GetMany when
// the host supports it and there are at most 16; otherwise, or when GetMany fails, each log
// is resolved as the scan reaches it, so a partition that cannot be opened fails the scan
// only when it is reached and never hides a record before it.
//
// An error is returned only when the scan took nothing: a partition that could not be
// resolved, or a closed log (transient: the reservation was given back). A partition whose
// host broke a seam's contract (ErrHostContract) is passed over, as a set-aside one is, so
// that it never breaks its topic: the scan answers its error only when pinned to it, or when
// every partition it visited was such.
func (n *Node) scan(req scanRequest, out []Message) ([]Message, error) {
	return n.scanAt(req, n.clock.Now(), out)
}

// generationAndRoutes returns the live generation of topic, then its routes, in that order
// (a delete and recreate in between then cannot pair the old routes with the new shards). A
// topic's first call looks at the routes before it starts a generation, and reads them
// again after: a name no host knows leaves nothing behind.
func (n *Node) generationAndRoutes(topic string) (gen *inflight.Generation, local []int32, remote map[string][]int32, ok bool) {
	if gen = n.liveGeneration(topic); gen == nil {
		return nil, nil, nil, false
	}
	local, remote, ok = n.routes.Partitions(topic)
	return gen, local, remote, ok
}

// liveGeneration returns the live generation of topic, starting one only for a topic the
// routes know; nil for one they do not, which then leaves nothing behind. The caller reads
// the routes after it.
func (n *Node) liveGeneration(topic string) *inflight.Generation {
	if gen := n.tracker.LiveGeneration(topic); gen != nil {
		return gen
	}
	if _, _, ok := n.routes.Partitions(topic); !ok {
		return nil
	}
	return n.tracker.Generation(topic)
}

// scanAt is scan at now, for a caller that read the clock already.
func (n *Node) scanAt(req scanRequest, now time.Time, out []Message) ([]Message, error) {
	out, _, err := n.scanDrained(req, now, out)
	return out, err
}

// scanDrained is scanAt that reports too whether it found every partition drained: with
// nothing to hand out until something wakes it (see drained.go), no partition ordered, and
// the routes sound.
func (n *Node) scanDrained(req scanRequest, now time.Time, out []Message) (_ []Message, drained bool, err error) {
	// The generation comes before everything the scan resolves, so a delete and recreate
	// while it runs cannot pair the old incarnation's routes and logs with the new shards.
	if req.gen == nil {
		if req.gen = n.liveGeneration(req.topic); req.gen == nil {
			return out, false, ErrUnknownTopic
		}
		req.local, req.remote = nil, nil // read after the generation, or not at all
	}
	order, start, verdict, err := n.partitionOrderOf(req.state, req.topic, req.pinned, req.local, req.remote)
	if err != nil || len(order) == 0 {
		return out, false, err
	}
	budget := batchBudget{max: req.max}
	var scratch *takeScratch // only a batch reserves and reads several records at once
	if req.max > 1 {
		scratch = takePool.Get().(*takeScratch)
		defer scratch.put()
	}
	broken := 0
	var brokenErr error // the last ErrHostContract met
	walk := func(p int32, log Log, failed error) bool {
		if failed == nil {
			if out, failed = n.takeFrom(&req, p, log, now, &budget, scratch, out); failed == nil {
				return budget.full()
			}
		}
		if errors.Is(failed, ErrHostContract) {
			broken++
			brokenErr = failed
			if req.pinned < 0 {
				return false // counted and logged where it was found; the others serve
			}
		}
		if len(out) == 0 {
			err = failed
		}
		return true
	}
	n.walkPartitions(req.topic, order, start, verdict, walk)
	if len(out) == 0 && err == nil && budget.busy > 0 {
		// Every ordered partition with records was being scanned by another consume: wait
		// for them this time rather than answer nothing.
		budget.busy, budget.waitBusy, broken = 0, true, 0
		n.walkPartitions(req.topic, order, start, verdict, walk)
	}
	// Nothing taken and no other failure: the walk visited every partition.
	if len(out) == 0 && err == nil && broken == len(order) {
		return out, false, brokenErr
	}
	return out, len(out) == 0 && err == nil && verdict == nil && budget.drained == len(order), err
}

// partitionOrder resolves the topic's routes into the partitions a pass visits (pinned
// alone when pinned >= 0) and the index it starts at, which rotates per topic so partitions
// drain evenly, with the verdict on the routes (nil when sound: see judgeRoutes). A pinned
// partition the routes name wrongly is the error.
func (n *Node) partitionOrder(topic string, pinned int32) (order []int32, start int, verdict *routesVerdict, err error) {
	return n.partitionOrderOf(nil, topic, pinned, nil, nil)
}

// partitionOrderOf is partitionOrder over local and remote, the routes' partitions of topic
// when the caller read them already (local nil: read them now), and t, the topic's state
// when the caller looked it up (nil: looked up here if needed).
func (n *Node) partitionOrderOf(t *topicState, topic string, pinned int32, local []int32, remote map[string][]int32) (order []int32, start int, verdict *routesVerdict, err error) {
	ok := true
	if local == nil {
		local, remote, ok = n.routes.Partitions(topic)
	}
	if !ok {
		return nil, 0, nil, ErrUnknownTopic
	}
	if t == nil && len(local) > 1 { // looked up once, for the verdict and the rotation
		t = n.topic(topic)
	}
	verdict, known := t.judged(local, remote) // written out: every consume's path
	if !known {
		verdict = n.judgeRoutesOf(t, topic, local, remote)
	}
	switch {
	case pinned >= 0 && !slices.Contains(local, pinned):
		return nil, 0, nil, ErrNotLocal
	case pinned >= 0:
		if err := verdict.refuses(pinned); err != nil {
			return nil, 0, nil, err
		}
		return []int32{pinned}, 0, nil, nil
	case len(local) > 1:
		return local, t.nextStart(len(local)), verdict, nil
	}
	return local, 0, verdict, nil
}

// walkPartitions visits order from start, round, with each partition's log, until visit
// reports true. The first partition's log is resolved alone, so a pass that ends there
// resolves nothing else; the rest are resolved in one GetMany when the host offers it and
// there are at most manyLookupLimit, and otherwise, or when GetMany fails, each as the walk
// reaches it. A log that cannot be resolved is passed to visit as failed, with a nil log: a
// host's error, a nil Log from Get or GetMany, or a partition the routes named wrongly
// (verdict).
//
// This is every consume's path: a partition resolved pays one test for the checks (see
// vetLog), not a call.
func (n *Node) walkPartitions(topic string, order []int32, start int, verdict *routesVerdict, visit func(p int32, log Log, failed error) (stop bool)) {
	first := order[start]
	log, err := n.logs.Get(topic, first)
	if verdict != nil || log == nil && err == nil {
		log, err = n.vetLog(topic, first, log, err, verdict, nil)
	}
	if visit(first, log, err) || len(order) == 1 {
		return
	}
	rest := len(order) - 1
	at := func(i int) int32 { return order[(start+1+i)%len(order)] }
	var resolved []Log
	var asked []int32 // what GetMany resolved, for its error
	if many, ok := n.logs.(ManyGetter); ok && rest <= manyLookupLimit {
		scratch := scratchPool.Get().(*logsScratch)
		defer func() { clear(scratch.logs[:]); scratchPool.Put(scratch) }()
		for i := range rest {
			scratch.partitions[i] = at(i)
		}
		if many.GetMany(topic, scratch.partitions[:rest], scratch.logs[:rest]) == nil {
			resolved, asked = scratch.logs[:rest], scratch.partitions[:rest]
		}
	}
	for i := range rest {
		p := at(i)
		var log Log
		var err error
		if resolved != nil {
			log = resolved[i]
		} else {
			log, err = n.logs.Get(topic, p)
		}
		if verdict != nil || log == nil && err == nil {
			log, err = n.vetLog(topic, p, log, err, verdict, asked)
		}
		if visit(p, log, err) {
			return
		}
	}
}

// vetLog is what the walk does with a partition's log when the routes' verdict refuses
// something or the log is nil with no error: the verdict's error for a partition the
// routes named wrongly, a nil Log refused (from GetMany, asked for asked, when asked is not
// nil; from Get otherwise), or else log and err as they are.
func (n *Node) vetLog(topic string, partition int32, log Log, err error, verdict *routesVerdict, asked []int32) (Log, error) {
	switch refused := verdict.refuses(partition); {
	case refused != nil:
		return nil, refused
	case log != nil || err != nil:
		return log, err
	case asked != nil:
		return nil, n.nilFromGetMany(topic, asked, partition)
	}
	return nil, n.nilLog(topic, partition)
}

// resolveLog is getLog for a partition the routes named, unless the verdict on them refuses
// it.
func (n *Node) resolveLog(topic string, partition int32, verdict *routesVerdict) (Log, error) {
	if err := verdict.refuses(partition); err != nil {
		return nil, err
	}
	return n.getLog(topic, partition)
}

// batchBudget counts what a scan has taken against its bounds.
type batchBudget struct {
	max, taken, bytes int
	// busy counts the ordered partitions the scan passed over because another scan held
	// them; waitBusy makes it wait for them instead (its second pass).
	busy     int
	waitBusy bool
	// drained counts the partitions that had nothing to hand out until something wakes
	// them (see drained.go).
	drained int
}

func (b *batchBudget) take(m *Message) {
	b.taken++
	b.bytes += m.payloadBytes()
}

func (b *batchBudget) full() bool { return b.taken >= b.max || b.bytes >= BatchPayloadBytes }

// fullEnough reports, for an ordered partition's batch whose read left records behind keys
// other consumes hold, whether it is close enough to full to stop: within an eighth of its
// records. Another read for the few left would cost a batch's scan (a read, a reservation
// and a race with the other consumes at the partition's next records) for a few records;
// the next consume takes them.
func (b *batchBudget) fullEnough() bool { return b.full() || b.taken >= b.max-b.max/8 }

// takeFrom reserves and reads records of one partition until it is dry, capped, or the
// budget is spent. It reserves the partition's share of the batch in one call, then reads
// the reserved offsets, consecutive runs of them in one ReadRange when the log offers it: a
// reservation always comes before the delivery (invariant "one live holder"), and before the
// read but on an ordered partition's fresh records (takeOneKeyed, takeRunKeyed). What the
// byte bound leaves undelivered is given back at once, and not counted as an attempt. A
// read that fails (a closed log, say) ends the partition's turn with its reservations given
// back, and fails unless the scan took something.
func (n *Node) takeFrom(req *scanRequest, partition int32, log Log, now time.Time, budget *batchBudget, scratch *takeScratch, out []Message) ([]Message, error) {
	shard, err := n.shardFor(req.gen, partition)
	if err != nil {
		if len(out) > 0 || (req.pinned < 0 && skippedByScans(err)) {
			return out, nil // set aside or handed off: the topic's other partitions serve
		}
		return out, err
	}
	hwm := log.HighWatermark()
	if hwm < 0 {
		return out, n.negativeWatermark(req.topic, partition, hwm)
	}
	ordered := shard.Ordered()
	if ordered && !req.reserve && n.notBefore == nil {
		// Fresh records are read before they are reserved (a gateway's reservations, and
		// records the host may postpone, go the usual way).
		var done bool
		if budget.max-budget.taken == 1 {
			out, done = n.takeOneKeyed(req, partition, log, shard, hwm, now, budget, out)
		} else {
			out, done = n.takeRunKeyed(req, partition, log, shard, hwm, now, budget, scratch, out)
		}
		if done {
			return out, nil
		}
	}
	if ordered {
		// Keys are learnt by reading: one scan at a time reserves, reads and binds, so a
		// key's records are bound in offset order (inflight.Shard.Bind). A busy partition
		// is passed over on the first pass, as the others may serve at once.
		lock := shard.ScanLock()
		switch {
		case budget.waitBusy || req.pinned >= 0:
			lock.Lock()
		case !lock.TryLock():
			budget.busy++
			return out, nil
		}
		defer lock.Unlock()
		if shard.Verifying() {
			if err := n.verifyTails(shard, log, now); err != nil {
				if len(out) > 0 {
					return out, nil
				}
				return out, err
			}
		}
	}
	var one [1]inflight.Lease
	deferredHere := 0 // records this scan deferred behind their keys
	for !budget.full() {
		want := budget.max - budget.taken
		var leases []inflight.Lease
		switch {
		case req.reserve && want == 1: // a reservation of one record: no batch machinery either
			leases, err = shard.ReserveAhead(now, hwm, req.visibility, 1, one[:0])
		case req.reserve:
			scratch.leases, err = shard.ReserveAhead(now, hwm, req.visibility, want, scratch.leases[:0])
			leases = scratch.leases
		case want == 1: // a single consume, the common case, needs no batch machinery
			one[0], err = shard.ReserveNextFor(now, hwm, req.visibility)
			leases = one[:]
		default:
			// Assigned through the scratch, so that one never flows to the heap.
			scratch.leases, err = shard.ReserveBatch(now, hwm, req.visibility, want, scratch.leases[:0])
			leases = scratch.leases
		}
		if err != nil {
			if n.lapsedRetry(shard, now, err) {
				continue // the host renewed its grant
			}
			if !ordered && (err == inflight.ErrEmpty || err == inflight.ErrAllReserved) {
				budget.drained++ // nothing until something wakes it (see drained.go)
			}
			return out, nil // dry, all reserved, capped, or no longer served: the next partition
		}
		if out == nil {
			out = make([]Message, 0, len(leases))
		} else {
			out = slices.Grow(out, len(leases))
		}
		// Values only: a pointer to the caller's stack held in r would move it to the heap.
		r := partitionRead{n: n, topic: req.topic, partition: partition, log: log,
			shard: shard, now: now, budget: *budget, scratch: scratch}
		if len(leases) > 1 { // only a run of several is read as a range
			r.ranged, _ = log.(RangeReader)
		}
		before := len(out)
		var settled bool
		out, settled, err = r.deliver(leases, out)
		if n.notBefore != nil {
			out = r.postpone(out, before, ordered)
		}
		deferred := 0
		if ordered {
			out, deferred = r.bind(out, before, req.reserve)
		}
		*budget = r.budget
		if !req.reserve { // a reservation is counted once a consumer gets it
			n.stats.delivered.Add(uint64(len(out) - before))
			// What the scan gave back, postponed or deferred above went uncounted; what
			// is left goes to the consumer, and its attempt counts from here.
			if !req.handLater {
				shard.Handed(leases)
			}
		}
		if err != nil {
			// The failed read's reservations went back: the partition is done for this
			// scan, which would only reserve them again. What was taken stands.
			if len(out) > 0 {
				return out, nil
			}
			return out, err
		}
		if ordered && n.turnOverAfterDeferrals(req.topic, partition, budget, &deferredHere, deferred) {
			return out, nil
		}
		if len(leases) < want && (!settled || req.reserve) {
			// The partition gave what it had (nothing freed meanwhile), or the share of its
			// in-flight room one reservation may take.
			return out, nil
		}
	}
	return out, nil
}

// turnOverAfterDeferrals adds again (the records of an ordered partition that a step of a
// scan deferred behind their keys) to *deferred, the scan's count, and reports whether the
// partition's turn is over: orderedDefersPerScan of them deferred (most of what the
// partition has waits behind held keys: one consume does not read on to the deferred bound,
// and the partition is woken for the next scan to go on from here), or, the step having
// deferred some, the batch full enough (batchBudget.fullEnough).
func (n *Node) turnOverAfterDeferrals(topic string, partition int32, budget *batchBudget, deferred *int, again int) bool {
	if *deferred += again; *deferred >= orderedDefersPerScan {
		n.wake(topic, partition)
		return true
	}
	return again > 0 && budget.fullEnough()
}

// takeOneKeyed takes one record of an ordered partition without holding its scan lock
// while it reads: it reads the record at the shard's next fresh offset, then reserves and
// binds it in one step (inflight.Shard.ReserveKeyed). Under the lock, a scan descheduled
// in the middle of its read (a busy process preempts its goroutines anywhere) would hold
// every other scan of the partition up until it runs again. done reports that the
// partition's turn is over, a record taken or orderedDefersPerScan of them deferred behind
// their keys; otherwise the caller takes the record under the lock, as a scan that reads
// after reserving does: something is due before the fresh offset, another scan is between
// its reserve and its bind, or the read failed (the locked scan handles what a read finds,
// retention and corruption included). A record read here is delivered only once reserved
// (invariant "one live holder"): the read before is of an offset whose record the log
// never changes. (What is due is taken under the lock here, not as takeRunKeyed takes it:
// a hot key's next record falls due at each ack, and the consumes of one that all came for
// it then queued for the shard's lock, where a locked scan passes a busy partition over.)
func (n *Node) takeOneKeyed(req *scanRequest, partition int32, log Log, shard *inflight.Shard, hwm int64, now time.Time, budget *batchBudget, out []Message) (_ []Message, done bool) {
	for range orderedDefersPerScan {
		off := shard.NextFresh()
		if off < 0 || off >= hwm {
			return out, false // something is due first, or nothing is fresh
		}
		rec, err := log.Read(off)
		if err != nil {
			return out, false
		}
		lease, err := shard.ReserveKeyed(now, hwm, req.visibility, off, inflight.KeyOf(rec.Key))
		if err == inflight.ErrBehindKey { // unwrapped: ReserveKeyed returns its sentinels as they are
			continue // deferred: the next fresh record
		}
		if err != nil {
			return out, false
		}
		out = append(out, Message{})
		m := &out[len(out)-1]
		setLeaseMessage(m, req.topic, partition, &lease, &rec)
		budget.take(m)
		n.stats.delivered.Add(1)
		return out, true
	}
	// Most of what the partition has waits behind held keys (see turnOverAfterDeferrals).
	n.wake(req.topic, partition)
	return out, true
}

// takeRunKeyed is takeOneKeyed for a batch: it reads a run of records from the shard's next
// fresh offset (one ReadRange when the log offers it), holding nothing, then reserves and
// binds the run in one step (inflight.Shard.ReserveKeyedBatch), which leases the records
// whose keys are free and defers the others with no lease granted; and so on until the
// budget is spent, or a run that left records behind held keys leaves the batch full enough
// (batchBudget.fullEnough). Records due before the fresh ones (released as their key
// freed, nacked, expired) whose keys the shard knows are reserved and bound first, then
// read, holding nothing either (takeDueKeyed). The records deferred
// never reach out, so nothing is dropped from it. done is as takeOneKeyed's: otherwise the
// caller takes the rest under the lock (something due first that the shard must read the
// key of, another scan between its reserve and its bind, no fresh record left, or a read
// failed).
func (n *Node) takeRunKeyed(req *scanRequest, partition int32, log Log, shard *inflight.Shard, hwm int64, now time.Time, budget *batchBudget, scratch *takeScratch, out []Message) (_ []Message, done bool) {
	ranged, _ := log.(RangeReader)
	deferred, overtaken := 0, 0
	for !budget.full() {
		off := shard.NextFresh()
		if off < 0 {
			var again int
			var ok bool
			if out, again, ok = n.takeDueKeyed(req, partition, log, shard, hwm, now, budget, scratch, out); !ok {
				return out, false // due first, and the locked scan's to take
			}
			if n.turnOverAfterDeferrals(req.topic, partition, budget, &deferred, again) {
				return out, true
			}
			continue
		}
		if off >= hwm {
			return out, false // nothing is fresh
		}
		want := budget.max - budget.taken
		recs := readFresh(log, ranged, off, int(min(int64(want), hwm-off)), BatchPayloadBytes-budget.bytes, scratch)
		if len(recs) == 0 {
			return out, false // the locked scan handles what the read found
		}
		keys := slices.Grow(scratch.binding.keys[:0], len(recs))[:len(recs)]
		for i := range recs {
			keys[i] = inflight.KeyOf(recs[i].Key)
		}
		scratch.binding.keys = keys
		leases, taken, err := shard.ReserveKeyedBatch(now, hwm, req.visibility, want, off, keys, scratch.leases[:0])
		for waits := 0; err == inflight.ErrNotNext && budget.waitBusy && waits < maxScanWaits && shard.NextFresh() == off; waits++ {
			// Nothing is due first, so another scan most likely holds the partition's
			// ScanLock: wait for it to end and try the run again, rather than queue for the
			// lock to read the fresh records under it, as the locked scan does (a queue of
			// scans under the lock makes every consume that meets it join it).
			waitScan(shard)
			leases, taken, err = shard.ReserveKeyedBatch(now, hwm, req.visibility, want, off, keys, scratch.leases[:0])
		}
		for err == inflight.ErrNotNext { // unwrapped, as ReserveKeyed's
			// Another consume took the run's first records: the rest of what was read may
			// be next.
			next := shard.NextFresh()
			if next <= off || next >= off+int64(len(recs)) {
				break
			}
			recs, keys, off = recs[next-off:], keys[next-off:], next
			leases, taken, err = shard.ReserveKeyedBatch(now, hwm, req.visibility, want, off, keys, scratch.leases[:0])
		}
		if next := shard.NextFresh(); err == inflight.ErrNotNext && (next > off || next < 0) && overtaken < maxOvertaken {
			// Other consumes took the whole run, or a record fell due before it: read on
			// from where they left off, or take what is due, rather than take the scan
			// lock (a scan under it would refuse theirs in turn).
			overtaken++
			continue
		}
		if err != nil {
			return out, false
		}
		scratch.leases = leases
		out = slices.Grow(out, len(leases))
		for i := range leases {
			out = append(out, Message{})
			m := &out[len(out)-1]
			setLeaseMessage(m, req.topic, partition, &leases[i], &recs[leases[i].Offset-off])
			budget.take(m)
		}
		if len(leases) > 0 {
			n.stats.delivered.Add(uint64(len(leases)))
		}
		if n.turnOverAfterDeferrals(req.topic, partition, budget, &deferred, taken-len(leases)) {
			return out, true
		}
		if taken < len(recs) {
			return out, true // at the in-flight cap
		}
	}
	return out, true
}

// takeDueKeyed takes, for takeRunKeyed, the records of an ordered partition due before its
// fresh ones whose keys the shard knows (released, nacked, expired:
// inflight.Shard.ReserveDueKeyed), reserved and bound to their keys before they are read,
// so that the read holds no lock either. deferred is how many the shard deferred
// again behind their keys. ok is false when the shard refused (what is due first is the
// locked scan's to take: see ReserveDueKeyed) or a read failed (the locked scan handles
// what a read finds, as after takeRunKeyed's reads).
func (n *Node) takeDueKeyed(req *scanRequest, partition int32, log Log, shard *inflight.Shard, hwm int64, now time.Time, budget *batchBudget, scratch *takeScratch, out []Message) (_ []Message, deferred int, ok bool) {
	leases, taken, err := shard.ReserveDueKeyed(now, hwm, req.visibility, budget.max-budget.taken, scratch.leases[:0])
	for waits := 0; err == inflight.ErrNotNext && budget.waitBusy && waits < maxScanWaits; waits++ {
		waitScan(shard) // most likely another scan holds the lock (see takeRunKeyed)
		leases, taken, err = shard.ReserveDueKeyed(now, hwm, req.visibility, budget.max-budget.taken, scratch.leases[:0])
	}
	if err != nil {
		return out, 0, false
	}
	scratch.leases = leases
	r := partitionRead{n: n, topic: req.topic, partition: partition, log: log,
		shard: shard, now: now, budget: *budget, scratch: scratch}
	if len(leases) > 1 {
		r.ranged, _ = log.(RangeReader)
	}
	before := len(out)
	out = slices.Grow(out, len(leases)) // deliver fills its room in place
	out, _, err = r.deliver(leases, out)
	if !req.handLater {
		shard.Handed(leases) // (see takeFrom)
	}
	*budget = r.budget
	n.stats.delivered.Add(uint64(len(out) - before))
	return out, taken - len(leases), err == nil
}

// maxScanWaits bounds the times a scan that reads before it reserves waits for another
// scan's ScanLock and tries again, on its pass that waits for busy partitions, before it
// reserves under the lock itself.
const maxScanWaits = 4

// waitScan waits for the scan that holds shard's ScanLock, if any, to end.
func waitScan(shard *inflight.Shard) {
	lock := shard.ScanLock()
	lock.Lock()
	lock.Unlock()
}

// maxOvertaken bounds the runs one takeRunKeyed reads that other consumes then take whole
// before it reserves them.
const maxOvertaken = 4

// readFresh reads up to max records from off, bounded by maxBytes as ReadRange bounds them,
// for a scan that reads before it reserves: a ReadRange when the log offers it, one Read
// each otherwise, ending before the first that fails (nothing: the first failed). The
// records are in scratch.
func readFresh(log Log, ranged RangeReader, off int64, count, maxBytes int, scratch *takeScratch) []Record {
	recs := scratch.records[:0]
	var err error
	if ranged != nil && count > 1 {
		recs, err = ranged.ReadRange(off, count, maxBytes, recs)
	} else {
		for bytes := 0; len(recs) < count && bytes < maxBytes; {
			var rec Record
			if rec, err = log.Read(off + int64(len(recs))); err != nil {
				err = nil // ends the run before it: the next read is of this record again
				break
			}
			recs = append(recs, rec)
			bytes += rec.PayloadBytes()
		}
	}
	scratch.records = recs
	scratch.read = max(scratch.read, len(recs)) // what put clears
	if err != nil || len(recs) > count {
		return nil // the locked scan reports an overlong range
	}
	return recs
}

// takeScratch holds a batch scan's reservations and range reads, pooled so that a batch does
// not allocate them.
type takeScratch struct {
	leases  []inflight.Lease
	records []Record
	// read is the most records one ReadRange left in records since the last put: what put
	// clears (a scan of small ranges does not clear a large batch's capacity each time).
	read    int
	binding keyBinding
}

// keyBinding holds what an ordered partition's scan passes to inflight.Shard.Bind.
type keyBinding struct {
	handles []inflight.Handle
	keys    []uint64
	kept    []bool
}

// reset sizes b for n records, reusing its memory.
func (b *keyBinding) reset(n int) {
	b.handles = slices.Grow(b.handles[:0], n)[:n]
	b.keys = slices.Grow(b.keys[:0], n)[:n]
	b.kept = slices.Grow(b.kept[:0], n)[:n]
}

var takePool = sync.Pool{New: func() any { return new(takeScratch) }}

func (s *takeScratch) put() {
	clear(s.records[:s.read]) // the records' slices belong to the messages now
	s.records, s.read = s.records[:0], 0
	takePool.Put(s)
}

// partitionRead reads the records of one partition's reservations into messages.
type partitionRead struct {
	n         *Node
	topic     string
	partition int32
	log       Log
	ranged    RangeReader // nil: the log reads one record at a time
	shard     *inflight.Shard
	now       time.Time
	budget    batchBudget
	scratch   *takeScratch // nil for a single record: a range needs several leases
}

// deliver reads the records of leases, in order, appending them to out. A record below
// retention jumps the frontier, a corrupt one is skipped (settled reports either); a closed
// log, or any other failure, gives back the lease and every one after it, and fails, with
// what was read before it in out; once the byte bound is reached the rest are given back.
func (r *partitionRead) deliver(leases []inflight.Lease, out []Message) (_ []Message, settled bool, err error) {
	oldest := int64(-1) // the oldest retained offset, once a read found retention
	var one [1]Record   // a record read alone
	for i := 0; i < len(leases); {
		if r.budget.full() {
			// Readable records the bound leaves out: a consumer parked for the partition
			// (it may have parked while they were reserved) takes them now.
			r.giveBack(leases[i:])
			r.n.wake(r.topic, r.partition)
			return out, settled, nil
		}
		lease := &leases[i]
		if lease.Offset < oldest {
			// Below what retention kept: the jump dropped this lease, or its own
			// (requeued) record is gone too.
			r.shard.SkipRetention(r.now, lease.Handle, oldest)
			settled = true
			i++
			continue
		}
		var recs []Record
		run := 1
		for r.ranged != nil && i+run < len(leases) && leases[i+run].Offset == lease.Offset+int64(run) {
			run++
		}
		if run > 1 {
			maxBytes := BatchPayloadBytes - r.budget.bytes
			r.scratch.records, err = r.ranged.ReadRange(lease.Offset, run, maxBytes, r.scratch.records[:0])
			r.scratch.read = max(r.scratch.read, len(r.scratch.records))
			if err == nil && len(r.scratch.records) > run { // never a record the scan did not reserve
				err = r.n.overlongRange(r.topic, r.partition, lease.Offset, run, maxBytes, len(r.scratch.records))
			}
			recs = r.scratch.records
		}
		if run == 1 || (err == nil && len(recs) == 0) { // one record, or a range of nothing
			if one[0], err = r.log.Read(lease.Offset); err == nil {
				recs = one[:]
			}
		}
		if err != nil {
			var jumpedTo int64
			var skipped bool
			if jumpedTo, skipped, err = r.n.skipUnreadable(r.shard, r.log, r.topic, r.partition, lease.Handle, err, r.now); skipped {
				oldest = max(oldest, jumpedTo)
				settled = true
				i++
				continue
			}
			// ErrLogClosed, a host's answer refused (ErrHostContract), or any other read
			// failure: transient. Give the reservations back (no jump, no skip) and fail;
			// what was taken before stands (see takeFrom).
			r.giveBack(leases[i:])
			return out, settled, err
		}
		// Filled in place (takeFrom made room for every lease): a message built apart and
		// appended would be copied once more.
		base := len(out)
		out = out[:base+len(recs)]
		for j := range recs {
			m := &out[base+j]
			setLeaseMessage(m, r.topic, r.partition, &leases[i+j], &recs[j])
			r.budget.take(m)
		}
		i += len(recs)
	}
	return out, settled, nil
}

// bind binds the records delivered in out[from:] to their keys on an ordered partition and
// drops those that wait behind their keys (the shard deferred them): they leave the batch's
// budget, so the scan takes other records in their place. A node reading ahead (oneAKey)
// takes one record of a key, since it hands its records to several consumers.
func (r *partitionRead) bind(out []Message, from int, oneAKey bool) (_ []Message, deferred int) {
	taken := out[from:]
	if len(taken) == 0 {
		return out, 0
	}
	// A single record's binding lives on the stack; a batch's in the scan's scratch.
	var oneHandle [1]inflight.Handle
	var oneKey [1]uint64
	var oneKept [1]bool
	handles, keys, kept := oneHandle[:], oneKey[:], oneKept[:]
	if len(taken) > 1 {
		b := &r.scratch.binding
		b.reset(len(taken))
		handles, keys, kept = b.handles, b.keys, b.kept
	}
	for i := range taken {
		handles[i], keys[i] = taken[i].Receipt, inflight.KeyOf(taken[i].Key)
	}
	if deferred = r.shard.Bind(r.now, handles, keys, oneAKey, kept); deferred == 0 {
		return out, 0
	}
	return r.keep(out, from, func(i int) bool { return kept[i] }), deferred
}

// keep drops the messages of out[from:] that kept refuses (by their index from from, each
// asked once, in order, before any message is moved over it), and takes them out of the
// batch's budget, so that the scan takes other records in their place.
func (r *partitionRead) keep(out []Message, from int, kept func(i int) bool) []Message {
	taken := out[from:]
	w := from
	// The kept messages move down in runs, one copy each (a message is a few hundred bytes
	// of pointers, each moved with the collector's write barrier when it runs): the run
	// before the first drop stays where it is, and a run is moved only once the message
	// after it was asked about, never over one not asked about yet.
	run := 0 // the first message of the run of kept ones not moved yet
	for i := range taken {
		if kept(i) {
			continue
		}
		w += copy(out[w:], taken[run:i]) // a no-op copy onto itself before the first drop
		run = i + 1
		r.budget.taken--
		r.budget.bytes -= taken[i].payloadBytes()
	}
	if w == from+run {
		return out // nothing dropped
	}
	w += copy(out[w:], taken[run:])
	clear(out[w:]) // the dropped messages' records belong to no one now
	return out[:w]
}

// postpone postpones the records delivered in out[from:] that Config.NotBefore says are
// due later (inflight.Shard.Postpone: no attempt spent, invisible until then), and drops
// them from out. On an ordered partition the key's later records wait for them.
func (r *partitionRead) postpone(out []Message, from int, ordered bool) []Message {
	// keep asks about each message once, in order, before it moves any message over it.
	return r.keep(out, from, func(i int) bool {
		return !r.n.postponeIfDue(r.topic, r.shard, &out[from+i], r.now, ordered)
	})
}

// skipUnreadable applies the rules for a reserved record its log cannot give: below
// retention the frontier jumps to the oldest retained offset in one step (logged at most
// once a minute), and a permanently unreadable record is skipped (logged), so the queue does
// not block on it. It reports whether err was one of the two, and after a retention jump the
// oldest retained offset (-1 otherwise). Any other failure is the caller's, returned as
// failure: a closed log is transient, never a gap, and so is a retention miss the log's
// Oldest contradicts (ErrHostContract, in place of err), which jumps nothing.
func (n *Node) skipUnreadable(shard *inflight.Shard, log Log, topic string, partition int32, h inflight.Handle, err error, now time.Time) (oldest int64, skipped bool, failure error) {
	switch {
	case errors.Is(err, ErrNotFound):
		oldest = log.Oldest()
		if bad := n.checkRetentionMiss(topic, partition, h.Offset, oldest, log); bad != nil {
			return -1, false, bad
		}
		if shard.SkipRetention(now, h, oldest) {
			n.logRetentionJump(topic, partition, h.Offset, oldest, now)
		}
		return oldest, true, nil
	case errors.Is(err, ErrCorrupt):
		if shard.SkipCorrupt(now, h) == nil {
			n.logCorruptSkip(topic, partition, h.Offset, err, now)
		}
		return -1, true, nil
	}
	return -1, false, err
}

// leaseMessage is the delivery of lease's record rec (nil for a reservation not read yet).
func leaseMessage(topic string, partition int32, lease *inflight.Lease, rec *Record) Message {
	var m Message
	setLeaseMessage(&m, topic, partition, lease, rec)
	return m
}

// setLeaseMessage sets every field of *m to leaseMessage's.
func setLeaseMessage(m *Message, topic string, partition int32, lease *inflight.Lease, rec *Record) {
	*m = Message{
		Topic:     topic,
		Partition: partition,
		Offset:    lease.Offset,
		Receipt:   lease.Handle,
		Attempt:   lease.Attempt,
		Reason:    lease.Reason,
		Expiry:    lease.Expiry,
		Fence:     lease.Fence,
	}
	if rec != nil {
		m.Key, m.Value, m.Timestamp, m.Headers = rec.Key, rec.Value, rec.Timestamp, rec.Headers
	}
}

// giveBack returns reservations that were not delivered, as if never granted.
func (r *partitionRead) giveBack(leases []inflight.Lease) {
	for i := range leases {
		r.shard.GiveBack(r.now, leases[i].Handle)
	}
}

// logRetentionJump logs a retention jump, at most once a minute per partition.
func (n *Node) logRetentionJump(topic string, partition int32, offset, oldest int64, now time.Time) {
	t := n.topic(topic)
	if due, _ := t.due(&t.jumpLogged, partition, now); due {
		n.logger.Warn("consume: retention outran the consumer; the frontier jumped to the oldest retained offset",
			slog.String("topic", topic), slog.Int("partition", int(partition)),
			slog.Int64("offset", offset), slog.Int64("oldest", oldest))
	}
}

// logLimit is the rate limit of a per-partition log line: when it was last logged, and how
// many lines were held back since.
type logLimit struct {
	last       time.Time
	suppressed int
}

// due reports whether a line that lines limits to one a minute per partition may be logged
// for partition at now, and how many were held back since the last one; lines is one of
// t's rate-limit maps, made on first use.
func (t *topicState) due(lines *map[int32]logLimit, partition int32, now time.Time) (due bool, suppressed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if *lines == nil {
		*lines = map[int32]logLimit{}
	}
	lim, seen := (*lines)[partition]
	due = !seen || now.Sub(lim.last) >= time.Minute
	suppressed = lim.suppressed
	if due {
		lim = logLimit{last: now}
	} else {
		lim.suppressed++
	}
	(*lines)[partition] = lim
	return due, suppressed
}

// logCorruptSkip logs a permanently unreadable record being skipped, at most once a minute
// per partition; the line says how many skips of the partition were not logged since the
// previous line (Stats().Shards.CorruptSkipped counts every one).
func (n *Node) logCorruptSkip(topic string, partition int32, offset int64, err error, now time.Time) {
	t := n.topic(topic)
	if due, suppressed := t.due(&t.skipLogged, partition, now); due {
		n.logger.Error("consume: skipping a permanently unreadable record; it will not be delivered",
			slog.String("topic", topic), slog.Int("partition", int(partition)),
			slog.Int64("offset", offset), slog.Int("suppressed", suppressed), slog.Any("err", err))
	}
}
