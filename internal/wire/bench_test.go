package wire_test

import (
	"bytes"
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

// benchConsumeReply is a batch of 100 deliveries of 1 KiB values.
func benchConsumeReply() *wire.ConsumeReply {
	r := &wire.ConsumeReply{Deliveries: make([]wire.Delivery, 100)}
	value := bytes.Repeat([]byte("v"), 1<<10)
	for i := range r.Deliveries {
		r.Deliveries[i] = wire.Delivery{Partition: 1, Offset: int64(i), Nonce: uint64(i), Attempt: 1, Expiry: 1, Timestamp: 1, Fence: uint64(i), Key: []byte("key"), Value: value}
	}
	return r
}

func BenchmarkAppendConsumeReply(b *testing.B) {
	r := benchConsumeReply()
	buf := wire.AppendConsumeReply(nil, r)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = wire.AppendConsumeReply(buf[:0], r) // a reused buffer: no allocation
	}
}

func BenchmarkDecodeConsumeReply(b *testing.B) {
	reply := wire.AppendConsumeReply(nil, benchConsumeReply())
	b.ReportAllocs()
	b.SetBytes(int64(len(reply)))
	for b.Loop() {
		if _, err := wire.DecodeConsumeReply(reply); err != nil {
			b.Fatal(err)
		}
	}
}
