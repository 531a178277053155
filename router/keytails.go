package router

import (
	"errors"
	"fmt"
	"time"

	"narad.dev/consume/inflight"
)

// verifyBatch is how many records verifyTails reads before it tells the shard their keys.
const verifyBatch = 256

// verifyTails tells an ordered shard restored with key tails (inflight.State.KeyTails: the
// records deferred behind a blocked key, persisted inside the acked-ahead runs) the keys of
// the records those runs hold, reading them, so that it can tell the parked records from the
// acked ones: until then it hands out nothing at or above them. The caller holds the shard's
// scan lock. A record below the log's oldest retained offset, or permanently unreadable, is
// told as keyless: the frontier passes it, as a retention jump or a corrupt skip would. So is
// one at or above the log's high watermark, not read: a state adopted over a log that lost
// its tail (shorter than the one the state was kept over) names records the log no longer
// has, and would otherwise stop the verification there for good, and with it the partition's
// consumes, settles and purges. Any other failure stops the verification where it is and is
// returned; the next scan goes on.
func (n *Node) verifyTails(shard *inflight.Shard, log Log, now time.Time) error {
	var offsets [verifyBatch]int64
	var keys [verifyBatch]uint64
	for shard.Verifying() {
		batch := shard.Unverified(offsets[:0], verifyBatch)
		hwm := log.HighWatermark()
		if hwm < 0 {
			return n.negativeWatermark(shard.Topic(), shard.Partition(), hwm)
		}
		for i, off := range batch {
			if off >= hwm {
				keys[i] = 0 // gone with the log's tail
				continue
			}
			rec, err := log.Read(off)
			switch {
			case err == nil:
				keys[i] = inflight.KeyOf(rec.Key)
			case errors.Is(err, ErrCorrupt), errors.Is(err, ErrNotFound) && off < log.Oldest():
				keys[i] = 0
			default:
				shard.Verify(now, batch[:i], keys[:i])
				return err
			}
		}
		shard.Verify(now, batch, keys[:len(batch)])
	}
	return nil
}

// verifyRestored verifies the key tails a shard was restored with (verifyTails, under its
// scan lock), resolving the partition's log; nothing to verify is nil.
func (n *Node) verifyRestored(shard *inflight.Shard) error {
	if !shard.Verifying() {
		return nil
	}
	log, err := n.getLog(shard.Topic(), shard.Partition())
	if err != nil {
		return err
	}
	shard.ScanLock().Lock()
	defer shard.ScanLock().Unlock()
	return n.verifyTails(shard, log, n.clock.Now())
}

// verifyBeforeSettle verifies the key tails a shard was restored with (and, under
// TopicConfig.QuarantineKeys, learns its quarantined records' keys) before a settle or a
// purge reaches it, so that a settle of a record they may hold answers what the record is
// (settled for good, or a lease gone) rather than a lease gone for both, and so that no
// record is settled unverified: a tail would take it for parked after a restart, and deliver
// an acked record again. A failure (the log's reads) is ErrUnavailable, and the settle is not
// applied: its caller tries again, as after an owner's 503.
func (n *Node) verifyBeforeSettle(shard *inflight.Shard) error {
	if !shard.Verifying() { // (the usual case, no tails, costs one atomic load)
		return nil
	}
	if err := n.verifyRestored(shard); err != nil {
		return fmt.Errorf("%w: %s/%d: the records of its restored key tails cannot be read: %w", ErrUnavailable, shard.Topic(), shard.Partition(), err)
	}
	return nil
}
