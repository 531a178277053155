package filelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// sampleHeaders are headers as Kafka allows them: ordered, a key repeated, empty keys and
// values.
var sampleHeaders = []router.Header{{Key: "trace", Value: []byte("abc")}, {Key: "", Value: nil}, {Key: "trace", Value: []byte{0xff, 0}}}

// A record with headers is framed in the second form and reads back with them, in order; a
// record without is framed in the first form, byte for byte as before headers, so segments
// written then read as they did.
func TestFrameHeaders(t *testing.T) {
	at := time.Unix(1_700_000_000, 5)
	b := appendFrame(nil, 9, at, []byte("k"), []byte("value"), sampleHeaders)
	require.Len(t, b, frameSize([]byte("k"), []byte("value"), sampleHeaders))
	require.NotZero(t, binary.LittleEndian.Uint32(b[24:28])&flagHeaders, "the headers flag")
	f, n, err := decodeFrame(b)
	require.NoError(t, err)
	require.Equal(t, len(b), n)
	require.Equal(t, "k", string(f.key))
	require.Equal(t, "value", string(f.value))
	require.Len(t, f.headers, len(sampleHeaders))
	for i, h := range sampleHeaders {
		require.Equal(t, h.Key, f.headers[i].Key)
		require.Equal(t, string(h.Value), string(f.headers[i].Value))
	}
	// The first form, laid out by hand as the release before headers wrote it.
	old := binary.LittleEndian.AppendUint32(nil, uint32(fixedBodySize+1+5))
	old = binary.LittleEndian.AppendUint32(old, 0)
	old = binary.LittleEndian.AppendUint64(old, 9)
	old = binary.LittleEndian.AppendUint64(old, uint64(at.UnixNano()))
	old = binary.LittleEndian.AppendUint32(old, 1)
	old = append(old, "kvalue"...)
	binary.LittleEndian.PutUint32(old[4:8], frameChecksum(old[0:4], old[headerSize:]))
	require.Equal(t, old, appendFrame(nil, 9, at, []byte("k"), []byte("value"), nil))
	f, _, err = decodeFrame(old)
	require.NoError(t, err)
	require.Equal(t, "value", string(f.value))
	require.Nil(t, f.headers)
}

// Headers a frame cannot hold are damage, never a panic or an allocation of what they claim.
func TestDecodeFrameRejectsHeaders(t *testing.T) {
	// frameWith frames key, then the raw headers bytes, then value, with the flag set.
	frameWith := func(raw []byte) []byte {
		body := binary.LittleEndian.AppendUint64(nil, 1)
		body = binary.LittleEndian.AppendUint64(body, 0)
		body = binary.LittleEndian.AppendUint32(body, 1|flagHeaders)
		body = append(append(body, 'k'), raw...)
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = append(b, body...)
		binary.LittleEndian.PutUint32(b[4:8], frameChecksum(b[0:4], b[headerSize:]))
		return b
	}
	u32 := func(vs ...uint32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	for _, tt := range []struct {
		name string
		raw  []byte
	}{
		{"no count", nil},
		{"a count of none", u32(0)},
		{"a count of 2^32-1", append(u32(1<<32-1), make([]byte, 64)...)},
		{"a count over its bytes", u32(2, 0, 0)},
		{"a key length past the frame", u32(1, 1<<32-1, 0)},
		{"a value length past the frame", append(append(u32(1, 1), 'h'), u32(100)...)},
		{"a short header", append(u32(1, 1), 'h')},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodeFrame(frameWith(tt.raw))
			require.ErrorIs(t, err, errBadHeaders)
			allocs := testing.AllocsPerRun(10, func() { _, _, _ = decodeFrame(frameWith(tt.raw)) })
			require.LessOrEqual(t, allocs, 8.0)
		})
	}
}

