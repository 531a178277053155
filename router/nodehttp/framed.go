package nodehttp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Framed connections (see the package documentation, "Framed connections"). Once a
// connection is upgraded from HTTP/1.1, it carries the node wire's frames both ways, each
// behind a header of the connection's own:
//
//	length   u32   the bytes after this field: 9 plus the payload's
//	kind     u8    call, reply, refusal, cancel, ping or pong
//	id       u64   the call's (the caller numbers its calls), or a ping's
//	payload        a call's request frame, a reply's frame, a refusal's status (u16) and
//	               text (at most maxStatusText bytes); nothing for the others
//
// A caller sends calls, cancels and pings; the handler answers each call with a reply or a
// refusal carrying its id, in any order, and each ping with a pong. A cancel says the caller
// gave up on a call: the call's context ends at the handler, and its answer is not sent.

// Upgrade is the protocol a Transport with Framed asks a Handler to switch its connection
// to, in the request's Upgrade header.
const Upgrade = "narad-frames/1"

// The kinds of what crosses a framed connection.
const (
	kindCall    byte = 1
	kindReply   byte = 2
	kindRefusal byte = 3
	kindCancel  byte = 4
	kindPing    byte = 5
	kindPong    byte = 6
)

// framedHeaderSize is the bytes before a payload: length, kind, id.
const framedHeaderSize = 4 + 1 + 8

// framedChunk is the most a frame read allocates before its bytes arrive: a longer one
// grows its buffer as they do, so a declared length costs nothing it was not sent.
const framedChunk = 64 << 10

// maxBacklog bounds the bytes a framed connection holds for its writer: a call that would
// pass it fails at once rather than queue behind a peer that does not read.
const maxBacklog = 2 * MaxFrame

// writeStall is how long a framed connection's write may block before the peer is taken to
// have stopped reading and the connection is closed.
const writeStall = 15 * time.Second

// ErrMalformed is a framed connection whose peer sent something that is not a frame of the
// connection (a length below the header's, an unknown kind, a kind that does not go that
// way, a payload a kind does not have): the connection is closed, and the calls on it fail.
var ErrMalformed = errors.New("nodehttp: malformed data on a framed connection")

// framed is one frame of a framed connection.
type framed struct {
	kind    byte
	id      uint64
	payload []byte
}

// appendFramed appends the frame of kind and id carrying payload to b.
func appendFramed(b []byte, kind byte, id uint64, payload []byte) []byte {
	return append(appendHeader(b, kind, id, len(payload)), payload...)
}

// appendHeader appends the header of a frame of kind and id whose payload is size bytes.
func appendHeader(b []byte, kind byte, id uint64, size int) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(framedHeaderSize-4+size))
	b = append(b, kind)
	return binary.BigEndian.AppendUint64(b, id)
}

// appendRefusal appends the refusal of call id with HTTP status code and text (cut to
// maxStatusText bytes).
func appendRefusal(b []byte, id uint64, code int, text string) []byte {
	text = text[:min(len(text), maxStatusText)]
	b = appendHeader(b, kindRefusal, id, 2+len(text))
	b = binary.BigEndian.AppendUint16(b, uint16(code))
	return append(b, text...)
}

// refusalOf reads a refusal's payload.
func refusalOf(payload []byte) (code int, text string) {
	return int(binary.BigEndian.Uint16(payload)), string(payload[2:])
}

// readFramed reads the next frame from r, which a caller reads from (replies, refusals and
// pongs) or a handler does (calls, cancels, pings), as toCaller says. A clean end between
// frames is io.EOF, an end inside one io.ErrUnexpectedEOF; a length over MaxFrame plus the
// header is ErrFrameTooLarge and anything else that is not a frame going that way is
// ErrMalformed, read no further. hdr is the caller's scratch for the header.
func readFramed(r io.Reader, hdr *[framedHeaderSize]byte, toCaller bool) (framed, error) {
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return framed{}, err
	}
	length := binary.BigEndian.Uint32(hdr[0:4])
	if length < framedHeaderSize-4 {
		return framed{}, fmt.Errorf("%w: a length of %d", ErrMalformed, length)
	}
	size := int64(length) - (framedHeaderSize - 4)
	if size > MaxFrame {
		return framed{}, fmt.Errorf("a frame of %d bytes (at most %d): %w", size, MaxFrame, ErrFrameTooLarge)
	}
	f := framed{kind: hdr[4], id: binary.BigEndian.Uint64(hdr[5:])}
	switch {
	case !toCaller && f.kind == kindCall, toCaller && f.kind == kindReply:
	case !toCaller && (f.kind == kindCancel || f.kind == kindPing), toCaller && f.kind == kindPong:
		if size != 0 {
			return framed{}, fmt.Errorf("%w: a %s carrying %d bytes", ErrMalformed, kindName(f.kind), size)
		}
	case toCaller && f.kind == kindRefusal:
		if size < 2 || size > 2+maxStatusText {
			return framed{}, fmt.Errorf("%w: a refusal of %d bytes", ErrMalformed, size)
		}
	default:
		return framed{}, fmt.Errorf("%w: a frame of kind %d", ErrMalformed, f.kind)
	}
	payload, err := readN(r, int(size))
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return framed{}, err
	}
	f.payload = payload
	return f, nil
}

