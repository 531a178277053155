package handoff

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/inflight"
)

var now = time.Unix(1_700_000_000, 0)

// example is a state with every section filled.
func example() Partition {
	return Partition{
		Topic: "orders", Partition: 7, ID: 0xfeed, Live: true,
		State: inflight.State{
			Frontier: 10, Incarnation: 0xabc, Fence: 12345,
			AckedAhead:  []inflight.Run{{First: 12, Last: 13}, {First: 20, Last: 20}},
			Attempts:    []inflight.Attempt{{Offset: 11, Count: 3}, {Offset: 14, Count: 300}},
			Quarantined: []int64{5, 6, 11},
			Requeued:    []int64{2, 9},
			Corrupt:     []int64{16, 18},
			Held: []inflight.Held{
				{Offset: 9, Nonce: 77, Until: now.Add(3 * time.Second), LeasedAt: now.Add(-time.Second), Attempts: 1, Reason: inflight.ReasonRequeued},
				{Offset: 11, Attempts: 3, Reason: inflight.ReasonNacked},
				{Offset: 14, Nonce: 99, Until: now.Add(30 * time.Second), LeasedAt: now, Attempts: 300, Reason: inflight.ReasonExpired},
				{Offset: 15, Delayed: true, Until: now.Add(time.Minute), Attempts: 2, Reason: inflight.ReasonNacked},
			},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	p := example()
	b := Append(nil, &p, now)
	got, err := Decode(b, now)
	require.NoError(t, err)
	require.Equal(t, p, got)
}

// Times travel as durations: decoded on a clock 5 s ahead, every lease and delay ends 5 s
// later by that clock, the same time left.
func TestTimesTravelAsDurations(t *testing.T) {
	p := example()
	b := Append(nil, &p, now)
	skew := 5 * time.Second
	got, err := Decode(b, now.Add(skew))
	require.NoError(t, err)
	for i, h := range got.State.Held {
		want := p.State.Held[i]
		if !want.Until.IsZero() {
			require.Equal(t, want.Until.Add(skew), h.Until)
		}
		if !want.LeasedAt.IsZero() {
			require.Equal(t, want.LeasedAt.Add(skew), h.LeasedAt)
		}
	}
}

// A lease already expired at the encoding travels with no time left.
func TestPassedExpiryTravelsAsZero(t *testing.T) {
	p := example()
	p.State.Held[0].Until = now.Add(-time.Hour)
	got, err := Decode(Append(nil, &p, now), now)
	require.NoError(t, err)
	require.Equal(t, now, got.State.Held[0].Until)
}

// Every single-bit flip and every truncation is refused with ErrDamaged (the checksum
// catches them; a flip in the version byte may read as ErrVersion).
func TestEveryFlipAndTruncationIsRefused(t *testing.T) {
	for _, host := range []uint64{0, 0xb0b, 0xc0c} { // unbound, bound, bound with key tails
		p := example()
		p.State.HostIncarnation = host
		if host == 0xc0c {
			p.State.Epoch, p.State.KeyTails = 3, exampleTails()
		}
		b := Append(nil, &p, now)
		for i := range len(b) * 8 {
			c := slices.Clone(b)
			c[i/8] ^= 1 << (i % 8)
			_, err := Decode(c, now)
			require.Truef(t, errors.Is(err, ErrDamaged) || errors.Is(err, ErrVersion), "bit %d: %v", i, err)
		}
		for n := range len(b) {
			_, err := Decode(b[:n], now)
			require.ErrorIsf(t, err, ErrDamaged, "truncated to %d", n)
		}
		_, err := Decode(append(slices.Clone(b), 0), now)
		require.ErrorIs(t, err, ErrDamaged)
	}
}

func TestNewerVersionIsRefused(t *testing.T) {
	p := example()
	b := Append(nil, &p, now)
	b[4] = Version + 1
	b = reseal(b)
	_, err := Decode(b, now)
	require.ErrorIs(t, err, ErrVersion)
}

// A state kept under an ownership epoch carries it (flag bit 2 and 8 trailing bytes); one
// without is the bytes of a release before epochs.
func TestEpochIsOptional(t *testing.T) {
	p := example()
	without := Append(nil, &p, now)
	p.State.Epoch = 1 << 40
	with := Append(nil, &p, now)
	require.Equal(t, without[5]|flagEpoch, with[5])
	require.Len(t, with, len(without)+8)
	got, err := Decode(with, now)
	require.NoError(t, err)
	require.Equal(t, p, got)

	// An epoch of 0 under the flag is nonsense: Append never writes it.
	forged := slices.Clone(with)
	clear(forged[len(forged)-12 : len(forged)-4])
	_, err = Decode(reseal(forged), now)
	require.ErrorIs(t, err, ErrDamaged)
}

// exampleTails are key tails for example's state (frontier 10): an ordered topic's records
// parked in its acked-ahead runs.
func exampleTails() []inflight.KeyTail {
	return []inflight.KeyTail{{Key: 0x0102030405060708, From: 12}, {Key: 9, From: 20}}
}

// Key tails travel under flag bit 3, after the epoch; a state without them is the bytes of a
// release before them, which refuses one with them as damaged (bit 3 is not among the flags
// it knows) rather than read its parked records as acked.
func TestKeyTailsAreOptional(t *testing.T) {
	for _, epoch := range []uint64{0, 1 << 40} {
		p := example()
		p.State.Epoch = epoch
		without := Append(nil, &p, now)
		p.State.KeyTails = exampleTails()
		with := Append(nil, &p, now)
		require.Equal(t, without[5]|flagKeyTails, with[5])
		require.Equal(t, without[6:len(without)-4], with[6:len(without)-4], "the fields before them where they were")
		require.Equal(t, []byte{2, 1, 1, 2, 3, 4, 5, 6, 7, 8, 7, 0, 0, 0, 0, 0, 0, 0, 9},
			with[len(without)-4:len(with)-4], "count, then per tail the gap from the frontier or the previous From, and the key")
		got, err := Decode(with, now)
		require.NoError(t, err)
		require.Equal(t, p, got)

		// A release before key tails knows bits 0 to 2 only, and refuses any other as damage.
		const olderFlags = flagLive | flagHostIncarnation | flagEpoch
		require.Zero(t, without[5]&^olderFlags, "read by a release before key tails")
		require.NotZero(t, with[5]&^olderFlags, "refused by a release before key tails")
	}
}

// Key tails that break their rules, written or forged, are refused as damage.
func TestKeyTailsNonsenseIsRefused(t *testing.T) {
	many := make([]inflight.KeyTail, MaxKeyTails+1)
	for i := range many {
		many[i] = inflight.KeyTail{Key: uint64(i + 1), From: int64(11 + i)}
	}
	for name, tails := range map[string][]inflight.KeyTail{
		"key 0":                 {{Key: 0, From: 12}},
		"at the frontier":       {{Key: 1, From: 10}},
		"below the frontier":    {{Key: 1, From: 3}},
		"not ascending":         {{Key: 1, From: 20}, {Key: 2, From: 12}},
		"the same From twice":   {{Key: 1, From: 12}, {Key: 2, From: 12}},
		"the same key twice":    {{Key: 1, From: 12}, {Key: 2, From: 13}, {Key: 1, From: 20}},
		"more than MaxKeyTails": many,
	} {
		t.Run(name, func(t *testing.T) {
			p := example()
			p.State.KeyTails = tails
			_, err := Decode(Append(nil, &p, now), now)
			require.ErrorIs(t, err, ErrDamaged)
		})
	}
	p := example()
	p.State.KeyTails = many[:MaxKeyTails]
	_, err := Decode(Append(nil, &p, now), now)
	require.NoError(t, err, "MaxKeyTails is allowed")

	// The flag with a count of 0, and with the tails cut off.
	p = example()
	b := Append(nil, &p, now)
	b[5] |= flagKeyTails
	zero := append(slices.Clone(b[:len(b)-4]), 0, 0, 0, 0, 0)
	_, err = Decode(reseal(zero), now)
	require.ErrorIs(t, err, ErrDamaged)
	_, err = Decode(reseal(slices.Clone(b)), now)
	require.ErrorIs(t, err, ErrDamaged)
}

// reseal recomputes the checksum of b, so a test can forge well-checksummed nonsense.
func reseal(b []byte) []byte {
	body := b[:len(b)-4]
	return binary.BigEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, castagnoli))
}

