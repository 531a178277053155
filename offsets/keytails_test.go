package offsets

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// tailsOf is n key tails from offset from, step apart, keys 1, 2, ...
func tailsOf(from, step int64, n int) []KeyTail {
	tails := make([]KeyTail, n)
	for i := range tails {
		tails[i] = KeyTail{Key: uint64(i + 1), From: from + int64(i)*step}
	}
	return tails
}

// A record with key tails goes round the slot whole, as version 2; one without stays
// version 1 (TestEncodeSlotWritesThePreviousReleasesBytes pins its bytes).
func TestSlotKeyTailsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
	}{
		{"one tail", Record{Seq: 1, Key: 7, Frontier: 10, Ahead: runsOf(12, 13, 14), KeyTails: []KeyTail{{Key: 99, From: 12}}}},
		{"right above the frontier -1", Record{Seq: 2, Frontier: -1, Ahead: runsOf(0, 1), KeyTails: []KeyTail{{Key: 1, From: 0}}}},
		{"tail past the runs", Record{Seq: 3, Frontier: 5, Ahead: runsOf(7), KeyTails: []KeyTail{{Key: 3, From: 7}, {Key: 4, From: 1 << 40}}}},
		{"no runs", Record{Seq: 4, Frontier: 5, KeyTails: []KeyTail{{Key: math.MaxUint64, From: 6}}}},
		{"MaxKeyTails, every set, incarnation", Record{Seq: 5, Key: 8, Frontier: 100, Incarnation: 77,
			Ahead: runsOf(seq(102, 400, 2)...), KeyTails: tailsOf(102, 4, MaxKeyTails),
			Attempts: []Attempt{{101, 2}}, Quarantine: []int64{3, 150}, Requeued: []int64{4}}},
		{"keys of every width", Record{Seq: 6, Frontier: 0, Ahead: runsOf(1, 2, 3),
			KeyTails: []KeyTail{{Key: 1, From: 1}, {Key: 1 << 63, From: 2}, {Key: 0xdeadbeef, From: 3}}}},
		{"near the top of int64", Record{Seq: 7, Frontier: math.MaxInt64 - 3, Ahead: runsOf(math.MaxInt64 - 1),
			KeyTails: []KeyTail{{Key: 5, From: math.MaxInt64 - 1}, {Key: 6, From: math.MaxInt64}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := encode(t, tt.rec)
			require.Equal(t, byte(2), b[offVersion], "a record with key tails is version 2")
			var got Record
			require.NoError(t, DecodeSlot(b, &got))
			require.Equal(t, tt.rec.KeyTails, got.KeyTails)
			require.True(t, slices.Equal(tt.rec.Ahead, got.Ahead))
			require.True(t, slices.Equal(tt.rec.Attempts, got.Attempts))
			require.True(t, slices.Equal(tt.rec.Quarantine, got.Quarantine))
			require.True(t, slices.Equal(tt.rec.Requeued, got.Requeued))
			require.Equal(t, tt.rec.Frontier, got.Frontier)
			require.Equal(t, tt.rec.Incarnation, got.Incarnation)

			// The record without its tails is version 1, and the same bytes but the
			// version, the tails' section, the body length and the checksum.
			plain := tt.rec
			plain.KeyTails = nil
			pb := encode(t, plain)
			require.Equal(t, byte(1), pb[offVersion])
			empty := plain
			empty.KeyTails = []KeyTail{}
			require.Equal(t, pb, encode(t, empty), "an empty tails slice is no tails")
			n := int(binary.BigEndian.Uint16(pb[offBodyLen:]))
			require.Equal(t, pb[headerSize:headerSize+n], b[headerSize:headerSize+n], "the other sections are as in version 1")
			require.Equal(t, byte(tagKeyTails), b[headerSize+n], "the tails' section comes last, by its tag")

			// Decoding into a reused record leaves none of its tails behind.
			require.NoError(t, DecodeSlot(pb, &got))
			require.Empty(t, got.KeyTails)
		})
	}
}

// The tails' section, byte for byte.
func TestSlotKeyTailsBytes(t *testing.T) {
	b := encode(t, Record{Seq: 1, Frontier: 10, Ahead: runsOf(12, 13, 20),
		KeyTails: []KeyTail{{Key: 0x0102030405060708, From: 12}, {Key: 9, From: 20}}})
	want := []byte{
		tagAhead, 0, 4, 1, 1, 6, 0, // run 12..13; 20
		tagKeyTails, 0, 18,
		1, 1, 2, 3, 4, 5, 6, 7, 8, // 12: gap 12-10-1, then the key
		7, 0, 0, 0, 0, 0, 0, 0, 9, // 20: gap 20-12-1
	}
	require.Equal(t, uint16(len(want)), binary.BigEndian.Uint16(b[offBodyLen:]))
	require.Equal(t, want, b[headerSize:headerSize+len(want)])
	require.Equal(t, byte(slotVersionTails), b[offVersion])
}

