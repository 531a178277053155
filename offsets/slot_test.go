package offsets

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func encode(t testing.TB, r Record) []byte {
	t.Helper()
	b := make([]byte, SlotSize)
	over, err := EncodeSlot(b, &r)
	require.NoError(t, err)
	require.Zero(t, over)
	return b
}

// reseal recomputes the checksum after a test edited a slot, so the edit reaches the decoder's
// later checks.
func reseal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[:offCRC], castagnoli))
	return b
}

func seq(from, to int64, step int64) []int64 {
	var s []int64
	for o := from; o <= to; o += step {
		s = append(s, o)
	}
	return s
}

// Checklist item 47: a slot carries the frontier and the acked-ahead offsets (and the reserved
// sets), and decoding gives back exactly what was encoded.
func TestSlotRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
	}{
		{"empty partition", Record{Seq: 1, Frontier: -1}},
		{"frontier only", Record{Seq: 7, Key: 42, Frontier: 1234}},
		{"one ahead right above", Record{Seq: 2, Frontier: 5, Ahead: runsOf(6)}},
		{"scattered", Record{Seq: 3, Frontier: 10, Ahead: runsOf(12, 14, 15, 16, 40, 1<<40)}},
		{"one long run", Record{Seq: 4, Frontier: 0, Ahead: runsOf(seq(2, 100_001, 1)...)}},
		{"near the top of int64", Record{Seq: math.MaxUint64, Frontier: math.MaxInt64 - 3, Ahead: runsOf(math.MaxInt64-1, math.MaxInt64)}},
		{"every set", Record{Seq: 5, Frontier: 9, Ahead: runsOf(11),
			Attempts:   []Attempt{{Offset: 10, Count: 3}, {Offset: 12, Count: math.MaxUint32}},
			Quarantine: []int64{13, 14, 20}}},
		{"quarantine on both sides of the frontier, requeued below", Record{Seq: 6, Frontier: 100,
			Ahead: runsOf(102), Attempts: []Attempt{{101, 1}, {104, 9}},
			Quarantine: []int64{0, 1, 2, 50, 99, 100, 101, 103}, Requeued: []int64{3, 4, 60}}},
		{"requeued at the frontier", Record{Seq: 7, Frontier: 40, Requeued: []int64{0, 40}}},
		{"requeued only", Record{Seq: 8, Frontier: 1 << 50, Requeued: []int64{1 << 49, 1<<50 - 1}}},
		{"quarantine only, from offset 0", Record{Seq: 9, Frontier: -1, Quarantine: []int64{0, 1, 2, 7}}},
		{"attempts only", Record{Seq: 10, Frontier: 5, Attempts: []Attempt{{6, 1}, {7, 0}, {1 << 40, 2}}}},
		{"long runs in every run set", Record{Seq: 11, Frontier: 300_000, Ahead: runsOf(seq(300_002, 400_000, 1)...),
			Quarantine: seq(0, 200_000, 1), Requeued: seq(200_001, 300_000, 1)}},
		{"near the top of int64, every set", Record{Seq: 12, Frontier: math.MaxInt64 - 3, Ahead: runsOf(math.MaxInt64 - 1),
			Attempts: []Attempt{{math.MaxInt64 - 2, 1}, {math.MaxInt64, 5}}, Quarantine: []int64{math.MaxInt64},
			Requeued: []int64{math.MaxInt64 - 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := encode(t, tt.rec)
			var got Record
			require.NoError(t, DecodeSlot(b, &got))
			require.Equal(t, tt.rec.Seq, got.Seq)
			require.Equal(t, tt.rec.Key, got.Key)
			require.Equal(t, tt.rec.Frontier, got.Frontier)
			require.Equal(t, len(tt.rec.Ahead), len(got.Ahead))
			require.True(t, slices.Equal(tt.rec.Ahead, got.Ahead))
			require.Equal(t, len(tt.rec.Attempts), len(got.Attempts))
			require.True(t, slices.Equal(tt.rec.Attempts, got.Attempts))
			require.True(t, slices.Equal(tt.rec.Quarantine, got.Quarantine))
			require.Equal(t, len(tt.rec.Requeued), len(got.Requeued))
			require.True(t, slices.Equal(tt.rec.Requeued, got.Requeued))
			require.Zero(t, got.Dropped)
		})
	}
}

