package inflight

// A shard's released offsets and its out-of-order deadlines (see deadlineQueue) share one
// min-heap written over a value slice. container/heap is not used: its interface boxes every
// pushed element, and reserve → ack must not allocate.

// ordered is what a heap element provides: a strict order.
type ordered[T any] interface {
	before(T) bool
}

// minHeap is a binary min-heap over a value slice.
type minHeap[T ordered[T]] []T

func (h *minHeap[T]) push(x T) {
	*h = append(*h, x)
	s := *h
	i := len(s) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !s[i].before(s[parent]) {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

// pop removes and returns the least element. The heap must not be empty.
func (h *minHeap[T]) pop() T {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return top
}

func (h minHeap[T]) down(i int) {
	n := len(h)
	for {
		least := i
		if l := 2*i + 1; l < n && h[l].before(h[least]) {
			least = l
		}
		if r := 2*i + 2; r < n && h[r].before(h[least]) {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}

// retain keeps only the elements for which keep reports true and restores the heap order,
// in place, in O(n).
func (h *minHeap[T]) retain(keep func(T) bool) {
	s := (*h)[:0]
	for _, x := range *h {
		if keep(x) {
			s = append(s, x)
		}
	}
	*h = s
	for i := len(s)/2 - 1; i >= 0; i-- {
		s.down(i)
	}
}

// deadline is an entry of the expiry queue (deadlineQueue): at time at (Unix nanoseconds)
// the lease (offset, nonce) expires, or, with nonce 0, the nack delay of offset ends.
//
// Entries are not removed when a lease is settled, extended or released: the queue uses lazy
// deletion. A popped entry counts only if the offset still holds a lease
// with the same nonce and the same expiry (or a delay ending at the same instant), so an
// extended lease is never evicted by its own superseded deadline. The shard
// compacts the queue when stale entries outnumber live ones, so its size stays proportional
// to the live leases at O(1) amortized cost.
type deadline struct {
	at     int64
	offset int64
	nonce  uint64
}

func (d deadline) before(other deadline) bool { return d.at < other.at }

// releasedOffset is an entry of the released heap: an offset below the shard's cursor that may be
// leased again (its lease expired, it was nacked, its delay ended, it was given back). The
// heap is lazy too: an entry counts only if its offset is still released when it is popped.
type releasedOffset int64

func (r releasedOffset) before(other releasedOffset) bool { return r < other }
