package sqsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
	"narad.dev/consume/router/sqsapi"
)

// checkedNode is a real node that fails the test when the handler hands it a value no valid
// request carries.
type checkedNode struct {
	*router.Node
	t *testing.T
}

func (c *checkedNode) topic(topic string) {
	if topic != "orders" && topic != "ghost" {
		c.t.Fatalf("the node was handed topic %q", topic)
	}
}

func (c *checkedNode) handle(handle router.Handle) {
	if err := handle.Check(); err != nil {
		c.t.Fatalf("the node was handed the handle %+v", handle)
	}
}

func (c *checkedNode) Consume(ctx context.Context, topic string, opts router.ConsumeOptions) ([]router.Message, error) {
	c.topic(topic)
	if opts.Max < 1 || opts.Max > sqsapi.MaxReceive || opts.Wait > sqsapi.MaxWaitSeconds*time.Second || opts.Visibility > router.MaxVisibility || opts.Pinned {
		c.t.Fatalf("the node was handed %+v", opts)
	}
	return c.Node.Consume(ctx, topic, opts)
}

func (c *checkedNode) Ack(ctx context.Context, topic string, handle router.Handle) error {
	c.topic(topic)
	c.handle(handle)
	return c.Node.Ack(ctx, topic, handle)
}

func (c *checkedNode) AckBatch(ctx context.Context, topic string, handles []router.Handle) []error {
	c.topic(topic)
	if len(handles) < 1 || len(handles) > sqsapi.MaxBatchEntries {
		c.t.Fatalf("the node was handed %d handles", len(handles))
	}
	for _, h := range handles {
		c.handle(h)
	}
	return c.Node.AckBatch(ctx, topic, handles)
}

func (c *checkedNode) Extend(ctx context.Context, topic string, handle router.Handle, d time.Duration) (time.Time, error) {
	c.topic(topic)
	c.handle(handle)
	if d <= 0 || d > router.MaxVisibility {
		c.t.Fatalf("the node was handed an extension of %v", d)
	}
	return c.Node.Extend(ctx, topic, handle, d)
}

func (c *checkedNode) Release(ctx context.Context, topic string, handle router.Handle) error {
	c.topic(topic)
	c.handle(handle)
	return c.Node.Release(ctx, topic, handle)
}

// fuzzTargets are the X-Amz-Target values FuzzRequest picks from by its first argument.
var fuzzTargets = []string{
	"AmazonSQS.ReceiveMessage", "AmazonSQS.DeleteMessage", "AmazonSQS.DeleteMessageBatch",
	"AmazonSQS.ChangeMessageVisibility", "AmazonSQS.ChangeMessageVisibilityBatch",
	"AmazonSQS.SendMessage", "AmazonSQS.SendMessageBatch", "AmazonSQS.GetQueueUrl",
	"AmazonSQS.GetQueueAttributes", "AmazonSQS.PurgeQueue", "AmazonSQS.Nope", "", "SQS.ReceiveMessage",
}

// documented are the statuses doc.go lists, but 500 (a host error, which these hosts never
// give).
var documented = map[int]bool{200: true, 400: true, 403: true, 404: true, 405: true, 503: true}

