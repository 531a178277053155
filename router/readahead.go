package router

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"narad.dev/consume/internal/acklane"
	"narad.dev/consume/internal/wire"
)

// Reading ahead (see docs/protocol.md, "Reading ahead"). A node whose consumers take records
// of partitions other nodes own reserves them at their owners before it is asked, so that a
// busy consumer's next record comes from memory with no round trip, and one RPC carries many
// records. Its rules:
//
//   - Driven by demand: a topic is read ahead only for consumes made here, and its
//     reservations are sized to what those consumes took lately (their rate times half the
//     hold), at most the topic's ReadAhead, refilled once fewer than half that are left (or
//     aheadBatch/2 are missing), from the owner that had records last, the others in turn
//     after one that has none.
//   - A reservation is not a delivery: the owner counts the attempt only once this node tells
//     it that a consumer got the record (a Confirm, sent in a batch once per hold; a settle of
//     the record confirms it at the owner too), and a record given back (a Release) or whose
//     reservation lapses was never an attempt.
//   - A bounded hold: a record waits here at most the hold, min(50 ms, visibility/10), then
//     goes back to its owner at once, in one batch with the others due.
//   - An honest lease: the consumer's lease is the owner's, counted from when the reservation
//     left here, so it is at most the hold (and the round trip any remote consume pays)
//     shorter; a record with less than half the visibility timeout left is given back, not
//     handed over.
//   - Fair: an owner grants one reservation at most half the free in-flight room of each
//     partition (inflight.Shard.ReserveAhead), so other gateways and its own consumers get
//     records too.
//   - Nothing stranded: Close and Shutdown give every reservation back, and so does the
//     context of the last consume waiting here ending. A node that dies holding reservations
//     strands them until their leases lapse at the owners (the visibility timeout, as a
//     consumer's crash does), uncounted.

const (
	// DefaultReadAhead is the most records a node holds reserved ahead of its consumers,
	// per topic, when the topic's ReadAhead is zero. What it holds is sized below this to
	// the consumers' rate (half a hold's worth): a topic held to the bound is one whose
	// consumers here take some 330,000 records a second. Below about that many, 64
	// consumers of batches of 100 ran the held records dry between refills, and most
	// consumes waited for a round trip of their own.
	DefaultReadAhead = 8192
	// ReadAheadOff, as a topic's ReadAhead, turns reading ahead off: every consume that
	// crosses nodes asks the owners itself (long tasks, strict fairness).
	ReadAheadOff = -1
	// MaxReadAheadHold bounds how long a reserved record waits here for a consumer; a topic
	// whose visibility timeout is under half a second holds a tenth of it.
	MaxReadAheadHold = 50 * time.Millisecond
	// aheadFirst is what a refill reserves before the topic's consumers have a rate.
	aheadFirst = 16
	// probeAhead is the most records a consume that found nothing held asks the owners for,
	// its own and reservations together: a quarter of what a refill asks one owner for
	// (aheadBatch), since the consume waits for the owner to reserve, encode and send them
	// all, and for this node to read them (4,096 of them, about a millisecond on a busy
	// two-core machine: with probes that large, the consume's p99 at eight consumers of
	// batches of 100 was a third longer).
	probeAhead = aheadBatch / 4
)

// aheadRecords are records one reply reserved at their owner, held here for consumers: kept
// as the reply brought them, and handed over from the front, oldest first. A probe's are
// the messages its consume did not take (msgs); a refill's are its reply's deliveries,
// made messages only as a consume takes them, straight into the consume's own array. (A
// refill's records were made messages as the reply came, into an array of up to
// aheadBatch 200-byte messages, and copied out again as consumes took them: each was
// written twice, once far from any cache, and held 90 bytes more.)
type aheadRecords struct {
	owner   string
	arrived time.Time
	msgs    []Message // a probe's, not handed over yet
	// deliveries are a refill's not handed over yet; their expiries count from sent (zero:
	// times, from an owner before the node wire's version 7). pooled is the slice they were
	// decoded into, for deliveriesPool once none is held any more.
	deliveries []wire.Delivery
	sent       time.Time
	pooled     *[]wire.Delivery
}

// len is how many records h holds.
func (h *aheadRecords) len() int { return len(h.msgs) + len(h.deliveries) }

