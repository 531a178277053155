package wire

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// Reply statuses, each the HTTP status the op would have answered in process.
const (
	StatusOK          byte = 0 // 204 (200 for a consume): done
	StatusSettled     byte = 1 // 410: a repeated ack (inflight.ErrAlreadySettled)
	StatusGone        byte = 2 // 410: not the live lease (inflight.ErrGone)
	StatusBadRequest  byte = 3 // 400: a malformed handle, argument or frame
	StatusUnavailable byte = 4 // 503: try again (closed, not the owner, budget spent, requester gone), not applied
	StatusInternal    byte = 5 // 500
	StatusUnsupported byte = 6 // 400: the whole frame refused, its op unknown here
	StatusPass        byte = 7 // a Notify answered: nobody here can use the record
)

// MaxAnswers is the most answers an ack reply carries: one per entry of the largest frame
// answered entry by entry (a Register).
const MaxAnswers = max(MaxLargeBatch, MaxRegistrations)

// Answer is one answer of an ack reply.
type Answer struct {
	Status byte
	// Expiry is the new expiry of an Extend (a time, Unix ns), or, for an ExtendLeft, the
	// lease's time left at the owner when it applied the extension (a duration, ns); else 0.
	Expiry  int64
	Message string
}

const answerSize = 1 + 8 + 2 // without its message

// EncodeReply writes an ack reply: each answer in order, a message longer than MaxMessage cut
// to it.
func EncodeReply(answers []Answer) []byte {
	size := 2
	for i := range answers {
		size += answerSize + min(len(answers[i].Message), MaxMessage)
	}
	b := make([]byte, 0, size)
	b = binary.BigEndian.AppendUint16(b, uint16(len(answers)))
	for i := range answers {
		a := &answers[i]
		b = append(b, a.Status)
		b = binary.BigEndian.AppendUint64(b, uint64(a.Expiry))
		b = appendMessage(b, a.Message)
	}
	return b
}

func appendMessage(b []byte, msg string) []byte {
	msg = msg[:min(len(msg), MaxMessage)]
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

func (r *reader) message() string {
	n := int(r.u16("message"))
	if r.err == nil && n > MaxMessage {
		r.fail("a message of %d bytes (at most %d)", n, MaxMessage)
	}
	return string(r.take(n, "message"))
}

// DecodeReply reads an ack reply. Anything malformed (a short reply, more than MaxAnswers
// answers, a message over MaxMessage, bytes after the last answer, a reply over MaxFrame) is
// ErrBadFrame. Status bytes are not checked: a status this node does not know is the caller's
// to interpret.
func DecodeReply(b []byte) ([]Answer, error) { return DecodeReplyInto(nil, b) }

// DecodeReplyInto is DecodeReply appending the answers to dst[:0], so that a caller that
// knows how many to expect can read them without allocating. The returned slice is dst's
// when it has room, and dst's contents are then overwritten even when the reply is refused.
func DecodeReplyInto(dst []Answer, b []byte) ([]Answer, error) {
	if len(b) > MaxFrame {
		return nil, fmt.Errorf("%w: a reply of %d bytes (at most %d)", ErrBadFrame, len(b), MaxFrame)
	}
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: short reply", ErrBadFrame)
	}
	count := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if count > MaxAnswers || count > len(b)/answerSize {
		return nil, fmt.Errorf("%w: reply of %d answers in %d bytes", ErrBadFrame, count, len(b))
	}
	// The forwarded acks' hot path: read directly, not through a reader.
	answers := slices.Grow(dst[:0], count)
	for range count {
		if len(b) < answerSize {
			return nil, fmt.Errorf("%w: short answer", ErrBadFrame)
		}
		a := Answer{Status: b[0], Expiry: int64(binary.BigEndian.Uint64(b[1:]))}
		n := int(binary.BigEndian.Uint16(b[9:]))
		b = b[answerSize:]
		switch {
		case n > MaxMessage:
			return nil, fmt.Errorf("%w: a message of %d bytes (at most %d)", ErrBadFrame, n, MaxMessage)
		case len(b) < n:
			return nil, fmt.Errorf("%w: short message", ErrBadFrame)
		}
		if n > 0 {
			a.Message = string(b[:n])
		}
		b = b[n:]
		answers = append(answers, a)
	}
	if len(b) > 0 {
		return nil, fmt.Errorf("%w: trailing data", ErrBadFrame)
	}
	return answers, nil
}

