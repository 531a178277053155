package sqsapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/fronttest"
	"narad.dev/consume/router/routertest"
	"narad.dev/consume/router/sqsapi"
)

// managedActions are the actions FuzzManagedRequest picks from by its first argument.
var managedActions = []string{"CreateQueue", "DeleteQueue", "ListQueues", "SetQueueAttributes", "TagQueue", "UntagQueue",
	"ListQueueTags", "PurgeQueue", "GetQueueAttributes", "GetQueueUrl", "ReceiveMessage", "SendMessage",
	"StartMessageMoveTask", "ListMessageMoveTasks", "CancelMessageMoveTask", "ListDeadLetterSourceQueues"}

// FuzzManagedRequest: whatever management action and body a request carries to a handler
// of a MemQueueStore that checks signatures, the handler never panics, answers a
// documented status with an error in SQS's shape, and hands the node only validated
// values; and a request whose signature is refused (signed with a wrong secret) changes
// neither the store nor the log.
func FuzzManagedRequest(f *testing.F) {
	q := `"QueueUrl":"http://sqs.test/q/orders"`
	fq := `"QueueUrl":"http://sqs.test/q/jobs.fifo"`
	for _, seed := range []struct {
		action uint8
		good   bool
		body   string
	}{
		{0, true, `{"QueueName":"jobs","Attributes":{"VisibilityTimeout":"60"},"tags":{"a":"b"}}`},
		{0, true, `{"QueueName":"orders","Attributes":{"VisibilityTimeout":"61"}}`},
		{0, false, `{"QueueName":"jobs"}`},
		{1, true, `{` + q + `}`},
		{2, true, `{"QueueNamePrefix":"o","MaxResults":1}`},
		{2, true, `{"MaxResults":1,"NextToken":"b3JkAG9yZGVycw"}`},
		{3, true, `{` + q + `,"Attributes":{"MaximumMessageSize":"1024","ReceiveMessageWaitTimeSeconds":"20"}}`},
		{3, false, `{` + q + `,"Attributes":{"MaximumMessageSize":"1024"}}`},
		{4, true, `{` + q + `,"Tags":{"k":"v"}}`},
		{5, true, `{` + q + `,"TagKeys":["k"]}`},
		{6, true, `{` + q + `}`},
		{7, true, `{` + q + `}`},
		{7, false, `{` + q + `}`},
		{8, true, `{` + q + `,"AttributeNames":["All","ApproximateAgeOfOldestMessage"]}`},
		{9, true, `{"QueueName":"orders"}`},
		{10, true, `{` + q + `,"MaxNumberOfMessages":10}`},
		{11, true, `{` + q + `,"MessageBody":"hello"}`},
		{11, false, `{` + q + `,"MessageBody":"hello"}`},
		{0, true, `{"QueueName":"jobs","Attributes":{"RedrivePolicy":"{\"maxReceiveCount\":2,\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:orders\"}"}}`},
		{3, true, `{` + q + `,"Attributes":{"RedrivePolicy":"{\"maxReceiveCount\":2,\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:orders\"}"}}`},
		{12, true, `{"SourceArn":"arn:aws:sqs:us-east-1:000000000000:orders","MaxNumberOfMessagesPerSecond":5}`},
		{13, true, `{"SourceArn":"arn:aws:sqs:us-east-1:000000000000:orders","MaxResults":10}`},
		{14, true, `{"TaskHandle":"00"}`},
		{15, true, `{` + q + `,"MaxResults":1,"NextToken":"am9icw"}`},
		{0, true, `{"QueueName":"x.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"true","DeduplicationScope":"messageGroup"}}`},
		{0, true, `{"QueueName":"x","Attributes":{"FifoQueue":"false"}}`},
		{3, true, `{` + fq + `,"Attributes":{"FifoThroughputLimit":"perMessageGroupId"}}`},
		{10, true, `{` + fq + `,"MaxNumberOfMessages":10,"ReceiveRequestAttemptId":"r-1","AttributeNames":["All"]}`},
		{11, true, `{` + fq + `,"MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"d"}`},
		{11, true, `{` + fq + `,"MessageBody":"x","MessageGroupId":"g"}`},
	} {
		f.Add(seed.action, seed.good, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, action uint8, good bool, body []byte) {
		synctest.Test(t, func(t *testing.T) { fuzzManaged(t, managedActions[int(action)%len(managedActions)], good, body) })
	})
}

