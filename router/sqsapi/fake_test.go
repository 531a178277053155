package sqsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/fronttest"
	"narad.dev/consume/router/sqsapi"
)

// fakeNode answers every call with its Err, and records the calls.
type fakeNode = fronttest.FakeNode

var _ sqsapi.Node = (*fakeNode)(nil)

func fakeHandler(t *testing.T, f sqsapi.Node, cfg ...func(*sqsapi.Config)) *sqsapi.Handler {
	c := sqsapi.Config{Queues: func(name string) (string, bool) { return "topic-" + name, true }, BaseURL: baseURL}
	for _, fn := range cfg {
		fn(&c)
	}
	h, err := sqsapi.New(f, c)
	require.NoError(t, err)
	return h
}

// TestNodeErrors: each error of the node is answered with SQS's code for it, on every
// action that reaches the node; a host error is InternalFailure and is logged.
func TestNodeErrors(t *testing.T) {
	requests := [][2]string{
		{"ReceiveMessage", `{"QueueUrl":"` + queueURL + `"}`},
		{"DeleteMessage", `{"QueueUrl":"` + queueURL + `","ReceiptHandle":"` + rh("0:0:1") + `"}`},
		{"ChangeMessageVisibility", `{"QueueUrl":"` + queueURL + `","ReceiptHandle":"` + rh("0:0:1") + `","VisibilityTimeout":5}`},
		{"ChangeMessageVisibility", `{"QueueUrl":"` + queueURL + `","ReceiptHandle":"` + rh("0:0:1") + `","VisibilityTimeout":0}`},
		{"GetQueueAttributes", `{"QueueUrl":"` + queueURL + `","AttributeNames":["All"]}`},
	}
	batches := [][2]string{
		{"DeleteMessageBatch", `{"QueueUrl":"` + queueURL + `","Entries":[{"Id":"a","ReceiptHandle":"` + rh("0:0:1") + `"}]}`},
		{"ChangeMessageVisibilityBatch", `{"QueueUrl":"` + queueURL + `","Entries":[{"Id":"a","ReceiptHandle":"` + rh("0:0:1") + `","VisibilityTimeout":5}]}`},
	}
	for _, tc := range []struct {
		err    error
		status int
		code   string
		query  string
		logged bool
	}{
		{router.ErrUnknownTopic, 400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue;Sender", false},
		{fmt.Errorf("owner b: %w", router.ErrUnavailable), 503, "ServiceUnavailable", "ServiceUnavailable;Receiver", false},
		{fmt.Errorf("owner b: %w", router.ErrTransport), 503, "ServiceUnavailable", "ServiceUnavailable;Receiver", false},
		{router.ErrClosed, 503, "ServiceUnavailable", "ServiceUnavailable;Receiver", false},
		{router.ErrLogClosed, 503, "ServiceUnavailable", "ServiceUnavailable;Receiver", false},
		{context.Canceled, 503, "ServiceUnavailable", "ServiceUnavailable;Receiver", false},
		{router.ErrMalformedHandle, 404, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid;Sender", false},
		{router.ErrInvalidArgument, 400, "InvalidParameterValue", "InvalidParameterValue;Sender", false},
		{fmt.Errorf("%w: nil log", router.ErrHostContract), 500, "InternalFailure", "InternalFailure;Receiver", true},
		{errors.New("disk on fire"), 500, "InternalFailure", "InternalFailure;Receiver", true},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			var logs bytes.Buffer
			f := &fakeNode{Err: tc.err}
			h := fakeHandler(t, f, func(c *sqsapi.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
			for _, req := range requests {
				got := failed(t, call(h, req[0], req[1]))
				require.Equal(t, sqsError{tc.status, tc.code, tc.query, got.Message}, got, req[0])
			}
			for _, req := range batches {
				var out batchResult
				ok(t, call(h, req[0], req[1]), &out)
				require.Equal(t, []string{"a=" + codeQuery(tc.query)}, out.failedCodes(), req[0])
				require.Equal(t, tc.status < 500 && tc.status != 503, out.Failed[0].SenderFault)
			}
			require.Equal(t, tc.logged, bytes.Contains(logs.Bytes(), []byte("internal failure")), logs.String())
		})
	}
}

// codeQuery is the code part of an x-amzn-query-error value.
func codeQuery(header string) string {
	code, _, _ := strings.Cut(header, ";")
	return code
}

// TestRequestsReachTheNode: what each action hands the node, parsed, on the topic Queues
// names for the queue.
func TestRequestsReachTheNode(t *testing.T) {
	f := &fakeNode{Status: []router.PartitionStatus{{Backlog: 10, Leased: 2, Delayed: 1, AckedAhead: 3, Quarantined: 1}, {Backlog: 1, Leased: 2}}}
	h := fakeHandler(t, f)
	for _, req := range [][2]string{
		{"ReceiveMessage", `{"QueueUrl":"` + queueURL + `","MaxNumberOfMessages":7,"WaitTimeSeconds":20,"VisibilityTimeout":43200}`},
		{"ReceiveMessage", `{"QueueUrl":"` + queueURL + `"}`},
		{"DeleteMessage", `{"QueueUrl":"` + queueURL + `","ReceiptHandle":"` + rh("0:1:2") + `"}`},
		{"DeleteMessageBatch", `{"QueueUrl":"` + queueURL + `","Entries":[{"Id":"a","ReceiptHandle":"` + rh("0:1:2") + `"},{"Id":"b","ReceiptHandle":"x"},{"Id":"c","ReceiptHandle":"` + rh("1:2:3") + `"}]}`},
		{"ChangeMessageVisibility", `{"QueueUrl":"` + queueURL + `","ReceiptHandle":"` + rh("0:1:2") + `","VisibilityTimeout":90}`},
		{"ChangeMessageVisibility", `{"QueueUrl":"` + queueURL + `","ReceiptHandle":"` + rh("0:1:2") + `","VisibilityTimeout":0}`},
		{"ChangeMessageVisibilityBatch", `{"QueueUrl":"` + queueURL + `","Entries":[{"Id":"a","ReceiptHandle":"` + rh("0:1:2") + `","VisibilityTimeout":0},{"Id":"b","ReceiptHandle":"` + rh("1:2:3") + `","VisibilityTimeout":1}]}`},
		{"GetQueueAttributes", `{"QueueUrl":"` + queueURL + `","AttributeNames":["All"]}`},
	} {
		ok(t, call(h, req[0], req[1]), nil)
	}
	require.Equal(t, []string{
		"Consume topic-orders {Max:7 Wait:20s Pinned:false Partition:0 Visibility:12h0m0s}",
		"Consume topic-orders {Max:1 Wait:0s Pinned:false Partition:0 Visibility:0s}",
		"Ack topic-orders 0:1:2",
		"AckBatch topic-orders [0:1:2 1:2:3]",
		"Extend topic-orders 0:1:2 1m30s",
		"Nack topic-orders 0:1:2 0s",
		"Nack topic-orders 0:1:2 0s",
		"Extend topic-orders 1:2:3 1s",
		"TopicStatus topic-orders",
	}, f.Calls)
	var out struct{ Attributes map[string]string }
	ok(t, call(h, "GetQueueAttributes", `{"QueueUrl":"`+queueURL+`","AttributeNames":["All"]}`), &out)
	require.Equal(t, map[string]string{
		"ApproximateNumberOfMessages": "3", "ApproximateNumberOfMessagesNotVisible": "4", "ApproximateNumberOfMessagesDelayed": "1",
	}, out.Attributes, "visible: 10-2-1-3-1 and max(0, 1-2)")
}

func leasedMessages(n int) []router.Message { return fronttest.LeasedMessages(n, "t", sentAt) }

// TestGoneClientGetsNothing: records a receive took as its client left are given back at
// once, not left invisible until their visibility timeout.
func TestGoneClientGetsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeNode{Msgs: leasedMessages(2), OnConsume: func(context.Context) { cancel() }}
	got := failed(t, callCtx(ctx, fakeHandler(t, f), "ReceiveMessage", `{"QueueUrl":"`+queueURL+`","MaxNumberOfMessages":2}`))
	require.Equal(t, "ServiceUnavailable", got.Type)
	require.Equal(t, []string{"0:0:1", "0:1:2"}, f.Released)
}

// TestFailedWriteGivesBack: records whose response could not be written are released.
func TestFailedWriteGivesBack(t *testing.T) {
	f := &fakeNode{Msgs: leasedMessages(3)}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte(`{"QueueUrl":"`+queueURL+`","MaxNumberOfMessages":3}`)))
	req.Header.Set("X-Amz-Target", "AmazonSQS.ReceiveMessage")
	fakeHandler(t, f).ServeHTTP(fronttest.FailingWriter{ResponseRecorder: httptest.NewRecorder()}, req)
	require.Equal(t, []string{"0:0:1", "0:1:2", "0:2:3"}, f.Released)
}