// handles appends the receipt handles of the records h holds to dst.
func (h *aheadRecords) handles(dst []Handle) []Handle {
	for i := range h.msgs {
		dst = append(dst, h.msgs[i].Receipt)
	}
	for i := range h.deliveries {
		dst = append(dst, deliveryPlace(&h.deliveries[i]))
	}
	return dst
}

// release lets go of what h holds: a refill's slice goes back to deliveriesPool. The
// messages a consume took refer to the reply's bytes, never to the slice.
func (h *aheadRecords) release() {
	if h.pooled != nil {
		putDeliveries(h.pooled)
	}
	*h = aheadRecords{}
}

// refillReply is what remoteConsume leaves for a refill (scanRequest.refill): the reply's
// deliveries, decoded into a slice of deliveriesPool that is the refill's now, and when the
// request left, which their relative expiries count from (zero: the owner sent times).
type refillReply struct {
	deliveries *[]wire.Delivery
	sent       time.Time
}

// readAhead is what this node reads ahead of its consumers for one topic.
type readAhead struct {
	n     *Node
	t     *topicState // the topic's state, which holds this and its settings
	topic string

	// unconfirmedCount is len(unconfirmed), read without the lock by every settle this node
	// forwards of the topic: most find nothing to look up.
	unconfirmedCount atomic.Int64

	mu        sync.Mutex
	held      []aheadRecords // oldest first
	heldCount int            // the records in held
	refilling bool           // a refill is in flight
	// asking is what the probes and the refill in flight ask for besides their consumes'
	// own records: held and asking together stay within the target.
	asking int
	active int // consumes taking here
	// largest is the largest batch a consume here asked for in the span of the rate's
	// measure before this one, largestNow in this one: a batch consumer that left stops
	// sizing the target after two spans.
	largest, largestNow int
	// The demand: records handed over since since, and their rate before (records per
	// second, smoothed over refills).
	taken int
	since time.Time
	rate  float64
	// nextOwner rotates the owner a refill asks first: the last that had records.
	nextOwner int
	// The timer that gives back what outstays the hold and sends the confirms due: armed
	// for timerAt while anything is held or unconfirmed.
	stopTimer func() bool
	timerAt   time.Time
	// unconfirmed holds the records handed to consumers whose owners were not yet told:
	// the owner of each. A settle forwarded meanwhile confirms the record there.
	unconfirmed unconfirmedSet
	closed      bool // Close began: nothing more is held
	// drained is the mark of the last walk of the local partitions that found them all
	// drained (see drained.go; zero: none).
	drained drainedMark
}

// aheadSettings are what a topic's settings make of reading ahead.
type aheadSettings struct {
	limit int           // the most records held; 0: off
	hold  time.Duration // how long one waits here at most
	floor time.Duration // the least lease left a record is handed over with
	// visibility is the topic's visibility timeout, the lease a reservation is granted
	// with: a consume that asks for it by name (a front end passing a queue's default) is
	// served from what is held as one that asks for the topic's.
	visibility time.Duration
}

// aheadSettingsIn returns what topic's settings make of reading ahead: read from
// Config.Topic at the topic's first consume across nodes and again after ReloadTopic, not on
// every consume (a host's Topic may take a lock).
func (n *Node) aheadSettingsIn(t *topicState, topic string) aheadSettings {
	if s := t.aheadSettings.Load(); s != nil {
		return *s
	}
	s := n.aheadSettingsOf(topic)
	t.aheadSettings.Store(&s)
	return s
}

// aheadSettingsOf reads them from the topic's settings. With reading ahead off (limit 0)
// the hold is still the topic's: a late probe's records wait for their consume no longer
// (see hedgedProbes).
func (n *Node) aheadSettingsOf(topic string) aheadSettings {
	var cfg TopicConfig
	if n.topicConfig != nil {
		cfg = n.topicConfig(topic)
	}
	visibility := cfg.VisibilityTimeout
	if visibility <= 0 {
		visibility = DefaultVisibilityTimeout
	}
	visibility = min(visibility, MaxVisibility)
	limit := cfg.ReadAhead
	switch {
	case limit < 0:
		limit = 0
	case limit == 0:
		limit = DefaultReadAhead
	}
	return aheadSettings{limit: limit, hold: holdFor(visibility), floor: visibility / 2, visibility: visibility}
}

