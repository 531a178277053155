package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"narad.dev/consume/router"
)

// batchRequest is the body of POST /ack-batch.
type batchRequest struct {
	Topic          *string  `json:"topic"`
	ReceiptHandles []string `json:"receipt_handles"`
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
	var req batchRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "", nil, badParam("body", "not the JSON of a batch ack: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", nil, badParam("body", "data after the JSON object")
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
