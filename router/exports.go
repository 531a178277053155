package router

import (
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/offsets"
	"narad.dev/consume/pump"
)

// The names a host needs from the packages the node is built of, so that a host imports
// router (and router/routertest in its tests) and nothing else. Each is the same value or
// type as the original: errors.Is and type identity hold whichever name a caller uses.

// Errors Ack, Extend, Nack, AckBatch and AckDurable answer about a receipt handle.
var (
	// ErrGone: the handle names no live lease (it expired, a newer lease superseded it, it
	// was nacked, or it was never issued). The call changed nothing; HTTPStatus answers 410.
	ErrGone = inflight.ErrGone
	// ErrAlreadySettled: the handle's offset is settled already. Nothing changed. It matches
	// ErrGone, and HTTPStatus answers it 410 as it does ErrGone; an in-process caller tells
	// the retry of an ack whose reply was lost apart by it (errors.Is), and may take it as
	// success.
	ErrAlreadySettled = inflight.ErrAlreadySettled
	// ErrMalformedHandle: the text is not a receipt handle String produced (a 400).
	ErrMalformedHandle = inflight.ErrMalformedHandle
)

// Errors AckDurable and Persist answer when the ack state cannot be made durable. Both come
// wrapped (errors.Is); the ack itself was applied in memory.
var (
	// ErrShardGone: the partition was dropped (DropPartition, DeleteTopic) before its
	// state was written out.
	ErrShardGone = offsets.ErrShardGone
	// ErrStranded: the partition's directory was removed or replaced underneath the node;
	// nothing is written for it until DropPartition.
	ErrStranded = offsets.ErrStranded
)

// ErrTopicDropped is what a consume parked on a topic answers when DeleteTopic drops the
// topic under it.
var ErrTopicDropped = pump.ErrTopicDropped

// Handle is a receipt handle, partition:offset:nonce in text (Message.Receipt). It names one
// lease: a handle that was not handed out cannot be guessed, and an old handle never matches
// a newer lease of the same offset. It does not name its topic; the request carrying it does.
type Handle = inflight.Handle

// ParseHandle parses the text form of a receipt handle: exactly what Handle.String produces.
// Anything else answers ErrMalformedHandle; it never panics. The settles (Ack, Extend, Nack,
// ...) take the Handle itself: an in-process consumer passes Message.Receipt as it came, and
// only a host that carries handles as text (an HTTP or SQS front end) formats and parses them.
func ParseHandle(s string) (Handle, error) { return inflight.ParseHandle(s) }

// Reason says why a record is delivered (Message.Reason).
type Reason = inflight.Reason

// The reasons of a delivery.
const (
	ReasonFirst    = inflight.ReasonFirst    // never delivered before, as far as the node knows
	ReasonExpired  = inflight.ReasonExpired  // the previous lease expired
	ReasonNacked   = inflight.ReasonNacked   // the previous holder nacked it
	ReasonRestart  = inflight.ReasonRestart  // delivered before the node restarted
	ReasonRequeued = inflight.ReasonRequeued // quarantined, then requeued
)

// Backoff is TopicConfig.Backoff, the redelivery delay after an expiry or a nack without a
// delay of its own (not after a NackNow): a list of delays, or an exponential one with a
// cap, either with jitter. The zero value means no delay.
type Backoff = inflight.Backoff

// The defaults of TopicConfig's zero fields.
const (
	DefaultVisibilityTimeout time.Duration = inflight.DefaultVisibilityTimeout
	DefaultMaxInFlight                     = inflight.DefaultMaxInFlight
	DefaultMaxAckedAhead                   = inflight.DefaultMaxAckedAhead
	DefaultMaxAckedAheadRuns               = inflight.DefaultMaxAckedAheadRuns
)

// MaxAckedAheadCeiling is the most offsets TopicConfig.MaxAckedAhead can allow: what one
// persisted record holds of a partition's acked-ahead set.
const MaxAckedAheadCeiling = inflight.MaxAckedAheadCeiling

// ShardCounters is Stats.Shards: what the partitions' shards did (leases granted, acks,
// expiries, records skipped as corrupt, ...).
type ShardCounters = inflight.CounterValues

// KeyStats is PartitionStatus.Keys: an ordered partition's keys.
type KeyStats = inflight.KeyStats

// CommitterStats is Stats.Committer: the counters and gauges of the ack state's writes.
type CommitterStats = offsets.Stats