// holdFor is the hold of records reserved under visibility: min(MaxReadAheadHold, a tenth of
// it).
func holdFor(visibility time.Duration) time.Duration {
	return min(MaxReadAheadHold, visibility/10)
}

// readAheadFor returns the topic's read-ahead for req, or nil when req is not served from it:
// reading ahead is off for the topic or for this node (a wire version before 11), or req is
// pinned or asks for a visibility timeout other than the topic's (what is held was reserved
// with the topic's: a front end that names a queue's default, which its topic's settings
// carry too, is served).
func (n *Node) readAheadFor(req scanRequest) (*readAhead, aheadSettings) {
	if req.pinned >= 0 || n.wireVersion < wire.V11 {
		return nil, aheadSettings{}
	}
	t := req.state
	if t == nil {
		t = n.topic(req.topic)
	}
	s := n.aheadSettingsIn(t, req.topic)
	if s.limit == 0 || s.hold <= 0 || req.visibility != 0 && req.visibility != s.visibility {
		return nil, s
	}
	if ra := t.ahead.Load(); ra != nil {
		return ra, s
	}
	ra := &readAhead{n: n, t: t, topic: req.topic}
	if !t.ahead.CompareAndSwap(nil, ra) {
		ra = t.ahead.Load()
	}
	return ra, s
}

// take hands up to req.max held records to a consume, and starts a refill in the background
// once one is due (refillDueLocked). With nothing held it returns nothing, and the consume
// probes the owners itself, asking for the target besides its own records (see probeSize
// and split): a consume never waits on a refill. drained, unless zero, is when
// the consume's walk began, which found every local partition drained: its mark replaces the
// one kept (see takeIfDrained).
func (ra *readAhead) take(req scanRequest, now time.Time, s aheadSettings, into []Message, drained wakeWatch) []Message {
	ra.mu.Lock()
	if drained.slot != nil {
		ra.drained = drainedMark{gen: req.gen, local: req.local, began: drained, passes: drainedPasses}
	}
	return ra.takeUnlock(req, now, s, into)
}

// takeIfDrained is take for a consume that did not walk the local partitions: it takes what
// is held only while the mark of the last walk that found them all drained holds, and
// reports whether it took part (then the caller calls left, as after take).
func (ra *readAhead) takeIfDrained(req scanRequest, now time.Time, s aheadSettings, into []Message) ([]Message, bool) {
	ra.mu.Lock()
	if ra.heldCount == 0 || !ra.drained.holds(req.gen, req.local) {
		ra.mu.Unlock()
		return nil, false
	}
	ra.drained.passes--
	return ra.takeUnlock(req, now, s, into), true
}

// takeUnlock is take past the lock it is called with, which it releases.
func (ra *readAhead) takeUnlock(req scanRequest, now time.Time, s aheadSettings, into []Message) []Message {
	n := ra.n
	ra.active++
	ra.largestNow = max(ra.largestNow, req.max)
	msgs, due := ra.takeLocked(req.max, now, s, into, nil)
	want, start := 0, 0
	if len(msgs) > 0 {
		want, start = ra.refillDueLocked(now, s)
	}
	ra.mu.Unlock()
	n.giveBackAhead(ra.topic, due)
	if want > 0 {
		// The owners are worked out only for a refill: a consume served from memory pays
		// nothing for them.
		owners, _ := n.consumeOwnersIn(req.remote, -1)
		if len(owners) == 0 {
			ra.mu.Lock()
			ra.refilling = false
			ra.asking -= want
			ra.mu.Unlock()
		} else {
			n.background(func() { ra.runRefill(owners, start, want) })
		}
	}
	return msgs
}

// left ends a consume that took part here (see take): the last one to leave on its
// context's end gives back everything held, since nobody here may take it.
func (ra *readAhead) left(ctx context.Context) {
	ra.mu.Lock()
	ra.active--
	var back []aheadRecords
	if ra.active == 0 && ctx.Err() != nil && len(ra.held) > 0 {
		back = ra.takeAllLocked()
	}
	ra.mu.Unlock()
	ra.n.giveBackAhead(ra.topic, back)
}

