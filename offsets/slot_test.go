package offsets

import (
	"encoding/binary"
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
		{"one ahead right above", Record{Seq: 2, Frontier: 5, Ahead: []int64{6}}},
		{"scattered", Record{Seq: 3, Frontier: 10, Ahead: []int64{12, 14, 15, 16, 40, 1 << 40}}},
		{"one long run", Record{Seq: 4, Frontier: 0, Ahead: seq(2, 100_001, 1)}},
		{"near the top of int64", Record{Seq: math.MaxUint64, Frontier: math.MaxInt64 - 3, Ahead: []int64{math.MaxInt64 - 1, math.MaxInt64}}},
		{"reserved sets", Record{Seq: 5, Frontier: 9, Ahead: []int64{11},
			Attempts:   []Attempt{{Offset: 10, Count: 3}, {Offset: 12, Count: math.MaxUint32}},
			Quarantine: []int64{13, 14, 20}}},
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
			require.Zero(t, got.Dropped)
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
			r := Record{Seq: 1, Frontier: 0, Ahead: tt.ahead}
			b := make([]byte, SlotSize)
			over, err := EncodeSlot(b, &r)
			require.NoError(t, err)
			require.Equal(t, tt.overflow, over.Ahead > 0)
			var got Record
			require.NoError(t, DecodeSlot(b, &got))
			require.GreaterOrEqual(t, len(got.Ahead), tt.minKept)
			require.Equal(t, len(tt.ahead), len(got.Ahead)+over.Ahead)
			require.True(t, slices.Equal(tt.ahead[:len(got.Ahead)], got.Ahead), "kept a prefix: the lowest offsets")
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
		{"ahead at the frontier", Record{Frontier: 5, Ahead: []int64{5}}},
		{"ahead not ascending", Record{Frontier: 5, Ahead: []int64{9, 7}}},
		{"ahead repeated", Record{Frontier: 5, Ahead: []int64{7, 7}}},
		{"quarantine below", Record{Frontier: 5, Quarantine: []int64{3}}},
		{"attempts unordered", Record{Frontier: 5, Attempts: []Attempt{{9, 1}, {8, 1}}}},
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
	good := encode(t, Record{Seq: 9, Frontier: 100, Ahead: []int64{102, 103, 200}})
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
	good := encode(t, Record{Seq: 3, Key: 7, Frontier: 55, Ahead: seq(57, 400, 3)})
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
	old := encode(t, Record{Seq: 4, Frontier: 10, Ahead: seq(12, 3000, 2)})
	next := encode(t, Record{Seq: 6, Frontier: 900, Ahead: seq(902, 4000, 3)})
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
	b := encode(t, Record{Seq: 1, Frontier: 3, Ahead: []int64{5}})
	n := int(binary.BigEndian.Uint16(b[offBodyLen:]))
	at := headerSize + n
	b[at] = 9
	binary.BigEndian.PutUint16(b[at+1:], 2)
	b[at+3], b[at+4] = 0xAB, 0xCD
	binary.BigEndian.PutUint16(b[offBodyLen:], uint16(n+5))
	reseal(b)
	var r Record
	require.NoError(t, DecodeSlot(b, &r))
	require.Equal(t, []int64{5}, r.Ahead)
}

func TestNewestSlot(t *testing.T) {
	tests := []struct {
		name  string
		valid [2]bool
		seqs  [2]uint64
		front [2]int64
		want  int
	}{
		{"neither", [2]bool{}, [2]uint64{5, 6}, [2]int64{}, -1},
		{"only 0", [2]bool{true, false}, [2]uint64{5, 6}, [2]int64{}, 0},
		{"only 1", [2]bool{false, true}, [2]uint64{9, 6}, [2]int64{}, 1},
		{"larger sequence", [2]bool{true, true}, [2]uint64{5, 6}, [2]int64{9, 1}, 1},
		{"larger sequence in 0", [2]bool{true, true}, [2]uint64{7, 6}, [2]int64{1, 9}, 0},
		{"tie: larger frontier", [2]bool{true, true}, [2]uint64{6, 6}, [2]int64{1, 9}, 1},
		{"tie: slot 0", [2]bool{true, true}, [2]uint64{6, 6}, [2]int64{4, 4}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := [2]Record{{Seq: tt.seqs[0], Frontier: tt.front[0]}, {Seq: tt.seqs[1], Frontier: tt.front[1]}}
			require.Equal(t, tt.want, newestSlot(tt.valid, &recs))
		})
	}
}

// EncodeSlot must not allocate: a tick encodes one record per partition.
func TestEncodeSlotAllocatesNothing(t *testing.T) {
	r := Record{Seq: 1, Frontier: 10, Ahead: seq(12, 2000, 3)}
	b := make([]byte, SlotSize)
	allocs := testing.AllocsPerRun(100, func() { _, _ = EncodeSlot(b, &r) })
	require.Zero(t, allocs)
}
