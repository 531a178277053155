package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// The compact consume reply (V16), sent only to a requester that asked for it
// (Consume.Compact): the consume reply with each delivery's fixed fields as varints, most of
// them differences from the delivery before it, which in one reply are small (its partition,
// offset, expiry, fence and timestamp). A mark of its own opens it (0xCA; 0xCB when some
// delivery carries headers), then the status byte, the message (u16 length, at most
// MaxMessage bytes), the count (uvarint), then per delivery: the partition's difference from
// the delivery before (zigzag varint; the first from 0), the offset's (zigzag varint, wrapping),
// the nonce (u64), the attempt (uvarint, at most 32 bits), the reason (u8), the expiry's
// difference (zigzag varint, wrapping), the fence's (zigzag varint, wrapping), the timestamp's
// (zigzag varint, wrapping), the key and the value (each a uvarint length, then the bytes),
// and with the headers mark the headers (a uvarint count, then per header a key and a value,
// each a uvarint length and the bytes). Every varint is as short as its value allows.

// The compact consume reply's marks.
const (
	consumeReplyCompactMark        byte = 0xCA
	consumeReplyCompactHeadersMark byte = 0xCB
)

// minCompactDelivery is the fewest bytes a delivery of a compact reply takes.
const minCompactDelivery = 1 + 1 + 8 + 1 + 1 + 1 + 1 + 1 + 1 + 1

// appendCompactConsumeReply appends r in the compact form, growing dst once to exactly
// what it takes (a reply of a thousand records is large, and what it is grown by is
// zeroed).
func appendCompactConsumeReply(dst []byte, r *ConsumeReply) []byte {
	size := 2 + 2 + min(len(r.Message), MaxMessage) + uvarintLen(uint64(len(r.Deliveries)))
	mark := consumeReplyCompactMark
	var zero Delivery
	prev := &zero
	for i := range r.Deliveries {
		d := &r.Deliveries[i]
		size += compactDeliveryLen(d, prev)
		if len(d.Headers) > 0 {
			mark = consumeReplyCompactHeadersMark
		}
		prev = d
	}
	if mark == consumeReplyCompactHeadersMark {
		for i := range r.Deliveries {
			size += compactHeadersLen(r.Deliveries[i].Headers)
		}
	}
	b := dst
	if cap(b)-len(b) < size {
		if len(b) == 0 {
			b = make([]byte, 0, size) // a reply alone: exactly its size
		} else {
			b = slices.Grow(b, size) // after others (a ConsumeBatch's, an acks reply): amortized
		}
	}
	b = append(b, mark, r.Status)
	b = appendMessage(b, r.Message)
	b = appendUvarint(b, uint64(len(r.Deliveries)))
	prev = &zero
	for i := range r.Deliveries {
		d := &r.Deliveries[i]
		b = appendVarint(b, int64(d.Partition)-int64(prev.Partition))
		b = appendVarint(b, d.Offset-prev.Offset)
		b = binary.BigEndian.AppendUint64(b, d.Nonce)
		b = appendUvarint(b, uint64(d.Attempt))
		b = append(b, d.Reason)
		b = appendVarint(b, d.Expiry-prev.Expiry)
		b = appendVarint(b, int64(d.Fence-prev.Fence))
		b = appendVarint(b, d.Timestamp-prev.Timestamp)
		b = appendUvarint(b, uint64(len(d.Key)))
		b = append(b, d.Key...)
		b = appendUvarint(b, uint64(len(d.Value)))
		b = append(b, d.Value...)
		if mark == consumeReplyCompactHeadersMark {
			b = appendUvarint(b, uint64(len(d.Headers)))
			for j := range d.Headers {
				h := &d.Headers[j]
				b = appendUvarint(b, uint64(len(h.Key)))
				b = append(b, h.Key...)
				b = appendUvarint(b, uint64(len(h.Value)))
				b = append(b, h.Value...)
			}
		}
		prev = d
	}
	return b
}

