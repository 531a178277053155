package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/wire"
)

var versions = []wire.Version{wire.V1, wire.V2, wire.V3, wire.V4, wire.V5, wire.V6, wire.V7, wire.V8, wire.V9, wire.V10, wire.V11, wire.V12, wire.V13, wire.V14, wire.V15, wire.V16}

// samples is a request of every op, and of every version's additions.
func samples() []wire.Request {
	h := wire.Handle{Partition: 1, Offset: 2, Nonce: 3}
	return []wire.Request{
		{Op: wire.OpAck, Topic: "orders", Records: []wire.Record{{Op: wire.OpAck, Handle: h}}},
		{Op: wire.OpExtend, Topic: "orders", Records: []wire.Record{{Op: wire.OpExtend, Handle: h, Arg: time.Minute}}},
		{Op: wire.OpNack, Topic: "", Records: []wire.Record{{Op: wire.OpNack, Handle: h, Arg: time.Second}}},
		{Op: wire.OpAckBatch, Topic: "t", Records: []wire.Record{
			{Op: wire.OpAck, Handle: h, Budget: time.Second},
			{Op: wire.OpExtend, Handle: wire.Handle{Partition: -1, Offset: -1, Nonce: 1<<64 - 1}, Arg: time.Hour, Budget: 2 * time.Second},
			{Op: wire.OpNack, Handle: h, Arg: time.Millisecond},
		}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 7, Pinned: -1}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 8, Pinned: 3, Visibility: time.Minute, Claim: true}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 9, Pinned: 0, Max: 2}},
		{Op: wire.OpConsume, Topic: strings.Repeat("t", wire.MaxTopic), Consume: wire.Consume{RequestID: 1<<64 - 1, Pinned: 1<<31 - 1, Claim: true, Max: 1000}},
		{Op: wire.OpReplay, Topic: "orders", Replay: wire.Replay{Partition: 2, Offset: 100, Limit: 10}},
		{Op: wire.OpReplay, Topic: "orders", Replay: wire.Replay{}},
		{Op: wire.OpCancel, Topic: "orders", RequestID: 9},
		{Op: wire.OpRegister, Registrations: []wire.Registration{{Topic: "orders", TTL: 30 * time.Second}, {Topic: strings.Repeat("p", wire.MaxTopic), TTL: 1}}},
		{Op: wire.OpNotify, Topic: "orders", Hold: 5 * time.Second},
		{Op: wire.OpPass, Topic: "orders"},
		{Op: wire.OpDrop, Topic: "orders"},
		// Version 7's.
		{Op: wire.OpRelease, Topic: "orders", Records: []wire.Record{{Op: wire.OpRelease, Handle: h}}},
		{Op: wire.OpExtendLeft, Topic: "orders", Records: []wire.Record{{Op: wire.OpExtendLeft, Handle: h, Arg: time.Minute}}},
		{Op: wire.OpAckDurable, Topic: "", Records: []wire.Record{{Op: wire.OpAckDurable, Handle: h}}},
		{Op: wire.OpAckBatch, Topic: "t", Records: []wire.Record{
			{Op: wire.OpAck, Handle: h, Budget: time.Second},
			{Op: wire.OpRelease, Handle: h, Budget: time.Second},
			{Op: wire.OpExtendLeft, Handle: wire.Handle{Partition: -1, Offset: -1, Nonce: 1<<64 - 1}, Arg: time.Hour, Budget: 2 * time.Second},
			{Op: wire.OpAckDurable, Handle: h},
			{Op: wire.OpNack, Handle: h, Arg: time.Millisecond},
			{Op: wire.OpExtend, Handle: h, Arg: time.Second},
		}},
		{Op: wire.OpAckBatch, Topic: "t", Records: []wire.Record{{Op: wire.OpAckDurable, Handle: h, Budget: time.Second}}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 10, Pinned: -1, Max: 1, RelativeExpiry: true}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 11, Pinned: 2, Visibility: time.Minute, Claim: true, Max: 1, RelativeExpiry: true}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 12, Pinned: -1, Claim: true, Max: 100, RelativeExpiry: true}},
		// Version 8's.
		{Op: wire.OpReject, Topic: "orders", Records: []wire.Record{{Op: wire.OpReject, Handle: h}}},
		{Op: wire.OpAckBatch, Topic: "t", Records: []wire.Record{
			{Op: wire.OpAck, Handle: h, Budget: time.Second},
			{Op: wire.OpReject, Handle: wire.Handle{Partition: -1, Offset: -1, Nonce: 1<<64 - 1}, Budget: 2 * time.Second},
			{Op: wire.OpRelease, Handle: h, Budget: time.Second},
		}},
		{Op: wire.OpConsumeBatch, Topic: "orders", Consumes: []wire.Consume{
			{RequestID: 13, Pinned: -1, Max: 1, Budget: time.Second},
			{RequestID: 1<<64 - 1, Pinned: 1<<31 - 1, Visibility: time.Minute, Claim: true, Max: 1000, RelativeExpiry: true, Budget: 2 * time.Second},
			{RequestID: 14, Pinned: 0, Max: 100, RelativeExpiry: true, Budget: 1},
		}},
		{Op: wire.OpConsumeBatch, Topic: "", Consumes: []wire.Consume{{RequestID: 15, Pinned: 3, Claim: true, Max: 1, Budget: time.Second}}},
		// Version 9's.
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 16, Pinned: -1, Max: 1, Headers: true}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 17, Pinned: 2, Claim: true, Max: 100, RelativeExpiry: true, Headers: true}},
		{Op: wire.OpConsumeBatch, Topic: "orders", Consumes: []wire.Consume{
			{RequestID: 18, Pinned: -1, Max: 1, RelativeExpiry: true, Budget: time.Second},
			{RequestID: 19, Pinned: 0, Max: 5, RelativeExpiry: true, Headers: true, Budget: time.Second},
		}},
		{Op: wire.OpReplay, Topic: "orders", Replay: wire.Replay{Partition: 2, Offset: 100, Limit: 10, Headers: true}},
		// Version 11's.
		{Op: wire.OpConfirm, Topic: "orders", Records: []wire.Record{{Op: wire.OpConfirm, Handle: h}}},
		{Op: wire.OpAckBatch, Topic: "t", Records: []wire.Record{
			{Op: wire.OpConfirm, Handle: h, Budget: time.Second},
			{Op: wire.OpRelease, Handle: wire.Handle{Partition: -1, Offset: -1, Nonce: 1<<64 - 1}, Budget: 2 * time.Second},
			{Op: wire.OpReject, Handle: h, Budget: time.Second},
			{Op: wire.OpConfirm, Handle: wire.Handle{Partition: 4, Offset: 5, Nonce: 6}},
		}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 20, Pinned: -1, Max: 1, Reserve: true}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 21, Pinned: 2, Visibility: time.Minute, Claim: true, Max: 100, RelativeExpiry: true, Headers: true, Reserve: true}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 22, Pinned: 0, Max: 50, RelativeExpiry: true, Reserve: true}},
		{Op: wire.OpConsumeBatch, Topic: "orders", Consumes: []wire.Consume{
			{RequestID: 23, Pinned: -1, Max: 1, RelativeExpiry: true, Budget: time.Second},
			{RequestID: 24, Pinned: 0, Max: 5, RelativeExpiry: true, Headers: true, Reserve: true, Budget: time.Second},
			{RequestID: 25, Pinned: 1, Max: 9, Reserve: true, Budget: 1},
		}},
		// Version 12's.
		{Op: wire.OpStatus, Topic: "orders", Partitions: []int32{0}},
		{Op: wire.OpStatus, Topic: "", Partitions: []int32{0, 3, 1<<31 - 1}},
		{Op: wire.OpPurge, Topic: "orders", Partitions: []int32{2, 5}},
		// Version 13's.
		largeBatch(wire.MaxBatch+1, wire.OpAck),
		largeBatch(wire.MaxLargeBatch, wire.OpConfirm),
		// Version 14's.
		{Op: wire.OpNackNow, Topic: "orders", Records: []wire.Record{{Op: wire.OpNackNow, Handle: h}}},
		{Op: wire.OpAckBatch, Topic: "t", Records: []wire.Record{
			{Op: wire.OpNack, Handle: h, Budget: time.Second},
			{Op: wire.OpNackNow, Handle: wire.Handle{Partition: -1, Offset: -1, Nonce: 1<<64 - 1}, Budget: 2 * time.Second},
			{Op: wire.OpAck, Handle: h, Budget: time.Second},
		}},
		largeBatch(wire.MaxLargeBatch, wire.OpNackNow),
		// Version 16's.
		plainAcks(1, 2*time.Second),
		plainAcks(wire.MaxLargeBatch, 1),
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 26, Pinned: -1, Max: 1024, RelativeExpiry: true, Reserve: true},
			Records: plainAcks(100, time.Second).Records},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 27, Pinned: -1, Max: 1}, Records: plainAcks(1, 1).Records},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 28, Pinned: -1, Max: 1, Compact: true}},
		{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 29, Pinned: 3, Claim: true, Max: 100, RelativeExpiry: true, Headers: true, Reserve: true, Compact: true},
			Records: plainAcks(3, time.Second).Records},
		{Op: wire.OpConsumeBatch, Topic: "orders", Consumes: []wire.Consume{
			{RequestID: 30, Pinned: -1, Max: 1, RelativeExpiry: true, Compact: true, Budget: time.Second},
			{RequestID: 31, Pinned: 0, Max: 5, Reserve: true, Budget: time.Second},
		}},
	}
}

// plainAcks is an Acks frame of count plain acks of budget, in runs of partitions that
// differ, their offsets going up and down.
func plainAcks(count int, budget time.Duration) wire.Request {
	req := wire.Request{Op: wire.OpAcks, Topic: "t", Records: make([]wire.Record, count)}
	for i := range req.Records {
		offset := int64(i * 3)
		if i%5 == 4 {
			offset = int64(i) / 2 // back down
		}
		if i == 7 {
			offset = 1<<63 - 1
		}
		req.Records[i] = wire.Record{Op: wire.OpAck, Handle: wire.Handle{Partition: int32(i / 9 % 4), Offset: offset, Nonce: uint64(i) * 0x9E3779B97F4A7C15}, Budget: budget}
	}
	if count > 2 {
		req.Records[2].Handle.Partition = 1<<31 - 1
	}
	return req
}

// largeBatch is an AckBatch of count records, each of op but every third an ack, of
// partitions and offsets that differ.
func largeBatch(count int, op byte) wire.Request {
	req := wire.Request{Op: wire.OpAckBatch, Topic: "t", Records: make([]wire.Record, count)}
	for i := range req.Records {
		req.Records[i] = wire.Record{Op: op, Handle: wire.Handle{Partition: int32(i % 7), Offset: int64(i), Nonce: uint64(i) * 3}, Budget: time.Duration(i+1) * time.Millisecond}
		if i%3 == 0 {
			req.Records[i].Op = wire.OpAck
		}
	}
	return req
}

func mustEncode(t testing.TB, req wire.Request) []byte {
	t.Helper()
	frame, err := wire.EncodeRequest(req)
	if err != nil {
		t.Fatalf("encode %+v: %v", req, err)
	}
	return frame
}

// Every op round trips, is read by every version from the one its frame needs, and is
// refused by the version before: its op unknown there (ErrUnsupportedOp); for an AckBatch
// carrying a newer record op, that op refused (ErrBadFrame); for a Consume carrying a newer
// field, that field taken for trailing data, or, at V6, the Max of 1 before a flags byte
// taken for out of range (ErrBadFrame), as the release of that version answers.
func TestRequestRoundTrip(t *testing.T) {
	ops := map[byte]bool{}
	for _, req := range samples() {
		ops[req.Op] = true
		frame := mustEncode(t, req)
		need := req.MinVersion()
		for _, v := range versions {
			got, err := wire.DecodeRequest(frame, v)
			switch {
			case v >= need:
				if err != nil || !reflect.DeepEqual(got, req) {
					t.Fatalf("op %d at v%d: %+v, %v; want %+v", req.Op, v, got, err, req)
				}
			case !v.Knows(req.Op):
				if !errors.Is(err, wire.ErrUnsupportedOp) {
					t.Fatalf("op %d at v%d: %v, want ErrUnsupportedOp", req.Op, v, err)
				}
			default:
				want := "trailing data"
				switch {
				case req.Op == wire.OpAckBatch && len(req.Records) > wire.MaxBatch && v < wire.V13:
					want = "batch of" // V13's count, read before the records' ops
				case req.Op == wire.OpAckBatch:
					want = "record op"
				case req.Op == wire.OpConsumeBatch, req.Op == wire.OpConsume && v >= wire.V7:
					want = "flags byte" // the Headers bit, unknown before V9, or the Reserve bit, before V11
				case req.Op == wire.OpConsume && v == wire.V6 && req.Consume.Max <= 1:
					want = "max 1"
				}
				if !errors.Is(err, wire.ErrBadFrame) || !strings.Contains(err.Error(), want) {
					t.Fatalf("op %d needing v%d at v%d: %v, want %q", req.Op, need, v, err, want)
				}
			}
		}
	}
	for op := byte(1); op <= wire.OpAcks; op++ {
		if wire.Since(op) >= wire.V12 && wire.Since(op) < wire.V14 {
			continue // Status and Purge: their own tests
		}
		if !ops[op] {
			t.Errorf("no sample of op %d", op)
		}
	}
}

