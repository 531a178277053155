package router

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"narad.dev/consume/inflight"
)

// The node-to-node wire format of forwarded acks. A request frame is an op byte, the topic
// (u16 length, bytes, at most MaxTopicLength), then the op's body; integers are big-endian.
//
//	opAck, opNack, opExtend: one record
//	opAckBatch:              u16 count, then count records, each prefixed by its op byte
//	                         and followed by its budget
//	record:                  partition i32, offset i64, nonce u64, argument i64 (ns: the
//	                         extension or the nack delay; 0 for an ack)
//	budget:                  i64 ns: what was left of the record's 2 s budget when the
//	                         frame left; the owner does not apply the record once that much
//	                         time has passed since the frame reached it
//
// A single op carries no budget of its own: its RPC's context is its budget. A batch's RPC
// runs until its youngest record's budget ends, so each record carries its own.
//
// A reply frame answers each record in order: u16 count, then per record a status byte, an
// i64 (the new expiry of an extend, Unix ns; else 0) and a message (u16 length, bytes). A
// refusal of the whole frame is a reply of one record: statusUnsupportedOp for an op this
// node does not know, statusBadRequest for a frame it cannot decode. A peer's refusal
// travels inside the reply, recognised by its status alone, and a transport error always
// means no reply came back.

const (
	opAck      byte = 1
	opExtend   byte = 2
	opNack     byte = 3
	opAckBatch byte = 4
)

// maxBatch is the most records one AckBatch carries.
const maxBatch = 64

// Reply statuses, each the HTTP status the single op would have answered (HTTPStatus).
const (
	statusOK          byte = 0 // 204: done
	statusSettled     byte = 1 // 410: inflight.ErrAlreadySettled, a repeated ack
	statusGone        byte = 2 // 410: inflight.ErrGone
	statusBadRequest  byte = 3 // 400: a malformed handle or frame, an unknown op
	statusUnavailable byte = 4 // 503: try again (closed, not the owner, budget spent, requester gone), not applied
	statusInternal    byte = 5 // 500
	statusUnsupported byte = 6 // 400: the whole frame refused, its op unknown here
	// statusTransport never travels: the requester's own mark for "no reply came back".
	statusTransport byte = 255 // 502
)

// ErrUnsupportedOp is what a peer's refusal of an op it does not know decodes to.
var ErrUnsupportedOp = errors.New("router: unsupported rpc operation")

// ErrBadFrame is what decoding a malformed frame returns.
var ErrBadFrame = errors.New("router: malformed frame")

// wireRecord is one ack, extend or nack on the wire.
type wireRecord struct {
	op     byte
	handle inflight.Handle
	arg    time.Duration
	budget time.Duration // AckBatch only: what is left of the record's budget
}

type wireRequest struct {
	op      byte
	topic   string
	records []wireRecord
}

// wireAnswer is the answer to one record.
type wireAnswer struct {
	status  byte
	expiry  int64
	message string
}

// recordSize is a record's size on the wire; batchRecordSize adds an AckBatch record's op
// byte and budget.
const (
	recordSize      = 4 + 8 + 8 + 8
	batchRecordSize = 1 + recordSize + 8
)

func appendRecord(b []byte, r wireRecord) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(r.handle.Partition))
	b = binary.BigEndian.AppendUint64(b, uint64(r.handle.Offset))
	b = binary.BigEndian.AppendUint64(b, r.handle.Nonce)
	return binary.BigEndian.AppendUint64(b, uint64(r.arg))
}

// encodeRequest writes a request frame: a single op for one record, an AckBatch otherwise. A
// topic longer than MaxTopicLength, or a count of records the frame cannot carry, is
// ErrInvalidArgument.
func encodeRequest(topic string, records []wireRecord) ([]byte, error) {
	if len(topic) > MaxTopicLength {
		return nil, fmt.Errorf("%w: a topic of %d bytes (at most %d)", ErrInvalidArgument, len(topic), MaxTopicLength)
	}
	if len(records) == 0 || len(records) > maxBatch {
		return nil, fmt.Errorf("%w: a frame of %d records (1 to %d)", ErrInvalidArgument, len(records), maxBatch)
	}
	op := opAckBatch
	if len(records) == 1 {
		op = records[0].op
	}
	b := make([]byte, 0, 3+len(topic)+2+len(records)*batchRecordSize)
	b = append(b, op)
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	if op != opAckBatch {
		return appendRecord(b, records[0]), nil
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(records)))
	for _, r := range records {
		b = append(b, r.op)
		b = appendRecord(b, r)
		b = binary.BigEndian.AppendUint64(b, uint64(r.budget))
	}
	return b, nil
}

func readRecord(b []byte, op byte) (wireRecord, []byte, error) {
	if len(b) < recordSize {
		return wireRecord{}, nil, fmt.Errorf("%w: short record", ErrBadFrame)
	}
	r := wireRecord{
		op: op,
		handle: inflight.Handle{
			Partition: int32(binary.BigEndian.Uint32(b)),
			Offset:    int64(binary.BigEndian.Uint64(b[4:])),
			Nonce:     binary.BigEndian.Uint64(b[12:]),
		},
		arg: time.Duration(binary.BigEndian.Uint64(b[20:])),
	}
	return r, b[recordSize:], nil
}

