package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/wire"
)

// uv and sv are a uvarint and a zigzag varint, laid out for frame.
func uv(x uint64) []byte { return binary.AppendUvarint(nil, x) }
func sv(x int64) []byte  { return binary.AppendVarint(nil, x) }

// The frames version 16 adds, laid out by hand: an Acks frame (op 21) of records in runs of
// one partition, offsets after a run's first as differences, one budget; the same body
// after a Consume's flags byte with bit 3 set; and bit 4 of a Consume's (or a member's)
// flags byte, asking for the compact reply. Each is read from V16 on and refused by
// V15 as its release answers it: the op unknown (ErrUnsupportedOp), the flag unknown
// (ErrBadFrame).
func TestV16Frames(t *testing.T) {
	recs := []wire.Record{
		{Op: wire.OpAck, Handle: wire.Handle{Partition: 2, Offset: 10, Nonce: 7}, Budget: time.Second},
		{Op: wire.OpAck, Handle: wire.Handle{Partition: 2, Offset: 12, Nonce: 8}, Budget: time.Second},
		{Op: wire.OpAck, Handle: wire.Handle{Partition: 2, Offset: 11, Nonce: 9}, Budget: time.Second},
		{Op: wire.OpAck, Handle: wire.Handle{Partition: 300, Offset: 5, Nonce: 1<<64 - 1}, Budget: time.Second},
	}
	body := appendParts(nil, uint16(4), int64(time.Second),
		uv(2), uv(3), uv(10), uint64(7), sv(2), uint64(8), sv(-1), uint64(9),
		uv(300), uv(1), uv(5), uint64(1<<64-1))
	consume := appendParts(nil, uint64(7), int32(-1), int64(0))
	for _, tc := range []struct {
		name  string
		req   wire.Request
		want  []byte
		older error
	}{
		{"acks", wire.Request{Op: wire.OpAcks, Topic: "orders", Records: recs}, frame(21, "orders", body), wire.ErrUnsupportedOp},
		{"a consume's acks", wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 7, Pinned: -1, Max: 1024, RelativeExpiry: true, Reserve: true}, Records: recs},
			frame(wire.OpConsume, "orders", consume, uint8(0), int32(1024), uint8(1|4|8), body), wire.ErrBadFrame},
		{"acks alone on a consume", wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 7, Pinned: -1, Max: 1}, Records: recs},
			frame(wire.OpConsume, "orders", consume, uint8(0), int32(1), uint8(8), body), wire.ErrBadFrame},
		{"a compact reply asked for", wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 7, Pinned: -1, Max: 1, Compact: true}},
			frame(wire.OpConsume, "orders", consume, uint8(0), int32(1), uint8(0x10)), wire.ErrBadFrame},
		{"a compact member", wire.Request{Op: wire.OpConsumeBatch, Topic: "orders", Consumes: []wire.Consume{{RequestID: 7, Pinned: -1, Max: 1, Compact: true, Budget: time.Second}}},
			frame(wire.OpConsumeBatch, "orders", uint16(1), consume, uint8(0), int32(1), uint8(0x10), int64(time.Second)), wire.ErrBadFrame},
	} {
		if got := mustEncode(t, tc.req); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: % x, want % x", tc.name, got, tc.want)
		}
		if need := tc.req.MinVersion(); need != wire.V16 {
			t.Errorf("%s needs v%d", tc.name, need)
		}
		got, err := wire.DecodeRequest(tc.want, wire.V16)
		if err != nil || !reflect.DeepEqual(got, tc.req) {
			t.Errorf("%s reads back as %+v, %v", tc.name, got, err)
		}
		if _, err := wire.DecodeRequest(tc.want, wire.V15); !errors.Is(err, tc.older) {
			t.Errorf("%s at v15: %v, want %v", tc.name, err, tc.older)
		}
	}
}

// The compact form is about ten bytes a plain ack of a consume's batch (offsets one apart,
// one partition): a third of an AckBatch's 37.
func TestAcksAreCompact(t *testing.T) {
	req := wire.Request{Op: wire.OpAcks, Topic: "orders", Records: make([]wire.Record, 100)}
	for i := range req.Records {
		req.Records[i] = wire.Record{Op: wire.OpAck, Handle: wire.Handle{Partition: 3, Offset: 1_000_000 + int64(i), Nonce: uint64(i) << 40}, Budget: time.Second}
	}
	compact := mustEncode(t, req)
	req.Op = wire.OpAckBatch
	batch := mustEncode(t, req)
	if per := float64(len(compact)) / 100; per > 9.3 {
		t.Errorf("%.1f bytes a plain ack", per)
	}
	if per := float64(len(batch)) / 100; per < 37 {
		t.Errorf("the AckBatch takes %.1f bytes a record", per)
	}
}

