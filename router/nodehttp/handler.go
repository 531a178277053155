package nodehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// Handler serves the frames other nodes' Transports send: it takes each POST's body as a
// request frame from the node its Header names, hands it to Serve with the request's
// context (which ends when the caller gives up), and answers the reply frame with 200.
//
//	400  no Header, or one that is not path-escaped; a body cut short
//	403  Authorize refused the caller
//	405  not a POST
//	413  a body over MaxFrame
//	500  Serve failed, or its reply is over MaxFrame
//
// A POST over HTTP/1.1 asking to upgrade (Upgrade: narad-frames/1, what a Transport sends
// unless Unframed) that passes the same checks switches its connection to framed calls from
// that node (101), served until the connection ends or Close (see the package documentation,
// "Framed connections"); one after Close is refused (503). HTTP/2 has no upgrade: a request
// over it is served as a frame, whatever its headers. A host closes its Handler after its
// server's Shutdown, which does not wait for upgraded connections.
//
// A Handler is safe for concurrent use; set its fields before it serves, and do not copy it
// once it has.
type Handler struct {
	// Serve answers one frame from node from: a router.Node's Serve method. Required. The
	// reply it returns is the Handler's from then on (a framed connection may write a large
	// one from where it lies, after Serve returned): Serve must not change it afterwards.
	Serve func(ctx context.Context, from string, frame []byte) ([]byte, error)
	// Authorize, when set, is asked before the body is read whether the request may speak
	// as node from (the peer's certificate in r.TLS, its address, a token in a header of the
	// host's own): an error refuses it with 403, the error's text as the body. The node
	// takes from as given, so a host whose peers are not all trusted checks it here.
	Authorize func(r *http.Request, from string) error

	framed framedConns // the connections upgraded to framed calls
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.Serve == nil {
		http.Error(w, "nodehttp: the handler has no Serve", http.StatusInternalServerError)
		return
	}
	if r.Method != http.MethodPost {
		w.Header()["Allow"] = allowPost
		http.Error(w, "nodehttp: frames are POSTed", http.StatusMethodNotAllowed)
		return
	}
	values := r.Header[Header]
	if len(values) != 1 || values[0] == "" {
		http.Error(w, "nodehttp: the "+Header+" header names the calling node, once", http.StatusBadRequest)
		return
	}
	from, err := url.PathUnescape(values[0])
	if err != nil {
		http.Error(w, "nodehttp: the "+Header+" header is not path-escaped", http.StatusBadRequest)
		return
	}
	if h.Authorize != nil {
		if err := h.Authorize(r, from); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
	}
	if wantsUpgrade(r) {
		h.upgrade(w, r, from)
		return
	}
	if r.ContentLength > MaxFrame {
		http.Error(w, fmt.Sprintf("nodehttp: a frame of %d bytes (at most %d)", r.ContentLength, MaxFrame), http.StatusRequestEntityTooLarge)
		return
	}
	var body io.Reader = r.Body
	if r.ContentLength < 0 {
		// No declared length: the server stops reading the connection past the bound.
		body = http.MaxBytesReader(w, r.Body, MaxFrame)
	}
	frame, err := readFrame(body, r.ContentLength)
	if err != nil {
		if _, over := errors.AsType[*http.MaxBytesError](err); over || errors.Is(err, ErrFrameTooLarge) {
			http.Error(w, fmt.Sprintf("nodehttp: a frame of more than %d bytes", MaxFrame), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "nodehttp: reading the frame: "+err.Error(), http.StatusBadRequest)
		return
	}
	reply, err := h.Serve(r.Context(), from, frame)
	if err != nil {
		http.Error(w, "nodehttp: serving the frame: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if len(reply) > MaxFrame {
		http.Error(w, fmt.Sprintf("nodehttp: a reply of %d bytes (at most %d)", len(reply), MaxFrame), http.StatusInternalServerError)
		return
	}
	if len(reply) > smallReply {
		// Declared, so that the caller sizes its buffer once.
		hdr := w.Header()
		hdr["Content-Type"] = octetStream
		hdr["Content-Length"] = []string{strconv.Itoa(len(reply))}
	}
	w.Write(reply) // 200; a caller gone meanwhile gets no reply: it has its error
}

// smallReply is the longest reply written without headers of the handler's own. The server
// buffers it whole and declares its length itself, and an HTTP/2 server writes the reply of
// a handler that set no header without first waiting for its connection's goroutine to
// write the headers (a wait that costs a small frame about 15% of a loopback round trip).
// Longer replies
// declare their length (and type) so that the caller sizes its buffer once; the wait is
// small beside their transfer.
const smallReply = 2 << 10

// allowPost is the Allow header of a 405 (never modified).
var allowPost = []string{http.MethodPost}

// ConfigureServer makes srv accept HTTP/2 cleartext with prior knowledge (what a Transport
// speaks with Unframed, and to a peer that does not upgrade) besides what it accepted:
// HTTP/1.1 (framed connections are an upgrade from it) and, over TLS, HTTP/2, when
// srv.Protocols is nil. Call it before srv serves.
func ConfigureServer(srv *http.Server) {
	p := new(http.Protocols)
	if srv.Protocols != nil {
		*p = *srv.Protocols
	} else {
		p.SetHTTP1(true)
		p.SetHTTP2(true)
	}
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = p
}
