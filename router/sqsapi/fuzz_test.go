package sqsapi_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/fronttest"
	"narad.dev/consume/router/routertest"
	"narad.dev/consume/router/sqsapi"
)

// checkedNode is a real node that fails the test when the handler hands it a value no valid
// request carries.
func checkedNode(t *testing.T, node *router.Node) *fronttest.CheckedNode {
	return &fronttest.CheckedNode{Node: node, T: t, MaxBatch: sqsapi.MaxBatchEntries, MinExtend: time.Second, CheckBatchHandles: true,
		Topic: func(topic string) bool { return topic == "orders" || topic == "ghost" },
		Options: func(o router.ConsumeOptions) bool {
			return o.Max <= sqsapi.MaxReceive && o.Wait <= sqsapi.MaxWaitSeconds*time.Second && !o.Pinned
		}}
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

// FuzzRequest: whatever action, content type and body a request carries, in either
// protocol, the handler never panics, answers a documented status with a JSON object (an
// error in SQS's shape: __type, message, x-amzn-query-error) or, for a form without
// X-Amz-Target, an XML document (an error in SQS's query shape), and hands the node only
// validated values.
func FuzzRequest(f *testing.F) {
	q := `"QueueUrl":"http://sqs.test/q/orders"`
	const form = "application/x-www-form-urlencoded"
	qf := "QueueUrl=" + url.QueryEscape("http://sqs.test/q/orders")
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
		{1, "", `{` + q + `,"ReceiptHandle":"` + rh("0:0:1") + `"}`},
		{1, "", `{` + q + `,"ReceiptHandle":"0:0"}`},
		{2, "", `{` + q + `,"Entries":[{"Id":"a","ReceiptHandle":"` + rh("0:0:1") + `"},{"Id":"b","ReceiptHandle":"x"}]}`},
		{2, "", `{` + q + `,"Entries":[]}`},
		{3, "", `{` + q + `,"ReceiptHandle":"` + rh("0:1:2") + `","VisibilityTimeout":0}`},
		{3, "", `{` + q + `,"ReceiptHandle":"` + rh("0:1:2") + `","VisibilityTimeout":43200}`},
		{4, "", `{` + q + `,"Entries":[{"Id":"a","ReceiptHandle":"` + rh("0:0:1") + `","VisibilityTimeout":3}]}`},
		{5, "", `{` + q + `,"MessageBody":"hello"}`},
		{5, "", `{` + q + `,"MessageBody":"\u0001"}`},
		{6, "", `{` + q + `,"Entries":[{"Id":"a","MessageBody":"1"},{"Id":"b","MessageBody":"2","DelaySeconds":3}]}`},
		{7, "", `{"QueueName":"orders"}`},
		{8, "", `{` + q + `,"AttributeNames":["All"]}`},
		{9, "", `{` + q + `}`},
		{10, "", `{}`},
		{11, "", `{}`},
		{12, "text/plain", `{`},
		{11, form, "Action=ReceiveMessage&" + qf + "&MaxNumberOfMessages=10&AttributeName.1=All&MessageAttributeName.1=All"},
		{11, form, "Action=DeleteMessage&" + qf + "&ReceiptHandle=" + url.QueryEscape(rh("0:0:1"))},
		{11, form, "Action=ChangeMessageVisibilityBatch&" + qf + "&ChangeMessageVisibilityBatchRequestEntry.1.Id=a" +
			"&ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle=" + url.QueryEscape(rh("0:1:2")) + "&ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout=0"},
		{11, form, "Action=SendMessage&" + qf + "&MessageBody=hi&MessageAttribute.1.Name=n&MessageAttribute.1.Value.DataType=Number&MessageAttribute.1.Value.StringValue=1"},
		{11, form, "Action=SendMessageBatch&" + qf + "&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=x"},
		{11, form, "Action=GetQueueAttributes&" + qf + "&AttributeName.1=All"},
		{11, form, "Action=GetQueueUrl&QueueName=orders"},
		{11, form, "Action=PurgeQueue&" + qf},
		{11, form, "Action=Nope"},
		{11, form, "%zz"},
		{11, form + "; charset=utf-8", "Action=ReceiveMessage&QueueUrl=http%3A%2F%2Fsqs.test%2Fq%2Fghost&WaitTimeSeconds=20"},
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
	h, err := sqsapi.New(checkedNode(t, node), sqsapi.Config{
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
	if media, _, _ := mime.ParseMediaType(ct); target == "" && media == "application/x-www-form-urlencoded" {
		checkXMLAnswer(t, rec)
		return
	}
	v := fronttest.JSONAnswer(t, rec, "application/x-amz-json-1.0")
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

// checkXMLAnswer checks a query request's answer: text/xml, one XML document, an error in
// SQS's shape (ErrorResponse, Error, its Type, Code and Message).
func checkXMLAnswer(t *testing.T, rec *httptest.ResponseRecorder) {
	if got := rec.Header().Get("Content-Type"); got != "text/xml" {
		t.Fatalf("status %d with Content-Type %q", rec.Code, got)
	}
	var doc struct {
		XMLName xml.Name
		Error   struct{ Type, Code, Message string }
	}
	if err := xml.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("status %d: a body that is not XML: %v: %q", rec.Code, err, rec.Body.String())
	}
	switch {
	case rec.Code == http.StatusOK && !strings.HasSuffix(doc.XMLName.Local, "Response"):
		t.Fatalf("an answer that is no response: %q", rec.Body.String())
	case rec.Code != http.StatusOK && (doc.XMLName.Local != "ErrorResponse" || doc.Error.Code == "" || doc.Error.Message == "" ||
		(doc.Error.Type != "Sender" && doc.Error.Type != "Receiver")):
		t.Fatalf("status %d: an error not in SQS's shape: %q", rec.Code, rec.Body.String())
	}
}
