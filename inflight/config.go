package inflight

import "time"

// Defaults of the per-topic settings.
const (
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultMaxInFlight       = 1024
	DefaultMaxAckedAhead     = 1024
)

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
// The zero value means the defaults.
type Config struct {
	// VisibilityTimeout is how long a lease lasts unless extended, and the default length
	// of an extension. Zero means DefaultVisibilityTimeout.
	VisibilityTimeout time.Duration
	// MaxInFlight is the in-flight cap: the most live leases a partition holds. At the cap
	// ReserveNext answers ErrInFlightCap. Zero means DefaultMaxInFlight.
	MaxInFlight int
	// MaxAckedAhead is max_acked_ahead_per_partition: once the acked-ahead set holds this
	// many offsets, ReserveNext hands out only the frontier hole until the gap closes. Acks
	// of leases already handed out are still accepted, so the set is bounded by
	// MaxInFlight + MaxAckedAhead. Zero means DefaultMaxAckedAhead.
	MaxAckedAhead int

	// MaxDeliveries quarantines a record whose lease ended unsettled (expired or nacked)
	// after this many deliveries: the frontier passes over it, it is kept in the
	// partition's persisted quarantine set and reported through Hooks.Quarantine, until
	// Requeue brings it back. Zero means unlimited: one poison
	// record is then delivered again forever and holds the frontier.
	MaxDeliveries int
	// Backoff delays the redelivery of a record whose lease expired, or that was nacked
	// without a delay of its own. The zero value redelivers at once.
	Backoff Backoff
	// MaxExtension caps one Extend; zero means no cap.
	MaxExtension time.Duration
	// MaxLeaseLifetime caps how long one lease can be extended to last, counted from its
	// grant (SQS caps it at 12 hours); zero means no cap.
	MaxLeaseLifetime time.Duration
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
	if c.MaxAckedAhead <= 0 {
		c.MaxAckedAhead = DefaultMaxAckedAhead
	}
	c.VisibilityTimeout = min(c.VisibilityTimeout, MaxVisibility)
	c.MaxExtension = min(c.MaxExtension, MaxVisibility)
	c.MaxLeaseLifetime = min(c.MaxLeaseLifetime, MaxLeaseLifetimeCap)
	return c
}
