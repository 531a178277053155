package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Version is a version of the node wire. Each adds to the one before (see the package
// documentation); zero knows no op.
type Version uint8

// The versions of the node wire.
const (
	V1     Version = 1 + iota // single acks: Ack, Extend, Nack
	V2                        // + AckBatch
	V3                        // + Consume (a non-blocking probe), Replay, Cancel
	V4                        // + delivery tokens: Register, Notify, Pass, Drop
	V5                        // + Consume's Claim byte
	V6                        // + Consume's Max
	V7                        // + Release, ExtendLeft, AckDurable; Consume's flags byte (relative expiry)
	V8                        // + ConsumeBatch: the consumes of several consumers in one frame
	V9                        // + headers in deliveries: the Headers flag of Consume, ConsumeBatch and Replay
	V10                       // + Reject
	V11                       // + Confirm; Consume's Reserve flag
	V12                       // + Status, Purge: a topic's partitions counted and purged at their owner
	V13                       // + AckBatches of up to MaxLargeBatch records (MaxBatch before)
	V14                       // + NackNow
	V15                       // + Status's flags byte: the spilled keys and records in a status reply
	V16                       // + Acks: plain acks in a compact form, answered by a count; a Consume's Acks flag
	Newest = V16
)

// Ops: a request frame's first byte.
const (
	OpAck      byte = 1
	OpExtend   byte = 2
	OpNack     byte = 3
	OpAckBatch byte = 4
	OpConsume  byte = 5
	OpRegister byte = 6
	OpNotify   byte = 7
	OpPass     byte = 8
	OpDrop     byte = 9
	OpCancel   byte = 10
	OpReplay   byte = 11
	// OpRelease gives a lease back unprocessed, as if it was never granted: the record is
	// visible at once, and the delivery does not count as an attempt.
	OpRelease byte = 12
	// OpExtendLeft is an Extend whose answer carries the lease's time left at the owner when
	// it applied the extension (a duration), not its new expiry (a time): no clock crosses
	// the wire.
	OpExtendLeft byte = 13
	// OpAckDurable is an Ack that the owner answers only once the ack is on its disk.
	OpAckDurable byte = 14
	// OpConsumeBatch carries the Consumes of several consumers of one topic, each answered
	// by a consume reply of its own inside one reply (see ConsumeBatchReply): the consumes
	// one requester sends one owner at once share a frame, as its acks share an AckBatch.
	OpConsumeBatch byte = 15
	// OpReject settles a lease as failed for good: the owner quarantines the record at once,
	// whatever its attempts (Kafka share groups' REJECT, JetStream's TERM).
	OpReject byte = 16
	// OpConfirm tells the owner that a consumer got a reserved record (see Consume.Reserve):
	// the delivery's attempt counts from now. A gateway that reads ahead for its consumers
	// confirms the reservations it hands over, and gives back with OpRelease those it does
	// not ("as if never granted": uncounted). It is answered as an Ack is.
	OpConfirm byte = 17
	// OpStatus asks the owner where partitions of a topic stand (router.PartitionStatus),
	// many partitions in one frame: a node counts a topic's whole depth with one frame per
	// owner. It is answered by a status reply (see StatusReply); nothing in it is a time.
	OpStatus byte = 18
	// OpPurge asks the owner to purge partitions of a topic (router.Node.PurgePartition):
	// each is answered once its purge is on the owner's disk, in an ack reply of one answer
	// per partition whose i64 is the offsets the partition's frontier moved over.
	OpPurge byte = 19
	// OpNackNow is a Nack that makes the record visible again at once, whatever the topic's
	// backoff policy, the delivery counted as an attempt (router.Node.NackNow). Its argument
	// is 0.
	OpNackNow byte = 20
	// OpAcks carries plain acks of one topic in a compact form: one budget for the frame,
	// the records in runs of one partition (the partition once, each offset as its
	// difference from the one before, the nonce). It is answered by an acks reply (see
	// AppendAcksReply): the count of records applied, and an answer for each of the others
	// alone. The same records ride in a Consume with the Acks flag.
	OpAcks byte = 21
)

// Limits of the frames.
const (
	// MaxTopic is the longest topic a frame carries, in bytes (router.MaxTopicLength).
	MaxTopic = 249
	// MaxBatch is the most records one AckBatch carries to a node before V13.
	MaxBatch = 64
	// MaxLargeBatch is the most records one AckBatch carries from V13 on: a consume's whole
	// batch (router.MaxBatch) acked in one frame.
	MaxLargeBatch = 1024
	// MaxRegistrations is the most entries one Register carries.
	MaxRegistrations = 1024
	// MaxConsumeBatch is the most consumes one ConsumeBatch carries.
	MaxConsumeBatch = 64
	// MaxPartitions is the most partitions one Status or Purge carries: a status reply of
	// that many, each with two messages of MaxMessage, stays well below MaxFrame.
	MaxPartitions = 1024
	// MaxMessage is the longest message of a reply, in bytes; encoders cut longer ones.
	MaxMessage = 1 << 10
	// MaxFrame is the longest frame a decoder reads, request or reply.
	MaxFrame = 16 << 20
)

// Errors of the codec. ErrBadFrame and ErrUnsupportedOp keep the text they had in package
// router, which re-exports them and whose replies carry it.
var (
	// ErrBadFrame: the frame is malformed (or carries a field newer than the decoder's version).
	ErrBadFrame = errors.New("router: malformed frame")
	// ErrUnsupportedOp: the frame's op is unknown at the decoder's version.
	ErrUnsupportedOp = errors.New("router: unsupported rpc operation")
	// ErrInvalidRequest: the encoder was given a request no frame can carry.
	ErrInvalidRequest = errors.New("wire: a request no frame can carry")
)

// Since returns the version that introduced op, or zero for an op no version knows.
func Since(op byte) Version {
	switch op {
	case OpAck, OpExtend, OpNack:
		return V1
	case OpAckBatch:
		return V2
	case OpConsume, OpReplay, OpCancel:
		return V3
	case OpRegister, OpNotify, OpPass, OpDrop:
		return V4
	case OpRelease, OpExtendLeft, OpAckDurable:
		return V7
	case OpConsumeBatch:
		return V8
	case OpReject:
		return V10
	case OpConfirm:
		return V11
	case OpStatus, OpPurge:
		return V12
	case OpNackNow:
		return V14
	case OpAcks:
		return V16
	}
	return 0
}

// maxBatch is the most records an AckBatch carries at v.
func (v Version) maxBatch() int {
	if v >= V13 {
		return MaxLargeBatch
	}
	return MaxBatch
}

// isRecordOp reports whether op is the op of a record: one that travels as a single-op frame
// or as a member of an AckBatch.
func isRecordOp(op byte) bool {
	switch op {
	case OpAck, OpExtend, OpNack, OpRelease, OpExtendLeft, OpAckDurable, OpReject, OpConfirm, OpNackNow:
		return true
	}
	return false
}

// Knows reports whether a node speaking v knows op.
func (v Version) Knows(op byte) bool {
	since := Since(op)
	return since != 0 && since <= v
}

// Handle is a receipt handle: the same fields as inflight.Handle, which it converts to and
// from (inflight.Handle(h), wire.Handle(h)).
type Handle struct {
	Partition int32
	Offset    int64
	Nonce     uint64
}

// Record is one settle of a lease: an ack, extend, nack, release, extend-left, durable ack,
// reject, confirm or nack-now.
type Record struct {
	Op     byte // OpAck, OpExtend, OpNack, OpRelease, OpExtendLeft, OpAckDurable, OpReject, OpConfirm or OpNackNow
	Handle Handle
	// Arg is the extension (Extend, ExtendLeft) or the nack delay (Nack); 0 for the others.
	Arg time.Duration
	// Budget is what was left of the record's budget when the frame left. Only an AckBatch
	// carries it: a single op's RPC is its budget, and a single op decodes with Budget 0.
	Budget time.Duration
}

// Consume is the body of a Consume frame: a non-blocking probe of the owner's partitions.
type Consume struct {
	RequestID  uint64
	Pinned     int32         // the partition, or -1 for any
	Visibility time.Duration // 0: the topic's
	Claim      bool          // V5
	// Max (V6) is the records wanted; 0 or 1 means one. It is written only when above 1, or
	// when the flags byte follows it, and then as at least 1; it is read as written (a
	// RelativeExpiry consume of Max 0 reads back as Max 1).
	Max int32
	// RelativeExpiry (V7) asks for each delivery's Expiry as the lease's time left at the
	// owner when it replied (a duration), not as a time: no clock crosses the wire. It
	// travels as bit 0 of the flags byte, after Max.
	RelativeExpiry bool
	// Headers (V9) asks for each delivery's headers: an owner answering a consume without
	// it leaves them out, since a requester before V9 could not read them. It travels as
	// bit 1 of the flags byte.
	Headers bool
	// Reserve (V11) asks for reservations: deliveries whose attempt the owner counts only
	// once a Confirm (or a settle other than Release) of the lease reaches it; a reservation
	// given back with Release, or that lapses, was never an attempt. It travels as bit 2 of
	// the flags byte.
	Reserve bool
	// Compact (V16) asks for the reply in its compact form (see ConsumeReply.Compact): an
	// owner answering a consume without it writes the form a requester before V16 reads.
	// It travels as bit 4 of the flags byte.
	Compact bool
	// Budget is what was left of the consume's budget when the frame left. Only a member
	// of a ConsumeBatch carries it (positive): a Consume frame's RPC is its budget, and a
	// Consume decodes with Budget 0.
	Budget time.Duration
}

// The bits of a Consume's flags byte (and of a Replay's, which knows flagHeaders alone).
// The flags byte is written only with a flag set, and a decoder refuses a bit it does not
// know at its version.
const (
	flagRelativeExpiry byte = 1 << 0 // Consume.RelativeExpiry (V7)
	flagHeaders        byte = 1 << 1 // Consume.Headers, Replay.Headers (V9)
	flagReserve        byte = 1 << 2 // Consume.Reserve (V11)
	// flagAcks (V16), in a Consume's flags byte alone, says that plain acks (Request.Records)
	// follow the flags byte, in the body of an Acks frame. It is not a field of Consume:
	// EncodeRequest sets it for a Consume that carries records.
	flagAcks byte = 1 << 3
	// flagCompact (V16) is Consume.Compact.
	flagCompact byte = 1 << 4
)

// consumeFlags returns the flags a decoder speaking v knows in a Consume's flags byte.
func consumeFlags(v Version) byte {
	switch {
	case v >= V16:
		return flagRelativeExpiry | flagHeaders | flagReserve | flagAcks | flagCompact
	case v >= V11:
		return flagRelativeExpiry | flagHeaders | flagReserve
	case v >= V9:
		return flagRelativeExpiry | flagHeaders
	}
	return flagRelativeExpiry
}

// flags returns c's flags byte.
func (c *Consume) flags() byte {
	var flags byte
	if c.RelativeExpiry {
		flags |= flagRelativeExpiry
	}
	if c.Headers {
		flags |= flagHeaders
	}
	if c.Reserve {
		flags |= flagReserve
	}
	if c.Compact {
		flags |= flagCompact
	}
	return flags
}

// Replay is the body of a Replay frame.
type Replay struct {
	Partition int32
	Offset    int64
	Limit     int32
	// Headers (V9) asks for the records' headers, as Consume.Headers does. It travels as
	// bit 1 of a flags byte after Limit, written only when set.
	Headers bool
}

// Registration is one entry of a Register frame.
type Registration struct {
	Topic string
	TTL   time.Duration
}

// Request is a request frame, decoded. Op says which of the other fields it uses.
type Request struct {
	Op    byte
	Topic string // empty for Register
	// Records: the ack ops. A single-op frame (Ack, Extend, Nack, Release, ExtendLeft,
	// AckDurable, Reject, Confirm, NackNow) carries exactly one, of the frame's op; AckBatch 1 to
	// MaxBatch (MaxLargeBatch from V13), each with its own op and budget. Acks (V16) carries 1
	// to MaxLargeBatch plain acks (op Ack) of one budget, the frame's (each record's Budget,
	// positive and the same for all), of handles none of whose fields is negative; so may a
	// Consume (V16: its Acks flag), the acks the owner applies before it serves the consume.
	Records       []Record
	Consume       Consume        // Consume
	Consumes      []Consume      // ConsumeBatch: 1 to MaxConsumeBatch, each with its budget
	Replay        Replay         // Replay
	RequestID     uint64         // Cancel
	Registrations []Registration // Register
	Hold          time.Duration  // Notify
	// Partitions: Status and Purge, 1 to MaxPartitions, ascending, none negative or
	// repeated.
	Partitions []int32
	// StatusSpilled (V15) asks a Status's owner for each partition's spilled keys and
	// records (PartitionStatus.SpilledKeys, Spilled): an owner answering a Status without
	// it leaves them out, since a requester before V15 could not read them. It travels as
	// bit 0 of a flags byte after the partitions.
	StatusSpilled bool
}

// flagStatusSpilled is bit 0 of a Status's flags byte (V15), written only when set.
const flagStatusSpilled byte = 1 << 0

// MinVersion is the oldest version that decodes the frame EncodeRequest writes for r.
func (r *Request) MinVersion() Version {
	switch r.Op {
	case OpConsume:
		switch {
		case len(r.Records) > 0 || r.Consume.Compact:
			return V16
		case r.Consume.Reserve:
			return V11
		case r.Consume.Headers:
			return V9
		case r.Consume.RelativeExpiry:
			return V7
		case r.Consume.Max > 1:
			return V6
		case r.Consume.Claim:
			return V5
		}
	case OpConsumeBatch:
		need := V8
		for i := range r.Consumes {
			switch {
			case r.Consumes[i].Compact:
				need = max(need, V16)
			case r.Consumes[i].Reserve:
				need = max(need, V11)
			case r.Consumes[i].Headers:
				need = max(need, V9)
			}
		}
		return need
	case OpReplay:
		if r.Replay.Headers {
			return V9
		}
	case OpStatus:
		if r.StatusSpilled {
			return V15
		}
	case OpAckBatch:
		// A batch needs the version of its newest record op, and V13 past MaxBatch records.
		need := Since(OpAckBatch)
		if len(r.Records) > MaxBatch {
			need = V13
		}
		for i := range r.Records {
			need = max(need, Since(r.Records[i].Op))
		}
		return need
	}
	return Since(r.Op)
}

// Sizes of the fixed parts of request frames.
const (
	headerSize       = 1 + 2 // op, topic length
	recordSize       = 4 + 8 + 8 + 8
	batchRecordSize  = 1 + recordSize + 8
	consumeSize      = 8 + 4 + 8
	batchConsumeSize = consumeSize + 1 + 4 + 1 + 8 // claim, max, flags, budget
	replaySize       = 4 + 8 + 4
	registrationSize = 2 + 8 // without its topic
	partitionSize    = 4
)

// EncodeRequest writes req's frame, in the newest form that carries it: a Consume's flags
// byte only when a flag is set, its Max when above 1 or the flags byte follows, its Claim
// byte when Claim is set or Max follows. A request no frame carries (an unknown op, a topic
// over MaxTopic, counts or values out of range) is ErrInvalidRequest.
func EncodeRequest(req Request) ([]byte, error) {
	if err := check(&req); err != nil {
		return nil, err
	}
	size := headerSize + len(req.Topic)
	switch req.Op {
	case OpAck, OpExtend, OpNack, OpRelease, OpExtendLeft, OpAckDurable, OpReject, OpConfirm, OpNackNow:
		size += recordSize
	case OpAckBatch:
		size += 2 + len(req.Records)*batchRecordSize
	case OpConsume:
		size += consumeSize + 1 + 4 + 1 + acksSize(req.Records)
	case OpAcks:
		size += acksSize(req.Records)
	case OpConsumeBatch:
		size += 2 + len(req.Consumes)*batchConsumeSize
	case OpReplay:
		size += replaySize + 1
	case OpCancel:
		size += 8
	case OpRegister:
		size += 2
		for _, r := range req.Registrations {
			size += registrationSize + len(r.Topic)
		}
	case OpNotify:
		size += 8
	case OpStatus, OpPurge:
		size += 2 + len(req.Partitions)*partitionSize + 1
	}
	b := make([]byte, 0, size)
	b = append(b, req.Op)
	b = binary.BigEndian.AppendUint16(b, uint16(len(req.Topic)))
	b = append(b, req.Topic...)
	switch req.Op {
	case OpAck, OpExtend, OpNack, OpRelease, OpExtendLeft, OpAckDurable, OpReject, OpConfirm, OpNackNow:
		b = appendRecord(b, &req.Records[0])
	case OpAckBatch:
		b = binary.BigEndian.AppendUint16(b, uint16(len(req.Records)))
		for i := range req.Records {
			r := &req.Records[i]
			b = append(b, r.Op)
			b = appendRecord(b, r)
			b = binary.BigEndian.AppendUint64(b, uint64(r.Budget))
		}
	case OpConsume:
		c := &req.Consume
		b = binary.BigEndian.AppendUint64(b, c.RequestID)
		b = binary.BigEndian.AppendUint32(b, uint32(c.Pinned))
		b = binary.BigEndian.AppendUint64(b, uint64(c.Visibility))
		flags := c.flags()
		if len(req.Records) > 0 {
			flags |= flagAcks
		}
		writeMax := c.Max > 1 || flags != 0
		if c.Claim || writeMax {
			claim := byte(0)
			if c.Claim {
				claim = 1
			}
			b = append(b, claim)
		}
		if writeMax {
			b = binary.BigEndian.AppendUint32(b, uint32(max(c.Max, 1)))
		}
		if flags != 0 {
			b = append(b, flags)
		}
		if len(req.Records) > 0 {
			b = appendRecordAcks(b, req.Records)
		}
	case OpAcks:
		b = appendRecordAcks(b, req.Records)
	case OpConsumeBatch:
		b = binary.BigEndian.AppendUint16(b, uint16(len(req.Consumes)))
		for i := range req.Consumes {
			c := &req.Consumes[i]
			b = binary.BigEndian.AppendUint64(b, c.RequestID)
			b = binary.BigEndian.AppendUint32(b, uint32(c.Pinned))
			b = binary.BigEndian.AppendUint64(b, uint64(c.Visibility))
			claim := byte(0)
			if c.Claim {
				claim = 1
			}
			b = append(b, claim)
			b = binary.BigEndian.AppendUint32(b, uint32(max(c.Max, 1)))
			b = append(b, c.flags())
			b = binary.BigEndian.AppendUint64(b, uint64(c.Budget))
		}
	case OpReplay:
		b = binary.BigEndian.AppendUint32(b, uint32(req.Replay.Partition))
		b = binary.BigEndian.AppendUint64(b, uint64(req.Replay.Offset))
		b = binary.BigEndian.AppendUint32(b, uint32(req.Replay.Limit))
		if req.Replay.Headers {
			b = append(b, flagHeaders)
		}
	case OpCancel:
		b = binary.BigEndian.AppendUint64(b, req.RequestID)
	case OpRegister:
		b = binary.BigEndian.AppendUint16(b, uint16(len(req.Registrations)))
		for _, r := range req.Registrations {
			b = binary.BigEndian.AppendUint16(b, uint16(len(r.Topic)))
			b = append(b, r.Topic...)
			b = binary.BigEndian.AppendUint64(b, uint64(r.TTL))
		}
	case OpNotify:
		b = binary.BigEndian.AppendUint64(b, uint64(req.Hold))
	case OpStatus, OpPurge:
		b = binary.BigEndian.AppendUint16(b, uint16(len(req.Partitions)))
		for _, p := range req.Partitions {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
		if req.StatusSpilled {
			b = append(b, flagStatusSpilled)
		}
	}
	return b, nil
}

// appendRecordAcks appends the compact form of records, plain acks checked by checkAcks.
func appendRecordAcks(b []byte, records []Record) []byte {
	return appendAcks(b, len(records), records[0].Budget, func(i int) Handle { return records[i].Handle })
}

func appendRecord(b []byte, r *Record) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(r.Handle.Partition))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Handle.Offset))
	b = binary.BigEndian.AppendUint64(b, r.Handle.Nonce)
	return binary.BigEndian.AppendUint64(b, uint64(r.Arg))
}

