package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"

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
	if err := exactKeys(body, "topic", "receipt_handles"); err != nil {
		return "", nil, err
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

// exactKeys refuses a JSON object body whose keys are not each one of keys, spelt exactly,
// at most once. encoding/json matches a key to a field case-insensitively and lets a repeated
// key's last value win, so {"receipt_handles":[a],"Receipt_Handles":[b]} would ack b alone,
// while a proxy or a log in front of this node that reads the first (or only the exact
// spelling) sees a: one request read two ways. A body that is not an object is left to the
// decoder's own error.
func exactKeys(body []byte, keys ...string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := make(map[string]bool, len(keys))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		switch {
		case !slices.Contains(keys, key):
			return badParam("body", "unknown key %q (the keys are %q, spelt exactly)", key, keys)
		case seen[key]:
			return badParam("body", "key %q more than once", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}
