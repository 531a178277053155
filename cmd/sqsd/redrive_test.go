package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router/sqsapi"
)

// An sqsServer is a server opened in a test's directory, served in-process without a
// listener, and checks no signature.
type sqsServer struct {
	t     *testing.T
	cfg   config
	s     *server
	ahead atomic.Int64 // how far the front end's clock is ahead of time.Now, in ns
}

func openTestServer(t *testing.T, dir string) *sqsServer {
	t.Helper()
	ts := &sqsServer{t: t}
	ts.cfg = config{dir: dir, noAuth: true, partitions: 2, baseURL: "http://localhost:9324",
		now: func() time.Time { return time.Now().Add(time.Duration(ts.ahead.Load())) }}
	s, err := openServer(ts.cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ts.s = s
	return ts
}

// advance moves the front end's clock d ahead: past the 60 s in which SQS refuses a deleted
// queue's name, say.
func (ts *sqsServer) advance(d time.Duration) { ts.ahead.Add(int64(d)) }

// call sends action with body (marshalled to JSON) and decodes the answer into out, if
// not nil; the status must be 200.
func (ts *sqsServer) call(action string, body, out any) {
	ts.t.Helper()
	b, err := json.Marshal(body)
	require.NoError(ts.t, err)
	req := httptest.NewRequest(http.MethodPost, ts.cfg.baseURL+"/", strings.NewReader(string(b)))
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	rec := httptest.NewRecorder()
	ts.s.api.ServeHTTP(rec, req)
	answer, _ := io.ReadAll(rec.Body)
	require.Equal(ts.t, http.StatusOK, rec.Code, "%s: %s", action, answer)
	if out != nil {
		require.NoError(ts.t, json.Unmarshal(answer, out))
	}
}

func (ts *sqsServer) url(queue string) string { return ts.cfg.baseURL + "/" + queue }

// receive receives up to 10 messages of queue at once, and returns their bodies and receipt
// handles.
func (ts *sqsServer) receive(queue string) (bodies, receipts []string) {
	ts.t.Helper()
	var out struct {
		Messages []struct{ Body, ReceiptHandle string }
	}
	ts.call("ReceiveMessage", map[string]any{"QueueUrl": ts.url(queue), "MaxNumberOfMessages": 10}, &out)
	for _, m := range out.Messages {
		bodies, receipts = append(bodies, m.Body), append(receipts, m.ReceiptHandle)
	}
	return bodies, receipts
}

// poison sends body to queue, receives it and gives it up (ChangeMessageVisibility 0): with
// maxReceiveCount 1, the node quarantines it.
func (ts *sqsServer) poison(queue, body string) {
	ts.t.Helper()
	ts.call("SendMessage", map[string]any{"QueueUrl": ts.url(queue), "MessageBody": body}, nil)
	got, receipts := ts.receive(queue)
	require.Equal(ts.t, []string{body}, got)
	ts.call("ChangeMessageVisibility", map[string]any{"QueueUrl": ts.url(queue), "ReceiptHandle": receipts[0], "VisibilityTimeout": 0}, nil)
}

// quarantined lists what queue's partitions hold quarantined.
func (ts *sqsServer) quarantined(queue string) []int64 {
	ts.t.Helper()
	rec, ok := ts.s.cat.Queue(queue)
	require.True(ts.t, ok)
	local, _, _ := ts.s.store.Partitions(rec.Topic)
	var all []int64
	for _, p := range local {
		q, err := ts.s.node.Quarantined(rec.Topic, p)
		require.NoError(ts.t, err)
		all = append(all, q...)
	}
	return all
}

// Redrive copies a message that reached its queue's maxReceiveCount into the dead-letter
// queue, then settles it in the source (router.Node.Discard): the source's quarantine is
// empty. One whose copy failed (its dead-letter queue was deleted) stays quarantined, and
// the next start copies it, once the dead-letter queue is back, and settles it.
func TestRedriveDiscardsWhatItCopied(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ts := openTestServer(t, dir)
	ts.call("CreateQueue", map[string]any{"QueueName": "dlq"}, nil)
	var attrs struct{ Attributes map[string]string }
	ts.call("GetQueueAttributes", map[string]any{"QueueUrl": ts.url("dlq"), "AttributeNames": []string{"QueueArn"}}, &attrs)
	policy := `{"deadLetterTargetArn":"` + attrs.Attributes["QueueArn"] + `","maxReceiveCount":"1"}`
	ts.call("CreateQueue", map[string]any{"QueueName": "orders", "Attributes": map[string]string{"RedrivePolicy": policy}}, nil)

	ts.poison("orders", "first")
	got, _ := ts.receive("dlq")
	require.Equal(t, []string{"first"}, got, "copied to the dead-letter queue")
	require.Empty(t, ts.quarantined("orders"), "and settled in the source")
	require.Equal(t, uint64(1), ts.s.node.Stats().Shards.Discarded)

	ts.call("DeleteQueue", map[string]any{"QueueUrl": ts.url("dlq")}, nil)
	ts.poison("orders", "second")
	require.Len(t, ts.quarantined("orders"), 1, "no dead-letter queue: it stays quarantined")
	ts.advance(sqsapi.RecentWindow) // a deleted queue's name is refused for 60 s
	ts.call("CreateQueue", map[string]any{"QueueName": "dlq"}, nil)
	require.NoError(t, ts.s.Close())

	ts = openTestServer(t, dir)
	defer func() { require.NoError(t, ts.s.Close()) }()
	require.Empty(t, ts.quarantined("orders"), "the start moved it")
	got, _ = ts.receive("dlq")
	require.Equal(t, []string{"second"}, got)
	got, _ = ts.receive("orders")
	require.Empty(t, got, "neither is delivered again in the source")
}