// check refuses, with ErrInvalidRequest, a request that no frame carries, or whose frame the
// decoder would refuse: what EncodeRequest writes, DecodeRequest reads back at the newest
// version.
func check(req *Request) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
	}
	if Since(req.Op) == 0 {
		return invalid("op %d", req.Op)
	}
	if len(req.Topic) > MaxTopic {
		return invalid("a topic of %d bytes (at most %d)", len(req.Topic), MaxTopic)
	}
	if req.StatusSpilled && req.Op != OpStatus {
		return invalid("StatusSpilled on op %d", req.Op)
	}
	if req.Op == OpAcks || req.Op == OpConsume && len(req.Records) > 0 {
		if err := checkAcks(req.Records); err != nil {
			return invalid("%v", err)
		}
	}
	switch req.Op {
	case OpAck, OpExtend, OpNack, OpRelease, OpExtendLeft, OpAckDurable, OpReject, OpConfirm, OpNackNow:
		if len(req.Records) != 1 || req.Records[0].Op != req.Op {
			return invalid("op %d carries one record of its op, not %d records", req.Op, len(req.Records))
		}
	case OpAckBatch:
		if len(req.Records) == 0 || len(req.Records) > MaxLargeBatch {
			return invalid("a batch of %d records (1 to %d)", len(req.Records), MaxLargeBatch)
		}
		for _, r := range req.Records {
			if !isRecordOp(r.Op) {
				return invalid("a batch record of op %d", r.Op)
			}
		}
	case OpConsume:
		c := &req.Consume
		if c.Pinned < -1 || c.Visibility < 0 || c.Max < 0 {
			return invalid("a consume pinned to %d, visibility %v, max %d", c.Pinned, c.Visibility, c.Max)
		}
	case OpConsumeBatch:
		if len(req.Consumes) == 0 || len(req.Consumes) > MaxConsumeBatch {
			return invalid("a batch of %d consumes (1 to %d)", len(req.Consumes), MaxConsumeBatch)
		}
		for i := range req.Consumes {
			c := &req.Consumes[i]
			if c.Pinned < -1 || c.Visibility < 0 || c.Max < 0 || c.Budget <= 0 {
				return invalid("a batch consume pinned to %d, visibility %v, max %d, budget %v", c.Pinned, c.Visibility, c.Max, c.Budget)
			}
		}
	case OpReplay:
		r := &req.Replay
		if r.Partition < 0 || r.Offset < 0 || r.Limit < 0 {
			return invalid("a replay of partition %d from %d, limit %d", r.Partition, r.Offset, r.Limit)
		}
	case OpRegister:
		if req.Topic != "" {
			return invalid("a Register names its topics in its entries, not its header")
		}
		if len(req.Registrations) == 0 || len(req.Registrations) > MaxRegistrations {
			return invalid("%d registrations (1 to %d)", len(req.Registrations), MaxRegistrations)
		}
		for _, r := range req.Registrations {
			if len(r.Topic) == 0 || len(r.Topic) > MaxTopic || r.TTL <= 0 {
				return invalid("a registration of a topic of %d bytes for %v", len(r.Topic), r.TTL)
			}
		}
	case OpNotify:
		if req.Hold <= 0 {
			return invalid("a hold of %v", req.Hold)
		}
	case OpStatus, OpPurge:
		if len(req.Partitions) == 0 || len(req.Partitions) > MaxPartitions {
			return invalid("%d partitions (1 to %d)", len(req.Partitions), MaxPartitions)
		}
		for i, p := range req.Partitions {
			if p < 0 || i > 0 && p <= req.Partitions[i-1] {
				return invalid("partitions %v (ascending, none negative or repeated)", req.Partitions)
			}
		}
	}
	return nil
}

