package tokens

import (
	"math"
	"time"
)

// minRing is the smallest ring kept once it has held an entry.
const minRing = 8

// ring is a double-ended queue over a buffer whose length is zero or a power of two, so
// both ends move without copying. Its memory follows its contents down as well as up:
// shrink halves the buffer while it is at most a quarter full.
type ring[T any] struct {
	buf  []T
	head int // index in buf of the first entry
	n    int // entries held
}

// at returns the i-th entry from the head; 0 <= i < len(buf).
func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// grow makes room for one more entry.
func (r *ring[T]) grow() {
	if r.n == len(r.buf) {
		r.resize(max(minRing, 2*len(r.buf)))
	}
}

func (r *ring[T]) pushBack(v T) {
	r.grow()
	*r.at(r.n) = v
	r.n++
}

func (r *ring[T]) pushFront(v T) {
	r.grow()
	r.head = (r.head - 1) & (len(r.buf) - 1)
	r.buf[r.head] = v
	r.n++
}

// popFront removes and returns the first entry; the ring must not be empty.
func (r *ring[T]) popFront() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}

// insert puts v at position i (0 <= i <= n), moving the entries from i on one place back.
func (r *ring[T]) insert(i int, v T) {
	r.grow()
	for j := r.n; j > i; j-- {
		*r.at(j) = *r.at(j - 1)
	}
	*r.at(i) = v
	r.n++
}

// remove takes out the entry at position i (0 <= i < n), moving the entries after it one
// place forward, and returns it.
func (r *ring[T]) remove(i int) T {
	var zero T
	v := *r.at(i)
	for j := i; j < r.n-1; j++ {
		*r.at(j) = *r.at(j + 1)
	}
	*r.at(r.n - 1) = zero
	r.n--
	return v
}

// filter keeps the entries for which keep is true, in order, and drops the others.
func (r *ring[T]) filter(keep func(*T) bool) {
	var zero T
	k := 0
	for i := range r.n {
		e := r.at(i)
		if !keep(e) {
			continue
		}
		if k != i {
			*r.at(k) = *e
		}
		k++
	}
	for i := k; i < r.n; i++ {
		*r.at(i) = zero
	}
	r.n = k
}

// shrink halves the buffer while it is at most a quarter full and longer than minRing.
func (r *ring[T]) shrink() {
	l := len(r.buf)
	for l > minRing && r.n <= l/4 {
		l /= 2
	}
	if l != len(r.buf) {
		r.resize(l)
	}
}

// resize moves the entries, in order, to a new buffer of length l (a power of two, at least n).
func (r *ring[T]) resize(l int) {
	buf := make([]T, l)
	for i := range r.n {
		buf[i] = *r.at(i)
	}
	r.buf, r.head = buf, 0
}

// after returns now + d, saturating instead of overflowing for a d that runs past the
// representable range.
func after(now int64, d time.Duration) int64 {
	switch {
	case d > 0 && now > math.MaxInt64-int64(d):
		return math.MaxInt64
	case d < 0 && now < math.MinInt64-int64(d):
		return math.MinInt64
	}
	return now + int64(d)
}
