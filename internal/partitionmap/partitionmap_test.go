package partitionmap

import (
	"maps"
	"math"
	"slices"
	"testing"

	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestMapAgainstMap runs a Map against a plain map, with partitions in the slice, at its
// limit, far above it and negative, and clones that must not see later changes.
func TestMapAgainstMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var m Map[int]
		model := map[int32]*int{}
		var snapshots []*Map[int]
		var snapshotModels []map[int32]*int
		partitions := rapid.OneOf(
			rapid.Int32Range(0, 40),
			rapid.SampledFrom([]int32{chunkSize - 1, chunkSize, 2*chunkSize + 1, 4096, 100_000,
				DenseLimit - 1, DenseLimit, math.MaxInt32, -1, math.MinInt32}),
		)
		t.Repeat(map[string]func(*rapid.T){
			"set": func(t *rapid.T) {
				p := partitions.Draw(t, "partition")
				v := new(int)
				*v = int(p)
				m.Set(p, v)
				model[p] = v
			},
			"remove": func(t *rapid.T) {
				p := partitions.Draw(t, "partition")
				m.Set(p, nil)
				delete(model, p)
			},
			"get": func(t *rapid.T) {
				p := partitions.Draw(t, "partition")
				if got := m.Get(p); got != model[p] {
					t.Fatalf("Get(%d) = %p, want %p", p, got, model[p])
				}
			},
			"clone": func(t *rapid.T) {
				snapshots = append(snapshots, m.Clone())
				snapshotModels = append(snapshotModels, maps.Clone(model))
			},
			"": func(t *rapid.T) {
				check(t, &m, model)
				for i, s := range snapshots {
					check(t, s, snapshotModels[i])
				}
			},
		})
	})
}

// check compares every partition of the model, Len and AppendTo.
func check(t *rapid.T, m *Map[int], model map[int32]*int) {
	if m.Len() != len(model) {
		t.Fatalf("Len() = %d, want %d", m.Len(), len(model))
	}
	var want []*int
	for p, v := range model {
		if m.Get(p) != v {
			t.Fatalf("Get(%d) = %p, want %p", p, m.Get(p), v)
		}
		want = append(want, v)
	}
	got := m.AppendTo(nil)
	byValue := func(a, b *int) int { return *a - *b }
	slices.SortFunc(got, byValue)
	slices.SortFunc(want, byValue)
	if !slices.Equal(got, want) {
		t.Fatalf("AppendTo = %v values, want %v", len(got), len(want))
	}
}

func TestCloneOfNil(t *testing.T) {
	var m *Map[int]
	c := m.Clone()
	if c == nil || c.Len() != 0 || c.Get(0) != nil {
		t.Fatalf("nil.Clone() = %+v, want an empty Map", c)
	}
}

func BenchmarkGet(b *testing.B) {
	var m Map[int]
	for p := range int32(12) {
		m.Set(p, new(int))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if m.Get(int32(i%12)) == nil {
			b.Fatal("missing")
		}
	}
}

// BenchmarkCloneSet is what publishing one more partition costs a table of 16,000: a Clone
// and a Set, as the tracker does at a partition's first touch.
func BenchmarkCloneSet(b *testing.B) {
	var m Map[int]
	for p := range int32(16_000) {
		m.Set(p, new(int))
	}
	v := new(int)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := m.Clone()
		c.Set(int32(i%16_000), v)
	}
}
