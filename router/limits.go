package router

import (
	"time"

	"narad.dev/consume/inflight"
)

// The bounds of what a caller may ask of a node. A request past one is refused with
// ErrInvalidArgument and changes nothing; none is allocated for by what the caller asks.
const (
	// MaxBatch is the most records one consume may ask for (ConsumeOptions.Max).
	MaxBatch = 1000
	// MaxWait is the longest a consume may wait for a record (ConsumeOptions.Wait).
	MaxWait = 24 * time.Hour
	// MaxVisibility is the longest visibility timeout a consume or an extend may ask for.
	MaxVisibility = inflight.MaxVisibility
	// MaxDelay is the longest delay a nack may ask for.
	MaxDelay = inflight.MaxDelay
	// MaxTopicLength is the longest topic name, in bytes, that a node accepts at every entry
	// point; every valid name maps to a state directory whose name fits any file system.
	MaxTopicLength = 249
)