// Delivery is one record of a consume reply.
type Delivery struct {
	Partition int32
	Offset    int64
	Nonce     uint64
	Attempt   uint32
	Reason    uint8
	// Expiry is when the lease ends: a time (Unix ns, 0 for the zero time; see Nanos and
	// Time), or, answering a Consume with RelativeExpiry, the lease's time left at the owner
	// when it replied (a duration, ns).
	Expiry    int64
	Timestamp int64 // Unix ns, 0 for the zero time
	Fence     uint64
	Key       []byte
	Value     []byte
	// Headers are the record's headers, in order. An owner sets them only for a requester
	// that asked (Consume.Headers, Replay.Headers): a reply carrying any opens with the
	// headers mark, which a requester before V9 cannot read.
	Headers []Header
}

// Header is one header of a delivery, as router.Header is one of a record: a key and a
// value, in the record's order, a key perhaps repeated.
type Header struct {
	Key   string
	Value []byte
}

// ConsumeReply answers a Consume or a Replay.
type ConsumeReply struct {
	Status     byte
	Message    string
	Deliveries []Delivery
	// Compact (V16) is the reply's form: the compact one (see appendCompactConsumeReply)
	// when set, which the encoder writes for a requester that asked for it
	// (Consume.Compact) and the decoder reports.
	Compact bool
}

// consumeReplyMark opens every consume reply whose deliveries carry no headers. An ack
// reply opens with its count's high byte, zero (MaxAnswers is below 256), so a refusal in
// the ack reply format (an older release refusing an op or a field it does not know, in the
// only format it writes) is told apart from a consume reply by its first byte.
const consumeReplyMark byte = 0xC5

// consumeReplyHeadersMark opens a consume reply (V9) in which some delivery carries
// headers: each delivery's headers then follow its value. Only a requester that asked for
// headers is sent one.
const consumeReplyHeadersMark byte = 0xC7

// isConsumeReplyMark reports whether b opens a consume reply.
func isConsumeReplyMark(b byte) bool {
	switch b {
	case consumeReplyMark, consumeReplyHeadersMark, consumeReplyCompactMark, consumeReplyCompactHeadersMark:
		return true
	}
	return false
}

// deliverySize is a delivery's size on the wire without its key, value and headers.
const deliverySize = 4 + 8 + 8 + 4 + 1 + 8 + 8 + 8 + 4 + 4

// headerFieldsSize is a header's size on the wire without its key and value: their lengths.
const headerFieldsSize = 4 + 4

// DeliverySize is d's size in a consume reply, so that an owner can bound a reply. With
// headers it counts their count too; a delivery without headers in a reply where another
// has some takes 4 bytes more (its count of none).
func DeliverySize(d *Delivery) int {
	size := deliverySize + len(d.Key) + len(d.Value)
	if len(d.Headers) > 0 {
		size += headersSize(d.Headers)
	}
	return size
}

// headersSize is the size of headers on the wire: their count, then each header.
func headersSize(headers []Header) int {
	size := 4
	for i := range headers {
		size += headerFieldsSize + len(headers[i].Key) + len(headers[i].Value)
	}
	return size
}

