package wire

import (
	"encoding/binary"
	"fmt"
	"time"
)

// PartitionStatus is one entry of a status reply: where one partition stands at its owner,
// the fields of router.PartitionStatus that cross the wire. Nothing in it is a time: an age
// is a duration at the owner's clock when it answered.
type PartitionStatus struct {
	Partition int32
	// Status is StatusOK when the owner counted the partition, and the fields below are
	// then its counts; any other status says why it did not (Message: the partition is not
	// the owner's, the node is closing, ...), and the fields below are zero.
	Status  byte
	Message string

	Loaded                           bool
	Frontier, HighWatermark, Backlog int64         // -1, -1, 0 when not known
	OldestUnsettledAge               time.Duration // -1 when not known
	Leased, Delayed, AckedAhead      uint32
	Quarantined, Requeued            uint32
	HeldKeys, BlockedKeys, Deferred  uint32
	ParkedKeys, Parked               uint32
	QuarantinedKeys                  uint32
	// BlockedFor is how long the key blocked longest had been blocked when the owner
	// answered (router.KeyStats.OldestBlockedSince as an age); zero when none is.
	BlockedFor                       time.Duration
	ParkedOnTopic, ParkedOnPartition uint32
	// ErrStatus and ErrMessage are router.PartitionStatus.Err as an answer (StatusOK and ""
	// when there is none): the partition was counted, and its log could not be resolved.
	ErrStatus  byte
	ErrMessage string
	// SetAside is the text of router.PartitionStatus.SetAside ("" when the partition is
	// not set aside), and SetAsideRetryIn the time left, at the owner, before a retry.
	SetAside        string
	SetAsideRetryIn time.Duration
	// SpilledKeys and Spilled (V15) are router.KeyStats.SpilledKeys and Spilled: on the
	// wire only in the reply to a Status that asked for them (Request.StatusSpilled), zero
	// otherwise.
	SpilledKeys, Spilled uint32
}

// statusReplyMark opens a status reply, as consumeReplyMark opens a consume reply: an ack
// reply (a refusal of the whole frame) opens with zero.
const statusReplyMark byte = 0xC8

// Sizes of a status reply's entries on the wire, without their messages.
const (
	statusHeadSize   = 4 + 1 + 2                          // partition, status, message length
	statusCountsSize = 1 + 4*8 + 13*4 + 8 + 1 + 2 + 2 + 8 // loaded to the set-aside retry
	statusSpillSize  = 2 * 4                              // spilled keys, spilled (V15, when asked)
)

