package wire_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"narad.dev/consume/internal/wire"
)

// Status and Purge frames: the header, a u16 count, then each partition as an i32; known
// from version 12 on, an unknown op before.
func TestStatusAndPurgeFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  wire.Request
		want []byte
	}{
		{"status of one", wire.Request{Op: wire.OpStatus, Topic: "q", Partitions: []int32{7}},
			[]byte{18, 0, 1, 'q', 0, 1, 0, 0, 0, 7}},
		{"purge of two", wire.Request{Op: wire.OpPurge, Topic: "q", Partitions: []int32{1, 256}},
			[]byte{19, 0, 1, 'q', 0, 2, 0, 0, 0, 1, 0, 0, 1, 0}},
		{"status asking for the spilled counts", wire.Request{Op: wire.OpStatus, Topic: "q", Partitions: []int32{7}, StatusSpilled: true},
			[]byte{18, 0, 1, 'q', 0, 1, 0, 0, 0, 7, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustEncode(t, tc.req)
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("% x, want % x", got, tc.want)
			}
			want := wire.V12
			if tc.req.StatusSpilled {
				want = wire.V15
				// An owner before V15 reads the flags byte as trailing data, as it refuses
				// any: the requester asks it again without.
				if _, err := wire.DecodeRequest(got, wire.V14); !errors.Is(err, wire.ErrBadFrame) || !strings.Contains(err.Error(), "1 partitions in 5 bytes") {
					t.Fatalf("at v14: %v, want ErrBadFrame", err)
				}
			}
			if need := tc.req.MinVersion(); need != want {
				t.Fatalf("needs v%d, want v%d", need, want)
			}
			back, err := wire.DecodeRequest(got, want)
			if err != nil || !reflect.DeepEqual(back, tc.req) {
				t.Fatalf("reads back as %+v, %v", back, err)
			}
			if _, err := wire.DecodeRequest(got, wire.V11); !errors.Is(err, wire.ErrUnsupportedOp) {
				t.Fatalf("at v11: %v, want ErrUnsupportedOp", err)
			}
		})
	}
}

// A Status or Purge that names no partition, more than MaxPartitions, a count its bytes do
// not hold, or partitions out of order, negative or repeated is ErrBadFrame.
func TestDecodeStatusRequestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		why   string
	}{
		{"no count", frame(wire.OpStatus, "q"), "short partitions"},
		{"count of none", frame(wire.OpStatus, "q", uint16(0)), "0 partitions"},
		{"over MaxPartitions", frame(wire.OpPurge, "q", uint16(wire.MaxPartitions+1), make([]byte, 4*(wire.MaxPartitions+1))), "1025 partitions"},
		{"short of its count", frame(wire.OpStatus, "q", uint16(2), int32(1)), "2 partitions in 4 bytes"},
		{"a purge's trailing byte", frame(wire.OpPurge, "q", uint16(1), int32(1), uint8(1)), "1 partitions in 5 bytes"},
		{"two trailing bytes", frame(wire.OpStatus, "q", uint16(1), int32(1), uint8(1), uint8(0)), "1 partitions in 6 bytes"},
		{"a flags byte of no flag", frame(wire.OpStatus, "q", uint16(1), int32(1), uint8(0)), "flags byte 0x0"},
		{"an unknown flag", frame(wire.OpStatus, "q", uint16(1), int32(1), uint8(3)), "flags byte 0x3"},
		{"negative", frame(wire.OpStatus, "q", uint16(1), int32(-1)), "partition -1"},
		{"repeated", frame(wire.OpPurge, "q", uint16(2), int32(3), int32(3)), "partition 3 after [3]"},
		{"descending", frame(wire.OpPurge, "q", uint16(2), int32(3), int32(2)), "partition 2 after [3]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wire.DecodeRequest(tc.frame, wire.Newest)
			if !errors.Is(err, wire.ErrBadFrame) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("%v, want ErrBadFrame (%q)", err, tc.why)
			}
		})
	}
}