// AppendConsumeReply appends r's consume reply to dst, growing it once to hold the reply;
// a message longer than MaxMessage is cut to it. A reply with a delivery carrying headers
// opens with the headers mark, and every delivery then carries its headers (a count of
// none for one without); one without opens with the plain mark, byte for byte the reply
// before V9. A key, value, header key or header value must be shorter than 4 GiB, and the
// caller bounds the reply (DeliverySize) well below MaxFrame.
func AppendConsumeReply(dst []byte, r *ConsumeReply) []byte {
	if r.Compact {
		return appendCompactConsumeReply(dst, r)
	}
	size := 2 + 2 + min(len(r.Message), MaxMessage) + 4
	mark := consumeReplyMark
	for i := range r.Deliveries {
		d := &r.Deliveries[i]
		size += DeliverySize(d)
		if len(d.Headers) > 0 {
			mark = consumeReplyHeadersMark
		}
	}
	if mark == consumeReplyHeadersMark {
		for i := range r.Deliveries {
			if len(r.Deliveries[i].Headers) == 0 {
				size += 4
			}
		}
	}
	if cap(dst)-len(dst) < size {
		if len(dst) == 0 {
			dst = make([]byte, 0, size) // a reply alone: exactly its size
		} else {
			dst = slices.Grow(dst, size) // after others (a ConsumeBatch's): amortized
		}
	}
	b := append(dst, mark, r.Status)
	b = appendMessage(b, r.Message)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Deliveries)))
	for i := range r.Deliveries {
		d := &r.Deliveries[i]
		b = binary.BigEndian.AppendUint32(b, uint32(d.Partition))
		b = binary.BigEndian.AppendUint64(b, uint64(d.Offset))
		b = binary.BigEndian.AppendUint64(b, d.Nonce)
		b = binary.BigEndian.AppendUint32(b, d.Attempt)
		b = append(b, d.Reason)
		b = binary.BigEndian.AppendUint64(b, uint64(d.Expiry))
		b = binary.BigEndian.AppendUint64(b, d.Fence)
		b = binary.BigEndian.AppendUint64(b, uint64(d.Timestamp))
		b = binary.BigEndian.AppendUint32(b, uint32(len(d.Key)))
		b = append(b, d.Key...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(d.Value)))
		b = append(b, d.Value...)
		if mark == consumeReplyHeadersMark {
			b = appendHeaders(b, d.Headers)
		}
	}
	return b
}

// appendHeaders appends headers as a consume reply with the headers mark carries them: a
// u32 count, then per header its key and value, each a u32 length and the bytes.
func appendHeaders(b []byte, headers []Header) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(headers)))
	for i := range headers {
		h := &headers[i]
		b = binary.BigEndian.AppendUint32(b, uint32(len(h.Key)))
		b = append(b, h.Key...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(h.Value)))
		b = append(b, h.Value...)
	}
	return b
}

// headers reads the headers of one delivery: a count the bytes left can hold (each header
// takes headerFieldsSize at least), then each header. Keys are copies; values alias the frame,
// capped, nil when empty. No headers is nil.
func (r *reader) headers() []Header {
	count := r.u32("headers")
	if r.err == nil && uint64(count) > uint64(len(r.b)/headerFieldsSize) {
		r.fail("%d headers in %d bytes", count, len(r.b))
	}
	if r.err != nil || count == 0 {
		return nil
	}
	headers := make([]Header, 0, count)
	for range count {
		key := r.bytes("header key")
		value := r.bytes("header value")
		if r.err != nil {
			return nil
		}
		headers = append(headers, Header{Key: string(key), Value: value})
	}
	return headers
}

// DecodeConsumeReply reads a consume reply, or a refusal of the request in the ack reply
// format (one answer: its status and message, no deliveries). Each delivery's Key and Value,
// and its headers' values, alias b (nil when empty), each capped at its own length so that
// appending to one never writes into b; a caller that keeps them past b's life copies them.
// Header keys are copies. Anything malformed (a short reply, a count the bytes left cannot
// hold, of deliveries or of a delivery's headers, a length past the end, a message over
// MaxMessage, bytes after the last delivery, a reply over MaxFrame, a reply opening with the
// headers mark whose deliveries carry none) is ErrBadFrame.
func DecodeConsumeReply(b []byte) (ConsumeReply, error) { return DecodeConsumeReplyInto(nil, b) }