// readHeader reads a request frame's header as a node speaking v does, and returns a reader
// of the body after it and the topic (a copy): a frame over MaxFrame, a short header or a
// topic over MaxTopic is ErrBadFrame, an op v does not know ErrUnsupportedOp.
func readHeader(b []byte, v Version) (reader, string, error) {
	if len(b) > MaxFrame {
		return reader{}, "", fmt.Errorf("%w: a frame of %d bytes (at most %d)", ErrBadFrame, len(b), MaxFrame)
	}
	if len(b) < headerSize {
		return reader{}, "", fmt.Errorf("%w: short header", ErrBadFrame)
	}
	if !v.Knows(b[0]) {
		return reader{}, "", fmt.Errorf("%w: op %d", ErrUnsupportedOp, b[0])
	}
	r := reader{b: b[1:]}
	n := int(r.u16("header"))
	if n > MaxTopic {
		return reader{}, "", fmt.Errorf("%w: a topic of %d bytes", ErrBadFrame, n)
	}
	topic := string(r.take(n, "topic"))
	return r, topic, r.err
}

// reader reads a frame's fields from b, in order. The first field it cannot read sets err and drops
// what is left of b, so that every read after it finds nothing: the reads' fast paths (a
// field in b) need no test of err, and inline.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int, what string) []byte {
	if n < 0 || len(r.b) < n {
		r.short(what)
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

// short sets err for a missing field, unless a read already did (apart from take, so that
// take inlines).
func (r *reader) short(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: short %s", ErrBadFrame, what)
	}
	r.b = nil
}

