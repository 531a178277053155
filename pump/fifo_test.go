package pump

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// ring returns the entries of f in order, marked ones included.
func ring[M any](f *fifo[M]) []*waiter[M] {
	out := make([]*waiter[M], 0, f.n)
	for i := range f.n {
		out = append(out, f.buf[(f.head+i)&(len(f.buf)-1)])
	}
	return out
}

// liveIDs returns the positions in ws (by identity) of the unmarked entries of f, in order.
func liveIDs(f *fifo[int], ws []*waiter[int]) []int {
	var out []int
	for _, w := range ring(f) {
		if !w.marked {
			out = append(out, slices.Index(ws, w))
		}
	}
	return out
}

// checkBounds checks the FIFO's two memory bounds (item 88): marked entries never outnumber live
// ones, and the ring is at most 8 slots per live waiter (or its minimum length).
func checkBounds[M any](t interface{ Fatalf(string, ...any) }, f *fifo[M]) {
	if f.dead > f.live() {
		t.Fatalf("dead %d > live %d", f.dead, f.live())
	}
	if len(f.buf) > max(minRing, 8*f.live()) {
		t.Fatalf("ring length %d for %d live (%d entries)", len(f.buf), f.live(), f.n)
	}
	if len(f.buf)&(len(f.buf)-1) != 0 {
		t.Fatalf("ring length %d is not a power of two", len(f.buf))
	}
}

func TestFIFOTable(t *testing.T) {
	// Ops: "+" push a new waiter, "<" put a new waiter back at the head, "-" pop, "xN" mark the
	// waiter made N-th (0-based). want: ids of the live waiters in order; popped: ids pop returned
	// (-1 for nil).
	tests := []struct {
		name   string
		ops    string
		want   []int
		popped []int
	}{
		{"push pop in order", "+ + + - -", []int{2}, []int{0, 1}},
		{"pop empty", "-", nil, []int{-1}},
		{"put back goes first", "+ + - <", []int{2, 1}, []int{0}},
		{"marked skipped by pop", "+ + + x0 -", []int{2}, []int{1}},
		{"all marked pop nil", "+ + x0 x1 -", nil, []int{-1}},
		{"mark middle keeps order", "+ + + + x1 x2", []int{0, 3}, nil},
		{"wraps", "+ + + + + + - - - + + + + +", []int{3, 4, 5, 6, 7, 8, 9, 10}, []int{0, 1, 2}},
		{"grows past wrap", "+ + + + + + + + - + +", []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, []int{0}},
		{"sweep then grow", "+ + + + x0 x1 x2 + + + + + + + +", []int{3, 4, 5, 6, 7, 8, 9, 10, 11}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f fifo[int]
			var ws []*waiter[int]
			var popped []int
			for _, op := range strings.Fields(tc.ops) {
				switch op[0] {
				case '+':
					ws = append(ws, &waiter[int]{})
					f.push(ws[len(ws)-1])
				case '<':
					ws = append(ws, &waiter[int]{})
					f.pushFront(ws[len(ws)-1])
				case '-':
					popped = append(popped, slices.Index(ws, f.pop()))
				case 'x':
					f.mark(ws[int(op[1]-'0')])
				}
				checkBounds(t, &f)
			}
			if got := liveIDs(&f, ws); !slices.Equal(got, tc.want) {
				t.Fatalf("live = %v, want %v", got, tc.want)
			}
			if !slices.Equal(popped, tc.popped) {
				t.Fatalf("popped = %v, want %v", popped, tc.popped)
			}
		})
	}
}

// TestFIFOModel checks the ring with its marks, sweeps and resizes against a plain slice of the
// live waiters (items 88, 91: put-back at the head).
func TestFIFOModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var f fifo[int]
		var model []*waiter[int] // live waiters in order
		var all []*waiter[int]
		newWaiter := func() *waiter[int] {
			w := &waiter[int]{}
			all = append(all, w)
			return w
		}
		rt.Repeat(map[string]func(*rapid.T){
			"push": func(rt *rapid.T) {
				w := newWaiter()
				f.push(w)
				model = append(model, w)
			},
			"pushFront": func(rt *rapid.T) {
				w := newWaiter()
				f.pushFront(w)
				model = append([]*waiter[int]{w}, model...)
			},
			"pop": func(rt *rapid.T) {
				got := f.pop()
				if len(model) == 0 {
					if got != nil {
						rt.Fatalf("pop on empty model returned a waiter")
					}
					return
				}
				if got != model[0] {
					rt.Fatalf("pop returned waiter %d, want %d",
						slices.Index(all, got), slices.Index(all, model[0]))
				}
				model = model[1:]
			},
			"mark": func(rt *rapid.T) {
				if len(model) == 0 {
					rt.Skip("nothing to mark")
				}
				i := rapid.IntRange(0, len(model)-1).Draw(rt, "i")
				f.mark(model[i])
				model = slices.Delete(model, i, i+1)
			},
			"sweep": func(rt *rapid.T) {
				f.sweep()
				f.tidy()
			},
			"": func(rt *rapid.T) {
				var live []*waiter[int]
				inRing := map[*waiter[int]]bool{}
				for _, w := range ring(&f) {
					inRing[w] = true
					if !w.marked {
						live = append(live, w)
					}
				}
				if !slices.Equal(live, model) {
					rt.Fatalf("live entries differ from the model: %d vs %d", len(live), len(model))
				}
				if f.live() != len(model) {
					rt.Fatalf("live() = %d, model has %d", f.live(), len(model))
				}
				for _, w := range all {
					if w.queued != inRing[w] {
						rt.Fatalf("waiter %d: queued=%v, in ring=%v", slices.Index(all, w), w.queued, inRing[w])
					}
				}
				checkBounds(rt, &f)
			},
		})
	})
}

// TestFIFOChurnBounded: waiters joining and leaving around a few that stay keep the ring bounded
// by the live count at every step, and the ones that stay keep their order (item 88).
func TestFIFOChurnBounded(t *testing.T) {
	var f fifo[int]
	stay := []*waiter[int]{{}, {}, {}}
	for _, w := range stay {
		f.push(w)
	}
	for i := range 100_000 {
		batch := make([]*waiter[int], 1+i%50)
		for j := range batch {
			batch[j] = &waiter[int]{}
			f.push(batch[j])
		}
		for _, w := range batch {
			f.mark(w)
			checkBounds(t, &f)
		}
		if f.live() != len(stay) {
			t.Fatalf("live = %d, want %d", f.live(), len(stay))
		}
	}
	if f.n > 2*len(stay) || len(f.buf) > 8*len(stay) {
		t.Fatalf("after churn: %d entries, ring %d, want at most %d and %d",
			f.n, len(f.buf), 2*len(stay), 8*len(stay))
	}
	for _, w := range stay {
		if got := f.pop(); got != w {
			t.Fatalf("the waiters that stayed lost their order")
		}
	}
}
