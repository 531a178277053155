package inflight

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Checklist 4, RELIABILITY row 8.
func TestParseHandle(t *testing.T) {
	valid := []struct {
		in   string
		want Handle
	}{
		{"0:0:1", Handle{0, 0, 1}},
		{"3:42:123456789", Handle{3, 42, 123456789}},
		{"2147483647:9223372036854775807:18446744073709551615", Handle{1<<31 - 1, 1<<63 - 1, 1<<64 - 1}},
		{"0:0:9999999999999999999", Handle{0, 0, 9999999999999999999}},
		{"0:0:10000000000000000000", Handle{0, 0, 10000000000000000000}},
	}
	for _, tc := range valid {
		got, err := ParseHandle(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got)
		assert.Equal(t, tc.in, got.String())
	}

	malformed := []string{
		"", ":", "::", "1:2", "1:2:3:4", "-1:0:1", "1:-1:1", "+1:1:1", " 1:1:1", "1:1:1 ",
		"01:1:1", "1:01:1", "1:1:01", "1:1:0", "1:1:0x1", "1::1", ":1:1", "1:1:",
		"2147483648:0:1", "0:9223372036854775808:1", "0:0:18446744073709551616",
		"9223372036854775808:0:0", "0:0:99999999999999999999", "0:0:28446744073709551615",
		"0:9999999999999999999:1", "0:0:1844674407370955161a", "0:0:184467440737095516150", "1:1:1\x00", "1%3A1%3A1", "١:١:١", "1:1:１",
		strings.Repeat("1", 1<<20),
	}
	for _, in := range malformed {
		h, err := ParseHandle(in)
		require.Error(t, err, "%q", in)
		assert.ErrorIs(t, err, ErrMalformedHandle, "%q", in)
		assert.False(t, errors.Is(err, ErrGone), "a malformed handle is a 400, not a 410")
		assert.Zero(t, h)
	}
}

// Check refuses exactly the handles whose text ParseHandle refuses for their values (the
// settles that take a Handle refuse what the text form could not carry), and every handle it
// accepts round-trips through its text.
func TestHandleCheck(t *testing.T) {
	for _, tc := range []struct {
		h  Handle
		ok bool
	}{
		{Handle{0, 0, 1}, true},
		{Handle{1<<31 - 1, 1<<63 - 1, 1<<64 - 1}, true},
		{Handle{}, false},
		{Handle{3, 4, 0}, false},
		{Handle{-1, 0, 1}, false},
		{Handle{0, -1, 1}, false},
		{Handle{math.MinInt32, math.MinInt64, 1}, false},
	} {
		err := tc.h.Check()
		if tc.ok {
			assert.NoError(t, err, "%+v", tc.h)
			continue
		}
		assert.ErrorIs(t, err, ErrMalformedHandle, "%+v", tc.h)
	}
	rapid.Check(t, func(t *rapid.T) {
		h := Handle{Partition: rapid.Int32().Draw(t, "partition"), Offset: rapid.Int64().Draw(t, "offset"),
			Nonce: rapid.Uint64Range(0, 3).Draw(t, "nonce")}
		parsed, parseErr := ParseHandle(h.String())
		if err := h.Check(); err != nil {
			require.ErrorIs(t, err, ErrMalformedHandle)
			require.Error(t, parseErr, "%+v is refused, its text %q is not", h, h.String())
			return
		}
		require.NoError(t, parseErr)
		require.Equal(t, h, parsed)
	})
}

func TestHandleTextRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := Handle{
			Partition: rapid.Int32Min(0).Draw(t, "partition"),
			Offset:    rapid.Int64Min(0).Draw(t, "offset"),
			Nonce:     rapid.Uint64Min(1).Draw(t, "nonce"),
		}
		text, err := h.MarshalText()
		require.NoError(t, err)
		var back Handle
		require.NoError(t, back.UnmarshalText(text))
		require.Equal(t, h, back)
		parsed, err := ParseHandle(h.String())
		require.NoError(t, err)
		require.Equal(t, h, parsed)
	})
}

func TestUnmarshalTextLeavesHandleOnError(t *testing.T) {
	h := Handle{1, 2, 3}
	require.ErrorIs(t, h.UnmarshalText([]byte("1:2")), ErrMalformedHandle)
	require.Equal(t, Handle{1, 2, 3}, h)
}

// FuzzParseHandle: the parser is total (no panic on any input), accepts only canonical text
// (what it accepts formats back to the same bytes), and a malformed handle is ErrMalformedHandle.
func FuzzParseHandle(f *testing.F) {
	for _, seed := range []string{
		"", ":", "1:2", "1:2:3", "1:2:3:4", "-1:0:0", "9223372036854775808:0:0", "+1:1:1", " 1:1:1",
		"١:١:١", "1:1:0x1", "1:1:1\x00", "1%3A2%3A3", "0:0:18446744073709551615",
		"2147483647:9223372036854775807:18446744073709551615", "00:0:1", "1:1:0",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		h, err := ParseHandle(in)
		if err != nil {
			if !errors.Is(err, ErrMalformedHandle) {
				t.Fatalf("ParseHandle(%q): error %v is not ErrMalformedHandle", in, err)
			}
			return
		}
		if h.String() != in {
			t.Fatalf("ParseHandle(%q) accepted a non-canonical handle (formats as %q)", in, h.String())
		}
		if h.Partition < 0 || h.Offset < 0 || h.Nonce == 0 {
			t.Fatalf("ParseHandle(%q) = %+v out of range", in, h)
		}
	})
}