func (r *reader) u8(what string) byte {
	if p := r.take(1, what); r.err == nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if p := r.take(2, what); r.err == nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if p := r.take(4, what); r.err == nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if p := r.take(8, what); r.err == nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

func (r *reader) duration(what string) time.Duration { return time.Duration(r.u64(what)) }

// fail sets err, unless a read already did.
func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrBadFrame}, args...)...)
	}
	r.b = nil
}

func (r *reader) record(op byte) Record {
	p := r.take(recordSize, "record")
	if r.err != nil {
		return Record{}
	}
	return Record{
		Op: op,
		Handle: Handle{
			Partition: int32(binary.BigEndian.Uint32(p)),
			Offset:    int64(binary.BigEndian.Uint64(p[4:])),
			Nonce:     binary.BigEndian.Uint64(p[12:]),
		},
		Arg: time.Duration(binary.BigEndian.Uint64(p[20:])),
	}
}

// DecodeRequest reads a request frame as a node speaking v does. An op newer than v, or one
// no version knows, is ErrUnsupportedOp; an AckBatch with a record of an op newer than v is
// ErrBadFrame, as an older release answers it, and so is a frame carrying a field newer than
// v (a Consume's Claim byte below V5, its Max below V6, its flags byte below V7, or a
// Replay's flags byte below V9, or a Status's below V15: "trailing data", or "max 1" at V6
// for the Max of 1 that only a flags byte follows; the Headers flag below V9, or the Reserve
// flag below V11, of a Consume or a ConsumeBatch member: "flags byte"); anything else
// malformed (a short frame, bytes after its last field, a value out of range, a frame over
// MaxFrame) is ErrBadFrame. The strings it returns are copies: the request does not alias b.
func DecodeRequest(b []byte, v Version) (Request, error) {
	r, topic, err := readHeader(b, v)
	if err != nil {
		return Request{}, err
	}
	req := Request{Op: b[0], Topic: topic}
	switch req.Op {
	case OpAck, OpExtend, OpNack, OpRelease, OpExtendLeft, OpAckDurable, OpReject, OpConfirm, OpNackNow:
		rec := r.record(req.Op)
		if r.err == nil {
			req.Records = []Record{rec}
		}
	case OpAckBatch:
		count := int(r.u16("batch"))
		if r.err == nil && (count == 0 || count > v.maxBatch() || len(r.b) != count*batchRecordSize) {
			r.fail("batch of %d records in %d bytes", count, len(r.b))
		}
		if r.err != nil {
			break
		}
		req.Records = make([]Record, 0, count)
		for range count {
			op := r.u8("batch record")
			if !isRecordOp(op) || !v.Knows(op) {
				r.fail("record op %d", op)
				break
			}
			rec := r.record(op)
			rec.Budget = r.duration("budget")
			req.Records = append(req.Records, rec)
		}
	case OpAcks:
		req.Records = r.acks()
	case OpConsume:
		c := &req.Consume
		c.RequestID = r.u64("consume")
		c.Pinned = int32(r.u32("consume"))
		c.Visibility = r.duration("consume")
		if c.Pinned < -1 || c.Visibility < 0 {
			r.fail("a consume pinned to %d, visibility %v", c.Pinned, c.Visibility)
		}
		// The optional fields, each read only by a version that knows it: to an older one
		// it is trailing data.
		if r.err == nil && len(r.b) > 0 && v >= V5 {
			switch claim := r.u8("claim"); claim {
			case 0, 1:
				c.Claim = claim == 1
			default:
				r.fail("claim byte %d", claim)
			}
			if r.err == nil && len(r.b) > 0 && v >= V6 {
				c.Max = int32(r.u32("max"))
				if r.err == nil && len(r.b) > 0 && v >= V7 {
					// Before the flags byte Max is written as at least 1, and read as written.
					if c.Max < 1 {
						r.fail("max %d (at least 1 before the flags byte)", c.Max)
					}
					flags := r.u8("flags")
					if r.err == nil && (flags == 0 || flags&^consumeFlags(v) != 0) {
						r.fail("flags byte %#x (bits %#x are the flags at v%d, and the byte is written only with one set)", flags, consumeFlags(v), v)
					}
					c.RelativeExpiry, c.Headers, c.Reserve = flags&flagRelativeExpiry != 0, flags&flagHeaders != 0, flags&flagReserve != 0
					c.Compact = flags&flagCompact != 0
					if r.err == nil && flags&flagAcks != 0 {
						req.Records = r.acks()
					}
				} else if c.Max < 2 {
					r.fail("max %d (at least 2 when present)", c.Max)
				}
			}
		}
	case OpConsumeBatch:
		count := int(r.u16("consume batch"))
		if r.err == nil && (count == 0 || count > MaxConsumeBatch || len(r.b) != count*batchConsumeSize) {
			r.fail("batch of %d consumes in %d bytes", count, len(r.b))
		}
		if r.err != nil {
			break
		}
		req.Consumes = make([]Consume, count)
		for i := range req.Consumes {
			p := r.take(batchConsumeSize, "batch consume")
			c := &req.Consumes[i]
			c.RequestID = binary.BigEndian.Uint64(p)
			c.Pinned = int32(binary.BigEndian.Uint32(p[8:]))
			c.Visibility = time.Duration(binary.BigEndian.Uint64(p[12:]))
			claim := p[20]
			c.Max = int32(binary.BigEndian.Uint32(p[21:]))
			flags := p[25]
			c.Budget = time.Duration(binary.BigEndian.Uint64(p[26:]))
			switch {
			case c.Pinned < -1 || c.Visibility < 0 || c.Max < 1 || c.Budget <= 0:
				r.fail("a batch consume pinned to %d, visibility %v, max %d, budget %v", c.Pinned, c.Visibility, c.Max, c.Budget)
			case claim > 1:
				r.fail("claim byte %d", claim)
			case flags&^consumeFlags(v) != 0 || flags&flagAcks != 0: // acks ride in a Consume alone
				r.fail("flags byte %#x", flags)
			}
			if r.err != nil {
				break
			}
			c.Claim, c.RelativeExpiry, c.Headers, c.Reserve = claim == 1, flags&flagRelativeExpiry != 0, flags&flagHeaders != 0, flags&flagReserve != 0
			c.Compact = flags&flagCompact != 0
		}
	case OpReplay:
		p := &req.Replay
		p.Partition = int32(r.u32("replay"))
		p.Offset = int64(r.u64("replay"))
		p.Limit = int32(r.u32("replay"))
		if p.Partition < 0 || p.Offset < 0 || p.Limit < 0 {
			r.fail("a replay of partition %d from %d, limit %d", p.Partition, p.Offset, p.Limit)
		}
		// The flags byte, read only by a version that knows it: to an older one it is
		// trailing data.
		if r.err == nil && len(r.b) > 0 && v >= V9 {
			if flags := r.u8("replay flags"); flags != flagHeaders {
				r.fail("replay flags byte %#x (bit 1 is the one flag, and the byte is written only with it set)", flags)
			}
			p.Headers = true
		}
	case OpCancel:
		req.RequestID = r.u64("cancel")
	case OpRegister:
		if req.Topic != "" {
			r.fail("a Register names a topic in its header")
		}
		count := int(r.u16("register"))
		if r.err == nil && (count == 0 || count > MaxRegistrations || count > len(r.b)/(registrationSize+1)) {
			r.fail("%d registrations in %d bytes", count, len(r.b))
		}
		if r.err != nil {
			break
		}
		req.Registrations = make([]Registration, 0, count)
		for range count {
			n := int(r.u16("registration"))
			if r.err == nil && (n == 0 || n > MaxTopic) {
				r.fail("a registration of a topic of %d bytes", n)
			}
			topic := r.take(n, "registration topic")
			ttl := r.duration("registration")
			if r.err == nil && ttl <= 0 {
				r.fail("a registration for %v", ttl)
			}
			if r.err != nil {
				break
			}
			req.Registrations = append(req.Registrations, Registration{Topic: string(topic), TTL: ttl})
		}
	case OpNotify:
		req.Hold = r.duration("notify")
		if r.err == nil && req.Hold <= 0 {
			r.fail("a hold of %v", req.Hold)
		}
	case OpStatus, OpPurge:
		count := int(r.u16("partitions"))
		// A Status from V15 may end with its flags byte; before, that byte is trailing data.
		flagged := req.Op == OpStatus && v >= V15 && len(r.b) == count*partitionSize+1
		if r.err == nil && (count == 0 || count > MaxPartitions || len(r.b) != count*partitionSize && !flagged) {
			r.fail("%d partitions in %d bytes", count, len(r.b))
		}
		if r.err != nil {
			break
		}
		req.Partitions = make([]int32, count)
		for i := range req.Partitions {
			p := int32(r.u32("partition"))
			if p < 0 || i > 0 && p <= req.Partitions[i-1] {
				r.fail("partition %d after %v (ascending, none negative or repeated)", p, req.Partitions[:i])
				break
			}
			req.Partitions[i] = p
		}
		if flagged && r.err == nil {
			if flags := r.u8("status flags"); flags != flagStatusSpilled {
				r.fail("flags byte %#x", flags)
			}
			req.StatusSpilled = true
		}
	case OpPass, OpDrop:
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("trailing data")
	}
	if r.err != nil {
		return Request{}, r.err
	}
	return req, nil
}
