package filelog

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"
)

// The frame of one record in a segment file, little-endian:
//
//	offset  size  field
//	0       4     bodyLen: bytes after the 8-byte header (20 + keyLen + len(value))
//	4       4     CRC32-C (Castagnoli) of bytes 0..3 and of the body
//	8       8     the record's offset, so a frame that is not where its segment says is caught
//	16      8     timestamp, Unix nanoseconds; 0 when the record has none
//	24      4     keyLen
//	28      ...   key, then value
//
// The checksum covers the length, so a torn or flipped length is caught like any other
// damage.
const (
	headerSize    = 8
	fixedBodySize = 20
	minFrameSize  = headerSize + fixedBodySize

	// MaxRecordBytes bounds the key plus value of one record. A longer frame length read
	// from a file is damage, not a record.
	MaxRecordBytes = 16 << 20
	maxBodySize    = fixedBodySize + MaxRecordBytes
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Why a frame does not decode. Only decodeFrame and the scan see these; Read turns them
// into router.ErrCorrupt.
var (
	errShortFrame = errors.New("filelog: frame cut short")
	errBadLength  = errors.New("filelog: impossible frame length")
	errChecksum   = errors.New("filelog: frame checksum mismatch")
	errBadKeyLen  = errors.New("filelog: key longer than its frame")
)

// frame is a decoded record. key and value alias the bytes it was decoded from.
type frame struct {
	offset int64
	ts     int64
	key    []byte
	value  []byte
}

// frameSize is the encoded size of a record with the given key and value.
func frameSize(key, value []byte) int { return minFrameSize + len(key) + len(value) }

// appendFrame appends the frame of a record to dst.
func appendFrame(dst []byte, offset int64, ts time.Time, key, value []byte) []byte {
	var nanos int64
	if !ts.IsZero() {
		nanos = ts.UnixNano()
	}
	start := len(dst)
	bodyLen := fixedBodySize + len(key) + len(value)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(bodyLen))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // the checksum, filled in below
	dst = binary.LittleEndian.AppendUint64(dst, uint64(offset))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(nanos))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(key)))
	dst = append(dst, key...)
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
// errChecksum or errBadKeyLen.
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
	keyLen := binary.LittleEndian.Uint32(body[16:20])
	if uint64(keyLen) > uint64(len(body)-fixedBodySize) {
		return frame{}, 0, errBadKeyLen
	}
	rest := body[fixedBodySize:]
	return frame{
		offset: int64(binary.LittleEndian.Uint64(body[0:8])),
		ts:     int64(binary.LittleEndian.Uint64(body[8:16])),
		key:    rest[:keyLen:keyLen],
		value:  rest[keyLen:],
	}, n, nil
}

// timestamp turns a frame's timestamp back into a time: the zero time when it had none.
func timestamp(nanos int64) time.Time {
	if nanos == 0 {
		return time.Time{}
	}
	return time.Unix(0, nanos)
}