// probeSize is how many records a consume that found nothing held asks the owners for: its
// own, and what the target leaves besides what is held and asked for already, to hold for
// the next consumes (at most probeAhead in all, so that a consume of a batch as large as a
// probe carries reads ahead too). The caller calls probed with the difference once the
// probe is over.
func (ra *readAhead) probeSize(asked int, s aheadSettings) int {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.closed {
		return asked
	}
	extra := max(ra.targetLocked(ra.n.clock.Now(), s)-ra.heldCount-ra.asking, 0)
	extra = min(extra, max(probeAhead-asked, 0))
	ra.asking += extra
	return asked + extra
}

// probed ends what a probe asked for besides its consume's records (see probeSize).
func (ra *readAhead) probed(extra int) {
	if extra == 0 {
		return
	}
	ra.mu.Lock()
	ra.asking -= extra
	ra.mu.Unlock()
}

// split hands the first want of msgs, reservations a probe brought from one owner, to the
// consume, and holds the rest for the next consumes, from when the probe's reply arrived
// (zero: now).
func (ra *readAhead) split(msgs []Message, want int, s aheadSettings, arrived time.Time) []Message {
	n := ra.n
	owner, ok, err := n.ownerOf(ra.topic, msgs[0].Partition)
	switch {
	case !ok || err != nil:
		// The routes moved on since the reply: nobody to tell of the hand-over or give
		// back to. The consume takes what it asked for; the rest lapse at their owner,
		// uncounted.
		return msgs[:min(want, len(msgs))]
	case n.lane(owner).Refuses(acklane.Reserve, n.clock.Now()):
		return msgs // an older release refused the reservation: the consume's own, delivered
	}
	now := n.clock.Now()
	k := min(want, len(msgs))
	mine := msgs[:k:k] // the consume's: its appends must not reach the records held
	ra.mu.Lock()
	for i := range mine {
		ra.unconfirmed.put(mine[i].Receipt, owner)
	}
	ra.handedOverLocked(len(mine), now, s)
	ra.mu.Unlock()
	n.stats.ahead.reserved.Add(uint64(len(mine)))
	if rest := msgs[len(mine):]; len(rest) > 0 {
		ra.hold(aheadRecords{owner: owner, arrived: arrived, msgs: rest}, -1)
	}
	return mine
}

// takeLocked appends to msgs up to max records off the front of what is held at now, and
// appends to due those that outstayed the hold or whose lease left is under the floor: they
// go back.
func (ra *readAhead) takeLocked(max int, now time.Time, s aheadSettings, msgs []Message, due []aheadRecords) ([]Message, []aheadRecords) {
	before, first := ra.heldCount, len(msgs)
	for len(ra.held) > 0 && len(msgs) < max {
		h := &ra.held[0]
		if !now.Before(h.arrived.Add(s.hold)) {
			due = append(due, *h)
			ra.dropFrontLocked()
			continue
		}
		k := min(max-len(msgs), h.len())
		from := len(msgs)
		if h.deliveries != nil {
			msgs = messagesAppend(msgs, ra.topic, h.deliveries[:k], h.sent)
			h.deliveries = h.deliveries[k:]
		} else {
			msgs = append(msgs, h.msgs[:k]...)
			// Not cleared: the records left share the reply's bytes, all let go with the last.
			h.msgs = h.msgs[k:]
		}
		// A record whose lease left is under the floor (a reply that came back very late)
		// goes back rather than to the consume.
		var short []Message
		floor := now.Add(s.floor)
		kept := from
		for i := from; i < len(msgs); i++ {
			m := &msgs[i]
			if m.Expiry.Before(floor) {
				short = append(short, *m)
				continue
			}
			if kept != i {
				msgs[kept] = *m
			}
			kept++
			ra.unconfirmed.put(m.Receipt, h.owner)
		}
		if kept < len(msgs) {
			clear(msgs[kept:])
			msgs = msgs[:kept]
			due = append(due, aheadRecords{owner: h.owner, arrived: h.arrived, msgs: short})
		}
		ra.n.stats.ahead.wait.observeMany(now.Sub(h.arrived), len(msgs)-from)
		ra.heldCount -= k
		if h.len() == 0 {
			h.release()
			ra.dropFrontLocked()
		}
	}
	if taken := len(msgs) - first; taken > 0 {
		ra.handedOverLocked(taken, now, s)
	}
	ra.n.stats.ahead.heldNow.Add(int64(ra.heldCount - before))
	return msgs, due
}

