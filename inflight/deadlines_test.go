package inflight

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The deadline queue against a model, a plain list: every pop returns a deadline the list
// holds with the earliest expiry, first reports the same one, len matches, and retain
// keeps exactly what the predicate keeps. Expiries are drawn mostly in order (what grants
// with one visibility timeout push) with some earlier ones among them, and from a small range,
// so that ties between the run and the heap happen.
func TestDeadlineQueueAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var q deadlineQueue
		var model []deadline
		last := int64(0)
		next := 0
		check := func() {
			require.Equal(t, len(model), q.len())
			first, ok := q.first()
			require.Equal(t, len(model) > 0, ok)
			if ok {
				earliest := slices.MinFunc(model, func(a, b deadline) int { return int(a.at - b.at) })
				require.Equal(t, earliest.at, first.at)
				require.Contains(t, model, first)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"push": func(t *rapid.T) {
				at := last + int64(rapid.IntRange(0, 3).Draw(t, "step"))
				if rapid.IntRange(0, 4).Draw(t, "out of order") == 0 {
					at = last - int64(rapid.IntRange(1, 5).Draw(t, "back"))
				}
				last = max(last, at)
				next++
				d := deadline{at: at, offset: int64(next), nonce: uint64(next)}
				q.push(d)
				model = append(model, d)
				check()
			},
			"pop": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				first, _ := q.first()
				d := q.pop()
				require.Equal(t, first, d, "pop returns what first reported")
				i := slices.Index(model, d)
				require.GreaterOrEqual(t, i, 0, "popped a deadline never pushed, or twice")
				model = slices.Delete(model, i, i+1)
				check()
			},
			"dropHeadOf": func(t *rapid.T) {
				// Any offset, pushed or not: at most the one deadline of it goes.
				off := int64(rapid.IntRange(0, next+1).Draw(t, "offset"))
				mod := int64(rapid.IntRange(2, 4).Draw(t, "stale every"))
				live := func(d deadline) bool { return d.offset%mod != 0 }
				q.dropHeadOf(off, live)
				held := slices.Concat(q.run[q.runHead:], q.heap)
				for _, d := range model {
					if !slices.Contains(held, d) {
						require.True(t, d.offset == off || !live(d), "dropped %v, live and of another offset", d)
					}
				}
				model = slices.DeleteFunc(model, func(d deadline) bool { return !slices.Contains(held, d) })
				check()
			},
			"dropSpent": func(t *rapid.T) {
				// Any deadline, held or not: at most it goes, and only from the top of the run
				// or of the heap.
				if len(model) == 0 {
					t.Skip("empty")
				}
				d := rapid.SampledFrom(model).Draw(t, "deadline")
				onTop := (q.runHead < len(q.run) && q.run[q.runHead] == d) || (len(q.heap) > 0 && q.heap[0] == d)
				q.dropSpent(d)
				held := slices.Concat(q.run[q.runHead:], q.heap)
				require.Equal(t, onTop, !slices.Contains(held, d))
				if onTop {
					model = slices.DeleteFunc(model, func(m deadline) bool { return m == d })
				}
				check()
			},
			"dropStale": func(t *rapid.T) {
				mod := int64(rapid.IntRange(2, 4).Draw(t, "stale every"))
				live := func(d deadline) bool { return d.offset%mod != 0 }
				q.dropStale(live)
				held := slices.Concat(q.run[q.runHead:], q.heap)
				for _, d := range model {
					if !slices.Contains(held, d) {
						require.False(t, live(d), "dropped a live deadline")
					}
				}
				model = slices.DeleteFunc(model, func(d deadline) bool { return !slices.Contains(held, d) })
				if first, ok := q.first(); ok {
					require.True(t, live(first), "a stale deadline left on top")
				}
				check()
			},
			"retain": func(t *rapid.T) {
				mod := int64(rapid.IntRange(2, 4).Draw(t, "drop every"))
				keep := func(d deadline) bool { return d.offset%mod != 0 }
				q.retain(keep)
				model = slices.DeleteFunc(model, func(d deadline) bool { return !keep(d) })
				check()
			},
			"reset": func(t *rapid.T) {
				if rapid.IntRange(0, 9).Draw(t, "rarely") != 0 {
					t.Skip("kept")
				}
				q.reset()
				model = model[:0]
				check()
			},
		})
	})
}

// A run that never empties (each pop followed by a push, far more than the compaction
// threshold) keeps a backing array proportional to what it holds.
func TestDeadlineQueueRunStaysSmall(t *testing.T) {
	var q deadlineQueue
	for i := range 100 {
		q.push(deadline{at: int64(i), offset: int64(i)})
	}
	for i := 100; i < 100_000; i++ {
		require.Equal(t, int64(i-100), q.pop().at)
		q.push(deadline{at: int64(i), offset: int64(i)})
	}
	require.Equal(t, 100, q.len())
	require.Empty(t, q.heap, "in-order pushes never reach the heap")
	require.LessOrEqual(t, cap(q.run), 4096)
}

// TestDeadlineQueueMovesAStuckHeadToTheHeap: a lease held long at the run's head (a hung
// holder's) while the leases after it are settled in order: after headHops of them found
// their deadlines behind it, it moves to the heap, still the earliest, and the settles that
// follow find theirs at the run's head.
func TestDeadlineQueueMovesAStuckHeadToTheHeap(t *testing.T) {
	var q deadlineQueue
	hung := deadline{at: 1, offset: 0, nonce: 1}
	q.push(hung)
	for i := int64(1); i <= 2*headHops; i++ {
		q.push(deadline{at: 1 + i, offset: i, nonce: uint64(i + 1)})
	}
	live := func(deadline) bool { return true }
	for i := int64(1); i <= headHops; i++ {
		require.Equal(t, hung, q.run[q.runHead], "the head stays while fewer than headHops settles passed it")
		q.dropHeadOf(i, live)
	}
	require.Equal(t, []deadline{hung}, []deadline(q.heap))
	first, ok := q.first()
	require.True(t, ok)
	require.Equal(t, hung, first, "still the earliest")
	for i := int64(headHops + 1); i <= 2*headHops; i++ {
		require.Equal(t, i, q.run[q.runHead].offset, "the next settle's deadline heads the run")
		q.dropHeadOf(i, live)
	}
	require.Equal(t, 1, q.len())
	require.Equal(t, hung, q.pop())
}