// Well-checksummed nonsense (as a buggy or hostile writer makes it) is refused too.
func TestCheckedNonsenseIsRefused(t *testing.T) {
	cases := map[string]func(p *Partition){
		"empty topic":           func(p *Partition) { p.Topic = "" },
		"negative partition":    func(p *Partition) { p.Partition = -1 },
		"incarnation 0":         func(p *Partition) { p.State.Incarnation = 0 },
		"id 0":                  func(p *Partition) { p.ID = 0 },
		"frontier below -1":     func(p *Partition) { p.State.Frontier = -2 },
		"requeued above":        func(p *Partition) { p.State.Requeued = []int64{11} },
		"reason out of range":   func(p *Partition) { p.State.Held[1].Reason = 9 },
		"attempt count 0":       func(p *Partition) { p.State.Attempts[0].Count = 0 },
		"acked at the frontier": func(p *Partition) { p.State.AckedAhead = []inflight.Run{{First: 10, Last: 10}} },
	}
	cases["bound to host incarnation 0"] = nil // forged below: Append writes no field for 0
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			p := example()
			var b []byte
			if mutate != nil {
				mutate(&p)
				b = Append(nil, &p, now)
			} else {
				p.State.HostIncarnation = 1
				b = Append(nil, &p, now)
				clear(b[len(b)-12 : len(b)-4])
				b = reseal(b)
			}
			_, err := Decode(b, now)
			require.ErrorIs(t, err, ErrDamaged)
		})
	}
}

