package inflight

import "time"

// Defaults of the per-topic settings.
const (
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultMaxInFlight       = 1024
	// DefaultMaxAckedAheadRuns is sized to what one 4 KiB consumer.ahead slot holds beside
	// the other sets: a run costs 2 bytes of it when the gap below it and its length are
	// both under 128, 3 when they are under 16,384, so 1,000 runs take at most about 3,000
	// of the slot's 4,060 bytes of sections, and leave over 1,000 for the requeued and
	// quarantined offsets (a few poison records; about 500 scattered ones fit), the
	// incarnation and an ordered topic's key tails (at most 579 bytes for MaxKeyTails, which
	// leave room for about 200 scattered quarantined offsets beside 1,000 runs). Delivery
	// attempts, which count afresh when left out, take what is left.
	DefaultMaxAckedAheadRuns = 1000
	// DefaultMaxAckedAhead is the hard ceiling: no cap on the offsets below it.
	DefaultMaxAckedAhead = MaxAckedAheadCeiling
)

// MaxAckedAheadCeiling is the most offsets MaxAckedAhead can allow: what one persisted
// record holds of the acked-ahead set (offsets.MaxAheadOffsets; a decoder, an older
// release's included, refuses a record with more). A larger MaxAckedAhead means this.
const MaxAckedAheadCeiling = 1 << 20

// Bounds of the durations a lease takes. They keep every deadline far inside the range of
// time (no expiry wraps into the past), and they are what a caller may ask for: Extend and
// ReserveNextFor refuse a longer or negative visibility, and Nack a longer or negative
// delay, with ErrInvalidDuration; a topic's settings and backoff are capped at them.
const (
	// MaxVisibility is the longest visibility timeout and the longest single extension
	// (as SQS's 12 hours).
	MaxVisibility = 12 * time.Hour
	// MaxDelay is the longest redelivery delay: a nack's, or one of Backoff's.
	MaxDelay = 12 * time.Hour
	// MaxLeaseLifetimeCap is the largest MaxLeaseLifetime a topic can set.
	MaxLeaseLifetimeCap = 365 * 24 * time.Hour
)

