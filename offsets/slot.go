package offsets

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"strconv"
)

// File names and sizes (see the package doc for the byte layouts).
const (
	AheadFile      = "consumer.ahead"      // three slots: the anchor, the window and a spare
	OffsetFile     = "consumer.offset"     // the frontier, checksummed (older releases wrote 8 bytes)
	SlotSize       = 4096                  // one consumer.ahead slot
	AheadSlots     = 3                     // slots in consumer.ahead (older releases wrote two)
	AheadFileSize  = AheadSlots * SlotSize // what the prime extends a short consumer.ahead to
	OffsetFileSize = 32                    // consumer.offset as this release writes it

	// SlotVersion is the newest record version this release reads. It writes version 1, the
	// bytes every earlier release wrote, for a record without key tails, and version 2 for a
	// record with key tails (Record.KeyTails), which a version 1 reader must refuse rather
	// than read: it would skip the tails' section and take the parked records for acked.
	SlotVersion = 2

	// MaxKeyTails is the most key tails a record holds (State.KeyTails, Record.KeyTails): an
	// ordered topic's shard never parks behind more keys than this. The tails' section then
	// takes at most 3 + 32·18 bytes, reserved before every other set, so it always fits.
	MaxKeyTails = 32

	// MaxAheadOffsets bounds the offsets of each set one record holds (acked-ahead, attempts,
	// quarantined, requeued), so a decoder never expands a record into more memory than this
	// many entries per set, whatever its bytes say. The slot runs out of room long before this
	// for scattered offsets; it only bites for long consecutive runs.
	MaxAheadOffsets = 1 << 20

	// MaxSlotAttempts is the most attempt counts one slot can hold (each takes at least two
	// bytes). A Source may hand over only the lowest MaxSlotAttempts of a partition's
	// attempts and count the rest in State.OmittedAttempts: no record would keep them.
	MaxSlotAttempts = (maxBodyLen - sectionHeader) / 2
)

// Slot layout: a fixed header, the sections, zero padding, and the checksum in the last four
// bytes. The magic, the version byte and the checksum's place and coverage are the frame every
// version keeps, so a reader can tell a newer record from a damaged one.
const (
	offMagic    = 0  // [4]byte "NRCA"
	offVersion  = 4  // uint8
	offFlags    = 5  // uint8, zero in version 1
	offBodyLen  = 6  // uint16: bytes of sections after the header
	offSeq      = 8  // uint64: orders the slots
	offFrontier = 16 // int64 >= -1
	offKey      = 24 // uint32: PartitionKey of the partition the record belongs to
	offDropped  = 28 // uint32: acked-ahead offsets left out for lack of room (informational)
	headerSize  = 32
	offCRC      = SlotSize - 4 // uint32 CRC-32C of bytes [0, offCRC)
	maxBodyLen  = offCRC - headerSize

	sectionHeader = 3 // tag uint8, length uint16
)

// Section tags, in the order they must appear. Version 1 readers skip tags they do not know,
// so a later release can add data older readers may safely ignore; anything an older reader
// must not ignore needs a new version.
const (
	tagAhead       = 1 // runs of acked-ahead offsets, from the frontier
	tagAttempts    = 2 // delivery attempts of offsets above the frontier, from the frontier
	tagQuarantine  = 3 // runs of quarantined offsets, from -1 (either side of the frontier)
	tagRequeued    = 4 // runs of requeued offsets at or below the frontier, from -1
	tagIncarnation = 5 // the incarnation the record belongs to: 8 bytes
	tagKeyTails    = 6 // version 2 only: the key tails, from the frontier

	incarnationSection = sectionHeader + 8

	// slotVersionPlain is the version of a record without key tails, slotVersionTails of one
	// with them (a version 1 reader skips a section it does not know, so the tails need the
	// version to be refused by it).
	slotVersionPlain = 1
	slotVersionTails = 2
)

