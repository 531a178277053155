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
	IDFileSize = 24            // consumer.id of an incarnation that adopted no legacy records

	// AdoptedIDFileSize is the size of consumer.id when its incarnation began by adopting the
	// legacy records of a release before consumer.id (the upgrade): it then also names what
	// it adopted, the only legacy records that count under it.
	AdoptedIDFileSize = 44

	// HostIncarnationSize is what consumer.id grows by when its state is bound to the host's
	// incarnation of the topic (State.HostIncarnation): 32 bytes, or 52 in the adopted form.
	// MaxIDFileSize is the largest consumer.id.
	HostIncarnationSize = 8
	MaxIDFileSize       = AdoptedIDFileSize + HostIncarnationSize

	// LegacyOffsetFileSize is the size of consumer.offset as older releases write it: the
	// frontier alone, 8 bytes, with no checksum. Recovery still reads it, with care.
	LegacyOffsetFileSize = 8
)

// Byte layouts (big-endian).
const (
	// consumer.id
	idOffVersion      = 4  // uint8: 1
	idOffFlags        = 5  // uint8: idAdoptedLegacy, idAdoptedSlot; then two reserved zero bytes
	idOffKey          = 8  // uint32 PartitionKey
	idOffIncarn       = 12 // uint64 incarnation, never 0
	idOffAdoptFront   = 20 // int64: the frontier adopted (adopted form only)
	idOffAdoptSeq     = 28 // uint64: the adopted slot's sequence number (adopted form only)
	idOffAdoptSlotCRC = 36 // uint32: the adopted slot's checksum (adopted form only)
	idAdoptedEnd      = 40 // where the adopted fields end
	// A bound consumer.id (idBoundToHost) holds the host's incarnation of the topic in the 8
	// bytes before the checksum: at 20 in the plain form, at 40 in the adopted one. The
	// checksum is the file's last four bytes, CRC-32C of all the bytes before them.

	// consumer.id flags
	idAdoptedLegacy = 1 << 0 // the incarnation began by adopting legacy records: the adopted form
	idAdoptedSlot   = 1 << 1 // among them a consumer.ahead slot, named by its sequence number and checksum
	idBoundToHost   = 1 << 2 // the state is bound to the host's incarnation of the topic: 8 more bytes

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

// identity is what consumer.id says: the incarnation of the partition's state and, when that
// incarnation began by adopting the legacy records of a release before consumer.id, what it
// adopted. The zero identity is a missing or damaged consumer.id: no incarnation to trust.
type identity struct {
	incarnation uint64 // never 0 in a valid consumer.id
	adopted     adoption
	// host is the host's incarnation of the topic the state is bound to (see
	// State.HostIncarnation); 0 when unbound: written by a release before the binding, or
	// under a host that names none.
	host uint64
}

// adoption is the legacy state an incarnation took over at the upgrade that began it: the
// state recovery read from records naming no incarnation, with no consumer.id beside them.
// Under a valid consumer.id only these legacy records count, so a legacy record put beside
// the incarnation later (a backup of a deleted topic's earlier life restored into the
// directory of the topic created again) is never taken for its state.
type adoption struct {
	legacy   bool   // anything was adopted; false in a consumer.id of the plain form
	frontier int64  // the frontier the adopted records gave, at least -1
	slot     bool   // a consumer.ahead record was adopted (else consumer.offset alone)
	seq      uint64 // the adopted record's sequence number, when slot
	slotCRC  uint32 // the adopted record's checksum (its slot's last four bytes), when slot
}

// size is how many bytes consumer.id takes for id.
func (id identity) size() int {
	n := IDFileSize
	if id.adopted.legacy {
		n = AdoptedIDFileSize
	}
	if id.host != 0 {
		n += HostIncarnationSize
	}
	return n
}

// countsSlot says whether a decoded record of the partition (its checksum being slotCRC)
// belongs with the identity. A record naming an incarnation counts only under a consumer.id
// naming the same one. A legacy record, naming none, counts when there is no consumer.id to
// go by (missing or damaged: the state of a release before it, as far as recovery can tell),
// and under a valid one only when it is the very record the incarnation adopted: a slot and
// consumer.id that disagree are settled for consumer.id.
func (id identity) countsSlot(r *Record, slotCRC uint32) bool {
	switch {
	case r.Incarnation != 0:
		return id.incarnation != 0 && r.Incarnation == id.incarnation
	case id.incarnation == 0:
		return true
	default:
		a := &id.adopted
		return a.slot && r.Seq == a.seq && slotCRC == a.slotCRC
	}
}

// countsLegacyOffset says whether a legacy consumer.offset holding frontier belongs with the
// identity: always without a consumer.id to go by, and under a valid one only when the
// incarnation adopted legacy state and the frontier is no newer than what it adopted (every
// offset up to the adopted frontier was settled when the upgrade took it over).
func (id identity) countsLegacyOffset(frontier int64) bool {
	return id.incarnation == 0 || (id.adopted.legacy && frontier <= id.adopted.frontier)
}

// encodeID writes consumer.id for the partition key and identity into dst[:id.size()] and
// returns the size.
func encodeID(dst []byte, key uint32, id identity) int {
	n := id.size()
	dst = dst[:n]
	clear(dst)
	copy(dst, idMagic[:])
	dst[idOffVersion] = stateFileVersion
	binary.BigEndian.PutUint32(dst[idOffKey:], key)
	binary.BigEndian.PutUint64(dst[idOffIncarn:], id.incarnation)
	if a := id.adopted; a.legacy {
		dst[idOffFlags] = idAdoptedLegacy
		binary.BigEndian.PutUint64(dst[idOffAdoptFront:], uint64(a.frontier))
		if a.slot {
			dst[idOffFlags] |= idAdoptedSlot
			binary.BigEndian.PutUint64(dst[idOffAdoptSeq:], a.seq)
			binary.BigEndian.PutUint32(dst[idOffAdoptSlotCRC:], a.slotCRC)
		}
	}
	if id.host != 0 {
		dst[idOffFlags] |= idBoundToHost
		binary.BigEndian.PutUint64(dst[n-4-HostIncarnationSize:], id.host)
	}
	binary.BigEndian.PutUint32(dst[n-4:], crc32.Checksum(dst[:n-4], castagnoli))
	return n
}

// decodeID reads consumer.id and returns the identity it names, or ErrDamagedStateFile
// (wrapped with the reason) for anything but a valid file of the partition key. Its size
// must be the one its flags call for; a flag this release does not know is damage.
func decodeID(b []byte, key uint32) (identity, error) {
	n := len(b)
	if n != IDFileSize && n != AdoptedIDFileSize && n != IDFileSize+HostIncarnationSize && n != MaxIDFileSize {
		return identity{}, damaged("consumer.id is none of 24, 32, 44 and 52 bytes")
	}
	flags := b[idOffFlags]
	want := identity{}
	if flags&idAdoptedLegacy != 0 {
		want.adopted.legacy = true
	}
	if flags&idBoundToHost != 0 {
		want.host = 1
	}
	switch {
	case [4]byte(b) != idMagic:
		return identity{}, damaged("consumer.id: bad magic")
	case binary.BigEndian.Uint32(b[n-4:]) != crc32.Checksum(b[:n-4], castagnoli):
		return identity{}, damaged("consumer.id: checksum mismatch")
	case b[idOffVersion] != stateFileVersion || b[idOffFlags+1] != 0 || b[idOffFlags+2] != 0 ||
		flags&^(idAdoptedLegacy|idAdoptedSlot|idBoundToHost) != 0:
		return identity{}, damaged("consumer.id: unknown version or flags")
	case want.size() != n || (flags&idAdoptedSlot != 0 && flags&idAdoptedLegacy == 0):
		return identity{}, damaged("consumer.id: flags that do not match its size")
	case binary.BigEndian.Uint32(b[idOffKey:]) != key:
		return identity{}, damaged("consumer.id of another partition")
	}
	id := identity{incarnation: binary.BigEndian.Uint64(b[idOffIncarn:])}
	if id.incarnation == 0 {
		return identity{}, damaged("consumer.id: incarnation 0")
	}
	if flags&idBoundToHost != 0 {
		if id.host = binary.BigEndian.Uint64(b[n-4-HostIncarnationSize:]); id.host == 0 {
			return identity{}, damaged("consumer.id: bound to host incarnation 0")
		}
	}
	if flags&idAdoptedLegacy == 0 {
		return id, nil
	}
	a := adoption{legacy: true, frontier: int64(binary.BigEndian.Uint64(b[idOffAdoptFront:]))}
	if flags&idAdoptedSlot != 0 {
		a.slot = true
		a.seq = binary.BigEndian.Uint64(b[idOffAdoptSeq:])
		a.slotCRC = binary.BigEndian.Uint32(b[idOffAdoptSlotCRC:])
	} else if !isZero(b[idOffAdoptSeq:idAdoptedEnd]) {
		return identity{}, damaged("consumer.id: an adopted slot named without its flag")
	}
	if a.frontier < -1 {
		return identity{}, damaged("consumer.id: adopted frontier below -1")
	}
	id.adopted = a
	return id, nil
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
