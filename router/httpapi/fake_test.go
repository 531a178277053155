package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
	"narad.dev/consume/router/internal/fronttest"
)

// fakeNode answers every call with its Err, and records the calls.
type fakeNode = fronttest.FakeNode

var _ httpapi.Node = (*fakeNode)(nil)

func fakeHandler(t *testing.T, f httpapi.Node) *httpapi.Handler {
	h, err := httpapi.New(f, httpapi.Options{})
	require.NoError(t, err)
	return h
}

// TestErrorStatuses: each error of the node maps to its status and code.
func TestErrorStatuses(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{router.ErrUnknownTopic, 404, "unknown_topic"},
		{fmt.Errorf("x: %w", router.ErrTopicDropped), 500, "internal"},
		{fmt.Errorf("%w: %w", router.ErrUnknownTopic, router.ErrTopicDropped), 404, "unknown_topic"},
		{router.ErrGone, 410, "gone"},
		{router.ErrAlreadySettled, 410, "already_settled"},
		{router.ErrMalformedHandle, 400, "bad_request"},
		{router.ErrInvalidArgument, 400, "bad_request"},
		{fmt.Errorf("owner b: %w", router.ErrTransport), 502, "owner_unreachable"},
		{fmt.Errorf("owner b: %w", router.ErrUnavailable), 503, "unavailable"},
		{fmt.Errorf("owner b: %w", router.ErrUnsupportedOp), 501, "unsupported"},
		{fmt.Errorf("%w: %w", router.ErrInvalidArgument, router.ErrUnsupportedOp), 400, "bad_request"},
		{router.ErrClosed, 503, "unavailable"},
		{router.ErrNotLocal, 503, "unavailable"},
		{router.ErrLogClosed, 503, "unavailable"},
		{context.Canceled, 503, "unavailable"},
		{errors.New("disk on fire"), 500, "internal"},
	} {
		f := &fakeNode{Err: tc.err}
		h := fakeHandler(t, f)
		for _, req := range [][2]string{
			{"GET", "/consume?topic=orders"},
			{"GET", "/consume?topic=orders&partition=0&offset=0"},
			{"POST", "/ack?topic=orders&receipt_handle=0:0:1"},
			{"POST", "/extend?topic=orders&receipt_handle=0:0:1"},
			{"POST", "/nack?topic=orders&receipt_handle=0:0:1"},
			{"POST", "/reject?topic=orders&receipt_handle=0:0:1"},
		} {
			body := failed(t, do(h, req[0], req[1]), tc.status)
			require.Equal(t, tc.code, body.Code, "%v %s", tc.err, req[1])
			require.Equal(t, tc.err.Error(), body.Error)
		}
		rec := do(h, "POST", "/ack-batch?topic=orders", `{"receipt_handles":["0:0:1","0:0:2"]}`)
		require.Equal(t, http.StatusOK, rec.Code)
		require.Contains(t, rec.Body.String(), fmt.Sprintf(`"status":%d,`, tc.status))
		require.Contains(t, rec.Body.String(), fmt.Sprintf(`"code":%q`, tc.code))
	}
}