func fuzzManaged(t *testing.T, action string, good bool, body []byte) {
	logs, routes := &routertest.MemLogs{}, &routertest.Routes{}
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	store := &sqsapi.MemQueueStore{
		CreateTopic: func(_ context.Context, queue, _ string) (string, error) {
			logs.Log(queue, 0).Append(nil, []byte("first"), time.Now())
			routes.Set(queue, 0)
			node.Appended(queue, 0, 1)
			return queue, nil
		},
		DeleteTopic: func(_ context.Context, topic string) error { routes.Delete(topic); return node.DeleteTopic(topic) },
		PurgeTopic: func(_ context.Context, topic string) error {
			routes.Delete(topic)
			if err := node.DeleteTopic(topic); err != nil {
				return err
			}
			log := logs.Log(topic, 0)
			log.Trim(log.HighWatermark())
			routes.Set(topic, 0)
			return nil
		},
	}
	checked := &fronttest.CheckedNode{Node: node, T: t, MaxBatch: sqsapi.MaxBatchEntries, MinExtend: time.Second, CheckBatchHandles: true,
		Topic: func(topic string) bool { _, _, ok := routes.Partitions(topic); return ok },
		Options: func(o router.ConsumeOptions) bool {
			return o.Max <= sqsapi.MaxReceive && o.Wait <= sqsapi.MaxWaitSeconds*time.Second && !o.Pinned &&
				o.Visibility >= 0 && o.Visibility <= router.MaxVisibility
		}}
	h, err := sqsapi.New(checked, sqsapi.Config{
		Store: store, BaseURL: "http://sqs.test/q",
		Credentials: func(id string) (string, bool) { return testSecret, id == testKey },
		ProduceRecord: func(_ context.Context, topic string, r router.Record) (int32, int64, error) {
			off := logs.Log(topic, 0).AppendRecord(r)
			node.Appended(topic, 0, off+1)
			return 0, off, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close() // a move task started ends
	serveSigned := func(action string, body []byte, secret string) *httptest.ResponseRecorder {
		req := jsonRequest(action, string(body))
		testSigner{key: testKey, secret: secret, at: time.Now()}.sign(req, body)
		return serve(h, req)
	}
	for _, create := range []string{`{"QueueName":"orders"}`, `{"QueueName":"jobs.fifo","Attributes":{"FifoQueue":"true"}}`} {
		if rec := serveSigned("CreateQueue", []byte(create), testSecret); rec.Code != http.StatusOK {
			t.Fatal(rec.Body.String())
		}
	}
	type state struct {
		queues  []string
		records []sqsapi.QueueRecord
		hwm     [2]int64
	}
	snapshot := func() state {
		var s state
		s.queues = store.ListQueues("")
		for _, n := range s.queues {
			rec, _ := store.Queue(n)
			s.records = append(s.records, rec)
		}
		s.hwm = [2]int64{logs.Log("orders", 0).HighWatermark(), logs.Log("jobs.fifo", 0).HighWatermark()}
		return s
	}
	before := snapshot()
	secret := testSecret
	if !good {
		secret = "a wrong secret"
	}
	rec := serveSigned(action, body, secret)
	if !documented[rec.Code] {
		t.Fatalf("%s: status %d: %s", action, rec.Code, rec.Body.String())
	}
	v := fronttest.JSONAnswer(t, rec, "application/x-amz-json-1.0")
	if rec.Code == http.StatusOK {
		return
	}
	if typ, _ := v["__type"].(string); typ == "" || rec.Header().Get("x-amzn-query-error") == "" {
		t.Fatalf("an error not in SQS's shape: %s", rec.Body.String())
	}
	if !good {
		if rec.Code != http.StatusForbidden || !bytes.Contains(rec.Body.Bytes(), []byte("SignatureDoesNotMatch")) {
			t.Fatalf("a wrong secret answered %d %s", rec.Code, rec.Body.String())
		}
	}
	if rec.Code < 500 {
		if after := snapshot(); !reflect.DeepEqual(before, after) {
			t.Fatalf("%s refused %d (%s) and changed %+v to %+v", action, rec.Code, rec.Body.String(), before, after)
		}
	}
}
