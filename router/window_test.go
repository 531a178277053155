package router

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"narad.dev/consume/inflight"
)

// Checklist 159: the ack window is max(128, 8 × GOMAXPROCS).
func TestDefaultAckWindow(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for procs, want := range map[int]int{1: 128, 16: 128, 17: 136, 64: 512} {
		runtime.GOMAXPROCS(procs)
		if got := defaultAckWindow(); got != want {
			t.Errorf("GOMAXPROCS %d: window %d, want %d", procs, got, want)
		}
	}
}

// Issue 25: the consume window is one per processor, at least two.
func TestConsumeWindow(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for procs, want := range map[int]int{1: 2, 2: 2, 3: 3, 16: 16} {
		runtime.GOMAXPROCS(procs)
		if got := consumeWindow(); got != want {
			t.Errorf("GOMAXPROCS %d: window %d, want %d", procs, got, want)
		}
	}
}

// Issue 11: a topic whose length does not fit the frame (or is over MaxTopicLength) is
// refused by the encoder, and a frame naming one is refused by the decoder.
func TestEncoderRefusesALongTopic(t *testing.T) {
	rec := []wireRecord{{op: opAck, handle: inflight.Handle{Partition: 1, Offset: 2, Nonce: 3}}}
	for _, n := range []int{MaxTopicLength + 1, 1<<16 + 3} {
		if _, err := encodeRequest(strings.Repeat("t", n), rec); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("topic of %d bytes: %v", n, err)
		}
	}
	frame := mustEncode(t, strings.Repeat("t", MaxTopicLength), rec)
	frame[1], frame[2] = 0, MaxTopicLength+1
	if _, err := decodeRequest(frame); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("decoded a topic over the limit: %v", err)
	}
	if _, err := encodeRequest("t", make([]wireRecord, maxBatch+1)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a batch over %d: %v", maxBatch, err)
	}
}
