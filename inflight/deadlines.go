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
	// hops counts the settles since the run's head was last settled that found their
	// deadlines behind it (see dropHeadOf).
	hops int
}

// headHops is how many settles in a row may find their deadlines behind the run's head
// before dropHeadOf moves the head to the heap.
const headHops = 64

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
	return q.popRun()
}

// dropStale pops the deadlines live refuses off the run's head and off the heap's top, the
// later of the two included (a live deadline in the heap, earlier than the run's, does not
// keep the run's spent head).
func (q *deadlineQueue) dropStale(live func(deadline) bool) {
	for q.runHead < len(q.run) && !live(q.run[q.runHead]) {
		q.popRun()
	}
	for len(q.heap) > 0 && !live(q.heap[0]) {
		q.heap.pop()
	}
}

// dropHeadOf drops the deadlines of off, an offset being settled (every deadline of it is
// spent), from the run's head or from right behind it, or else the heap's top. Behind the
// head: a lease held for long and extended now and then (a hung holder) sits at the run's
// head, live, while the leases granted after it are settled in the order they were granted;
// each of them takes its entry out from behind the head, with the spent ones before it (of
// leases withdrawn: records deferred behind their keys), in O(1) each, rather than leave the
// run to grow until a compaction scans it all. Once headHops settles in a row did so, the
// head moves to the heap, where it stays out of their way until it falls due or is settled
// (or extended: then its new deadline joins the run, and may come to its head again). live
// tells a deadline still in force. A spent head goes first when a live entry lies right
// behind it: purges leave spent entries on top (see Shard.purgeLocked).
func (q *deadlineQueue) dropHeadOf(off int64, live func(deadline) bool) {
	if q.runHead < len(q.run) && q.run[q.runHead].offset == off {
		q.popRun()
		q.hops = 0
		return
	}
	for q.runHead+1 < len(q.run) {
		h := q.runHead
		next := q.run[h+1]
		if next.offset != off && live(next) {
			if live(q.run[h]) {
				break
			}
			// A spent head (the held lease's entry before its extension, which now lies
			// behind it): it goes, and the search goes on from the next.
			q.popRun()
			continue
		}
		q.run[h+1] = q.run[h] // the head moves up over it: the run stays in order
		q.popRun()
		if next.offset == off {
			if q.hops++; q.hops >= headHops {
				q.heap.push(q.popRun())
				q.hops = 0
			}
			return
		}
	}
	if len(q.heap) > 0 && q.heap[0].offset == off {
		q.heap.pop()
	}
}

// dropSpent drops d, a deadline just superseded (an extension's old one), if it is the run's
// head or the heap's top; anywhere else it waits to be popped or compacted away.
func (q *deadlineQueue) dropSpent(d deadline) {
	if q.runHead < len(q.run) && q.run[q.runHead] == d {
		q.popRun()
		return
	}
	if len(q.heap) > 0 && q.heap[0] == d {
		q.heap.pop()
	}
}

// popRun removes and returns the run's head. The run must not be empty.
func (q *deadlineQueue) popRun() deadline {
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
	q.hops = 0
}
