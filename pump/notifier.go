package pump

// The wake notifier. The host's produce path calls it on every high-watermark advance, so its
// waiter-less case is one lock-free map read and one atomic load: no lock, no allocation.
//
// The race to avoid: while the pump holds a waiter it popped, the topic can look
// waiter-less, a wake arriving then is dropped, and the waiter, put back, waits for a record that
// has already landed. Here the held waiter stays in topic.live until it is handed a result or
// leaves, so the notifier never sees the topic empty while the pump takes a record for someone;
// and the pump clears a FIFO's dirty flag before it calls Source.Take, so a wake that lands during
// Take marks the FIFO again and reschedules the topic, and the pump runs it again right after it
// puts the waiter back. A wake dropped because live was zero is covered by the join: a waiter that
// finds no live waiter ahead of it kicks a pass for itself, which calls Take after the wake's
// record landed.

// Notify tells the pump that records of topic may have become available (a high-watermark
// advance, a nack, a lease expiry, a close, a partition this node gained). When the topic has no
// parked waiter it returns at once, allocating nothing; otherwise it makes a pass over all the
// topic's FIFOs due and kicks the pump. Many calls before that pass cost one atomic swap each.
//
// Notify does not wait for the pump (with waiters parked it takes a short lock to queue the
// topic), and is safe for concurrent use from any goroutine, Source.Take and Source.Release
// included.
func (p *Pump[M]) Notify(topic string) {
	if t := p.waited(topic); t != nil {
		t.wakeAll(p)
	}
}

// waited returns the queue state of topic if a waiter is parked on it: one lock-free map
// read and one atomic load, no allocation.
func (p *Pump[M]) waited(topic string) *topicQueue[M] {
	v, ok := p.topics.Load(topic)
	if !ok {
		return nil
	}
	if t := v.(*topicQueue[M]); t.live.Load() > 0 {
		return t
	}
	return nil
}

// NotifyPartition is the finer wake for records that became available on one partition: it makes
// a pass due over that partition's pinned FIFO and over the topic's shared FIFO, and leaves the
// other partitions' pinned waiters alone. The waiter-less case costs what Notify's does.
func (p *Pump[M]) NotifyPartition(topic string, partition int32) {
	t := p.waited(topic)
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	due := false
	if f := t.pinned[partition]; f != nil && (f.n > 0 || f.held) {
		due = t.markDirty(f)
	}
	if f := &t.shared; f.n > 0 || f.held {
		due = t.markDirty(f) || due
	}
	if due {
		p.schedule(t)
	}
}

// wakeAll asks for a pass over every FIFO of t; the pass itself marks them (Pump.pumpTopic).
func (t *topicQueue[M]) wakeAll(p *Pump[M]) {
	if !t.all.Swap(true) {
		p.schedule(t)
	}
}

// schedule puts t on the pump's list of topics due a pass, once, and kicks the pump without
// blocking. It may be called with t.mu held (the lock order is topic, then pump).
func (p *Pump[M]) schedule(t *topicQueue[M]) {
	p.mu.Lock()
	if !t.scheduled {
		t.scheduled = true
		p.pending = append(p.pending, t)
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}
