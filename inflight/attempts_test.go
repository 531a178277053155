package inflight

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// lowestAttempts keeps exactly the k lowest offsets, whatever the order they come in: a
// sort of the whole slice is the model.
func TestLowestAttemptsIsASortsPrefix(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		offs := rapid.SliceOfDistinct(rapid.Int64Range(-1, 1<<40), rapid.ID[int64]).Draw(t, "offsets")
		as := make([]Attempt, len(offs))
		for i, off := range offs {
			as[i] = Attempt{Offset: off, Count: uint32(i + 1)}
		}
		k := rapid.IntRange(-1, len(as)+2).Draw(t, "k")
		want := slices.Clone(as)
		slices.SortFunc(want, func(a, b Attempt) int { return cmp.Compare(a.Offset, b.Offset) })
		want = want[:min(max(k, 0), len(want))]

		got, dropped := lowestAttempts(as, k)
		slices.SortFunc(got, func(a, b Attempt) int { return cmp.Compare(a.Offset, b.Offset) })
		require.Equal(t, want, got)
		require.Equal(t, len(offs)-len(want), dropped)
	})
}

// SnapshotCapped is Snapshot with the attempts cut to the lowest maxAttempts, the rest
// counted; everything else is the same.
func TestSnapshotCappedIsSnapshotCut(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: time.Second, MaxInFlight: 1 << 10, MaxAckedAhead: 1 << 10, MaxDeliveries: 0}}, State{Frontier: -1})
		now := time.Unix(1, 0)
		// Mostly acked leases leave few entries over a wide span of offsets (the snapshot
		// then goes over the entries); mostly held ones are walked in order.
		n := rapid.IntRange(0, 300).Draw(t, "leases")
		acked := rapid.IntRange(0, 10).Draw(t, "ackedTenths")
		for range n {
			l, err := s.ReserveNext(now, 1<<20)
			if err != nil {
				require.ErrorIs(t, err, ErrAckedAheadCap)
				break
			}
			switch fate := rapid.IntRange(0, 9).Draw(t, "fate"); {
			case fate < acked:
				require.NoError(t, s.Ack(now, l.Handle))
			case fate == 9:
				require.NoError(t, s.Nack(now, l.Handle, 0))
			}
		}
		var full State
		s.Snapshot(&full)
		k := rapid.IntRange(0, len(full.Attempts)+1).Draw(t, "maxAttempts")
		var capped State
		omitted := s.SnapshotCapped(&capped, k)
		want := full
		want.Attempts = full.Attempts[:min(k, len(full.Attempts))]
		require.Equal(t, want, capped)
		require.Equal(t, len(full.Attempts)-len(want.Attempts), omitted)

		var unbounded State
		require.Zero(t, s.SnapshotCapped(&unbounded, math.MaxInt))
		require.Equal(t, full, unbounded)
	})
}

// BenchmarkSnapshot is a committer's snapshot of a partition holding n leases, all of them
// or capped at a slot's worth (2,028) of attempts.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{1024, 100_000} {
		s := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: time.Hour, MaxInFlight: n, MaxAckedAhead: n}}, State{Frontier: -1})
		now := time.Unix(1, 0)
		for range n {
			if _, err := s.ReserveNext(now, int64(n)); err != nil {
				b.Fatal(err)
			}
		}
		for _, capped := range []bool{false, true} {
			name := "all"
			if capped {
				name = "capped"
			}
			b.Run(fmt.Sprintf("%s/leases=%d", name, n), func(b *testing.B) {
				var st State
				b.ReportAllocs()
				for b.Loop() {
					if capped {
						s.SnapshotCapped(&st, 2028)
					} else {
						s.Snapshot(&st)
					}
				}
			})
		}
	}
}