// sampleStatuses is a status reply's entries of every kind: counted (loaded, with keys,
// an error and a set-aside), counted and not loaded with nothing known, and refused.
func sampleStatuses() []wire.PartitionStatus {
	return []wire.PartitionStatus{
		{Partition: 0, Status: wire.StatusOK, Loaded: true, Frontier: 9, HighWatermark: 20, Backlog: 10,
			OldestUnsettledAge: time.Minute, Leased: 1, Delayed: 2, AckedAhead: 3, Quarantined: 4, Requeued: 5,
			HeldKeys: 6, BlockedKeys: 7, Deferred: 8, ParkedKeys: 9, Parked: 10, BlockedFor: time.Second,
			ParkedOnTopic: 11, ParkedOnPartition: 1<<32 - 1, ErrStatus: wire.StatusInternal, ErrMessage: "log",
			SetAside: "disk", SetAsideRetryIn: time.Hour, QuarantinedKeys: 12},
		{Partition: 3, Status: wire.StatusOK, Frontier: -1, HighWatermark: -1, OldestUnsettledAge: -1},
		{Partition: 1<<31 - 1, Status: wire.StatusUnavailable, Message: "not the owner"},
	}
}

// A status reply reads back as written, entry by entry, with the spilled counts when the
// Status asked for them and without otherwise; a refusal in the ack reply format reads as
// the refusal.
func TestStatusReplyRoundTrip(t *testing.T) {
	entries := sampleStatuses()
	raw := wire.AppendStatusReply(nil, entries, false)
	reply, err := wire.DecodeStatusReply(raw, len(entries), false)
	if err != nil || !reflect.DeepEqual(reply.Partitions, entries) {
		t.Fatalf("reads back as %+v, %v", reply, err)
	}
	if after := wire.AppendStatusReply([]byte("x"), entries, false); !bytes.Equal(after[1:], raw) || after[0] != 'x' {
		t.Fatal("appended after other bytes, the reply differs")
	}
	spilled := sampleStatuses()
	spilled[0].SpilledKeys, spilled[0].Spilled = 2, 1<<32-1
	withSpills := wire.AppendStatusReply(nil, spilled, true)
	if len(withSpills) != len(raw)+2*8 {
		t.Fatalf("%d bytes with the spilled counts of two counted entries, %d without", len(withSpills), len(raw))
	}
	reply, err = wire.DecodeStatusReply(withSpills, len(spilled), true)
	if err != nil || !reflect.DeepEqual(reply.Partitions, spilled) {
		t.Fatalf("with the spilled counts, reads back as %+v, %v", reply, err)
	}
	if !bytes.Equal(wire.AppendStatusReply(nil, spilled, false), raw) {
		t.Fatal("a reply to a Status that did not ask carries the spilled counts")
	}
	if _, err := wire.DecodeStatusReply(withSpills, len(spilled), false); !errors.Is(err, wire.ErrBadFrame) {
		t.Fatalf("the spilled counts read by a Status that did not ask for them: %v", err)
	}
	refusal := wire.EncodeReply([]wire.Answer{{Status: wire.StatusUnsupported, Message: "op 18"}})
	reply, err = wire.DecodeStatusReply(refusal, 5, true)
	if err != nil || reply.Partitions != nil || reply.Refusal.Status != wire.StatusUnsupported || reply.Refusal.Message != "op 18" {
		t.Fatalf("a refusal reads as %+v, %v", reply, err)
	}
	long := []wire.PartitionStatus{{Status: wire.StatusUnavailable, Message: strings.Repeat("m", wire.MaxMessage+5)}}
	reply, err = wire.DecodeStatusReply(wire.AppendStatusReply(nil, long, true), 1, true)
	if err != nil || len(reply.Partitions[0].Message) != wire.MaxMessage {
		t.Fatalf("a long message is cut to MaxMessage: %v", err)
	}
}

