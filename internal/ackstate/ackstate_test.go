package ackstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/inflight"
	"narad.dev/consume/offsets"
)

// sameSlice reports whether a and b are the same slice: both nil, or the same array, length
// and capacity.
func sameSlice[T any](a, b []T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return len(a) == len(b) && cap(a) == cap(b) && (cap(a) == 0 || &a[:1][0] == &b[:1][0])
}

func TestToInflight(t *testing.T) {
	for name, tc := range map[string]struct {
		in   offsets.State
		want inflight.State
	}{
		"zero": {},
		"none found": {
			in:   offsets.State{Frontier: -1, Incarnation: 7, HostIncarnation: 9},
			want: inflight.State{Frontier: -1, Incarnation: 7, HostIncarnation: 9},
		},
		"every field": {
			in: offsets.State{Found: true, Frontier: 41, Ahead: []offsets.Run{{First: 43, Last: 43}, {First: 50, Last: 52}},
				Attempts: []offsets.Attempt{{Offset: 42, Count: 3}, {Offset: 44, Count: 1}}, OmittedAttempts: 5,
				Quarantine: []int64{2, 45}, Requeued: []int64{2}, Incarnation: 1<<64 - 1, HostIncarnation: 11,
				Fence: 1 << 62, Epoch: 4, Unverified: true, KeyTails: []offsets.KeyTail{{Key: 9, From: 43}, {Key: 1 << 63, From: 51}}},
			want: inflight.State{Frontier: 41, AckedAhead: []inflight.Run{{First: 43, Last: 43}, {First: 50, Last: 52}},
				KeyTails:    []inflight.KeyTail{{Key: 9, From: 43}, {Key: 1 << 63, From: 51}},
				Attempts:    []inflight.Attempt{{Offset: 42, Count: 3}, {Offset: 44, Count: 1}},
				Quarantined: []int64{2, 45}, Requeued: []int64{2}, Incarnation: 1<<64 - 1, HostIncarnation: 11,
				Fence: 1 << 62, Epoch: 4},
		},
		"empty slices": { // runs, tails and attempts: nil; the offset sets: shared, so empty
			in: offsets.State{Ahead: []offsets.Run{}, Attempts: []offsets.Attempt{}, Quarantine: []int64{}, Requeued: []int64{},
				KeyTails: []offsets.KeyTail{}},
			want: inflight.State{Quarantined: []int64{}, Requeued: []int64{}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := ToInflight(&tc.in)
			require.Equal(t, tc.want, got)
			require.True(t, sameSlice(tc.in.Quarantine, got.Quarantined), "Quarantined is the state's slice")
			require.True(t, sameSlice(tc.in.Requeued, got.Requeued), "Requeued is the state's slice")
			if len(got.AckedAhead) > 0 {
				got.AckedAhead[0].First++
				require.NotEqual(t, got.AckedAhead[0], inflight.Run(tc.in.Ahead[0]), "AckedAhead is a copy")
			}
			if len(got.Attempts) > 0 {
				got.Attempts[0].Count++
				require.NotEqual(t, got.Attempts[0], inflight.Attempt(tc.in.Attempts[0]), "Attempts is a copy")
			}
			if len(got.KeyTails) > 0 {
				got.KeyTails[0].From++
				require.NotEqual(t, got.KeyTails[0], inflight.KeyTail(tc.in.KeyTails[0]), "KeyTails is a copy")
			}
		})
	}
}

