package inflight

import (
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The lease table against a model, a Go map: every get, len and range agrees, whatever the
// offsets. They are drawn as a shard's are, mostly from a window that slides up (grants at
// its top, settles anywhere in it), and now and then far below or above it, or the vacant
// offset itself, so that slots collide, the ring grows and far fills and empties.
func TestLeaseTableAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var table leaseTable
		model := map[int64]pending{}
		base := int64(0)
		offset := func(t *rapid.T) int64 {
			switch rapid.IntRange(0, 9).Draw(t, "where") {
			case 0:
				return rapid.Int64Range(-1<<20, 1<<20).Draw(t, "far")
			case 1:
				return rapid.SampledFrom([]int64{vacant, math.MaxInt64, -1, 0}).Draw(t, "edge")
			}
			return base + rapid.Int64Range(0, 300).Draw(t, "in window")
		}
		check := func(t *rapid.T) {
			require.Equal(t, len(model), table.len())
			got := map[int64]pending{}
			table.all(func(off int64, p pending) bool {
				_, twice := got[off]
				require.False(t, twice, "offset %d yielded twice", off)
				got[off] = p
				return true
			})
			require.Equal(t, model, got)
		}
		t.Repeat(map[string]func(*rapid.T){
			"set": func(t *rapid.T) {
				off := offset(t)
				p := pending{nonce: rapid.Uint64().Draw(t, "nonce"), attempts: rapid.Uint32().Draw(t, "attempts")}
				table.set(off, p)
				model[off] = p
			},
			"grant at the top": func(t *rapid.T) {
				off := base + 300 + rapid.Int64Range(0, 20).Draw(t, "above")
				table.set(off, pending{nonce: uint64(off)})
				model[off] = pending{nonce: uint64(off)}
			},
			"remove": func(t *rapid.T) {
				off := offset(t)
				if len(model) > 0 && rapid.Bool().Draw(t, "one held") {
					off = rapid.SampledFrom(slices.Sorted(maps.Keys(model))).Draw(t, "held")
				}
				table.remove(off)
				delete(model, off)
			},
			"get": func(t *rapid.T) {
				off := offset(t)
				if len(model) > 0 && rapid.Bool().Draw(t, "one held") {
					off = rapid.SampledFrom(slices.Sorted(maps.Keys(model))).Draw(t, "held")
				}
				want, wantOK := model[off]
				got, ok := table.get(off)
				require.Equal(t, wantOK, ok)
				require.Equal(t, want, got)
				require.Equal(t, want, table.lookup(off))
			},
			"slide": func(t *rapid.T) {
				base += rapid.Int64Range(1, 200).Draw(t, "by")
			},
			"remove below the window while ranging": func(t *rapid.T) {
				table.all(func(off int64, p pending) bool {
					if off < base {
						table.remove(off)
					}
					return true
				})
				maps.DeleteFunc(model, func(off int64, _ pending) bool { return off < base })
			},
			"reset": func(t *rapid.T) {
				if rapid.IntRange(0, 20).Draw(t, "rarely") == 0 {
					table.reset()
					clear(model)
				}
			},
			"": check,
		})
	})
}
