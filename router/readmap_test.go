package router

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestReadMapAgainstMap runs a readMap's operations against a plain map.
func TestReadMapAgainstMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var table readMap[int]
		model := map[string]int{}
		keys := rapid.SampledFrom([]string{"", "a", "b", "topic", "node-2"})
		t.Repeat(map[string]func(*rapid.T){
			"load": func(t *rapid.T) {
				key := keys.Draw(t, "key")
				v, ok := table.load(key)
				want, wantOK := model[key]
				if v != want || ok != wantOK {
					t.Fatalf("load(%q) = %d, %v; want %d, %v", key, v, ok, want, wantOK)
				}
			},
			"loadOrAdd": func(t *rapid.T) {
				key := keys.Draw(t, "key")
				fresh := rapid.Int().Draw(t, "fresh")
				added := false
				got := table.loadOrAdd(key, func() int { added = true; return fresh })
				want, had := model[key]
				if !had {
					want = fresh
					model[key] = fresh
				}
				if got != want || added == had {
					t.Fatalf("loadOrAdd(%q) = %d (added %v); want %d (had %v)", key, got, added, want, had)
				}
			},
			"remove": func(t *rapid.T) {
				key := keys.Draw(t, "key")
				table.remove(key)
				delete(model, key)
			},
		})
	})
}

// TestReadMapAddsOncePerKey has goroutines race to add the same keys: each key's add runs
// once, and every caller gets the value it made.
func TestReadMapAddsOncePerKey(t *testing.T) {
	var table readMap[*int]
	var mu sync.Mutex
	adds := map[string]int{}
	var wg sync.WaitGroup
	got := make([][]*int, 8)
	for g := range got {
		wg.Go(func() {
			for k := range 16 {
				key := fmt.Sprint(k)
				got[g] = append(got[g], table.loadOrAdd(key, func() *int {
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

// BenchmarkReadMapLoad is a lookup of one of a few keys, as a consume resolves its topic.
func BenchmarkReadMapLoad(b *testing.B) {
	var table readMap[*int]
	keys := []string{"orders", "payments", "events", "audit"}
	for _, k := range keys {
		table.loadOrAdd(k, func() *int { return new(int) })
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := table.load(keys[i%len(keys)]); !ok {
			b.Fatal("missing")
		}
	}
}