// FuzzRequest: whatever action, content type and body a request carries, the handler never
// panics, answers a documented status with a JSON object, an error in SQS's shape (__type,
// message, x-amzn-query-error), and hands the node only validated values.
func FuzzRequest(f *testing.F) {
	q := `"QueueUrl":"http://sqs.test/q/orders"`
	for _, seed := range []struct {
		target uint8
		ct     string
		body   string
	}{
		{0, "", `{` + q + `,"MaxNumberOfMessages":10,"WaitTimeSeconds":1,"AttributeNames":["All"]}`},
		{0, "", `{` + q + `,"VisibilityTimeout":1,"MessageSystemAttributeNames":["SentTimestamp"]}`},
		{0, "", `{"QueueUrl":"http://sqs.test/q/ghost","WaitTimeSeconds":20}`},
		{0, "", `{"QueueUrl":"http://sqs.test/q/nope"}`},
		{0, "", `{` + q + `,"MaxNumberOfMessages":11}`},
		{0, "application/x-www-form-urlencoded", `Action=ReceiveMessage`},
		{1, "", `{` + q + `,"ReceiptHandle":"0:0:1"}`},
		{1, "", `{` + q + `,"ReceiptHandle":"0:0"}`},
		{2, "", `{` + q + `,"Entries":[{"Id":"a","ReceiptHandle":"0:0:1"},{"Id":"b","ReceiptHandle":"x"}]}`},
		{2, "", `{` + q + `,"Entries":[]}`},
		{3, "", `{` + q + `,"ReceiptHandle":"0:1:2","VisibilityTimeout":0}`},
		{3, "", `{` + q + `,"ReceiptHandle":"0:1:2","VisibilityTimeout":43200}`},
		{4, "", `{` + q + `,"Entries":[{"Id":"a","ReceiptHandle":"0:0:1","VisibilityTimeout":3}]}`},
		{5, "", `{` + q + `,"MessageBody":"hello"}`},
		{5, "", `{` + q + `,"MessageBody":"\u0001"}`},
		{6, "", `{` + q + `,"Entries":[{"Id":"a","MessageBody":"1"},{"Id":"b","MessageBody":"2","DelaySeconds":3}]}`},
		{7, "", `{"QueueName":"orders"}`},
		{8, "", `{` + q + `,"AttributeNames":["All"]}`},
		{9, "", `{` + q + `}`},
		{10, "", `{}`},
		{11, "", `{}`},
		{12, "text/plain", `{`},
	} {
		f.Add(seed.target, seed.ct, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, target uint8, ct string, body []byte) {
		// In a bubble, with a node of its own: a long-poll's wait passes at once.
		synctest.Test(t, func(t *testing.T) { fuzzRequest(t, fuzzTargets[int(target)%len(fuzzTargets)], ct, body) })
	})
}

func fuzzRequest(t *testing.T, target, ct string, body []byte) {
	logs := &routertest.MemLogs{}
	routes := &routertest.Routes{}
	routes.Set("orders", 0)
	log := logs.Log("orders", 0)
	for i := range 3 {
		log.Append(nil, []byte(fmt.Sprintf("<%d>\xff", i)), time.Unix(int64(i), 0))
	}
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	// Two records leased, so that handles the fuzzer finds can settle something.
	if _, err := node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 2}); err != nil {
		t.Fatal(err)
	}
	produce := func(_ context.Context, topic string, value []byte) (int32, int64, error) {
		if topic != "orders" {
			return 0, 0, router.ErrUnknownTopic
		}
		off := log.Append(nil, value, time.Now())
		node.Appended(topic, 0, off+1)
		return 0, off, nil
	}
	h, err := sqsapi.New(&checkedNode{Node: node, t: t}, sqsapi.Config{
		Queues:  func(name string) (string, bool) { return name, name == "orders" || name == "ghost" },
		BaseURL: "http://sqs.test/q",
		Produce: produce,
	})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	if !documented[rec.Code] {
		t.Fatalf("%s: status %d: %s", target, rec.Code, rec.Body.String())
	}
	if got := rec.Header().Get("Content-Type"); got != "application/x-amz-json-1.0" {
		t.Fatalf("status %d with Content-Type %q", rec.Code, got)
	}
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("status %d: a body that is not a JSON object: %v: %q", rec.Code, err, rec.Body.String())
	}
	if rec.Code == http.StatusOK {
		return
	}
	typ, _ := v["__type"].(string)
	msg, _ := v["message"].(string)
	query := rec.Header().Get("x-amzn-query-error")
	if !strings.HasPrefix(typ, "com.amazonaws.sqs#") || msg == "" || !strings.Contains(query, ";") {
		t.Fatalf("status %d: an error not in SQS's shape: %q, x-amzn-query-error %q", rec.Code, rec.Body.String(), query)
	}
}
