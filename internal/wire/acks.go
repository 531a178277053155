package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Plain acks in their compact form (V16): the body of an Acks frame, and of a Consume with
// the Acks flag after its flags byte; and the acks reply that answers them.
//
// The body: a u16 count (1 to MaxLargeBatch), the budget (a duration, positive: what was
// left of the acks' budget when the frame left, one for all), then the records in runs of
// one partition, each run its partition (uvarint), its length (uvarint, at least 1), its
// first record's offset (uvarint) and nonce (u64), then each other record's offset as its
// difference from the record before it (a zigzag varint) and its nonce (u64). The runs hold
// count records in all, in the requester's order; two runs in a row may name one partition.

// minAckSize is the fewest bytes a record of the compact form takes: an offset's
// difference of one byte, and the nonce.
const minAckSize = 1 + 8

// checkAcks refuses records the compact form cannot carry: none or too many, a record not a
// plain ack, a handle with a negative field, a budget that is not positive or not the
// others'.
func checkAcks(records []Record) error {
	if len(records) == 0 || len(records) > MaxLargeBatch {
		return fmt.Errorf("%d plain acks (1 to %d)", len(records), MaxLargeBatch)
	}
	budget := records[0].Budget
	if budget <= 0 {
		return fmt.Errorf("plain acks of budget %v", budget)
	}
	for i := range records {
		r := &records[i]
		if r.Op != OpAck || r.Arg != 0 || r.Budget != budget || r.Handle.Partition < 0 || r.Handle.Offset < 0 {
			return fmt.Errorf("a record of op %d, handle %+v, arg %v, budget %v among plain acks of budget %v", r.Op, r.Handle, r.Arg, r.Budget, budget)
		}
	}
	return nil
}

// acksSize bounds the size of records' compact form (a record's offset takes 10 bytes at
// most, a run's partition and length 8).
func acksSize(records []Record) int {
	if len(records) == 0 {
		return 0
	}
	return 2 + 8 + len(records)*(10+8+8)
}

// appendAcks appends the compact form of count plain acks of budget, of handles at(0) to
// at(count-1), checked by checkAcks.
func appendAcks(b []byte, count int, budget time.Duration, at func(i int) Handle) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(count))
	b = binary.BigEndian.AppendUint64(b, uint64(budget))
	for i := 0; i < count; {
		first := at(i)
		end := i + 1
		for end < count && at(end).Partition == first.Partition {
			end++
		}
		b = appendUvarint(b, uint64(first.Partition))
		b = appendUvarint(b, uint64(end-i))
		b = appendUvarint(b, uint64(first.Offset))
		b = binary.BigEndian.AppendUint64(b, first.Nonce)
		prev := first.Offset
		for j := i + 1; j < end; j++ {
			h := at(j)
			b = appendVarint(b, h.Offset-prev)
			b = binary.BigEndian.AppendUint64(b, h.Nonce)
			prev = h.Offset
		}
		i = end
	}
	return b
}

// EncodeAcks writes the Acks frame of plain acks of topic, of handles, with budget: the
// frame EncodeRequest writes for those records, made without them. Handles the compact
// form cannot carry (none, more than MaxLargeBatch, a negative field), a budget that is not
// positive or a topic over MaxTopic are ErrInvalidRequest.
func EncodeAcks(topic string, budget time.Duration, handles []Handle) ([]byte, error) {
	invalid := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
	}
	switch {
	case len(topic) > MaxTopic:
		return invalid("a topic of %d bytes (at most %d)", len(topic), MaxTopic)
	case len(handles) == 0 || len(handles) > MaxLargeBatch:
		return invalid("%d plain acks (1 to %d)", len(handles), MaxLargeBatch)
	case budget <= 0:
		return invalid("plain acks of budget %v", budget)
	}
	for _, h := range handles {
		if h.Partition < 0 || h.Offset < 0 {
			return invalid("a plain ack of handle %+v", h)
		}
	}
	b := make([]byte, 0, headerSize+len(topic)+2+8+len(handles)*(10+8)+8)
	b = append(b, OpAcks)
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	return appendAcks(b, len(handles), budget, func(i int) Handle { return handles[i] }), nil
}

// uvarint reads an unsigned varint (see readUvarint). One of a byte, the usual field of a
// compact delivery (a difference from the delivery before), is read in line.
func (r *reader) uvarint(what string) uint64 {
	if x, rest, ok := oneByteUvarint(r.b); ok {
		r.b = rest
		return x
	}
	return r.readUvarint(what)
}

