package offsets

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// The two small state files: consumer.id, which names the incarnation of the partition's
// state, and consumer.offset, the frontier file. Both are checksummed and carry the
// partition's key, so a damaged, foreign or stale file is told apart from a good one (see the
// package doc, "Files", for the layouts and the rules recovery applies).
const (
	IDFile     = "consumer.id" // the incarnation of the partition's state
	IDFileSize = 24

	// LegacyOffsetFileSize is the size of consumer.offset as older releases write it: the
	// frontier alone, 8 bytes, with no checksum. Recovery still reads it, with care.
	LegacyOffsetFileSize = 8
)

// Byte layouts (big-endian).
const (
	// consumer.id
	idOffVersion = 4  // uint8: 1
	idOffFlags   = 5  // uint8: 0, and two reserved zero bytes
	idOffKey     = 8  // uint32 PartitionKey
	idOffIncarn  = 12 // uint64 incarnation, never 0
	idOffCRC     = 20 // CRC-32C of bytes [0, 20)

	// consumer.offset
	offOffVersion  = 4  // uint8: 1
	offOffFlags    = 5  // uint8: 0, and two reserved zero bytes
	offOffFrontier = 8  // int64 >= -1
	offOffIncarn   = 16 // uint64 incarnation, never 0
	offOffKey      = 24 // uint32 PartitionKey
	offOffCRC      = 28 // CRC-32C of bytes [0, 28)

	stateFileVersion = 1
)

var (
	idMagic     = [4]byte{'N', 'R', 'C', 'I'}
	offsetMagic = [4]byte{'N', 'R', 'C', 'O'}
)

// ErrDamagedStateFile is what the decoders of consumer.id and consumer.offset answer for
// bytes that are not a whole, valid file of this partition: short, torn, bit-flipped, of
// another size, or another partition's. Recovery ignores such a file, loudly.
var ErrDamagedStateFile = errors.New("offsets: damaged or foreign state file")

// encodeID writes consumer.id for the partition key and incarnation into dst[:IDFileSize].
func encodeID(dst []byte, key uint32, incarnation uint64) {
	dst = dst[:IDFileSize]
	clear(dst)
	copy(dst, idMagic[:])
	dst[idOffVersion] = stateFileVersion
	binary.BigEndian.PutUint32(dst[idOffKey:], key)
	binary.BigEndian.PutUint64(dst[idOffIncarn:], incarnation)
	binary.BigEndian.PutUint32(dst[idOffCRC:], crc32.Checksum(dst[:idOffCRC], castagnoli))
}

// decodeID reads consumer.id and returns the incarnation it names, or ErrDamagedStateFile
// (wrapped with the reason) for anything but a valid file of the partition key.
func decodeID(b []byte, key uint32) (uint64, error) {
	switch {
	case len(b) != IDFileSize:
		return 0, damaged("consumer.id is not 24 bytes")
	case [4]byte(b) != idMagic:
		return 0, damaged("consumer.id: bad magic")
	case binary.BigEndian.Uint32(b[idOffCRC:]) != crc32.Checksum(b[:idOffCRC], castagnoli):
		return 0, damaged("consumer.id: checksum mismatch")
	case b[idOffVersion] != stateFileVersion || b[idOffFlags] != 0 || b[idOffFlags+1] != 0 || b[idOffFlags+2] != 0:
		return 0, damaged("consumer.id: unknown version or flags")
	case binary.BigEndian.Uint32(b[idOffKey:]) != key:
		return 0, damaged("consumer.id of another partition")
	}
	inc := binary.BigEndian.Uint64(b[idOffIncarn:])
	if inc == 0 {
		return 0, damaged("consumer.id: incarnation 0")
	}
	return inc, nil
}

// encodeOffset writes consumer.offset for the partition into dst[:OffsetFileSize].
func encodeOffset(dst []byte, key uint32, incarnation uint64, frontier int64) {
	dst = dst[:OffsetFileSize]
	clear(dst)
	copy(dst, offsetMagic[:])
	dst[offOffVersion] = stateFileVersion
	binary.BigEndian.PutUint64(dst[offOffFrontier:], uint64(frontier))
	binary.BigEndian.PutUint64(dst[offOffIncarn:], incarnation)
	binary.BigEndian.PutUint32(dst[offOffKey:], key)
	binary.BigEndian.PutUint32(dst[offOffCRC:], crc32.Checksum(dst[:offOffCRC], castagnoli))
}

// offsetFile is what consumer.offset holds.
type offsetFile struct {
	frontier    int64
	incarnation uint64 // 0 for the legacy form
	legacy      bool   // the 8-byte form older releases write: no checksum, no identity
}

// decodeOffset reads consumer.offset in either form: the checksummed 32-byte one (magic
// "NRCO"), which must belong to the partition key, or the legacy 8 bytes holding a frontier of
// at least -1 (which cannot begin with the magic: that would be a frontier above 2^62, and
// such an 8-byte file is a truncated new one). Anything else is ErrDamagedStateFile.
func decodeOffset(b []byte, key uint32) (offsetFile, error) {
	if len(b) == LegacyOffsetFileSize {
		v := int64(binary.BigEndian.Uint64(b))
		if v < -1 || [4]byte(b) == offsetMagic {
			return offsetFile{}, damaged("consumer.offset: 8 bytes that are no frontier")
		}
		return offsetFile{frontier: v, legacy: true}, nil
	}
	switch {
	case len(b) != OffsetFileSize:
		return offsetFile{}, damaged("consumer.offset is neither 8 nor 32 bytes")
	case [4]byte(b) != offsetMagic:
		return offsetFile{}, damaged("consumer.offset: bad magic")
	case binary.BigEndian.Uint32(b[offOffCRC:]) != crc32.Checksum(b[:offOffCRC], castagnoli):
		return offsetFile{}, damaged("consumer.offset: checksum mismatch")
	case b[offOffVersion] != stateFileVersion || b[offOffFlags] != 0 || b[offOffFlags+1] != 0 || b[offOffFlags+2] != 0:
		return offsetFile{}, damaged("consumer.offset: unknown version or flags")
	case binary.BigEndian.Uint32(b[offOffKey:]) != key:
		return offsetFile{}, damaged("consumer.offset of another partition")
	}
	o := offsetFile{
		frontier:    int64(binary.BigEndian.Uint64(b[offOffFrontier:])),
		incarnation: binary.BigEndian.Uint64(b[offOffIncarn:]),
	}
	if o.frontier < -1 || o.incarnation == 0 {
		return offsetFile{}, damaged("consumer.offset: frontier below -1 or incarnation 0")
	}
	return o, nil
}

// damagedFile is a reason a state file failed to decode; it matches ErrDamagedStateFile.
type damagedFile string

func (d damagedFile) Error() string        { return ErrDamagedStateFile.Error() + ": " + string(d) }
func (d damagedFile) Is(target error) bool { return target == ErrDamagedStateFile }

func damaged(reason string) error { return damagedFile(reason) }

// newIncarnation draws a fresh incarnation: 64 random bits, never 0. Two incarnations of one
// partition (a topic deleted and created again) collide with probability 2^-64.
func newIncarnation() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		if v := binary.BigEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}
