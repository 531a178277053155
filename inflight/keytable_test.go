package inflight

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// keyTableModel runs a keyTable beside a map of the slots it should hold: keys claimed held
// by one lease alone (a holding, no state) or with a state, a light key given its state,
// deletes, a light key's hold ended (forgetLight), lookups.
type keyTableModel struct {
	table keyTable
	model map[uint64]keySlot
}

func (m *keyTableModel) claim(t *rapid.T, key uint64, light bool) {
	slot, known := m.table.slotFor(key)
	_, had := m.model[key]
	require.Equal(t, had, known, "key %d known", key)
	if known {
		return
	}
	require.Equal(t, keySlot{key: key}, *slot, "a claimed slot is empty but for its key")
	if light {
		slot.holding, slot.held, slot.room = key, int64(key), int(key%100) // any holding but 0
	} else {
		slot.state = &keyState{ackedHigh: int64(key)}
	}
	m.model[key] = *slot
}

// promote gives a light key a state, as keyIndex.fullState does.
func (m *keyTableModel) promote(key uint64) {
	if want, ok := m.model[key]; ok && want.state == nil {
		slot, _ := m.table.slotFor(key)
		slot.state, slot.holding, slot.held, slot.room = &keyState{ackedHigh: int64(key)}, 0, 0, 0
		m.model[key] = *slot
	}
}

func (m *keyTableModel) delete(key uint64) {
	m.table.delete(key)
	delete(m.model, key)
}

// forgetLight ends a held key's hold: a light one goes, any other gives its state.
func (m *keyTableModel) forgetLight(t *rapid.T, key uint64) {
	want, ok := m.model[key]
	if !ok {
		return // forgetLight takes a key the table has
	}
	require.Same(t, want.state, m.table.forgetLight(key), "key %d's state", key)
	if want.state == nil {
		delete(m.model, key)
	}
}

func (m *keyTableModel) check(t *rapid.T, key uint64) {
	want, ok := m.model[key]
	if got := m.table.get(key); got != want.state {
		t.Fatalf("key %d's state: %p, want %p", key, got, want.state)
	}
	i, found := m.table.find(key)
	if found != ok || found && m.table.slots[i] != want {
		t.Fatalf("key %d: found %v (%+v), want %v (%+v)", key, found, m.table.slots[i], ok, want)
	}
	if m.table.len() != len(m.model) {
		t.Fatalf("%d keys, want %d", m.table.len(), len(m.model))
	}
}

func (m *keyTableModel) checkAll(t *rapid.T) {
	states, light := map[uint64]*keyState{}, 0
	for key, s := range m.model {
		if s.state == nil {
			light++
		} else {
			states[key] = s.state
		}
		m.check(t, key)
	}
	seen := map[uint64]*keyState{}
	for key, ks := range m.table.all() {
		seen[key] = ks
	}
	require.Equal(t, states, seen, "the keys with states")
	require.Equal(t, light, m.table.lightKeys(), "light keys")
	require.Nil(t, m.table.get(0), "0 is no key")
}

// TestKeyTableModel runs keyTable against the map under any sequence of operations, with keys
// drawn from a small set (so that probe runs collide, wrap around the end of the table and are
// cut by deletes) and from the whole range.
func TestKeyTableModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &keyTableModel{model: map[uint64]keySlot{}}
		small := rapid.Uint64Range(1, 40)
		anyKey := rapid.Uint64Min(1)
		draw := func(t *rapid.T) uint64 {
			if rapid.Bool().Draw(t, "small") {
				return small.Draw(t, "key")
			}
			return anyKey.Draw(t, "key")
		}
		t.Repeat(map[string]func(*rapid.T){
			"claim light": func(t *rapid.T) { m.claim(t, draw(t), true) },
			"claim state": func(t *rapid.T) { m.claim(t, draw(t), false) },
			"promote":     func(t *rapid.T) { m.promote(draw(t)) },
			"delete":      func(t *rapid.T) { m.delete(draw(t)) },
			"forgetLight": func(t *rapid.T) { m.forgetLight(t, draw(t)) },
			"get":         func(t *rapid.T) { m.check(t, draw(t)) },
			"":            m.checkAll,
		})
	})
}

// FuzzKeyTable runs the model on inputs from the fuzzing engine, over 64 keys.
func FuzzKeyTable(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x40\x01\x03\x01\x13\x01\x23\x00\x03\x01\x33\x00\x13"))
	f.Fuzz(rapid.MakeFuzz(func(t *rapid.T) {
		m := &keyTableModel{model: map[uint64]keySlot{}}
		for range rapid.IntRange(0, 200).Draw(t, "ops") {
			key := rapid.Uint64Range(1, 64).Draw(t, "key")
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0:
				m.claim(t, key, true)
			case 1:
				m.claim(t, key, false)
			case 2:
				m.promote(key)
			case 3:
				m.delete(key)
			case 4:
				m.forgetLight(t, key)
			}
			m.check(t, key)
		}
		m.checkAll(t)
	}))
}

// TestKeyTableKeepsItsSizeThroughWaves: keys that come and go in waves (a partition's batches
// taken and acked, the held keys swinging between a few and thousands) leave the table at the
// size the crest needed, rather than shrinking at each ebb and growing again at the next
// crest (every key rehashed twice a wave); a burst long gone gives its memory back.
func TestKeyTableKeepsItsSizeThroughWaves(t *testing.T) {
	var table keyTable
	next := uint64(1)
	wave := func(crest int) { // crest keys come, then go
		keys := make([]uint64, 0, crest)
		for ; len(keys) < crest; next++ {
			slot, known := table.slotFor(next)
			require.False(t, known)
			slot.holding = next
			keys = append(keys, next)
		}
		for _, key := range keys {
			table.delete(key)
		}
	}
	wave(1600)
	size := len(table.slots)
	require.Equal(t, 4096, size, "1,600 keys at most three quarters full")
	for range 50 {
		wave(1600)
		require.Equal(t, size, len(table.slots), "the table's size through the waves")
	}
	require.Zero(t, table.len())
	// The waves are over: a few keys come and go. After as many deletes as its size spent
	// under a quarter full, the table halves, down to the size it keeps.
	deletes := 0
	for len(table.slots) > keyTableKept {
		wave(10)
		deletes += 10
		require.LessOrEqual(t, deletes, 2*size+10, "deletes before the table shrank back")
	}
	require.Equal(t, keyTableKept, len(table.slots))
}

// BenchmarkKeyTable binds and forgets keys as an ordered partition's light keys come and go,
// 100 held at a time, against a map.
func BenchmarkKeyTable(b *testing.B) {
	b.ReportAllocs()
	keys := make([]uint64, 1024)
	for i := range keys {
		keys[i] = KeyOf([]byte{byte(i), byte(i >> 8), 'k'})
	}
	b.Run("table", func(b *testing.B) {
		var table keyTable
		for i := range b.N {
			slot, _ := table.slotFor(keys[i&1023])
			slot.holding = uint64(i) + 1
			if i >= 100 {
				table.forgetLight(keys[(i-100)&1023])
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		table := map[uint64]uint64{}
		for i := range b.N {
			table[keys[i&1023]] = uint64(i) + 1
			if i >= 100 {
				delete(table, keys[(i-100)&1023])
			}
		}
	})
}