// TestRequestsReachTheNode: what each route hands the node, parsed.
func TestRequestsReachTheNode(t *testing.T) {
	f := &fakeNode{}
	h := fakeHandler(t, f)
	do(h, "GET", "/consume?topic=orders&max=7&wait=2500&visibility=1m&partition=3")
	do(h, "GET", "/consume?topic=orders&wait=1.5s")
	do(h, "GET", "/consume?topic=orders&partition=2&offset=40&max=9")
	do(h, "POST", "/ack?topic=orders&receipt_handle=0:0:1")
	do(h, "POST", "/extend?topic=orders&receipt_handle=0:0:1&visibility=90000")
	do(h, "POST", "/nack", "topic=orders&receipt_handle=0:0:1&delay=2s")
	do(h, "POST", "/ack-batch?topic=orders", `{"receipt_handles":["0:0:1","0:1:2"]}`)
	do(h, "POST", "/reject", "topic=orders&receipt_handle=0:2:3")
	require.Equal(t, []string{
		"Consume orders {Max:7 Wait:2.5s Pinned:true Partition:3 Visibility:1m0s}",
		"Consume orders {Max:1 Wait:1.5s Pinned:false Partition:0 Visibility:0s}",
		"Replay orders 2 40 9",
		"Ack orders 0:0:1",
		"Extend orders 0:0:1 1m30s",
		"Nack orders 0:0:1 2s",
		"AckBatch orders [0:0:1 0:1:2]",
		"Reject orders 0:2:3",
	}, f.Calls)
	rec := do(h, "POST", "/extend?topic=orders&receipt_handle=0:0:1")
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"receipt_handle":"0:0:1","expiry":"1970-01-01T00:01:40Z"}`, rec.Body.String())
}

// TestContextReachesTheNode: the node is handed the request's context, so a client that
// leaves ends its long-poll.
func TestContextReachesTheNode(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "mine")
	var got context.Context
	f := &fakeNode{OnConsume: func(ctx context.Context) { got = ctx }}
	doCtx(ctx, fakeHandler(t, f), "/consume?topic=orders&wait=1s")
	require.Equal(t, "mine", got.Value(key{}))
}

func leasedMessages(n int) []router.Message {
	return fronttest.LeasedMessages(n, "orders", time.Time{})
}

// TestGoneClientGetsNothing: records a consume delivered as its client left are given back
// at once, not left invisible until their visibility timeout.
func TestGoneClientGetsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeNode{Msgs: leasedMessages(2), OnConsume: func(context.Context) { cancel() }}
	rec := doCtx(ctx, fakeHandler(t, f), "/consume?topic=orders&max=2")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, []string{"0:0:1", "0:1:2"}, f.Released)
}

// TestFailedWriteGivesBack: records whose response could not be written are given back,
// released (at their owner, by the node, for a partition another node owns), so none counts
// as an attempt.
func TestFailedWriteGivesBack(t *testing.T) {
	f := &fakeNode{Msgs: leasedMessages(3)}
	h := fakeHandler(t, f)
	req := httptest.NewRequest(http.MethodGet, "/consume?topic=orders&max=3", nil)
	h.ServeHTTP(fronttest.FailingWriter{ResponseRecorder: httptest.NewRecorder()}, req)
	require.Equal(t, []string{"0:0:1", "0:1:2", "0:2:3"}, f.Released)
	require.Empty(t, f.Nacked)
}

// TestFitMeasuresTheEncoding: FitResponse is handed the encoder's exact sizes (one
// separator each) and what the envelope leaves of router.ResponseLimit.
func TestFitMeasuresTheEncoding(t *testing.T) {
	f := &fakeNode{Msgs: leasedMessages(3)}
	rec := do(fakeHandler(t, f), "GET", "/consume?topic=orders&max=3")
	body := rec.Body.Len()
	require.Len(t, messages(t, rec), 3)
	require.Equal(t, httpapi.BodyLimit, f.FitLimit)
	require.Equal(t, router.ResponseLimit-len(`{"messages":[]}`)+1, f.FitLimit)
	sum := 0
	for i, size := range f.FitSizes {
		require.Equal(t, httpapi.MessageLen(&f.Msgs[i])+1, size)
		sum += size
	}
	require.Equal(t, len(`{"messages":[]}`)-1+sum, body)
}

// noReject is a Node written before Reject: the embedded interface hides fakeNode's.
type noReject struct{ httpapi.Node }

// TestRejectWithoutRejecter: over a Node that has no Reject, POST /reject is a 501 once its
// parameters are checked (a malformed one is still a 400), and the node is not called.
func TestRejectWithoutRejecter(t *testing.T) {
	f := &fakeNode{}
	h := fakeHandler(t, noReject{f})
	body := failed(t, do(h, "POST", "/reject?topic=orders&receipt_handle=0:0:1"), http.StatusNotImplemented)
	require.Equal(t, "unsupported", body.Code)
	require.Equal(t, "bad_request", failed(t, do(h, "POST", "/reject?topic=orders&receipt_handle=junk"), http.StatusBadRequest).Code)
	require.Empty(t, f.Calls)
}
