package nodehttp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// header lays out a framed connection's header by hand: length, kind, id.
func header(length uint32, kind byte, id uint64) []byte {
	b := binary.BigEndian.AppendUint32(nil, length)
	b = append(b, kind)
	return binary.BigEndian.AppendUint64(b, id)
}

// Every kind round trips, read the way it goes: calls, cancels and pings by a handler;
// replies, refusals and pongs by a caller.
func TestFramedRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		frame    []byte
		toCaller bool
		want     framed
	}{
		{"call", appendFramed(nil, kindCall, 7, []byte("frame")), false, framed{kindCall, 7, []byte("frame")}},
		{"empty call", appendFramed(nil, kindCall, 1<<64-1, nil), false, framed{kindCall, 1<<64 - 1, []byte{}}},
		{"cancel", appendFramed(nil, kindCancel, 7, nil), false, framed{kindCancel, 7, []byte{}}},
		{"ping", appendFramed(nil, kindPing, 0, nil), false, framed{kindPing, 0, []byte{}}},
		{"reply", appendFramed(nil, kindReply, 9, []byte("reply")), true, framed{kindReply, 9, []byte("reply")}},
		{"pong", appendFramed(nil, kindPong, 3, nil), true, framed{kindPong, 3, []byte{}}},
		{"refusal", appendRefusal(nil, 5, 500, "the node failed"), true, framed{kindRefusal, 5, append([]byte{1, 0xf4}, "the node failed"...)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr [framedHeaderSize]byte
			r := bytes.NewReader(tc.frame)
			got, err := readFramed(r, &hdr, tc.toCaller)
			if err != nil || got.kind != tc.want.kind || got.id != tc.want.id || !bytes.Equal(got.payload, tc.want.payload) {
				t.Fatalf("%+v, %v; want %+v", got, err, tc.want)
			}
			if _, err := readFramed(r, &hdr, tc.toCaller); err != io.EOF {
				t.Fatalf("after the frame: %v, want io.EOF", err)
			}
		})
	}
	code, text := refusalOf(appendRefusal(nil, 1, 403, "no")[framedHeaderSize:])
	if code != 403 || text != "no" {
		t.Fatalf("refusal %d %q", code, text)
	}
	long := appendRefusal(nil, 1, 500, strings.Repeat("x", 2*maxStatusText))
	if len(long) != framedHeaderSize+2+maxStatusText {
		t.Fatalf("a long refusal's text is not cut: %d bytes", len(long))
	}
}

// What is not a frame going that way is refused, each as the connection's error, and the
// reader reads no further than the header that gave it away.
func TestReadFramedRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		data     []byte
		toCaller bool
		want     error
	}{
		{"a length below the header", header(8, kindCall, 1), false, ErrMalformed},
		{"a length of zero", header(0, kindReply, 1), true, ErrMalformed},
		{"a length over the bound", header(9+MaxFrame+1, kindCall, 1), false, ErrFrameTooLarge},
		{"the largest length", header(1<<32-1, kindReply, 1), true, ErrFrameTooLarge},
		{"kind 0", header(9, 0, 1), false, ErrMalformed},
		{"kind 7", header(9, 7, 1), true, ErrMalformed},
		{"kind 255", header(9, 255, 1), false, ErrMalformed},
		{"a reply to a handler", appendFramed(nil, kindReply, 1, nil), false, ErrMalformed},
		{"a refusal to a handler", appendRefusal(nil, 1, 500, "x"), false, ErrMalformed},
		{"a pong to a handler", appendFramed(nil, kindPong, 1, nil), false, ErrMalformed},
		{"a call to a caller", appendFramed(nil, kindCall, 1, []byte("x")), true, ErrMalformed},
		{"a cancel to a caller", appendFramed(nil, kindCancel, 1, nil), true, ErrMalformed},
		{"a ping to a caller", appendFramed(nil, kindPing, 1, nil), true, ErrMalformed},
		{"a cancel carrying bytes", appendFramed(nil, kindCancel, 1, []byte("x")), false, ErrMalformed},
		{"a ping carrying bytes", appendFramed(nil, kindPing, 1, []byte("x")), false, ErrMalformed},
		{"a pong carrying bytes", appendFramed(nil, kindPong, 1, []byte("x")), true, ErrMalformed},
		{"a refusal without its status", appendFramed(nil, kindRefusal, 1, []byte{1}), true, ErrMalformed},
		{"a refusal over its bound", appendFramed(nil, kindRefusal, 1, make([]byte, 3+maxStatusText)), true, ErrMalformed},
		{"cut in the header", appendFramed(nil, kindCall, 1, nil)[:5], false, io.ErrUnexpectedEOF},
		{"cut in the payload", appendFramed(nil, kindReply, 1, []byte("reply"))[:16], true, io.ErrUnexpectedEOF},
		{"a long payload cut", append(header(9+framedChunk*3, kindCall, 1), make([]byte, framedChunk+5)...), false, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr [framedHeaderSize]byte
			cut := errors.Is(tc.want, io.ErrUnexpectedEOF)
			data := tc.data
			if !cut {
				data = append(data, "after"...) // what a reader that went past the header would take
			}
			r := bytes.NewReader(data)
			_, err := readFramed(r, &hdr, tc.toCaller)
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			if !cut && r.Len() != len(data)-framedHeaderSize {
				t.Fatalf("read %d bytes past the header", len(data)-framedHeaderSize-r.Len())
			}
		})
	}
}

