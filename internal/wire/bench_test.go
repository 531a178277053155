package wire_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"narad.dev/consume/internal/wire"
)

// benchRequests: the frames a node sends most, a single ack and a full AckBatch, and a batch
// probe.
func benchRequests() map[string]wire.Request {
	batch := make([]wire.Record, wire.MaxBatch)
	for i := range batch {
		batch[i] = wire.Record{Op: wire.OpAck, Handle: wire.Handle{Partition: 1, Offset: int64(i), Nonce: uint64(i)}, Budget: time.Second}
	}
	return map[string]wire.Request{
		"ack":      {Op: wire.OpAck, Topic: "orders", Records: []wire.Record{{Op: wire.OpAck, Handle: wire.Handle{Partition: 1, Offset: 2, Nonce: 3}}}},
		"batch64":  {Op: wire.OpAckBatch, Topic: "orders", Records: batch},
		"consume":  {Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 1, Pinned: -1, Claim: true, Max: 100}},
		"register": {Op: wire.OpRegister, Registrations: []wire.Registration{{Topic: "orders", TTL: time.Minute}, {Topic: "payments", TTL: time.Minute}}},
	}
}

func BenchmarkEncodeRequest(b *testing.B) {
	for name, req := range benchRequests() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := wire.EncodeRequest(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeRequest(b *testing.B) {
	for name, req := range benchRequests() {
		frame := mustEncode(b, req)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if _, err := wire.DecodeRequest(frame, wire.Newest); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchAnswers() []wire.Answer {
	answers := make([]wire.Answer, wire.MaxBatch)
	answers[1] = wire.Answer{Status: wire.StatusGone, Message: "router: lease gone"}
	return answers
}

func BenchmarkEncodeReply(b *testing.B) {
	answers := benchAnswers()
	b.ReportAllocs()
	for b.Loop() {
		wire.EncodeReply(answers)
	}
}

func BenchmarkDecodeReply(b *testing.B) {
	reply := wire.EncodeReply(benchAnswers())
	b.ReportAllocs()
	b.SetBytes(int64(len(reply)))
	for b.Loop() {
		if _, err := wire.DecodeReply(reply); err != nil {
			b.Fatal(err)
		}
	}
}

// benchConsumeReply is a batch of 100 deliveries of 1 KiB values, as an owner's reply to a
// reservation brings them: records of two partitions in runs, produced some microseconds
// apart (timestamps in nanoseconds), leases granted in a few calls (the time left differs
// between them) with fencing tokens counting up, random nonces.
func benchConsumeReply() *wire.ConsumeReply {
	r := &wire.ConsumeReply{Deliveries: make([]wire.Delivery, 100)}
	value := bytes.Repeat([]byte("v"), 1<<10)
	timestamp := int64(1_780_000_000_000_000_000)
	for i := range r.Deliveries {
		timestamp += int64(1_000 + i*37%900)
		r.Deliveries[i] = wire.Delivery{Partition: int32(i / 50), Offset: int64(1_000_000 + i%50), Nonce: uint64(i+1) * 0x9e3779b97f4a7c15,
			Attempt: 1, Expiry: int64(29_999_000_000 - i/25*4_000), Timestamp: timestamp, Fence: uint64(5_000 + i), Key: []byte("key"), Value: value}
	}
	return r
}

// BenchmarkAppendConsumeReply writes the consume reply of benchConsumeReply in the plain
// form and in the compact one (wire version 16).
func BenchmarkAppendConsumeReply(b *testing.B) {
	for _, compact := range []bool{false, true} {
		b.Run(fmt.Sprintf("compact=%v", compact), func(b *testing.B) {
			r := benchConsumeReply()
			r.Compact = compact
			buf := wire.AppendConsumeReply(nil, r)
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				buf = wire.AppendConsumeReply(buf[:0], r) // a reused buffer: no allocation
			}
		})
	}
}

func BenchmarkDecodeConsumeReply(b *testing.B) {
	for _, compact := range []bool{false, true} {
		b.Run(fmt.Sprintf("compact=%v", compact), func(b *testing.B) {
			r := benchConsumeReply()
			r.Compact = compact
			reply := wire.AppendConsumeReply(nil, r)
			dst := make([]wire.Delivery, 0, len(r.Deliveries))
			b.ReportAllocs()
			b.SetBytes(int64(len(reply)))
			for b.Loop() {
				if _, err := wire.DecodeConsumeReplyInto(dst[:0], reply); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeAcks decodes an Acks frame of a gateway's full batch (wire.MaxLargeBatch
// plain acks over four partitions) into a reused slice, as an owner does.
func BenchmarkDecodeAcks(b *testing.B) {
	handles := make([]wire.Handle, wire.MaxLargeBatch)
	for i := range handles {
		handles[i] = wire.Handle{Partition: int32(i / 256), Offset: int64(1_000_000 + i), Nonce: uint64(i)*0x9e3779b97f4a7c15 + 1}
	}
	frame, err := wire.EncodeAcks("orders", time.Second, handles)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]wire.Handle, 0, len(handles))
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, _, _, err := wire.DecodeAcks(frame, wire.Newest, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