// varint reads a signed (zig-zag) varint (see readUvarint), one of a byte in line.
func (r *reader) varint(what string) int64 { return unzigzag(r.uvarint(what)) }

// readUvarint reads a uvarint as binary.Uvarint does, in one loop of its own (a compact
// delivery's timestamp and expiry are a few bytes each): one short, over 64 bits, or longer
// than its value needs (a last byte of zero) is malformed, so that each value has one form.
func (r *reader) readUvarint(what string) uint64 {
	if b := r.b; len(b) >= 2 && b[0] >= 0x80 && b[1] < 0x80 && b[1] != 0 {
		// Two bytes: a timestamp's difference, a value's length.
		r.b = b[2:]
		return uint64(b[0]&0x7f) | uint64(b[1])<<7
	}
	if r.err != nil {
		return 0
	}
	var x uint64
	for i, c := range r.b {
		if i == binary.MaxVarintLen64 {
			break // over 64 bits
		}
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 || i > 0 && c == 0 {
				break // over 64 bits, or longer than its value needs
			}
			r.b = r.b[i+1:]
			return x | uint64(c)<<(7*i)
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	r.fail("%s: a varint short, over 64 bits or longer than its value needs", what)
	return 0
}

// acks reads the compact form of plain acks: records of op Ack, each with the frame's
// budget.
func (r *reader) acks() []Record {
	handles, budget := readAcks(r, []Handle(nil))
	if r.err != nil {
		return nil
	}
	records := make([]Record, len(handles))
	for i, h := range handles {
		records[i] = Record{Op: OpAck, Handle: h, Budget: budget}
	}
	return records
}

// PlainHandle is a type plain acks decode into (see DecodeAcks): Handle, or a handle of the
// same fields (inflight.Handle).
type PlainHandle interface {
	~struct {
		Partition int32
		Offset    int64
		Nonce     uint64
	}
}

// readAcks reads the compact form of plain acks, their handles appended to dst[:0] (grown
// only once the count is one the bytes left can hold), and returns them and their budget.
func readAcks[H PlainHandle](r *reader, dst []H) ([]H, time.Duration) {
	count := int(r.u16("acks"))
	budget := r.duration("acks budget")
	switch {
	case r.err != nil:
		return nil, 0
	case count == 0 || count > MaxLargeBatch || count > len(r.b)/minAckSize:
		r.fail("%d plain acks in %d bytes", count, len(r.b))
		return nil, 0
	case budget <= 0:
		r.fail("plain acks of budget %v", budget)
		return nil, 0
	}
	handles := slices.Grow(dst[:0], count)
	for len(handles) < count && r.err == nil {
		p := r.uvarint("acks partition")
		run := r.uvarint("acks run")
		offset := r.uvarint("acks offset")
		if r.err == nil && (p > math.MaxInt32 || run == 0 || run > uint64(count-len(handles)) || offset > math.MaxInt64) {
			r.fail("a run of %d plain acks of partition %d from offset %d, %d of %d read", run, p, offset, len(handles), count)
		}
		h := Handle{Partition: int32(p), Offset: int64(offset)}
		for k := uint64(0); k < run && r.err == nil; k++ {
			if k > 0 {
				d := r.varint("acks offset difference")
				next := h.Offset + d
				if r.err == nil && (next < 0 || d > 0 && next < h.Offset) {
					r.fail("an offset %d past %d", d, h.Offset)
				}
				h.Offset = next
			}
			h.Nonce = r.u64("acks nonce")
			handles = append(handles, H(h))
		}
	}
	if r.err != nil {
		return nil, 0
	}
	return handles, budget
}

// DecodeAcks reads an Acks frame as DecodeRequest does (its errors the same), its plain acks'
// handles appended to dst[:0] (allocated only when its capacity falls short) rather than
// made records: an owner applies them where they lie. It returns the frame's topic (a copy)
// and budget.
func DecodeAcks[H PlainHandle](b []byte, v Version, dst []H) (topic string, budget time.Duration, handles []H, err error) {
	r, topic, err := readHeader(b, v)
	switch {
	case err != nil:
		return "", 0, nil, err
	case b[0] != OpAcks:
		return "", 0, nil, fmt.Errorf("%w: op %d is not Acks", ErrBadFrame, b[0])
	}
	handles, budget = readAcks(&r, dst)
	if r.err == nil && len(r.b) > 0 {
		r.fail("trailing data")
	}
	if r.err != nil {
		return "", 0, nil, r.err
	}
	return topic, budget, handles, nil
}

// acksReplyMark opens an acks reply, as consumeReplyMark opens a consume reply: an ack
// reply (a refusal of the whole frame) opens with zero.
const acksReplyMark byte = 0xC9

// Failed is the answer to one plain ack of an Acks frame (or of a Consume's acks) that was
// not applied: its index in the frame's records, and the answer.
type Failed struct {
	Index  int
	Answer Answer
}

// AppendAcksReply appends to dst the acks reply to count plain acks of which failed were not
// applied (their indexes ascending, each below count; each answer's status not StatusOK,
// its expiry not carried), every other one applied: the mark, the count applied (u16), the
// count failed (u16), then per failed ack its index (u16), its status and its message (u16
// length, cut to MaxMessage). A Consume's acks reply is followed by its consume reply.
func AppendAcksReply(dst []byte, count int, failed []Failed) []byte {
	size := 1 + 2 + 2
	for i := range failed {
		size += 2 + 1 + 2 + min(len(failed[i].Answer.Message), MaxMessage)
	}
	b := slices.Grow(dst, size)
	b = append(b, acksReplyMark)
	b = binary.BigEndian.AppendUint16(b, uint16(count-len(failed)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(failed)))
	for i := range failed {
		f := &failed[i]
		b = binary.BigEndian.AppendUint16(b, uint16(f.Index))
		b = append(b, f.Answer.Status)
		b = appendMessage(b, f.Answer.Message)
	}
	return b
}

// AcksReply is an acks reply read by DecodeAcksReply.
type AcksReply struct {
	// Answers holds an answer per plain ack, in the frame's order: StatusOK for those
	// applied. Nil for a refusal.
	Answers []Answer
	// Rest is what follows the acks reply: a Consume's consume reply (empty for an Acks
	// frame's).
	Rest []byte
	// Refused: the owner refused the whole frame, in an ack reply of one answer (Refusal):
	// StatusUnsupported from a release before V16 refusing an Acks frame, StatusBadRequest
	// refusing a Consume's Acks flag, another status from one that could not serve the
	// frame at all. None of its acks was applied.
	Refused bool
	Refusal Answer
}

// errAcksReply is what a malformed acks reply wraps, with ErrBadFrame.
var errAcksReply = errors.New("acks reply")

// DecodeAcksReply reads the acks reply to count plain acks at the start of b, the answers
// appended to dst[:0] (grown only when its capacity falls short), or a refusal of the whole
// frame in the ack reply format (which is all of b). A reply whose counts do not add up to
// count, whose indexes are not ascending below count, that gives a failed ack StatusOK, a
// message over MaxMessage, a short reply, or a refusal that is not one answer of a status
// other than StatusOK, is ErrBadFrame; so is b over MaxFrame.
func DecodeAcksReply(dst []Answer, b []byte, count int) (AcksReply, error) {
	bad := func(format string, args ...any) (AcksReply, error) {
		return AcksReply{}, fmt.Errorf("%w: %w: "+format, append([]any{ErrBadFrame, errAcksReply}, args...)...)
	}
	if len(b) > MaxFrame {
		return bad("%d bytes (at most %d)", len(b), MaxFrame)
	}
	if len(b) > 0 && b[0] != acksReplyMark {
		answers, err := DecodeReply(b)
		if err != nil {
			return AcksReply{}, err
		}
		if len(answers) != 1 || answers[0].Status == StatusOK {
			return bad("a refusal of %d answers", len(answers))
		}
		return AcksReply{Refused: true, Refusal: answers[0]}, nil
	}
	r := reader{b: b}
	r.u8("acks reply") // the mark
	applied := int(r.u16("acks reply"))
	failures := int(r.u16("acks reply"))
	if r.err != nil {
		return AcksReply{}, r.err
	}
	if applied+failures != count || count > MaxLargeBatch {
		return bad("%d applied and %d not, answering %d acks", applied, failures, count)
	}
	answers := slices.Grow(dst[:0], count)[:count]
	clear(answers)
	next := 0 // the lowest index a failure may have
	for range failures {
		i := int(r.u16("acks reply failure"))
		status := r.u8("acks reply failure")
		msg := r.message()
		if r.err != nil {
			return AcksReply{}, r.err
		}
		if i < next || i >= count || status == StatusOK {
			return bad("a failure of ack %d with status %d (ascending, below %d, not OK)", i, status, count)
		}
		answers[i] = Answer{Status: status, Message: msg}
		next = i + 1
	}
	return AcksReply{Answers: answers, Rest: r.b}, nil
}
