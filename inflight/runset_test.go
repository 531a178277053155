package inflight

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"
)

// runsOf returns the maximal runs of the ascending offsets offs.
func runsOf(offs ...int64) []Run {
	var runs []Run
	for _, off := range offs {
		if n := len(runs); n > 0 && runs[n-1].Last == off-1 {
			runs[n-1].Last = off
			continue
		}
		runs = append(runs, Run{off, off})
	}
	return runs
}

// runSetMachine checks a runSet against a map of offsets: the same members, the same
// maximal runs in order, the same counts, after every operation.
type runSetMachine struct {
	set   runSet
	model map[int64]bool
}

// offsets drawn from a small range, so that runs meet, join and split often.
func (m *runSetMachine) offset(t *rapid.T, label string) int64 {
	return rapid.Int64Range(-3, 60).Draw(t, label)
}

func (m *runSetMachine) Insert(t *rapid.T) {
	off := m.offset(t, "off")
	if m.model[off] {
		t.Skip("insert takes an offset not in the set")
	}
	m.set.insert(off)
	m.model[off] = true
}

func (m *runSetMachine) Add(t *rapid.T) {
	first := m.offset(t, "first")
	last := first + rapid.Int64Range(0, 12).Draw(t, "extra")
	m.set.add(first, last)
	for off := first; off <= last; off++ {
		m.model[off] = true
	}
}

func (m *runSetMachine) RemoveFirst(t *rapid.T) {
	r, ok := m.set.first()
	if !ok {
		t.Skip("empty")
	}
	m.set.removeFirst()
	for off := r.First; off <= r.Last; off++ {
		delete(m.model, off)
	}
}

func (m *runSetMachine) RemoveThrough(t *rapid.T) {
	f := m.offset(t, "through")
	m.set.removeThrough(f)
	for off := range m.model {
		if off <= f {
			delete(m.model, off)
		}
	}
}

func (m *runSetMachine) Delete(t *rapid.T) {
	off := m.offset(t, "off")
	if !m.model[off] {
		t.Skip("delete takes an offset in the set")
	}
	m.set.delete(off)
	delete(m.model, off)
}

func (m *runSetMachine) From(t *rapid.T) {
	off := m.offset(t, "from")
	got, ok := m.set.from(off)
	var want Run
	found := false
	for _, r := range runsOf(slices.Sorted(maps.Keys(m.model))...) {
		if r.Last >= off {
			want, found = r, true
			break
		}
	}
	if ok != found || got != want {
		t.Fatalf("from(%d) = %v %v, model %v %v", off, got, ok, want, found)
	}
}

func (m *runSetMachine) Contains(t *rapid.T) {
	off := m.offset(t, "probe")
	if got := m.set.contains(off); got != m.model[off] {
		t.Fatalf("contains(%d) = %v, model %v", off, got, m.model[off])
	}
}

func (m *runSetMachine) CountBelow(t *rapid.T) {
	hwm := m.offset(t, "hwm")
	var want int64
	for off := range m.model {
		if off < hwm {
			want++
		}
	}
	if got := m.set.countBelow(hwm); got != want {
		t.Fatalf("countBelow(%d) = %d, model %d", hwm, got, want)
	}
}

func (m *runSetMachine) Check(t *rapid.T) {
	want := runsOf(slices.Sorted(maps.Keys(m.model))...)
	got := m.set.appendTo(nil)
	if !slices.Equal(got, want) {
		t.Fatalf("runs %v, model %v", got, want)
	}
	if m.set.runs != len(want) || m.set.offsets != int64(len(m.model)) {
		t.Fatalf("counts %d runs %d offsets, model %d runs %d offsets", m.set.runs, m.set.offsets, len(want), len(m.model))
	}
	first, ok := m.set.first()
	if ok != (len(want) > 0) || (ok && first != want[0]) {
		t.Fatalf("first %v %v, model %v", first, ok, want)
	}
	if live := len(m.set.nodes) - len(m.set.free); len(m.set.nodes) > 0 && live != m.set.runs+1 {
		t.Fatalf("arena holds %d live nodes for %d runs: a node leaked or was freed twice", live-1, m.set.runs)
	}
	m.checkHeap(t, m.set.root)
}

// checkHeap checks the treap's heap order (a parent's priority at least its children's),
// which is what keeps its depth logarithmic.
func (m *runSetMachine) checkHeap(t *rapid.T, n int32) {
	if n == 0 {
		return
	}
	for _, c := range []int32{m.set.nodes[n].left, m.set.nodes[n].right} {
		if c != 0 && m.set.nodes[c].prio > m.set.nodes[n].prio {
			t.Fatalf("node %v has a child of higher priority", m.set.nodes[n].run)
		}
		m.checkHeap(t, c)
	}
}

func TestRunSetAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &runSetMachine{model: map[int64]bool{}}
		t.Repeat(rapid.StateMachineActions(m))
	})
}

func TestRunSetKeepsLongRunsAsOneNode(t *testing.T) {
	var s runSet
	s.insert(0)
	for off := int64(2); off < 1_000_000; off++ {
		s.insert(off)
	}
	assert.Equal(t, 2, s.runs, "one hole, one run above it")
	assert.Equal(t, int64(999_999), s.offsets)
	assert.LessOrEqual(t, len(s.nodes), 4, "the arena holds the runs, not the offsets")
	s.insert(1)
	assert.Equal(t, []Run{{0, 999_999}}, s.appendTo(nil))
}

func TestRunSetDepthStaysLogarithmic(t *testing.T) {
	var s runSet
	// Ascending inserts are a plain binary search tree's worst case (a list).
	for off := int64(0); off < 2*50_000; off += 2 {
		s.insert(off)
	}
	var depth func(n int32) int
	depth = func(n int32) int {
		if n == 0 {
			return 0
		}
		return 1 + max(depth(s.nodes[n].left), depth(s.nodes[n].right))
	}
	// A treap of n nodes is about 2.99 log2 n deep at most, with overwhelming probability
	// (and the priorities here are a fixed stream): 50,000 runs, log2 = 15.6.
	assert.Less(t, depth(s.root), 60)
}
