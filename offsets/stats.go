package offsets

import "sync/atomic"

// Stats are the committer's counters, for a host to export. Counters only grow; Descriptors
// and StrandedNow are gauges.
type Stats struct {
	Ticks  uint64 // ticks run (Close's final pass included)
	Primes uint64 // partitions primed
	// BlankPrimes counts primes of partitions whose directory held no state: they take
	// windows at once, and their first writeout makes their files' entries durable.
	BlankPrimes   uint64
	Windows       uint64 // window records written into the page cache
	Writeouts     uint64 // successful writeouts (anchor and window flipped)
	Levels        uint64 // consumer.offset files brought level
	WriteFailures uint64 // failed window writes (the next tick rewrites the window)
	SyncFailures  uint64 // failed SyncData, directory sync or device flush
	Evictions     uint64 // held descriptors closed to stay under the cap
	OneShotWrites uint64 // descriptors opened for one tick only, the cap being full of non-durable windows
	Reopens       uint64 // descriptors reopened by path after an eviction
	Stranded      uint64 // partitions stranded (directory removed or replaced)
	DroppedAhead  uint64 // acked-ahead offsets left out of records for lack of room
	// DroppedRequeued, DroppedQuarantine and DroppedAttempts count the other sets' entries left
	// out for lack of room (see Overflow for the order the sets take the room in).
	DroppedRequeued   uint64
	DroppedQuarantine uint64
	DroppedAttempts   uint64
	Durables          uint64 // Durable waits answered by a writeout (nil)
	EarlyWriteouts    uint64 // writeouts made before their turn because a Durable waited
	Overruns          uint64 // ticks that took longer than the tick period (priming ticks excluded)
	LateWriteouts     uint64 // ticks that found writes waiting more than twice the durability interval
	Clamps            uint64 // recovered frontiers at or above the high watermark, clamped or dropped
	IgnoredFiles      uint64 // loads that ignored a damaged or foreign state file, or an unusable consumer.ahead
	// SlowWriteouts counts writeout batches (syncs, device flushes, levellings) still running
	// when the next tick came, under Run: durability against power loss lagged by their
	// duration, while page-cache windows kept their cadence.
	SlowWriteouts uint64
	// WrittenToSpareSlots counts window writes made while a sync of the partition's window
	// was in flight: into the spare slot, so that the page cache kept its cadence and the
	// sync could still flip.
	WrittenToSpareSlots uint64
	// SlowPrimes counts partitions whose first window waited more than one tick for its prime
	// (under Run, a prime runs in the pool and the window follows on the next tick).
	SlowPrimes uint64
	// DeferredWrites counts window writes put off to the next tick because no descriptor
	// could be opened under the cap.
	DeferredWrites uint64
	Descriptors    int64 // consumer.ahead descriptors held now
	// OpenDescriptors counts every descriptor the committer has open now: held, one-shot, of
	// primes and levellings, and directory roots. It never exceeds the cap.
	OpenDescriptors int64
	StrandedNow     int64 // partitions stranded now (until their Forget)
}

type counters struct {
	ticks, primes, windows, writeouts, levels       atomic.Uint64
	writeFailures, syncFailures                     atomic.Uint64
	evictions, oneShots, reopens, stranded, dropped atomic.Uint64
	droppedRequeued, droppedQuarantine              atomic.Uint64
	droppedAttempts, durables, earlyWriteouts       atomic.Uint64
	overruns, lateWriteouts, clamps, ignoredFiles   atomic.Uint64
	slowWriteouts, writtenToSpare                   atomic.Uint64
	slowPrimes, deferred, blankPrimes               atomic.Uint64
	descriptors, strandedNow                        atomic.Int64
}

// Stats returns a snapshot of the counters. It is safe to call at any time.
func (c *Committer) Stats() Stats {
	s := &c.stats
	return Stats{
		Ticks: s.ticks.Load(), Primes: s.primes.Load(), BlankPrimes: s.blankPrimes.Load(), Windows: s.windows.Load(),
		Writeouts: s.writeouts.Load(), Levels: s.levels.Load(),
		WriteFailures: s.writeFailures.Load(), SyncFailures: s.syncFailures.Load(),
		Evictions: s.evictions.Load(), OneShotWrites: s.oneShots.Load(), Reopens: s.reopens.Load(),
		Stranded: s.stranded.Load(), DroppedAhead: s.dropped.Load(),
		DroppedRequeued: s.droppedRequeued.Load(), DroppedQuarantine: s.droppedQuarantine.Load(),
		DroppedAttempts: s.droppedAttempts.Load(), Durables: s.durables.Load(), EarlyWriteouts: s.earlyWriteouts.Load(),
		Overruns: s.overruns.Load(), LateWriteouts: s.lateWriteouts.Load(), Clamps: s.clamps.Load(),
		IgnoredFiles:  s.ignoredFiles.Load(),
		SlowWriteouts: s.slowWriteouts.Load(), WrittenToSpareSlots: s.writtenToSpare.Load(),
		SlowPrimes: s.slowPrimes.Load(), DeferredWrites: s.deferred.Load(),
		Descriptors: s.descriptors.Load(), OpenDescriptors: c.fds.Load(), StrandedNow: s.strandedNow.Load(),
	}
}