// TestHandleTextIsDecimal: the text form is the three fields in Go's %d, for any handle,
// including the negative ones no shard grants.
func TestHandleTextIsDecimal(t *testing.T) {
	edges := []Handle{{}, {-1, -1, 0}, {math.MinInt32, math.MinInt64, math.MaxUint64},
		{math.MaxInt32, math.MaxInt64, math.MaxUint64}, {9, 10, 99}, {10, 99, 100}}
	for _, h := range edges {
		require.Equal(t, fmt.Sprintf("%d:%d:%d", h.Partition, h.Offset, h.Nonce), h.String())
	}
	rapid.Check(t, func(t *rapid.T) {
		h := Handle{Partition: rapid.Int32().Draw(t, "partition"), Offset: rapid.Int64().Draw(t, "offset"),
			Nonce: rapid.Uint64().Draw(t, "nonce")}
		want := fmt.Sprintf("%d:%d:%d", h.Partition, h.Offset, h.Nonce)
		require.Equal(t, want, h.String())
		require.Equal(t, "x"+want, string(h.AppendText([]byte("x"))))
	})
}

// TestParseHandleMatchesReference: the one-pass parser accepts exactly what splitting on
// colons and parsing each field with strconv, canonical form required, accepts.
func TestParseHandleMatchesReference(t *testing.T) {
	reference := func(s string) (Handle, bool) {
		fields := strings.Split(s, ":")
		if len(s) > maxHandleLen || len(fields) != 3 {
			return Handle{}, false
		}
		var n [3]uint64
		for i, bits := range []int{31, 63, 64} {
			v, err := strconv.ParseUint(fields[i], 10, bits)
			if err != nil || strconv.FormatUint(v, 10) != fields[i] {
				return Handle{}, false
			}
			n[i] = v
		}
		if n[2] == 0 {
			return Handle{}, false
		}
		return Handle{int32(n[0]), int64(n[1]), n[2]}, true
	}
	alphabet := []rune("0123456789::-+ x")
	rapid.Check(t, func(t *rapid.T) {
		s := string(rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, maxHandleLen+2).Draw(t, "text"))
		if rapid.Bool().Draw(t, "near valid") {
			s = Handle{rapid.Int32Min(0).Draw(t, "p"), rapid.Int64Min(0).Draw(t, "o"), rapid.Uint64().Draw(t, "n")}.String()
			if i := rapid.IntRange(0, len(s)).Draw(t, "at"); i < len(s) {
				s = s[:i] + string(rapid.SampledFrom(alphabet).Draw(t, "edit")) + s[i+1:]
			}
		}
		want, ok := reference(s)
		got, err := ParseHandle(s)
		require.Equal(t, ok, err == nil, "%q: %v", s, err)
		require.Equal(t, want, got, "%q", s)
	})
}

// TestHandleTextAtEveryLength: every field at every length it can have, at the values where
// a length begins and ends (where a digit-group boundary of the formatter and the parser
// falls), formats as %d and parses back; short texts and the longest ones included.
func TestHandleTextAtEveryLength(t *testing.T) {
	var edges []uint64
	for p := uint64(1); ; p *= 10 {
		edges = append(edges, p-1, p, p+1)
		if p > math.MaxUint64/10 {
			break
		}
	}
	edges = append(edges, math.MaxUint64-1, math.MaxUint64)
	for _, v := range edges {
		handles := []Handle{{0, 0, max(v, 1)}, {0, int64(min(v, math.MaxInt64)), 1},
			{int32(min(v, math.MaxInt32)), 0, 1}, {int32(min(v, math.MaxInt32)), int64(min(v, math.MaxInt64)), max(v, 1)}}
		for _, h := range handles {
			text := h.String()
			require.Equal(t, fmt.Sprintf("%d:%d:%d", h.Partition, h.Offset, h.Nonce), text)
			back, err := ParseHandle(text)
			require.NoError(t, err, text)
			require.Equal(t, h, back, text)
			neg := Handle{-h.Partition, -h.Offset, h.Nonce}
			require.Equal(t, fmt.Sprintf("%d:%d:%d", neg.Partition, neg.Offset, neg.Nonce), neg.String())
		}
	}
}

// TestEightDigits: the eight-digit split is exact for every value of each four-digit half
// (the halves are computed in lanes that do not mix, so this covers every x below 1e8).
func TestEightDigits(t *testing.T) {
	spell := func(digits uint64) string {
		var b [8]byte
		for i := range b {
			b[i] = byte(digits>>(8*i)) + '0'
		}
		return string(b[:])
	}
	for x := uint32(0); x < 10000; x++ {
		require.Equal(t, fmt.Sprintf("%08d", x), spell(eightDigits(x)))
		require.Equal(t, fmt.Sprintf("%08d", x*10000), spell(eightDigits(x*10000)))
		require.Equal(t, fmt.Sprintf("%08d", x*10000+9999-x), spell(eightDigits(x*10000+9999-x)))
	}
}

// TestLeadingDigits: every byte value, at every place of a chunk, stops the count exactly
// when it is not an ASCII digit.
func TestLeadingDigits(t *testing.T) {
	for at := range 8 {
		for b := range 256 {
			var chunk [8]byte
			for i := range chunk {
				chunk[i] = '7'
			}
			chunk[at] = byte(b)
			want := 8
			if b < '0' || b > '9' {
				want = at
			}
			require.Equal(t, want, leadingDigits(binary.LittleEndian.Uint64(chunk[:])), "byte %#x at %d", b, at)
			require.Equal(t, want, leadingDigits(loadLittleEndian(string(chunk[:]))), "byte %#x at %d", b, at)
		}
	}
}