func TestFrameRoundTrip(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name       string
		offset     int64
		ts         time.Time
		key, value []byte
	}{
		{"empty", 0, time.Time{}, nil, nil},
		{"key only", 7, at, []byte("k"), nil},
		{"value only", 1 << 40, at, nil, []byte("value")},
		{"both", 12, at, []byte("order-12"), bytes.Repeat([]byte{0xab}, 1000)},
		{"binary", 3, at, []byte{0, 0, 0}, []byte{0xff, 0, 0xff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := appendFrame([]byte("prefix"), tt.offset, tt.ts, tt.key, tt.value, nil)
			b = b[len("prefix"):]
			require.Len(t, b, frameSize(tt.key, tt.value, nil))
			f, n, err := decodeFrame(append(b, "trailing bytes"...))
			require.NoError(t, err)
			require.Equal(t, len(b), n)
			require.Equal(t, tt.offset, f.offset)
			require.True(t, tt.ts.Equal(timestamp(f.ts)), "timestamp %v, want %v", timestamp(f.ts), tt.ts)
			require.Equal(t, string(tt.key), string(f.key))
			require.Equal(t, string(tt.value), string(f.value))
		})
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	good := appendFrame(nil, 5, time.Unix(1, 0), []byte("key"), []byte("value"), nil)
	with := func(edit func(b []byte) []byte) []byte { return edit(bytes.Clone(good)) }
	// withChecksum recomputes the checksum after an edit, so only the edit is wrong.
	withChecksum := func(edit func(b []byte)) []byte {
		b := bytes.Clone(good)
		edit(b)
		binary.LittleEndian.PutUint32(b[4:8], frameChecksum(b[0:4], b[headerSize:]))
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"nothing", nil, errShortFrame},
		{"short header", good[:headerSize-1], errShortFrame},
		{"header only", good[:headerSize], errShortFrame},
		{"cut short", good[:len(good)-1], errShortFrame},
		{"length below the fixed body", with(func(b []byte) []byte { binary.LittleEndian.PutUint32(b, fixedBodySize-1); return b }), errBadLength},
		{"length past the limit", with(func(b []byte) []byte { binary.LittleEndian.PutUint32(b, maxBodySize+1); return b }), errBadLength},
		{"length at the limit, bytes missing", with(func(b []byte) []byte { binary.LittleEndian.PutUint32(b, maxBodySize); return b }), errShortFrame},
		{"length flipped", with(func(b []byte) []byte { b[0]--; return b }), errChecksum},
		{"checksum flipped", with(func(b []byte) []byte { b[4] ^= 1; return b }), errChecksum},
		{"offset flipped", with(func(b []byte) []byte { b[8] ^= 1; return b }), errChecksum},
		{"timestamp flipped", with(func(b []byte) []byte { b[16] ^= 0x80; return b }), errChecksum},
		{"value flipped", with(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), errChecksum},
		{"zeros", make([]byte, 64), errBadLength},
		{"key longer than the frame", withChecksum(func(b []byte) { binary.LittleEndian.PutUint32(b[24:28], 9) }), errBadKeyLen},
		{"key length huge", withChecksum(func(b []byte) { binary.LittleEndian.PutUint32(b[24:28], 1<<32-1) }), errBadKeyLen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodeFrame(tt.in)
			require.True(t, errors.Is(err, tt.want), "got %v, want %v", err, tt.want)
		})
	}
}

// FuzzDecodeFrame: any bytes decode without a panic, and what decodes encodes back to the
// same bytes.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(appendFrame(nil, 0, time.Time{}, nil, nil, nil))
	f.Add(appendFrame(nil, 42, time.Unix(1700000000, 5), []byte("key"), []byte("value"), nil))
	f.Add(appendFrame(nil, -1, time.Unix(-5, 0), nil, bytes.Repeat([]byte("v"), 300), nil))
	two := appendFrame(appendFrame(nil, 1, time.Time{}, []byte("a"), nil, nil), 2, time.Time{}, nil, []byte("b"), nil)
	f.Add(two)
	f.Add(two[:len(two)-3])
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add(make([]byte, 40))
	f.Add(appendFrame(nil, 3, time.Unix(1, 0), []byte("key"), []byte("value"), sampleHeaders))
	f.Add(appendFrame(nil, 4, time.Time{}, nil, nil, []router.Header{{Key: "k"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := decodeFrame(b)
		if err != nil {
			if n != 0 {
				t.Fatalf("error %v with size %d", err, n)
			}
			return
		}
		if n < minFrameSize || n > len(b) {
			t.Fatalf("size %d of %d bytes", n, len(b))
		}
		again := appendFrame(nil, fr.offset, timestamp(fr.ts), fr.key, fr.value, fr.headers)
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoded %x, decoded from %x", again, b[:n])
		}
	})
}

// FuzzScanSegment: a segment file of any bytes scans without a panic, and what the scan
// delimits lies inside the file, in order.
func FuzzScanSegment(f *testing.F) {
	f.Add(frames(0, 3))
	f.Add(frames(0, 3)[:100])
	f.Add(append(frames(0, 2), make([]byte, 50)...))
	f.Add(frames(4, 2))
	f.Add([]byte("junk"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := scanSegment(bytes.NewReader(b), int64(len(b)), 0)
		if err != nil {
			t.Fatalf("scan of a byte slice: %v", err)
		}
		if s.intact > len(s.pos) || s.intactEnd > s.end || s.end > int64(len(b)) {
			t.Fatalf("intact %d of %d frames, intact end %d, end %d of %d bytes", s.intact, len(s.pos), s.intactEnd, s.end, len(b))
		}
		for i, p := range s.pos {
			next := s.end
			if i+1 < len(s.pos) {
				next = int64(s.pos[i+1])
			}
			if next-int64(p) < minFrameSize {
				t.Fatalf("frame %d from %d to %d", i, p, next)
			}
		}
		// Every frame up to the last intact one that decodes carries its own offset.
		for i := range s.intact {
			end := s.end
			if i+1 < len(s.pos) {
				end = int64(s.pos[i+1])
			}
			if fr, _, err := decodeFrame(b[s.pos[i]:end]); err == nil && fr.offset != int64(i) {
				t.Fatalf("frame %d carries offset %d", i, fr.offset)
			}
		}
	})
}
