package router

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// An unconfirmedSet holds what a map by whole handle holds, whatever the nonces clash
// (records of one nonce in several partitions: nonces are drawn per partition) and however
// its slots fill, grow and empty: each record is kept, dropped and taken on its own.
func TestUnconfirmedSetIsAMapOfHandles(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var set unconfirmedSet
		model := map[Handle]string{}
		// Few partitions and nonces, so that nonces clash often; offsets enough to fill
		// the slots past their first size.
		handle := rapid.Custom(func(t *rapid.T) Handle {
			return Handle{Partition: rapid.Int32Range(0, 2).Draw(t, "partition"),
				Offset: rapid.Int64Range(0, 80).Draw(t, "offset"), Nonce: rapid.Uint64Range(1, 3).Draw(t, "nonce")}
		})
		for range rapid.IntRange(1, 400).Draw(t, "steps") {
			switch rapid.IntRange(0, 20).Draw(t, "op") {
			case 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11:
				h, owner := handle.Draw(t, "put"), rapid.SampledFrom([]string{"a", "b"}).Draw(t, "owner")
				set.put(h, owner)
				model[h] = owner
			case 12, 13, 14, 15, 16, 17, 18, 19:
				h := handle.Draw(t, "drop")
				set.drop(h)
				delete(model, h)
			default:
				got := set.takeByOwner()
				want := map[string][]Handle{}
				for h, owner := range model {
					want[owner] = append(want[owner], h)
				}
				clear(model)
				require.Len(t, got, len(want))
				for owner, handles := range want {
					assert.ElementsMatch(t, handles, got[owner], "owner %s", owner)
				}
			}
			require.Equal(t, len(model), set.len())
		}
		got := set.takeByOwner()
		var all []Handle
		for _, handles := range got {
			all = append(all, handles...)
		}
		want := make([]Handle, 0, len(model))
		for h := range model {
			want = append(want, h)
		}
		assert.ElementsMatch(t, want, all)
		assert.Zero(t, set.len())
		assert.False(t, slices.ContainsFunc(all, func(h Handle) bool { return h.Nonce == 0 }))
	})
}

// BenchmarkUnconfirmedSet puts the records of a refill as a gateway hands them over (runs of
// one owner, two owners in turn), then drops them as their acks are forwarded: one put and
// one drop per record (b.N records).
func BenchmarkUnconfirmedSet(b *testing.B) {
	const refill = 400
	handles := make([]Handle, refill)
	for i := range handles {
		handles[i] = Handle{Partition: int32(i / 100), Offset: int64(1_000 + i), Nonce: uint64(i+1) * 0x9E3779B97F4A7C15}
	}
	owners := []string{"node-a", "node-b"}
	var set unconfirmedSet
	b.ReportAllocs()
	round := 0
	for i := 0; i < b.N; i += refill {
		owner := owners[round%2]
		for j := range handles {
			handles[j].Offset += refill
			set.put(handles[j], owner)
		}
		for _, h := range handles {
			set.drop(h)
		}
		round++
	}
	if set.len() != 0 {
		b.Fatalf("%d left", set.len())
	}
}
