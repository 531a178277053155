package pump

// minRing is the smallest ring a FIFO keeps once it has held a waiter: 8 pointers.
const minRing = 8

// fifo is one queue of waiters in arrival order: a topic's shared queue or one partition's pinned
// queue. It is a ring buffer whose length is zero or a power of two, so the pump can put a waiter
// it could not serve back at the head (pushFront) without moving anything.
//
// A waiter that leaves (its context ended) is marked where it stands (mark), not searched for;
// pop skips marked entries, and once marked entries outnumber live ones they are swept out in one
// pass that keeps the live ones in order. Each entry is swept at most once, so leaving costs O(1)
// amortized, and the ring never holds more than twice as many entries as live waiters.
// The ring halves when it is at most a quarter full, so its memory follows the number of live
// waiters down as well as up: len(buf) <= max(minRing, 8*live()) after every operation.
//
// A fifo is not safe for concurrent use: its topic's mutex guards it, and the waiter fields
// queued, marked and fifo with it.
type fifo[M any] struct {
	buf  []*waiter[M]
	head int // index in buf of the first entry
	n    int // entries in the ring, marked ones included
	dead int // marked entries in the ring

	// Kept here for the topic that owns the FIFO.
	partition int32 // the pinned partition, or -1 for the topic's shared FIFO
	dirty     bool  // a pump pass over this FIFO is due (see topic.markDirty)
	held      bool  // the pump has popped a waiter of this FIFO and is taking a record for it
	index     int   // position in topic.pinnedList (pinned FIFOs only)
}

// live is the number of unmarked entries in the ring.
func (f *fifo[M]) live() int { return f.n - f.dead }

// push appends w at the tail.
func (f *fifo[M]) push(w *waiter[M]) {
	if f.n == len(f.buf) {
		f.resize(max(minRing, 2*len(f.buf)))
	}
	f.buf[(f.head+f.n)&(len(f.buf)-1)] = w
	f.n++
	w.fifo, w.queued = f, true
}

// pushFront puts w back at the head: the pump uses it for a waiter it popped and could not serve.
func (f *fifo[M]) pushFront(w *waiter[M]) {
	if f.n == len(f.buf) {
		f.resize(max(minRing, 2*len(f.buf)))
	}
	f.head = (f.head - 1) & (len(f.buf) - 1)
	f.buf[f.head] = w
	f.n++
	w.fifo, w.queued = f, true
}

// pop removes and returns the first unmarked entry, dropping the marked ones before it, or returns
// nil when the FIFO has no unmarked entry.
func (f *fifo[M]) pop() *waiter[M] {
	for f.n > 0 {
		w := f.buf[f.head]
		f.buf[f.head] = nil
		f.head = (f.head + 1) & (len(f.buf) - 1)
		f.n--
		w.queued = false
		if w.marked {
			f.dead--
			continue
		}
		f.tidy()
		return w
	}
	f.tidy()
	return nil
}

// mark marks w, which must be queued in f, as gone: pop will skip it and a sweep will drop it.
func (f *fifo[M]) mark(w *waiter[M]) {
	w.marked = true
	f.dead++
	f.tidy()
}

// tidy restores the two bounds after an operation that lowered the live count: marked entries
// no more than live ones, and the ring more than a quarter full (or at its minimum length).
func (f *fifo[M]) tidy() {
	if f.dead > f.live() {
		f.sweep()
	}
	l := len(f.buf)
	for l > minRing && f.n <= l/4 {
		l /= 2
	}
	if l != len(f.buf) {
		f.resize(l)
	}
}

// sweep drops every marked entry, keeping the others in order. It costs O(n), and is called only
// when marked entries outnumber live ones, so the marks pay for it.
func (f *fifo[M]) sweep() {
	mask := len(f.buf) - 1
	k := 0
	for i := range f.n {
		w := f.buf[(f.head+i)&mask]
		if w.marked {
			w.queued = false
			continue
		}
		f.buf[(f.head+k)&mask] = w
		k++
	}
	for i := k; i < f.n; i++ {
		f.buf[(f.head+i)&mask] = nil
	}
	f.n, f.dead = k, 0
}

// resize moves the entries, in order, to a new ring of length l (a power of two, at least f.n).
func (f *fifo[M]) resize(l int) {
	buf := make([]*waiter[M], l)
	for i := range f.n {
		buf[i] = f.buf[(f.head+i)&(len(f.buf)-1)]
	}
	f.buf, f.head = buf, 0
}

// drain calls fn for every entry in order, marked ones included, and leaves the FIFO empty with no
// ring.
func (f *fifo[M]) drain(fn func(*waiter[M])) {
	for i := range f.n {
		j := (f.head + i) & (len(f.buf) - 1)
		w := f.buf[j]
		f.buf[j] = nil
		w.queued = false
		fn(w)
	}
	f.buf, f.n, f.dead, f.head = nil, 0, 0, 0
}
