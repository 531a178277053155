package router

import (
	"errors"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/tokens"
)

// The hand-off of a record to a parked consumer happens in two halves, so that no log read
// runs on the pump goroutine: the pump only reserves (a shard operation under the shard's
// lock, never I/O) for the waiter it popped, and hands it the reservation; the woken
// consumer, on its own goroutine, reads the record with the scan's rules. One slow read
// (a cold segment, a disk that stalls) then delays only the consumer that reads it, never
// the wakeups of every other topic.

// reservation is what the pump hands a parked consumer: a lease on one record, the log it
// is to be read from, and the shard that holds the lease. Key, Value and Timestamp of msg
// are empty until the consumer reads them.
//
// Or it is an owner's wake (fromOwner): another node holds a record of the topic for this
// node, and the consumer it is handed claims it.
type reservation struct {
	msg   Message
	log   Log
	shard *inflight.Shard

	fromOwner bool
	wake      tokens.Wake
}

// pumpSource lets the pump reserve records for parked consumers.
type pumpSource struct{ n *Node }

// Take reserves the next record of topic for the waiter the pump has just popped, without
// reading it. It looks at the partitions in the scan's order (the rotation the scan keeps
// per topic, pinned alone when pinned) and takes the first record any of them can lease;
// with none, it hands the waiter an owner's wake, if one came (a local record costs no
// round trip, so it goes first).
func (s pumpSource) Take(topic string, pinned int32) (reservation, bool) {
	if r, ok := s.n.reserveOne(topic, pinned); ok {
		return r, true
	}
	if w, ok := s.n.takeWake(topic, pinned); ok {
		return reservation{fromOwner: true, wake: w}, true
	}
	return reservation{}, false
}

// Release gives back a reservation handed over at the instant its consumer left, so it is
// visible again at once rather than after its visibility timeout; an owner's wake goes to
// the next consumer parked here.
func (s pumpSource) Release(topic string, r reservation) {
	if r.fromOwner {
		s.n.returnWake(topic, r.wake)
		return
	}
	r.shard.GiveBack(s.n.clock.Now(), r.msg.Receipt)
}

// reserveOne leases one record of topic from this node's partitions (pinned alone when
// pinned >= 0) as the scan would take it, but reads nothing. It resolves the topic's routes,
// generation and logs afresh on every call, as the scan does.
func (n *Node) reserveOne(topic string, pinned int32) (r reservation, ok bool) {
	gen := n.tracker.Generation(topic) // before the routes, as in the scan
	order, start, err := n.partitionOrder(topic, pinned)
	if err != nil || len(order) == 0 {
		return reservation{}, false
	}
	now := n.clock.Now()
	n.walkPartitions(topic, order, start, func(p int32, log Log, lookupErr error) bool {
		if lookupErr != nil {
			return true
		}
		var stop bool
		r, ok, stop = n.reserveFrom(gen, pinned, p, log, now)
		return ok || stop
	})
	return r, ok
}

// reserveFrom leases the next record of one partition, below the high watermark its log
// reports. stop says the pass ends here with nothing (the scan would fail: a partition that
// cannot be loaded, unless it is set aside and the topic's other partitions may serve).
func (n *Node) reserveFrom(gen *inflight.Generation, pinned, partition int32, log Log, now time.Time) (r reservation, ok, stop bool) {
	shard, err := n.shardFor(gen, partition)
	if err != nil {
		return reservation{}, false, pinned >= 0 || !skippedByScans(err)
	}
	lease, err := shard.ReserveNextFor(now, log.HighWatermark(), 0)
	if err != nil {
		return reservation{}, false, false // dry, all reserved or capped: the next partition
	}
	return reservation{msg: leaseMessage(gen.Topic(), partition, &lease, nil), log: log, shard: shard}, true, false
}

// errSkipped: the reserved record is gone for good (below retention, or permanently
// unreadable); the frontier passed it and the consumer waits on.
var errSkipped = errors.New("router: reserved record skipped")

// read reads the record of a reservation the pump handed over, with the scan's rules: a
// record below retention jumps the frontier and a permanently unreadable one is skipped
// (both errSkipped); any other failure (a closed log) gives the reservation back and is
// returned.
func (n *Node) read(r reservation) (Message, error) {
	m := r.msg
	rec, err := r.log.Read(m.Offset)
	if err == nil {
		m.Key, m.Value, m.Timestamp = rec.Key, rec.Value, rec.Timestamp
		n.stats.delivered.Add(1)
		return m, nil
	}
	now := n.clock.Now()
	if _, skipped := n.skipUnreadable(r.shard, r.log, m.Topic, m.Partition, m.Receipt, err, now); skipped {
		return Message{}, errSkipped
	}
	// No wake for it: the other waiters would read the same failing log. The next wake
	// (the host's Appended once it replaced the log) serves it.
	r.shard.GiveBack(now, m.Receipt)
	return Message{}, err
}
