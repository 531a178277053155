package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/frontend"
)

// Node is what the handler uses of a *router.Node; tests may fake it.
type Node interface {
	Consume(ctx context.Context, topic string, opts router.ConsumeOptions) ([]router.Message, error)
	Replay(ctx context.Context, topic string, partition int32, offset int64, limit int) ([]router.Message, error)
	FitResponse(msgs []router.Message, size func(*router.Message) int, limit int) []router.Message
	Ack(ctx context.Context, topic string, handle router.Handle) error
	AckBatch(ctx context.Context, topic string, handles []router.Handle) []error
	Extend(ctx context.Context, topic string, handle router.Handle, d time.Duration) (time.Time, error)
	Nack(ctx context.Context, topic string, handle router.Handle, delay time.Duration) error
	Release(ctx context.Context, topic string, handle router.Handle) error
}

var _ Node = (*router.Node)(nil)

// Rejecter is the optional capability of a Node that rejects a delivery
// (router.Node.Reject), found by type assertion so that a Node written before it still is
// one; without it, POST /reject answers 501.
type Rejecter interface {
	Reject(ctx context.Context, topic string, handle router.Handle) error
}

var _ Rejecter = (*router.Node)(nil)

// DefaultMaxInFlight is Options.MaxInFlight's zero value: the consume requests one client
// identity may have in flight at once.
const DefaultMaxInFlight = frontend.DefaultMaxInFlight

// DefaultRetryAfter is Options.RetryAfter's zero value.
const DefaultRetryAfter = time.Second

// Options shape a Handler. The zero value is usable.
type Options struct {
	// Identity names the client a request comes from, for the bound on consume requests in
	// flight (an API key, an authenticated principal, a tenant). Nil means the host part
	// of the request's RemoteAddr: behind a proxy that does not preserve it, every client
	// shares the proxy's identity. An empty string is an identity like any other.
	Identity func(*http.Request) string
	// MaxInFlight is how many consume requests (GET /consume, long-polls held included)
	// one identity may have in flight; one more is answered 429. Zero means
	// DefaultMaxInFlight; a negative value means no bound.
	MaxInFlight int
	// RetryAfter is what a 429 tells the client to wait, in whole seconds (rounded up, at
	// least 1). Zero means DefaultRetryAfter.
	RetryAfter time.Duration
	// MaxWait is the longest wait a consume may ask for; a longer one is a 400. Zero means
	// router.MaxWait. A host whose http.Server has a WriteTimeout sets it below that.
	MaxWait time.Duration
}

// A Handler serves the consume API over a node. It is safe for concurrent use.
type Handler struct {
	node       Node
	rejecter   Rejecter // nil when node has no Reject
	identity   func(*http.Request) string
	slots      *frontend.Slots
	retryAfter string
	maxWait    time.Duration
}

// New returns a handler serving the consume API over node.
func New(node Node, opts Options) (*Handler, error) {
	switch {
	case node == nil:
		return nil, errors.New("httpapi: nil node")
	case opts.MaxWait < 0 || opts.MaxWait > router.MaxWait:
		return nil, fmt.Errorf("httpapi: Options.MaxWait %v outside [0, %v]", opts.MaxWait, router.MaxWait)
	case opts.RetryAfter < 0:
		return nil, fmt.Errorf("httpapi: Options.RetryAfter %v is negative", opts.RetryAfter)
	}
	h := &Handler{node: node, identity: opts.Identity, maxWait: opts.MaxWait}
	h.rejecter, _ = node.(Rejecter)
	if h.identity == nil {
		h.identity = frontend.RemoteHost
	}
	maxFlight := opts.MaxInFlight
	if maxFlight == 0 {
		maxFlight = DefaultMaxInFlight
	}
	h.slots = frontend.NewSlots(maxFlight)
	if h.maxWait == 0 {
		h.maxWait = router.MaxWait
	}
	retry := opts.RetryAfter
	if retry == 0 {
		retry = DefaultRetryAfter
	}
	h.retryAfter = strconv.FormatInt(int64((retry+time.Second-1)/time.Second), 10)
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var method string
	var serve func(http.ResponseWriter, *http.Request)
	switch r.URL.Path {
	case "/consume":
		method, serve = http.MethodGet, h.consume
	case "/ack":
		method, serve = http.MethodPost, h.ack
	case "/ack-batch":
		method, serve = http.MethodPost, h.ackBatch
	case "/extend":
		method, serve = http.MethodPost, h.extend
	case "/nack":
		method, serve = http.MethodPost, h.nack
	case "/release":
		method, serve = http.MethodPost, h.release
	case "/reject":
		method, serve = http.MethodPost, h.reject
	default:
		writeError(w, http.StatusNotFound, "no_route", "no such route")
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.URL.Path+" takes "+method)
		return
	}
	serve(w, r)
}

