package filelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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
			b := appendFrame([]byte("prefix"), tt.offset, tt.ts, tt.key, tt.value)
			b = b[len("prefix"):]
			require.Len(t, b, frameSize(tt.key, tt.value))
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
	good := appendFrame(nil, 5, time.Unix(1, 0), []byte("key"), []byte("value"))
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
	f.Add(appendFrame(nil, 0, time.Time{}, nil, nil))
	f.Add(appendFrame(nil, 42, time.Unix(1700000000, 5), []byte("key"), []byte("value")))
	f.Add(appendFrame(nil, -1, time.Unix(-5, 0), nil, bytes.Repeat([]byte("v"), 300)))
	two := appendFrame(appendFrame(nil, 1, time.Time{}, []byte("a"), nil), 2, time.Time{}, nil, []byte("b"))
	f.Add(two)
	f.Add(two[:len(two)-3])
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add(make([]byte, 40))
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
		again := appendFrame(nil, fr.offset, timestamp(fr.ts), fr.key, fr.value)
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