// readN reads exactly n bytes from r, allocating framedChunk at first and more only as
// bytes arrive.
func readN(r io.Reader, n int) ([]byte, error) {
	if n <= framedChunk {
		buf := make([]byte, n)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf := make([]byte, 0, framedChunk)
	for len(buf) < n {
		if len(buf) == cap(buf) { // doubled, at most to n: no spare capacity to zero
			grown := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

func kindName(kind byte) string {
	switch kind {
	case kindCall:
		return "call"
	case kindReply:
		return "reply"
	case kindRefusal:
		return "refusal"
	case kindCancel:
		return "cancel"
	case kindPing:
		return "ping"
	case kindPong:
		return "pong"
	}
	return fmt.Sprintf("kind %d", kind)
}

// frameWriter writes the frames of one framed connection from a goroutine of its own, so
// that nobody who queues a frame waits for the network: what queues while it writes leaves
// in its next write, one system call for however many frames, and a write blocked for
// writeStall (a peer that stopped reading) closes the connection. A caller writing its own
// frame instead of waking the writer was tried and measured: no cheaper per call.
type frameWriter struct {
	conn net.Conn

	mu sync.Mutex
	// The frames queued, in order: the buffers of before (each a run of frames, or a large
	// payload written from where it lies: see queueFrame), then out.
	before  net.Buffers
	out     []byte
	queued  int    // the bytes of before and out
	spare   []byte // the buffer of the last write, for the next queue
	err     error  // the connection failed: nothing is queued any more
	wake    chan struct{}
	stopped chan struct{} // closed when the goroutine returned
}

func newFrameWriter(conn net.Conn) *frameWriter {
	w := &frameWriter{conn: conn, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go w.run()
	return w
}

// queue appends to the frames queued what add appends, and reports the connection's error
// if it failed (nothing is queued then) or the backlog is full.
func (w *frameWriter) queue(add func([]byte) []byte) error {
	return w.enqueue(func() {
		n := len(w.out)
		w.out = add(w.out)
		w.queued += len(w.out) - n
	})
}

// queueFrame queues a frame of kind and id carrying payload. A payload of directPayload bytes
// or more is not copied: the write sends it from where it lies (one writev with the frames
// around it), so the caller must not change it afterwards. A reply the node just encoded,
// read ahead for a gateway, is tens of kilobytes; copying it into the queue cost as much
// again in allocation, zeroing and copying as encoding it.
func (w *frameWriter) queueFrame(kind byte, id uint64, payload []byte) error {
	if len(payload) < directPayload {
		return w.queue(func(b []byte) []byte { return appendFramed(b, kind, id, payload) })
	}
	return w.enqueue(func() {
		w.out = appendHeader(w.out, kind, id, len(payload))
		w.before = append(w.before, w.out, payload)
		w.queued += framedHeaderSize + len(payload)
		w.out = nil // the next frames go to a buffer of their own, after payload
	})
}

// directPayload is the size from which queueFrame sends a payload without copying it.
const directPayload = 16 << 10

// enqueue runs add, which queues frames, under the writer's lock, unless the connection
// failed or the backlog is full, and wakes the writer if nothing was queued before.
func (w *frameWriter) enqueue(add func()) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if w.queued > maxBacklog {
		queued := w.queued
		w.mu.Unlock()
		return fmt.Errorf("nodehttp: %d bytes queued for the connection already", queued)
	}
	first := w.queued == 0
	add()
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// stop fails the writer with err (the first error wins) and closes the connection; it
// returns once the goroutine returned.
func (w *frameWriter) stop(err error) {
	w.fail(err)
	<-w.stopped
}

// fail records err and closes the connection, which ends a write in progress.
func (w *frameWriter) fail(err error) {
	w.mu.Lock()
	first := w.err == nil
	if first {
		w.err = err
		w.before, w.out, w.queued = nil, nil, 0
	}
	w.mu.Unlock()
	if first {
		w.conn.Close()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *frameWriter) run() {
	defer close(w.stopped)
	for range w.wake {
		for {
			w.mu.Lock()
			if w.err != nil {
				w.mu.Unlock()
				return
			}
			before, out := w.before, w.out
			if w.queued == 0 {
				w.mu.Unlock()
				break
			}
			w.before, w.out, w.queued = nil, w.spare[:0], 0
			w.mu.Unlock()
			w.conn.SetWriteDeadline(time.Now().Add(writeStall))
			var err error
			if len(before) == 0 {
				_, err = w.conn.Write(out)
			} else {
				if len(out) > 0 {
					before = append(before, out)
				}
				_, err = before.WriteTo(w.conn) // one writev on a TCP connection
			}
			if err != nil {
				w.fail(fmt.Errorf("nodehttp: writing to the connection: %w", err))
				return
			}
			if cap(out) > framedChunk {
				out = nil // not kept: a frame that big is rare
			}
			w.mu.Lock()
			w.spare = out[:0]
			w.mu.Unlock()
		}
	}
}