// A release that reads version 1 only (every release before key tails) refuses a record with
// them as a newer release's, never reads it with the tails' section skipped: its parked
// records would read as acked. One without them it reads as before.
func TestSlotKeyTailsRefusedByVersion1Reader(t *testing.T) {
	withTails := encode(t, Record{Seq: 4, Key: PartitionKey("t", 0), Frontier: 10, Ahead: runsOf(11, 12), KeyTails: []KeyTail{{Key: 5, From: 11}}})
	var r Record
	err := decodeSlot(withTails, &r, 1)
	require.ErrorIs(t, err, ErrNewerSlot)
	require.NotErrorIs(t, err, ErrCorruptSlot)
	var ve *VersionError
	require.True(t, errors.As(err, &ve))
	require.Equal(t, uint8(2), ve.Version)

	plain := encode(t, Record{Seq: 3, Key: PartitionKey("t", 0), Frontier: 10, Ahead: runsOf(11, 12)})
	require.NoError(t, decodeSlot(plain, &r, 1))
	require.Equal(t, []Run{{11, 12}}, r.Ahead)

	// This release reads both.
	st, err := Recover("t", 0, nil, slices.Concat(withTails, plain), nil)
	require.NoError(t, err)
	require.Equal(t, []KeyTail{{Key: 5, From: 11}}, st.KeyTails)
}

func TestEncodeSlotRejectsInvalidKeyTails(t *testing.T) {
	tests := []struct {
		name  string
		tails []KeyTail
	}{
		{"key 0", []KeyTail{{Key: 0, From: 6}}},
		{"at the frontier", []KeyTail{{Key: 1, From: 5}}},
		{"below the frontier", []KeyTail{{Key: 1, From: 2}}},
		{"not ascending", []KeyTail{{Key: 1, From: 9}, {Key: 2, From: 7}}},
		{"the same From twice", []KeyTail{{Key: 1, From: 7}, {Key: 2, From: 7}}},
		{"the same key twice", []KeyTail{{Key: 1, From: 7}, {Key: 2, From: 8}, {Key: 1, From: 9}}},
		{"more than MaxKeyTails", tailsOf(6, 1, MaxKeyTails+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, SlotSize)
			_, err := EncodeSlot(b, &Record{Frontier: 5, Ahead: runsOf(6, 7, 8, 9), KeyTails: tt.tails})
			require.ErrorIs(t, err, ErrInvalidRecord)
		})
	}
	_, err := EncodeSlot(make([]byte, SlotSize), &Record{Frontier: 5, KeyTails: tailsOf(6, 1, MaxKeyTails)})
	require.NoError(t, err, "MaxKeyTails is allowed")
}

// rawTailsSlot is a slot of the given version and frontier with one tails' section of the
// given payload.
func rawTailsSlot(version byte, frontier int64, payload ...byte) []byte {
	b := rawSlot(frontier, tagKeyTails, payload...)
	b[offVersion] = version
	return reseal(b)
}

// tailBytes is one tail's encoding: the gap from the previous From (or the frontier), the key.
func tailBytes(gap byte, key uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{gap}, key)
}

// A damaged or malformed tails' section is a corrupt slot, never a record read without it.
func TestDecodeSlotDamagedKeyTails(t *testing.T) {
	good := encode(t, Record{Seq: 9, Frontier: 100, Ahead: runsOf(102, 103, 200),
		KeyTails: []KeyTail{{Key: 11, From: 102}, {Key: 12, From: 200}}})
	bodyLen := int(binary.BigEndian.Uint16(good[offBodyLen:]))
	var many []byte
	for range MaxKeyTails + 1 {
		many = append(many, tailBytes(0, uint64(len(many)+1))...)
	}
	tests := []struct {
		name string
		slot []byte
	}{
		{"key 0", rawTailsSlot(2, 5, tailBytes(0, 0)...)},
		{"the same key twice", rawTailsSlot(2, 5, slices.Concat(tailBytes(0, 3), tailBytes(0, 3))...)},
		{"more than MaxKeyTails", rawTailsSlot(2, 5, many...)},
		{"empty section", rawTailsSlot(2, 5)},
		{"key cut short", rawTailsSlot(2, 5, tailBytes(0, 3)[:8]...)},
		{"over-long varint", rawTailsSlot(2, 5, slices.Concat([]byte{0x80}, tailBytes(0, 3))...)},
		{"truncated varint", rawTailsSlot(2, 5, 0x80)},
		{"From past int64", rawTailsSlot(2, math.MaxInt64-1, tailBytes(1, 3)...)},
		{"tails in a version 1 record", rawTailsSlot(1, 5, tailBytes(0, 3)...)},
		{"version 2 without tails", reseal(func() []byte {
			b := encode(t, Record{Seq: 1, Frontier: 5, Ahead: runsOf(7)})
			b[offVersion] = 2
			return b
		}())},
		{"tails' section cut from the body", reseal(func() []byte {
			b := slices.Clone(good)
			n := bodyLen - (sectionHeader + 18)
			clear(b[headerSize+n : offCRC])
			binary.BigEndian.PutUint16(b[offBodyLen:], uint16(n))
			return b
		}())},
		{"tails' section length past the body", reseal(func() []byte {
			b := slices.Clone(good)
			binary.BigEndian.PutUint16(b[headerSize+bodyLen-18-2:], 19)
			return b
		}())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Record
			err := DecodeSlot(tt.slot, &r)
			require.ErrorIs(t, err, ErrCorruptSlot)
			require.NotErrorIs(t, err, ErrNewerSlot)
		})
	}
	// Every single-bit flip of a record with tails is caught.
	var r Record
	for i := range SlotSize * 8 {
		b := slices.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		err := DecodeSlot(b, &r)
		require.ErrorIs(t, err, ErrCorruptSlot, "bit %d", i)
	}
}