func TestToOffsets(t *testing.T) {
	every := inflight.State{Frontier: 41, AckedAhead: []inflight.Run{{First: 43, Last: 43}, {First: 50, Last: 52}},
		KeyTails: []inflight.KeyTail{{Key: 3, From: 50}},
		Attempts: []inflight.Attempt{{Offset: 42, Count: 3}}, Quarantined: []int64{2, 45}, Requeued: []int64{2},
		Incarnation: 8, HostIncarnation: 11, Fence: 1 << 62, Epoch: 4,
		// The shard's memory: not carried.
		NothingPersisted: true, Held: []inflight.Held{{Offset: 44, Nonce: 3}}, Corrupt: []int64{46},
		GrantUntil: time.Unix(100, 0)}
	stale := func() offsets.State { // a reused dst: its buffers and the fields it alone has
		return offsets.State{Found: true, Frontier: 3, Ahead: make([]offsets.Run, 1, 4),
			Attempts: make([]offsets.Attempt, 2, 4), KeyTails: make([]offsets.KeyTail, 3, 4), OmittedAttempts: 6, Quarantine: []int64{1},
			Requeued: []int64{1}, Incarnation: 1, HostIncarnation: 2, Fence: 3, Epoch: 4, Unverified: true}
	}
	for name, tc := range map[string]struct {
		dst  offsets.State
		in   inflight.State
		want offsets.State
	}{
		"zero": {},
		"every field, fresh dst": {
			dst: offsets.State{Found: true}, in: every,
			want: offsets.State{Found: true, Frontier: 41, Ahead: []offsets.Run{{First: 43, Last: 43}, {First: 50, Last: 52}},
				KeyTails: []offsets.KeyTail{{Key: 3, From: 50}},
				Attempts: []offsets.Attempt{{Offset: 42, Count: 3}}, Quarantine: []int64{2, 45}, Requeued: []int64{2},
				Incarnation: 8, HostIncarnation: 11, Fence: 1 << 62, Epoch: 4},
		},
		"every field, reused dst": {
			dst: stale(), in: every,
			want: offsets.State{Found: true, Frontier: 41, Ahead: []offsets.Run{{First: 43, Last: 43}, {First: 50, Last: 52}},
				KeyTails: []offsets.KeyTail{{Key: 3, From: 50}},
				Attempts: []offsets.Attempt{{Offset: 42, Count: 3}}, OmittedAttempts: 6, Quarantine: []int64{2, 45},
				Requeued: []int64{2}, Incarnation: 8, HostIncarnation: 11, Fence: 1 << 62, Epoch: 4, Unverified: true},
		},
		"nothing, reused dst": { // the buffers stay, emptied
			dst: stale(), in: inflight.State{Frontier: 9},
			want: offsets.State{Found: true, Frontier: 9, Ahead: []offsets.Run{}, Attempts: []offsets.Attempt{},
				KeyTails: []offsets.KeyTail{}, OmittedAttempts: 6, Unverified: true},
		},
		"empty slices, fresh dst": { // runs and attempts: nil; the offset sets: shared, so empty
			in:   inflight.State{AckedAhead: []inflight.Run{}, Attempts: []inflight.Attempt{}, Quarantined: []int64{}, Requeued: []int64{}},
			want: offsets.State{Quarantine: []int64{}, Requeued: []int64{}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dst := tc.dst
			ahead, attempts, tails := dst.Ahead, dst.Attempts, dst.KeyTails
			ToOffsets(&dst, &tc.in)
			require.Equal(t, tc.want, dst)
			require.True(t, sameSlice(tc.in.Quarantined, dst.Quarantine), "Quarantine is the state's slice")
			require.True(t, sameSlice(tc.in.Requeued, dst.Requeued), "Requeued is the state's slice")
			if cap(ahead) >= len(tc.in.AckedAhead) && ahead != nil {
				require.True(t, sameSlice(ahead[:len(dst.Ahead)], dst.Ahead), "Ahead reuses dst's buffer")
			}
			if cap(attempts) >= len(tc.in.Attempts) && attempts != nil {
				require.True(t, sameSlice(attempts[:len(dst.Attempts)], dst.Attempts), "Attempts reuses dst's buffer")
			}
			if cap(tails) >= len(tc.in.KeyTails) && tails != nil {
				require.True(t, sameSlice(tails[:len(dst.KeyTails)], dst.KeyTails), "KeyTails reuses dst's buffer")
			}
		})
	}
}

// A committer's Source converts each partition's snapshot into the same dst every tick: once
// dst's buffers are large enough, nothing is allocated.
func TestToOffsetsReusedAllocatesNothing(t *testing.T) {
	st := inflight.State{Frontier: 41, AckedAhead: []inflight.Run{{First: 43, Last: 43}, {First: 50, Last: 52}},
		Attempts: []inflight.Attempt{{Offset: 42, Count: 3}}, Quarantined: []int64{2},
		KeyTails: []inflight.KeyTail{{Key: 7, From: 43}, {Key: 8, From: 50}}}
	var dst offsets.State
	ToOffsets(&dst, &st)
	require.Zero(t, testing.AllocsPerRun(100, func() { ToOffsets(&dst, &st) }))
}

// slice draws a slice that is nil, empty or holds up to 20 elements of gen.
func slice[T any](t *rapid.T, label string, gen *rapid.Generator[T]) []T {
	switch rapid.IntRange(0, 2).Draw(t, label+"-shape") {
	case 0:
		return nil
	case 1:
		return []T{}
	}
	return rapid.SliceOfN(gen, 1, 20).Draw(t, label)
}

var (
	genOffset = rapid.Int64Range(-1, 1<<62)
	genRun    = rapid.Custom(func(t *rapid.T) offsets.Run {
		first := genOffset.Draw(t, "first")
		return offsets.Run{First: first, Last: first + rapid.Int64Range(0, 1<<20).Draw(t, "len")}
	})
	genKeyTail = rapid.Custom(func(t *rapid.T) offsets.KeyTail {
		return offsets.KeyTail{Key: rapid.Uint64Min(1).Draw(t, "key"), From: genOffset.Draw(t, "from")}
	})
	genAttempt = rapid.Custom(func(t *rapid.T) offsets.Attempt {
		return offsets.Attempt{Offset: genOffset.Draw(t, "offset"), Count: rapid.Uint32().Draw(t, "count")}
	})
)