// A status reply of another count than asked, entries out of range, short, trailing data,
// or an ack reply that is not a refusal is ErrBadFrame.
func TestDecodeStatusReplyRefuses(t *testing.T) {
	one := func(mutate func(*wire.PartitionStatus)) []byte {
		e := sampleStatuses()[0]
		mutate(&e)
		return wire.AppendStatusReply(nil, []wire.PartitionStatus{e}, false)
	}
	good := wire.AppendStatusReply(nil, sampleStatuses()[:1], false)
	loadedAt := 1 + 2 + 4 + 1 + 2 // mark, count, partition, status, an empty message
	badLoaded := bytes.Clone(good)
	badLoaded[loadedAt] = 2
	for _, tc := range []struct {
		name  string
		reply []byte
		count int
		why   string
	}{
		{"empty", nil, 1, "short status reply"},
		{"another count", good, 2, "1 entries answering 2"},
		{"short", good[:len(good)-1], 1, "short"},
		{"trailing", append(bytes.Clone(good), 0), 1, "trailing data"},
		{"count past the bytes", []byte{0xC8, 0xff, 0xff}, 0xffff, "65535 entries in 0 bytes"},
		{"loaded byte 2", badLoaded, 1, "loaded byte 2"},
		{"frontier below -1", one(func(e *wire.PartitionStatus) { e.Frontier = -2 }), 1, "frontier -2"},
		{"negative backlog", one(func(e *wire.PartitionStatus) { e.Backlog = -1 }), 1, "backlog -1"},
		{"age below -1", one(func(e *wire.PartitionStatus) { e.OldestUnsettledAge = -2 }), 1, "age -2ns"},
		{"negative blocked", one(func(e *wire.PartitionStatus) { e.BlockedFor = -1 }), 1, "blocked for -1ns"},
		{"error message alone", one(func(e *wire.PartitionStatus) { e.ErrStatus = wire.StatusOK }), 1, "without its status"},
		{"retry without set-aside", one(func(e *wire.PartitionStatus) { e.SetAside = "" }), 1, "retry in 1h0m0s"},
		{"negative retry", one(func(e *wire.PartitionStatus) { e.SetAsideRetryIn = -1 }), 1, "retry in -1ns"},
		{"an ack reply of two answers", wire.EncodeReply(make([]wire.Answer, 2)), 2, "a refusal of 2 answers"},
		{"an ack reply of success", wire.EncodeReply(make([]wire.Answer, 1)), 1, "a refusal of 1 answers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wire.DecodeStatusReply(tc.reply, tc.count, false)
			if !errors.Is(err, wire.ErrBadFrame) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("%v, want ErrBadFrame (%q)", err, tc.why)
			}
		})
	}
}

// FuzzDecodeStatusReply: the status reply decoder never panics, refuses with ErrBadFrame,
// accepts exactly count entries or a refusal of the whole frame, and what it accepts
// encodes back to the same bytes. The input's top bit says whether the Status asked for the
// spilled counts, the other fifteen are the count. testdata/fuzz holds seeds besides these.
func FuzzDecodeStatusReply(f *testing.F) {
	const askedSpilled = 1 << 15
	f.Add(wire.AppendStatusReply(nil, sampleStatuses(), false), uint16(3))
	f.Add(wire.AppendStatusReply(nil, sampleStatuses(), true), uint16(askedSpilled|3))
	f.Add(wire.AppendStatusReply(nil, nil, false), uint16(0))
	f.Add(wire.EncodeReply([]wire.Answer{{Status: wire.StatusUnsupported, Message: "op 18"}}), uint16(2))
	f.Add([]byte{0xC8, 0, 1, 0, 0, 0, 0, 0, 0xff, 0xff}, uint16(1))
	f.Add([]byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, frame []byte, input uint16) {
		spilled, count := input&askedSpilled != 0, input&^askedSpilled
		reply, err := wire.DecodeStatusReply(frame, int(count), spilled)
		if err != nil {
			if !errors.Is(err, wire.ErrBadFrame) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if reply.Partitions == nil {
			if frame[0] == 0xC8 || reply.Refusal.Status == wire.StatusOK {
				t.Fatalf("a refusal read as %+v", reply)
			}
			return
		}
		if len(reply.Partitions) != int(count) {
			t.Fatalf("%d entries for %d partitions", len(reply.Partitions), count)
		}
		if !bytes.Equal(wire.AppendStatusReply(nil, reply.Partitions, spilled), frame) {
			t.Fatalf("re-encoded reply differs")
		}
	})
}