var slotMagic = [4]byte{'N', 'R', 'C', 'A'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptSlot is what DecodeSlot answers for bytes that are not a whole, valid record of a
// version it reads: blank, torn, bit-flipped or malformed. Recovery treats such a slot as
// absent and falls back to the other one.
var ErrCorruptSlot = errors.New("offsets: corrupt consumer.ahead slot")

// ErrNewerSlot is what a record written by a newer release (a version above SlotVersion, with
// a valid checksum) unwraps to. Recovery and the prime refuse such a file rather than
// overwrite or misread it; see VersionError.
var ErrNewerSlot = errors.New("offsets: consumer.ahead record from a newer release")

// ErrInvalidRecord is what EncodeSlot answers for a record that breaks the record's rules
// (frontier below -1, a set not ascending, acked-ahead or attempted offsets not above the
// frontier, a quarantined or requeued offset below 0, a requeued offset above the frontier).
// Nothing is written.
var ErrInvalidRecord = errors.New("offsets: invalid consumer.ahead record")

// VersionError reports a checksummed record of a version this release does not read.
type VersionError struct{ Version uint8 }

func (e *VersionError) Error() string {
	return "offsets: consumer.ahead record version " + strconv.Itoa(int(e.Version)) +
		" is newer than this release reads (" + strconv.Itoa(SlotVersion) + ")"
}

func (e *VersionError) Unwrap() error { return ErrNewerSlot }

// corruption is a reason a slot failed to decode; it matches ErrCorruptSlot.
type corruption string

func (c corruption) Error() string        { return ErrCorruptSlot.Error() + ": " + string(c) }
func (c corruption) Is(target error) bool { return target == ErrCorruptSlot }

const (
	errShort     = corruption("slot is not 4096 bytes")
	errBlank     = corruption("blank slot")
	errMagic     = corruption("bad magic")
	errChecksum  = corruption("checksum mismatch")
	errVersion0  = corruption("version 0")
	errFlags     = corruption("unknown flags")
	errBodyLen   = corruption("body length out of range")
	errPadding   = corruption("non-zero padding")
	errFrontier  = corruption("frontier below -1")
	errSection   = corruption("malformed section")
	errVarint    = corruption("malformed varint")
	errRun       = corruption("runs not ascending")
	errRange     = corruption("offset out of range")
	errTooMany   = corruption("more offsets than MaxAheadOffsets")
	errAttempts  = corruption("attempt count out of range")
	errUnordered = corruption("sections out of order")
	errRequeued  = corruption("requeued offset above the frontier")
	errTails     = corruption("malformed key tails")
	errTailsV1   = corruption("key tails in a version 1 record")
	errNoTails   = corruption("version 2 record without key tails")
)

// Record is one consumer.ahead slot's content.
type Record struct {
	// Seq orders the slots: recovery takes the valid slot with the largest one.
	Seq uint64
	// Key is PartitionKey of the partition the record belongs to; recovery ignores a slot
	// whose key is not the partition's (a file copied from elsewhere).
	Key uint32
	// Frontier is the inclusive committed frontier: every offset up to it is settled; -1 when
	// offset 0 is not.
	Frontier int64
	// Ahead holds the offsets acked above the frontier as runs of consecutive offsets,
	// ascending, each above Frontier. DecodeSlot gives maximal runs; EncodeSlot joins runs
	// that touch (a run starting right after the previous one ends).
	Ahead []Run
	// Attempts holds the delivery attempts of unresolved offsets above the frontier,
	// ascending by offset, each above Frontier.
	Attempts []Attempt
	// Quarantine holds the quarantined offsets (set aside after too many deliveries),
	// ascending, each at least 0, on either side of the frontier: the frontier passes over
	// them and they stay until requeued.
	Quarantine []int64
	// Requeued holds the quarantined offsets at or below the frontier that were requeued and
	// wait to be delivered again, ascending, each within [0, Frontier].
	Requeued []int64
	// Incarnation names the incarnation of the partition's state the record belongs to (see
	// consumer.id); 0 in a record of an older release, which carries none.
	Incarnation uint64
	// KeyTails names, on an ordered topic, the records Ahead holds that are not settled
	// (parked behind a blocked key): every record of key KeyTails[i].Key at or above
	// KeyTails[i].From that Ahead holds is unsettled. At most MaxKeyTails, ascending by From,
	// each From above Frontier, each Key nonzero and distinct. A record with key tails is
	// written as version 2, which older releases refuse; they never lose room to the other
	// sets.
	KeyTails []KeyTail
	// Dropped is how many acked-ahead offsets the writer left out for lack of room (it is
	// informational: those offsets are simply delivered again). EncodeSlot sets it; the
	// other sets' losses are reported by Overflow only.
	Dropped uint32
}

// Run is a run of consecutive offsets, First through Last inclusive: how a record holds the
// acked-ahead set, so that its cost (in memory, and in a tick's copy of a partition's
// state) is the runs, not the offsets, however long a hole below them lasts.
type Run struct{ First, Last int64 }

// Len is the number of offsets in r.
func (r Run) Len() int64 { return r.Last - r.First + 1 }

// KeyTail is one key's parked records (State.KeyTails, Record.KeyTails): every record of the
// key at or above From that the acked-ahead set holds is unsettled.
type KeyTail struct {
	Key  uint64 // the stable 64-bit identity of the records' key: never 0
	From int64  // the key's lowest parked offset, above the frontier
}

// Attempt is the number of deliveries of one offset above the frontier.
type Attempt struct {
	Offset int64
	Count  uint32
}

// Overflow counts what EncodeSlot left out of a record because the slot was full: the
// highest offsets of each set, never the lowest. The sets take the room
// in order of what their loss costs: requeued offsets first (one left out is a record never
// delivered again), then acked-ahead (delivered again), quarantined (they would be settled
// and no longer requeueable) and delivery attempts (counted afresh).
type Overflow struct{ Ahead, Attempts, Quarantine, Requeued int }

// Total is the number of entries left out, all sets together.
func (o Overflow) Total() int { return o.Ahead + o.Attempts + o.Quarantine + o.Requeued }

// PartitionKey is the key records of the partition carry: CRC-32C of the topic's bytes
// followed by the partition as a big-endian int32.
func PartitionKey(topic string, partition int32) uint32 {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(partition))
	h := crc32.Update(0, castagnoli, []byte(topic))
	return crc32.Update(h, castagnoli, p[:])
}