// compactDeliveryLen is the size of d in a compact reply after prev, without its headers.
func compactDeliveryLen(d, prev *Delivery) int {
	return varintLen(int64(d.Partition)-int64(prev.Partition)) + varintLen(d.Offset-prev.Offset) + 8 +
		uvarintLen(uint64(d.Attempt)) + 1 + varintLen(d.Expiry-prev.Expiry) + varintLen(int64(d.Fence-prev.Fence)) +
		varintLen(d.Timestamp-prev.Timestamp) + uvarintLen(uint64(len(d.Key))) + len(d.Key) +
		uvarintLen(uint64(len(d.Value))) + len(d.Value)
}

// compactHeadersLen is the size of headers in a compact reply with the headers mark.
func compactHeadersLen(headers []Header) int {
	size := uvarintLen(uint64(len(headers)))
	for i := range headers {
		h := &headers[i]
		size += uvarintLen(uint64(len(h.Key))) + len(h.Key) + uvarintLen(uint64(len(h.Value))) + len(h.Value)
	}
	return size
}

// appendUvarint appends x as a uvarint, one of a byte (most of a compact delivery's fields)
// in line.
func appendUvarint(b []byte, x uint64) []byte {
	if x < 0x80 {
		return append(b, byte(x))
	}
	return binary.AppendUvarint(b, x)
}

// appendVarint appends x as a zigzag varint (see appendUvarint).
func appendVarint(b []byte, x int64) []byte { return appendUvarint(b, uint64(x<<1)^uint64(x>>63)) }

// uvarintLen is the size of x as a uvarint.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// varintLen is the size of x as a zigzag varint.
func varintLen(x int64) int { return uvarintLen(uint64(x<<1) ^ uint64(x>>63)) }

// compactBytes reads a uvarint length and that many bytes, aliased and capped; nil when
// empty.
func (r *reader) compactBytes(what string) []byte {
	p, rest := r.lengthPrefixed(r.b, what)
	r.b = rest // nil once a read failed
	return p
}

// compactDelivery reads a compact delivery into d (its headers aside: nil), its fields as
// differences from prev's, which it updates. Most of them are varints of one byte, read in
// line here (oneByteUvarint); a longer one goes to readUvarint, which names the field a
// malformed one fails in. The fields are read one after the other, written out: a loop
// over a table of them took a third more instructions a delivery.
func (r *reader) compactDelivery(d *Delivery, prev *compactPrev) {
	b := r.b
	partition, b, ok := oneByteUvarint(b)
	if !ok {
		partition, b = r.longUvarint(b, "delivery partition")
	}
	offset, b, ok := oneByteUvarint(b)
	if !ok {
		offset, b = r.longUvarint(b, "delivery offset")
	}
	if len(b) < 8 {
		r.short("delivery nonce")
		return
	}
	nonce, b := binary.BigEndian.Uint64(b), b[8:]
	attempt, b, ok := oneByteUvarint(b)
	if !ok {
		attempt, b = r.longUvarint(b, "delivery attempt")
	}
	if len(b) < 1 {
		r.short("delivery reason")
		return
	}
	reason, b := b[0], b[1:]
	expiry, b, ok := oneByteUvarint(b)
	if !ok {
		expiry, b = r.longUvarint(b, "delivery expiry")
	}
	fence, b, ok := oneByteUvarint(b)
	if !ok {
		fence, b = r.longUvarint(b, "delivery fence")
	}
	timestamp, b, ok := oneByteUvarint(b)
	if !ok {
		timestamp, b = r.longUvarint(b, "delivery timestamp")
	}
	key, b := r.lengthPrefixed(b, "key")
	value, b := r.lengthPrefixed(b, "value")
	if r.err != nil {
		return // a field above failed
	}
	wide := int64(prev.partition) + unzigzag(partition)
	if wide < math.MinInt32 || wide > math.MaxInt32 || attempt > math.MaxUint32 {
		r.fail("a delivery of partition %d, attempt %d", wide, attempt)
		return
	}
	r.b = b
	prev.partition = int32(wide)
	prev.offset += unzigzag(offset)
	prev.expiry += unzigzag(expiry)
	prev.fence += uint64(unzigzag(fence))
	prev.timestamp += unzigzag(timestamp)
	*d = Delivery{Partition: prev.partition, Offset: prev.offset, Nonce: nonce, Attempt: uint32(attempt), Reason: reason,
		Expiry: prev.expiry, Timestamp: prev.timestamp, Fence: prev.fence, Key: key, Value: value}
}