// The format of the new sections, byte for byte: quarantined and requeued offsets are runs
// from -1 (so from offset 0, whatever the frontier), attempts pairs from the frontier.
func TestSlotSectionBytes(t *testing.T) {
	b := encode(t, Record{Seq: 1, Frontier: 10, Ahead: runsOf(12, 13),
		Attempts: []Attempt{{11, 3}, {14, 300}}, Quarantine: []int64{5, 6, 7, 11}, Requeued: []int64{2, 9}})
	want := []byte{
		tagAhead, 0, 2, 1, 1, // run 12..13: gap 12-10-1, extra 1
		tagAttempts, 0, 5, 0, 3, 2, 0xAC, 0x02, // 11: gap 0, count 3; 14: gap 14-11-1, count 300
		tagQuarantine, 0, 4, 5, 2, 3, 0, // run 5..7 from -1: gap 5, extra 2; 11: gap 11-7-1, extra 0
		tagRequeued, 0, 4, 2, 0, 6, 0, // 2: gap 2 from -1; 9: gap 9-2-1
	}
	require.Equal(t, uint16(len(want)), binary.BigEndian.Uint16(b[offBodyLen:]))
	require.Equal(t, want, b[headerSize:headerSize+len(want)])
}

// Checklist item 51 and issue 5: when the sets do not all fit, each keeps its lowest offsets
// and they take the room in order: requeued, acked-ahead, quarantine, attempts.
func TestSlotOverflowPriority(t *testing.T) {
	scattered := func(from int64, n int) []int64 { return seq(from, from+int64(2*(n-1)), 2) }
	attempts := func(from int64, n int) []Attempt {
		var as []Attempt
		for o := from; len(as) < n; o += 2 {
			as = append(as, Attempt{Offset: o, Count: 2})
		}
		return as
	}
	tests := []struct {
		name string
		rec  Record
		// which sets must be kept whole, and which overflow
		whole, over []string
	}{
		{"requeued crowd out everything else", Record{Frontier: 100_000, Requeued: scattered(0, 3000),
			Ahead: runsOf(scattered(100_002, 10)...), Quarantine: scattered(1, 10), Attempts: attempts(100_001, 10)},
			nil, []string{"requeued", "ahead", "quarantine", "attempts"}},
		{"requeued whole, ahead cut", Record{Frontier: 100_000, Requeued: scattered(0, 500),
			Ahead: runsOf(scattered(100_002, 3000)...), Quarantine: scattered(1, 10), Attempts: attempts(100_001, 10)},
			[]string{"requeued"}, []string{"ahead", "quarantine", "attempts"}},
		{"ahead whole, quarantine cut", Record{Frontier: 100_000, Requeued: scattered(0, 10),
			Ahead: runsOf(scattered(100_002, 500)...), Quarantine: scattered(1, 3000), Attempts: attempts(100_001, 10)},
			[]string{"requeued", "ahead"}, []string{"quarantine", "attempts"}},
		{"quarantine whole, attempts cut", Record{Frontier: 100_000, Requeued: scattered(0, 10),
			Ahead: runsOf(scattered(100_002, 500)...), Quarantine: scattered(1, 500), Attempts: attempts(100_001, 3000)},
			[]string{"requeued", "ahead", "quarantine"}, []string{"attempts"}},
		{"everything fits", Record{Frontier: 100_000, Requeued: scattered(0, 300),
			Ahead: runsOf(scattered(100_002, 300)...), Quarantine: scattered(1, 300), Attempts: attempts(100_001, 300)},
			[]string{"requeued", "ahead", "quarantine", "attempts"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, SlotSize)
			over, err := EncodeSlot(b, &tt.rec)
			require.NoError(t, err)
			var got Record
			require.NoError(t, DecodeSlot(b, &got))
			lens := map[string][2]int{ // kept, dropped
				"requeued":   {len(got.Requeued), over.Requeued},
				"ahead":      {int(runsLen(got.Ahead)), over.Ahead},
				"quarantine": {len(got.Quarantine), over.Quarantine},
				"attempts":   {len(got.Attempts), over.Attempts},
			}
			for _, name := range tt.whole {
				require.Zero(t, lens[name][1], "%s kept whole", name)
			}
			for _, name := range tt.over {
				require.NotZero(t, lens[name][1], "%s overflows", name)
			}
			require.Equal(t, len(tt.rec.Requeued), len(got.Requeued)+over.Requeued)
			require.Equal(t, runsLen(tt.rec.Ahead), runsLen(got.Ahead)+int64(over.Ahead))
			require.Equal(t, len(tt.rec.Quarantine), len(got.Quarantine)+over.Quarantine)
			require.Equal(t, len(tt.rec.Attempts), len(got.Attempts)+over.Attempts)
			require.True(t, slices.Equal(tt.rec.Requeued[:len(got.Requeued)], got.Requeued), "kept the lowest")
			require.True(t, slices.Equal(offsetsOf(tt.rec.Ahead)[:runsLen(got.Ahead)], offsetsOf(got.Ahead)), "kept the lowest")
			require.True(t, slices.Equal(tt.rec.Quarantine[:len(got.Quarantine)], got.Quarantine), "kept the lowest")
			require.True(t, slices.Equal(tt.rec.Attempts[:len(got.Attempts)], got.Attempts), "kept the lowest")
			require.Equal(t, uint32(over.Ahead), got.Dropped, "the header counts acked-ahead offsets only")
			if over.Total() > 0 {
				// A full slot: no set that lost entries could have kept one more.
				require.Greater(t, int(binary.BigEndian.Uint16(b[offBodyLen:])), maxBodyLen-12)
			}
		})
	}
}

