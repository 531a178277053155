package router

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/wire"
)

// The codec's tests and fuzz targets are package internal/wire's; these cover what router
// keeps: its records, the frames it builds of them, and its errors as statuses.

// encodeRequest writes the frame a node sends for records of one topic.
func encodeRequest(topic string, records []wireRecord) ([]byte, error) {
	recs := make([]wire.Record, len(records))
	for i := range records {
		recs[i] = records[i].wire()
	}
	return encodeRecords(topic, recs)
}

// decodeRequest reads a frame as a node at the newest version does.
func decodeRequest(frame []byte) (wire.Request, error) {
	return wire.DecodeRequest(frame, wire.Newest)
}

func mustEncode(t testing.TB, topic string, records []wireRecord) []byte {
	t.Helper()
	frame, err := encodeRequest(topic, records)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

// One record leaves as its single op, several as an AckBatch, each with its budget; the
// records come back as they left.
func TestWireRecords(t *testing.T) {
	records := []wireRecord{
		{op: opAck, handle: inflight.Handle{Partition: 1, Offset: 2, Nonce: 3}, budget: time.Second},
		{op: opExtend, handle: inflight.Handle{Partition: 4, Offset: 5, Nonce: 6}, arg: time.Minute, budget: 2 * time.Second},
		{op: opNack, handle: inflight.Handle{Partition: 7, Offset: 8, Nonce: 9}, arg: time.Second, budget: 3 * time.Second},
	}
	for _, batch := range [][]wireRecord{records[:1], records[1:2], records[2:], records} {
		req, err := decodeRequest(mustEncode(t, "orders", batch))
		if err != nil {
			t.Fatal(err)
		}
		wantOp := wire.OpAckBatch
		if len(batch) == 1 {
			wantOp = batch[0].op
		}
		if req.Op != wantOp || req.Topic != "orders" || len(req.Records) != len(batch) {
			t.Fatalf("op %d, topic %q, %d records", req.Op, req.Topic, len(req.Records))
		}
		for i := range batch {
			want := batch[i]
			if len(batch) == 1 {
				want.budget = 0 // a single op's RPC is its budget
			}
			if got := recordOf(&req.Records[i]); got != want {
				t.Fatalf("record %d: %+v, want %+v", i, got, want)
			}
		}
	}
}

// router's wire errors are the codec's values.
func TestWireErrorsAreTheCodecs(t *testing.T) {
	if ErrBadFrame != wire.ErrBadFrame || ErrUnsupportedOp != wire.ErrUnsupportedOp {
		t.Fatal("router's wire errors are not the codec's")
	}
	if _, err := decodeRequest([]byte{200, 0, 0}); !errors.Is(err, ErrUnsupportedOp) {
		t.Fatalf("an unknown op: %v", err)
	}
	if _, err := decodeRequest([]byte{wire.OpAck, 0, 0}); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("a short record: %v", err)
	}
}

// An outcome crosses the wire as a status and comes back as what the single op answers here.
func TestAnswersCrossTheWire(t *testing.T) {
	expiry := time.Unix(0, 1234567890)
	for _, tc := range []struct {
		err    error
		status byte
		is     error
		http   int
	}{
		{nil, wire.StatusOK, nil, 204},
		{inflight.ErrAlreadySettled, wire.StatusSettled, inflight.ErrAlreadySettled, 410},
		{inflight.ErrGone, wire.StatusGone, inflight.ErrGone, 410},
		{inflight.ErrMalformedHandle, wire.StatusBadRequest, ErrInvalidArgument, 400},
		{ErrClosed, wire.StatusUnavailable, ErrUnavailable, 503},
		{errors.New("disk on fire"), wire.StatusInternal, ErrRemote, 500},
	} {
		t.Run(fmt.Sprint(tc.err), func(t *testing.T) {
			a := answerOf(tc.err, expiry)
			if a.Status != tc.status {
				t.Fatalf("status %d, want %d", a.Status, tc.status)
			}
			answers, err := wire.DecodeReply(wire.EncodeReply([]wire.Answer{a}))
			if err != nil {
				t.Fatal(err)
			}
			got, back := answerResult(answers[0])
			if !errors.Is(back, tc.is) || (tc.is == nil) != (back == nil) || HTTPStatus(back) != tc.http {
				t.Fatalf("%v (%d), want %v (%d)", back, HTTPStatus(back), tc.is, tc.http)
			}
			if tc.err == nil && !got.Equal(expiry) {
				t.Fatalf("expiry %v, want %v", got, expiry)
			}
		})
	}
	unsupported := errorOf(wire.Answer{Status: wire.StatusUnsupported, Message: "op 4"})
	if !errors.Is(unsupported, ErrUnsupportedOp) || HTTPStatus(unsupported) != 400 {
		t.Fatalf("an unsupported op: %v", unsupported)
	}
	if transport := errorOf(wire.Answer{Status: statusTransport}); !errors.Is(transport, ErrTransport) || HTTPStatus(transport) != 502 {
		t.Fatalf("no reply: %v", transport)
	}
}