// DecodeConsumeReplyInto is DecodeConsumeReply with the deliveries appended to dst[:0]
// (allocated only when its capacity falls short), so that a caller that has read them can
// decode the next reply into the same slice. On an error the reply is empty.
func DecodeConsumeReplyInto(dst []Delivery, b []byte) (ConsumeReply, error) {
	if len(b) > MaxFrame {
		return ConsumeReply{}, fmt.Errorf("%w: a reply of %d bytes (at most %d)", ErrBadFrame, len(b), MaxFrame)
	}
	if len(b) > 0 && !isConsumeReplyMark(b[0]) {
		answers, err := DecodeReply(b)
		if err != nil {
			return ConsumeReply{}, err
		}
		if len(answers) != 1 || answers[0].Status == StatusOK {
			return ConsumeReply{}, fmt.Errorf("%w: a refusal of %d answers", ErrBadFrame, len(answers))
		}
		return ConsumeReply{Status: answers[0].Status, Message: answers[0].Message}, nil
	}
	r := reader{b: b}
	mark := r.u8("consume reply")
	if mark == consumeReplyCompactMark || mark == consumeReplyCompactHeadersMark {
		return decodeCompactConsumeReply(dst, &r, mark == consumeReplyCompactHeadersMark)
	}
	withHeaders := mark == consumeReplyHeadersMark
	var reply ConsumeReply
	reply.Status = r.u8("consume reply")
	reply.Message = r.message()
	count := r.u32("consume reply")
	if r.err == nil && uint64(count) > uint64(len(r.b)/deliverySize) {
		r.fail("%d deliveries in %d bytes", count, len(r.b))
	}
	if r.err != nil {
		return ConsumeReply{}, r.err
	}
	if count > 0 {
		reply.Deliveries = slices.Grow(dst[:0], int(count))
	}
	anyHeaders := false
	for range count {
		p := r.take(deliverySize-8, "delivery") // up to the key's length
		if r.err != nil {
			return ConsumeReply{}, r.err
		}
		d := Delivery{
			Partition: int32(binary.BigEndian.Uint32(p)),
			Offset:    int64(binary.BigEndian.Uint64(p[4:])),
			Nonce:     binary.BigEndian.Uint64(p[12:]),
			Attempt:   binary.BigEndian.Uint32(p[20:]),
			Reason:    p[24],
			Expiry:    int64(binary.BigEndian.Uint64(p[25:])),
			Fence:     binary.BigEndian.Uint64(p[33:]),
			Timestamp: int64(binary.BigEndian.Uint64(p[41:])),
		}
		d.Key = r.bytes("key")
		d.Value = r.bytes("value")
		if withHeaders {
			d.Headers = r.headers()
			anyHeaders = anyHeaders || len(d.Headers) > 0
		}
		if r.err != nil {
			return ConsumeReply{}, r.err
		}
		reply.Deliveries = append(reply.Deliveries, d)
	}
	if len(r.b) > 0 {
		return ConsumeReply{}, fmt.Errorf("%w: trailing data", ErrBadFrame)
	}
	if withHeaders && !anyHeaders {
		// The encoder writes the headers mark only for a delivery that has some: one
		// form per reply.
		return ConsumeReply{}, fmt.Errorf("%w: the headers mark, and no headers", ErrBadFrame)
	}
	return reply, nil
}

// consumeBatchReplyMark opens a ConsumeBatch's reply, as consumeReplyMark opens a consume
// reply: an ack reply (a refusal of the whole frame) opens with zero.
const consumeBatchReplyMark byte = 0xC6

// minConsumeReply is the shortest consume reply: mark, status, an empty message, a count
// (a uvarint of one byte in the compact form).
const minConsumeReply = 1 + 1 + 2 + 1

// BeginConsumeBatchReply appends to dst the head of the reply to a ConsumeBatch of count
// consumes. Each member's consume reply follows, appended in the request's order by
// AppendConsumeBatchMember.
func BeginConsumeBatchReply(dst []byte, count int) []byte {
	dst = append(dst, consumeBatchReplyMark)
	return binary.BigEndian.AppendUint16(dst, uint16(count))
}