// Checklist item 51: runs and varints hold far more than 500 offsets in a slot, and a set still
// too large keeps its lowest offsets and counts the rest.
func TestSlotFullKeepsLowest(t *testing.T) {
	tests := []struct {
		name     string
		ahead    []int64
		minKept  int
		overflow bool
	}{
		{"every other offset fits 2000", seq(2, 4000, 2), 2000, false},
		{"every other offset past the slot", seq(2, 20_000, 2), 2000, true},
		{"wide gaps", seq(1000, 10_000_000, 1000), 1000, true},
		{"long run past MaxAheadOffsets", seq(2, MaxAheadOffsets+10, 1), MaxAheadOffsets, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Record{Seq: 1, Frontier: 0, Ahead: runsOf(tt.ahead...)}
			b := make([]byte, SlotSize)
			over, err := EncodeSlot(b, &r)
			require.NoError(t, err)
			require.Equal(t, tt.overflow, over.Ahead > 0)
			var got Record
			require.NoError(t, DecodeSlot(b, &got))
			kept := offsetsOf(got.Ahead)
			require.GreaterOrEqual(t, len(kept), tt.minKept)
			require.Equal(t, len(tt.ahead), len(kept)+over.Ahead)
			require.True(t, slices.Equal(tt.ahead[:len(kept)], kept), "kept a prefix: the lowest offsets")
			require.Equal(t, uint32(over.Ahead), got.Dropped)
		})
	}
}

