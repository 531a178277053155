package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"narad.dev/consume/router"
)

// batchRequest is the body of POST /ack-batch, {"topic": ..., "receipt_handles": [...]}
// (decodeBatchRequest).
type batchRequest struct {
	Topic          *string
	ReceiptHandles []string
}

// batchResponse answers POST /ack-batch: one result per handle, in the request's order.
type batchResponse struct {
	Results []batchResult `json:"results"`
}

type batchResult struct {
	ReceiptHandle string `json:"receipt_handle"`
	Status        int    `json:"status"`
	Error         string `json:"error,omitempty"`
	Code          string `json:"code,omitempty"`
}

// ackBatch serves POST /ack-batch: the topic in the query or the body, the handles in the
// body; 200 with each handle's own status.
func (h *Handler) ackBatch(w http.ResponseWriter, r *http.Request) {
	topic, handles, err := batchParams(w, r)
	if err != nil {
		writeErr(w, err)
		return
	}
	// A handle whose text does not parse is answered 400 by its parse error; the node gets
	// the zero handle in its place, which it refuses as malformed with no effect.
	parsed := make([]router.Handle, len(handles))
	malformed := make([]error, len(handles))
	for i, text := range handles {
		parsed[i], malformed[i] = router.ParseHandle(text)
	}
	errs := h.node.AckBatch(r.Context(), topic, parsed)
	resp := batchResponse{Results: make([]batchResult, len(handles))}
	for i, handle := range handles {
		res := &resp.Results[i]
		res.ReceiptHandle = handle
		res.Status = http.StatusNoContent
		err := malformed[i]
		if err == nil && i < len(errs) {
			err = errs[i]
		}
		if err != nil {
			res.Status, res.Code = statusOf(err)
			res.Error = err.Error()
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// batchParams reads and validates a batch ack's topic and handles.
func batchParams(w http.ResponseWriter, r *http.Request) (string, []string, error) {
	p, err := queryParams(r, "topic")
	if err != nil {
		return "", nil, err
	}
	body, err := readBody(w, r, "application/json")
	if err != nil {
		return "", nil, err
	}
	if len(body) == 0 {
		return "", nil, badParam("body", `missing: {"receipt_handles":[...]}`)
	}
	req, err := decodeBatchRequest(body)
	if err != nil {
		return "", nil, err
	}
	if req.Topic != nil {
		if q, ok := p["topic"]; ok && q != *req.Topic {
			return "", nil, badParam("topic", "the query and the body name different topics")
		}
		p["topic"] = *req.Topic
	}
	topic, err := p.topic()
	if err != nil {
		return "", nil, err
	}
	switch n := len(req.ReceiptHandles); {
	case n == 0:
		return "", nil, badParam("receipt_handles", "missing or empty")
	case n > router.MaxBatch:
		return "", nil, badParam("receipt_handles", "%d handles, more than %d", n, router.MaxBatch)
	}
	return topic, req.ReceiptHandles, nil
}

// decodeBatchRequest reads a batch ack's JSON body in one pass: an object whose keys are
// spelt exactly and appear once, and nothing after it. encoding/json alone matches a key to a
// field case-insensitively and lets a repeated key's last value win, so
// {"receipt_handles":[a],"Receipt_Handles":[b]} would ack b alone, while a proxy or a log in
// front of this node that reads the first (or only the exact spelling) sees a: one request
// read two ways.
func decodeBatchRequest(body []byte) (batchRequest, error) {
	var req batchRequest
	notBatch := func(err error) error { return badParam("body", "not the JSON of a batch ack: %v", err) }
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return req, notBatch(err)
	}
	if tok != json.Delim('{') {
		return req, badParam("body", "not the JSON of a batch ack: %v is not an object", tok)
	}
	seen := make(map[string]bool, 2)
	for dec.More() {
		if tok, err = dec.Token(); err != nil {
			return req, notBatch(err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return req, badParam("body", "key %q more than once", key)
		}
		seen[key] = true
		switch key {
		case "topic":
			err = dec.Decode(&req.Topic)
		case "receipt_handles":
			err = dec.Decode(&req.ReceiptHandles)
		default:
			return req, badParam("body", `unknown key %q (the keys are "topic" and "receipt_handles", spelt exactly)`, key)
		}
		if err != nil {
			return req, notBatch(err)
		}
	}
	if _, err := dec.Token(); err != nil { // the object's end
		return req, notBatch(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, badParam("body", "data after the JSON object")
	}
	return req, nil
}
