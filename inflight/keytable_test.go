package inflight

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestKeyTableModel runs keyTable against a map under any sequence of sets, deletes and
// lookups, with keys drawn from a small set (so that probe runs collide, wrap around the end
// of the table and are cut by deletes) and from the whole range.
func TestKeyTableModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var table keyTable
		model := map[uint64]*keyState{}
		small := rapid.Uint64Range(1, 40)
		anyKey := rapid.Uint64Min(1)
		draw := func(t *rapid.T) uint64 {
			if rapid.Bool().Draw(t, "small") {
				return small.Draw(t, "key")
			}
			return anyKey.Draw(t, "key")
		}
		t.Repeat(map[string]func(*rapid.T){
			"set": func(t *rapid.T) {
				key := draw(t)
				ks := &keyState{ackedHigh: int64(key)}
				table.set(key, ks)
				model[key] = ks
			},
			"delete": func(t *rapid.T) {
				key := draw(t)
				table.delete(key)
				delete(model, key)
			},
			"get": func(t *rapid.T) {
				key := draw(t)
				require.Same(t, model[key], table.get(key))
			},
			"": func(t *rapid.T) {
				require.Equal(t, len(model), table.len())
				seen := map[uint64]*keyState{}
				for key, ks := range table.all() {
					seen[key] = ks
				}
				require.Equal(t, model, seen)
				for key, ks := range model {
					require.Same(t, ks, table.get(key))
				}
				require.Nil(t, table.get(0), "0 is no key")
			},
		})
	})
}

// FuzzKeyTable runs the model on inputs from the fuzzing engine.
func FuzzKeyTable(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x40\x01\x03\x01\x13\x01\x23\x00\x03\x01\x33\x00\x13"))
	f.Fuzz(rapid.MakeFuzz(func(t *rapid.T) {
		var table keyTable
		model := map[uint64]bool{}
		for range rapid.IntRange(0, 200).Draw(t, "ops") {
			key := rapid.Uint64Range(1, 64).Draw(t, "key")
			if rapid.Bool().Draw(t, "set") {
				table.set(key, &keyState{})
				model[key] = true
			} else {
				table.delete(key)
				delete(model, key)
			}
			if (table.get(key) != nil) != model[key] || table.len() != len(model) {
				t.Fatalf("key %d: table has it %v, model %v", key, table.get(key) != nil, model[key])
			}
		}
	}))
}

func BenchmarkKeyTable(b *testing.B) {
	b.ReportAllocs()
	keys := make([]uint64, 1024)
	for i := range keys {
		keys[i] = KeyOf([]byte{byte(i), byte(i >> 8), 'k'})
	}
	b.Run("table", func(b *testing.B) {
		var table keyTable
		ks := &keyState{}
		for i := range b.N {
			k := keys[i&1023]
			table.set(k, ks)
			if i >= 100 {
				table.delete(keys[(i-100)&1023])
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		table := map[uint64]*keyState{}
		ks := &keyState{}
		for i := range b.N {
			k := keys[i&1023]
			table[k] = ks
			if i >= 100 {
				delete(table, keys[(i-100)&1023])
			}
		}
	})
}