func TestEncodeSlotRejectsInvalidRecord(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
	}{
		{"frontier below -1", Record{Frontier: -2}},
		{"ahead at the frontier", Record{Frontier: 5, Ahead: runsOf(5)}},
		{"ahead not ascending", Record{Frontier: 5, Ahead: runsOf(9, 7)}},
		{"ahead repeated", Record{Frontier: 5, Ahead: runsOf(7, 7)}},
		{"quarantine below 0", Record{Frontier: 5, Quarantine: []int64{-1, 3}}},
		{"quarantine not ascending", Record{Frontier: 5, Quarantine: []int64{3, 3}}},
		{"requeued above the frontier", Record{Frontier: 5, Requeued: []int64{4, 6}}},
		{"requeued below 0", Record{Frontier: 5, Requeued: []int64{-1}}},
		{"requeued not ascending", Record{Frontier: 5, Requeued: []int64{4, 2}}},
		{"attempts unordered", Record{Frontier: 5, Attempts: []Attempt{{9, 1}, {8, 1}}}},
		{"attempts at the frontier", Record{Frontier: 5, Attempts: []Attempt{{5, 1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := EncodeSlot(make([]byte, SlotSize), &tt.rec)
			require.ErrorIs(t, err, ErrInvalidRecord)
		})
	}
	_, err := EncodeSlot(make([]byte, SlotSize-1), &Record{})
	require.ErrorIs(t, err, ErrInvalidRecord)
}

// Invariant 8 and checklist item 74: anything but a whole valid record is ErrCorruptSlot.
func TestDecodeSlotCorrupt(t *testing.T) {
	good := encode(t, Record{Seq: 9, Frontier: 100, Ahead: runsOf(102, 103, 200)})
	edit := func(f func(b []byte)) []byte {
		b := slices.Clone(good)
		f(b)
		return b
	}
	tests := []struct {
		name string
		slot []byte
	}{
		{"empty", nil},
		{"short", good[:SlotSize-1]},
		{"long", append(slices.Clone(good), 0)},
		{"blank", make([]byte, SlotSize)},
		{"bad magic", reseal(edit(func(b []byte) { b[0] = 'X' }))},
		{"checksum", edit(func(b []byte) { b[offCRC] ^= 1 })},
		{"version 0", reseal(edit(func(b []byte) { b[offVersion] = 0 }))},
		{"flags", reseal(edit(func(b []byte) { b[offFlags] = 1 }))},
		{"body past the slot", reseal(edit(func(b []byte) { binary.BigEndian.PutUint16(b[offBodyLen:], maxBodyLen+1) }))},
		{"padding", reseal(edit(func(b []byte) { b[offCRC-1] = 1 }))},
		{"frontier below -1", reseal(edit(func(b []byte) { binary.BigEndian.PutUint64(b[offFrontier:], uint64(1<<63)) }))},
		{"section cut short", reseal(edit(func(b []byte) { binary.BigEndian.PutUint16(b[offBodyLen:], 2) }))},
		{"section length past body", reseal(edit(func(b []byte) { binary.BigEndian.PutUint16(b[headerSize+1:], 100) }))},
		{"sections out of order", reseal(edit(func(b []byte) { b[headerSize] = 0 }))},
		{"truncated varint", reseal(edit(func(b []byte) {
			n := int(binary.BigEndian.Uint16(b[headerSize+1:]))
			b[headerSize+sectionHeader+n-1] |= 0x80
		}))},
		{"runs not maximal", reseal(rawSlot(0, tagAhead, 1, 0, 0, 0))},
		{"over-long varint", reseal(rawSlot(0, tagAhead, 0x80, 0x00, 0))},
		{"run past int64", reseal(rawSlot(math.MaxInt64-2, tagAhead, 0, 5))},
		{"too many offsets", reseal(rawSlot(0, tagAhead, 0, 0xff, 0xff, 0x7f))},
		{"attempt count past uint32", reseal(rawSlot(0, tagAttempts, 0, 0xff, 0xff, 0xff, 0xff, 0x7f))},
		{"requeued above the frontier", reseal(rawSlot(4, tagRequeued, 5, 0))},
		{"requeued run past the frontier", reseal(rawSlot(4, tagRequeued, 4, 1))},
		{"requeued with frontier -1", reseal(rawSlot(-1, tagRequeued, 0, 0))},
		{"quarantine runs not maximal", reseal(rawSlot(0, tagQuarantine, 1, 0, 0, 0))},
		{"quarantine past int64", reseal(rawSlot(0, tagQuarantine, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 5))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Record
			err := DecodeSlot(tt.slot, &r)
			require.ErrorIs(t, err, ErrCorruptSlot)
			require.NotErrorIs(t, err, ErrNewerSlot)
		})
	}
}

// rawSlot is a version-1 slot with the given frontier and one section of the given payload.
func rawSlot(frontier int64, tag byte, payload ...byte) []byte {
	b := make([]byte, SlotSize)
	copy(b, slotMagic[:])
	b[offVersion] = SlotVersion
	binary.BigEndian.PutUint64(b[offFrontier:], uint64(frontier))
	binary.BigEndian.PutUint16(b[offBodyLen:], uint16(sectionHeader+len(payload)))
	b[headerSize] = tag
	binary.BigEndian.PutUint16(b[headerSize+1:], uint16(len(payload)))
	copy(b[headerSize+sectionHeader:], payload)
	return b
}

