package inflight

// deadlineQueue holds a shard's deadlines, earliest first. Most arrive in order: a lease
// granted now expires one visibility timeout later, after every lease granted before it with
// the same timeout. Those form a run kept in arrival order, pushed and popped in O(1); only a
// deadline earlier than the run's last (a shorter visibility, an extension, a nack delay)
// goes to a heap. The earlier of the run's head and the heap's top comes first. A shard that
// acks its leases in the order it granted them, as a batch consumer or a forwarding owner
// does, so pops each stale entry without sifting a heap of every lease it holds.
type deadlineQueue struct {
	run     []deadline // run[runHead:] in order of at
	runHead int
	heap    minHeap[deadline]
}

// len returns how many deadlines the queue holds, stale ones included.
func (q *deadlineQueue) len() int { return len(q.run) - q.runHead + len(q.heap) }

// push adds d.
func (q *deadlineQueue) push(d deadline) {
	switch n := len(q.run); {
	case n == q.runHead: // the run is empty: start it again at the front
		q.run, q.runHead = append(q.run[:0], d), 0
	case q.run[n-1].at <= d.at:
		q.run = append(q.run, d)
	default:
		q.heap.push(d)
	}
}

// first returns the earliest deadline; ok is false when the queue is empty.
func (q *deadlineQueue) first() (d deadline, ok bool) {
	if q.fromRun() {
		return q.run[q.runHead], true
	}
	if len(q.heap) > 0 {
		return q.heap[0], true
	}
	return deadline{}, false
}

// pop removes and returns the earliest deadline. The queue must not be empty.
func (q *deadlineQueue) pop() deadline {
	if !q.fromRun() {
		return q.heap.pop()
	}
	d := q.run[q.runHead]
	q.runHead++
	if q.runHead == len(q.run) {
		q.run, q.runHead = q.run[:0], 0
	} else if q.runHead >= 1024 && 2*q.runHead >= len(q.run) {
		// A run that never empties moves down once half of it is spent, so that its
		// backing array stays proportional to what it holds.
		q.run = q.run[:copy(q.run, q.run[q.runHead:])]
		q.runHead = 0
	}
	return d
}

// fromRun reports whether the earliest deadline is the run's head.
func (q *deadlineQueue) fromRun() bool {
	return q.runHead < len(q.run) && (len(q.heap) == 0 || q.run[q.runHead].at <= q.heap[0].at)
}

// retain keeps only the deadlines for which keep reports true.
func (q *deadlineQueue) retain(keep func(deadline) bool) {
	kept := q.run[:0]
	for _, d := range q.run[q.runHead:] {
		if keep(d) {
			kept = append(kept, d)
		}
	}
	q.run, q.runHead = kept, 0
	q.heap.retain(keep)
}

// reset empties the queue, keeping its storage.
func (q *deadlineQueue) reset() {
	q.run, q.runHead = q.run[:0], 0
	q.heap = q.heap[:0]
}