// Malformed compact acks are ErrBadFrame, alone and after a Consume's flags byte; an acks
// flag on a ConsumeBatch member too (acks ride in a Consume alone).
func TestDecodeAcksRefuses(t *testing.T) {
	budget := int64(time.Second)
	one := appendParts(nil, uv(0), uv(1), uv(5), uint64(1))
	consume := appendParts(nil, uint64(1), int32(-1), int64(0), uint8(0), int32(1), uint8(8))
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"none", appendParts(nil, uint16(0), budget)},
		{"over MaxLargeBatch", appendParts(nil, uint16(wire.MaxLargeBatch+1), budget, bytes.Repeat(one, wire.MaxLargeBatch+1))},
		{"a count over its bytes", appendParts(nil, uint16(2), budget, one)},
		{"a budget of 0", appendParts(nil, uint16(1), int64(0), one)},
		{"a negative budget", appendParts(nil, uint16(1), int64(-1), one)},
		{"a short budget", appendParts(nil, uint16(1), uint32(1))},
		{"a run of none", appendParts(nil, uint16(1), budget, uv(0), uv(0), uv(5), uint64(1), uint8(0))},
		{"a run past the count", appendParts(nil, uint16(1), budget, uv(0), uv(2), uv(5), uint64(1), sv(1), uint64(2))},
		{"a partition over 31 bits", appendParts(nil, uint16(1), budget, uv(1<<31), uv(1), uv(5), uint64(1))},
		{"an offset over 63 bits", appendParts(nil, uint16(1), budget, uv(0), uv(1), uv(1<<63), uint64(1))},
		{"an offset below zero", appendParts(nil, uint16(2), budget, uv(0), uv(2), uv(5), uint64(1), sv(-6), uint64(2))},
		{"an offset past 63 bits", appendParts(nil, uint16(2), budget, uv(0), uv(2), uv(1<<63-1), uint64(1), sv(1), uint64(2))},
		{"a uvarint over 64 bits", appendParts(nil, uint16(1), budget, bytes.Repeat([]byte{0xff}, 10), uint8(1), uv(1), uv(5), uint64(1))},
		{"a short varint", appendParts(nil, uint16(1), budget, uv(0), uv(1), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80})},
		{"a short nonce", appendParts(nil, uint16(1), budget, uv(0), uv(1), uv(5), uint32(1), uint16(0), uint8(0))},
		{"trailing data", appendParts(nil, uint16(1), budget, one, uint8(0))},
	} {
		for _, f := range [][]byte{frame(wire.OpAcks, "t", tc.body), frame(wire.OpConsume, "t", consume, tc.body)} {
			if req, err := wire.DecodeRequest(f, wire.Newest); !errors.Is(err, wire.ErrBadFrame) {
				t.Errorf("%s (op %d): %+v, %v", tc.name, f[0], req, err)
			}
		}
	}
	batch := frame(wire.OpConsumeBatch, "t", uint16(1), member(0, 1, 8, time.Second))
	if _, err := wire.DecodeRequest(batch, wire.Newest); !errors.Is(err, wire.ErrBadFrame) || !strings.Contains(err.Error(), "flags byte") {
		t.Errorf("a ConsumeBatch member's acks flag: %v", err)
	}
}