// The frames of ops 1 to 4, laid out by hand as the releases before package wire wrote them.
func TestAckFramesAreUnchanged(t *testing.T) {
	h := wire.Handle{Partition: 1, Offset: 2, Nonce: 3}
	record := func(b []byte, arg time.Duration) []byte {
		b = binary.BigEndian.AppendUint32(b, 1)
		b = binary.BigEndian.AppendUint64(b, 2)
		b = binary.BigEndian.AppendUint64(b, 3)
		return binary.BigEndian.AppendUint64(b, uint64(arg))
	}
	header := func(op byte) []byte { return []byte{op, 0, 6, 'o', 'r', 'd', 'e', 'r', 's'} }
	for _, op := range []byte{wire.OpAck, wire.OpExtend, wire.OpNack} {
		got := mustEncode(t, wire.Request{Op: op, Topic: "orders", Records: []wire.Record{{Op: op, Handle: h, Arg: 5}}})
		if want := record(header(op), 5); !bytes.Equal(got, want) {
			t.Fatalf("op %d: % x, want % x", op, got, want)
		}
	}
	want := append(header(wire.OpAckBatch), 0, 2, wire.OpAck)
	want = binary.BigEndian.AppendUint64(record(want, 0), uint64(time.Second))
	want = append(want, wire.OpNack)
	want = binary.BigEndian.AppendUint64(record(want, time.Minute), uint64(time.Millisecond))
	got := mustEncode(t, wire.Request{Op: wire.OpAckBatch, Topic: "orders", Records: []wire.Record{
		{Op: wire.OpAck, Handle: h, Budget: time.Second},
		{Op: wire.OpNack, Handle: h, Arg: time.Minute, Budget: time.Millisecond},
	}})
	if !bytes.Equal(got, want) {
		t.Fatalf("AckBatch: % x, want % x", got, want)
	}
	reply := wire.EncodeReply([]wire.Answer{{Status: wire.StatusOK, Expiry: 42}, {Status: wire.StatusGone, Message: "gone"}})
	wantReply := []byte{0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 'g', 'o', 'n', 'e'}
	if !bytes.Equal(reply, wantReply) {
		t.Fatalf("reply: % x, want % x", reply, wantReply)
	}
}

// The frames of ops 5 to 11, laid out by hand as the releases of versions 3 to 6 wrote them.
func TestConsumptionFramesAreUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  wire.Request
		want []byte
	}{
		{"probe", wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 7, Pinned: -1}},
			frame(wire.OpConsume, "orders", uint64(7), int32(-1), int64(0))},
		{"claim", wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 8, Pinned: 3, Visibility: time.Minute, Claim: true}},
			frame(wire.OpConsume, "orders", uint64(8), int32(3), int64(time.Minute), uint8(1))},
		{"max", wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 9, Pinned: 0, Max: 2}},
			frame(wire.OpConsume, "orders", uint64(9), int32(0), int64(0), uint8(0), int32(2))},
		{"claim and max", wire.Request{Op: wire.OpConsume, Topic: "t", Consume: wire.Consume{RequestID: 1, Pinned: -1, Claim: true, Max: 1000}},
			frame(wire.OpConsume, "t", uint64(1), int32(-1), int64(0), uint8(1), int32(1000))},
		{"claim, max 1", wire.Request{Op: wire.OpConsume, Topic: "t", Consume: wire.Consume{RequestID: 1, Pinned: -1, Claim: true, Max: 1}},
			frame(wire.OpConsume, "t", uint64(1), int32(-1), int64(0), uint8(1))},
		{"replay", wire.Request{Op: wire.OpReplay, Topic: "orders", Replay: wire.Replay{Partition: 2, Offset: 100, Limit: 10}},
			frame(wire.OpReplay, "orders", int32(2), int64(100), int32(10))},
		{"cancel", wire.Request{Op: wire.OpCancel, Topic: "orders", RequestID: 9},
			frame(wire.OpCancel, "orders", uint64(9))},
		{"register", wire.Request{Op: wire.OpRegister, Registrations: []wire.Registration{{Topic: "orders", TTL: 30 * time.Second}, {Topic: "p", TTL: 1}}},
			frame(wire.OpRegister, "", uint16(2), uint16(6), "orders", int64(30*time.Second), uint16(1), "p", int64(1))},
		{"notify", wire.Request{Op: wire.OpNotify, Topic: "orders", Hold: 5 * time.Second},
			frame(wire.OpNotify, "orders", int64(5*time.Second))},
		{"pass", wire.Request{Op: wire.OpPass, Topic: "orders"}, frame(wire.OpPass, "orders")},
		{"drop", wire.Request{Op: wire.OpDrop, Topic: "orders"}, frame(wire.OpDrop, "orders")},
	} {
		if got := mustEncode(t, tc.req); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: % x, want % x", tc.name, got, tc.want)
		}
	}
}

// The frames version 7 adds, laid out by hand: the new ops' records as Ack's, single or in
// a batch, and a Consume's flags byte after its Claim byte and a Max of at least 1.
func TestV7Frames(t *testing.T) {
	h := wire.Handle{Partition: 1, Offset: 2, Nonce: 3}
	rec := func(arg time.Duration) []byte { return appendParts(nil, int32(1), int64(2), uint64(3), int64(arg)) }
	consume := appendParts(nil, uint64(7), int32(-1), int64(time.Second))
	probe := wire.Consume{RequestID: 7, Pinned: -1, Visibility: time.Second, RelativeExpiry: true}
	withMax := func(c wire.Consume, claim bool, max int32) wire.Consume {
		c.Claim, c.Max = claim, max
		return c
	}
	for _, tc := range []struct {
		name string
		req  wire.Request
		want []byte
	}{
		{"release", wire.Request{Op: wire.OpRelease, Topic: "orders", Records: []wire.Record{{Op: wire.OpRelease, Handle: h}}},
			frame(wire.OpRelease, "orders", rec(0))},
		{"extend-left", wire.Request{Op: wire.OpExtendLeft, Topic: "orders", Records: []wire.Record{{Op: wire.OpExtendLeft, Handle: h, Arg: time.Minute}}},
			frame(wire.OpExtendLeft, "orders", rec(time.Minute))},
		{"durable ack", wire.Request{Op: wire.OpAckDurable, Topic: "orders", Records: []wire.Record{{Op: wire.OpAckDurable, Handle: h}}},
			frame(wire.OpAckDurable, "orders", rec(0))},
		{"batch", wire.Request{Op: wire.OpAckBatch, Topic: "orders", Records: []wire.Record{
			{Op: wire.OpRelease, Handle: h, Budget: time.Second},
			{Op: wire.OpExtendLeft, Handle: h, Arg: time.Minute, Budget: 2 * time.Second},
			{Op: wire.OpAckDurable, Handle: h, Budget: 3 * time.Second},
		}}, frame(wire.OpAckBatch, "orders", uint16(3),
			wire.OpRelease, rec(0), int64(time.Second),
			wire.OpExtendLeft, rec(time.Minute), int64(2*time.Second),
			wire.OpAckDurable, rec(0), int64(3*time.Second))},
		{"relative expiry", wire.Request{Op: wire.OpConsume, Topic: "t", Consume: probe},
			frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(1))},
		{"relative expiry, max 1", wire.Request{Op: wire.OpConsume, Topic: "t", Consume: withMax(probe, false, 1)},
			frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(1))},
		{"relative expiry, claim and max", wire.Request{Op: wire.OpConsume, Topic: "t", Consume: withMax(probe, true, 7)},
			frame(wire.OpConsume, "t", consume, uint8(1), int32(7), uint8(1))},
	} {
		if got := mustEncode(t, tc.req); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: % x, want % x", tc.name, got, tc.want)
		}
		if need := tc.req.MinVersion(); need != wire.V7 {
			t.Errorf("%s needs v%d", tc.name, need)
		}
	}
	// A Max of 0 is written as 1 before the flags byte, and read as written.
	got, err := wire.DecodeRequest(mustEncode(t, wire.Request{Op: wire.OpConsume, Topic: "t", Consume: probe}), wire.V7)
	if err != nil || got.Consume != withMax(probe, false, 1) {
		t.Fatalf("a relative-expiry probe reads back as %+v, %v", got.Consume, err)
	}
}

// The frame version 10 adds, laid out by hand: a Reject's record is an Ack's, single or in a
// batch.
func TestV10Frames(t *testing.T) {
	h := wire.Handle{Partition: 1, Offset: 2, Nonce: 3}
	rec := appendParts(nil, int32(1), int64(2), uint64(3), int64(0))
	for _, tc := range []struct {
		name string
		req  wire.Request
		want []byte
	}{
		{"reject", wire.Request{Op: wire.OpReject, Topic: "orders", Records: []wire.Record{{Op: wire.OpReject, Handle: h}}},
			frame(wire.OpReject, "orders", rec)},
		{"batch", wire.Request{Op: wire.OpAckBatch, Topic: "orders", Records: []wire.Record{
			{Op: wire.OpReject, Handle: h, Budget: time.Second},
			{Op: wire.OpAck, Handle: h, Budget: 2 * time.Second},
		}}, frame(wire.OpAckBatch, "orders", uint16(2),
			wire.OpReject, rec, int64(time.Second),
			wire.OpAck, rec, int64(2*time.Second))},
	} {
		if got := mustEncode(t, tc.req); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: % x, want % x", tc.name, got, tc.want)
		}
		if need := tc.req.MinVersion(); need != wire.V10 {
			t.Errorf("%s needs v%d", tc.name, need)
		}
		got, err := wire.DecodeRequest(tc.want, wire.V10)
		if err != nil || !reflect.DeepEqual(got, tc.req) {
			t.Errorf("%s reads back as %+v, %v", tc.name, got, err)
		}
	}
}

// The frame version 14 adds, laid out by hand: a NackNow's record is an Ack's (op byte 20),
// single or in a batch; V13 refuses it as its release answers it.
func TestV14Frames(t *testing.T) {
	h := wire.Handle{Partition: 1, Offset: 2, Nonce: 3}
	rec := appendParts(nil, int32(1), int64(2), uint64(3), int64(0))
	for _, tc := range []struct {
		name  string
		req   wire.Request
		want  []byte
		older error
	}{
		{"nack-now", wire.Request{Op: wire.OpNackNow, Topic: "orders", Records: []wire.Record{{Op: wire.OpNackNow, Handle: h}}},
			frame(20, "orders", rec), wire.ErrUnsupportedOp},
		{"batch", wire.Request{Op: wire.OpAckBatch, Topic: "orders", Records: []wire.Record{
			{Op: wire.OpAck, Handle: h, Budget: time.Second},
			{Op: wire.OpNackNow, Handle: h, Budget: 2 * time.Second},
		}}, frame(wire.OpAckBatch, "orders", uint16(2),
			wire.OpAck, rec, int64(time.Second),
			uint8(20), rec, int64(2*time.Second)), wire.ErrBadFrame},
	} {
		if got := mustEncode(t, tc.req); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: % x, want % x", tc.name, got, tc.want)
		}
		if need := tc.req.MinVersion(); need != wire.V14 {
			t.Errorf("%s needs v%d", tc.name, need)
		}
		got, err := wire.DecodeRequest(tc.want, wire.V14)
		if err != nil || !reflect.DeepEqual(got, tc.req) {
			t.Errorf("%s reads back as %+v, %v", tc.name, got, err)
		}
		if _, err := wire.DecodeRequest(tc.want, wire.V13); !errors.Is(err, tc.older) {
			t.Errorf("%s at v13: %v, want %v", tc.name, err, tc.older)
		}
	}
}