// dropFrontLocked drops the oldest records of held, whose count is taken off already or
// here.
func (ra *readAhead) dropFrontLocked() {
	ra.heldCount -= ra.held[0].len()
	ra.held[0] = aheadRecords{}
	ra.held = ra.held[1:]
	if len(ra.held) == 0 {
		ra.held = nil // what the front left behind is not kept
	}
}

// takeAllLocked takes everything held.
func (ra *readAhead) takeAllLocked() []aheadRecords {
	all := ra.held
	ra.n.stats.ahead.heldNow.Add(-int64(ra.heldCount))
	ra.held, ra.heldCount = nil, 0
	return all
}

// handedOverLocked counts k records just handed to a consume, entered in unconfirmed, and
// arms the timer that confirms them at their owners.
func (ra *readAhead) handedOverLocked(k int, now time.Time, s aheadSettings) {
	ra.taken += k
	ra.unconfirmedCount.Store(int64(ra.unconfirmed.len()))
	ra.n.stats.ahead.handedOver.Add(uint64(k))
	ra.armLocked(now.Add(s.hold), now)
}

// refillDueLocked reports the refill due once fewer than half the target are held, or half
// a refill's request (aheadBatch/2) is missing from it, unless one is in flight: what it
// reserves (the target less what is held; zero: none) and the owner it asks first. The
// caller starts it (runRefill), or clears refilling. (With a target of thousands, at half a
// busy gateway's consumers took what was left before the refill's round trip ended, and
// asked the owners themselves.)
func (ra *readAhead) refillDueLocked(now time.Time, s aheadSettings) (want, start int) {
	if ra.refilling || ra.closed {
		return 0, 0
	}
	target := ra.targetLocked(now, s)
	if have := ra.heldCount + ra.asking; 2*have >= target && target-have < aheadBatch/2 {
		return 0, 0
	}
	ra.refilling = true
	want = target - ra.heldCount - ra.asking
	ra.asking += want
	return want, ra.nextOwner
}

// targetLocked is how many records the topic's consumers here take in half a hold, at their
// rate lately (aheadFirst before they have one), and at least two of the largest batch a
// consume asked for lately; at most the limit. The rate is measured over spans of at least
// half a hold, each averaged with the rate before.
func (ra *readAhead) targetLocked(now time.Time, s aheadSettings) int {
	if ra.since.IsZero() {
		ra.since = now
	}
	if elapsed := now.Sub(ra.since); elapsed >= s.hold/2 && elapsed > 0 {
		current := float64(ra.taken) / elapsed.Seconds()
		if ra.rate == 0 {
			ra.rate = current
		} else {
			ra.rate = (ra.rate + current) / 2
		}
		ra.taken, ra.since = 0, now
		ra.largest, ra.largestNow = ra.largestNow, 0
	}
	target := aheadFirst
	if ra.rate > 0 {
		target = int(math.Ceil(ra.rate * (s.hold / 2).Seconds()))
	}
	return min(max(target, 2*max(ra.largest, ra.largestNow)), s.limit)
}

// runRefill reserves want records at the owners, from start on: as many as each has (up to
// aheadBatch a request), the next owner asked once one has no more. An owner that refused
// reservations lately (an older release), or that is slow, is passed over.
func (ra *readAhead) runRefill(owners []string, start, want int) {
	n := ra.n
	defer func() {
		ra.mu.Lock()
		ra.refilling = false
		ra.asking -= want
		ra.mu.Unlock()
	}()
	asked := n.answering(owners)
	got := 0
	for i := 0; i < len(asked) && got < want; i++ {
		k := (start + i) % len(asked)
		owner := asked[k]
		if n.lane(owner).Refuses(acklane.Reserve, n.clock.Now()) {
			continue
		}
		for got < want {
			size := min(want-got, aheadBatch)
			var reply refillReply
			req := scanRequest{topic: ra.topic, pinned: -1, max: size, reserve: true, ahead: size, refill: &reply}
			func() {
				var err error
				defer n.recoverHostPanic("reading ahead from an owner", owner, &err)
				n.remoteConsume(context.Background(), owner, req, false, n.clock.Now().Add(ProbeBudget))
			}()
			n.stats.ahead.refills.Add(1)
			if reply.deliveries == nil {
				break
			}
			h := aheadRecords{owner: owner, deliveries: *reply.deliveries, sent: reply.sent, pooled: reply.deliveries}
			count := h.len()
			if count == 0 {
				h.release()
				break
			}
			got += count
			if !ra.hold(h, k) {
				return
			}
			if count < size {
				break // the owner has no more now
			}
		}
	}
}