// consume serves GET /consume: a queue consume, or with offset a replay.
func (h *Handler) consume(w http.ResponseWriter, r *http.Request) {
	p, err := queryParams(r, "topic", "max", "wait", "partition", "offset", "visibility")
	if err != nil {
		writeErr(w, err)
		return
	}
	req, err := h.consumeRequest(p)
	if err != nil {
		writeErr(w, err)
		return
	}
	id := h.identity(r)
	if !h.slots.Acquire(id) {
		w.Header().Set("Retry-After", h.retryAfter)
		writeError(w, http.StatusTooManyRequests, "too_many_requests",
			fmt.Sprintf("%d consume requests of this client are in flight already", h.slots.Max()))
		return
	}
	defer h.slots.Release(id)
	ctx := r.Context()
	if req.replay {
		msgs, err := h.node.Replay(ctx, req.topic, req.opts.Partition, req.offset, req.opts.Max)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeMessages(w, fitReplay(msgs))
		return
	}
	// A record taken as the client left is given back, not left invisible.
	msgs, err := frontend.Consume(ctx, h.node, req.topic, req.opts)
	if err != nil {
		writeErr(w, err)
		return
	}
	msgs = h.fit(msgs)
	if err := writeMessages(w, msgs); err != nil {
		frontend.GiveBack(ctx, h.node, req.topic, msgs) // the client cannot parse a cut body: none reached it
	}
}

type consumeRequest struct {
	topic  string
	opts   router.ConsumeOptions
	replay bool
	offset int64
}

// consumeRequest validates a consume's parameters.
func (h *Handler) consumeRequest(p params) (consumeRequest, error) {
	var req consumeRequest
	var err error
	if req.topic, err = p.topic(); err != nil {
		return req, err
	}
	max, err := p.number("max", 1, router.MaxBatch, 1)
	if err != nil {
		return req, err
	}
	req.opts.Max = int(max)
	if _, ok := p["partition"]; ok {
		part, err := p.number("partition", 0, 1<<31-1, 0)
		if err != nil {
			return req, err
		}
		req.opts.Pinned, req.opts.Partition = true, int32(part)
	}
	if _, ok := p["offset"]; ok {
		if req.offset, err = p.number("offset", 0, 1<<63-1, 0); err != nil {
			return req, err
		}
		switch {
		case !req.opts.Pinned:
			return req, badParam("offset", "a replay needs a partition")
		case hasParam(p, "wait"):
			return req, badParam("wait", "not taken by a replay (with offset)")
		case hasParam(p, "visibility"):
			return req, badParam("visibility", "not taken by a replay (with offset): it takes no lease")
		}
		req.replay = true
		return req, nil
	}
	if req.opts.Wait, err = p.duration("wait", h.maxWait); err != nil {
		return req, err
	}
	req.opts.Visibility, err = p.duration("visibility", router.MaxVisibility)
	return req, err
}

func hasParam(p params, name string) bool {
	_, ok := p[name]
	return ok
}

// fit cuts a consumed batch to what a response holds (router.ResponseLimit bytes of body in
// all), as the node measures it with this encoder's exact sizes; the node gives back the
// rest at once.
func (h *Handler) fit(msgs []router.Message) []router.Message {
	if len(msgs) <= 1 {
		return msgs
	}
	return h.node.FitResponse(msgs, entryLen, bodyLimit)
}

// entryLen is what one message adds to a body: its object and one separator.
func entryLen(m *router.Message) int { return messageLen(m) + 1 }

// bodyLimit is what FitResponse may give the entries of a body of at most
// router.ResponseLimit bytes.
const bodyLimit = router.ResponseLimit - (envelopeBytes - 1)

// fitReplay cuts a replay to what a response holds; a replay leases nothing, so nothing is
// given back.
func fitReplay(msgs []router.Message) []router.Message {
	total := 0
	for i := range msgs {
		total += entryLen(&msgs[i])
		if i > 0 && total > bodyLimit {
			return msgs[:i]
		}
	}
	return msgs
}

