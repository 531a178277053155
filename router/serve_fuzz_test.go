package router_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// unreachable is a Transport to nowhere: every call fails at once.
type unreachable struct{}

func (unreachable) Call(context.Context, string, []byte) ([]byte, error) {
	return nil, errors.New("unreachable")
}

// FuzzServe: whatever frame another node sends, Serve never panics and answers a reply the
// requester can read (an ack reply, a consume reply for Consume and Replay, a consume batch
// reply of one readable consume reply per member for a ConsumeBatch it reads, a status reply
// of an entry per partition for a Status, an answer per partition for a Purge), so a bad
// frame gets a 400-class refusal, never a crash (invariant "bad input is refused").
func FuzzServe(f *testing.F) {
	for _, req := range []wire.Request{
		{Op: wire.OpAck, Topic: "orders", Records: []wire.Record{{Op: wire.OpAck, Handle: wire.Handle{Offset: 1, Nonce: 2}}}},
		{Op: wire.OpAckBatch, Topic: "orders", Records: []wire.Record{{Op: wire.OpNack, Budget: time.Second}, {Op: wire.OpExtend, Arg: time.Second, Budget: time.Second}}},
		{Op: wire.OpReject, Topic: "orders", Records: []wire.Record{{Op: wire.OpReject, Handle: wire.Handle{Offset: 1, Nonce: 2}}}},
		{Op: wire.OpAckBatch, Topic: "orders", Records: []wire.Record{{Op: wire.OpReject, Budget: time.Second}, {Op: wire.OpAck, Handle: wire.Handle{Offset: 2, Nonce: 3}, Budget: time.Second}}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 1, Pinned: -1, Claim: true, Max: 5}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 2, Pinned: 0}},
		{Op: wire.OpReplay, Topic: "orders", Replay: wire.Replay{Limit: 3}},
		{Op: wire.OpCancel, Topic: "orders", RequestID: 1},
		{Op: wire.OpRegister, Registrations: []wire.Registration{{Topic: "orders", TTL: time.Second}, {Topic: "other", TTL: time.Minute}}},
		{Op: wire.OpNotify, Topic: "orders", Hold: time.Second},
		{Op: wire.OpPass, Topic: "orders"},
		{Op: wire.OpDrop, Topic: "orders"},
		{Op: wire.OpConsumeBatch, Topic: "orders", Consumes: []wire.Consume{
			{RequestID: 3, Pinned: -1, Max: 2, Budget: time.Second}, {RequestID: 4, Pinned: 0, Claim: true, Max: 1, Budget: time.Second}}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 5, Pinned: -1, Max: 3, Headers: true}},
		{Op: wire.OpReplay, Topic: "orders", Replay: wire.Replay{Limit: 3, Headers: true}},
		{Op: wire.OpStatus, Topic: "orders", Partitions: []int32{0, 1, 7}},
		{Op: wire.OpStatus, Topic: "other", Partitions: []int32{0}},
		{Op: wire.OpPurge, Topic: "orders", Partitions: []int32{0, 1}},
		{Op: wire.OpNackNow, Topic: "orders", Records: []wire.Record{{Op: wire.OpNackNow, Handle: wire.Handle{Offset: 1, Nonce: 2}}}},
		{Op: wire.OpAckBatch, Topic: "orders", Records: []wire.Record{{Op: wire.OpNackNow, Budget: time.Second}, {Op: wire.OpAck, Handle: wire.Handle{Offset: 2, Nonce: 3}, Budget: time.Second}}},
		// Version 16's plain acks, alone and riding in a Consume: of partitions owned here
		// and not, in runs.
		{Op: wire.OpAcks, Topic: "orders", Records: []wire.Record{
			{Op: wire.OpAck, Handle: wire.Handle{Offset: 1, Nonce: 2}, Budget: time.Second},
			{Op: wire.OpAck, Handle: wire.Handle{Partition: 1, Offset: 0, Nonce: 2}, Budget: time.Second},
			{Op: wire.OpAck, Handle: wire.Handle{Offset: 0, Nonce: 5}, Budget: time.Second}}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 6, Pinned: -1, Max: 3, RelativeExpiry: true, Reserve: true},
			Records: []wire.Record{{Op: wire.OpAck, Handle: wire.Handle{Offset: 2, Nonce: 3}, Budget: time.Second}}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 7, Pinned: -1, Max: 3, Headers: true, Compact: true}},
		{Op: wire.OpConsumeBatch, Topic: "orders", Consumes: []wire.Consume{
			{RequestID: 8, Pinned: -1, Max: 2, Compact: true, Budget: time.Second}, {RequestID: 9, Pinned: 0, Max: 1, Budget: time.Second}}},
	} {
		frame, err := wire.EncodeRequest(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame)
	}
	// Version 13's AckBatch past wire.MaxBatch: acks of partition 0 in runs, a nack among them.
	large := wire.Request{Op: wire.OpAckBatch, Topic: "orders", Records: make([]wire.Record, wire.MaxBatch*2+3)}
	for i := range large.Records {
		large.Records[i] = wire.Record{Op: wire.OpAck, Handle: wire.Handle{Offset: int64(i % 4), Nonce: uint64(i)}, Budget: time.Second}
	}
	large.Records[wire.MaxBatch].Op = wire.OpNack
	frame, err := wire.EncodeRequest(large)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(frame)
	f.Add([]byte{})
	f.Add([]byte{5, 0, 6, 'o', 'r', 'd', 'e', 'r', 's'})
	f.Add([]byte{200, 0, 0})
	routes := &routertest.Routes{}
	routes.Set("orders", 0)
	routes.SetRemote("orders", "b", 1)
	logs := &routertest.MemLogs{}
	log := logs.Log("orders", 0)
	for i := range 3 {
		var headers []router.Header
		if i == 1 { // a reply with headers, for a frame asking for them
			headers = []router.Header{{Key: "h", Value: []byte("v")}}
		}
		log.AppendRecord(router.Record{Value: []byte("v"), Timestamp: time.Unix(1, 0), Headers: headers})
	}
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New(), Transport: unreachable{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { node.Close() })
	f.Fuzz(func(t *testing.T, frame []byte) {
		reply, err := node.Serve(context.Background(), "b", frame)
		if err != nil {
			t.Fatalf("Serve returned an error: %v", err)
		}
		req, err := wire.DecodeRequest(frame, wire.Newest)
		if err == nil && (req.Op == wire.OpAcks || req.Op == wire.OpConsume && len(req.Records) > 0) {
			acks, err := wire.DecodeAcksReply(nil, reply, len(req.Records))
			if err != nil || acks.Refused || (req.Op == wire.OpAcks && len(acks.Rest) > 0) {
				t.Fatalf("unreadable acks reply: %+v, %v", acks, err)
			}
			if req.Op == wire.OpAcks {
				return
			}
			reply = acks.Rest // the consume's reply follows
		}
		if len(frame) > 0 && (frame[0] == wire.OpConsume || frame[0] == wire.OpReplay) {
			if _, err := wire.DecodeConsumeReply(reply); err != nil {
				t.Fatalf("unreadable consume reply: %v", err)
			}
			return
		}
		if err == nil && req.Op == wire.OpStatus {
			status, err := wire.DecodeStatusReply(reply, len(req.Partitions), req.StatusSpilled)
			if err != nil || status.Partitions == nil {
				t.Fatalf("unreadable status reply: %+v, %v", status, err)
			}
			return
		}
		if err == nil && req.Op == wire.OpPurge {
			if answers, err := wire.DecodeReply(reply); err != nil || len(answers) != len(req.Partitions) {
				t.Fatalf("unreadable purge reply: %d answers for %d partitions, %v", len(answers), len(req.Partitions), err)
			}
			return
		}
		if err == nil && req.Op == wire.OpConsumeBatch {
			batch, err := wire.DecodeConsumeBatchReply(reply, len(req.Consumes))
			if err != nil || batch.Members == nil {
				t.Fatalf("unreadable consume batch reply: %+v, %v", batch, err)
			}
			for _, m := range batch.Members {
				if _, err := wire.DecodeConsumeReply(m); err != nil {
					t.Fatalf("unreadable member of a consume batch reply: %v", err)
				}
			}
			return
		}
		if _, err := wire.DecodeReply(reply); err != nil {
			t.Fatalf("unreadable reply: %v", err)
		}
	})
}