// Records the compact form cannot carry are refused by the encoder, as the decoder would
// refuse their frame.
func TestEncodeRequestRefusesWhatAcksCannotCarry(t *testing.T) {
	ack := wire.Record{Op: wire.OpAck, Handle: wire.Handle{Partition: 1, Offset: 2, Nonce: 3}, Budget: time.Second}
	edit := func(f func(r *wire.Record)) []wire.Record {
		second := ack
		f(&second)
		return []wire.Record{ack, second}
	}
	for name, records := range map[string][]wire.Record{
		"none":                  nil,
		"too many":              plainAcks(wire.MaxLargeBatch+1, time.Second).Records,
		"an extend":             edit(func(r *wire.Record) { r.Op, r.Arg = wire.OpExtend, time.Second }),
		"a confirm":             edit(func(r *wire.Record) { r.Op = wire.OpConfirm }),
		"an argument":           edit(func(r *wire.Record) { r.Arg = 1 }),
		"two budgets":           edit(func(r *wire.Record) { r.Budget = 2 * time.Second }),
		"a budget of 0":         {{Op: wire.OpAck, Handle: ack.Handle}},
		"a negative partition":  edit(func(r *wire.Record) { r.Handle.Partition = -1 }),
		"a negative offset":     edit(func(r *wire.Record) { r.Handle.Offset = -1 }),
		"a zero budget, second": edit(func(r *wire.Record) { r.Budget = 0 }),
	} {
		if _, err := wire.EncodeRequest(wire.Request{Op: wire.OpAcks, Topic: "t", Records: records}); !errors.Is(err, wire.ErrInvalidRequest) {
			t.Errorf("acks, %s: %v", name, err)
		}
		if len(records) == 0 {
			continue // a Consume without records carries no acks
		}
		req := wire.Request{Op: wire.OpConsume, Topic: "t", Consume: wire.Consume{Pinned: -1}, Records: records}
		if _, err := wire.EncodeRequest(req); !errors.Is(err, wire.ErrInvalidRequest) {
			t.Errorf("a consume's acks, %s: %v", name, err)
		}
	}
}

// An acks reply, laid out by hand: the count applied, the count not, then each of those
// with its index, status and message; read back with the applied ones StatusOK, and what
// follows it (a consume reply) left for its own decoder.
func TestAcksReplyRoundTrip(t *testing.T) {
	failed := []wire.Failed{
		{Index: 1, Answer: wire.Answer{Status: wire.StatusGone, Message: "gone"}},
		{Index: 4, Answer: wire.Answer{Status: wire.StatusSettled}},
	}
	got := wire.AppendAcksReply(nil, 5, failed)
	want := []byte{0xC9, 0, 3, 0, 2, 0, 1, wire.StatusGone, 0, 4, 'g', 'o', 'n', 'e', 0, 4, wire.StatusSettled, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("% x, want % x", got, want)
	}
	consume := wire.AppendConsumeReply(nil, sampleConsumeReply())
	for _, rest := range [][]byte{nil, consume} {
		reply, err := wire.DecodeAcksReply(make([]wire.Answer, 2), append(slicesClone(got), rest...), 5)
		if err != nil || reply.Refused || !bytes.Equal(reply.Rest, rest) {
			t.Fatalf("%+v, %v", reply, err)
		}
		wantAnswers := []wire.Answer{{}, {Status: wire.StatusGone, Message: "gone"}, {}, {}, {Status: wire.StatusSettled}}
		if !reflect.DeepEqual(reply.Answers, wantAnswers) {
			t.Fatalf("%+v", reply.Answers)
		}
	}
	all := wire.AppendAcksReply(nil, 3, nil)
	if reply, err := wire.DecodeAcksReply(nil, all, 3); err != nil || len(reply.Answers) != 3 || !bytes.Equal(all, []byte{0xC9, 0, 3, 0, 0}) {
		t.Fatalf("% x: %+v, %v", all, reply, err)
	}
	refusal := wire.EncodeReply([]wire.Answer{{Status: wire.StatusUnsupported, Message: "op 21"}})
	reply, err := wire.DecodeAcksReply(nil, refusal, 5)
	if err != nil || !reply.Refused || reply.Refusal.Status != wire.StatusUnsupported || reply.Answers != nil {
		t.Fatalf("a refusal: %+v, %v", reply, err)
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// A malformed acks reply is ErrBadFrame.
func TestDecodeAcksReplyRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply []byte
		count int
	}{
		{"empty", nil, 1},
		{"short counts", []byte{0xC9, 0, 1, 0}, 1},
		{"counts short of the acks", []byte{0xC9, 0, 1, 0, 0}, 2},
		{"counts past the acks", []byte{0xC9, 0, 2, 0, 0}, 1},
		{"a failure short", []byte{0xC9, 0, 0, 0, 1, 0, 0, 2}, 1},
		{"a failure's index past the acks", []byte{0xC9, 0, 0, 0, 1, 0, 1, 2, 0, 0}, 1},
		{"indexes repeated", []byte{0xC9, 0, 0, 0, 2, 0, 0, 2, 0, 0, 0, 0, 2, 0, 0}, 2},
		{"indexes descending", []byte{0xC9, 0, 0, 0, 2, 0, 1, 2, 0, 0, 0, 0, 2, 0, 0}, 2},
		{"a failure of status OK", []byte{0xC9, 0, 0, 0, 1, 0, 0, 0, 0, 0}, 1},
		{"a message past the reply", []byte{0xC9, 0, 0, 0, 1, 0, 0, 2, 0, 5, 'x'}, 1},
		{"a message over MaxMessage", append([]byte{0xC9, 0, 0, 0, 1, 0, 0, 2, 0xff, 0xff}, make([]byte, 0xffff)...), 1},
		{"a refusal of two answers", wire.EncodeReply([]wire.Answer{{Status: 4}, {Status: 4}}), 2},
		{"a refusal of status OK", wire.EncodeReply([]wire.Answer{{}}), 1},
		{"a malformed refusal", []byte{0, 1, 4}, 1},
		{"over MaxLargeBatch", []byte{0xC9, 0xff, 0xff, 0, 0}, 0xffff},
	} {
		if reply, err := wire.DecodeAcksReply(nil, tc.reply, tc.count); !errors.Is(err, wire.ErrBadFrame) {
			t.Errorf("%s: %+v, %v", tc.name, reply, err)
		}
	}
}

