package readmap

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestMapAgainstMap runs a Map's operations against a plain map, over keys of which some
// share a slot of the cache of recent reads (a read of one evicts the other's entry), and
// are removed and added again while an entry of theirs may be cached.
func TestMapAgainstMap(t *testing.T) {
	names := []string{"", "a", "b", "topic", "node-2"}
	bySlot := map[int][]string{}
	for i := 0; len(names) < 12; i++ {
		key := fmt.Sprintf("orders-%d", i)
		slot := recentSlot(key)
		if bySlot[slot] = append(bySlot[slot], key); len(bySlot[slot]) == 2 {
			names = append(names, bySlot[slot]...)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		var table Map[int]
		model := map[string]int{}
		keys := rapid.SampledFrom(names)
		t.Repeat(map[string]func(*rapid.T){
			"load": func(t *rapid.T) {
				key := keys.Draw(t, "key")
				v, ok := table.Load(key)
				want, wantOK := model[key]
				if v != want || ok != wantOK {
					t.Fatalf("Load(%q) = %d, %v; want %d, %v", key, v, ok, want, wantOK)
				}
			},
			"loadOrAdd": func(t *rapid.T) {
				key := keys.Draw(t, "key")
				fresh := rapid.Int().Draw(t, "fresh")
				added := false
				got := table.LoadOrAdd(key, func() int { added = true; return fresh })
				want, had := model[key]
				if !had {
					want = fresh
					model[key] = fresh
				}
				if got != want || added == had {
					t.Fatalf("LoadOrAdd(%q) = %d (added %v); want %d (had %v)", key, got, added, want, had)
				}
			},
			"store": func(t *rapid.T) {
				key, v := keys.Draw(t, "key"), rapid.Int().Draw(t, "v")
				table.Store(key, v)
				model[key] = v
			},
			"remove": func(t *rapid.T) {
				key := keys.Draw(t, "key")
				table.Remove(key)
				delete(model, key)
			},
			"range": func(t *rapid.T) {
				seen := map[string]int{}
				table.Range(func(key string, v int) bool { seen[key] = v; return true })
				if fmt.Sprint(seen) != fmt.Sprint(model) {
					t.Fatalf("Range saw %v; want %v", seen, model)
				}
			},
		})
	})
}

// TestMapAddsOncePerKey has goroutines race to add the same keys: each key's add runs
// once, and every caller gets the value it made.
func TestMapAddsOncePerKey(t *testing.T) {
	var table Map[*int]
	var mu sync.Mutex
	adds := map[string]int{}
	var wg sync.WaitGroup
	got := make([][]*int, 8)
	for g := range got {
		wg.Go(func() {
			for k := range 16 {
				key := fmt.Sprint(k)
				got[g] = append(got[g], table.LoadOrAdd(key, func() *int {
					mu.Lock()
					defer mu.Unlock()
					adds[key]++
					return new(int)
				}))
			}
		})
	}
	wg.Wait()
	for k := range 16 {
		require.Equal(t, 1, adds[fmt.Sprint(k)], "key %d", k)
		for g := range got {
			require.Same(t, got[0][k], got[g][k], "key %d, goroutine %d", k, g)
		}
	}
}

// BenchmarkLoad is a lookup of one of a few keys, as a consume resolves its topic.
func BenchmarkLoad(b *testing.B) {
	var table Map[*int]
	keys := []string{"orders", "payments", "events", "audit"}
	for _, k := range keys {
		table.LoadOrAdd(k, func() *int { return new(int) })
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := table.Load(keys[i%len(keys)]); !ok {
			b.Fatal("missing")
		}
	}
}