// decodeRequest reads a request frame. An op it does not know is ErrUnsupportedOp; anything
// else malformed, trailing bytes included, is ErrBadFrame.
func decodeRequest(b []byte) (wireRequest, error) {
	var req wireRequest
	if len(b) < 3 {
		return req, fmt.Errorf("%w: short header", ErrBadFrame)
	}
	req.op = b[0]
	if req.op < opAck || req.op > opAckBatch {
		return req, fmt.Errorf("%w: op %d", ErrUnsupportedOp, req.op)
	}
	n := int(binary.BigEndian.Uint16(b[1:]))
	b = b[3:]
	if n > MaxTopicLength {
		return req, fmt.Errorf("%w: a topic of %d bytes", ErrBadFrame, n)
	}
	if len(b) < n {
		return req, fmt.Errorf("%w: short topic", ErrBadFrame)
	}
	req.topic, b = string(b[:n]), b[n:]
	if req.op != opAckBatch {
		r, rest, err := readRecord(b, req.op)
		if err != nil {
			return req, err
		}
		if len(rest) > 0 {
			return req, fmt.Errorf("%w: trailing data", ErrBadFrame)
		}
		req.records = []wireRecord{r}
		return req, nil
	}
	if len(b) < 2 {
		return req, fmt.Errorf("%w: short batch", ErrBadFrame)
	}
	count := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if count == 0 || count > maxBatch || len(b) != count*batchRecordSize {
		return req, fmt.Errorf("%w: batch of %d records in %d bytes", ErrBadFrame, count, len(b))
	}
	req.records = make([]wireRecord, 0, count)
	for range count {
		op := b[0]
		if op < opAck || op > opNack {
			return req, fmt.Errorf("%w: record op %d", ErrBadFrame, op)
		}
		r, rest, err := readRecord(b[1:], op)
		if err != nil {
			return req, err
		}
		r.budget = time.Duration(binary.BigEndian.Uint64(rest))
		req.records = append(req.records, r)
		b = rest[8:]
	}
	return req, nil
}

func encodeReply(answers []wireAnswer) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(answers)))
	for _, a := range answers {
		b = append(b, a.status)
		b = binary.BigEndian.AppendUint64(b, uint64(a.expiry))
		msg := a.message
		if len(msg) > 1<<10 {
			msg = msg[:1<<10]
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
		b = append(b, msg...)
	}
	return b
}

func decodeReply(b []byte) ([]wireAnswer, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: short reply", ErrBadFrame)
	}
	count := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if count > maxBatch {
		return nil, fmt.Errorf("%w: reply of %d answers", ErrBadFrame, count)
	}
	answers := make([]wireAnswer, 0, count)
	for range count {
		if len(b) < 11 {
			return nil, fmt.Errorf("%w: short answer", ErrBadFrame)
		}
		a := wireAnswer{status: b[0], expiry: int64(binary.BigEndian.Uint64(b[1:]))}
		n := int(binary.BigEndian.Uint16(b[9:]))
		b = b[11:]
		if len(b) < n {
			return nil, fmt.Errorf("%w: short message", ErrBadFrame)
		}
		a.message, b = string(b[:n]), b[n:]
		answers = append(answers, a)
	}
	if len(b) > 0 {
		return nil, fmt.Errorf("%w: trailing data", ErrBadFrame)
	}
	return answers, nil
}

// answerOf turns the result of applying a record into its answer.
func answerOf(err error, expiry time.Time) wireAnswer {
	var a wireAnswer
	switch {
	case err == nil:
		a.status = statusOK
		if !expiry.IsZero() {
			a.expiry = expiry.UnixNano()
		}
		return a
	case errors.Is(err, inflight.ErrAlreadySettled):
		a.status = statusSettled
	case errors.Is(err, inflight.ErrGone):
		a.status = statusGone
	default:
		switch HTTPStatus(err) {
		case 400:
			a.status = statusBadRequest
		case 503:
			a.status = statusUnavailable
		default:
			a.status = statusInternal
		}
	}
	a.message = err.Error()
	return a
}

// ErrRemote carries an owner's refusal that has no sentinel of its own here.
var ErrRemote = errors.New("router: the owner refused")

// errorOf turns an answer back into what the single op would have returned here.
func errorOf(a wireAnswer) error {
	switch a.status {
	case statusOK:
		return nil
	case statusSettled:
		return inflight.ErrAlreadySettled
	case statusGone:
		return inflight.ErrGone
	case statusBadRequest:
		return fmt.Errorf("%w: %s", ErrInvalidArgument, a.message)
	case statusUnsupported:
		return fmt.Errorf("%w: %w: %s", ErrInvalidArgument, ErrUnsupportedOp, a.message)
	case statusUnavailable:
		return fmt.Errorf("%w: %s", ErrUnavailable, a.message)
	case statusTransport:
		return fmt.Errorf("%w: %s", ErrTransport, a.message)
	}
	return fmt.Errorf("%w: %s", ErrRemote, a.message)
}