// AppendStatusReply appends the status reply of entries to dst: the mark, a u16 count, then
// each entry, with its spilled keys and records when spilled (the request asked for them:
// Request.StatusSpilled); a message longer than MaxMessage is cut to it. It writes at most
// MaxPartitions entries' worth (the caller answers as many as the request named).
func AppendStatusReply(dst []byte, entries []PartitionStatus, spilled bool) []byte {
	size := 1 + 2
	for i := range entries {
		e := &entries[i]
		size += statusHeadSize + min(len(e.Message), MaxMessage)
		if e.Status == StatusOK {
			size += statusCountsSize + min(len(e.ErrMessage), MaxMessage) + min(len(e.SetAside), MaxMessage)
			if spilled {
				size += statusSpillSize
			}
		}
	}
	b := dst
	if cap(b)-len(b) < size {
		b = append(make([]byte, 0, len(b)+size), b...)
	}
	b = append(b, statusReplyMark)
	b = binary.BigEndian.AppendUint16(b, uint16(len(entries)))
	for i := range entries {
		e := &entries[i]
		b = binary.BigEndian.AppendUint32(b, uint32(e.Partition))
		b = append(b, e.Status)
		b = appendMessage(b, e.Message)
		if e.Status != StatusOK {
			continue
		}
		loaded := byte(0)
		if e.Loaded {
			loaded = 1
		}
		b = append(b, loaded)
		for _, v := range [...]int64{e.Frontier, e.HighWatermark, e.Backlog, int64(e.OldestUnsettledAge)} {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
		for _, v := range [...]uint32{e.Leased, e.Delayed, e.AckedAhead, e.Quarantined, e.Requeued,
			e.HeldKeys, e.BlockedKeys, e.Deferred, e.ParkedKeys, e.Parked, e.ParkedOnTopic, e.ParkedOnPartition, e.QuarantinedKeys} {
			b = binary.BigEndian.AppendUint32(b, v)
		}
		b = binary.BigEndian.AppendUint64(b, uint64(e.BlockedFor))
		b = append(b, e.ErrStatus)
		b = appendMessage(b, e.ErrMessage)
		b = appendMessage(b, e.SetAside)
		b = binary.BigEndian.AppendUint64(b, uint64(e.SetAsideRetryIn))
		if spilled {
			b = binary.BigEndian.AppendUint32(b, e.SpilledKeys)
			b = binary.BigEndian.AppendUint32(b, e.Spilled)
		}
	}
	return b
}

// StatusReply is a Status's reply: Partitions holds an entry per partition the request
// named, in its order; or, when the owner refused the whole frame, Partitions is nil and
// Refusal is the refusal: StatusUnsupported from a release before V12, another status from
// one that could not serve the frame at all.
type StatusReply struct {
	Partitions []PartitionStatus
	Refusal    Answer
}

// DecodeStatusReply reads the reply to a Status naming count partitions, asking for the
// spilled keys and records when spilled (Request.StatusSpilled). A reply of another
// count, an entry whose fields are out of range (a loaded byte other than 0 or 1, a frontier
// or high watermark below -1, a negative backlog, age or retry, an unknown age other than
// -1, an ErrMessage without an ErrStatus, a retry without SetAside), a short reply, trailing
// data or a reply over MaxFrame is ErrBadFrame, and so is an ack reply that is not a
// refusal of one answer. The entries' partitions are not checked against the request's: the
// caller does.
func DecodeStatusReply(b []byte, count int, spilled bool) (StatusReply, error) {
	if len(b) > MaxFrame {
		return StatusReply{}, fmt.Errorf("%w: a reply of %d bytes (at most %d)", ErrBadFrame, len(b), MaxFrame)
	}
	if len(b) > 0 && b[0] != statusReplyMark {
		answers, err := DecodeReply(b)
		if err != nil {
			return StatusReply{}, err
		}
		if len(answers) != 1 || answers[0].Status == StatusOK {
			return StatusReply{}, fmt.Errorf("%w: a refusal of %d answers", ErrBadFrame, len(answers))
		}
		return StatusReply{Refusal: answers[0]}, nil
	}
	r := reader{b: b}
	r.u8("status reply") // the mark
	n := int(r.u16("status reply"))
	if r.err == nil && n != count {
		r.fail("%d entries answering %d partitions", n, count)
	}
	if r.err == nil && n > len(r.b)/statusHeadSize {
		r.fail("%d entries in %d bytes", n, len(r.b))
	}
	if r.err != nil {
		return StatusReply{}, r.err
	}
	reply := StatusReply{Partitions: make([]PartitionStatus, 0, n)}
	for range n {
		e := r.partitionStatus(spilled)
		if r.err != nil {
			return StatusReply{}, r.err
		}
		reply.Partitions = append(reply.Partitions, e)
	}
	if len(r.b) > 0 {
		return StatusReply{}, fmt.Errorf("%w: trailing data", ErrBadFrame)
	}
	return reply, nil
}

// partitionStatus reads one entry of a status reply, with its spilled counts when spilled.
func (r *reader) partitionStatus(spilled bool) PartitionStatus {
	e := PartitionStatus{Partition: int32(r.u32("status entry")), Status: r.u8("status entry")}
	e.Message = r.message()
	if r.err != nil || e.Status != StatusOK {
		return e
	}
	switch loaded := r.u8("status counts"); loaded {
	case 0, 1:
		e.Loaded = loaded == 1
	default:
		r.fail("loaded byte %d", loaded)
	}
	e.Frontier, e.HighWatermark, e.Backlog = int64(r.u64("frontier")), int64(r.u64("high watermark")), int64(r.u64("backlog"))
	e.OldestUnsettledAge = r.duration("oldest unsettled age")
	counts := [13]*uint32{&e.Leased, &e.Delayed, &e.AckedAhead, &e.Quarantined, &e.Requeued,
		&e.HeldKeys, &e.BlockedKeys, &e.Deferred, &e.ParkedKeys, &e.Parked, &e.ParkedOnTopic, &e.ParkedOnPartition, &e.QuarantinedKeys}
	for _, c := range counts {
		*c = r.u32("status counts")
	}
	e.BlockedFor = r.duration("blocked for")
	e.ErrStatus = r.u8("error status")
	e.ErrMessage = r.message()
	e.SetAside = r.message()
	e.SetAsideRetryIn = r.duration("set-aside retry")
	if spilled {
		e.SpilledKeys, e.Spilled = r.u32("spilled keys"), r.u32("spilled")
	}
	switch {
	case r.err != nil:
	case e.Frontier < -1 || e.HighWatermark < -1 || e.Backlog < 0 || e.OldestUnsettledAge < -1 || e.BlockedFor < 0:
		r.fail("partition %d: frontier %d, high watermark %d, backlog %d, age %v, blocked for %v", e.Partition, e.Frontier, e.HighWatermark, e.Backlog, e.OldestUnsettledAge, e.BlockedFor)
	case e.ErrStatus == StatusOK && e.ErrMessage != "":
		r.fail("partition %d: an error message without its status", e.Partition)
	case e.SetAsideRetryIn < 0 || e.SetAside == "" && e.SetAsideRetryIn != 0:
		r.fail("partition %d: a set-aside retry in %v", e.Partition, e.SetAsideRetryIn)
	}
	return e
}