// hold keeps held, records reserved at its owner (the k-th owner of the refill's order;
// negative: a probe's), for the consumers here, from when they arrived (zero: now; what is
// held stays in the order of arrival, so that the oldest goes back first); once Close (or
// DeleteTopic) began it gives them back at once, in the background, and reports false: a
// consume that splits a probe's reply must not wait on the give-back's RPC, which may take
// its whole budget (a frame lost), past the consume's ConsumeOverrun.
func (ra *readAhead) hold(held aheadRecords, k int) bool {
	n := ra.n
	now := n.clock.Now()
	count := held.len()
	n.stats.ahead.reserved.Add(uint64(count))
	ra.mu.Lock()
	if ra.closed {
		ra.mu.Unlock()
		n.giveBackAhead(ra.topic, []aheadRecords{held})
		return false
	}
	if held.arrived.IsZero() {
		held.arrived = now
	}
	at := len(ra.held)
	for at > 0 && ra.held[at-1].arrived.After(held.arrived) {
		at-- // a late probe's, which arrived while the consume that took the rest was busy
	}
	ra.held = slices.Insert(ra.held, at, held)
	ra.heldCount += count
	n.stats.ahead.heldNow.Add(int64(count))
	if k >= 0 {
		ra.nextOwner = k
	}
	s := n.aheadSettingsIn(ra.t, ra.topic)
	ra.armLocked(held.arrived.Add(s.hold), now)
	ra.mu.Unlock()
	return true
}

// armLocked arms the timer for at, unless it is armed for at or earlier.
func (ra *readAhead) armLocked(at, now time.Time) {
	if ra.stopTimer != nil && !ra.timerAt.After(at) {
		return
	}
	if ra.stopTimer != nil {
		ra.stopTimer()
	}
	ra.timerAt = at
	ra.stopTimer = ra.n.clock.AfterFunc(at.Sub(now), func() { ra.fire(at) })
}

// fire gives back what outstayed the hold and tells the owners of the records handed over
// since the last time, then arms the timer for the next record due. A fire whose timer was
// replaced does nothing.
func (ra *readAhead) fire(at time.Time) {
	n := ra.n
	now := n.clock.Now()
	s := n.aheadSettingsIn(ra.t, ra.topic)
	ra.mu.Lock()
	if ra.stopTimer == nil || !ra.timerAt.Equal(at) {
		ra.mu.Unlock()
		return
	}
	ra.stopTimer = nil
	var due []aheadRecords
	before := ra.heldCount
	for len(ra.held) > 0 && (!now.Before(ra.held[0].arrived.Add(s.hold)) || s.limit == 0) {
		due = append(due, ra.held[0])
		ra.dropFrontLocked()
	}
	n.stats.ahead.heldNow.Add(int64(ra.heldCount - before))
	confirms := ra.takeConfirmsLocked()
	if len(ra.held) > 0 {
		ra.armLocked(ra.held[0].arrived.Add(s.hold), now)
	}
	ra.mu.Unlock()
	n.giveBackAhead(ra.topic, due)
	for owner, handles := range confirms {
		n.background(func() { n.confirmAt(owner, ra.topic, handles) })
	}
}

// takeConfirmsLocked takes the records handed over and not yet confirmed, by owner.
func (ra *readAhead) takeConfirmsLocked() map[string][]Handle {
	if ra.unconfirmed.len() == 0 {
		return nil
	}
	byOwner := ra.unconfirmed.takeByOwner()
	ra.unconfirmedCount.Store(0)
	return byOwner
}