// Checklist item 74: every single-bit flip of a slot is caught by the checksum.
func TestDecodeSlotEveryBitFlip(t *testing.T) {
	good := encode(t, Record{Seq: 3, Key: 7, Frontier: 55, Ahead: runsOf(seq(57, 400, 3)...)})
	var r Record
	for i := range SlotSize * 8 {
		b := slices.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		require.ErrorIs(t, DecodeSlot(b, &r), ErrCorruptSlot, "bit %d", i)
	}
}

// Checklist item 74, RELIABILITY row 2: a window torn at any sector boundary or byte, mixing a
// new record with the old bytes of the slot, fails its checksum.
func TestDecodeSlotTorn(t *testing.T) {
	old := encode(t, Record{Seq: 4, Frontier: 10, Ahead: runsOf(seq(12, 3000, 2)...)})
	next := encode(t, Record{Seq: 6, Frontier: 900, Ahead: runsOf(seq(902, 4000, 3)...)})
	var r Record
	for cut := 1; cut < SlotSize; cut++ {
		if cut%512 != 0 && cut%97 != 0 {
			continue
		}
		torn := append(slices.Clone(next[:cut]), old[cut:]...)
		require.ErrorIs(t, DecodeSlot(torn, &r), ErrCorruptSlot, "torn at %d", cut)
	}
}

// A checksummed record of a newer version is reported as such, not as damage.
func TestDecodeSlotNewerVersion(t *testing.T) {
	b := encode(t, Record{Seq: 1, Frontier: 3})
	b[offVersion] = SlotVersion + 1
	b[offFlags] = 0xff // a newer version may use what version 1 reserves
	reseal(b)
	var r Record
	err := DecodeSlot(b, &r)
	require.ErrorIs(t, err, ErrNewerSlot)
	require.NotErrorIs(t, err, ErrCorruptSlot)
	var ve *VersionError
	require.True(t, errors.As(err, &ve))
	require.Equal(t, uint8(SlotVersion+1), ve.Version)
}

// Version-1 readers skip sections they do not know, so a later release can add data older
// releases may ignore.
func TestDecodeSlotSkipsUnknownSection(t *testing.T) {
	b := encode(t, Record{Seq: 1, Frontier: 3, Ahead: runsOf(5)})
	n := int(binary.BigEndian.Uint16(b[offBodyLen:]))
	at := headerSize + n
	b[at] = 9
	binary.BigEndian.PutUint16(b[at+1:], 2)
	b[at+3], b[at+4] = 0xAB, 0xCD
	binary.BigEndian.PutUint16(b[offBodyLen:], uint16(n+5))
	reseal(b)
	var r Record
	require.NoError(t, DecodeSlot(b, &r))
	require.Equal(t, []Run{{5, 5}}, r.Ahead)
}

func TestNewestSlot(t *testing.T) {
	tests := []struct {
		name  string
		valid [AheadSlots]bool
		seqs  [AheadSlots]uint64
		front [AheadSlots]int64
		want  int
	}{
		{"none", [3]bool{}, [3]uint64{5, 6, 7}, [3]int64{}, -1},
		{"only 0", [3]bool{true, false, false}, [3]uint64{5, 6, 7}, [3]int64{}, 0},
		{"only 1", [3]bool{false, true, false}, [3]uint64{9, 6, 7}, [3]int64{}, 1},
		{"only 2", [3]bool{false, false, true}, [3]uint64{9, 8, 6}, [3]int64{}, 2},
		{"larger sequence", [3]bool{true, true, false}, [3]uint64{5, 6, 9}, [3]int64{9, 1, 9}, 1},
		{"larger sequence in 0", [3]bool{true, true, false}, [3]uint64{7, 6, 0}, [3]int64{1, 9, 0}, 0},
		{"largest in the spare", [3]bool{true, true, true}, [3]uint64{7, 6, 8}, [3]int64{9, 9, 1}, 2},
		{"tie: larger frontier", [3]bool{true, true, false}, [3]uint64{6, 6, 0}, [3]int64{1, 9, 0}, 1},
		{"tie of three: larger frontier", [3]bool{true, true, true}, [3]uint64{6, 6, 6}, [3]int64{1, 2, 3}, 2},
		{"tie: lower slot", [3]bool{true, true, true}, [3]uint64{5, 6, 6}, [3]int64{4, 4, 4}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recs [AheadSlots]Record
			for i := range recs {
				recs[i] = Record{Seq: tt.seqs[i], Frontier: tt.front[i]}
			}
			require.Equal(t, tt.want, newestSlot(tt.valid, &recs))
		})
	}
}

