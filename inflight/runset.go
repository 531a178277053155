package inflight

import "math"

// Run is a run of consecutive offsets, First through Last inclusive.
type Run struct{ First, Last int64 }

// Len is the number of offsets in r.
func (r Run) Len() int64 { return r.Last - r.First + 1 }

// runSet is a set of offsets kept as maximal runs (no two runs overlap or touch), ordered
// by First in a treap: a binary search tree by First whose nodes also form a heap by a
// random priority, which keeps its depth O(log runs) expected whatever order the runs
// arrive in. It answers membership, the lowest run and the run count in O(log runs), and an
// offset or a range joins in O(log runs) plus the runs it swallows, so its memory and every
// operation grow with the runs, never with the offsets (a run of a million acked offsets
// above one hole is one node).
//
// The nodes live in an arena indexed by int32, index 0 standing for none, and freed nodes
// are reused: in steady state nothing is allocated. The priorities come from a splitmix64
// stream seeded with a constant: the tree's shape is deterministic.
type runSet struct {
	nodes   []runNode
	free    []int32
	root    int32
	runs    int
	offsets int64
	draws   uint64 // splitmix64 state of the priorities
	// grown is the node the last insert grew or made, while grownOK, and below is where the
	// next run above it starts (math.MaxInt64: none): acks above one hole (a held or hung
	// lease) mostly come in offset order, each growing the run the one before grew, which
	// insert then does without a descent. Every other change forgets it.
	grown   int32
	below   int64
	grownOK bool
}

type runNode struct {
	run         Run
	left, right int32
	prio        uint32
}

// shrinkAbove is the arena size (in nodes) above which an emptied set gives its arena back:
// a partition that once held many runs does not keep their memory for good.
const shrinkAbove = 4096

// reset empties the set.
func (t *runSet) reset() {
	t.root, t.runs, t.offsets, t.grownOK = 0, 0, 0, false
	if cap(t.nodes) > shrinkAbove {
		t.nodes, t.free = nil, nil
	}
	t.nodes, t.free = t.nodes[:0], t.free[:0]
}

// contains reports whether off is in the set.
func (t *runSet) contains(off int64) bool {
	_, ok := t.runAt(off)
	return ok
}

// runAt returns the run that holds off; ok is false when off is not in the set.
func (t *runSet) runAt(off int64) (r Run, ok bool) {
	if pred, _ := t.around(off); pred != 0 && t.nodes[pred].run.Last >= off {
		return t.nodes[pred].run, true
	}
	return Run{}, false
}

// first returns the lowest run; ok is false when the set is empty.
func (t *runSet) first() (r Run, ok bool) {
	n := t.root
	if n == 0 {
		return Run{}, false
	}
	for t.nodes[n].left != 0 {
		n = t.nodes[n].left
	}
	return t.nodes[n].run, true
}

// removeFirst removes the lowest run; the set must not be empty.
func (t *runSet) removeFirst() {
	t.grownOK = false
	parent, n := int32(0), t.root
	for t.nodes[n].left != 0 {
		parent, n = n, t.nodes[n].left
	}
	// n has no left child: its right subtree takes its place, which keeps both orders.
	if parent == 0 {
		t.root = t.nodes[n].right
	} else {
		t.nodes[parent].left = t.nodes[n].right
	}
	t.release(n)
}

// insert adds the offset off, which must not be in the set: an ack above the frontier. An
// offset that widens one run (the next after a run, or the one before) changes that node in
// place; one that joins two runs widens the first and removes the second; any other starts
// a run of its own. Each is one or two descents of the tree.
func (t *runSet) insert(off int64) {
	if t.grownOK && off == t.nodes[t.grown].run.Last+1 && off+1 < t.below {
		t.nodes[t.grown].run.Last = off // the run the last insert grew, joining none
		t.offsets++
		return
	}
	pred, succ := t.around(off)
	joinsPred := pred != 0 && t.nodes[pred].run.Last == off-1
	joinsSucc := succ != 0 && t.nodes[succ].run.First == off+1
	t.grownOK = false
	switch {
	case joinsPred && joinsSucc:
		next := t.nodes[succ].run
		t.nodes[pred].run.Last = next.Last
		t.offsets += 1 + next.Len() // removing succ takes its offsets back off
		t.root = t.remove(t.root, next.First)
	case joinsPred:
		t.nodes[pred].run.Last = off
		t.offsets++
		t.grow(pred, succ)
	case joinsSucc:
		t.nodes[succ].run.First = off
		t.offsets++
	default:
		n := t.alloc(Run{off, off})
		t.root = t.place(t.root, n)
		t.grow(n, succ)
	}
}