// The frames version 11 adds, laid out by hand: a Confirm's record is an Ack's, single or in
// a batch (op byte 17), and the Reserve flag is bit 2 of a Consume's flags byte and of a
// ConsumeBatch member's. Each is read from V11 on, and refused by V10 as its release answers
// it: a Confirm as an unknown op (ErrUnsupportedOp), a batched one as a bad record op, the
// Reserve bit as an unknown flag (ErrBadFrame).
func TestV11Frames(t *testing.T) {
	h := wire.Handle{Partition: 1, Offset: 2, Nonce: 3}
	rec := appendParts(nil, int32(1), int64(2), uint64(3), int64(0))
	consume := appendParts(nil, uint64(7), int32(-1), int64(time.Second))
	for _, tc := range []struct {
		name  string
		req   wire.Request
		want  []byte
		atV10 error  // how V10 refuses it
		why   string // in the refusal's text
	}{
		{"confirm", wire.Request{Op: wire.OpConfirm, Topic: "orders", Records: []wire.Record{{Op: wire.OpConfirm, Handle: h}}},
			frame(17, "orders", rec), wire.ErrUnsupportedOp, "op 17"},
		{"batch", wire.Request{Op: wire.OpAckBatch, Topic: "orders", Records: []wire.Record{
			{Op: wire.OpAck, Handle: h, Budget: 2 * time.Second},
			{Op: wire.OpConfirm, Handle: h, Budget: time.Second},
			{Op: wire.OpRelease, Handle: h, Budget: 3 * time.Second},
		}}, frame(wire.OpAckBatch, "orders", uint16(3),
			wire.OpAck, rec, int64(2*time.Second),
			uint8(17), rec, int64(time.Second),
			wire.OpRelease, rec, int64(3*time.Second)), wire.ErrBadFrame, "record op 17"},
		{"reserve", wire.Request{Op: wire.OpConsume, Topic: "t", Consume: wire.Consume{RequestID: 7, Pinned: -1, Visibility: time.Second, Max: 1, Reserve: true}},
			frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(4)), wire.ErrBadFrame, "flags byte 0x4"},
		{"reserve and every other flag", wire.Request{Op: wire.OpConsume, Topic: "t", Consume: wire.Consume{RequestID: 7, Pinned: -1, Visibility: time.Second, Claim: true, Max: 3, RelativeExpiry: true, Headers: true, Reserve: true}},
			frame(wire.OpConsume, "t", consume, uint8(1), int32(3), uint8(7)), wire.ErrBadFrame, "flags byte 0x7"},
		{"batch member with reserve", wire.Request{Op: wire.OpConsumeBatch, Topic: "t", Consumes: []wire.Consume{
			{RequestID: 1, Pinned: -1, Max: 1, RelativeExpiry: true, Budget: time.Second},
			{RequestID: 1, Pinned: -1, Max: 1, Reserve: true, Budget: time.Second},
		}}, frame(wire.OpConsumeBatch, "t", uint16(2), member(0, 1, 1, time.Second), member(0, 1, 4, time.Second)), wire.ErrBadFrame, "flags byte 0x4"},
		{"batch member with reserve and headers", wire.Request{Op: wire.OpConsumeBatch, Topic: "t", Consumes: []wire.Consume{
			{RequestID: 1, Pinned: -1, Claim: true, Max: 8, Headers: true, Reserve: true, Budget: time.Second},
		}}, frame(wire.OpConsumeBatch, "t", uint16(1), member(1, 8, 6, time.Second)), wire.ErrBadFrame, "flags byte 0x6"},
	} {
		if got := mustEncode(t, tc.req); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: % x, want % x", tc.name, got, tc.want)
		}
		if need := tc.req.MinVersion(); need != wire.V11 {
			t.Errorf("%s needs v%d", tc.name, need)
		}
		for _, v := range []wire.Version{wire.V11, wire.Newest} {
			if got, err := wire.DecodeRequest(tc.want, v); err != nil || !reflect.DeepEqual(got, tc.req) {
				t.Errorf("%s reads back at v%d as %+v, %v", tc.name, v, got, err)
			}
		}
		if _, err := wire.DecodeRequest(tc.want, wire.V10); !errors.Is(err, tc.atV10) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s at v10: %v, want %v (%q)", tc.name, err, tc.atV10, tc.why)
		}
	}
	// Bit 3 and above stay unknown at V11.
	for _, b := range [][]byte{
		frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(8|4)),
		frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 1, 8|4, time.Second)),
	} {
		if _, err := wire.DecodeRequest(b, wire.V11); !errors.Is(err, wire.ErrBadFrame) || !strings.Contains(err.Error(), "flags byte") {
			t.Errorf("% x at v11: %v, want a refused flags byte", b, err)
		}
	}
}

// The version each frame needs: its op's, or, for a batch, its newest record op's, or, for a
// Consume, its newest field's.
func TestMinVersion(t *testing.T) {
	one := func(op byte) wire.Request { return wire.Request{Op: op, Records: []wire.Record{{Op: op}}} }
	batch := func(ops ...byte) wire.Request {
		req := wire.Request{Op: wire.OpAckBatch}
		for _, op := range ops {
			req.Records = append(req.Records, wire.Record{Op: op})
		}
		return req
	}
	consume := func(c wire.Consume) wire.Request { return wire.Request{Op: wire.OpConsume, Consume: c} }
	for _, tc := range []struct {
		name string
		req  wire.Request
		want wire.Version
	}{
		{"ack", one(wire.OpAck), wire.V1},
		{"nack", one(wire.OpNack), wire.V1},
		{"release", one(wire.OpRelease), wire.V7},
		{"extend-left", one(wire.OpExtendLeft), wire.V7},
		{"durable ack", one(wire.OpAckDurable), wire.V7},
		{"batch of the first ops", batch(wire.OpAck, wire.OpExtend, wire.OpNack), wire.V2},
		{"batch with a release", batch(wire.OpAck, wire.OpRelease), wire.V7},
		{"batch with an extend-left", batch(wire.OpExtendLeft), wire.V7},
		{"batch with a durable ack", batch(wire.OpNack, wire.OpAckDurable), wire.V7},
		{"reject", one(wire.OpReject), wire.V10},
		{"batch with a reject", batch(wire.OpReject), wire.V10},
		{"batch with a reject and a release", batch(wire.OpRelease, wire.OpReject, wire.OpAck), wire.V10},
		{"confirm", one(wire.OpConfirm), wire.V11},
		{"batch with a confirm", batch(wire.OpConfirm), wire.V11},
		{"batch with a confirm, a reject and a release", batch(wire.OpRelease, wire.OpConfirm, wire.OpReject), wire.V11},
		{"batch of MaxBatch acks", largeBatch(wire.MaxBatch, wire.OpAck), wire.V2},
		{"batch of MaxBatch confirms", largeBatch(wire.MaxBatch, wire.OpConfirm), wire.V11},
		{"batch past MaxBatch", largeBatch(wire.MaxBatch+1, wire.OpAck), wire.V13},
		{"batch of MaxLargeBatch confirms", largeBatch(wire.MaxLargeBatch, wire.OpConfirm), wire.V13},
		{"nack-now", one(wire.OpNackNow), wire.V14},
		{"batch with a nack-now", batch(wire.OpAck, wire.OpNackNow), wire.V14},
		{"batch past MaxBatch with a nack-now", largeBatch(wire.MaxBatch+1, wire.OpNackNow), wire.V14},
		{"probe", consume(wire.Consume{Max: 1}), wire.V3},
		{"claim", consume(wire.Consume{Claim: true}), wire.V5},
		{"max", consume(wire.Consume{Max: 2}), wire.V6},
		{"relative expiry", consume(wire.Consume{RelativeExpiry: true}), wire.V7},
		{"relative expiry with claim and max", consume(wire.Consume{Claim: true, Max: 9, RelativeExpiry: true}), wire.V7},
		{"headers", consume(wire.Consume{Headers: true}), wire.V9},
		{"headers with every other field", consume(wire.Consume{Claim: true, Max: 9, RelativeExpiry: true, Headers: true}), wire.V9},
		{"consume batch", wire.Request{Op: wire.OpConsumeBatch, Consumes: []wire.Consume{{RelativeExpiry: true}, {Claim: true}}}, wire.V8},
		{"consume batch with headers", wire.Request{Op: wire.OpConsumeBatch, Consumes: []wire.Consume{{}, {Headers: true}}}, wire.V9},
		{"reserve", consume(wire.Consume{Reserve: true}), wire.V11},
		{"reserve with every other field", consume(wire.Consume{Claim: true, Max: 9, RelativeExpiry: true, Headers: true, Reserve: true}), wire.V11},
		{"consume batch with a reserve", wire.Request{Op: wire.OpConsumeBatch, Consumes: []wire.Consume{{}, {Reserve: true}}}, wire.V11},
		{"consume batch with a reserve after headers", wire.Request{Op: wire.OpConsumeBatch, Consumes: []wire.Consume{{Headers: true}, {Reserve: true}, {Headers: true}}}, wire.V11},
		{"replay", wire.Request{Op: wire.OpReplay}, wire.V3},
		{"replay with headers", wire.Request{Op: wire.OpReplay, Replay: wire.Replay{Headers: true}}, wire.V9},
		{"pass", wire.Request{Op: wire.OpPass}, wire.V4},
	} {
		if got := tc.req.MinVersion(); got != tc.want {
			t.Errorf("%s needs v%d, want v%d", tc.name, got, tc.want)
		}
	}
}

// A plain single-record probe is byte for byte the V3 frame, whatever version encodes it.
func TestPlainProbeIsTheV3Frame(t *testing.T) {
	want := []byte{wire.OpConsume, 0, 1, 't'}
	want = binary.BigEndian.AppendUint64(want, 7)
	want = binary.BigEndian.AppendUint32(want, 0xffffffff)
	want = binary.BigEndian.AppendUint64(want, uint64(time.Second))
	for _, max := range []int32{0, 1} {
		req := wire.Request{Op: wire.OpConsume, Topic: "t", Consume: wire.Consume{RequestID: 7, Pinned: -1, Visibility: time.Second, Max: max}}
		if got := mustEncode(t, req); !bytes.Equal(got, want) {
			t.Fatalf("max %d: % x, want % x", max, got, want)
		}
		if req.MinVersion() != wire.V3 {
			t.Fatalf("a plain probe needs v%d", req.MinVersion())
		}
	}
	for _, v := range []wire.Version{wire.V3, wire.V6} {
		got, err := wire.DecodeRequest(want, v)
		if err != nil || got.Consume != (wire.Consume{RequestID: 7, Pinned: -1, Visibility: time.Second}) {
			t.Fatalf("v%d: %+v, %v", v, got, err)
		}
	}
	// Max without a claim carries the Claim byte 0.
	withMax := mustEncode(t, wire.Request{Op: wire.OpConsume, Topic: "t", Consume: wire.Consume{RequestID: 7, Pinned: -1, Visibility: time.Second, Max: 5}})
	if tail := withMax[len(want):]; !bytes.Equal(tail, []byte{0, 0, 0, 0, 5}) {
		t.Fatalf("the fields after a V3 probe: % x", tail)
	}
}

