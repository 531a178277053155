package filelog

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"

	"narad.dev/consume/router"
)

// The frame of one record in a segment file, little-endian:
//
//	offset  size  field
//	0       4     bodyLen: bytes after the 8-byte header (20 + keyLen + len(value), and
//	              the headers' bytes)
//	4       4     CRC32-C (Castagnoli) of bytes 0..3 and of the body
//	8       8     the record's offset, so a frame that is not where its segment says is caught
//	16      8     timestamp, Unix nanoseconds; 0 when the record has none
//	24      4     keyLen, its top bit the headers flag
//	28      ...   key, then, with the headers flag, the headers, then value
//
// The headers, in a frame with the flag (the second form, written since records carry
// headers, and only for a record that has some): a u32 count, then per header its key and
// its value, each a u32 length and the bytes. A frame without the flag is the first form,
// byte for byte, so segments written before headers read as they did; a release before
// them reads a frame with the flag as damaged (its key length past the frame).
//
// The checksum covers the length, so a torn or flipped length is caught like any other
// damage.
const (
	headerSize    = 8
	fixedBodySize = 20
	minFrameSize  = headerSize + fixedBodySize

	// MaxRecordBytes bounds what a record's frame carries after its fixed fields: its key,
	// value and headers (their lengths included). A longer frame length read from a file is
	// damage, not a record.
	MaxRecordBytes = 16 << 20
	maxBodySize    = fixedBodySize + MaxRecordBytes

	// flagHeaders is the headers flag of keyLen: headers follow the key.
	flagHeaders = 1 << 31
	// recordHeaderFields is a header's size in a frame without its key and value: their
	// lengths.
	recordHeaderFields = 4 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Why a frame does not decode. Only decodeFrame and the scan see these; Read turns them
// into router.ErrCorrupt.
var (
	errShortFrame = errors.New("filelog: frame cut short")
	errBadLength  = errors.New("filelog: impossible frame length")
	errChecksum   = errors.New("filelog: frame checksum mismatch")
	errBadKeyLen  = errors.New("filelog: key longer than its frame")
	errBadHeaders = errors.New("filelog: headers longer than their frame")
)

// frame is a decoded record. key, value and the headers' values alias the bytes it was
// decoded from.
type frame struct {
	offset  int64
	ts      int64
	key     []byte
	value   []byte
	headers []router.Header
}

// frameSize is the encoded size of a record with the given key, value and headers.
func frameSize(key, value []byte, headers []router.Header) int {
	size := minFrameSize + len(key) + len(value)
	if len(headers) > 0 {
		size += 4
		for _, h := range headers {
			size += recordHeaderFields + len(h.Key) + len(h.Value)
		}
	}
	return size
}

// appendFrame appends the frame of a record to dst: the first form without headers, the
// second with.
func appendFrame(dst []byte, offset int64, ts time.Time, key, value []byte, headers []router.Header) []byte {
	var nanos int64
	if !ts.IsZero() {
		nanos = ts.UnixNano()
	}
	start := len(dst)
	bodyLen := frameSize(key, value, headers) - headerSize
	keyField := uint32(len(key))
	if len(headers) > 0 {
		keyField |= flagHeaders
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(bodyLen))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // the checksum, filled in below
	dst = binary.LittleEndian.AppendUint64(dst, uint64(offset))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(nanos))
	dst = binary.LittleEndian.AppendUint32(dst, keyField)
	dst = append(dst, key...)
	if len(headers) > 0 {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(headers)))
		for _, h := range headers {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h.Key)))
			dst = append(dst, h.Key...)
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h.Value)))
			dst = append(dst, h.Value...)
		}
	}
	dst = append(dst, value...)
	f := dst[start:]
	binary.LittleEndian.PutUint32(f[4:8], frameChecksum(f[0:4], f[headerSize:]))
	return dst
}

func frameChecksum(length, body []byte) uint32 {
	return crc32.Update(crc32.Checksum(length, castagnoli), castagnoli, body)
}

// frameLen reads the total size of the frame that starts b (at least headerSize bytes),
// or errBadLength.
func frameLen(b []byte) (int, error) {
	bodyLen := binary.LittleEndian.Uint32(b[0:4])
	if bodyLen < fixedBodySize || bodyLen > maxBodySize {
		return 0, errBadLength
	}
	return headerSize + int(bodyLen), nil
}

// decodeFrame decodes the frame at the start of b and returns it with its size. It never
// panics: bad input answers errShortFrame (b ends inside the frame), errBadLength,
// errChecksum, errBadKeyLen or errBadHeaders (a count or a length the frame cannot hold,
// or the headers flag with none).
func decodeFrame(b []byte) (frame, int, error) {
	if len(b) < headerSize {
		return frame{}, 0, errShortFrame
	}
	n, err := frameLen(b)
	if err != nil {
		return frame{}, 0, err
	}
	if len(b) < n {
		return frame{}, 0, errShortFrame
	}
	f := b[:n]
	if binary.LittleEndian.Uint32(f[4:8]) != frameChecksum(f[0:4], f[headerSize:]) {
		return frame{}, 0, errChecksum
	}
	body := f[headerSize:]
	keyField := binary.LittleEndian.Uint32(body[16:20])
	keyLen := keyField &^ flagHeaders
	if uint64(keyLen) > uint64(len(body)-fixedBodySize) {
		return frame{}, 0, errBadKeyLen
	}
	rest := body[fixedBodySize:]
	fr := frame{
		offset: int64(binary.LittleEndian.Uint64(body[0:8])),
		ts:     int64(binary.LittleEndian.Uint64(body[8:16])),
		key:    rest[:keyLen:keyLen],
	}
	rest = rest[keyLen:]
	if keyField&flagHeaders != 0 {
		var err error
		if fr.headers, rest, err = decodeHeaders(rest); err != nil {
			return frame{}, 0, err
		}
	}
	fr.value = rest
	return fr, n, nil
}

// decodeHeaders reads the headers at the start of b (a frame's, after its key) and returns
// them with what follows: a count the bytes can hold, at least one, and each header's
// lengths within them, or errBadHeaders. Keys are copies, values alias b, capped.
func decodeHeaders(b []byte) ([]router.Header, []byte, error) {
	if len(b) < 4 {
		return nil, nil, errBadHeaders
	}
	count := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if count == 0 || uint64(count) > uint64(len(b)/recordHeaderFields) {
		return nil, nil, errBadHeaders
	}
	headers := make([]router.Header, count)
	for i := range headers {
		var key, value []byte
		var ok bool
		if key, b, ok = cutLength(b); !ok {
			return nil, nil, errBadHeaders
		}
		if value, b, ok = cutLength(b); !ok {
			return nil, nil, errBadHeaders
		}
		headers[i] = router.Header{Key: string(key), Value: value}
	}
	return headers, b, nil
}

// cutLength cuts a u32 length and that many bytes (capped) off the front of b.
func cutLength(b []byte) (field, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)) {
		return nil, nil, false
	}
	return b[:n:n], b[n:], true
}

// record is the record f holds, aliasing its bytes: an empty key is nil.
func (f *frame) record() router.Record {
	rec := router.Record{Value: f.value[:len(f.value):len(f.value)], Timestamp: timestamp(f.ts), Headers: f.headers}
	if len(f.key) > 0 {
		rec.Key = f.key
	}
	return rec
}

// timestamp turns a frame's timestamp back into a time: the zero time when it had none.
func timestamp(nanos int64) time.Time {
	if nanos == 0 {
		return time.Time{}
	}
	return time.Unix(0, nanos)
}