// grow remembers n as the run the last insert grew, and succ (0: none) as the run above it.
func (t *runSet) grow(n, succ int32) {
	t.grown, t.below, t.grownOK = n, math.MaxInt64, true
	if succ != 0 {
		t.below = t.nodes[succ].run.First
	}
}

// delete removes the offset off, which must be in the set: a parked record taken back out of
// the runs (see Shard.Bind). A run of one offset goes; one that starts or ends at off shrinks
// in place; one that holds off inside splits in two.
func (t *runSet) delete(off int64) {
	t.grownOK = false
	n, _ := t.around(off)
	r := t.nodes[n].run
	switch {
	case r.First == off && r.Last == off:
		t.root = t.remove(t.root, off)
	case r.First == off:
		t.nodes[n].run.First++ // still below the next run, which starts past r.Last+1
		t.offsets--
	case r.Last == off:
		t.nodes[n].run.Last--
		t.offsets--
	default:
		t.nodes[n].run.Last = off - 1
		t.offsets -= r.Last - off + 1 // alloc counts the upper part back
		t.root = t.place(t.root, t.alloc(Run{off + 1, r.Last}))
	}
}

// from returns the run that holds off or, if none does, the first run above it; ok is false
// when there is neither.
func (t *runSet) from(off int64) (r Run, ok bool) {
	pred, succ := t.around(off)
	if pred != 0 && t.nodes[pred].run.Last >= off {
		return t.nodes[pred].run, true
	}
	if succ != 0 {
		return t.nodes[succ].run, true
	}
	return Run{}, false
}

// place puts the new node x into the tree n, none of whose runs touches x's, and returns the
// tree: down the search path to where x's priority ranks it, where x takes the subtree there
// split around its run.
func (t *runSet) place(n, x int32) int32 {
	if n == 0 {
		return x
	}
	first := t.nodes[x].run.First
	if t.nodes[x].prio > t.nodes[n].prio {
		t.nodes[x].left, t.nodes[x].right = t.split(n, first)
		return x
	}
	if first < t.nodes[n].run.First {
		t.nodes[n].left = t.place(t.nodes[n].left, x)
	} else {
		t.nodes[n].right = t.place(t.nodes[n].right, x)
	}
	return n
}

// remove removes the run starting at first from the tree n and returns the tree.
func (t *runSet) remove(n int32, first int64) int32 {
	switch f := t.nodes[n].run.First; {
	case first < f:
		t.nodes[n].left = t.remove(t.nodes[n].left, first)
	case first > f:
		t.nodes[n].right = t.remove(t.nodes[n].right, first)
	default:
		joined := t.merge(t.nodes[n].left, t.nodes[n].right)
		t.release(n)
		return joined
	}
	return n
}

// add adds the offsets first through last (first <= last), merging the runs they overlap
// or touch into one.
func (t *runSet) add(first, last int64) {
	t.grownOK = false
	lower, rest := t.split(t.root, first) // runs starting below first
	// Runs starting from first up to last+1 overlap or touch [first, last]. Written as
	// First-1 <= last, the comparison cannot overflow (every run starts above MinInt64).
	joined, upper := t.splitAfter(rest, last)
	if m := t.maxNode(lower); m != 0 && t.nodes[m].run.Last >= first-1 {
		// The highest run below first reaches first: it joins too.
		first, last = t.nodes[m].run.First, max(last, t.nodes[m].run.Last)
		lower = t.removeMax(lower)
	}
	if m := t.maxNode(joined); m != 0 {
		last = max(last, t.nodes[m].run.Last)
		t.releaseTree(joined)
	}
	n := t.alloc(Run{first, last})
	t.root = t.merge(t.merge(lower, n), upper)
}

// removeThrough removes every offset at or below f; a run that straddles f keeps its part
// above.
func (t *runSet) removeThrough(f int64) {
	t.grownOK = false
	lower, upper := t.splitAfter(t.root, f-1) // runs starting at or below f
	if m := t.maxNode(lower); m != 0 && t.nodes[m].run.Last > f {
		upper = t.merge(t.alloc(Run{f + 1, t.nodes[m].run.Last}), upper)
	}
	t.releaseTree(lower)
	t.root = upper
}

// appendTo appends the runs to dst in ascending order.
func (t *runSet) appendTo(dst []Run) []Run { return t.appendTree(dst, t.root) }

