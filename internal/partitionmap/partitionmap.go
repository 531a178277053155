package partitionmap

import (
	"maps"
	"slices"
)

// DenseLimit bounds the partitions a Map's slice holds (32 KiB of pointers at most); a
// partition at or above it, or a negative one, is kept in a map.
const DenseLimit = 4096

// Map holds a *T per partition. The zero value is empty and ready to use.
type Map[T any] struct {
	dense  []*T
	sparse map[int32]*T
	len    int
}

// Get returns the value of partition, or nil.
func (m *Map[T]) Get(partition int32) *T {
	if uint32(partition) < uint32(len(m.dense)) {
		return m.dense[partition]
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
// empty Map.
func (m *Map[T]) Clone() *Map[T] {
	if m == nil {
		return new(Map[T])
	}
	return &Map[T]{dense: slices.Clone(m.dense), sparse: maps.Clone(m.sparse), len: m.len}
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
	switch {
	case uint32(partition) < uint32(len(m.dense)):
		m.dense[partition] = v
	case partition >= 0 && partition < DenseLimit && v != nil:
		m.dense = append(m.dense, make([]*T, int(partition)+1-len(m.dense))...)
		m.dense[partition] = v
	case v != nil:
		if m.sparse == nil {
			m.sparse = make(map[int32]*T)
		}
		m.sparse[partition] = v
	default:
		delete(m.sparse, partition)
	}
}

// AppendTo appends m's values to values: those of the slice in partition order, then the
// others in no particular order.
func (m *Map[T]) AppendTo(values []*T) []*T {
	for _, v := range m.dense {
		if v != nil {
			values = append(values, v)
		}
	}
	for _, v := range m.sparse {
		values = append(values, v)
	}
	return values
}
