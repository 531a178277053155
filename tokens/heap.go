package tokens

// tokenHeap is a min-heap of tokens on their deadline, each token keeping its index in the
// heap so that a token whose deadline moves, or that leaves before it lapses, is fixed or
// removed in O(log n) without a search (as container/heap's PriorityQueue example does, but
// over concrete types: no interface call per comparison).
type tokenHeap []*token

func (h tokenHeap) less(i, j int) bool { return h[i].until < h[j].until }

func (h tokenHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

// push adds t.
func (h *tokenHeap) push(t *token) {
	t.index = len(*h)
	*h = append(*h, t)
	h.up(t.index)
}

// pop removes and returns the token with the earliest deadline; the heap must not be empty.
func (h *tokenHeap) pop() *token { return h.remove(0) }

// remove takes out the token at index i and returns it.
func (h *tokenHeap) remove(i int) *token {
	old := *h
	n := len(old) - 1
	t := old[i]
	if i != n {
		old.swap(i, n)
	}
	old[n] = nil // the heap no longer keeps the token alive
	*h = old[:n]
	if i != n {
		h.fix(i)
	}
	return t
}

// fix restores the heap order after the deadline of the token at index i changed.
func (h tokenHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h tokenHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

// down moves the token at index i down to its place and reports whether it moved.
func (h tokenHeap) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		j := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > start
}

// shrink halves the heap's backing array while it is at most a quarter full and longer
// than minRing, so its memory follows the tokens down.
func (h *tokenHeap) shrink() {
	c := cap(*h)
	for c > minRing && len(*h) <= c/4 {
		c /= 2
	}
	if c != cap(*h) {
		*h = append(make(tokenHeap, 0, c), *h...)
	}
}