// EncodeSlot must not allocate: a tick encodes one record per partition.
func TestEncodeSlotAllocatesNothing(t *testing.T) {
	r := Record{Seq: 1, Frontier: 10, Ahead: runsOf(seq(12, 2000, 3)...), Attempts: []Attempt{{11, 2}, {13, 1}},
		Quarantine: seq(0, 9000, 5), Requeued: []int64{1, 2, 3}}
	b := make([]byte, SlotSize)
	allocs := testing.AllocsPerRun(100, func() { _, _ = EncodeSlot(b, &r) })
	require.Zero(t, allocs)
}

// Acked-ahead runs reach the disk as the offsets did: each record below encodes to the very
// bytes (SHA-256 of the slot) the release before runs wrote for the same record given as
// offsets, and leaves out as many, so an older release reads what this one writes. Runs
// that touch are joined as consecutive offsets were.
func TestEncodeSlotWritesThePreviousReleasesBytes(t *testing.T) {
	tests := []struct {
		name    string
		rec     Record
		dropped int
		sha256  string
	}{
		{"empty", Record{Seq: 1, Key: 7, Frontier: -1}, 0,
			"5bf1fa4dc12137c8d7e6912a5faaa2dd11d22ec3e459d0bc60630a66c7fdec74"},
		{"scattered", Record{Seq: 2, Key: 7, Frontier: 10, Ahead: runsOf(12, 14, 15, 16, 40, 1<<40)}, 0,
			"e6f0260795846031be8897554a6202bbec2d318fdd900b8d265f5844da01e15c"},
		{"right above the frontier, touching runs", Record{Seq: 3, Key: 7, Frontier: 5, Ahead: []Run{{6, 6}, {7, 7}, {9, 9}}}, 0,
			"e92972914a6a5f4df1f7459b7ecaff7f5874f714fecc300cb97df7682ae56fc0"},
		{"every other past the slot", Record{Seq: 4, Key: 7, Frontier: 0, Ahead: runsOf(seq(2, 20_000, 2)...)}, 7972,
			"7d60e96557fcf27ddd1acc8d943eebdd7fd9921a7da98464247a89e31886661d"},
		{"long run past MaxAheadOffsets", Record{Seq: 5, Key: 7, Frontier: 0, Ahead: []Run{{2, MaxAheadOffsets + 10}}}, 9,
			"d936db367c830752af5e3abe17593945a8899e2b4a9ae3bb8b884164b482d1bf"},
		{"runs of 3", Record{Seq: 6, Key: 7, Incarnation: 99, Frontier: 100, Ahead: []Run{{102, 104}, {200, 202}},
			Attempts: []Attempt{{101, 2}, {105, 1}}, Quarantine: []int64{3, 4, 5, 50}, Requeued: []int64{1, 2}}, 0,
			"2f7bda5e466fab04e4f3999f87438fa1133bd55df156ec2620cd4214536cea9f"},
		{"near the top of int64", Record{Seq: math.MaxUint64, Key: 7, Frontier: math.MaxInt64 - 3, Ahead: []Run{{math.MaxInt64 - 1, math.MaxInt64}}}, 0,
			"c2852911a4b67e8c13413d69359910e6450117957c9e3f7b1b5a4c579430d33a"},
		{"ahead crowding the others", Record{Seq: 8, Key: 7, Frontier: 1000, Ahead: runsOf(seq(1002, 9000, 3)...),
			Quarantine: seq(1, 900, 2), Attempts: []Attempt{{1001, 3}}, Requeued: []int64{7}}, 641,
			"d12eb7ecc05813b668d150981fd728c0732be6a294790bf4eafc4b82ec3c3772"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, SlotSize)
			over, err := EncodeSlot(b, &tt.rec)
			require.NoError(t, err)
			require.Equal(t, tt.dropped, over.Ahead)
			sum := sha256.Sum256(b)
			require.Equal(t, tt.sha256, hex.EncodeToString(sum[:]))
		})
	}
}