// EncodeSlot writes r as one slot into dst[:SlotSize] (dst must hold at least SlotSize bytes)
// and reports what did not fit. It does not allocate. r.Dropped is ignored; the slot carries
// the count of acked-ahead offsets this encoding dropped.
//
// When the sets do not all fit, each keeps its lowest offsets, and they take the room in
// priority order: requeued, acked-ahead, quarantined, attempts (see Overflow). The key tails
// and the incarnation are never left out: their room (at most MaxKeyTails tails) is taken
// before any set's, so acked-ahead runs cut for room leave the tails whole (an offset cut
// from the runs is unsettled, as a parked one is). The sections are still laid out by
// ascending tag. A record with key tails is version 2, one without version 1.
func EncodeSlot(dst []byte, r *Record) (Overflow, error) {
	var over Overflow
	if len(dst) < SlotSize {
		return over, ErrInvalidRecord
	}
	if err := r.validate(); err != nil {
		return over, err
	}
	dst = dst[:SlotSize]
	clear(dst)
	copy(dst[offMagic:], slotMagic[:])
	dst[offVersion] = slotVersionPlain
	if len(r.KeyTails) > 0 {
		dst[offVersion] = slotVersionTails
	}
	binary.BigEndian.PutUint64(dst[offSeq:], r.Seq)
	binary.BigEndian.PutUint64(dst[offFrontier:], uint64(r.Frontier))
	binary.BigEndian.PutUint32(dst[offKey:], r.Key)

	// Plan: the room each set gets, by priority.
	requeued, cutR := capOffsets(r.Requeued)
	ahead, aheadLimit := r.Ahead, min(runsLen(r.Ahead), MaxAheadOffsets)
	quarantine, cutQ := capOffsets(r.Quarantine)
	attempts, cutT := capAttempts(r.Attempts)
	room := maxBodyLen
	if r.Incarnation != 0 {
		room -= incarnationSection
	}
	usedK := putKeyTails(nil, r.Frontier, r.KeyTails)
	if usedK > 0 {
		room -= sectionHeader + usedK // first: the tails always fit (see MaxKeyTails)
	}
	usedR, keptR := planSection(&room, func(n int) (int, int) { return putOffsets(nil, n, -1, requeued) })
	usedA, keptA := planSection(&room, func(n int) (int, int) {
		used, kept := putRuns(nil, n, r.Frontier, ahead, aheadLimit)
		return used, int(kept)
	})
	usedQ, keptQ := planSection(&room, func(n int) (int, int) { return putOffsets(nil, n, -1, quarantine) })
	usedT, keptT := planSection(&room, func(n int) (int, int) { return putAttempts(nil, n, r.Frontier, attempts) })
	over.Requeued = cutR + len(requeued) - keptR
	over.Ahead = int(runsLen(ahead)) - keptA
	over.Quarantine = cutQ + len(quarantine) - keptQ
	over.Attempts = cutT + len(attempts) - keptT

	// Write: by ascending tag. A set's kept prefix encodes to the very bytes the plan counted.
	pos := headerSize
	pos = sectionAt(dst, pos, tagAhead, usedA)
	putRuns(dst[pos-usedA:pos], usedA, r.Frontier, ahead, int64(keptA))
	pos = sectionAt(dst, pos, tagAttempts, usedT)
	putAttempts(dst[pos-usedT:pos], usedT, r.Frontier, attempts[:keptT])
	pos = sectionAt(dst, pos, tagQuarantine, usedQ)
	putOffsets(dst[pos-usedQ:pos], usedQ, -1, quarantine[:keptQ])
	pos = sectionAt(dst, pos, tagRequeued, usedR)
	putOffsets(dst[pos-usedR:pos], usedR, -1, requeued[:keptR])
	if r.Incarnation != 0 {
		pos = sectionAt(dst, pos, tagIncarnation, 8)
		binary.BigEndian.PutUint64(dst[pos-8:pos], r.Incarnation)
	}
	pos = sectionAt(dst, pos, tagKeyTails, usedK)
	putKeyTails(dst[pos-usedK:pos], r.Frontier, r.KeyTails)

	binary.BigEndian.PutUint16(dst[offBodyLen:], uint16(pos-headerSize))
	binary.BigEndian.PutUint32(dst[offDropped:], uint32(min(over.Ahead, math.MaxUint32)))
	binary.BigEndian.PutUint32(dst[offCRC:], crc32.Checksum(dst[:offCRC], castagnoli))
	return over, nil
}