func (t *runSet) appendTree(dst []Run, n int32) []Run {
	if n == 0 {
		return dst
	}
	dst = t.appendTree(dst, t.nodes[n].left)
	dst = append(dst, t.nodes[n].run)
	return t.appendTree(dst, t.nodes[n].right)
}

// countBelow counts the offsets below hwm, walking every run: for the rare caller whose set
// may reach past hwm (restored state above a log that lost its tail).
func (t *runSet) countBelow(hwm int64) int64 { return t.countTree(t.root, hwm) }

func (t *runSet) countTree(n int32, hwm int64) int64 {
	if n == 0 {
		return 0
	}
	r := t.nodes[n].run
	c := t.countTree(t.nodes[n].left, hwm)
	if r.First < hwm {
		c += Run{r.First, min(r.Last, hwm-1)}.Len() + t.countTree(t.nodes[n].right, hwm)
	}
	return c
}

// around returns the node of the last run starting at or below off (pred) and of the first
// starting above it (succ), 0 for none.
func (t *runSet) around(off int64) (pred, succ int32) {
	for n := t.root; n != 0; {
		if t.nodes[n].run.First <= off {
			pred, n = n, t.nodes[n].right
		} else {
			succ, n = n, t.nodes[n].left
		}
	}
	return pred, succ
}

// split splits the tree n into the runs starting below k and the others.
func (t *runSet) split(n int32, k int64) (below, from int32) {
	if n == 0 {
		return 0, 0
	}
	if t.nodes[n].run.First < k {
		below, from = t.split(t.nodes[n].right, k)
		t.nodes[n].right = below
		return n, from
	}
	below, from = t.split(t.nodes[n].left, k)
	t.nodes[n].left = from
	return below, n
}

// splitAfter splits the tree n into the runs starting at or below k+1 and the others.
func (t *runSet) splitAfter(n int32, k int64) (upTo, above int32) {
	if n == 0 {
		return 0, 0
	}
	if t.nodes[n].run.First-1 <= k {
		upTo, above = t.splitAfter(t.nodes[n].right, k)
		t.nodes[n].right = upTo
		return n, above
	}
	upTo, above = t.splitAfter(t.nodes[n].left, k)
	t.nodes[n].left = above
	return upTo, n
}

// merge joins the trees a and b, every run of a below every run of b.
func (t *runSet) merge(a, b int32) int32 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	case t.nodes[a].prio > t.nodes[b].prio:
		t.nodes[a].right = t.merge(t.nodes[a].right, b)
		return a
	default:
		t.nodes[b].left = t.merge(a, t.nodes[b].left)
		return b
	}
}

// maxNode returns the node of the highest run of the tree n, 0 if it is empty.
func (t *runSet) maxNode(n int32) int32 {
	if n == 0 {
		return 0
	}
	for t.nodes[n].right != 0 {
		n = t.nodes[n].right
	}
	return n
}

// removeMax removes the highest run of the tree n and returns the tree.
func (t *runSet) removeMax(n int32) int32 {
	if t.nodes[n].right == 0 {
		left := t.nodes[n].left
		t.release(n)
		return left
	}
	t.nodes[n].right = t.removeMax(t.nodes[n].right)
	return n
}

// alloc makes a node for r, counted in the set.
func (t *runSet) alloc(r Run) int32 {
	if len(t.nodes) == 0 {
		t.nodes = append(t.nodes, runNode{}) // index 0: none
	}
	t.draws += 0x9e3779b97f4a7c15
	z := t.draws
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	node := runNode{run: r, prio: uint32(z ^ z>>31)}
	t.runs++
	t.offsets += r.Len()
	if k := len(t.free); k > 0 {
		n := t.free[k-1]
		t.free = t.free[:k-1]
		t.nodes[n] = node
		return n
	}
	t.nodes = append(t.nodes, node)
	return int32(len(t.nodes) - 1)
}

// release frees the node n, already unlinked from the tree.
func (t *runSet) release(n int32) {
	t.grownOK = false
	t.runs--
	t.offsets -= t.nodes[n].run.Len()
	if t.runs == 0 {
		t.reset()
		return
	}
	t.free = append(t.free, n)
}

// releaseTree frees every node of the tree n, already unlinked from the set's tree.
func (t *runSet) releaseTree(n int32) {
	if n == 0 {
		return
	}
	left, right := t.nodes[n].left, t.nodes[n].right
	t.release(n)
	t.releaseTree(left)
	t.releaseTree(right)
}