// compactPrev is what a compact delivery's fields are differences from: the delivery
// before's (zero before the first).
type compactPrev struct {
	partition                 int32
	offset, expiry, timestamp int64
	fence                     uint64
}

// lengthPrefixed reads a uvarint length at the front of b and that many bytes after it
// (aliased, capped; nil when empty), and returns what follows them.
func (r *reader) lengthPrefixed(b []byte, what string) ([]byte, []byte) {
	n, b, ok := oneByteUvarint(b)
	if !ok {
		n, b = r.longUvarint(b, what)
	}
	if n > uint64(len(b)) {
		r.short(what)
		return nil, nil
	}
	if n == 0 {
		return nil, b
	}
	return b[:n:n], b[n:]
}

// oneByteUvarint reads the uvarint at the front of b when it is one byte: its value, what
// follows it and true; otherwise b and false (see longUvarint). Small enough to inline.
func oneByteUvarint(b []byte) (uint64, []byte, bool) {
	if len(b) != 0 && b[0] < 0x80 {
		return uint64(b[0]), b[1:], true
	}
	return 0, b, false
}

// longUvarint is readUvarint of the uvarint at the front of b, and what follows it (nil
// once a read failed).
func (r *reader) longUvarint(b []byte, what string) (uint64, []byte) {
	r.b = b
	x := r.readUvarint(what)
	return x, r.b
}

// unzigzag is the signed value of a zigzag varint's bits.
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// decodeCompactConsumeReply reads a compact consume reply (its mark read already: headers
// says which), the deliveries appended to dst[:0], as DecodeConsumeReplyInto does.
func decodeCompactConsumeReply(dst []Delivery, r *reader, withHeaders bool) (ConsumeReply, error) {
	reply := ConsumeReply{Compact: true}
	reply.Status = r.u8("consume reply")
	reply.Message = r.message()
	count := r.uvarint("consume reply")
	if r.err == nil && count > uint64(len(r.b)/minCompactDelivery) {
		r.fail("%d deliveries in %d bytes", count, len(r.b))
	}
	if r.err != nil {
		return ConsumeReply{}, r.err
	}
	if count > 0 {
		reply.Deliveries = slices.Grow(dst[:0], int(count))
	}
	anyHeaders := false
	var prev compactPrev
	for range count {
		// Read in place: a delivery is large, and a reply's are many.
		reply.Deliveries = reply.Deliveries[:len(reply.Deliveries)+1]
		d := &reply.Deliveries[len(reply.Deliveries)-1]
		r.compactDelivery(d, &prev)
		if withHeaders {
			n := r.uvarint("headers")
			if r.err == nil && n > uint64(len(r.b)/2) { // a header takes two lengths at least
				r.fail("%d headers in %d bytes", n, len(r.b))
			}
			if n > 0 && r.err == nil {
				d.Headers = make([]Header, 0, n)
			}
			for range n {
				if r.err != nil {
					break
				}
				key := r.compactBytes("header key")
				value := r.compactBytes("header value")
				d.Headers = append(d.Headers, Header{Key: string(key), Value: value})
			}
			anyHeaders = anyHeaders || len(d.Headers) > 0
		}
		if r.err != nil {
			return ConsumeReply{}, r.err
		}
	}
	if len(r.b) > 0 {
		return ConsumeReply{}, fmt.Errorf("%w: trailing data", ErrBadFrame)
	}
	if withHeaders && !anyHeaders {
		return ConsumeReply{}, fmt.Errorf("%w: the headers mark, and no headers", ErrBadFrame)
	}
	return reply, nil
}
