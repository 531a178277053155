package router

// Quarantined returns the offsets of a partition set aside after reaching the topic's
// TopicConfig.MaxDeliveries, ascending (requeued ones waiting for delivery excluded).
func (n *Node) Quarantined(topic string, partition int32) ([]int64, error) {
	if !n.life.fence.enter() {
		return nil, ErrClosed
	}
	defer n.life.fence.leave()
	shard, err := n.localShard(topic, partition)
	if err != nil {
		return nil, err
	}
	return shard.Quarantined(), nil
}

// Requeue brings a quarantined record back for delivery, with its attempts counted afresh;
// it reports whether offset was quarantined. A parked consumer gets it at once.
func (n *Node) Requeue(topic string, partition int32, offset int64) (bool, error) {
	if !n.life.fence.enter() {
		return false, ErrClosed
	}
	defer n.life.fence.leave()
	shard, err := n.localShard(topic, partition)
	if err != nil {
		return false, err
	}
	return shard.Requeue(n.clock.Now(), offset), nil
}

// RequeueAll requeues every quarantined record of a partition and returns how many.
func (n *Node) RequeueAll(topic string, partition int32) (int, error) {
	if !n.life.fence.enter() {
		return 0, ErrClosed
	}
	defer n.life.fence.leave()
	shard, err := n.localShard(topic, partition)
	if err != nil {
		return 0, err
	}
	return shard.RequeueAll(n.clock.Now()), nil
}