// Older decoders refuse what they do not know, each as its release answers it.
func TestOlderDecodersRefuse(t *testing.T) {
	probe := wire.Request{Op: wire.OpConsume, Topic: "t", Consume: wire.Consume{RequestID: 1, Pinned: -1}}
	claim, max, relative, relativeMax := probe, probe, probe, probe
	claim.Consume.Claim = true
	max.Consume.Max = 10
	relative.Consume.RelativeExpiry = true
	relativeMax.Consume.RelativeExpiry, relativeMax.Consume.Max = true, 10
	headers, headersRelative := probe, probe
	headers.Consume.Headers = true
	headersRelative.Consume.Headers, headersRelative.Consume.RelativeExpiry = true, true
	batchHeaders := wire.Request{Op: wire.OpConsumeBatch, Topic: "t", Consumes: []wire.Consume{
		{Pinned: -1, Budget: time.Second}, {Pinned: -1, Headers: true, Budget: time.Second}}}
	replayHeaders := wire.Request{Op: wire.OpReplay, Topic: "t", Replay: wire.Replay{Limit: 1, Headers: true}}
	reserve, reserveAll := probe, probe
	reserve.Consume.Reserve = true
	reserveAll.Consume = wire.Consume{RequestID: 1, Pinned: -1, Claim: true, Max: 10, RelativeExpiry: true, Headers: true, Reserve: true}
	batchReserve := wire.Request{Op: wire.OpConsumeBatch, Topic: "t", Consumes: []wire.Consume{
		{Pinned: -1, Headers: true, Budget: time.Second}, {Pinned: -1, Reserve: true, Budget: time.Second}}}
	consumeBatch := wire.Request{Op: wire.OpConsumeBatch, Topic: "", Consumes: []wire.Consume{{RequestID: 15, Pinned: 3, Claim: true, Max: 1, Budget: time.Second}}}
	acksRiding := reserve
	acksRiding.Records = plainAcks(5, time.Second).Records
	h := wire.Handle{Partition: 1, Offset: 2, Nonce: 3}
	single := func(op byte) wire.Request {
		return wire.Request{Op: op, Topic: "t", Records: []wire.Record{{Op: op, Handle: h}}}
	}
	batch := func(op byte) wire.Request {
		return wire.Request{Op: wire.OpAckBatch, Topic: "t", Records: []wire.Record{{Op: wire.OpAck, Handle: h}, {Op: op, Handle: h}}}
	}
	for _, tc := range []struct {
		name string
		req  wire.Request
		v    wire.Version
		want error
	}{
		{"v3 reads no Claim byte", claim, wire.V3, wire.ErrBadFrame},
		{"v4 reads no Claim byte", claim, wire.V4, wire.ErrBadFrame},
		{"v5 reads no Max", max, wire.V5, wire.ErrBadFrame},
		{"v2 knows no Consume", probe, wire.V2, wire.ErrUnsupportedOp},
		{"v1 knows no AckBatch", samples()[3], wire.V1, wire.ErrUnsupportedOp},
		{"v2 knows no Replay", samples()[8], wire.V2, wire.ErrUnsupportedOp},
		{"v2 knows no Cancel", samples()[10], wire.V2, wire.ErrUnsupportedOp},
		{"v3 knows no Register", samples()[11], wire.V3, wire.ErrUnsupportedOp},
		{"v3 knows no Notify", samples()[12], wire.V3, wire.ErrUnsupportedOp},
		{"v3 knows no Pass", samples()[13], wire.V3, wire.ErrUnsupportedOp},
		{"v3 knows no Drop", samples()[14], wire.V3, wire.ErrUnsupportedOp},
		{"version 0 knows nothing", samples()[0], 0, wire.ErrUnsupportedOp},
		{"v6 knows no Release", single(wire.OpRelease), wire.V6, wire.ErrUnsupportedOp},
		{"v6 knows no ExtendLeft", single(wire.OpExtendLeft), wire.V6, wire.ErrUnsupportedOp},
		{"v6 knows no AckDurable", single(wire.OpAckDurable), wire.V6, wire.ErrUnsupportedOp},
		{"v1 knows no Release", single(wire.OpRelease), wire.V1, wire.ErrUnsupportedOp},
		{"v6 reads no batched Release", batch(wire.OpRelease), wire.V6, wire.ErrBadFrame},
		{"v6 reads no batched ExtendLeft", batch(wire.OpExtendLeft), wire.V6, wire.ErrBadFrame},
		{"v6 reads no batched AckDurable", batch(wire.OpAckDurable), wire.V6, wire.ErrBadFrame},
		{"v2 reads no batched Release", batch(wire.OpRelease), wire.V2, wire.ErrBadFrame},
		{"v6 reads no flags byte", relativeMax, wire.V6, wire.ErrBadFrame},
		{"v6 reads no flags byte after a Max of 1", relative, wire.V6, wire.ErrBadFrame},
		{"v5 reads no flags byte", relative, wire.V5, wire.ErrBadFrame},
		{"v3 reads no flags byte", relative, wire.V3, wire.ErrBadFrame},
		{"v7 knows no ConsumeBatch", consumeBatch, wire.V7, wire.ErrUnsupportedOp},
		{"v9 knows no Reject", single(wire.OpReject), wire.V9, wire.ErrUnsupportedOp},
		{"v8 knows no Reject", single(wire.OpReject), wire.V8, wire.ErrUnsupportedOp},
		{"v1 knows no Reject", single(wire.OpReject), wire.V1, wire.ErrUnsupportedOp},
		{"v9 reads no batched Reject", batch(wire.OpReject), wire.V9, wire.ErrBadFrame},
		{"v8 reads no batched Reject", batch(wire.OpReject), wire.V8, wire.ErrBadFrame},
		{"v2 reads no batched Reject", batch(wire.OpReject), wire.V2, wire.ErrBadFrame},
		{"v8 reads no Headers flag", headers, wire.V8, wire.ErrBadFrame},
		{"v7 reads no Headers flag", headers, wire.V7, wire.ErrBadFrame},
		{"v8 reads no Headers flag beside relative expiry", headersRelative, wire.V8, wire.ErrBadFrame},
		{"v6 reads no flags byte of Headers", headers, wire.V6, wire.ErrBadFrame},
		{"v8 reads no batched Headers flag", batchHeaders, wire.V8, wire.ErrBadFrame},
		{"v8 reads no Replay flags byte", replayHeaders, wire.V8, wire.ErrBadFrame},
		{"v3 reads no Replay flags byte", replayHeaders, wire.V3, wire.ErrBadFrame},
		{"v10 knows no Confirm", single(wire.OpConfirm), wire.V10, wire.ErrUnsupportedOp},
		{"v9 knows no Confirm", single(wire.OpConfirm), wire.V9, wire.ErrUnsupportedOp},
		{"v1 knows no Confirm", single(wire.OpConfirm), wire.V1, wire.ErrUnsupportedOp},
		{"v10 reads no batched Confirm", batch(wire.OpConfirm), wire.V10, wire.ErrBadFrame},
		{"v7 reads no batched Confirm", batch(wire.OpConfirm), wire.V7, wire.ErrBadFrame},
		{"v2 reads no batched Confirm", batch(wire.OpConfirm), wire.V2, wire.ErrBadFrame},
		{"v10 reads no Reserve flag", reserve, wire.V10, wire.ErrBadFrame},
		{"v9 reads no Reserve flag", reserve, wire.V9, wire.ErrBadFrame},
		{"v7 reads no Reserve flag", reserve, wire.V7, wire.ErrBadFrame},
		{"v10 reads no Reserve flag beside every other", reserveAll, wire.V10, wire.ErrBadFrame},
		{"v6 reads no flags byte of Reserve", reserve, wire.V6, wire.ErrBadFrame},
		{"v10 reads no batched Reserve flag", batchReserve, wire.V10, wire.ErrBadFrame},
		{"v13 knows no NackNow", single(wire.OpNackNow), wire.V13, wire.ErrUnsupportedOp},
		{"v1 knows no NackNow", single(wire.OpNackNow), wire.V1, wire.ErrUnsupportedOp},
		{"v13 reads no batched NackNow", batch(wire.OpNackNow), wire.V13, wire.ErrBadFrame},
		{"v2 reads no batched NackNow", batch(wire.OpNackNow), wire.V2, wire.ErrBadFrame},
		{"v8 reads no batched Reserve flag", batchReserve, wire.V8, wire.ErrBadFrame},
		{"v7 knows no ConsumeBatch of a Reserve", batchReserve, wire.V7, wire.ErrUnsupportedOp},
		{"v15 knows no Acks", plainAcks(3, time.Second), wire.V15, wire.ErrUnsupportedOp},
		{"v1 knows no Acks", plainAcks(3, time.Second), wire.V1, wire.ErrUnsupportedOp},
		{"v15 reads no Acks flag", acksRiding, wire.V15, wire.ErrBadFrame},
		{"v11 reads no Acks flag", acksRiding, wire.V11, wire.ErrBadFrame},
		{"v7 reads no Acks flag", acksRiding, wire.V7, wire.ErrBadFrame},
		{"v6 reads no flags byte of Acks", acksRiding, wire.V6, wire.ErrBadFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wire.DecodeRequest(mustEncode(t, tc.req), tc.v)
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	if _, err := wire.DecodeRequest([]byte{22, 0, 0}, wire.Newest); !errors.Is(err, wire.ErrUnsupportedOp) {
		t.Fatalf("an op no version knows: %v", err)
	}
}

// frame lays out a request by hand: op, topic, then the body's parts (byte slices, or
// integers written at their own width).
func frame(op byte, topic string, parts ...any) []byte {
	b := []byte{op}
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	return appendParts(b, parts...)
}

func appendParts(b []byte, parts ...any) []byte {
	for _, p := range parts {
		switch p := p.(type) {
		case []byte:
			b = append(b, p...)
		case string:
			b = append(b, p...)
		case uint8:
			b = append(b, p)
		case uint16:
			b = binary.BigEndian.AppendUint16(b, p)
		case int32:
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		case uint32:
			b = binary.BigEndian.AppendUint32(b, p)
		case int64:
			b = binary.BigEndian.AppendUint64(b, uint64(p))
		case uint64:
			b = binary.BigEndian.AppendUint64(b, p)
		default:
			panic(fmt.Sprintf("part %T", p))
		}
	}
	return b
}

// Hostile and malformed requests are refused with ErrBadFrame (ErrUnsupportedOp for an
// unknown op), never a panic.
func TestDecodeRequestRefuses(t *testing.T) {
	rec := appendParts(nil, int32(1), int64(2), uint64(3), int64(0))
	consume := appendParts(nil, uint64(1), int32(-1), int64(0))
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"empty", nil},
		{"short header", []byte{wire.OpAck, 0}},
		{"topic over MaxTopic", frame(wire.OpAck, strings.Repeat("t", wire.MaxTopic+1), rec)},
		{"topic longer than the frame", []byte{wire.OpAck, 0, 9, 't'}},
		{"short record", frame(wire.OpAck, "t", rec[:27])},
		{"trailing after a record", frame(wire.OpAck, "t", rec, uint8(0))},
		{"batch of none", frame(wire.OpAckBatch, "t", uint16(0))},
		{"batch over MaxLargeBatch", frame(wire.OpAckBatch, "t", uint16(wire.MaxLargeBatch+1), bytes.Repeat(append([]byte{1}, append(rec, 0, 0, 0, 0, 0, 0, 0, 0)...), wire.MaxLargeBatch+1))},
		{"batch count over its bytes", frame(wire.OpAckBatch, "t", uint16(2), uint8(1), rec, int64(0))},
		{"batch record of op 4", frame(wire.OpAckBatch, "t", uint16(1), uint8(4), rec, int64(0))},
		{"batch record of op 0", frame(wire.OpAckBatch, "t", uint16(1), uint8(0), rec, int64(0))},
		{"short consume", frame(wire.OpConsume, "t", consume[:19])},
		{"consume pinned to -2", frame(wire.OpConsume, "t", uint64(1), int32(-2), int64(0))},
		{"consume of a negative visibility", frame(wire.OpConsume, "t", uint64(1), int32(-1), int64(-1))},
		{"claim byte 2", frame(wire.OpConsume, "t", consume, uint8(2))},
		{"max 1", frame(wire.OpConsume, "t", consume, uint8(0), int32(1))},
		{"max 0", frame(wire.OpConsume, "t", consume, uint8(1), int32(0))},
		{"max negative", frame(wire.OpConsume, "t", consume, uint8(1), int32(-5))},
		{"short max", frame(wire.OpConsume, "t", consume, uint8(1), uint16(5))},
		{"flags byte 0", frame(wire.OpConsume, "t", consume, uint8(1), int32(5), uint8(0))},
		{"flags byte 8", frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(8))},
		{"flags byte 0xf", frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(0xf))},
		{"flags byte 0x80", frame(wire.OpConsume, "t", consume, uint8(0), int32(5), uint8(0x80))},
		{"flags byte 0xff", frame(wire.OpConsume, "t", consume, uint8(1), int32(5), uint8(0xff))},
		{"max 0 before the flags byte", frame(wire.OpConsume, "t", consume, uint8(0), int32(0), uint8(1))},
		{"max negative before the flags byte", frame(wire.OpConsume, "t", consume, uint8(0), int32(-1), uint8(1))},
		{"claim byte 2 before the flags byte", frame(wire.OpConsume, "t", consume, uint8(2), int32(1), uint8(1))},
		{"trailing after the flags byte", frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(1), uint8(0))},
		{"short release", frame(wire.OpRelease, "t", rec[:27])},
		{"trailing after a release", frame(wire.OpRelease, "t", rec, uint8(0))},
		{"trailing after an extend-left", frame(wire.OpExtendLeft, "t", rec, uint8(0))},
		{"short durable ack", frame(wire.OpAckDurable, "t", rec[:20])},
		{"batch record of op 11", frame(wire.OpAckBatch, "t", uint16(1), uint8(11), rec, int64(0))},
		{"batch record of op 15", frame(wire.OpAckBatch, "t", uint16(1), uint8(15), rec, int64(0))},
		{"batch record of op 5", frame(wire.OpAckBatch, "t", uint16(2), uint8(12), rec, int64(0), uint8(5), rec, int64(0))},
		{"replay of a negative limit", frame(wire.OpReplay, "t", int32(0), int64(0), int32(-1))},
		{"replay of a negative partition", frame(wire.OpReplay, "t", int32(-1), int64(0), int32(1))},
		{"replay from a negative offset", frame(wire.OpReplay, "t", int32(0), int64(-1), int32(1))},
		{"replay flags byte 0", frame(wire.OpReplay, "t", int32(0), int64(0), int32(1), uint8(0))},
		{"replay flags byte 1", frame(wire.OpReplay, "t", int32(0), int64(0), int32(1), uint8(1))},
		{"replay flags byte 3", frame(wire.OpReplay, "t", int32(0), int64(0), int32(1), uint8(3))},
		{"trailing after the replay flags byte", frame(wire.OpReplay, "t", int32(0), int64(0), int32(1), uint8(2), uint8(0))},
		{"short cancel", frame(wire.OpCancel, "t", uint32(1))},
		{"register with a topic in its header", frame(wire.OpRegister, "t", uint16(1), uint16(1), "t", int64(1))},
		{"register of none", frame(wire.OpRegister, "", uint16(0))},
		{"register over MaxRegistrations", frame(wire.OpRegister, "", uint16(wire.MaxRegistrations+1), bytes.Repeat(appendParts(nil, uint16(1), "t", int64(1)), wire.MaxRegistrations+1))},
		{"register count over its bytes", frame(wire.OpRegister, "", uint16(0xffff), uint16(1), "t", int64(1))},
		{"registration of an empty topic", frame(wire.OpRegister, "", uint16(1), uint16(0), int64(1), uint8(0))},
		{"registration topic over MaxTopic", frame(wire.OpRegister, "", uint16(1), uint16(wire.MaxTopic+1), strings.Repeat("t", wire.MaxTopic+1), int64(1))},
		{"registration of no ttl", frame(wire.OpRegister, "", uint16(1), uint16(1), "t", int64(0))},
		{"registration of a negative ttl", frame(wire.OpRegister, "", uint16(1), uint16(1), "t", int64(-1))},
		{"registration topic longer than the frame", frame(wire.OpRegister, "", uint16(1), uint16(200), "t", int64(1))},
		{"trailing after a register", frame(wire.OpRegister, "", uint16(1), uint16(1), "t", int64(1), uint8(0))},
		{"notify of no hold", frame(wire.OpNotify, "t", int64(0))},
		{"notify of a negative hold", frame(wire.OpNotify, "t", int64(-1))},
		{"trailing after a pass", frame(wire.OpPass, "t", uint8(0))},
		{"trailing after a drop", frame(wire.OpDrop, "t", uint8(0))},
		{"over MaxFrame", frame(wire.OpPass, "t", make([]byte, wire.MaxFrame))},
		{"consume batch of none", frame(wire.OpConsumeBatch, "t", uint16(0))},
		{"consume batch over MaxConsumeBatch", frame(wire.OpConsumeBatch, "t", uint16(wire.MaxConsumeBatch+1), bytes.Repeat(member(0, 1, 0, time.Second), wire.MaxConsumeBatch+1))},
		{"consume batch count over its bytes", frame(wire.OpConsumeBatch, "t", uint16(2), member(0, 1, 0, time.Second))},
		{"short consume batch member", frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 1, 0, time.Second)[:33])},
		{"trailing after a consume batch", frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 1, 0, time.Second), uint8(0))},
		{"consume batch member pinned to -2", frame(wire.OpConsumeBatch, "t", uint16(1), uint64(1), int32(-2), int64(0), uint8(0), int32(1), uint8(0), int64(1))},
		{"consume batch member of a negative visibility", frame(wire.OpConsumeBatch, "t", uint16(1), uint64(1), int32(-1), int64(-1), uint8(0), int32(1), uint8(0), int64(1))},
		{"consume batch member of claim byte 2", frame(wire.OpConsumeBatch, "t", uint16(1), member(2, 1, 0, time.Second))},
		{"consume batch member of max 0", frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 0, 0, time.Second))},
		{"consume batch member of a negative max", frame(wire.OpConsumeBatch, "t", uint16(1), member(0, -1, 0, time.Second))},
		{"consume batch member of flags byte 8", frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 1, 8, time.Second))},
		{"consume batch member of flags byte 0x83", frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 1, 0x83, time.Second))},
		{"consume batch member of no budget", frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 1, 0, 0))},
		{"consume batch member of a negative budget", frame(wire.OpConsumeBatch, "t", uint16(2), member(0, 1, 1, time.Second), member(0, 1, 0, -1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := wire.DecodeRequest(tc.frame, wire.Newest); !errors.Is(err, wire.ErrBadFrame) {
				t.Fatalf("%v, want ErrBadFrame", err)
			}
		})
	}
}