// DecodeSlot reads one slot into r, reusing r's slices. Bytes that are not a valid record give
// an error matching ErrCorruptSlot, a valid record of a newer version a *VersionError; it
// never panics and never expands a record past MaxAheadOffsets offsets per set. On error r's
// content is unspecified.
func DecodeSlot(src []byte, r *Record) error { return decodeSlot(src, r, SlotVersion) }

// decodeSlot is DecodeSlot for a reader of versions up to newest: a test plays an older
// release's reader with it.
func decodeSlot(src []byte, r *Record, newest uint8) error {
	if len(src) != SlotSize {
		return errShort
	}
	if [4]byte(src[offMagic:]) != slotMagic {
		if isZero(src) {
			return errBlank
		}
		return errMagic
	}
	if binary.BigEndian.Uint32(src[offCRC:]) != crc32.Checksum(src[:offCRC], castagnoli) {
		return errChecksum
	}
	v := src[offVersion]
	switch {
	case v == 0:
		return errVersion0
	case v > newest:
		return &VersionError{Version: v}
	}
	if src[offFlags] != 0 {
		return errFlags
	}
	bodyLen := int(binary.BigEndian.Uint16(src[offBodyLen:]))
	if bodyLen > maxBodyLen {
		return errBodyLen
	}
	if !isZero(src[headerSize+bodyLen : offCRC]) {
		return errPadding
	}
	r.Seq = binary.BigEndian.Uint64(src[offSeq:])
	r.Frontier = int64(binary.BigEndian.Uint64(src[offFrontier:]))
	r.Key = binary.BigEndian.Uint32(src[offKey:])
	r.Dropped = binary.BigEndian.Uint32(src[offDropped:])
	r.Ahead, r.Attempts, r.Quarantine = r.Ahead[:0], r.Attempts[:0], r.Quarantine[:0]
	r.Requeued, r.Incarnation, r.KeyTails = r.Requeued[:0], 0, r.KeyTails[:0]
	if r.Frontier < -1 {
		return errFrontier
	}
	if err := r.decodeSections(src[headerSize : headerSize+bodyLen]); err != nil {
		return err
	}
	switch {
	case v == slotVersionPlain && len(r.KeyTails) > 0:
		return errTailsV1 // the tails need version 2, which older releases refuse
	case v == slotVersionTails && len(r.KeyTails) == 0:
		return errNoTails // a record without them is version 1: one byte form per record
	}
	return nil
}