// The host incarnation a state is bound to is optional: a state bound to none encodes as the
// releases before the field did (flag bit 1 clear, no trailing field), so they read it; a
// bound one sets bit 1 and carries 8 bytes more, which those releases refuse as damaged
// (they know no bit 1), as they do any flag they do not know.
func TestHostIncarnationIsOptional(t *testing.T) {
	unbound := example()
	bound := example()
	bound.State.HostIncarnation = 0x0123456789abcdef
	ub, bb := Append(nil, &unbound, now), Append(nil, &bound, now)
	require.Zero(t, ub[5]&flagHostIncarnation)
	require.NotZero(t, bb[5]&flagHostIncarnation)
	require.Len(t, bb, len(ub)+8)
	require.Equal(t, ub[6:len(ub)-4], bb[6:len(ub)-4], "the fields before it where they were")
	require.Equal(t, uint64(0x0123456789abcdef), binary.BigEndian.Uint64(bb[len(bb)-12:]))
	got, err := Decode(bb, now)
	require.NoError(t, err)
	require.Equal(t, bound, got)

	unknown := slices.Clone(ub)
	unknown[5] |= 1 << 2
	_, err = Decode(reseal(unknown), now)
	require.ErrorIs(t, err, ErrDamaged, "a flag no release defines")
}

func TestRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPartition(t)
		got, err := Decode(Append(nil, &p, now), now)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !equal(p, got) {
			t.Fatalf("round trip:\n%+v\n%+v", p, got)
		}
	})
}

func genOffsets(t *rapid.T, label string, from int64) []int64 {
	n := rapid.IntRange(0, 20).Draw(t, label+"-n")
	var offs []int64
	prev := from
	for range n {
		prev += 1 + rapid.Int64Range(0, 1<<40).Draw(t, label)
		offs = append(offs, prev)
	}
	return offs
}

// genKeyTails draws key tails above from: none half the time (the bytes of a release before
// them), else up to MaxKeyTails, ascending by From, of distinct nonzero keys.
func genKeyTails(t *rapid.T, from int64) []inflight.KeyTail {
	if !rapid.Bool().Draw(t, "tails") {
		return nil
	}
	keys := rapid.SliceOfNDistinct(rapid.Uint64Min(1), 1, MaxKeyTails, rapid.ID[uint64]).Draw(t, "tail keys")
	tails := make([]inflight.KeyTail, len(keys))
	for i, k := range keys {
		from += 1 + rapid.Int64Range(0, 1<<40).Draw(t, "tail gap")
		tails[i] = inflight.KeyTail{Key: k, From: from}
	}
	return tails
}

// genRuns draws maximal runs above from (none touches the next), as a shard's snapshot holds.
func genRuns(t *rapid.T, label string, from int64) []inflight.Run {
	n := rapid.IntRange(0, 20).Draw(t, label+"-n")
	var runs []inflight.Run
	prev := from
	for range n {
		first := prev + 2 + rapid.Int64Range(0, 1<<40).Draw(t, label)
		if len(runs) == 0 {
			first-- // the first may start right above from
		}
		r := inflight.Run{First: first, Last: first + rapid.Int64Range(0, 40).Draw(t, label+"-len")}
		runs = append(runs, r)
		prev = r.Last
	}
	return runs
}