func genOffsetsState(t *rapid.T) offsets.State {
	return offsets.State{
		Found:           rapid.Bool().Draw(t, "found"),
		Frontier:        genOffset.Draw(t, "frontier"),
		Ahead:           slice(t, "ahead", genRun),
		KeyTails:        slice(t, "tails", genKeyTail),
		Attempts:        slice(t, "attempts", genAttempt),
		OmittedAttempts: rapid.IntRange(0, 1000).Draw(t, "omitted"),
		Quarantine:      slice(t, "quarantine", genOffset),
		Requeued:        slice(t, "requeued", genOffset),
		Incarnation:     rapid.Uint64().Draw(t, "incarnation"),
		HostIncarnation: rapid.Uint64().Draw(t, "host"),
		Fence:           rapid.Uint64().Draw(t, "fence"),
		Epoch:           rapid.Uint64().Draw(t, "epoch"),
		Unverified:      rapid.Bool().Draw(t, "unverified"),
	}
}

// orNil is s, or nil when s is empty: how a converter that copies gives an empty set.
func orNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// A committer's state goes to a shard and back unchanged, every field the shard carries
// included, whatever dst held before; the fields the shard has no place for are dst's.
func TestRoundTripFromOffsets(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genOffsetsState(t)
		dst := genOffsetsState(t) // a reused dst, with buffers or without
		before := dst
		sh := ToInflight(&in)
		require.Zero(t, sh.NothingPersisted)
		require.Nil(t, sh.Held)
		require.Nil(t, sh.Corrupt)
		require.Zero(t, sh.GrantUntil)
		require.Equal(t, len(in.Ahead), len(sh.AckedAhead))
		require.Equal(t, len(in.Attempts), len(sh.Attempts))
		require.Equal(t, len(in.KeyTails), len(sh.KeyTails))
		ToOffsets(&dst, &sh)
		want := in
		want.Found, want.OmittedAttempts, want.Unverified = before.Found, before.OmittedAttempts, before.Unverified
		// Runs and attempts are copied: nil in the shard's form when there are none, then
		// dst's buffers emptied (nil if dst had none).
		want.Ahead, want.Attempts, want.KeyTails = orNil(in.Ahead), orNil(in.Attempts), orNil(in.KeyTails)
		if want.Ahead == nil && before.Ahead != nil {
			want.Ahead = []offsets.Run{}
		}
		if want.KeyTails == nil && before.KeyTails != nil {
			want.KeyTails = []offsets.KeyTail{}
		}
		if want.Attempts == nil && before.Attempts != nil {
			want.Attempts = []offsets.Attempt{}
		}
		require.Equal(t, want, dst)
		require.True(t, sameSlice(in.Quarantine, dst.Quarantine))
		require.True(t, sameSlice(in.Requeued, dst.Requeued))
	})
}

// A shard's snapshot goes to a committer and back unchanged but for the shard's memory
// (NothingPersisted, Held, Corrupt, GrantUntil), which is not persisted.
func TestRoundTripFromInflight(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := genOffsetsState(t)
		in := inflight.State{Frontier: o.Frontier, Quarantined: o.Quarantine, Requeued: o.Requeued,
			Incarnation: o.Incarnation, HostIncarnation: o.HostIncarnation, Fence: o.Fence, Epoch: o.Epoch,
			NothingPersisted: rapid.Bool().Draw(t, "nothing"),
			Corrupt:          slice(t, "corrupt", genOffset),
			GrantUntil:       time.Unix(0, rapid.Int64().Draw(t, "until")),
		}
		if o.Ahead != nil {
			in.AckedAhead = []inflight.Run{}
			for _, r := range o.Ahead {
				in.AckedAhead = append(in.AckedAhead, inflight.Run(r))
			}
		}
		if o.KeyTails != nil {
			in.KeyTails = []inflight.KeyTail{}
			for _, k := range o.KeyTails {
				in.KeyTails = append(in.KeyTails, inflight.KeyTail(k))
			}
		}
		if o.Attempts != nil {
			in.Attempts = []inflight.Attempt{}
			for _, a := range o.Attempts {
				in.Attempts = append(in.Attempts, inflight.Attempt(a))
			}
		}
		for _, off := range slice(t, "held", genOffset) {
			in.Held = append(in.Held, inflight.Held{Offset: off, Nonce: rapid.Uint64().Draw(t, "nonce")})
		}
		var mid offsets.State
		ToOffsets(&mid, &in)
		got := ToInflight(&mid)
		want := in
		want.NothingPersisted, want.Held, want.Corrupt, want.GrantUntil = false, nil, nil, time.Time{}
		want.AckedAhead, want.Attempts, want.KeyTails = orNil(in.AckedAhead), orNil(in.Attempts), orNil(in.KeyTails)
		require.Equal(t, want, got)
		require.True(t, sameSlice(in.Quarantined, got.Quarantined))
		require.True(t, sameSlice(in.Requeued, got.Requeued))
	})
}
