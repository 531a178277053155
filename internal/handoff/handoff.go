package handoff

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"narad.dev/consume/inflight"
)

// Errors of Decode. Test them with errors.Is.
var (
	// ErrDamaged: the bytes are not a partition's state this codec wrote (truncated, bit
	// flips, another kind of file). Nothing was decoded.
	ErrDamaged = errors.New("handoff: damaged partition state")
	// ErrVersion: the bytes are of a version this release does not read (a newer owner's).
	ErrVersion = errors.New("handoff: partition state of an unknown version")
)

// Version is the version Append writes.
const Version = 1

var magic = [4]byte{'N', 'R', 'C', 'H'}

const (
	flagLive = 1 << 0
	// flagHostIncarnation: the state is bound to the host's incarnation of the topic
	// (inflight.State.HostIncarnation), written in 8 bytes after the sections. Set only
	// for a bound state, so that an unbound one encodes as before and every release reads
	// it; an older release refuses a bound one as damaged, which redelivers, never skips.
	flagHostIncarnation = 1 << 1
	// flagEpoch: the state carries the ownership epoch it was kept under
	// (inflight.State.Epoch), in 8 bytes after the host's incarnation. Set only when there is
	// one, as flagHostIncarnation is, so a host that grants no epochs writes what every
	// release reads.
	flagEpoch = 1 << 2
	// flagKeyTails: the state carries key tails (inflight.State.KeyTails: an ordered topic's
	// records parked in the acked-ahead runs, unsettled), after the epoch. Set only when there
	// are some, so a state without them encodes as before; an older release refuses it as
	// damaged rather than read the parked records as acked.
	flagKeyTails = 1 << 3

	// MaxKeyTails is the most key tails a state carries (as offsets.MaxKeyTails): a decoder
	// refuses more as damage.
	MaxKeyTails = 32

	kindReleased = 0
	kindLeased   = 1
	kindDelayed  = 2

	// maxReason is the highest inflight.Reason the format carries.
	maxReason = inflight.ReasonRequeued
	// maxSpan bounds a duration on the wire (about 146 years), so that now plus it cannot
	// overflow a time's Unix nanoseconds.
	maxSpan = time.Duration(1 << 62)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Partition is one partition's state as it moves.
type Partition struct {
	Topic     string
	Partition int32
	// ID names the hand-off: random and never 0, set by the caller.
	ID uint64
	// Live is true for the state of a live owner's hand-off, whose State.Held carries its
	// leases; false for a state read from durable files alone (a failover).
	Live bool
	// State is the shard's state. Its Incarnation is never 0.
	State inflight.State
}

// Append appends the encoding of p as of now to dst and returns the result. A lease's expiry
// and a delay's end are written as the time left after now (0 if passed), a lease's grant as
// its age. p.State's sets must be ascending, as inflight's Snapshot and HandOff give them, and
// its key tails keep their rules (at most MaxKeyTails, ascending by From above the frontier,
// keys nonzero and distinct), or Decode refuses the bytes as damaged.
func Append(dst []byte, p *Partition, now time.Time) []byte {
	start := len(dst)
	st := &p.State
	flags := byte(0)
	if p.Live {
		flags |= flagLive
	}
	if st.HostIncarnation != 0 {
		flags |= flagHostIncarnation
	}
	if st.Epoch != 0 {
		flags |= flagEpoch
	}
	if len(st.KeyTails) > 0 {
		flags |= flagKeyTails
	}
	dst = append(dst, magic[:]...)
	dst = append(dst, Version, flags)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(p.Topic)))
	dst = append(dst, p.Topic...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.Partition))
	dst = binary.BigEndian.AppendUint64(dst, st.Incarnation)
	dst = binary.BigEndian.AppendUint64(dst, p.ID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(st.Frontier))
	dst = binary.BigEndian.AppendUint64(dst, st.Fence)

	dst = appendRuns(dst, st.AckedAhead, st.Frontier)
	dst = binary.AppendUvarint(dst, uint64(len(st.Attempts)))
	prev := st.Frontier
	for _, a := range st.Attempts {
		dst = binary.AppendUvarint(dst, uint64(a.Offset-prev-1))
		dst = binary.AppendUvarint(dst, uint64(a.Count))
		prev = a.Offset
	}
	dst = appendOffsets(dst, st.Quarantined, -1)
	dst = appendOffsets(dst, st.Requeued, -1)
	dst = binary.AppendUvarint(dst, uint64(len(st.Held)))
	prev = -1
	for _, h := range st.Held {
		dst = binary.AppendUvarint(dst, uint64(h.Offset-prev-1))
		prev = h.Offset
		dst = binary.BigEndian.AppendUint64(dst, h.Nonce)
		kind := byte(kindReleased)
		switch {
		case h.Nonce != 0:
			kind = kindLeased
		case h.Delayed:
			kind = kindDelayed
		}
		dst = append(dst, kind)
		dst = binary.AppendUvarint(dst, uint64(h.Attempts))
		dst = append(dst, byte(h.Reason))
		if kind != kindReleased {
			dst = binary.AppendUvarint(dst, uint64(span(h.Until.Sub(now))))
		}
		if kind == kindLeased {
			dst = binary.AppendUvarint(dst, uint64(span(now.Sub(h.LeasedAt))))
		}
	}
	dst = appendOffsets(dst, st.Corrupt, st.Frontier)
	if st.HostIncarnation != 0 {
		dst = binary.BigEndian.AppendUint64(dst, st.HostIncarnation)
	}
	if st.Epoch != 0 {
		dst = binary.BigEndian.AppendUint64(dst, st.Epoch)
	}
	if len(st.KeyTails) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(st.KeyTails)))
		prev := st.Frontier
		for _, k := range st.KeyTails {
			dst = binary.AppendUvarint(dst, uint64(k.From-prev-1))
			dst = binary.BigEndian.AppendUint64(dst, k.Key)
			prev = k.From
		}
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// NewID returns 64 random bits, never 0: a hand-off's ID, or a fresh incarnation.
func NewID() uint64 {
	var b [8]byte
	for {
		crand.Read(b[:]) // never fails (crypto/rand documents it)
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// span clamps a duration to what the format carries: [0, maxSpan].
func span(d time.Duration) time.Duration { return min(max(d, 0), maxSpan) }

// appendRuns appends the offsets of runs as appendOffsets does, one by one: the format
// predates runs, and a peer on an older release reads them so.
func appendRuns(dst []byte, runs []inflight.Run, prev int64) []byte {
	var n int64
	for _, r := range runs {
		n += r.Len()
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, r := range runs {
		dst = binary.AppendUvarint(dst, uint64(r.First-prev-1))
		for range r.Len() - 1 {
			dst = append(dst, 0) // the next offset: a gap of 0
		}
		prev = r.Last
	}
	return dst
}

func appendOffsets(dst []byte, offs []int64, prev int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(offs)))
	for _, off := range offs {
		dst = binary.AppendUvarint(dst, uint64(off-prev-1))
		prev = off
	}
	return dst
}

// Decode decodes the bytes Append wrote, reading times left and ages against now. It never
// panics and allocates at most in proportion to len(b).
func Decode(b []byte, now time.Time) (Partition, error) {
	var p Partition
	if len(b) < 8 || [4]byte(b[:4]) != magic {
		return p, fmt.Errorf("%w: no partition state header", ErrDamaged)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return p, fmt.Errorf("%w: checksum mismatch", ErrDamaged)
	}
	if b[4] != Version {
		return p, fmt.Errorf("%w: version %d (this release reads %d)", ErrVersion, b[4], Version)
	}
	r := reader{b: body[5:]}
	flags := r.byte()
	if flags&^(flagLive|flagHostIncarnation|flagEpoch|flagKeyTails) != 0 {
		return p, fmt.Errorf("%w: unknown flags %#x", ErrDamaged, flags)
	}
	p.Live = flags&flagLive != 0
	p.Topic = string(r.bytes(int(r.uint16())))
	p.Partition = int32(r.uint32())
	st := &p.State
	st.Incarnation = r.uint64()
	p.ID = r.uint64()
	st.Frontier = int64(r.uint64())
	st.Fence = r.uint64()
	if r.err == nil {
		switch {
		case p.Topic == "":
			r.fail("empty topic")
		case p.Partition < 0:
			r.fail("negative partition")
		case st.Incarnation == 0:
			r.fail("incarnation 0")
		case p.ID == 0:
			r.fail("id 0")
		case st.Frontier < -1:
			r.fail("frontier below -1")
		}
	}
	st.AckedAhead = r.runs(st.Frontier)
	if n := r.count(); n > 0 {
		st.Attempts = make([]inflight.Attempt, n)
		prev := st.Frontier
		for i := range st.Attempts {
			off := r.next(prev)
			count := r.uvarint()
			if count == 0 || count > math.MaxUint32 {
				r.fail("attempt count out of range")
			}
			st.Attempts[i] = inflight.Attempt{Offset: off, Count: uint32(count)}
			prev = off
		}
	}
	st.Quarantined = r.offsets(-1)
	st.Requeued = r.offsets(-1)
	if len(st.Requeued) > 0 && st.Requeued[len(st.Requeued)-1] > st.Frontier {
		r.fail("requeued offset above the frontier")
	}
	if n := r.count(); n > 0 {
		st.Held = make([]inflight.Held, n)
		prev := int64(-1)
		for i := range st.Held {
			h := &st.Held[i]
			h.Offset = r.next(prev)
			prev = h.Offset
			h.Nonce = r.uint64()
			kind := r.byte()
			attempts := r.uvarint()
			reason := r.byte()
			if attempts > math.MaxUint32 || reason > byte(maxReason) {
				r.fail("held offset's attempts or reason out of range")
			}
			h.Attempts, h.Reason = uint32(attempts), inflight.Reason(reason)
			switch {
			case kind == kindLeased && h.Nonce != 0:
				h.Until = now.Add(r.span())
				h.LeasedAt = now.Add(-r.span())
			case kind == kindDelayed && h.Nonce == 0:
				h.Delayed = true
				h.Until = now.Add(r.span())
			case kind == kindReleased && h.Nonce == 0:
			default:
				r.fail("held offset of an unknown kind")
			}
		}
	}
	st.Corrupt = r.offsets(st.Frontier)
	if flags&flagHostIncarnation != 0 {
		if st.HostIncarnation = r.uint64(); r.err == nil && st.HostIncarnation == 0 {
			r.fail("bound to host incarnation 0")
		}
	}
	if flags&flagEpoch != 0 {
		if st.Epoch = r.uint64(); r.err == nil && st.Epoch == 0 {
			r.fail("ownership epoch 0")
		}
	}
	if flags&flagKeyTails != 0 {
		st.KeyTails = r.keyTails(st.Frontier)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return Partition{}, r.err
	}
	return p, nil
}

// reader reads the body of an encoding; the first failure sticks and every later read
// returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrDamaged, why)
		r.b = nil
	}
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n > len(r.b) {
		r.fail("truncated")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if v := r.bytes(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) uint16() uint16 {
	if v := r.bytes(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *reader) uint32() uint32 {
	if v := r.bytes(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) uint64() uint64 {
	if v := r.bytes(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a section's count, which cannot exceed the bytes left (an entry takes at
// least one).
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("count beyond the bytes left")
		return 0
	}
	return int(n)
}

// next reads the offset after prev: prev + 1 + a gap, within int64.
func (r *reader) next(prev int64) int64 {
	gap := r.uvarint()
	if gap > uint64(math.MaxInt64-1) || int64(gap) > math.MaxInt64-1-prev {
		r.fail("offset out of range")
		return prev
	}
	return prev + 1 + int64(gap)
}

// span reads a duration of at most maxSpan.
func (r *reader) span() time.Duration {
	v := r.uvarint()
	if v > uint64(maxSpan) {
		r.fail("duration out of range")
		return 0
	}
	return time.Duration(v)
}

// runs reads what appendRuns wrote, joining consecutive offsets into runs.
func (r *reader) runs(prev int64) []inflight.Run {
	n := r.count()
	var runs []inflight.Run
	for range n {
		off := r.next(prev)
		if k := len(runs); k > 0 && runs[k-1].Last == off-1 {
			runs[k-1].Last = off
		} else {
			runs = append(runs, inflight.Run{First: off, Last: off})
		}
		prev = off
	}
	return runs
}

// keyTails reads the key tails: 1 to MaxKeyTails of them, each uvarint(From - prev - 1)
// (prev the frontier, then the previous From) and the key in 8 bytes, never 0, no key twice.
func (r *reader) keyTails(prev int64) []inflight.KeyTail {
	n := r.count()
	if r.err == nil && (n == 0 || n > MaxKeyTails) {
		r.fail("key tails' count out of range")
	}
	if r.err != nil {
		return nil
	}
	tails := make([]inflight.KeyTail, n)
	for i := range tails {
		k := &tails[i]
		k.From = r.next(prev)
		k.Key = r.uint64()
		prev = k.From
		if r.err != nil {
			return nil
		}
		if k.Key == 0 {
			r.fail("key tail of key 0")
			return nil
		}
		for _, o := range tails[:i] {
			if o.Key == k.Key {
				r.fail("two key tails of one key")
				return nil
			}
		}
	}
	return tails
}

func (r *reader) offsets(prev int64) []int64 {
	n := r.count()
	if n == 0 {
		return nil
	}
	offs := make([]int64, n)
	for i := range offs {
		offs[i] = r.next(prev)
		prev = offs[i]
	}
	return offs
}