// The tails are never left out for room: they and the incarnation take theirs first, and the
// acked-ahead runs cut for room leave them whole (a cut offset is unsettled, as a parked one
// is).
func TestSlotKeyTailsNeverDropped(t *testing.T) {
	rec := Record{Seq: 1, Frontier: 0, Incarnation: 5, Ahead: runsOf(seq(2, 40_000, 2)...),
		KeyTails:   tailsOf(1<<40, 1<<33, MaxKeyTails),
		Requeued:   seq(0, 0, 1),
		Quarantine: seq(1, 30_000, 2), Attempts: []Attempt{{1, 3}}}
	for i := range rec.KeyTails {
		rec.KeyTails[i].Key = math.MaxUint64 - uint64(i) // the widest keys
	}
	b := make([]byte, SlotSize)
	over, err := EncodeSlot(b, &rec)
	require.NoError(t, err)
	require.Positive(t, over.Ahead)
	var got Record
	require.NoError(t, DecodeSlot(b, &got))
	require.Equal(t, rec.KeyTails, got.KeyTails)
	require.Equal(t, rec.Incarnation, got.Incarnation)
	require.Equal(t, uint32(over.Ahead), got.Dropped)
	require.Less(t, runsLen(got.Ahead), runsLen(rec.Ahead))

	// Nothing at all but the tails' and the incarnation's room taken: the sets share the rest.
	plain := rec
	plain.KeyTails = nil
	overPlain, err := EncodeSlot(b, &plain)
	require.NoError(t, err)
	require.Greater(t, over.Total(), overPlain.Total())
}

// Recovery gives the taken slot's tails back, drops the runs and the tails when a frontier
// ahead of the slot passes a tail, and ClampState drops the tails at or above the watermark.
func TestRecoverKeyTails(t *testing.T) {
	key := PartitionKey("t", 0)
	rec := Record{Seq: 4, Key: key, Frontier: 10, Ahead: runsOf(12, 13, 20, 21, 30),
		Attempts: []Attempt{{11, 2}}, KeyTails: []KeyTail{{Key: 8, From: 13}, {Key: 9, From: 21}}}
	older := Record{Seq: 3, Key: key, Frontier: 9}
	ahead := slices.Concat(encode(t, rec), encode(t, older))
	st, err := Recover("t", 0, nil, ahead, nil)
	require.NoError(t, err)
	require.Equal(t, rec.KeyTails, st.KeyTails)
	require.Equal(t, rec.Ahead, st.Ahead)

	// A legacy consumer.offset never counts beside a slot; a frontier ahead of the slot comes
	// from a verified one, which needs consumer.id.
	id := make([]byte, IDFileSize)
	encodeID(id, key, identity{incarnation: 6})
	rec.Incarnation, older.Incarnation = 6, 6
	ahead = slices.Concat(encode(t, rec), encode(t, older))
	for _, tc := range []struct {
		frontier int64
		tails    []KeyTail
		ahead    []Run
	}{
		{10, rec.KeyTails, rec.Ahead},
		{12, rec.KeyTails, []Run{{13, 13}, {20, 21}, {30, 30}}},
		{13, nil, nil}, // passes key 8's tail: its records above cannot be told from the others
		{25, nil, nil},
	} {
		off := make([]byte, OffsetFileSize)
		encodeOffset(off, key, 6, tc.frontier)
		st, err := Recover("t", 0, id, ahead, off)
		require.NoError(t, err)
		require.Equal(t, tc.frontier, st.Frontier)
		require.Equal(t, len(tc.tails), len(st.KeyTails), "frontier %d", tc.frontier)
		if len(tc.tails) > 0 {
			require.Equal(t, tc.tails, st.KeyTails)
		}
		require.Equal(t, runsLen(tc.ahead), runsLen(st.Ahead), "frontier %d", tc.frontier)
	}

	for _, tc := range []struct {
		hwm   int64
		tails int
	}{{100, 2}, {22, 2}, {21, 1}, {14, 1}, {13, 0}, {5, 0}} {
		in := State{Found: true, Frontier: 10, Ahead: runsOf(12, 13, 20, 21, 30), KeyTails: rec.KeyTails}
		got, changed := ClampState(in, tc.hwm)
		require.Len(t, got.KeyTails, tc.tails, "hwm %d", tc.hwm)
		require.Equal(t, tc.hwm <= 30, changed)
		require.True(t, validKeyTails(got.KeyTails, got.Frontier))
	}
}