// Config holds a topic's settings. They are configured per topic and enforced per partition.
// The zero value means the defaults. A negative count or duration is taken as zero (what a
// field's zero means), but for ReadAhead, where negative turns reading ahead off.
type Config struct {
	// VisibilityTimeout is how long a lease lasts unless extended, and the default length
	// of an extension. Zero means DefaultVisibilityTimeout.
	VisibilityTimeout time.Duration
	// MaxInFlight is the in-flight cap: the most live leases a partition holds. At the cap
	// ReserveNext answers ErrInFlightCap. Zero means DefaultMaxInFlight.
	MaxInFlight int
	// MaxAckedAheadRuns is the acked-ahead cap (max_acked_ahead_per_partition), counted in
	// what the persisted state must hold: runs of consecutive offsets acked above the
	// frontier, about one per hole (an unsettled offset) below an ack, however many offsets
	// each run holds. Once the set holds this many runs, ReserveNext hands out only the
	// frontier hole until the gap closes and the set drains below the cap (a stall episode:
	// Hooks.AckedAheadStall, Counters.AckedAheadStalls). Acks of leases already handed out
	// are still accepted, and each adds at most one run, so the set holds at most
	// MaxInFlight + MaxAckedAheadRuns runs. Zero means DefaultMaxAckedAheadRuns.
	MaxAckedAheadRuns int
	// MaxAckedAhead caps the offsets of the acked-ahead set, whatever their runs: once it
	// holds this many, only the frontier hole is handed out, as at MaxAckedAheadRuns. Zero,
	// or a value above MaxAckedAheadCeiling, means MaxAckedAheadCeiling. Releases before the
	// run cap capped only this, at 1024 by default; a topic that set it keeps that bound.
	MaxAckedAhead int

	// MaxDeliveries quarantines a record whose lease ended unsettled (expired or nacked)
	// after this many deliveries: the frontier passes over it, it is kept in the
	// partition's persisted quarantine set and reported through Hooks.Quarantine, until
	// Requeue brings it back or Discard settles it for good. Zero means unlimited: one poison
	// record is then delivered again forever and holds the frontier.
	MaxDeliveries int
	// Backoff delays the redelivery of a record whose lease expired, or that was nacked
	// without a delay of its own (but not one nacked with NackNow). The zero value
	// redelivers at once.
	Backoff Backoff
	// MaxExtension caps one Extend; zero means no cap.
	MaxExtension time.Duration
	// MaxLeaseLifetime caps how long one lease can be extended to last, counted from its
	// grant (SQS caps it at 12 hours); zero means no cap.
	MaxLeaseLifetime time.Duration

	// Ordered delivers the records of one key in order, keys in parallel (see Shard.Bind):
	// at most one consumer holds records of a key at a time, a record delivered again goes
	// before every later record of its key, and a blocked key blocks only itself. Records
	// without a key are not ordered.
	Ordered bool
	// QuarantineKeys, on an ordered topic, quarantines a record's key with it: once a record
	// is quarantined (MaxDeliveries, Reject), every later record of its key follows it into
	// the quarantine, in order, as the scan reads it or as its wait or lease ends, rather
	// than be delivered (Hooks.Quarantine reports each; a record never delivered reports 0
	// attempts; a record the head's holder still leases is reported when its lease ends,
	// after the key's waiting records), so that the frontier passes them and the key's order
	// holds. The key stays
	// quarantined while any record of it is there: Requeue brings its records back in order
	// (a requeued record goes before the key's later ones; one requeued while a lower one
	// stays quarantined is delivered, and quarantined again if it fails), Discard lets them
	// go, and once none is left the key's new records are delivered again. Unset, the
	// quarantined record's key goes on with its next record (order knowingly broken, as a
	// dead-letter queue does). A shard restored with quarantined records reads them for
	// their keys before it hands out anything (Shard.Verifying).
	QuarantineKeys bool
	// MaxDeferred bounds the records an ordered partition keeps read and waiting behind
	// their keys. At the bound it hands out no new record (ErrDeferredCap), only those
	// already read, until keys free (a stall episode, counted in Counters.DeferredStalls).
	// Records a Requeue brings back queue behind their keys whatever the bound (the
	// quarantine held them already), and count until they are delivered.
	// Zero means DefaultMaxDeferred.
	MaxDeferred int
	// MaxDeferredPerKey bounds the deferred records one parked key (see MaxKeyTails) keeps
	// as entries (about 70 bytes each, counted against MaxDeferred): the later ones are
	// spilled, kept as one bit each in a bitmap over the offsets they span, and come back
	// as entries, in order, once fewer than half the bound are left (all of them at once,
	// whatever MaxDeferred, when a Discard settles a record of the partition above them:
	// a key tail below it would take it for parked after a restart). So a hot or hung key
	// never stops the other keys at MaxDeferred: the MaxKeyTails keys that can park take at
	// most half of it by default. Zero means MaxDeferred/64, at least 16.
	MaxDeferredPerKey int

	// ReadAhead is the most records a node reserves at the owners of the topic's partitions
	// ahead of its consumers (package router reads it; a shard does not): zero means
	// router.DefaultReadAhead, a negative value (router.ReadAheadOff) turns reading ahead
	// off for the topic, so that each consume that crosses nodes asks the owners itself.
	ReadAhead int
}

// withDefaults returns c with every zero or negative field replaced by its default, and its
// durations capped at MaxVisibility and MaxLeaseLifetimeCap.
func (c Config) withDefaults() Config {
	if c.VisibilityTimeout <= 0 {
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxAckedAheadRuns <= 0 {
		c.MaxAckedAheadRuns = DefaultMaxAckedAheadRuns
	}
	if c.MaxDeferred <= 0 {
		c.MaxDeferred = DefaultMaxDeferred
	}
	if c.MaxDeferredPerKey <= 0 {
		c.MaxDeferredPerKey = max(c.MaxDeferred/(2*MaxKeyTails), 16)
	}
	if c.MaxAckedAhead <= 0 || c.MaxAckedAhead > MaxAckedAheadCeiling {
		c.MaxAckedAhead = MaxAckedAheadCeiling
	}
	c.VisibilityTimeout = min(c.VisibilityTimeout, MaxVisibility)
	c.MaxExtension = min(c.MaxExtension, MaxVisibility)
	c.MaxLeaseLifetime = min(c.MaxLeaseLifetime, MaxLeaseLifetimeCap)
	return c
}
