package router

import "narad.dev/consume/inflight"

// Quarantined returns the offsets of a partition set aside after reaching the topic's
// TopicConfig.MaxDeliveries, or rejected, ascending (requeued ones waiting for delivery
// excluded). Each stays until Requeue brings it back or Discard settles it for good.
func (n *Node) Quarantined(topic string, partition int32) ([]int64, error) {
	return withLocalShard(n, topic, partition, func(s *inflight.Shard) []int64 { return s.Quarantined() })
}

// Requeue brings a quarantined record back for delivery, with its attempts counted afresh;
// it reports whether offset was quarantined. A parked consumer gets it at once.
func (n *Node) Requeue(topic string, partition int32, offset int64) (bool, error) {
	return withLocalShard(n, topic, partition, func(s *inflight.Shard) bool { return s.Requeue(n.clock.Now(), offset) })
}

// RequeueAll requeues every quarantined record of a partition and returns how many.
func (n *Node) RequeueAll(topic string, partition int32) (int, error) {
	return withLocalShard(n, topic, partition, func(s *inflight.Shard) int { return s.RequeueAll(n.clock.Now()) })
}

// Discard settles a quarantined record for good, as an ack would have: a host that copied it
// to a dead-letter topic (Config.OnQuarantine, or a pass over Quarantined at start) drops it
// from the partition's quarantine, and it is never delivered again. The change is persisted
// as acks are (the committer's next writeout; Persist waits for it). It reports whether
// offset was quarantined: one requeued (waiting for delivery, or leased again), one never
// quarantined or discarded already answers false and changes nothing, as does a partition
// whose ownership grant lapsed. A partition this node does not serve answers as for Requeue
// (ErrNotLocal, ErrUnknownTopic, ...). A copy made before the discard is durable at least
// once: a crash between the two leaves the record quarantined, for the host to copy again.
func (n *Node) Discard(topic string, partition int32, offset int64) (bool, error) {
	return withLocalShard(n, topic, partition, func(s *inflight.Shard) bool { return s.Discard(n.clock.Now(), offset) })
}

// withLocalShard runs op on the shard of a partition this node serves, inside the node's
// fence: ErrClosed after Close, and localShard's errors for a partition not served here.
func withLocalShard[T any](n *Node, topic string, partition int32, op func(*inflight.Shard) T) (T, error) {
	var zero T
	if !n.life.fence.enter() {
		return zero, ErrClosed
	}
	defer n.life.fence.leave()
	if err := checkPartition(partition); err != nil {
		return zero, err
	}
	shard, err := n.localShard(topic, partition)
	if err != nil {
		return zero, err
	}
	// A restored ordered shard learns its records' keys first (key tails, quarantined
	// keys): a discard of a record a tail may cover would be taken for a parked one after a
	// restart.
	if err := n.verifyBeforeSettle(shard); err != nil {
		return zero, err
	}
	return op(shard), nil
}
