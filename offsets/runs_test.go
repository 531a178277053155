package offsets

import (
	"cmp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// runsOf returns the runs of the ascending offsets offs.
func runsOf(offs ...int64) []Run { return AppendRuns(nil, offs) }

// offsetsOf returns every offset of runs, ascending.
func offsetsOf(runs []Run) []int64 {
	var offs []int64
	for _, r := range runs {
		for off := r.First; off <= r.Last; off++ {
			offs = append(offs, off)
		}
	}
	return offs
}

// runsContain reports whether one of the ascending runs holds off.
func runsContain(runs []Run, off int64) bool {
	i, _ := slices.BinarySearchFunc(runs, off, func(r Run, off int64) int { return cmp.Compare(r.Last, off) })
	return i < len(runs) && runs[i].First <= off
}

func TestAppendRuns(t *testing.T) {
	require.Equal(t, []Run{{1, 3}, {5, 5}, {7, 8}}, AppendRuns(nil, []int64{1, 2, 3, 5, 7, 8}))
	require.Equal(t, []Run{{0, 0}, {2, 2}}, AppendRuns([]Run{{0, 0}}, []int64{2}), "appends after dst's runs")
	require.Empty(t, AppendRuns(nil, nil))
	offs := []int64{4, 9, 10, 11, 30}
	require.True(t, slices.Equal(offs, offsetsOf(AppendRuns(nil, offs))))
}
