package inflight

import "sync/atomic"

// Counters count what the shards of a tracker do, for a host to export (expvar, Prometheus).
// All fields only grow. The zero value is ready to use; shards share one through Options.
type Counters struct {
	// Delivered counts records handed to consumers: leases granted by ReserveNext and
	// ReserveBatch, and reservations (ReserveAhead) as they are confirmed, explicitly
	// (Confirm) or implicitly (an Extend, Nack, Reject or Ack of the reservation).
	Delivered atomic.Uint64
	// Reserved counts the reservations ReserveAhead granted (not in Delivered until
	// confirmed).
	Reserved atomic.Uint64
	// Unused counts reservations released uncounted, never confirmed: given back (counted in
	// GivenBack too) or lapsed at their expiry (not counted in Expired).
	Unused atomic.Uint64

	Acked          atomic.Uint64 // acks that settled an offset
	Extended       atomic.Uint64 // extends that re-armed a lease
	Nacked         atomic.Uint64 // nacks that released a lease
	GivenBack      atomic.Uint64 // reservations given back unread (closed log, cancel race)
	Gone           atomic.Uint64 // ack, extend, nack, reject or confirm answered ErrGone
	AlreadySettled atomic.Uint64 // the same, answered ErrAlreadySettled
	Expired        atomic.Uint64 // leases released by expiry
	CorruptSkipped atomic.Uint64 // offsets skipped as permanently unreadable
	RetentionJumps atomic.Uint64 // frontier jumps to the oldest retained offset
	Quarantined    atomic.Uint64 // records set aside after MaxDeliveries attempts or by a reject
	Rejected       atomic.Uint64 // rejects that quarantined a lease (counted in Quarantined too)
	Requeued       atomic.Uint64 // quarantined records brought back for delivery
	Discarded      atomic.Uint64 // quarantined records settled for good by Discard
	// AckedAheadStalls counts the episodes in which a partition's acked-ahead set stood at
	// its cap, so that only the frontier hole was handed out (see Hooks.AckedAheadStall).
	AckedAheadStalls atomic.Uint64
	// Deferred counts the records an ordered partition read and deferred behind their keys
	// (Shard.Bind), each time it did.
	Deferred atomic.Uint64
	// DeferredStalls counts the episodes in which an ordered partition held Config.MaxDeferred
	// records deferred, so that it handed out no new record.
	DeferredStalls atomic.Uint64
	// Spilled counts the deferred records an ordered partition's parked keys spilled past
	// Config.MaxDeferredPerKey (kept as a bit each), and Refilled those brought back as
	// entries.
	Spilled, Refilled atomic.Uint64
	// Postponed counts the records whose host said, as they were read, that they were not
	// to be delivered yet (Shard.Postpone): each wait out their time as a nack's delay does.
	Postponed atomic.Uint64
}

// CounterValues is a plain copy of Counters at one instant.
type CounterValues struct {
	Delivered, Reserved, Unused, Acked, Extended, Nacked, GivenBack, Gone, AlreadySettled, Expired,
	CorruptSkipped, RetentionJumps, Quarantined, Rejected, Requeued, Discarded, AckedAheadStalls,
	Deferred, DeferredStalls, Spilled, Refilled, Postponed uint64
}

// Load returns the current values. Each field is read atomically; the set as a whole is not
// one atomic snapshot.
func (c *Counters) Load() CounterValues {
	return CounterValues{
		Delivered:        c.Delivered.Load(),
		Reserved:         c.Reserved.Load(),
		Unused:           c.Unused.Load(),
		Acked:            c.Acked.Load(),
		Extended:         c.Extended.Load(),
		Nacked:           c.Nacked.Load(),
		GivenBack:        c.GivenBack.Load(),
		Gone:             c.Gone.Load(),
		AlreadySettled:   c.AlreadySettled.Load(),
		Expired:          c.Expired.Load(),
		CorruptSkipped:   c.CorruptSkipped.Load(),
		RetentionJumps:   c.RetentionJumps.Load(),
		Quarantined:      c.Quarantined.Load(),
		Rejected:         c.Rejected.Load(),
		Requeued:         c.Requeued.Load(),
		Discarded:        c.Discarded.Load(),
		AckedAheadStalls: c.AckedAheadStalls.Load(),
		Deferred:         c.Deferred.Load(),
		DeferredStalls:   c.DeferredStalls.Load(),
		Spilled:          c.Spilled.Load(),
		Refilled:         c.Refilled.Load(),
		Postponed:        c.Postponed.Load(),
	}
}