// member lays out one consume of a ConsumeBatch by hand: request id 1, any partition, the
// topic's visibility, and the fields given.
func member(claim uint8, max int32, flags uint8, budget time.Duration) []byte {
	return appendParts(nil, uint64(1), int32(-1), int64(0), claim, max, flags, int64(budget))
}

// A ConsumeBatch, laid out by hand: every field of every member written, in order.
func TestConsumeBatchFrame(t *testing.T) {
	req := wire.Request{Op: wire.OpConsumeBatch, Topic: "orders", Consumes: []wire.Consume{
		{RequestID: 7, Pinned: -1, Budget: time.Second},
		{RequestID: 8, Pinned: 3, Visibility: time.Minute, Claim: true, Max: 5, RelativeExpiry: true, Budget: 2},
	}}
	want := frame(wire.OpConsumeBatch, "orders", uint16(2),
		uint64(7), int32(-1), int64(0), uint8(0), int32(1), uint8(0), int64(time.Second),
		uint64(8), int32(3), int64(time.Minute), uint8(1), int32(5), uint8(1), int64(2))
	if got := mustEncode(t, req); !bytes.Equal(got, want) {
		t.Fatalf("% x\nwant % x", got, want)
	}
	back, err := wire.DecodeRequest(want, wire.V8)
	req.Consumes[0].Max = 1 // written as at least 1, read as written
	if err != nil || !reflect.DeepEqual(back, req) {
		t.Fatalf("%+v, %v", back, err)
	}
}

// A ConsumeBatch's reply carries each member's consume reply, in order, each read back by
// DecodeConsumeReply; a refusal of the whole frame reads as no members and that refusal.
func TestConsumeBatchReplyRoundTrip(t *testing.T) {
	members := []*wire.ConsumeReply{sampleConsumeReply(), {Status: wire.StatusUnavailable, Message: "closed"}, {Status: wire.StatusOK}}
	b := wire.BeginConsumeBatchReply([]byte("prefix"), len(members))
	for _, m := range members {
		b = wire.AppendConsumeBatchMember(b, m)
	}
	reply, err := wire.DecodeConsumeBatchReply(b[6:], len(members))
	if err != nil || len(reply.Members) != len(members) || reply.Refusal != (wire.Answer{}) {
		t.Fatalf("%+v, %v", reply, err)
	}
	for i, raw := range reply.Members {
		back, err := wire.DecodeConsumeReply(raw)
		if err != nil || !reflect.DeepEqual(&back, members[i]) {
			t.Fatalf("member %d: %+v, %v; want %+v", i, back, err, members[i])
		}
		if i+1 < len(reply.Members) && cap(raw) != len(raw) {
			t.Fatalf("member %d may be appended to over the next", i)
		}
	}
	refusal := wire.EncodeReply([]wire.Answer{{Status: wire.StatusUnsupported, Message: "op 15"}})
	reply, err = wire.DecodeConsumeBatchReply(refusal, 3)
	if err != nil || reply.Members != nil || reply.Refusal.Status != wire.StatusUnsupported || reply.Refusal.Message != "op 15" {
		t.Fatalf("a refusal: %+v, %v", reply, err)
	}
}

func TestDecodeConsumeBatchReplyRefuses(t *testing.T) {
	one := wire.AppendConsumeBatchMember(wire.BeginConsumeBatchReply(nil, 1), &wire.ConsumeReply{})
	for _, tc := range []struct {
		name  string
		reply []byte
		count int
	}{
		{"empty", nil, 1},
		{"another count", one, 2},
		{"no count", []byte{0xC6, 0}, 1},
		{"cut short", one[:len(one)-1], 1},
		{"trailing data", append(append([]byte(nil), one...), 0), 1},
		{"a member too short", appendParts([]byte{0xC6}, uint16(1), uint32(3), []byte{0xC5, 0, 0}), 1},
		{"a member longer than the reply", appendParts([]byte{0xC6}, uint16(1), uint32(100), []byte{0xC5, 0, 0, 0, 0, 0, 0, 0}), 1},
		{"a member not a consume reply", appendParts([]byte{0xC6}, uint16(1), uint32(8), make([]byte, 8)), 1},
		{"a count over its bytes", appendParts([]byte{0xC6}, uint16(64), make([]byte, 20)), 64},
		{"an ack reply of OK", wire.EncodeReply([]wire.Answer{{Status: wire.StatusOK}}), 1},
		{"an ack reply of two answers", wire.EncodeReply([]wire.Answer{{Status: wire.StatusGone}, {Status: wire.StatusGone}}), 2},
		{"over MaxFrame", make([]byte, wire.MaxFrame+1), 1},
	} {
		if _, err := wire.DecodeConsumeBatchReply(tc.reply, tc.count); !errors.Is(err, wire.ErrBadFrame) {
			t.Errorf("%s: %v, want ErrBadFrame", tc.name, err)
		}
	}
}

