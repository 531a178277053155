package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The clients' side of the nodes' HTTP: the consume API (router/httpapi, under /queue),
// and the example's produce and status endpoints. (As in examples/cluster.)

// callTimeout bounds a call other than a consume's long-poll.
const callTimeout = 5 * time.Second

// A message is a delivered record, as the consume API sends it.
type message struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Value     string    `json:"value"`
	Timestamp time.Time `json:"timestamp"` // when the owner appended it
	Receipt   string    `json:"receipt_handle"`
	Attempt   int       `json:"attempt"`
	Reason    string    `json:"reason"`
}

// An apiError is an answer other than the one a call hoped for.
type apiError struct {
	status int
	code   string // the consume API's error code ("gone", "already_settled", ...)
	text   string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.status, e.code, e.text)
}

// answerError reads a refusal's body.
func answerError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var body struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(b, &body) != nil {
		body.Error = strings.TrimSpace(string(b))
	}
	return &apiError{status: resp.StatusCode, code: body.Code, text: body.Error}
}

// api calls the nodes.
type api struct {
	http *http.Client
}

func (a *api) do(req *http.Request, want int, into any) error {
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		if resp.StatusCode == http.StatusNoContent && want == http.StatusOK {
			return nil // a consume with nothing to deliver
		}
		return answerError(resp)
	}
	if into == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// consume long-polls node base (http://addr) for up to max records, waiting up to wait.
func (a *api) consume(ctx context.Context, base string, max int, wait time.Duration) ([]message, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+callTimeout)
	defer cancel()
	q := url.Values{"topic": {topic}, "max": {strconv.Itoa(max)}, "wait": {wait.String()}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/queue/consume?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var body struct {
		Messages []message `json:"messages"`
	}
	err = a.do(req, http.StatusOK, &body)
	return body.Messages, err
}

// settle POSTs a settle (ack, nack) of handle to node base.
func (a *api) settle(ctx context.Context, base, op, handle string, extra url.Values) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	form := url.Values{"topic": {topic}, "receipt_handle": {handle}}
	for k, v := range extra {
		form[k] = v
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/queue/"+op, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return a.do(req, http.StatusNoContent, nil)
}

func (a *api) ack(ctx context.Context, base, handle string) error {
	return a.settle(ctx, base, "ack", handle, nil)
}

func (a *api) nack(ctx context.Context, base, handle string) error {
	return a.settle(ctx, base, "nack", handle, nil) // no delay: visible again at once
}

// ackBatch acks handles in one request, and returns each one's answer (nil for a 204).
// The error is the request's own: then no handle has an answer.
func (a *api) ackBatch(ctx context.Context, base string, handles []string) ([]error, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	b, err := json.Marshal(map[string]any{"topic": topic, "receipt_handles": handles})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/queue/ack-batch", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	var body struct {
		Results []struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
			Code   string `json:"code"`
		} `json:"results"`
	}
	if err := a.do(req, http.StatusOK, &body); err != nil {
		return nil, err
	}
	if len(body.Results) != len(handles) {
		return nil, fmt.Errorf("ack-batch: %d results for %d handles", len(body.Results), len(handles))
	}
	errs := make([]error, len(handles))
	for i, r := range body.Results {
		if r.Status != http.StatusNoContent {
			errs[i] = &apiError{status: r.Status, code: r.Code, text: r.Error}
		}
	}
	return errs, nil
}

// produce appends value to partition p through its owner, base, and returns its offset. A
// node that does not own p (any more, or yet) answers 409.
func (a *api) produce(ctx context.Context, base string, p int32, value string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/produce?partition="+strconv.Itoa(int(p)), strings.NewReader(value))
	if err != nil {
		return 0, err
	}
	var out produced
	if err := a.do(req, http.StatusOK, &out); err != nil {
		return 0, err
	}
	return out.Offset, nil
}

// status asks node base for its status.
func (a *api) status(ctx context.Context, base string) (nodeStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var st nodeStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status", nil)
	if err != nil {
		return st, err
	}
	err = a.do(req, http.StatusOK, &st)
	return st, err
}

// outcomeOf says how an ack answered err ended: see the consume API's errors. An ack that
// got no answer, or whose owner sent none (502), may have been applied.
func outcomeOf(err error) (outcome, error) {
	if err == nil {
		return acked, nil
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return ackUnsure, nil // no answer: the connection failed, or the call timed out
	}
	switch {
	case ae.status == http.StatusGone && ae.code == "already_settled":
		return ackSettled, nil
	case ae.status == http.StatusGone:
		return ackLate, nil
	case ae.status == http.StatusServiceUnavailable:
		return ackRefused, nil
	case ae.status >= 500:
		return ackUnsure, nil
	}
	return held, fmt.Errorf("ack: %w", err)
}
