package inflight

import "errors"

// Errors returned by a Shard and by ParseHandle. Test them with errors.Is.
var (
	// ErrGone is a 410 Gone: the handle names no live lease (it expired, was
	// superseded by a newer lease on the same offset, was nacked, or was never issued). The
	// call changed nothing.
	ErrGone = errors.New("inflight: lease gone")

	// ErrAlreadySettled answers an ack, extend or nack of an offset that is already settled:
	// at or below the committed frontier, or acked ahead of it. Nothing changed. The handle
	// names no live lease, so it matches ErrGone too (a 410, as for any other handle that is
	// not the live lease's); an in-process caller that needs to tell a repeated ack apart
	// tests for it first.
	ErrAlreadySettled error = settledError{}

	// ErrInvalidDuration answers a visibility or an extension that is negative or above
	// MaxVisibility, and a nack delay that is negative or above MaxDelay. Nothing changed.
	ErrInvalidDuration = errors.New("inflight: duration negative or above its maximum")

	// ErrMoved answers a settle of a shard that was handed off (Shard.HandOff): the
	// partition moved, the lease (if it was live) moved with it to the next owner, and
	// nothing changed here. Ask the partition's owner now.
	ErrMoved = errors.New("inflight: partition moved to another owner")

	// ErrMalformedHandle is returned by ParseHandle for anything that is not a canonical
	// partition:offset:nonce handle. It is a client error (400), distinct from ErrGone.
	ErrMalformedHandle = errors.New("inflight: malformed receipt handle")
)

// settledError is ErrAlreadySettled: an ErrGone that says why.
type settledError struct{}

func (settledError) Error() string        { return "inflight: lease gone: offset already settled" }
func (settledError) Is(target error) bool { return target == ErrGone }

// Outcomes of ReserveNext that hand out nothing. Each is a 204 to a consumer; they are kept
// apart so that a host (and the quiet-partition troubleshooting) can tell why.
var (
	// ErrEmpty: no offset above the frontier is below the high watermark. Nothing is there.
	ErrEmpty = errors.New("inflight: nothing to deliver")

	// ErrAllReserved: offsets exist above the frontier but every one of them is leased,
	// settled, skipped or delayed by a nack (the all_reserved of "Quiet partitions after an
	// outage").
	ErrAllReserved = errors.New("inflight: all offsets reserved")

	// ErrInFlightCap: the partition holds as many live leases as its in-flight cap allows.
	ErrInFlightCap = errors.New("inflight: in-flight cap reached")

	// ErrAckedAheadCap: the acked-ahead set is at its cap (Config.MaxAckedAheadRuns runs, or
	// MaxAckedAhead offsets) and the frontier hole, the only offset handed out in that state,
	// is leased or delayed.
	ErrAckedAheadCap = errors.New("inflight: acked-ahead cap reached")

	// ErrDeferredCap: an ordered partition holds Config.MaxDeferred records deferred behind
	// their keys, and every record it read already is leased or waiting.
	ErrDeferredCap = errors.New("inflight: deferred cap reached")

	// ErrUnverified: the shard was restored with key tails (State.KeyTails) whose records its
	// scans have not verified yet (Unverified, Verify), and every record below them is leased
	// or waiting.
	ErrUnverified = errors.New("inflight: restored key tails not verified")
)

// Answers of ReserveKeyed (and ReserveKeyedBatch: ErrNotNext) that hand out nothing.
var (
	// ErrNotNext: the offset is not the one the shard's next reserve takes now (another
	// record is due before it, the cursor moved, the shard verifies restored key tails, or
	// a cap is reached), or another scan of the partition holds ScanLock. Nothing changed:
	// reserve, read and bind under ScanLock instead.
	ErrNotNext = errors.New("inflight: not the next fresh offset")

	// ErrBehindKey: the record is behind its key, so it was deferred (or quarantined after a
	// lower record of its key, under Config.QuarantineKeys) as Bind defers a lease it
	// withdraws, with no lease granted. The cursor passed it: the next fresh offset is the one
	// after.
	ErrBehindKey = errors.New("inflight: record deferred behind its key")
)