// A count a frame cannot hold is refused before anything is allocated for it.
func TestHostileCountsAllocateLittle(t *testing.T) {
	request := func(b []byte) error { _, err := wire.DecodeRequest(b, wire.Newest); return err }
	reply := func(b []byte) error { _, err := wire.DecodeReply(b); return err }
	consumeReply := func(b []byte) error { _, err := wire.DecodeConsumeReply(b); return err }
	for _, tc := range []struct {
		name   string
		frame  []byte
		decode func([]byte) error
	}{
		{"register", frame(wire.OpRegister, "", uint16(wire.MaxRegistrations), make([]byte, 11*wire.MaxRegistrations-1)), request},
		{"ack reply", appendParts(nil, uint16(wire.MaxAnswers), make([]byte, 11*wire.MaxAnswers-1)), reply},
		{"consume reply", appendParts([]byte{0}, uint16(0), uint32(0xffffffff), make([]byte, 1000)), consumeReply},
		{"key length", appendParts([]byte{0}, uint16(0), uint32(1), make([]byte, 49), uint32(0xffffffff), uint32(0)), consumeReply},
		{"consume batch", frame(wire.OpConsumeBatch, "t", uint16(wire.MaxConsumeBatch), make([]byte, 34*wire.MaxConsumeBatch-1)), request},
		{"plain acks", frame(wire.OpAcks, "t", uint16(wire.MaxLargeBatch), int64(1), make([]byte, 9*wire.MaxLargeBatch-1)), request},
		{"compact consume reply", appendParts([]byte{0xCA, 0}, uint16(0), uv(1<<20), make([]byte, 1000)), consumeReply},
		{"compact key length", appendParts([]byte{0xCA, 0}, uint16(0), uv(1), sv(0), sv(0), uint64(1), uv(1), uint8(0), sv(0), sv(0), sv(0), uv(1<<40), make([]byte, 100)), consumeReply},
		{"consume batch reply", appendParts([]byte{0xC6}, uint16(wire.MaxConsumeBatch), make([]byte, 9*wire.MaxConsumeBatch-1)), func(b []byte) error {
			_, err := wire.DecodeConsumeBatchReply(b, wire.MaxConsumeBatch)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.decode(tc.frame); !errors.Is(err, wire.ErrBadFrame) {
				t.Fatalf("%v, want ErrBadFrame", err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			const runs = 100
			for range runs {
				_ = tc.decode(tc.frame)
			}
			runtime.ReadMemStats(&after)
			// The error, and nothing in proportion to the count.
			if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 1<<10 {
				t.Fatalf("%d bytes allocated per decode", per)
			}
		})
	}
}

// The encoder refuses what no frame carries, and what the decoder would refuse.
func TestEncodeRequestRefuses(t *testing.T) {
	h := wire.Handle{}
	for _, tc := range []struct {
		name string
		req  wire.Request
	}{
		{"unknown op", wire.Request{Op: 20}},
		{"status of no partition", wire.Request{Op: wire.OpStatus, Topic: "t"}},
		{"status over MaxPartitions", wire.Request{Op: wire.OpStatus, Topic: "t", Partitions: make([]int32, wire.MaxPartitions+1)}},
		{"status of a negative partition", wire.Request{Op: wire.OpStatus, Topic: "t", Partitions: []int32{-1}}},
		{"status of a repeated partition", wire.Request{Op: wire.OpStatus, Topic: "t", Partitions: []int32{1, 1}}},
		{"purge of descending partitions", wire.Request{Op: wire.OpPurge, Topic: "t", Partitions: []int32{2, 1}}},
		{"consume batch of none", wire.Request{Op: wire.OpConsumeBatch}},
		{"consume batch over MaxConsumeBatch", wire.Request{Op: wire.OpConsumeBatch, Consumes: make([]wire.Consume, wire.MaxConsumeBatch+1)}},
		{"consume batch member of no budget", wire.Request{Op: wire.OpConsumeBatch, Consumes: []wire.Consume{{Pinned: -1}}}},
		{"consume batch member of a negative max", wire.Request{Op: wire.OpConsumeBatch, Consumes: []wire.Consume{{Pinned: -1, Max: -1, Budget: 1}}}},
		{"consume batch member pinned to -2", wire.Request{Op: wire.OpConsumeBatch, Consumes: []wire.Consume{{Pinned: -2, Budget: 1}}}},
		{"op 0", wire.Request{}},
		{"topic over MaxTopic", wire.Request{Op: wire.OpPass, Topic: strings.Repeat("t", wire.MaxTopic+1)}},
		{"topic over 64 KiB", wire.Request{Op: wire.OpPass, Topic: strings.Repeat("t", 1<<16+1)}},
		{"ack of no record", wire.Request{Op: wire.OpAck}},
		{"ack of two records", wire.Request{Op: wire.OpAck, Records: []wire.Record{{Op: wire.OpAck}, {Op: wire.OpAck}}}},
		{"ack of a nack record", wire.Request{Op: wire.OpAck, Records: []wire.Record{{Op: wire.OpNack, Handle: h}}}},
		{"ack of a durable ack record", wire.Request{Op: wire.OpAck, Records: []wire.Record{{Op: wire.OpAckDurable, Handle: h}}}},
		{"release of no record", wire.Request{Op: wire.OpRelease}},
		{"release of an ack record", wire.Request{Op: wire.OpRelease, Records: []wire.Record{{Op: wire.OpAck, Handle: h}}}},
		{"extend-left of two records", wire.Request{Op: wire.OpExtendLeft, Records: []wire.Record{{Op: wire.OpExtendLeft}, {Op: wire.OpExtendLeft}}}},
		{"extend-left of an extend record", wire.Request{Op: wire.OpExtendLeft, Records: []wire.Record{{Op: wire.OpExtend, Handle: h}}}},
		{"durable ack of a release record", wire.Request{Op: wire.OpAckDurable, Records: []wire.Record{{Op: wire.OpRelease, Handle: h}}}},
		{"batch of none", wire.Request{Op: wire.OpAckBatch}},
		{"batch over MaxLargeBatch", largeBatch(wire.MaxLargeBatch+1, wire.OpAck)},
		{"batch record of op 0", wire.Request{Op: wire.OpAckBatch, Records: []wire.Record{{}}}},
		{"batch record of op 4", wire.Request{Op: wire.OpAckBatch, Records: []wire.Record{{Op: wire.OpAck}, {Op: wire.OpAckBatch}}}},
		{"batch record of op 15", wire.Request{Op: wire.OpAckBatch, Records: []wire.Record{{Op: wire.OpRelease}, {Op: 15}}}},
		{"consume pinned to -2", wire.Request{Op: wire.OpConsume, Consume: wire.Consume{Pinned: -2}}},
		{"consume of a negative visibility", wire.Request{Op: wire.OpConsume, Consume: wire.Consume{Visibility: -1}}},
		{"consume of a negative max", wire.Request{Op: wire.OpConsume, Consume: wire.Consume{Max: -1}}},
		{"replay of a negative limit", wire.Request{Op: wire.OpReplay, Replay: wire.Replay{Limit: -1}}},
		{"register with a header topic", wire.Request{Op: wire.OpRegister, Topic: "t", Registrations: []wire.Registration{{Topic: "t", TTL: 1}}}},
		{"register of none", wire.Request{Op: wire.OpRegister}},
		{"register over MaxRegistrations", wire.Request{Op: wire.OpRegister, Registrations: make([]wire.Registration, wire.MaxRegistrations+1)}},
		{"registration of no ttl", wire.Request{Op: wire.OpRegister, Registrations: []wire.Registration{{Topic: "t"}}}},
		{"registration of an empty topic", wire.Request{Op: wire.OpRegister, Registrations: []wire.Registration{{TTL: 1}}}},
		{"notify of no hold", wire.Request{Op: wire.OpNotify}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := wire.EncodeRequest(tc.req); !errors.Is(err, wire.ErrInvalidRequest) {
				t.Fatalf("%v, want ErrInvalidRequest", err)
			}
		})
	}
}

func TestVersions(t *testing.T) {
	for op, since := range map[byte]wire.Version{
		wire.OpAck: wire.V1, wire.OpExtend: wire.V1, wire.OpNack: wire.V1, wire.OpAckBatch: wire.V2,
		wire.OpConsume: wire.V3, wire.OpReplay: wire.V3, wire.OpCancel: wire.V3,
		wire.OpRegister: wire.V4, wire.OpNotify: wire.V4, wire.OpPass: wire.V4, wire.OpDrop: wire.V4,
		wire.OpRelease: wire.V7, wire.OpExtendLeft: wire.V7, wire.OpAckDurable: wire.V7,
		wire.OpConsumeBatch: wire.V8, wire.OpReject: wire.V10,
		wire.OpConfirm: wire.V11, wire.OpStatus: wire.V12, wire.OpPurge: wire.V12, wire.OpNackNow: wire.V14, wire.OpAcks: wire.V16, 0: 0, 22: 0, 255: 0,
	} {
		if got := wire.Since(op); got != since {
			t.Errorf("op %d since v%d, want v%d", op, got, since)
		}
		for _, v := range versions {
			if want := since != 0 && v >= since; v.Knows(op) != want {
				t.Errorf("v%d knows op %d: %v", v, op, !want)
			}
		}
	}
	if wire.Newest != wire.V16 {
		t.Fatalf("Newest is v%d", wire.Newest)
	}
}

// A handle converts to and from inflight's.
func TestHandleConverts(t *testing.T) {
	h := inflight.Handle{Partition: 1, Offset: 2, Nonce: 3}
	if back := inflight.Handle(wire.Handle(h)); back != h {
		t.Fatalf("%+v", back)
	}
}

func TestReplyRoundTrip(t *testing.T) {
	answers := []wire.Answer{{Status: wire.StatusOK, Expiry: 42}, {Status: wire.StatusGone, Message: "gone"}, {Status: wire.StatusPass}}
	back, err := wire.DecodeReply(wire.EncodeReply(answers))
	if err != nil || !reflect.DeepEqual(back, answers) {
		t.Fatalf("%+v, %v", back, err)
	}
	// A Register's reply answers each of up to MaxRegistrations entries.
	many := make([]wire.Answer, wire.MaxRegistrations)
	if back, err := wire.DecodeReply(wire.EncodeReply(many)); err != nil || len(back) != len(many) {
		t.Fatalf("%d answers: %v", len(back), err)
	}
	long := wire.EncodeReply([]wire.Answer{{Message: strings.Repeat("m", 2*wire.MaxMessage)}})
	if back, err := wire.DecodeReply(long); err != nil || len(back[0].Message) != wire.MaxMessage {
		t.Fatalf("a long message: %v", err)
	}
	for _, tc := range []struct {
		name  string
		reply []byte
	}{
		{"empty", nil},
		{"short answer", []byte{0, 1, 0, 0}},
		{"short message", appendParts([]byte{0, 1, 0}, int64(0), uint16(5), "ab")},
		{"message over MaxMessage", appendParts([]byte{0, 1, 0}, int64(0), uint16(wire.MaxMessage+1), strings.Repeat("m", wire.MaxMessage+1))},
		{"trailing data", appendParts([]byte{0, 1, 0}, int64(0), uint16(0), uint8(0))},
		{"over MaxAnswers", appendParts(nil, uint16(wire.MaxAnswers+1), make([]byte, 11*(wire.MaxAnswers+1)))},
	} {
		if _, err := wire.DecodeReply(tc.reply); !errors.Is(err, wire.ErrBadFrame) {
			t.Errorf("%s: %v, want ErrBadFrame", tc.name, err)
		}
	}
}

func sampleConsumeReply() *wire.ConsumeReply {
	return &wire.ConsumeReply{Status: wire.StatusOK, Message: "", Deliveries: []wire.Delivery{
		{Partition: 1, Offset: 2, Nonce: 3, Attempt: 1, Reason: 0, Expiry: 100, Timestamp: 50, Fence: 7, Key: []byte("k"), Value: []byte("value")},
		{Partition: 1, Offset: 3, Nonce: 1<<64 - 1, Attempt: 1<<32 - 1, Reason: 255, Fence: 1<<64 - 1, Value: bytes.Repeat([]byte("v"), 1000)},
		{Partition: -1, Offset: -1, Expiry: -1, Timestamp: -1},
	}}
}

// A refusal in the ack reply format (what an older release answers to an op or a field it
// does not know) reads as a consume reply with that status and no deliveries.
func TestConsumeReplyReadsARefusal(t *testing.T) {
	refusal := wire.EncodeReply([]wire.Answer{{Status: wire.StatusBadRequest, Message: "trailing data"}})
	reply, err := wire.DecodeConsumeReply(refusal)
	if err != nil || reply.Status != wire.StatusBadRequest || reply.Message != "trailing data" || reply.Deliveries != nil {
		t.Fatalf("%+v, %v", reply, err)
	}
	for _, bad := range [][]byte{
		wire.EncodeReply([]wire.Answer{{Status: wire.StatusOK}}),
		wire.EncodeReply([]wire.Answer{{Status: wire.StatusGone}, {Status: wire.StatusGone}}),
	} {
		if _, err := wire.DecodeConsumeReply(bad); !errors.Is(err, wire.ErrBadFrame) {
			t.Fatalf("%v, want ErrBadFrame", err)
		}
	}
}

func TestConsumeReplyRoundTrip(t *testing.T) {
	for _, r := range []*wire.ConsumeReply{
		sampleConsumeReply(),
		{Status: wire.StatusUnavailable, Message: "closed"},
		{Status: wire.StatusOK},
	} {
		b := wire.AppendConsumeReply(nil, r)
		size := 2 + 2 + len(r.Message) + 4
		for i := range r.Deliveries {
			size += wire.DeliverySize(&r.Deliveries[i])
		}
		if len(b) != size || cap(b) != size {
			t.Fatalf("%d bytes of capacity %d, want %d", len(b), cap(b), size)
		}
		back, err := wire.DecodeConsumeReply(b)
		if err != nil || !reflect.DeepEqual(&back, r) {
			t.Fatalf("%+v, %v; want %+v", back, err, r)
		}
	}
	// Appended after what dst holds.
	b := wire.AppendConsumeReply([]byte("prefix"), sampleConsumeReply())
	if back, err := wire.DecodeConsumeReply(b[6:]); err != nil || !reflect.DeepEqual(&back, sampleConsumeReply()) || string(b[:6]) != "prefix" {
		t.Fatalf("after a prefix: %v", err)
	}
	// Key and Value alias the frame, each capped at its own length.
	back, _ := wire.DecodeConsumeReply(wire.AppendConsumeReply(nil, sampleConsumeReply()))
	d := back.Deliveries[0]
	_ = append(d.Key, 'X')
	if string(d.Value) != "value" {
		t.Fatalf("appending to a key wrote into the value: %q", d.Value)
	}
	long := wire.AppendConsumeReply(nil, &wire.ConsumeReply{Message: strings.Repeat("m", 2*wire.MaxMessage)})
	if back, err := wire.DecodeConsumeReply(long); err != nil || len(back.Message) != wire.MaxMessage {
		t.Fatalf("a long message: %v", err)
	}
}

// DecodeConsumeReplyInto reads what DecodeConsumeReply reads, its deliveries in dst's
// capacity when it holds them (replacing what dst held) and in a new slice otherwise.
func TestDecodeConsumeReplyInto(t *testing.T) {
	frame := wire.AppendConsumeReply(nil, sampleConsumeReply())
	for _, tc := range []struct {
		name  string
		dst   []wire.Delivery
		alias bool // the deliveries are in dst's array
	}{
		{"nil", nil, false},
		{"room for them", make([]wire.Delivery, 0, 8), true},
		{"room, holding others", []wire.Delivery{{Offset: 99}, {Offset: 98}, {Offset: 97}, {Offset: 96}}, true},
		{"too little room", make([]wire.Delivery, 1, 2), false},
	} {
		dst := tc.dst
		back, err := wire.DecodeConsumeReplyInto(dst, frame)
		if err != nil || !reflect.DeepEqual(&back, sampleConsumeReply()) {
			t.Fatalf("%s: %+v, %v", tc.name, back, err)
		}
		if aliased := cap(dst) > 0 && &dst[:1][0] == &back.Deliveries[0]; aliased != tc.alias {
			t.Errorf("%s: in dst's array %v, want %v", tc.name, aliased, tc.alias)
		}
	}
	// A reply of no deliveries, or a refusal, leaves Deliveries nil; a malformed one is
	// ErrBadFrame and an empty reply.
	for _, b := range [][]byte{
		wire.AppendConsumeReply(nil, &wire.ConsumeReply{Status: wire.StatusOK}),
		wire.EncodeReply([]wire.Answer{{Status: wire.StatusBadRequest, Message: "trailing data"}}),
	} {
		if back, err := wire.DecodeConsumeReplyInto(make([]wire.Delivery, 2, 8), b); err != nil || back.Deliveries != nil {
			t.Fatalf("no deliveries: %+v, %v", back, err)
		}
	}
	if back, err := wire.DecodeConsumeReplyInto(make([]wire.Delivery, 0, 8), frame[:len(frame)-1]); !errors.Is(err, wire.ErrBadFrame) || back.Deliveries != nil {
		t.Fatalf("cut short: %+v, %v", back, err)
	}
}

func TestDecodeConsumeReplyRefuses(t *testing.T) {
	good := wire.AppendConsumeReply(nil, sampleConsumeReply())
	for _, tc := range []struct {
		name  string
		reply []byte
	}{
		{"empty", nil},
		{"short header", []byte{0, 0, 0, 0, 0, 0}},
		{"cut short", good[:len(good)-1]},
		{"trailing data", append(append([]byte(nil), good...), 0)},
		{"message over MaxMessage", appendParts([]byte{0}, uint16(wire.MaxMessage+1), strings.Repeat("m", wire.MaxMessage+1), uint32(0))},
		{"count over its bytes", appendParts([]byte{0}, uint16(0), uint32(2), good[7:])},
		{"value longer than the frame", appendParts([]byte{0}, uint16(0), uint32(1), make([]byte, 49), uint32(0), uint32(1))},
		{"over MaxFrame", appendParts([]byte{0}, uint16(0), uint32(1), make([]byte, 49), uint32(0), uint32(wire.MaxFrame), make([]byte, wire.MaxFrame))},
	} {
		if _, err := wire.DecodeConsumeReply(tc.reply); !errors.Is(err, wire.ErrBadFrame) {
			t.Errorf("%s: %v, want ErrBadFrame", tc.name, err)
		}
	}
}

func TestTimes(t *testing.T) {
	if wire.Nanos(time.Time{}) != 0 || !wire.Time(0).IsZero() {
		t.Fatal("the zero time is 0")
	}
	now := time.Unix(0, 1234567890123)
	if got := wire.Time(wire.Nanos(now)); !got.Equal(now) {
		t.Fatalf("%v, want %v", got, now)
	}
}

// FuzzDecodeRequest: the request decoder never panics and refuses with ErrBadFrame or
// ErrUnsupportedOp (the latter exactly when the version does not know the op); a frame
// accepted at a version is accepted, the same, at every newer one; what it accepts encodes
// back to a frame that decodes the same, accepted from the version it needs on and refused
// by the version before.
func FuzzDecodeRequest(f *testing.F) {
	for _, req := range samples() {
		f.Add(mustEncode(f, req))
	}
	consume := appendParts(nil, uint64(1), int32(-1), int64(0))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(0)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(2)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(1), int32(1)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(1)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(1), int32(0), uint8(1)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(0), int32(9), uint8(0)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(1), int32(9), uint8(3)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(1), uint8(1)))
	rec := appendParts(nil, int32(1), int64(2), uint64(3), int64(0))
	f.Add(frame(wire.OpRelease, "t", rec))
	f.Add(frame(wire.OpExtendLeft, "t", rec))
	f.Add(frame(wire.OpAckDurable, "t", rec, uint8(0)))
	f.Add(frame(wire.OpAckBatch, "t", uint16(3), uint8(12), rec, int64(1), uint8(13), rec, int64(2), uint8(14), rec, int64(3)))
	f.Add(frame(wire.OpAckBatch, "t", uint16(1), uint8(15), rec, int64(1)))
	f.Add(frame(wire.OpReject, "t", rec))
	f.Add(frame(wire.OpReject, "t", rec, uint8(0)))
	f.Add(frame(wire.OpAckBatch, "t", uint16(2), uint8(16), rec, int64(1), uint8(1), rec, int64(2)))
	f.Add(frame(wire.OpAckBatch, "t", uint16(1), uint8(17), rec, int64(1)))
	f.Add([]byte{17, 0, 0})
	// Version 11's: Confirm, single and batched, and the Reserve flag (bit 2), with the
	// bit above it that no version knows.
	f.Add(frame(wire.OpConfirm, "t", rec))
	f.Add(frame(wire.OpConfirm, "t", rec, uint8(0)))
	f.Add(frame(wire.OpAckBatch, "t", uint16(3), uint8(17), rec, int64(1), uint8(12), rec, int64(2), uint8(16), rec, int64(3)))
	f.Add(frame(wire.OpAckBatch, "t", uint16(1), uint8(18), rec, int64(1)))
	f.Add([]byte{18, 0, 0})
	f.Add(frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(4)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(1), int32(9), uint8(6)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(0xc)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(0), int32(0), uint8(4)))
	f.Add(frame(wire.OpConsumeBatch, "t", uint16(2), member(0, 1, 4, time.Second), member(1, 3, 7, time.Second)))
	f.Add(frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 1, 0xc, time.Second)))
	f.Add([]byte{15, 0, 0})
	f.Add(frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(2)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(1), int32(9), uint8(7)))
	f.Add(frame(wire.OpConsumeBatch, "t", uint16(2), member(0, 1, 2, time.Second), member(1, 3, 3, time.Second)))
	f.Add(frame(wire.OpReplay, "t", int32(0), int64(0), int32(1), uint8(2)))
	f.Add(frame(wire.OpReplay, "t", int32(0), int64(0), int32(1), uint8(1)))
	f.Add(frame(wire.OpRegister, "", uint16(0xffff), uint16(1), "t", int64(1)))
	f.Add([]byte{})
	f.Add([]byte{wire.OpAckBatch, 0, 0, 0, 0})
	f.Add([]byte{200, 0, 1, 'x'})
	// Version 12's: Status and Purge, and bodies out of order, short or hostile.
	f.Add(frame(wire.OpStatus, "t", uint16(2), int32(0), int32(5)))
	f.Add(frame(wire.OpPurge, "t", uint16(1), int32(3)))
	f.Add(frame(wire.OpStatus, "t", uint16(2), int32(5), int32(5)))
	f.Add(frame(wire.OpPurge, "t", uint16(1), int32(-1)))
	f.Add(frame(wire.OpStatus, "t", uint16(0xffff), int32(1)))
	f.Add([]byte{19, 0, 0})
	// Version 14's: NackNow alone, batched beside a nack, with trailing data, and short.
	f.Add(frame(wire.OpNackNow, "t", rec))
	f.Add(frame(wire.OpNackNow, "t", rec, uint8(0)))
	f.Add(frame(wire.OpAckBatch, "t", uint16(2), uint8(20), rec, int64(1), uint8(3), rec, int64(2)))
	f.Add(frame(wire.OpAckBatch, "t", uint16(1), uint8(21), rec, int64(1)))
	f.Add([]byte{20, 0, 0})
	// Version 15's: a Status's flags byte, an unknown flag, and on a purge.
	f.Add(frame(wire.OpStatus, "t", uint16(1), int32(0), uint8(1)))
	f.Add(frame(wire.OpStatus, "t", uint16(1), int32(0), uint8(2)))
	f.Add(frame(wire.OpPurge, "t", uint16(1), int32(0), uint8(1)))
	// Version 16's: plain acks in their compact form, alone and after a Consume's flags
	// byte, and bodies short, hostile or past the count.
	f.Add(mustEncode(f, plainAcks(12, time.Second)))
	f.Add(frame(wire.OpAcks, "t", uint16(2), int64(1), uv(3), uv(2), uv(9), uint64(1), sv(-9), uint64(2)))
	f.Add(frame(wire.OpAcks, "t", uint16(1), int64(1), uv(3), uv(2), uv(9), uint64(1)))
	f.Add(frame(wire.OpAcks, "t", uint16(0xffff), int64(1), uv(0), uv(0xffff)))
	f.Add(frame(wire.OpAcks, "t", uint16(2), int64(1), uv(1), uv(1), uv(1<<63-1), uint64(1), uv(1), uv(1), uv(0), uint64(1)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(0), int32(5), uint8(0xd), uint16(1), int64(1), uv(0), uv(1), uv(4), uint64(1)))
	f.Add(frame(wire.OpConsume, "t", consume, uint8(1), int32(1), uint8(8), uint16(1), int64(1), uv(0), uv(1), uv(4), uint64(1)))
	f.Add(frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 1, 8, time.Second), uint16(1), int64(1), uv(0), uv(1), uv(4), uint64(1)))
	f.Add([]byte{21, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		var accepted *wire.Request
		first := wire.Version(0)
		for _, v := range versions {
			req, err := wire.DecodeRequest(frame, v)
			requireDecodeAcksAgrees(t, frame, v, req, err)
			if err != nil {
				if !errors.Is(err, wire.ErrBadFrame) && !errors.Is(err, wire.ErrUnsupportedOp) {
					t.Fatalf("v%d: untyped error %v", v, err)
				}
				unsupported := len(frame) >= 3 && len(frame) <= wire.MaxFrame && !v.Knows(frame[0])
				if errors.Is(err, wire.ErrUnsupportedOp) != unsupported {
					t.Fatalf("v%d, op %d: %v", v, frame[0], err)
				}
				if accepted != nil {
					t.Fatalf("accepted at v%d, refused at v%d: %v", first, v, err)
				}
				continue
			}
			if accepted == nil {
				accepted, first = &req, v
			} else if !reflect.DeepEqual(req, *accepted) {
				t.Fatalf("v%d decodes %+v, v%d %+v", v, req, first, *accepted)
			}
		}
		if accepted == nil {
			return
		}
		need := accepted.MinVersion()
		if need > first {
			t.Fatalf("accepted at v%d, needs v%d", first, need)
		}
		again, err := wire.EncodeRequest(*accepted)
		if err != nil {
			t.Fatalf("a decoded frame does not encode: %v", err)
		}
		for _, v := range versions {
			req, err := wire.DecodeRequest(again, v)
			if (err == nil) != (v >= need) {
				t.Fatalf("the re-encoded frame needing v%d, at v%d: %v", need, v, err)
			}
			if err == nil && !reflect.DeepEqual(req, *accepted) {
				t.Fatalf("re-encoded frame decodes to %+v; want %+v", req, *accepted)
			}
		}
	})
}