// A frame's declared length costs memory only as its bytes arrive: a peer that declares the
// bound and sends a little gets a buffer of about what it sent.
func TestDeclaredLengthAllocatesWhatArrives(t *testing.T) {
	data := append(header(9+MaxFrame, kindCall, 1), make([]byte, 1000)...)
	var hdr [framedHeaderSize]byte
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		if _, err := readFramed(bytes.NewReader(data), &hdr, false); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 4*framedChunk {
		t.Fatalf("%d bytes allocated for a frame cut after 1000 bytes", per)
	}
	// And a long frame that does arrive is read whole.
	payload := bytes.Repeat([]byte("0123456789"), 3*framedChunk/10+7)
	got, err := readFramed(bytes.NewReader(appendFramed(nil, kindReply, 2, payload)), &hdr, true)
	if err != nil || !bytes.Equal(got.payload, payload) {
		t.Fatalf("a long frame: %d bytes, %v", len(got.payload), err)
	}
}

// FuzzReadFramed: the reader never panics; it reads frames until the data ends (io.EOF
// exactly at a frame's end, io.ErrUnexpectedEOF inside one) or refuses with ErrMalformed or
// ErrFrameTooLarge; every frame it reads encodes back to the bytes it was read from.
func FuzzReadFramed(f *testing.F) {
	f.Add(appendFramed(appendFramed(nil, kindCall, 1, []byte("frame")), kindCancel, 1, nil), false)
	f.Add(appendFramed(nil, kindPing, 0, nil), false)
	f.Add(appendRefusal(appendFramed(nil, kindReply, 2, []byte("reply")), 3, 500, "failed"), true)
	f.Add(appendFramed(nil, kindPong, 0, nil), true)
	f.Add(header(1<<32-1, kindCall, 1), false)
	f.Add(header(8, kindReply, 1), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, data []byte, toCaller bool) {
		var hdr [framedHeaderSize]byte
		r := bytes.NewReader(data)
		for {
			at := len(data) - r.Len()
			f, err := readFramed(r, &hdr, toCaller)
			if err != nil {
				switch {
				case err == io.EOF:
					if r.Len() != 0 || at != len(data) {
						t.Fatalf("io.EOF at %d of %d", at, len(data))
					}
				case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrMalformed), errors.Is(err, ErrFrameTooLarge):
				default:
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			var again []byte
			if f.kind == kindRefusal {
				code, text := refusalOf(f.payload)
				again = appendRefusal(nil, f.id, code, text)
			} else {
				again = appendFramed(nil, f.kind, f.id, f.payload)
			}
			if read := data[at : len(data)-r.Len()]; !bytes.Equal(again, read) {
				t.Fatalf("re-encoded %x, read %x", again, read)
			}
		}
	})
}

// The writer sends what is queued in order, whether a frame's payload was copied into its
// buffer or is written from where it lies (large ones): frames of every size, queued from
// several goroutines, arrive whole, each goroutine's in its order.
func TestFrameWriterKeepsOrder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	out, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	in := <-accepted
	if in == nil {
		t.Fatal("no connection accepted")
	}
	defer in.Close()
	w := newFrameWriter(out)
	defer w.stop(errors.New("the test is over"))

	sizes := []int{0, 1, 100, directPayload - 1, directPayload, 3 * framedChunk, 10}
	const writers, rounds = 4, 20
	payloadOf := func(g, i int) []byte {
		p := make([]byte, sizes[i%len(sizes)])
		for j := range p {
			p[j] = byte(g*31 + i + j)
		}
		return p
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range rounds {
				if err := w.queueFrame(kindReply, uint64(g)<<32|uint64(i), payloadOf(g, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	next := make([]int, writers)
	var hdr [framedHeaderSize]byte
	for range writers * rounds {
		f, err := readFramed(in, &hdr, true)
		if err != nil {
			t.Fatal(err)
		}
		g, i := int(f.id>>32), int(uint32(f.id))
		if g >= writers || i != next[g] {
			t.Fatalf("frame %d of writer %d, want %d", i, g, next[g])
		}
		next[g]++
		if !bytes.Equal(f.payload, payloadOf(g, i)) {
			t.Fatalf("frame %d of writer %d: %d bytes, not the payload queued", i, g, len(f.payload))
		}
	}
	wg.Wait()
}

// A payload written from where it lies counts against the backlog as a copied one does: a
// connection whose writer is stuck refuses frames past maxBacklog. (The writer here never
// runs, so that nothing it takes out of the queue moves the count.)
func TestFrameWriterBacklogCountsLargePayloads(t *testing.T) {
	w := &frameWriter{wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	payload := make([]byte, 1<<20)
	accepted := 0
	for ; accepted < 2*maxBacklog/len(payload); accepted++ {
		if err := w.queueFrame(kindReply, uint64(accepted), payload); err != nil {
			break
		}
	}
	if want := maxBacklog / len(payload); accepted != want {
		t.Fatalf("%d frames of %d bytes queued, want %d: the backlog (%d bytes) refuses the next", accepted, len(payload), want, maxBacklog)
	}
}
