package router

import (
	"errors"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/tokens"
)

// Reserving a record for a consumer parked on this node (see parked.go), in two halves so
// that no log read runs on the pump goroutine: the pump only reserves (a shard operation
// under the shard's lock, never I/O) for the waiter it popped, and hands it the
// reservation; the woken consumer, on its own goroutine, reads the record with the scan's
// rules. One slow read (a cold segment, a disk that stalls) then delays only the consumer
// that reads it, never the wakeups of every other topic.

// reservation is what the pump hands a parked consumer: a lease on one record, the log it
// is to be read from, and the shard that holds the lease. Key, Value and Timestamp of msg
// are empty until the consumer reads them.
//
// Or it is an owner's wake (fromOwner): another node holds a record of the topic for this
// node, and the consumer it is handed claims it.
//
// Or it is an error the consumer answers (err), and nothing was reserved: the host broke a
// seam's contract on the consumer's pinned partition, or panicked, while the pump reserved.
type reservation struct {
	msg   Message
	log   Log
	shard *inflight.Shard

	fromOwner bool
	wake      tokens.Wake

	// scan: an ordered partition has records for the consumer, which it takes with a scan
	// of its own, since an ordered record is bound to its key as it is read (no read runs
	// on the pump goroutine).
	scan bool

	err error
}

// pumpSource lets the pump reserve records for parked consumers.
type pumpSource struct{ n *Node }

// Take reserves the next record of topic for the waiter the pump has just popped, without
// reading it. It looks at the partitions in the scan's order (the rotation the scan keeps
// per topic, pinned alone when pinned) and takes the first record any of them can lease;
// with none, it hands the waiter an owner's wake, if one came (a local record costs no
// round trip, so it goes first).
//
// It runs on the pump goroutine, where a panic would end the process: a panic of the host's
// code it calls (the routes, the logs) is recovered, and the waiter answers it as an error.
func (s pumpSource) Take(topic string, pinned int32) (r reservation, ok bool) {
	defer func() {
		if r.err != nil {
			r, ok = reservation{err: r.err}, true
		}
	}()
	defer s.n.recoverHostPanic("the pump reserving for a parked consumer", topic, &r.err)
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
	switch {
	case r.err != nil, r.scan: // nothing was reserved
	case r.fromOwner:
		s.n.returnWake(topic, r.wake)
	default:
		r.shard.GiveBack(s.n.clock.Now(), r.msg.Receipt)
	}
}

// reserveOne leases one record of topic from this node's partitions (pinned alone when
// pinned >= 0) as the scan would take it, but reads nothing. It resolves the topic's routes,
// generation and logs afresh on every call, as the scan does. A partition the host answers
// wrongly about (ErrHostContract) is passed over, as the scan passes over it; a pinned
// waiter is handed that error instead (in r.err, ok true).
func (n *Node) reserveOne(topic string, pinned int32) (r reservation, ok bool) {
	gen := n.tracker.Generation(topic) // before the routes, as in the scan
	order, start, verdict, err := n.partitionOrder(topic, pinned)
	if err != nil || len(order) == 0 {
		if pinned >= 0 && errors.Is(err, ErrHostContract) {
			return reservation{err: err}, true
		}
		return reservation{}, false
	}
	now := n.clock.Now()
	n.walkPartitions(topic, order, start, verdict, func(p int32, log Log, failed error) bool {
		if failed == nil {
			if r, ok, failed = n.reserveFrom(gen, p, log, now); failed == nil {
				return ok // reserved, or dry: the next partition
			}
		}
		switch contract := errors.Is(failed, ErrHostContract); {
		case contract && pinned >= 0:
			r, ok = reservation{err: failed}, true
		case pinned < 0 && (contract || skippedByScans(failed)):
			return false // the topic's other partitions may serve
		}
		return true // the scan would fail here: nothing to hand out
	})
	return r, ok
}

// reserveFrom leases the next record of one partition, below the high watermark its log
// reports. Nothing there (dry, all reserved, capped) is not ok with no error; a partition that
// cannot be loaded, or whose high watermark is negative, is the error.
func (n *Node) reserveFrom(gen *inflight.Generation, partition int32, log Log, now time.Time) (r reservation, ok bool, err error) {
	shard, err := n.shardFor(gen, partition)
	if err != nil {
		return reservation{}, false, err
	}
	hwm := log.HighWatermark()
	if hwm < 0 {
		return reservation{}, false, n.negativeWatermark(gen.Topic(), partition, hwm)
	}
	if shard.Ordered() {
		if shard.Available(now, hwm) == 0 {
			return reservation{}, false, nil
		}
		return reservation{scan: true}, true, nil
	}
	lease, err := shard.ReserveNextFor(now, hwm, 0)
	if n.lapsedRetry(shard, now, err) {
		lease, err = shard.ReserveNextFor(now, hwm, 0)
	}
	if err != nil {
		return reservation{}, false, nil
	}
	return reservation{msg: leaseMessage(gen.Topic(), partition, &lease, nil), log: log, shard: shard}, true, nil
}

// errSkipped: the reserved record is gone for good (below retention, or permanently
// unreadable; the frontier passed it), or not due yet (Config.NotBefore): the consumer waits
// on.
var errSkipped = errors.New("router: reserved record skipped")

// postponeIfDue asks Config.NotBefore about the record m holds (read, its lease live) and,
// if it is due after now, postpones it on shard and reports true: m is not to be delivered.
// On an ordered partition the key's later records wait for it.
func (n *Node) postponeIfDue(topic string, shard *inflight.Shard, m *Message, now time.Time, ordered bool) bool {
	due := n.notBefore(topic, Record{Key: m.Key, Value: m.Value, Timestamp: m.Timestamp, Headers: m.Headers})
	if !due.After(now) {
		return false
	}
	var key uint64
	if ordered {
		key = inflight.KeyOf(m.Key)
	}
	// A lease no longer live (the shard moved, say) is delivered as it is: its settles fail
	// anyway.
	if latest := now.Add(MaxDelay); due.After(latest) {
		due = latest
	}
	return shard.Postpone(now, m.Receipt, due, key) == nil
}

// read reads the record of a reservation the pump handed over, with the scan's rules: a
// record below retention jumps the frontier and a permanently unreadable one is skipped
// (both errSkipped); any other failure (a closed log, a retention miss the log contradicts)
// gives the reservation back and is returned.
func (n *Node) read(r reservation) (Message, error) {
	m := r.msg
	rec, err := r.log.Read(m.Offset)
	if err == nil {
		m.Key, m.Value, m.Timestamp, m.Headers = rec.Key, rec.Value, rec.Timestamp, rec.Headers
		if n.notBefore != nil && n.postponeIfDue(m.Topic, r.shard, &m, n.clock.Now(), false) {
			return Message{}, errSkipped // due later: the consumer waits on
		}
		n.stats.delivered.Add(1)
		return m, nil
	}
	now := n.clock.Now()
	_, skipped, err := n.skipUnreadable(r.shard, r.log, m.Topic, m.Partition, m.Receipt, err, now)
	if skipped {
		return Message{}, errSkipped
	}
	// No wake for it: the other waiters would read the same failing log. The next wake
	// (the host's Appended once it replaced the log) serves it.
	r.shard.GiveBack(now, m.Receipt)
	return Message{}, err
}