// FuzzDecodeReply: the ack reply decoder never panics, refuses with ErrBadFrame, and what it
// accepts encodes back to the same bytes.
func FuzzDecodeReply(f *testing.F) {
	f.Add(wire.EncodeReply([]wire.Answer{{Status: wire.StatusOK, Expiry: 1}, {Status: wire.StatusGone, Message: "x"}}))
	f.Add(wire.EncodeReply([]wire.Answer{{Status: wire.StatusPass}}))
	f.Add(wire.EncodeReply(nil))
	f.Add([]byte{0, 1})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, frame []byte) {
		answers, err := wire.DecodeReply(frame)
		if err != nil {
			if !errors.Is(err, wire.ErrBadFrame) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !bytes.Equal(wire.EncodeReply(answers), frame) {
			t.Fatalf("re-encoded reply differs")
		}
	})
}

// FuzzDecodeConsumeBatchReply: the consume batch reply decoder never panics, refuses with
// ErrBadFrame, accepts exactly count members or a refusal of the whole frame, and what it
// accepts, members read back by DecodeConsumeReply, encodes back to the same bytes.
func FuzzDecodeConsumeBatchReply(f *testing.F) {
	two := wire.BeginConsumeBatchReply(nil, 2)
	two = wire.AppendConsumeBatchMember(two, sampleConsumeReply())
	two = wire.AppendConsumeBatchMember(two, &wire.ConsumeReply{Status: wire.StatusUnavailable, Message: "closed"})
	f.Add(two, uint8(2))
	f.Add(wire.AppendConsumeBatchMember(wire.BeginConsumeBatchReply(nil, 1), &wire.ConsumeReply{}), uint8(1))
	f.Add(wire.EncodeReply([]wire.Answer{{Status: wire.StatusUnsupported, Message: "op 15"}}), uint8(3))
	f.Add([]byte{0xC6, 0, 1, 0, 0, 0, 8, 0xC5, 0, 0, 0, 0, 0, 0, 0}, uint8(1))
	f.Add([]byte{}, uint8(0))
	withHeaders := wire.BeginConsumeBatchReply(nil, 2)
	withHeaders = wire.AppendConsumeBatchMember(withHeaders, headersConsumeReply())
	withHeaders = wire.AppendConsumeBatchMember(withHeaders, sampleConsumeReply())
	f.Add(withHeaders, uint8(2))
	f.Fuzz(func(t *testing.T, frame []byte, count uint8) {
		reply, err := wire.DecodeConsumeBatchReply(frame, int(count))
		if err != nil {
			if !errors.Is(err, wire.ErrBadFrame) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if reply.Members == nil {
			if frame[0] == 0xC6 || reply.Refusal.Status == wire.StatusOK {
				t.Fatalf("a refusal read as %+v", reply)
			}
			return
		}
		if len(reply.Members) != int(count) {
			t.Fatalf("%d members for %d consumes", len(reply.Members), count)
		}
		again := wire.BeginConsumeBatchReply(nil, len(reply.Members))
		for _, raw := range reply.Members {
			member, err := wire.DecodeConsumeReply(raw)
			if err != nil {
				return // a member the consume reply decoder refuses: the caller's to answer
			}
			again = wire.AppendConsumeBatchMember(again, &member)
		}
		if !bytes.Equal(again, frame) {
			t.Fatalf("re-encoded reply differs")
		}
	})
}

// FuzzDecodeConsumeReply: the consume reply decoder never panics, refuses with ErrBadFrame,
// and what it accepts encodes back to the same bytes.
func FuzzDecodeConsumeReply(f *testing.F) {
	f.Add(wire.AppendConsumeReply(nil, sampleConsumeReply()))
	f.Add(wire.AppendConsumeReply(nil, &wire.ConsumeReply{Status: wire.StatusUnavailable, Message: "closed"}))
	f.Add([]byte{0xC5, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add(wire.EncodeReply([]wire.Answer{{Status: wire.StatusUnsupported, Message: "op 5"}}))
	f.Add([]byte{})
	// Version 9's: headers after each value, and hostile header counts and lengths.
	f.Add(wire.AppendConsumeReply(nil, headersConsumeReply()))
	f.Add(wire.AppendConsumeReply(nil, &wire.ConsumeReply{Deliveries: []wire.Delivery{{Headers: []wire.Header{{Key: "k"}}}}}))
	for _, tail := range hostileHeaders() {
		f.Add(tail.reply)
	}
	// Version 16's compact replies, and hostile ones.
	for _, r := range []*wire.ConsumeReply{sampleConsumeReply(), headersConsumeReply(), {Status: wire.StatusUnavailable, Message: "closed"}} {
		r.Compact = true
		f.Add(wire.AppendConsumeReply(nil, r))
	}
	for _, bad := range hostileCompactReplies() {
		f.Add(bad.reply)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		reply, err := wire.DecodeConsumeReply(frame)
		// Into a slice that holds a delivery already: the same reply, or the same error.
		into, intoErr := wire.DecodeConsumeReplyInto(make([]wire.Delivery, 1, 4), frame)
		if (err == nil) != (intoErr == nil) || (err == nil && !reflect.DeepEqual(into, reply)) {
			t.Fatalf("into a slice: %+v, %v; alone: %+v, %v", into, intoErr, reply, err)
		}
		if err != nil {
			if !errors.Is(err, wire.ErrBadFrame) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if frame[0] != 0xC5 && frame[0] != 0xC7 && frame[0] != 0xCA && frame[0] != 0xCB {
			// A refusal in the ack reply format: one answer, never a delivery.
			if reply.Status == wire.StatusOK || len(reply.Deliveries) != 0 {
				t.Fatalf("a refusal read as %+v", reply)
			}
			return
		}
		if !bytes.Equal(wire.AppendConsumeReply(nil, &reply), frame) {
			t.Fatalf("re-encoded reply differs")
		}
	})
}

// Version 9's frames, laid out by hand: the Headers flag is bit 1 of a Consume's flags byte
// (and of a ConsumeBatch member's), and a Replay's flags byte follows its limit.
func TestV9Frames(t *testing.T) {
	consume := appendParts(nil, uint64(7), int32(-1), int64(time.Second))
	for _, tc := range []struct {
		name string
		req  wire.Request
		want []byte
	}{
		{"headers", wire.Request{Op: wire.OpConsume, Topic: "t", Consume: wire.Consume{RequestID: 7, Pinned: -1, Visibility: time.Second, Max: 1, Headers: true}},
			frame(wire.OpConsume, "t", consume, uint8(0), int32(1), uint8(2))},
		{"headers and relative expiry", wire.Request{Op: wire.OpConsume, Topic: "t", Consume: wire.Consume{RequestID: 7, Pinned: -1, Visibility: time.Second, Claim: true, Max: 3, RelativeExpiry: true, Headers: true}},
			frame(wire.OpConsume, "t", consume, uint8(1), int32(3), uint8(3))},
		{"batch member with headers", wire.Request{Op: wire.OpConsumeBatch, Topic: "t", Consumes: []wire.Consume{{RequestID: 1, Pinned: -1, Max: 1, Headers: true, Budget: time.Second}}},
			frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 1, 2, time.Second))},
		{"replay with headers", wire.Request{Op: wire.OpReplay, Topic: "t", Replay: wire.Replay{Partition: 1, Offset: 2, Limit: 3, Headers: true}},
			frame(wire.OpReplay, "t", int32(1), int64(2), int32(3), uint8(2))},
	} {
		if got := mustEncode(t, tc.req); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: % x, want % x", tc.name, got, tc.want)
		}
		if need := tc.req.MinVersion(); need != wire.V9 {
			t.Errorf("%s needs v%d", tc.name, need)
		}
		if back, err := wire.DecodeRequest(tc.want, wire.V9); err != nil || !reflect.DeepEqual(back, tc.req) {
			t.Errorf("%s reads back as %+v, %v", tc.name, back, err)
		}
	}
	// A replay without headers is byte for byte the V3 frame.
	plain := mustEncode(t, wire.Request{Op: wire.OpReplay, Topic: "t", Replay: wire.Replay{Partition: 1, Offset: 2, Limit: 3}})
	if want := frame(wire.OpReplay, "t", int32(1), int64(2), int32(3)); !bytes.Equal(plain, want) {
		t.Fatalf("a replay without headers: % x, want % x", plain, want)
	}
}

