package acklane

import "time"

// Refusal is a field or an op of the node wire that an owner refused, as a release that
// does not read it does: the node leaves it out of what it sends that owner for a while.
type Refusal uint8

// The refusals a lane remembers.
const (
	// AckBatch: the AckBatch op. Batches of one go, each as its single op.
	AckBatch Refusal = iota
	// ConsumeOp: the Consume op itself (consumption across nodes). The owner is neither
	// probed, nor registered with, nor asked to replay.
	ConsumeOp
	// ConsumeClaim: a consume's Claim flag.
	ConsumeClaim
	// ConsumeMax: a consume's Max field.
	ConsumeMax
	// RelativeExpiry: a consume's relative expiries.
	RelativeExpiry
	// Headers: the Headers flag of a consume or a replay; deliveries come without headers.
	Headers
	// OlderSettles: the version 7 settles (Release, ExtendLeft, AckDurable).
	OlderSettles
	// Reject: the version 10 reject.
	Reject
	// Reserve: a consume's Reserve flag (version 11): nothing is read ahead from the owner.
	Reserve
	// LargeBatch: an AckBatch past wire.MaxBatch records (version 13): batches go of
	// MaxBatch at most.
	LargeBatch
	// NackNow: the version 14 nack-now, which goes as a nack with no delay (the owner's
	// backoff applies there).
	NackNow
	// StatusSpilled: a Status's flags byte (version 15): the owner's status replies come
	// without the spilled keys and records.
	StatusSpilled
	// PlainAcks: the version 16 Acks op. Plain acks go in AckBatches.
	PlainAcks
	// RidingAcks: a Consume's Acks flag (version 16). Acks queued for the owner go in
	// frames of their own, not with its reservations.
	RidingAcks
	// CompactDeliveries: a Consume's Compact flag (version 16): its replies come in the
	// form before it.
	CompactDeliveries

	refusals // how many there are
)

// Refuse remembers that the owner refused r, until until. A later refusal replaces an
// earlier one's time.
func (l *Lane[P]) Refuse(r Refusal, until time.Time) {
	l.refused[r].Store(until.UnixNano())
}

// Refuses reports whether the owner's refusal of r still holds at now. It is lock-free: a
// forwarded settle asks on its way out.
func (l *Lane[P]) Refuses(r Refusal, now time.Time) bool {
	until := l.refused[r].Load()
	return until != 0 && now.UnixNano() < until
}
