package wire

import (
	"encoding/binary"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// referenceUvarint is what the reader's uvarint must answer for b: binary.Uvarint's value
// and length, refusing a varint short or over 64 bits (n <= 0) and one longer than its
// value needs (a last byte of zero).
func referenceUvarint(b []byte) (uint64, int, bool) {
	x, n := binary.Uvarint(b)
	if n <= 0 || n > 1 && b[n-1] == 0 {
		return 0, 0, false
	}
	return x, n, true
}

// checkVarints reads b as a uvarint and as a zigzag varint, and compares each with the
// reference: the value, the bytes left, and a malformed one refused with ErrBadFrame.
func checkVarints(t interface {
	Fatalf(string, ...any)
}, b []byte) {
	want, n, ok := referenceUvarint(b)
	r := reader{b: b}
	got := r.uvarint("x")
	switch {
	case !ok && !errors.Is(r.err, ErrBadFrame):
		t.Fatalf("uvarint of % x: %d, err %v; want ErrBadFrame", b, got, r.err)
	case ok && (r.err != nil || got != want || len(r.b) != len(b)-n):
		t.Fatalf("uvarint of % x: %d (%d left), err %v; want %d (%d left)", b, got, len(r.b), r.err, want, len(b)-n)
	}
	r = reader{b: b}
	signed := r.varint("x")
	wantSigned := int64(want>>1) ^ -int64(want&1)
	switch {
	case !ok && !errors.Is(r.err, ErrBadFrame):
		t.Fatalf("varint of % x: %d, err %v; want ErrBadFrame", b, signed, r.err)
	case ok && (r.err != nil || signed != wantSigned || len(r.b) != len(b)-n):
		t.Fatalf("varint of % x: %d, err %v; want %d", b, signed, r.err, wantSigned)
	}
}

// TestVarintsMatchTheReference: the reader's varints, with their one-byte path in line and
// their own loop for longer ones, read what binary.Uvarint and binary.Varint read, and
// refuse what a frame must not carry (short, over 64 bits, longer than the value needs).
func TestVarintsMatchTheReference(t *testing.T) {
	for _, b := range [][]byte{
		nil, {0}, {1}, {0x7f}, {0x80}, {0x80, 0}, {0x80, 1}, {0xff, 0x7f},
		binary.AppendUvarint(nil, 1<<63), binary.AppendUvarint(nil, ^uint64(0)),
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2},                     // over 64 bits
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 1},               // eleven bytes
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0},                     // ten, a last zero
		append(binary.AppendUvarint(nil, 300), 0xaa),                                  // with more after it
		binary.AppendVarint(nil, -1), binary.AppendVarint(nil, -(1 << 62)), {0xfe, 0}, // a last zero
	} {
		checkVarints(t, b)
	}
	rapid.Check(t, func(t *rapid.T) {
		var b []byte
		if rapid.Bool().Draw(t, "well formed") {
			b = binary.AppendUvarint(nil, rapid.Uint64().Draw(t, "x"))
			b = append(b, rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(t, "after")...)
		} else {
			b = rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(t, "bytes")
		}
		checkVarints(t, b)
	})
}

// FuzzVarints compares the reader's varints with the reference on any bytes.
func FuzzVarints(f *testing.F) {
	f.Add([]byte{0x80, 0x01})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x80, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) { checkVarints(t, b) })
}