// headersConsumeReply is a consume reply whose deliveries carry headers: several, none,
// duplicated keys, empty keys and values, a long value.
func headersConsumeReply() *wire.ConsumeReply {
	return &wire.ConsumeReply{Status: wire.StatusOK, Deliveries: []wire.Delivery{
		{Partition: 1, Offset: 2, Nonce: 3, Attempt: 1, Key: []byte("k"), Value: []byte("value"), Headers: []wire.Header{
			{Key: "trace-id", Value: []byte("abc")}, {Key: "retry", Value: []byte{0xff, 0}}, {Key: "retry", Value: []byte("2")},
		}},
		{Partition: 1, Offset: 3, Nonce: 4, Value: []byte("no headers")},
		{Partition: 2, Offset: 0, Nonce: 5, Headers: []wire.Header{{Key: ""}, {Key: "big", Value: bytes.Repeat([]byte("h"), 1000)}}},
	}}
}

// Headers travel after each value in a reply opening with the headers mark, and read back
// as written: keys copied, values aliasing the frame, capped; a reply of deliveries without
// headers is byte for byte the reply before V9.
func TestConsumeReplyHeadersRoundTrip(t *testing.T) {
	r := headersConsumeReply()
	b := wire.AppendConsumeReply(nil, r)
	size := 2 + 2 + 4 + 4 // the fields before the deliveries, and the second's count of none
	for i := range r.Deliveries {
		size += wire.DeliverySize(&r.Deliveries[i])
	}
	if b[0] != 0xC7 || len(b) != size || cap(b) != size {
		t.Fatalf("mark %#x, %d bytes of capacity %d, want 0xC7 and %d", b[0], len(b), cap(b), size)
	}
	back, err := wire.DecodeConsumeReply(b)
	if err != nil || !reflect.DeepEqual(&back, r) {
		t.Fatalf("%+v, %v; want %+v", back, err, r)
	}
	hs := back.Deliveries[0].Headers
	_ = append(hs[0].Value, 'X')
	if string(hs[1].Value) != "\xff\x00" {
		t.Fatalf("appending to a header value wrote into the next: %q", hs[1].Value)
	}
	// The same deliveries without headers: the V8 reply, mark 0xC5, nothing after values.
	plain := *r
	plain.Deliveries = slices.Clone(r.Deliveries)
	for i := range plain.Deliveries {
		plain.Deliveries[i].Headers = nil
	}
	old := wire.AppendConsumeReply(nil, &plain)
	want := appendParts([]byte{0xC5, 0}, uint16(0), uint32(3))
	for _, d := range plain.Deliveries {
		want = appendParts(want, d.Partition, d.Offset, d.Nonce, d.Attempt, d.Reason, d.Expiry, d.Fence, d.Timestamp,
			uint32(len(d.Key)), d.Key, uint32(len(d.Value)), d.Value)
	}
	if !bytes.Equal(old, want) {
		t.Fatalf("a reply without headers: % x\nwant the V8 reply % x", old, want)
	}
	if back, err := wire.DecodeConsumeReply(want); err != nil || !reflect.DeepEqual(back, plain) {
		t.Fatalf("the V8 reply reads back as %+v, %v", back, err)
	}
	// In a batch's reply too.
	batch := wire.AppendConsumeBatchMember(wire.BeginConsumeBatchReply(nil, 1), r)
	members, err := wire.DecodeConsumeBatchReply(batch, 1)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := wire.DecodeConsumeReply(members.Members[0]); err != nil || !reflect.DeepEqual(&back, r) {
		t.Fatalf("a batch member with headers: %+v, %v", back, err)
	}
}

// hostileHeaders are consume replies with headers whose counts or lengths their bytes
// cannot hold, or whose form is not the encoder's.
func hostileHeaders() []struct {
	name  string
	reply []byte
} {
	delivery := make([]byte, 48) // a delivery's fixed fields, up to its key's length
	one := func(tail ...any) []byte {
		return appendParts([]byte{0xC7, 0}, uint16(0), uint32(1), delivery, uint32(0), uint32(0), appendParts(nil, tail...))
	}
	return []struct {
		name  string
		reply []byte
	}{
		{"a header count of 2^32-1", one(uint32(0xffffffff), make([]byte, 64))},
		{"a header count over its bytes", one(uint32(3), uint32(0), uint32(0), uint32(0), uint32(0))},
		{"a header key length of 2^32-1", one(uint32(1), uint32(0xffffffff), uint32(0))},
		{"a header value length of 2^32-1", one(uint32(1), uint32(1), "k", uint32(0xffffffff))},
		{"a header value longer than the frame", one(uint32(1), uint32(1), "k", uint32(2), "v")},
		{"a short header", one(uint32(1), uint32(1), "k")},
		{"no header count", one()},
		{"the headers mark and no headers", one(uint32(0))},
		{"trailing after the headers", one(uint32(1), uint32(1), "k", uint32(0), uint8(0))},
		{"headers after the plain mark", appendParts([]byte{0xC5, 0}, uint16(0), uint32(1), delivery, uint32(0), uint32(0), uint32(1), uint32(1), "k", uint32(0))},
	}
}

// Hostile header counts and lengths are refused with ErrBadFrame, never a panic, and
// allocate nothing in proportion to what they claim.
func TestDecodeConsumeReplyRefusesHostileHeaders(t *testing.T) {
	for _, tc := range hostileHeaders() {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := wire.DecodeConsumeReply(tc.reply); !errors.Is(err, wire.ErrBadFrame) {
				t.Fatalf("%v, want ErrBadFrame", err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			const runs = 100
			for range runs {
				_, _ = wire.DecodeConsumeReply(tc.reply)
			}
			runtime.ReadMemStats(&after)
			if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 1<<10 {
				t.Fatalf("%d bytes allocated per decode", per)
			}
		})
	}
}