// FuzzDecodeAcksReply: the acks reply decoder never panics, refuses with ErrBadFrame,
// answers count acks or reads a refusal, and what it accepts encodes back to the same bytes.
func FuzzDecodeAcksReply(f *testing.F) {
	f.Add(wire.AppendAcksReply(nil, 5, []wire.Failed{{Index: 1, Answer: wire.Answer{Status: wire.StatusGone, Message: "gone"}}, {Index: 4, Answer: wire.Answer{Status: wire.StatusUnavailable}}}), uint16(5))
	f.Add(wire.AppendAcksReply(nil, 100, nil), uint16(100))
	f.Add(wire.AppendConsumeReply(wire.AppendAcksReply(nil, 2, nil), sampleConsumeReply()), uint16(2))
	f.Add(wire.EncodeReply([]wire.Answer{{Status: wire.StatusUnsupported, Message: "op 21"}}), uint16(3))
	f.Add([]byte{0xC9, 0, 0, 0, 2, 0, 1, 2, 0, 0, 0, 0, 2, 0, 0}, uint16(2))
	f.Add([]byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, frame []byte, count uint16) {
		reply, err := wire.DecodeAcksReply(nil, frame, int(count))
		if err != nil {
			if !errors.Is(err, wire.ErrBadFrame) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if reply.Refused {
			if frame[0] == 0xC9 || reply.Refusal.Status == wire.StatusOK || reply.Answers != nil {
				t.Fatalf("a refusal read as %+v", reply)
			}
			return
		}
		if len(reply.Answers) != int(count) {
			t.Fatalf("%d answers for %d acks", len(reply.Answers), count)
		}
		var failed []wire.Failed
		for i, a := range reply.Answers {
			if a.Status != wire.StatusOK {
				failed = append(failed, wire.Failed{Index: i, Answer: a})
			} else if a != (wire.Answer{}) {
				t.Fatalf("an applied ack answered %+v", a)
			}
		}
		again := append(wire.AppendAcksReply(nil, int(count), failed), reply.Rest...)
		if !bytes.Equal(again, frame) {
			t.Fatalf("re-encoded reply differs")
		}
	})
}

// requireDecodeAcksAgrees fails t unless DecodeAcks reads frame at v as DecodeRequest did
// (req, err): the same handles and budget for an Acks frame, an error of the same kind for
// any frame DecodeRequest refuses, and ErrBadFrame for a frame of another op.
func requireDecodeAcksAgrees(t *testing.T, frame []byte, v wire.Version, req wire.Request, err error) {
	t.Helper()
	dst := make([]inflight.Handle, 1, 8)
	topic, budget, handles, acksErr := wire.DecodeAcks(frame, v, dst)
	switch {
	case err != nil:
		if acksErr == nil || errors.Is(err, wire.ErrUnsupportedOp) != errors.Is(acksErr, wire.ErrUnsupportedOp) || !errors.Is(acksErr, wire.ErrBadFrame) && !errors.Is(acksErr, wire.ErrUnsupportedOp) {
			t.Fatalf("v%d: DecodeRequest %v, DecodeAcks %v", v, err, acksErr)
		}
	case req.Op != wire.OpAcks:
		if !errors.Is(acksErr, wire.ErrBadFrame) {
			t.Fatalf("v%d: op %d read by DecodeAcks: %v", v, req.Op, acksErr)
		}
	default:
		if acksErr != nil || topic != req.Topic || len(handles) != len(req.Records) {
			t.Fatalf("v%d: %q %v %d, %v; want %+v", v, topic, budget, len(handles), acksErr, req)
		}
		for i, r := range req.Records {
			if wire.Handle(handles[i]) != r.Handle || budget != r.Budget {
				t.Fatalf("v%d: ack %d: %+v of %v, want %+v", v, i, handles[i], budget, r)
			}
		}
	}
}

