package partitionmap

import "maps"

// DenseLimit bounds the partitions a Map indexes (in chunks of chunkSize); a partition at or
// above it, or a negative one, is kept in a map.
const DenseLimit = 1 << 20

// chunkSize is how many partitions one chunk of the index holds: a Set after a Clone copies
// one chunk and the table of chunks (DenseLimit/chunkSize pointers at most), never the whole
// table, so a topic's n-th partition costs its first touch O(n/chunkSize + chunkSize), not
// O(n).
const chunkSize = 256

// chunk holds the values of up to chunkSize consecutive partitions; it grows to the highest
// it holds (doubling), so a topic of one partition costs one pointer, not a whole chunk.
type chunk[T any] []*T

// Map holds a *T per partition. The zero value is empty and ready to use.
type Map[T any] struct {
	chunks []chunk[T]
	owned  []bool // owned[i]: chunks[i] is this Map's own, not shared with a Clone's source
	sparse map[int32]*T
	len    int
}

// Get returns the value of partition, or nil.
func (m *Map[T]) Get(partition int32) *T {
	if i := uint32(partition) / chunkSize; i < uint32(len(m.chunks)) {
		if c, j := m.chunks[i], uint32(partition)%chunkSize; j < uint32(len(c)) {
			return c[j]
		}
		return nil
	}
	return m.sparse[partition] // nil when sparse is
}

// Len returns how many partitions have a value (none for a nil m).
func (m *Map[T]) Len() int {
	if m == nil {
		return 0
	}
	return m.len
}

// Clone returns a copy of m that Set can change while m is being read. A nil m clones to an
// empty Map. The two share m's chunks until a Set on either copies the chunk it changes:
// Clone gives up m's claim on them, so it is, like Set, for m's one writer (readers of m may
// go on meanwhile).
func (m *Map[T]) Clone() *Map[T] {
	if m == nil {
		return new(Map[T])
	}
	c := &Map[T]{sparse: maps.Clone(m.sparse), len: m.len}
	if len(m.chunks) > 0 {
		c.chunks = append(make([]chunk[T], 0, len(m.chunks)), m.chunks...)
		c.owned = make([]bool, len(m.chunks))
		clear(m.owned)
	}
	return c
}

// Set stores v as the value of partition; a nil v removes it.
func (m *Map[T]) Set(partition int32, v *T) {
	if had := m.Get(partition) != nil; had != (v != nil) {
		if had {
			m.len--
		} else {
			m.len++
		}
	}
	i := uint32(partition) / chunkSize
	switch {
	case partition >= 0 && partition < DenseLimit && (v != nil || i < uint32(len(m.chunks))):
		if i >= uint32(len(m.chunks)) {
			n := int(i) + 1
			m.chunks = append(m.chunks, make([]chunk[T], n-len(m.chunks))...)
			m.owned = append(m.owned, make([]bool, n-len(m.owned))...)
		}
		c, j := m.chunks[i], int(uint32(partition)%chunkSize)
		switch {
		case j >= len(c) && v == nil:
			return
		case j >= len(c) || !m.owned[i]:
			// Grown, or copied: a chunk shared with the Map this one was cloned from, which
			// may be read, is never written in place.
			grown := make(chunk[T], max(len(c), min(max(j+1, 2*len(c)), chunkSize)))
			copy(grown, c)
			c = grown
		}
		m.chunks[i], m.owned[i] = c, true
		c[j] = v
	case v != nil:
		if m.sparse == nil {
			m.sparse = make(map[int32]*T)
		}
		m.sparse[partition] = v
	default:
		delete(m.sparse, partition)
	}
}

// AppendTo appends m's values to values: those indexed in partition order, then the others
// in no particular order.
func (m *Map[T]) AppendTo(values []*T) []*T {
	for _, c := range m.chunks {
		if c == nil {
			continue
		}
		for _, v := range c {
			if v != nil {
				values = append(values, v)
			}
		}
	}
	for _, v := range m.sparse {
		values = append(values, v)
	}
	return values
}