// AppendConsumeBatchMember appends one member's consume reply to a ConsumeBatch's reply: its
// length (u32), then the reply as AppendConsumeReply writes it.
func AppendConsumeBatchMember(dst []byte, r *ConsumeReply) []byte {
	at := len(dst)
	dst = AppendConsumeReply(append(dst, 0, 0, 0, 0), r)
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// ConsumeBatchReply is a ConsumeBatch's reply: Members holds each member's consume reply
// in the order of the request's consumes, each to be read with DecodeConsumeReply (they
// alias the reply); or, when the owner refused the whole frame, Members is nil and Refusal
// is the refusal: StatusUnsupported from a release that does not know the op, another
// status from one that could not serve the frame at all.
type ConsumeBatchReply struct {
	Members [][]byte
	Refusal Answer
}

// DecodeConsumeBatchReply reads the reply to a ConsumeBatch of count consumes. A reply of
// another count of members, a member too short for a consume reply or not opening as one,
// a short reply, trailing data or a reply over MaxFrame is ErrBadFrame, and so is an ack
// reply that is not a refusal of one answer. The members are checked only that far: each
// is read by DecodeConsumeReply.
func DecodeConsumeBatchReply(b []byte, count int) (ConsumeBatchReply, error) {
	if len(b) > MaxFrame {
		return ConsumeBatchReply{}, fmt.Errorf("%w: a reply of %d bytes (at most %d)", ErrBadFrame, len(b), MaxFrame)
	}
	if len(b) > 0 && b[0] != consumeBatchReplyMark {
		answers, err := DecodeReply(b)
		if err != nil {
			return ConsumeBatchReply{}, err
		}
		if len(answers) != 1 || answers[0].Status == StatusOK {
			return ConsumeBatchReply{}, fmt.Errorf("%w: a refusal of %d answers", ErrBadFrame, len(answers))
		}
		return ConsumeBatchReply{Refusal: answers[0]}, nil
	}
	r := reader{b: b}
	r.u8("consume batch reply") // the mark
	n := int(r.u16("consume batch reply"))
	if r.err == nil && n != count {
		r.fail("%d members answering %d consumes", n, count)
	}
	if r.err == nil && n > len(r.b)/(4+minConsumeReply) {
		r.fail("%d members in %d bytes", n, len(r.b))
	}
	if r.err != nil {
		return ConsumeBatchReply{}, r.err
	}
	reply := ConsumeBatchReply{Members: make([][]byte, 0, n)}
	for range n {
		size := r.u32("consume batch member")
		if r.err == nil && (size < minConsumeReply || uint64(size) > uint64(len(r.b))) {
			r.fail("a member of %d bytes in %d", size, len(r.b))
		}
		member := r.take(int(size), "consume batch member")
		if r.err == nil && !isConsumeReplyMark(member[0]) {
			r.fail("a member opening with %#x", member[0])
		}
		if r.err != nil {
			return ConsumeBatchReply{}, r.err
		}
		reply.Members = append(reply.Members, member)
	}
	if len(r.b) > 0 {
		return ConsumeBatchReply{}, fmt.Errorf("%w: trailing data", ErrBadFrame)
	}
	return reply, nil
}

// bytes reads a u32 length and that many bytes, aliased; nil when empty. A key and a value
// per delivery go through it: the length and the bytes are checked at once, and only a
// field that is short takes the reads that say which.
func (r *reader) bytes(what string) []byte {
	if r.err == nil && len(r.b) >= 4 {
		if n := uint64(binary.BigEndian.Uint32(r.b)); n <= uint64(len(r.b)-4) {
			p := r.b[4 : 4+n : 4+n]
			r.b = r.b[4+n:]
			if n == 0 {
				return nil
			}
			return p
		}
	}
	return r.shortBytes(what)
}

// shortBytes is bytes for a field the bytes left do not hold (or a reader that failed):
// it sets err.
func (r *reader) shortBytes(what string) []byte {
	n := r.u32(what)
	if r.err == nil && uint64(n) > uint64(len(r.b)) {
		r.fail("short %s", what)
	}
	p := r.take(int(n), what)
	if len(p) == 0 {
		return nil
	}
	return p
}

// Nanos is t as a frame carries it: Unix nanoseconds, 0 for the zero time.
func Nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Time is the time a frame's Unix nanoseconds name, the zero time for 0.
func Time(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
