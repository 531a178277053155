package inflight

import "time"

// Defaults of the per-topic settings (spec, "Consume constants"; DESIGN, "Decisions").
const (
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultMaxInFlight       = 1024
	DefaultMaxAckedAhead     = 1024
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
}

// withDefaults returns c with every zero or negative field replaced by its default.
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
	return c
}
