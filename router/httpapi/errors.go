package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"narad.dev/consume/router"
)

// errorBody is the body of every error response.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// statusOf maps a node's error to its status and code: router.HTTPStatus, except that an
// unknown topic is a 404 here, and that a handle of an offset already settled (a repeated
// ack) is told apart from one whose lease is gone by its code.
func statusOf(err error) (int, string) {
	var pe *paramError
	switch {
	case errors.As(err, &pe):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, router.ErrUnknownTopic):
		return http.StatusNotFound, "unknown_topic"
	case errors.Is(err, router.ErrAlreadySettled):
		return http.StatusGone, "already_settled"
	}
	status := router.HTTPStatus(err)
	switch status {
	case http.StatusBadRequest:
		return status, "bad_request"
	case http.StatusGone:
		return status, "gone"
	case http.StatusBadGateway:
		return status, "owner_unreachable"
	case http.StatusServiceUnavailable:
		return status, "unavailable"
	case http.StatusNotImplemented:
		return status, "unsupported"
	}
	return http.StatusInternalServerError, "internal"
}

// writeErr answers err with its status and a JSON error body.
func writeErr(w http.ResponseWriter, err error) {
	status, code := statusOf(err)
	writeError(w, status, code, err.Error())
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // the values written here always marshal
		status, body = http.StatusInternalServerError, []byte(`{"error":"cannot encode the response","code":"internal"}`)
	}
	body = append(body, '\n')
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}
