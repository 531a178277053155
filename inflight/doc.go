// Package inflight holds the in-flight state of queue-style consumption over a partitioned
// log: per (topic, partition), which records are leased to which consumer and until when,
// and up to which offset everything is settled.
//
// The protocol, and the invariants this package cites by name, are described in
// docs/protocol.md at the root of the module ("Leases", "Receipt handles and nonces", "The
// committed frontier and the acked-ahead set", "Redelivery control", "Invariants").
//
// # The shard
//
// A Shard is one partition's state:
//
//   - the committed frontier: the last offset up to which everything is settled (inclusive;
//     a new partition whose oldest retained offset is o starts at o-1);
//   - the leases: offset → (nonce, expiry). The receipt handle a consumer holds is
//     partition:offset:nonce (Handle); only the live lease's nonce acks, extends or nacks;
//   - the acked-ahead set: acks above a gap, parked until the gap beneath them closes, kept
//     as runs of consecutive offsets (State.AckedAhead is []Run);
//   - the corrupt-skip set: offsets whose record is permanently unreadable, which the
//     frontier passes over as over acked ones;
//   - the caps, per topic (Config): in-flight (at the cap nothing is handed out) and
//     acked-ahead (at the cap only the frontier hole is handed out).
//
// # The acked-ahead cap
//
// The acked-ahead cap bounds what the persisted state must hold, not a count of acks:
// MaxAckedAheadRuns counts the set's runs, about one per hole (an unsettled offset) below an
// ack, so a partition with a few holes keeps serving however many acks pile up above them,
// and a full set fits one persisted record beside the other sets (DefaultMaxAckedAheadRuns
// says how it is sized). MaxAckedAhead caps the offsets, at most MaxAckedAheadCeiling, what
// one record may hold. A partition still stalls when more holes are open at once than the run
// cap allows (abandoned records alone leave about abandons per second × visibility timeout of
// them: the default 1,000 is 5 % of 10,000 records/s with a 2 s visibility timeout): then only
// the frontier hole is handed out until it is settled. Each such stall episode is counted
// (Counters.AckedAheadStalls) and reported once, as it begins, through Hooks.AckedAheadStall.
//
// Only the frontier and the acked-ahead set are persisted (Snapshot, Restore), with the
// quarantined and requeued offsets and the delivery attempts of redelivery control;
// everything else is memory. A crash forgets the leases and the records are simply delivered again:
// that is the whole crash story of consumption.
//
// # Usage
//
// The caller reserves before it reads (invariant "one live holder"), then settles:
//
//	lease, err := shard.ReserveNext(now, log.HighWatermark())
//	// errors.Is(err, ErrEmpty / ErrAllReserved / ErrInFlightCap / ErrAckedAheadCap): a 204
//	rec, err := log.Read(lease.Offset)
//	switch {
//	case below retention:  shard.SkipRetention(now, lease.Handle, log.Oldest())
//	case unreadable:       shard.SkipCorrupt(now, lease.Handle)
//	case log closed:       shard.GiveBack(now, lease.Handle) // transient, not a gap
//	default:               shard.Handed([]Lease{lease})      // on its way to the consumer
//	}
//	// ... the consumer processes the record, then:
//	err = shard.Ack(now, handle) // or Extend, Nack, or Reject; ErrGone is the 410
//
// A Tracker keeps the shards of a node by topic name and partition, creates them lazily from
// persisted state, and drops them (a partition move, a deleted topic) behind a create fence.
//
// # Redelivery control
//
// A topic's Config can bound what one record that never succeeds costs:
// MaxDeliveries quarantines it after that many deliveries (the frontier passes over it; the
// quarantine is persisted, reported through Hooks.Quarantine, Requeue brings a record
// back and Discard settles it for good, once the host copied it elsewhere; Reject quarantines a record at once, on the consumer's word that it will never
// succeed), Backoff delays redelivery after an expiry or a nack without a delay of its own
// (NackNow makes a record visible at once, its attempt counted, whatever the policy), and
// MaxExtension and MaxLeaseLifetime bound how long a stuck consumer can hold a record. Every
// lease says which attempt it is, why it is delivered (Reason) and carries a fencing token.
// Under MaxDeliveries the attempt counts are persisted, but only those of leases whose records
// went to a consumer: a scan's lease counts on disk once the scan says so (Handed), since until
// then it may give the lease back or postpone it uncounted.
//
// # Ordered partitions
//
// A topic whose Config.Ordered is set delivers a key's records in order, keys in parallel.
// Keys are learnt by reading, so the caller reserves, reads and binds one partition's records
// one scan at a time (ScanLock), binding each lease to its record's key (Bind, KeyOf); a scan
// may instead read the records from the next fresh offset first and reserve and bind them in
// one step (NextFresh, then ReserveKeyed for one record, ReserveKeyedBatch for a run), holding
// the scan lock only inside that call; and what is due again before the fresh records, whose
// keys the index knows (a key's deferred records as it frees, a nacked or expired record), it
// may reserve and bind in one step and read after (ReserveDueKeyed). A record whose key
// another consume's leases hold, or whose key has a lower record waiting for delivery
// again, is deferred behind the key (its
// lease withdrawn uncounted; none granted to a record read first), neither leased nor visible
// nor counted against the in-flight cap, until the key frees. A lease of a key that
// ends unsettled (nack, expiry, give-back, lapse) queues its record as the key's next, with
// its delay. At most Config.MaxDeferred records wait so (ErrDeferredCap beyond, a stall
// episode counted in Counters.DeferredStalls), besides those a Requeue brought back, which
// queue behind their keys whatever the bound (the quarantine held them already);
// Stats.Keys counts the keys. The index is
// memory only, as leases are, but for one thing: the deferred records of up to MaxKeyTails
// blocked keys are parked inside the acked-ahead runs, so that a key blocked for long splits
// no run, and what is persisted names them by one key tail each (State.KeyTails). A parked
// key keeps at most Config.MaxDeferredPerKey of them as entries and spills the rest, a bit
// each in a bitmap over the offsets they span, bringing them back in order as its entries
// run low: a hot or hung key never brings the partition to MaxDeferred
// (Counters.Spilled, Refilled; Stats.Keys.Spilled). A shard
// restored with key tails learns which records of the runs are the tails' before it serves
// past them: the caller lists them (Unverified), reads them and tells their keys (Verify),
// under ScanLock; a reserve answers ErrUnverified until then. With Config.QuarantineKeys a
// quarantined record takes its key with it: the key's later records follow it into the
// quarantine, in order, until Requeue or Discard empties it of the key's records; a restored
// shard learns the quarantined records' keys the same way (Unverified lists them first).
//
// # Postponed records
//
// A caller that reads a record its host says is not due yet postpones it (Postpone): the
// lease is withdrawn uncounted and the offset waits as a nack's delay does, until the time
// given, with no attempt spent (Counters.Postponed).
//
// # Reservations
//
// A gateway node may read ahead for its consumers: it asks the owner for records before a
// consumer wants them (Shard.ReserveAhead), holds them briefly, and gives back those it does
// not hand over (GiveBack). A reservation is not a delivery: it is granted as any lease is
// (nonce, expiry, fence, and the attempt it will be), but its attempt counts only once a
// consumer gets the record, which Confirm says, or implicitly an Extend, Nack or Reject (an
// Ack resolves it as well). Unconfirmed, it lapses at its expiry uncounted (visible again at
// once, no backoff, no MaxDeliveries quarantine), a GiveBack is uncounted as always, and
// Snapshot leaves its attempt out, so neither a slow gateway nor an owner crash spends a
// record's deliveries. ReserveAhead grants at most half the in-flight room left (one at
// least), so two gateways and the owner's own consumers all get records. A move carries a
// reservation as an ordinary, counted lease. Counters.Reserved and Counters.Unused count
// reservations granted and released unused; Counters.Delivered counts them as confirmed.
//
// # Time and randomness
//
// The package never reads a clock: every method that depends on time takes now, as etcd's
// raft takes ticks, so it is deterministic under test. A lease is live while now < expiry.
// Nonces come from a ChaCha8 stream per shard seeded from crypto/rand (Options.Seed and
// TrackerConfig.Seeds inject seeds in tests; production never derives them from the
// partition, so a handle from before a restart never matches a lease after it).
//
// # Hooks
//
// A shard reports to its caller, always after releasing its lock: Wake (records became
// visible again: a nack, an expiry, the end of a delay; the pump listens), Dirty (the
// persisted state changed; the committer listens), Deadline (a lease expiry or delay end was
// set; a purger sleeping past it wakes), Quarantine and AckedAheadStall (a stall episode at
// the acked-ahead cap began).
//
// # Implementation notes
//
// Expiry uses a queue with lazy deletion rather than an indexed heap: an ack or extend
// leaves the old entry in place, and a popped entry is skipped unless the offset still holds
// a lease with the same nonce and expiry. An ack then costs two lookups in the lease table
// and no reordering, and an extended lease is never evicted by its superseded deadline. Deadlines
// mostly arrive in order (a lease granted later with the same visibility timeout expires
// later), so the queue keeps those in a run, pushed and popped in O(1), and only the others
// (a shorter visibility, an extension, a nack delay) in a min-heap; the earlier head comes
// first. A shard holding thousands of leases acked oldest first then pays no heap sift per
// ack: an ack takes its lease's entry out of the run when it is the run's head, or right
// behind it (with the spent entries of withdrawn leases before it), so that a lease held at
// the head for long, extended now and then, does not leave the entries of every lease
// settled after it to a compaction. The queue is compacted in place when stale entries
// outnumber live ones, so its size stays proportional to the live leases at O(1) amortized
// cost. The heaps are written over
// value slices, without container/heap, whose interface boxes elements: reserve → ack
// allocates nothing.
//
// The lease table keeps each touched offset's state in a ring slot chosen by the offset:
// a partition's leases are granted in offset order and settled near it, so they fill a
// window little wider than the leases held, and a lookup is an index and a comparison. An
// offset whose slot another holds goes to a map beside the ring, which doubles once it is
// over half full when that happens. The entry the map gave last is remembered: a lease held
// below the window for long (a hung holder's) sits at the head of the expiry queue and is
// looked up at every purge.
//
// ReserveNext finds the lowest unresolved offset in O(log n): a cursor marks the lowest
// offset never leased in this incarnation, and the released offsets below it (expired,
// nacked, given back) sit in a second min-heap. Offsets acked ahead before a restart are
// passed by the cursor once, a run in one step.
//
// The acked-ahead set is a treap of maximal runs (a search tree by the run's first offset
// that is also a heap by a random priority, so its depth stays O(log runs) whatever order
// acks arrive in), in an arena of nodes reused as runs come and go. An ack above a gap costs
// O(log runs): it widens the run before or after it in place, or joins two, or starts one;
// the frontier passes a whole run in one step, and a snapshot copies the runs in order. Its
// memory, and what a tick copies for the committer, grow with the runs, never with the
// offsets acked while a hole lasts (up to a visibility timeout, 12 hours at most).
package inflight
