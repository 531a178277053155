package router

import (
	"context"
	"errors"
	"fmt"

	"narad.dev/consume/inflight"
)

// PurgePartition settles every record of a partition this node serves below its log's high
// watermark at the call, as if each had been acked (SQS's PurgeQueue, say), and returns once
// that is durable (the committer's next writeout, group-committed as AckDurable's): a purge
// that returned is undone by no crash or power cut. The leases of the records it settles end
// (their handles answer ErrAlreadySettled), and so do their delays, deferrals behind keys and
// quarantine; records appended after the call's read of the high watermark are delivered as
// usual. It returns how many offsets the frontier moved over.
//
// A partition this node does not serve answers as Requeue does (ErrNotLocal, ErrUnknownTopic,
// ...), one whose ownership grant has lapsed and cannot be renewed ErrMoved, changing nothing.
// On an ordered topic whose restored key tails are not verified yet, it reads their records
// first, as a settle does: a log that cannot be read answers ErrUnavailable, changing nothing.
// If ctx ends before the purge is durable, the purge stands in memory and is durable at the
// committer's pace: PurgePartition may be called again.
func (n *Node) PurgePartition(ctx context.Context, topic string, partition int32) (int64, error) {
	if !n.life.fence.enter() {
		return 0, ErrClosed
	}
	defer n.life.fence.leave()
	if err := checkPartition(partition); err != nil {
		return 0, err
	}
	moved, err := n.settleBelowWatermark(topic, partition)
	if err != nil {
		return 0, err
	}
	return moved, n.committer.Durable(ctx, topic, partition)
}

// settleBelowWatermark is PurgePartition up to its wait for the disk: every record of the
// partition below its log's high watermark settled in memory, the number of offsets the
// frontier moved over returned. A caller inside the node's fence then waits for the
// committer (PurgePartition at once; a purge of many partitions once all are settled, so
// that one writeout carries them).
func (n *Node) settleBelowWatermark(topic string, partition int32) (int64, error) {
	shard, err := n.localShard(topic, partition)
	if err != nil {
		return 0, err
	}
	log, err := n.getLog(topic, partition)
	if err != nil {
		return 0, err
	}
	// (A shard restored with key tails refuses a purge that passes some of the records to
	// verify and leaves others: verified first, as for a settle.)
	if err := n.verifyBeforeSettle(shard); err != nil {
		return 0, err
	}
	hwm := log.HighWatermark()
	if hwm < 0 {
		return 0, n.negativeWatermark(topic, partition, hwm)
	}
	now := n.clock.Now()
	moved, err := shard.SettleBelow(now, hwm)
	if n.lapsedRetry(shard, now, err) {
		moved, err = shard.SettleBelow(now, hwm)
	}
	if err != nil {
		return 0, fmt.Errorf("router: purge %s/%d: %w", topic, partition, err)
	}
	n.wake(topic, partition)
	return moved, nil
}

// Purge is PurgePartition for every partition of topic this node serves, in turn, and returns
// the offsets their frontiers moved over in all. The partitions other nodes own are theirs
// to purge: PurgeQueue purges the whole topic, asking each owner; a host may instead call
// Purge on each owner. It stops at the first partition that fails (what it purged before
// stands).
func (n *Node) Purge(ctx context.Context, topic string) (int64, error) {
	if err := checkTopic(topic); err != nil {
		return 0, err
	}
	local, _, known := n.routes.Partitions(topic)
	if !known {
		return 0, ErrUnknownTopic
	}
	var total int64
	for _, p := range local {
		moved, err := n.PurgePartition(ctx, topic, p)
		total += moved
		if err != nil && !errors.Is(err, inflight.ErrGone) {
			return total, err
		}
	}
	return total, nil
}