func (r *Record) decodeSections(body []byte) error {
	last := byte(0)
	for len(body) > 0 {
		if len(body) < sectionHeader {
			return errSection
		}
		tag, n := body[0], int(binary.BigEndian.Uint16(body[1:]))
		body = body[sectionHeader:]
		if tag <= last {
			return errUnordered
		}
		if n > len(body) {
			return errSection
		}
		payload := body[:n]
		body, last = body[n:], tag
		var err error
		switch tag {
		case tagAhead:
			r.Ahead, err = readRuns(payload, r.Frontier, r.Ahead)
		case tagAttempts:
			r.Attempts, err = readAttempts(payload, r.Frontier, r.Attempts)
		case tagQuarantine:
			r.Quarantine, err = readOffsets(payload, -1, r.Quarantine)
		case tagRequeued:
			r.Requeued, err = readOffsets(payload, -1, r.Requeued)
			if err == nil && len(r.Requeued) > 0 && r.Requeued[len(r.Requeued)-1] > r.Frontier {
				err = errRequeued
			}
		case tagIncarnation:
			if n != 8 || binary.BigEndian.Uint64(payload) == 0 {
				err = errSection
			} else {
				r.Incarnation = binary.BigEndian.Uint64(payload)
			}
		case tagKeyTails:
			r.KeyTails, err = readKeyTails(payload, r.Frontier, r.KeyTails)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// validate checks the rules a record must keep; a record from the shard breaks them only
// through a bug in the host's adapter, and then nothing is written. The decoder enforces the
// same rules, so every record it accepts encodes again.
func (r *Record) validate() error {
	if r.Frontier < -1 {
		return ErrInvalidRecord
	}
	if !runsAscendingAbove(r.Ahead, r.Frontier) || !ascendingAbove(r.Quarantine, -1) ||
		!ascendingAbove(r.Requeued, -1) {
		return ErrInvalidRecord
	}
	if n := len(r.Requeued); n > 0 && r.Requeued[n-1] > r.Frontier {
		return ErrInvalidRecord
	}
	prev := r.Frontier
	for _, a := range r.Attempts {
		if a.Offset <= prev {
			return ErrInvalidRecord
		}
		prev = a.Offset
	}
	if !validKeyTails(r.KeyTails, r.Frontier) {
		return ErrInvalidRecord
	}
	return nil
}

// validKeyTails reports whether tails keep the rules of key tails above frontier: at most
// MaxKeyTails, each Key nonzero and distinct, From ascending (strictly: an offset is one
// record, of one key) and above frontier.
func validKeyTails(tails []KeyTail, frontier int64) bool {
	if len(tails) > MaxKeyTails {
		return false
	}
	prev := frontier
	for i, k := range tails {
		if k.Key == 0 || k.From <= prev {
			return false
		}
		for _, o := range tails[:i] {
			if o.Key == k.Key {
				return false
			}
		}
		prev = k.From
	}
	return true
}

func ascendingAbove(offs []int64, floor int64) bool {
	for _, o := range offs {
		if o <= floor {
			return false
		}
		floor = o
	}
	return true
}

// runsAscendingAbove reports whether runs ascend above floor: each nonempty, starting above
// the previous one's end (touching it is allowed: the encoder joins them).
func runsAscendingAbove(runs []Run, floor int64) bool {
	for _, r := range runs {
		if r.First <= floor || r.Last < r.First {
			return false
		}
		floor = r.Last
	}
	return true
}

// runsLen is the number of offsets in runs.
func runsLen(runs []Run) int64 {
	var n int64
	for _, r := range runs {
		n += r.Len()
	}
	return n
}

// capOffsets keeps at most MaxAheadOffsets of the lowest offsets and says how many it cut.
func capOffsets(offs []int64) ([]int64, int) {
	if len(offs) <= MaxAheadOffsets {
		return offs, 0
	}
	return offs[:MaxAheadOffsets], len(offs) - MaxAheadOffsets
}

// capAttempts is capOffsets for attempts.
func capAttempts(as []Attempt) ([]Attempt, int) {
	if len(as) <= MaxAheadOffsets {
		return as, 0
	}
	return as[:MaxAheadOffsets], len(as) - MaxAheadOffsets
}

// planSection gives one section what is left of the body's room: size(n) reports the payload
// bytes and entries of what fits in n bytes. An empty section is left out and takes nothing.
// It returns the payload bytes and the entries the section keeps.
func planSection(room *int, size func(n int) (used, kept int)) (int, int) {
	if *room <= sectionHeader {
		return 0, 0
	}
	used, kept := size(*room - sectionHeader)
	if kept == 0 {
		return 0, 0
	}
	*room -= sectionHeader + used
	return used, kept
}

// sectionAt writes the header of a section of used payload bytes at dst[pos:] and returns
// where its payload ends; an empty section is left out.
func sectionAt(dst []byte, pos int, tag byte, used int) int {
	if used == 0 {
		return pos
	}
	dst[pos] = tag
	binary.BigEndian.PutUint16(dst[pos+1:], uint16(used))
	return pos + sectionHeader + used
}

// putRun encodes the run r after prev, uvarint(r.First - prev - 1) then
// uvarint(r.Last - r.First), into the room - used bytes left at dst[used:], shortening r to
// what fits (a shortened run fills the room exactly), and returns the bytes it wrote and the
// offsets of r it kept: 0 when not even its first fits. With a nil dst it only counts.
func putRun(dst []byte, room, used int, prev int64, r Run) (n int, kept int64) {
	gap, extra := uint64(r.First-prev-1), uint64(r.Last-r.First)
	left := room - used - uvarintLen(gap)
	if left < 1 {
		return 0, 0
	}
	extra = min(extra, maxUvarint(left))
	if dst != nil {
		binary.PutUvarint(dst[used:], gap)
		binary.PutUvarint(dst[used+uvarintLen(gap):], extra)
	}
	return uvarintLen(gap) + uvarintLen(extra), int64(extra) + 1
}

// putRuns encodes runs, ascending and all above base, as maximal runs (runs that touch are
// joined): for each, uvarint(start - prev - 1) then uvarint(end - start), where prev is base
// for the first run and the previous run's end after it. It keeps at most limit of the
// lowest offsets, and only what fits in room bytes (a run that does not fit whole is
// shortened), and returns the bytes used and the offsets encoded. With a nil dst it only
// counts; otherwise dst holds room bytes.
func putRuns(dst []byte, room int, base int64, runs []Run, limit int64) (used int, kept int64) {
	prev := base
	for i := 0; i < len(runs) && kept < limit; {
		r := runs[i]
		for i++; i < len(runs) && runs[i].First == r.Last+1; i++ {
			r.Last = runs[i].Last
		}
		r.Last = min(r.Last, r.First+(limit-kept)-1)
		n, k := putRun(dst, room, used, prev, r)
		used, kept, prev = used+n, kept+k, r.First+k-1
		if k < r.Len() {
			break // out of room
		}
	}
	return used, kept
}

// putOffsets is putRuns for ascending offsets, every maximal run of consecutive ones a run.
func putOffsets(dst []byte, room int, base int64, offs []int64) (used, kept int) {
	prev := base
	for i := 0; i < len(offs); {
		r := Run{offs[i], offs[i]}
		for i++; i < len(offs) && offs[i] == r.Last+1; i++ {
			r.Last = offs[i]
		}
		n, k := putRun(dst, room, used, prev, r)
		used, kept, prev = used+n, kept+int(k), r.First+k-1
		if k < r.Len() {
			break // out of room
		}
	}
	return used, kept
}

// putAttempts encodes uvarint(offset - prev - 1), uvarint(count) per entry, prev starting at
// base; it keeps the entries of the lowest offsets that fit in room bytes. With a nil dst it
// only counts.
func putAttempts(dst []byte, room int, base int64, as []Attempt) (used, kept int) {
	prev := base
	for _, a := range as {
		gap, count := uint64(a.Offset-prev-1), uint64(a.Count)
		n := uvarintLen(gap) + uvarintLen(count)
		if n > room-used {
			break
		}
		if dst != nil {
			binary.PutUvarint(dst[used:], gap)
			binary.PutUvarint(dst[used+uvarintLen(gap):], count)
		}
		used += n
		prev = a.Offset
		kept++
	}
	return used, kept
}

// putKeyTails encodes key tails, ascending by From and above base: for each,
// uvarint(From - prev - 1), prev being base and then the previous tail's From, then the Key
// in 8 bytes. It returns the bytes used (at most MaxKeyTails·18). With a nil dst it only
// counts.
func putKeyTails(dst []byte, base int64, tails []KeyTail) int {
	used, prev := 0, base
	for _, k := range tails {
		gap := uint64(k.From - prev - 1)
		if dst != nil {
			binary.PutUvarint(dst[used:], gap)
			binary.BigEndian.PutUint64(dst[used+uvarintLen(gap):], k.Key)
		}
		used += uvarintLen(gap) + 8
		prev = k.From
	}
	return used
}

// readKeyTails decodes what putKeyTails wrote, appending to dst; the tails must keep the
// rules validKeyTails checks, and be at least one.
func readKeyTails(p []byte, base int64, dst []KeyTail) ([]KeyTail, error) {
	start, prev := len(dst), base
	if len(p) == 0 {
		return dst, errTails
	}
	for len(p) > 0 {
		gap, n := readUvarint(p)
		if n <= 0 {
			return dst, errVarint
		}
		if len(p) < n+8 {
			return dst, errTails
		}
		from, ok := after(prev, gap)
		if !ok {
			return dst, errRange
		}
		if len(dst)-start >= MaxKeyTails {
			return dst, errTails
		}
		dst = append(dst, KeyTail{Key: binary.BigEndian.Uint64(p[n:]), From: from})
		p, prev = p[n+8:], from
	}
	if !validKeyTails(dst[start:], base) {
		return dst, errTails
	}
	return dst, nil
}

// readRuns decodes what putRuns wrote, appending the runs to dst. Runs must be maximal (a gap
// of zero is allowed only before the first run), stay within int64 and hold at most
// MaxAheadOffsets offsets together, as an expanding reader would allow.
func readRuns(p []byte, base int64, dst []Run) ([]Run, error) {
	var total uint64
	err := walkRuns(p, base, func(r Run) error {
		extra := uint64(r.Last - r.First)
		if total+extra >= MaxAheadOffsets {
			return errTooMany
		}
		total += extra + 1
		dst = append(dst, r)
		return nil
	})
	return dst, err
}

// readOffsets decodes what putOffsets wrote, appending every offset to dst, at most
// MaxAheadOffsets of them.
func readOffsets(p []byte, base int64, dst []int64) ([]int64, error) {
	err := walkRuns(p, base, func(r Run) error {
		if uint64(len(dst))+uint64(r.Last-r.First) >= MaxAheadOffsets {
			return errTooMany
		}
		for off := r.First; ; off++ {
			dst = append(dst, off)
			if off == r.Last {
				return nil
			}
		}
	})
	return dst, err
}

// walkRuns decodes the runs of p, prev starting at base, and calls each with every run in
// order, stopping at the first error.
func walkRuns(p []byte, base int64, each func(Run) error) error {
	prev, first := base, true
	for len(p) > 0 {
		gap, n := readUvarint(p)
		if n <= 0 {
			return errVarint
		}
		extra, m := readUvarint(p[n:])
		if m <= 0 {
			return errVarint
		}
		p = p[n+m:]
		if !first && gap == 0 {
			return errRun
		}
		start, ok := after(prev, gap)
		if !ok || extra > uint64(math.MaxInt64-start) {
			return errRange
		}
		r := Run{start, start + int64(extra)}
		if err := each(r); err != nil {
			return err
		}
		prev, first = r.Last, false
	}
	return nil
}

// readAttempts decodes what putAttempts wrote, appending to dst.
func readAttempts(p []byte, base int64, dst []Attempt) ([]Attempt, error) {
	prev := base
	for len(p) > 0 {
		gap, n := readUvarint(p)
		if n <= 0 {
			return dst, errVarint
		}
		count, m := readUvarint(p[n:])
		if m <= 0 {
			return dst, errVarint
		}
		p = p[n+m:]
		off, ok := after(prev, gap)
		if !ok {
			return dst, errRange
		}
		if count > math.MaxUint32 {
			return dst, errAttempts
		}
		if len(dst) >= MaxAheadOffsets {
			return dst, errTooMany
		}
		dst = append(dst, Attempt{Offset: off, Count: uint32(count)})
		prev = off
	}
	return dst, nil
}

// after is prev + 1 + gap, unless that leaves int64.
func after(prev int64, gap uint64) (int64, bool) {
	if prev == math.MaxInt64 || gap > uint64(math.MaxInt64-prev-1) {
		return 0, false
	}
	return prev + 1 + int64(gap), true
}

// readUvarint is binary.Uvarint that also refuses over-long encodings, so every record has
// exactly one byte form.
func readUvarint(p []byte) (uint64, int) {
	v, n := binary.Uvarint(p)
	if n > 0 && n != uvarintLen(v) {
		return 0, -1
	}
	return v, n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// maxUvarint is the largest value a uvarint of at most n bytes holds.
func maxUvarint(n int) uint64 {
	if n >= 9 {
		return math.MaxInt64
	}
	return 1<<(7*uint(n)) - 1
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// newestSlot says which slot recovery takes, or -1 when none is valid: the larger sequence
// number; on a tie (copies that should not exist) the larger frontier, then the lower slot.
// Every candidate holds only acked values, so any choice keeps invariant "no frontier past an
// ack" (docs/protocol.md).
func newestSlot(valid [AheadSlots]bool, recs *[AheadSlots]Record) int {
	n := -1
	for i := range valid {
		if !valid[i] {
			continue
		}
		if n < 0 {
			n = i
			continue
		}
		a, b := &recs[n], &recs[i]
		if b.Seq > a.Seq || (b.Seq == a.Seq && b.Frontier > a.Frontier) {
			n = i
		}
	}
	return n
}

// AppendRuns appends the runs of consecutive offsets of offs, which must ascend, to dst: how
// a Source that keeps acked offsets one by one hands them over in State.Ahead.
func AppendRuns(dst []Run, offs []int64) []Run {
	start := len(dst)
	for _, off := range offs {
		if n := len(dst); n > start && dst[n-1].Last == off-1 {
			dst[n-1].Last = off
			continue
		}
		dst = append(dst, Run{off, off})
	}
	return dst
}
