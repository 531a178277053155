package router

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"narad.dev/consume/inflight"
)

func TestWireRoundTrip(t *testing.T) {
	records := []wireRecord{
		{op: opAck, handle: inflight.Handle{Partition: 1, Offset: 2, Nonce: 3}},
		{op: opExtend, handle: inflight.Handle{Partition: 4, Offset: 5, Nonce: 6}, arg: time.Minute},
		{op: opNack, handle: inflight.Handle{Partition: 7, Offset: 8, Nonce: 9}, arg: time.Second},
	}
	batch := []wireRecord{records[0], records[1], records[2]}
	for i := range batch {
		batch[i].budget = time.Duration(i+1) * time.Second
	}
	for _, batch := range [][]wireRecord{records[:1], records[1:2], batch} {
		req, err := decodeRequest(mustEncode(t, "orders", batch))
		if err != nil {
			t.Fatal(err)
		}
		if req.topic != "orders" || !reflect.DeepEqual(req.records, batch) {
			t.Fatalf("round trip: %+v, want %+v", req.records, batch)
		}
	}
	answers := []wireAnswer{{status: statusOK, expiry: 42}, {status: statusGone, message: "gone"}}
	back, err := decodeReply(encodeReply(answers))
	if err != nil || !reflect.DeepEqual(back, answers) {
		t.Fatalf("reply round trip: %+v, %v", back, err)
	}
	if _, err := decodeRequest([]byte{9, 0, 0}); !errors.Is(err, ErrUnsupportedOp) {
		t.Fatalf("unknown op: %v", err)
	}
}

// FuzzDecodeRequest: the request decoder never panics, refuses with ErrBadFrame or
// ErrUnsupportedOp, and what it accepts encodes back to a frame that decodes the same.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(mustEncode(f, "orders", []wireRecord{{op: opAck, handle: inflight.Handle{Partition: 1, Offset: 2, Nonce: 3}}}))
	f.Add(mustEncode(f, "t", []wireRecord{{op: opAck, budget: time.Second}, {op: opNack, arg: 5}}))
	f.Add([]byte{})
	f.Add([]byte{4, 0, 0, 0, 0})
	f.Add([]byte{200, 0, 1, 'x'})
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := decodeRequest(frame)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) && !errors.Is(err, ErrUnsupportedOp) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		frame, err = encodeRequest(req.topic, req.records)
		if err != nil {
			t.Fatalf("a decoded frame does not encode: %v", err)
		}
		again, err := decodeRequest(frame)
		if err != nil || again.topic != req.topic || !reflect.DeepEqual(again.records, req.records) {
			t.Fatalf("re-encoded frame decodes to %+v, %v; want %+v", again, err, req)
		}
	})
}

// FuzzDecodeReply: the reply decoder never panics, and what it accepts encodes back to the
// same bytes.
func FuzzDecodeReply(f *testing.F) {
	f.Add(encodeReply([]wireAnswer{{status: statusOK, expiry: 1}, {status: statusGone, message: "x"}}))
	f.Add([]byte{0, 1})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, frame []byte) {
		answers, err := decodeReply(frame)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, a := range answers {
			if len(a.message) > 1<<10 {
				return // encodeReply shortens long messages
			}
		}
		if !bytes.Equal(encodeReply(answers), frame) {
			t.Fatalf("re-encoded reply differs")
		}
	})
}

func mustEncode(t testing.TB, topic string, records []wireRecord) []byte {
	t.Helper()
	frame, err := encodeRequest(topic, records)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}