// settled forgets the confirms of records this node forwards settles of, under one lock:
// a settle confirms its record at the owner.
func (ra *readAhead) settled(handles ...Handle) {
	if ra.unconfirmedCount.Load() == 0 {
		return
	}
	ra.mu.Lock()
	for _, h := range handles {
		ra.unconfirmed.drop(h)
	}
	ra.unconfirmedCount.Store(int64(ra.unconfirmed.len()))
	ra.mu.Unlock()
}

// unconfirmedSet is the records handed over and not yet confirmed, each with its owner: a
// table of open addressing (linear probing), a record placed by a few multiplies of its
// handle's fields (its nonce is random already), where a delete shifts the records after it
// back rather than leaving a tombstone. A map by whole handle cost several times that per
// insert and delete, and this set takes one of each per record read ahead. The zero value is
// an empty set.
type unconfirmedSet struct {
	slots []unconfirmedSlot // a power of two of them, at most half full
	count int
	// seed is mixed into each handle before it places the record: a peer that chose its
	// nonces cannot pile records up in one run of slots.
	seed uint64
}

type unconfirmedSlot struct {
	h     Handle
	owner string
	used  bool
}

// home is the slot that h goes to when it is free: the handle's fields mixed with the seed
// (not linearly, so that no choice of nonces piles records up whatever the seed).
func (u *unconfirmedSet) home(h Handle) int {
	mixed := (h.Nonce ^ u.seed) * 0x9E3779B97F4A7C15
	mixed ^= mixed >> 32
	mixed = (mixed ^ uint64(h.Offset) ^ uint64(uint32(h.Partition))<<44) * 0xBF58476D1CE4E5B9
	return int(mixed >> 32 & uint64(len(u.slots)-1))
}

// find returns the slot holding h, or the free slot where h would go.
func (u *unconfirmedSet) find(h Handle) int {
	mask := len(u.slots) - 1
	i := u.home(h)
	for u.slots[i].used && u.slots[i].h != h {
		i = (i + 1) & mask
	}
	return i
}

func (u *unconfirmedSet) put(h Handle, owner string) {
	if 2*(u.count+1) > len(u.slots) {
		u.grow()
	}
	i := u.find(h)
	if !u.slots[i].used {
		u.count++
	}
	u.slots[i] = unconfirmedSlot{h: h, owner: owner, used: true}
}

// grow doubles the slots (64 at first), placing the records again.
func (u *unconfirmedSet) grow() {
	old := u.slots
	if u.seed == 0 {
		u.seed = rand.Uint64()
	}
	u.slots = make([]unconfirmedSlot, max(64, 2*len(old)))
	for i := range old {
		if old[i].used {
			u.slots[u.find(old[i].h)] = old[i]
		}
	}
}

// drop takes h out of the set, if it is there: the records after it in its run that may sit
// in its slot move back (Knuth's algorithm R), so that every record stays reachable from its
// home slot.
func (u *unconfirmedSet) drop(h Handle) {
	if u.count == 0 {
		return
	}
	i := u.find(h)
	if !u.slots[i].used {
		return
	}
	mask := len(u.slots) - 1
	for j := (i + 1) & mask; u.slots[j].used; j = (j + 1) & mask {
		// The record at j may move to the hole at i unless its home lies cyclically in (i, j].
		if k := u.home(u.slots[j].h); (j-k)&mask >= (j-i)&mask {
			u.slots[i] = u.slots[j]
			i = j
		}
	}
	u.slots[i] = unconfirmedSlot{}
	u.count--
}

func (u *unconfirmedSet) len() int { return u.count }

// takeByOwner empties the set, and returns what it held by owner.
func (u *unconfirmedSet) takeByOwner() map[string][]Handle {
	byOwner := map[string][]Handle{}
	for i := range u.slots {
		if s := &u.slots[i]; s.used {
			byOwner[s.owner] = append(byOwner[s.owner], s.h)
		}
	}
	clear(u.slots)
	u.count = 0
	return byOwner
}

// aheadSettled tells the topic's read-ahead that this node forwards a settle of h.
func (n *Node) aheadSettled(topic string, h Handle) {
	n.aheadSettledIn(nil, topic, h)
}