// writeMessages writes 204 for no messages, otherwise 200 and {"messages":[...]}, streamed
// with its exact Content-Length. An error means the client did not get the whole body.
func writeMessages(w http.ResponseWriter, msgs []router.Message) error {
	if len(msgs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	size := envelopeBytes - 1
	for i := range msgs {
		size += entryLen(&msgs[i])
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(size))
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	b := bodyWriters.Get().(*bodyWriter)
	defer b.release()
	bw := b.bw
	bw.Reset(w)
	bw.WriteString(envelopeOpen)
	for i := range msgs {
		b.scratch = b.scratch[:0]
		if i > 0 {
			b.scratch = append(b.scratch, ',')
		}
		b.scratch = appendMessage(b.scratch, &msgs[i])
		if _, err := bw.Write(b.scratch); err != nil {
			return err
		}
	}
	bw.WriteString(envelopeClose)
	return bw.Flush()
}

// bodyWriter is what writeMessages streams a body through: a 64 KiB buffer and the scratch
// one message is encoded in. Pooled: allocated per response, the buffer was most of a
// consume's bytes.
type bodyWriter struct {
	bw      *bufio.Writer
	scratch []byte
}

var bodyWriters = sync.Pool{New: func() any { return &bodyWriter{bw: bufio.NewWriterSize(nil, 64<<10)} }}

// release drops the response writer and pools b; a scratch grown past a buffer's size by a
// large message is dropped with it rather than kept.
func (b *bodyWriter) release() {
	b.bw.Reset(nil)
	if cap(b.scratch) > 64<<10 {
		b.scratch = nil
	}
	b.scratch = b.scratch[:0]
	bodyWriters.Put(b)
}

// ack serves POST /ack.
func (h *Handler) ack(w http.ResponseWriter, r *http.Request) {
	topic, handle, _, err := h.settleParams(w, r, "")
	if err != nil {
		writeErr(w, err)
		return
	}
	writeSettled(w, h.node.Ack(r.Context(), topic, handle))
}

// extend serves POST /extend: 200 and the new expiry.
func (h *Handler) extend(w http.ResponseWriter, r *http.Request) {
	topic, handle, d, err := h.settleParams(w, r, "visibility")
	if err != nil {
		writeErr(w, err)
		return
	}
	expiry, err := h.node.Extend(r.Context(), topic, handle, d)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, extendResponse{ReceiptHandle: handle.String(), Expiry: expiry.UTC()})
}

type extendResponse struct {
	ReceiptHandle string    `json:"receipt_handle"`
	Expiry        time.Time `json:"expiry"`
}

// nack serves POST /nack.
func (h *Handler) nack(w http.ResponseWriter, r *http.Request) {
	topic, handle, delay, err := h.settleParams(w, r, "delay")
	if err != nil {
		writeErr(w, err)
		return
	}
	writeSettled(w, h.node.Nack(r.Context(), topic, handle, delay))
}

// release serves POST /release: the record is visible again at once, the delivery not
// counted as an attempt (see Node.Release, which forwards it to another owner).
func (h *Handler) release(w http.ResponseWriter, r *http.Request) {
	topic, handle, _, err := h.settleParams(w, r, "")
	if err != nil {
		writeErr(w, err)
		return
	}
	writeSettled(w, h.node.Release(r.Context(), topic, handle))
}

// reject serves POST /reject: the record is quarantined at once (see Node.Reject, which
// forwards it to another owner).
func (h *Handler) reject(w http.ResponseWriter, r *http.Request) {
	topic, handle, _, err := h.settleParams(w, r, "")
	if err != nil {
		writeErr(w, err)
		return
	}
	if h.rejecter == nil {
		writeError(w, http.StatusNotImplemented, "unsupported", "httpapi: the node does not reject")
		return
	}
	writeSettled(w, h.rejecter.Reject(r.Context(), topic, handle))
}

// settleParams reads topic, receipt_handle and, when duration names one, that duration
// (visibility for an extend, delay for a nack) from the query or a form body.
func (h *Handler) settleParams(w http.ResponseWriter, r *http.Request, duration string) (topic string, handle router.Handle, d time.Duration, err error) {
	allowed := []string{"topic", "receipt_handle"}
	if duration != "" {
		allowed = append(allowed, duration)
	}
	p, err := formParams(w, r, allowed...)
	if err != nil {
		return "", router.Handle{}, 0, err
	}
	if topic, err = p.topic(); err != nil {
		return "", router.Handle{}, 0, err
	}
	if handle, err = p.handle(); err != nil {
		return "", router.Handle{}, 0, err
	}
	switch duration {
	case "visibility":
		d, err = p.duration(duration, router.MaxVisibility)
	case "delay":
		d, err = p.duration(duration, router.MaxDelay)
	}
	return topic, handle, d, err
}

// writeSettled answers an ack, nack, release or reject: 204 when done.
func writeSettled(w http.ResponseWriter, err error) {
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