// DecodeAcks reads an Acks frame's handles into a slice of another handle type, where they
// lie when it has room, and agrees with DecodeRequest on every sample and refused frame.
func TestDecodeAcks(t *testing.T) {
	req := plainAcks(100, time.Second)
	frame := mustEncode(t, req)
	dst := make([]inflight.Handle, 0, 128)
	topic, budget, handles, err := wire.DecodeAcks(frame, wire.V16, dst)
	if err != nil || topic != "t" || budget != time.Second || len(handles) != 100 || &handles[0] != &dst[:1][0] {
		t.Fatalf("%q %v %d, %v", topic, budget, len(handles), err)
	}
	for i, h := range handles {
		if wire.Handle(h) != req.Records[i].Handle {
			t.Fatalf("ack %d: %+v", i, h)
		}
	}
	for _, req := range samples() {
		frame := mustEncode(t, req)
		for _, v := range versions {
			got, err := wire.DecodeRequest(frame, v)
			requireDecodeAcksAgrees(t, frame, v, got, err)
		}
	}
	if _, _, _, err := wire.DecodeAcks(frame[:len(frame)-1], wire.V16, dst); !errors.Is(err, wire.ErrBadFrame) {
		t.Fatalf("a short frame: %v", err)
	}
	if _, _, _, err := wire.DecodeAcks(append(frame, 0), wire.V16, dst); !errors.Is(err, wire.ErrBadFrame) {
		t.Fatalf("trailing data: %v", err)
	}
}

// A compact consume reply (version 16), laid out by hand: the fixed fields as varints, most of
// them differences from the delivery before; read back as written, Compact set, and shorter
// than the reply before it by about half a delivery's fixed fields.
func TestCompactConsumeReply(t *testing.T) {
	r := &wire.ConsumeReply{Status: wire.StatusOK, Message: "m", Compact: true, Deliveries: []wire.Delivery{
		{Partition: 3, Offset: 1000, Nonce: 7, Attempt: 1, Expiry: 30_000_000_000, Fence: 4, Timestamp: 1_700_000_000_000_000_000, Value: []byte("v")},
		{Partition: 3, Offset: 1001, Nonce: 8, Attempt: 2, Reason: 1, Expiry: 30_000_000_000, Fence: 4, Timestamp: 1_700_000_000_000_000_100, Key: []byte("k")},
	}}
	want := appendParts([]byte{0xCA, 0}, uint16(1), "m", uv(2),
		sv(3), sv(1000), uint64(7), uv(1), uint8(0), sv(30_000_000_000), sv(4), sv(1_700_000_000_000_000_000), uv(0), uv(1), "v",
		sv(0), sv(1), uint64(8), uv(2), uint8(1), sv(0), sv(0), sv(100), uv(1), "k", uv(0))
	got := wire.AppendConsumeReply(nil, r)
	if !bytes.Equal(got, want) || cap(got) != len(got) {
		t.Fatalf("% x (capacity %d)\nwant % x", got, cap(got), want)
	}
	back, err := wire.DecodeConsumeReply(got)
	if err != nil || !reflect.DeepEqual(&back, r) {
		t.Fatalf("%+v, %v; want %+v", back, err, r)
	}
	empty := wire.AppendConsumeBatchMember(wire.BeginConsumeBatchReply(nil, 2), &wire.ConsumeReply{Compact: true})
	empty = wire.AppendConsumeBatchMember(empty, &wire.ConsumeReply{Compact: true, Status: wire.StatusUnavailable})
	if batch, err := wire.DecodeConsumeBatchReply(empty, 2); err != nil || len(batch.Members) != 2 {
		t.Fatalf("a batch reply of two empty compact members: %+v, %v", batch, err)
	}
	for _, sample := range []*wire.ConsumeReply{sampleConsumeReply(), headersConsumeReply()} {
		plain := wire.AppendConsumeReply(nil, sample)
		sample.Compact = true
		compact := wire.AppendConsumeReply(nil, sample)
		if cap(compact) != len(compact) {
			t.Fatalf("%d bytes of capacity %d", len(compact), cap(compact))
		}
		back, err := wire.DecodeConsumeReplyInto(make([]wire.Delivery, 0, 1), compact)
		if err != nil || !reflect.DeepEqual(&back, sample) {
			t.Fatalf("%+v, %v; want %+v", back, err, sample)
		}
		if len(compact) >= len(plain) {
			t.Fatalf("compact %d bytes, plain %d", len(compact), len(plain))
		}
	}
	// A consume's delivery of 31 bytes of value, one partition, offsets one apart: about 50
	// bytes a delivery instead of 88.
	batch := &wire.ConsumeReply{Compact: true}
	for i := range 100 {
		batch.Deliveries = append(batch.Deliveries, wire.Delivery{Partition: 5, Offset: 1_000_000 + int64(i), Nonce: uint64(i) << 50, Attempt: 1,
			Expiry: 29_999_000_000 - int64(i)*1000, Fence: 9, Timestamp: 1_700_000_000_000_000_000 + int64(i)*1000, Value: make([]byte, 31)})
	}
	if per := float64(len(wire.AppendConsumeReply(nil, batch))) / 100; per > 52 {
		t.Errorf("%.1f bytes a delivery", per)
	}
}

