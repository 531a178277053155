package queueclient

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

// CallTimeout bounds a call other than a consume's long-poll.
const CallTimeout = 5 * time.Second

// PeerCallsHeader carries, on a consume's answer, the calls to peers the node made for it:
// examples/cluster's nodes count them (its node.go says how), and its clients tell by them how
// the records reached them.
const PeerCallsHeader = "Peer-Calls"

// A Message is a delivered record, as the consume API sends it.
type Message struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Value     string    `json:"value"`
	Timestamp time.Time `json:"timestamp"` // when the owner appended it
	Receipt   string    `json:"receipt_handle"`
	// Expiry is when the lease ends unless extended, on the clock of the node that answered:
	// a record a gateway read ahead comes with up to its hold less than the visibility
	// timeout, counted from before the consume began.
	Expiry  time.Time `json:"expiry"`
	Attempt int       `json:"attempt"`
	Reason  string    `json:"reason"`
}

// An Error is an answer other than the one a call hoped for.
type Error struct {
	Status int
	Code   string // the consume API's error code ("gone", "already_settled", ...)
	Text   string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Text)
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
	return &Error{Status: resp.StatusCode, Code: body.Code, Text: body.Error}
}

// A Client calls the nodes of one topic.
type Client struct {
	HTTP  *http.Client
	Topic string
}

// New returns a client of topic's nodes over transport.
func New(transport http.RoundTripper, topic string) *Client {
	return &Client{HTTP: &http.Client{Transport: transport}, Topic: topic}
}

// NewLocal returns a client of topic on nodes at 127.0.0.1, as the examples' parents use:
// HTTP/1.1, a connection per call in flight, kept for the next until the client's
// HTTP.CloseIdleConnections.
func NewLocal(topic string) *Client {
	return New(&http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}, topic)
}

// do sends req and decodes a want answer into into (if not nil). A consume's 204 (nothing
// to deliver) is taken for a 200. header, if not nil, is given the answer's header, whatever
// its status.
func (c *Client) do(req *http.Request, want int, into any, header func(http.Header)) error {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if header != nil {
		header(resp.Header)
	}
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

// Consume long-polls node base (http://addr) for up to max records, waiting up to wait.
func (c *Client) Consume(ctx context.Context, base string, max int, wait time.Duration) ([]Message, error) {
	msgs, _, err := c.ConsumeHeader(ctx, base, max, wait)
	return msgs, err
}

// ConsumeHeader is Consume, and returns the answer's header too (nil if none came).
func (c *Client) ConsumeHeader(ctx context.Context, base string, max int, wait time.Duration) ([]Message, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+CallTimeout)
	defer cancel()
	q := url.Values{"topic": {c.Topic}, "max": {strconv.Itoa(max)}, "wait": {wait.String()}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/queue/consume?"+q.Encode(), nil)
	if err != nil {
		return nil, nil, err
	}
	var body struct {
		Messages []Message `json:"messages"`
	}
	var h http.Header
	err = c.do(req, http.StatusOK, &body, func(rh http.Header) { h = rh })
	return body.Messages, h, err
}

// Settle POSTs a settle (op "ack", "nack") of handle to node base, with the form's extra
// fields.
func (c *Client) Settle(ctx context.Context, base, op, handle string, extra url.Values) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	form := url.Values{"topic": {c.Topic}, "receipt_handle": {handle}}
	for k, v := range extra {
		form[k] = v
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/queue/"+op, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req, http.StatusNoContent, nil, nil)
}

// Ack acks handle at node base.
func (c *Client) Ack(ctx context.Context, base, handle string) error {
	return c.Settle(ctx, base, "ack", handle, nil)
}

// Nack nacks handle at node base, with no delay: the record is visible again at once.
func (c *Client) Nack(ctx context.Context, base, handle string) error {
	return c.Settle(ctx, base, "nack", handle, nil)
}

// AckBatch acks handles in one request, and returns each one's answer (nil for a 204).
// The error is the request's own: then no handle has an answer.
func (c *Client) AckBatch(ctx context.Context, base string, handles []string) ([]error, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	b, err := json.Marshal(map[string]any{"topic": c.Topic, "receipt_handles": handles})
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
	if err := c.do(req, http.StatusOK, &body, nil); err != nil {
		return nil, err
	}
	if len(body.Results) != len(handles) {
		return nil, fmt.Errorf("ack-batch: %d results for %d handles", len(body.Results), len(handles))
	}
	errs := make([]error, len(handles))
	for i, r := range body.Results {
		if r.Status != http.StatusNoContent {
			errs[i] = &Error{Status: r.Status, Code: r.Code, Text: r.Error}
		}
	}
	return errs, nil
}

// Produced is the produce endpoint's answer.
type Produced struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// Produce appends value to partition p through its owner, base (POST /produce), and
// returns its offset.
func (c *Client) Produce(ctx context.Context, base string, p int32, value string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/produce?partition="+strconv.Itoa(int(p)), strings.NewReader(value))
	if err != nil {
		return 0, err
	}
	var out Produced
	if err := c.do(req, http.StatusOK, &out, nil); err != nil {
		return 0, err
	}
	return out.Offset, nil
}

// Status asks node base for its status (GET /status) and decodes it into into.
func (c *Client) Status(ctx context.Context, base string, into any) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status", nil)
	if err != nil {
		return err
	}
	return c.do(req, http.StatusOK, into, nil)
}

// StatusOf asks node base for its status, as a T.
func StatusOf[T any](ctx context.Context, c *Client, base string) (T, error) {
	var st T
	err := c.Status(ctx, base, &st)
	return st, err
}

// An Answer is what an ack's answer says of the record: see the consume API's errors.
type Answer uint8

const (
	Acked    Answer = iota // answered 204
	Settled                // already_settled (410): an earlier ack took it
	Late                   // gone (410): the lease had lapsed first
	Refused                // 503: refused unapplied
	Unsure                 // no answer, or the owner sent none (5xx): it may have been applied
	Rejected               // any other answer: the call was wrong
)

// AckAnswer says how an ack answered err ended. An ack that got no answer, or whose owner
// sent none (502), may have been applied.
func AckAnswer(err error) Answer {
	if err == nil {
		return Acked
	}
	var ae *Error
	if !errors.As(err, &ae) {
		return Unsure // no answer: the connection failed, or the call timed out
	}
	switch {
	case ae.Status == http.StatusGone && ae.Code == "already_settled":
		return Settled
	case ae.Status == http.StatusGone:
		return Late
	case ae.Status == http.StatusServiceUnavailable:
		return Refused
	case ae.Status >= 500:
		return Unsure
	}
	return Rejected
}
