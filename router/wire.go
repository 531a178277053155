package router

import (
	"errors"
	"fmt"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/wire"
)

// The node-to-node wire: its frames, versions and codec are package internal/wire's (see
// docs/protocol.md, "Forwarded acks and the node wire"). What stays here is what depends on
// router: its records, and the mapping between its errors and the statuses replies carry. A
// peer's refusal travels inside the reply, recognised by its status alone, and a transport
// error always means no reply came back.

// Errors of the node wire, the codec's own values, so that errors.Is holds with either name.
var (
	// ErrUnsupportedOp is what a peer's refusal of an op it does not know decodes to, and
	// what a settle answers when the owner of its partition runs a release that cannot
	// apply it (Reject, to an owner before the node wire's version 10): not applied, and no
	// other settle stands in for it.
	ErrUnsupportedOp = wire.ErrUnsupportedOp
	// ErrBadFrame is what decoding a malformed frame returns.
	ErrBadFrame = wire.ErrBadFrame
)

// The ops of the records a node applies and forwards, and the most one AckBatch carries. An
// extend goes to an owner of version 7 as wire.OpExtendLeft, whose answer is the lease's time
// left rather than its expiry (see wireAs).
const (
	opAck        = wire.OpAck
	opExtend     = wire.OpExtend
	opNack       = wire.OpNack
	opRelease    = wire.OpRelease
	opAckDurable = wire.OpAckDurable
	opReject     = wire.OpReject
	opConfirm    = wire.OpConfirm
	opNackNow    = wire.OpNackNow
	maxBatch     = wire.MaxBatch
)

// The requester's own statuses, which never travel: statusTransport marks "no reply came
// back" (a 502), statusUnsupportedThere a record not sent since the owner's release cannot
// apply it (ErrUnsupportedOp, a 501).
const (
	statusTransport        byte = 255
	statusUnsupportedThere byte = 254
)

// A frame carries a topic of at most MaxTopicLength bytes: this fails to compile if the two
// limits part.
const _ = uint(MaxTopicLength-wire.MaxTopic) + uint(wire.MaxTopic-MaxTopicLength)

// wireRecord is one settle (an ack, extend, nack, nack-now, release, durable ack, reject or
// confirm) as a node applies or forwards it.
type wireRecord struct {
	op     byte
	handle inflight.Handle
	arg    time.Duration
	budget time.Duration // AckBatch only: what is left of the record's budget
}

func (r *wireRecord) wire() wire.Record {
	return wire.Record{Op: r.op, Handle: wire.Handle(r.handle), Arg: r.arg, Budget: r.budget}
}

// wireAs is the record as it goes to an owner whose settles are those of version form, or
// the answer it gets unsent (unsent not nil) when that owner cannot apply it. To one of
// version 7 or later, an extend goes as ExtendLeft, answered with a duration: no clock
// crosses the wire. To an older one, a release goes as a nack with no delay (which counts as
// an attempt there: the older release has no other way to give a lease back), and a durable
// ack cannot go at all: nothing there would wait for the disk. A reject goes only to an owner
// of version 10 or later: there is no older form of it. A nack-now goes to an owner before
// version 14 as a nack with no delay, the nearest it has: counted, but after the topic's
// backoff there.
func (r *wireRecord) wireAs(form wire.Version) (w wire.Record, unsent *wire.Answer) {
	w = r.wire()
	if r.op == opNackNow && form < wire.V14 {
		w.Op, w.Arg = opNack, 0
		return w, nil
	}
	switch {
	case r.op == opReject && form < wire.V10:
		return w, &noRejectThere
	case r.op == opConfirm && form < wire.V11:
		return w, &noConfirmThere
	case form >= wire.V7 && r.op == opExtend:
		w.Op = wire.OpExtendLeft
	case form >= wire.V7:
	case r.op == opRelease:
		w.Op, w.Arg = opNack, 0
	case r.op == opAckDurable:
		return w, &notDurableThere
	}
	return w, nil
}

func recordOf(r *wire.Record) wireRecord {
	return wireRecord{op: r.Op, handle: inflight.Handle(r.Handle), arg: r.Arg, budget: r.Budget}
}

// encodeRecords writes the frame of records of one topic: the single op for one record, an
// AckBatch otherwise. A topic over MaxTopicLength, or a count of records no frame carries, is
// ErrInvalidArgument.
func encodeRecords(topic string, records []wire.Record) ([]byte, error) {
	op := wire.OpAckBatch
	if len(records) == 1 {
		op = records[0].Op
	}
	frame, err := wire.EncodeRequest(wire.Request{Op: op, Topic: topic, Records: records})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return frame, nil
}

// refusal is the reply refusing a whole frame: one answer.
func refusal(status byte, message string) []byte {
	return wire.EncodeReply([]wire.Answer{{Status: status, Message: message}})
}

// answerOf turns the result of applying a record into its answer.
func answerOf(err error, expiry time.Time) wire.Answer {
	var a wire.Answer
	switch {
	case err == nil:
		a.Status = wire.StatusOK
		a.Expiry = wire.Nanos(expiry)
		return a
	case errors.Is(err, inflight.ErrAlreadySettled):
		a.Status = wire.StatusSettled
	case errors.Is(err, inflight.ErrGone):
		a.Status = wire.StatusGone
	default:
		switch HTTPStatus(err) {
		case 400:
			a.Status = wire.StatusBadRequest
		case 503:
			a.Status = wire.StatusUnavailable
		default:
			a.Status = wire.StatusInternal
		}
	}
	a.Message = err.Error()
	return a
}

// ErrRemote carries an owner's refusal that has no sentinel of its own here.
var ErrRemote = errors.New("router: the owner refused")

// errorOf turns an answer back into what the single op would have returned here.
func errorOf(a wire.Answer) error {
	switch a.Status {
	case wire.StatusOK:
		return nil
	case wire.StatusSettled:
		return inflight.ErrAlreadySettled
	case wire.StatusGone:
		return inflight.ErrGone
	case wire.StatusBadRequest:
		return fmt.Errorf("%w: %s", ErrInvalidArgument, a.Message)
	case wire.StatusUnsupported:
		return fmt.Errorf("%w: %w: %s", ErrInvalidArgument, ErrUnsupportedOp, a.Message)
	case wire.StatusUnavailable:
		return fmt.Errorf("%w: %s", ErrUnavailable, a.Message)
	case statusTransport:
		return fmt.Errorf("%w: %s", ErrTransport, a.Message)
	case statusUnsupportedThere:
		return fmt.Errorf("%w: %s", ErrUnsupportedOp, a.Message)
	}
	return fmt.Errorf("%w: %s", ErrRemote, a.Message)
}