func genPartition(t *rapid.T) Partition {
	frontier := rapid.Int64Range(-1, 1<<50).Draw(t, "frontier")
	p := Partition{
		Topic:     rapid.StringN(1, 40, 250).Draw(t, "topic"),
		Partition: rapid.Int32Range(0, 1<<30).Draw(t, "partition"),
		ID:        rapid.Uint64Min(1).Draw(t, "id"),
		Live:      rapid.Bool().Draw(t, "live"),
		State: inflight.State{
			Frontier:    frontier,
			Incarnation: rapid.Uint64Min(1).Draw(t, "incarnation"),
			Fence:       rapid.Uint64().Draw(t, "fence"),
			// Unbound (0) half the time: the bytes of a state before the binding; and with no
			// epoch half the time: a host that grants none.
			HostIncarnation: rapid.SampledFrom([]uint64{0, rapid.Uint64Min(1).Draw(t, "host")}).Draw(t, "bound"),
			Epoch:           rapid.SampledFrom([]uint64{0, rapid.Uint64Min(1).Draw(t, "epoch")}).Draw(t, "granted"),
			AckedAhead:      genRuns(t, "ahead", frontier),
			KeyTails:        genKeyTails(t, frontier),
			Quarantined:     genOffsets(t, "quarantine", -1),
			Corrupt:         genOffsets(t, "corrupt", frontier),
		},
	}
	for _, off := range genOffsets(t, "attempts", frontier) {
		p.State.Attempts = append(p.State.Attempts, inflight.Attempt{Offset: off, Count: rapid.Uint32Min(1).Draw(t, "count")})
	}
	for _, off := range genOffsets(t, "requeued", -1) {
		if off <= frontier {
			p.State.Requeued = append(p.State.Requeued, off)
		}
	}
	for _, off := range genOffsets(t, "held", -1) {
		h := inflight.Held{Offset: off, Attempts: rapid.Uint32().Draw(t, "attempts"),
			Reason: inflight.Reason(rapid.IntRange(0, int(maxReason)).Draw(t, "reason"))}
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 1:
			h.Nonce = rapid.Uint64Min(1).Draw(t, "nonce")
			h.Until = now.Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "left")))
			h.LeasedAt = now.Add(-time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "age")))
		case 2:
			h.Delayed = true
			h.Until = now.Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "left")))
		}
		p.State.Held = append(p.State.Held, h)
	}
	return p
}

// equal compares two partitions, nil and empty slices alike, times by instant.
func equal(a, b Partition) bool {
	sa, sb := a.State, b.State
	if a.Topic != b.Topic || a.Partition != b.Partition || a.ID != b.ID || a.Live != b.Live ||
		sa.Frontier != sb.Frontier || sa.Incarnation != sb.Incarnation || sa.Fence != sb.Fence ||
		sa.HostIncarnation != sb.HostIncarnation || sa.Epoch != sb.Epoch ||
		!slices.Equal(sa.AckedAhead, sb.AckedAhead) || !slices.Equal(sa.Attempts, sb.Attempts) ||
		!slices.Equal(sa.Quarantined, sb.Quarantined) || !slices.Equal(sa.Requeued, sb.Requeued) ||
		!slices.Equal(sa.Corrupt, sb.Corrupt) || !slices.Equal(sa.KeyTails, sb.KeyTails) {
		return false
	}
	return slices.EqualFunc(sa.Held, sb.Held, func(x, y inflight.Held) bool {
		return x.Offset == y.Offset && x.Nonce == y.Nonce && x.Until.Equal(y.Until) &&
			x.LeasedAt.Equal(y.LeasedAt) && x.Attempts == y.Attempts && x.Reason == y.Reason && x.Delayed == y.Delayed
	})
}

func FuzzDecode(f *testing.F) {
	p := example()
	f.Add(Append(nil, &p, now))
	p.State.Epoch = 42
	f.Add(Append(nil, &p, now)) // with an ownership epoch
	empty := Partition{Topic: "t", ID: 1, State: inflight.State{Frontier: -1, Incarnation: 1}}
	f.Add(Append(nil, &empty, now))
	p.State.HostIncarnation, empty.State.HostIncarnation = 0xb0b, 1
	f.Add(Append(nil, &p, now))
	f.Add(Append(nil, &empty, now))
	p.State.KeyTails = exampleTails()
	f.Add(Append(nil, &p, now)) // with key tails
	f.Add([]byte("NRCH"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Decode(b, now)
		if err != nil {
			if !errors.Is(err, ErrDamaged) && !errors.Is(err, ErrVersion) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		// What decodes encodes back to bytes that decode to the same partition.
		again, err := Decode(Append(nil, &got, now), now)
		if err != nil || !equal(got, again) {
			t.Fatalf("re-encoding: %v\n%+v\n%+v", err, got, again)
		}
	})
}

// The acked-ahead runs go on the wire as the offsets did, one by one, so a peer on a release
// before runs reads them; reading joins them into runs again.
func TestRunsTravelAsOffsets(t *testing.T) {
	runs := []inflight.Run{{First: 11, Last: 11}, {First: 13, Last: 16}, {First: 1 << 40, Last: 1<<40 + 2}}
	var offs []int64
	for _, r := range runs {
		for off := r.First; off <= r.Last; off++ {
			offs = append(offs, off)
		}
	}
	b := appendRuns(nil, runs, 10)
	require.Equal(t, appendOffsets(nil, offs, 10), b)
	r := reader{b: b}
	require.Equal(t, runs, r.runs(10))
	require.NoError(t, r.err)
}