// aheadSettledIn is aheadSettled given t, the topic's state (nil: looked up here).
func (n *Node) aheadSettledIn(t *topicState, topic string, h Handle) {
	var ra *readAhead
	if t != nil {
		ra = t.ahead.Load()
	} else {
		ra = n.aheadOf(topic)
	}
	if ra != nil {
		ra.settled(h)
	}
}

// aheadOf is the topic's read-ahead, nil when it has none.
func (n *Node) aheadOf(topic string) *readAhead {
	if t, ok := n.topics.Load(topic); ok {
		return t.ahead.Load()
	}
	return nil
}

// close gives back everything held and sends the confirms due, and makes later refills give
// back what they bring: Close waits for it.
func (ra *readAhead) close() {
	ra.mu.Lock()
	ra.closed = true
	if ra.stopTimer != nil {
		ra.stopTimer()
		ra.stopTimer = nil
	}
	held := ra.takeAllLocked()
	confirms := ra.takeConfirmsLocked()
	ra.mu.Unlock()
	var wg sync.WaitGroup
	for owner, handles := range confirms {
		wg.Go(func() { ra.n.confirmAt(owner, ra.topic, handles) })
	}
	for owner, handles := range byOwner(held) {
		wg.Go(func() { ra.n.releaseUnused(owner, ra.topic, handles) })
	}
	wg.Wait()
}

// closeReadAheads is close of every topic's read-ahead.
func (n *Node) closeReadAheads() {
	n.topics.Range(func(_ string, t *topicState) bool {
		if ra := t.ahead.Load(); ra != nil {
			ra.close()
		}
		return true
	})
}

// giveBackAhead gives held records back to their owners, unused, in the background: one
// batch per owner.
func (n *Node) giveBackAhead(topic string, held []aheadRecords) {
	if len(held) == 0 {
		return
	}
	for owner, handles := range byOwner(held) {
		n.background(func() { n.releaseUnused(owner, topic, handles) })
	}
}

// byOwner groups the receipt handles of held records by owner, and lets go of what held
// holds (aheadRecords.release): held is the caller's alone.
func byOwner(held []aheadRecords) map[string][]Handle {
	groups := map[string][]Handle{}
	for i := range held {
		groups[held[i].owner] = held[i].handles(groups[held[i].owner])
		held[i].release()
	}
	return groups
}

// releaseUnused gives handles, reservations owner granted and no consumer here got, back to
// owner (Releases: the wire's "unused"), counted in Stats.Ahead.Unused once owner took them.
func (n *Node) releaseUnused(owner, topic string, handles []Handle) {
	n.settleAtOwner(context.Background(), owner, topic, opRelease, len(handles),
		func(i int) Handle { return handles[i] },
		func(_ int, a wire.Answer) {
			if a.Status == wire.StatusOK {
				n.stats.ahead.unused.Add(1)
			}
		})
}

// confirmAt tells owner that consumers got the records of handles, reservations it granted.
func (n *Node) confirmAt(owner, topic string, handles []Handle) {
	n.settleAtOwner(context.Background(), owner, topic, opConfirm, len(handles),
		func(i int) Handle { return handles[i] },
		func(int, wire.Answer) {})
}

// AheadStats counts reading ahead (see DefaultReadAhead), as the node that reads ahead.
type AheadStats struct {
	Reserved   uint64 // records reserved at owners ahead of consumers
	HandedOver uint64 // of them, handed to a consumer here
	Unused     uint64 // of them, given back unused (outstayed the hold, lease too short, Close)
	Refills    uint64 // the consume RPCs that reserved them
	// HeldNow is how many records this node holds reserved now, for no consumer yet.
	HeldNow int64
	// Wait is how long the records handed over waited here, from their arrival.
	Wait Histogram
}

type aheadStats struct {
	reserved, handedOver, unused, refills atomic.Uint64
	heldNow                               atomic.Int64
	wait                                  histogram
}

func (s *aheadStats) load() AheadStats {
	return AheadStats{Reserved: s.reserved.Load(), HandedOver: s.handedOver.Load(), Unused: s.unused.Load(),
		Refills: s.refills.Load(), HeldNow: s.heldNow.Load(), Wait: s.wait.load()}
}