// hostileCompactReplies are malformed compact consume replies.
func hostileCompactReplies() []struct {
	name  string
	reply []byte
} {
	head := []byte{0xCA, 0, 0, 0}
	one := func(parts ...any) []byte { return appendParts(slicesClone(head), append([]any{uv(1)}, parts...)...) }
	return []struct {
		name  string
		reply []byte
	}{
		{"a count over its bytes", appendParts(slicesClone(head), uv(1<<40))},
		{"a count of two, one delivery", appendParts(slicesClone(head), uv(2), sv(0), sv(0), uint64(1), uv(1), uint8(0), sv(0), sv(0), sv(0), uv(0), uv(0))},
		{"a partition past 31 bits", one(sv(1<<31), sv(0), uint64(1), uv(1), uint8(0), sv(0), sv(0), sv(0), uv(0), uv(0))},
		{"an attempt past 32 bits", one(sv(0), sv(0), uint64(1), uv(1<<32), uint8(0), sv(0), sv(0), sv(0), uv(0), uv(0))},
		{"a varint longer than its value", one([]byte{0x80, 0}, sv(0), uint64(1), uv(1), uint8(0), sv(0), sv(0), sv(0), uv(0), uv(0))},
		{"a key past the reply", one(sv(0), sv(0), uint64(1), uv(1), uint8(0), sv(0), sv(0), sv(0), uv(5), "k")},
		{"a short nonce", one(sv(0), sv(0), uint32(1))},
		{"trailing data", one(sv(0), sv(0), uint64(1), uv(1), uint8(0), sv(0), sv(0), sv(0), uv(0), uv(0), uint8(0))},
		{"the headers mark, and no headers", appendParts([]byte{0xCB, 0, 0, 0}, uv(1), sv(0), sv(0), uint64(1), uv(1), uint8(0), sv(0), sv(0), sv(0), uv(0), uv(0), uv(0))},
		{"a header count over its bytes", appendParts([]byte{0xCB, 0, 0, 0}, uv(1), sv(0), sv(0), uint64(1), uv(1), uint8(0), sv(0), sv(0), sv(0), uv(0), uv(0), uv(1<<30))},
		{"a short header", appendParts([]byte{0xCB, 0, 0, 0}, uv(1), sv(0), sv(0), uint64(1), uv(1), uint8(0), sv(0), sv(0), sv(0), uv(0), uv(0), uv(1), uv(1), "k")},
	}
}

// A malformed compact consume reply is ErrBadFrame.
func TestDecodeCompactConsumeReplyRefuses(t *testing.T) {
	for _, tc := range hostileCompactReplies() {
		if reply, err := wire.DecodeConsumeReply(tc.reply); !errors.Is(err, wire.ErrBadFrame) {
			t.Errorf("%s: %+v, %v", tc.name, reply, err)
		}
	}
}