// TestFitMeasuresTheEncoding: FitResponse is handed each message's exact share of the body
// (its encoding and the comma before it) and what the envelope leaves of
// router.ResponseLimit; the response holds the messages it keeps.
func TestFitMeasuresTheEncoding(t *testing.T) {
	msgs := leasedMessages(3)
	msgs[1].Value = bytes.Repeat([]byte("\x01"), 100) // escaped: six bytes each
	f := &fakeNode{Msgs: msgs}
	h := fakeHandler(t, f)
	rec := call(h, "ReceiveMessage", `{"QueueUrl":"`+queueURL+`","MaxNumberOfMessages":3,"AttributeNames":["All"]}`)
	var out struct{ Messages []json.RawMessage }
	ok(t, rec, &out)
	require.Len(t, out.Messages, 3)
	require.Equal(t, router.ResponseLimit-len(`{"Messages":[]}`), f.FitLimit)
	sum := 0
	for i, size := range f.FitSizes {
		sep := 0
		if i > 0 {
			sep = 1
		}
		require.Equal(t, len(out.Messages[i])+sep, size)
		sum += size
	}
	require.Equal(t, len(`{"Messages":[]}`)+sum, rec.Body.Len())

	f.FitKeep = 2
	ok(t, call(h, "ReceiveMessage", `{"QueueUrl":"`+queueURL+`","MaxNumberOfMessages":3}`), &out)
	require.Len(t, out.Messages, 2, "what FitResponse keeps")
}
