package sqsapi_test

import (
	"context"
	"encoding/xml"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/fronttest"
	"narad.dev/consume/router/sqsapi"
)

// redriveEnv is a node behind a handler whose queues live in a MemQueueStore (a queue's
// topic is its name, of one partition), wired as a host wires redrive: the node's Topic is
// a queue's MaxDeliveries (sqsapi.MaxDeliveries), and its OnQuarantine reads the record and
// hands it to Handler.DeadLetter.
type redriveEnv struct {
	*env
	store *sqsapi.MemQueueStore
	cfg   sqsapi.Config // the handler's

	mu        sync.Mutex
	dlqErrors []error
}

const dlqArn = "arn:aws:sqs:us-east-1:000000000000:dlq"

// sourceHeader is the header DeadLetter adds (documented in the package doc).
const sourceHeader = "AWS.SQS.DeadLetterSourceQueue"

func newRedriveEnv(t *testing.T, edit ...func(*sqsapi.Config)) *redriveEnv {
	e := &redriveEnv{env: &env{t: t}}
	e.store = &sqsapi.MemQueueStore{
		CreateTopic: func(_ context.Context, queue, _ string) (string, error) {
			e.logs.Log(queue, 0)
			e.routes.Set(queue, 0)
			return queue, nil
		},
		Changed: func(topic string) { e.node.ReloadTopic(topic) },
	}
	fe := fronttest.NewEnv(t, func(cfg *router.Config) {
		cfg.Topic = func(topic string) router.TopicConfig {
			rec, _ := e.store.Queue(topic)
			return router.TopicConfig{MaxDeliveries: sqsapi.MaxDeliveries(rec)}
		}
		cfg.OnQuarantine = func(topic string, p int32, offset int64, _ uint32) {
			rec, err := e.logs.Log(topic, p).Read(offset)
			if err == nil {
				_, err = e.h.DeadLetter(context.Background(), topic, rec)
			}
			if err != nil {
				e.mu.Lock()
				e.dlqErrors = append(e.dlqErrors, err)
				e.mu.Unlock()
			}
		}
	})
	e.logs, e.routes, e.node = fe.Logs, fe.Routes, fe.Node
	e.cfg = sqsapi.Config{Store: e.store, Now: time.Now, ProduceRecord: func(_ context.Context, topic string, rec router.Record) (int32, int64, error) {
		if _, ok := e.store.Queue(topic); !ok {
			return 0, 0, router.ErrUnknownTopic
		}
		off := e.logs.Log(topic, 0).AppendRecord(rec)
		e.node.Appended(topic, 0, off+1)
		return 0, off, nil
	}}
	for _, fn := range edit {
		fn(&e.cfg)
	}
	e.h = mustNew(t, e.node, e.cfg)
	t.Cleanup(func() {
		require.NoError(t, e.h.Close())
		e.mu.Lock()
		defer e.mu.Unlock()
		require.Empty(t, e.dlqErrors)
	})
	return e
}

// giveUp receives one message of queue and releases it with ChangeMessageVisibility 0: a
// receive that counts, without a delete.
func (e *redriveEnv) giveUp(queue string) message {
	e.t.Helper()
	q := baseURL + "/" + queue
	got := e.receive(`{"QueueUrl":"` + q + `","AttributeNames":["All"]}`)
	require.Len(e.t, got, 1)
	ok(e.t, e.call("ChangeMessageVisibility", `{"QueueUrl":"`+q+`","ReceiptHandle":`+jsonString(got[0].ReceiptHandle)+`,"VisibilityTimeout":0}`), nil)
	return got[0]
}

type moveTask struct {
	TaskHandle                                                          string
	Status, SourceArn, DestinationArn, FailureReason                    string
	ApproximateNumberOfMessagesMoved, ApproximateNumberOfMessagesToMove int64
	MaxNumberOfMessagesPerSecond                                        int
	StartedTimestamp                                                    int64
}

func (e *redriveEnv) moveTasks(source string, max int) []moveTask {
	e.t.Helper()
	var out struct{ Results []moveTask }
	ok(e.t, e.call("ListMessageMoveTasks", `{"SourceArn":"`+source+`","MaxResults":`+itoa(max)+`}`), &out)
	return out.Results
}

// TestRedrive: a message received maxReceiveCount times without a delete moves to the
// dead-letter queue with its attributes; a move task brings it back to its queue, where it
// is received afresh.
func TestRedrive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRedriveEnv(t)
		ok(t, e.call("CreateQueue", `{"QueueName":"dlq"}`), nil)
		policy := `{"maxReceiveCount":"2","deadLetterTargetArn":"` + dlqArn + `"}`
		ok(t, e.call("CreateQueue", `{"QueueName":"jobs","Attributes":{"RedrivePolicy":`+jsonString(policy)+`}}`), nil)
		want := `{"deadLetterTargetArn":"` + dlqArn + `","maxReceiveCount":2}`
		require.Equal(t, want, e.storeAttributes("jobs")["RedrivePolicy"])
		// ListDeadLetterSourceQueues: the queues whose policy names it, a page at a time.
		ok(t, e.call("CreateQueue", `{"QueueName":"jobs2","Attributes":{"RedrivePolicy":`+jsonString(policy)+`}}`), nil)
		var sources struct {
			QueueUrls []string `json:"queueUrls"`
			NextToken string
		}
		ok(t, e.call("ListDeadLetterSourceQueues", `{"QueueUrl":"`+baseURL+`/dlq"}`), &sources)
		require.Equal(t, []string{baseURL + "/jobs", baseURL + "/jobs2"}, sources.QueueUrls)
		ok(t, e.call("ListDeadLetterSourceQueues", `{"QueueUrl":"`+baseURL+`/dlq","MaxResults":1}`), &sources)
		require.Equal(t, []string{baseURL + "/jobs"}, sources.QueueUrls)
		token := sources.NextToken
		sources.NextToken = ""
		ok(t, e.call("ListDeadLetterSourceQueues", `{"QueueUrl":"`+baseURL+`/dlq","MaxResults":1,"NextToken":"`+token+`"}`), &sources)
		require.Equal(t, []string{baseURL + "/jobs2"}, sources.QueueUrls)
		require.Empty(t, sources.NextToken)
		ok(t, e.call("ListDeadLetterSourceQueues", `{"QueueUrl":"`+baseURL+`/jobs"}`), &sources)
		require.Empty(t, sources.QueueUrls)
		// The same policy again, as SQS writes it, is the same queue.
		ok(t, e.call("CreateQueue", `{"QueueName":"jobs","Attributes":{"RedrivePolicy":`+jsonString(want)+`}}`), nil)

		q := baseURL + "/jobs"
		ok(t, e.call("SendMessage", `{"QueueUrl":"`+q+`","MessageBody":"poison","MessageAttributes":{"n":{"DataType":"Number","StringValue":"7"}}}`), nil)
		require.Equal(t, "1", e.giveUp("jobs").Attributes["ApproximateReceiveCount"])
		require.Equal(t, "2", e.giveUp("jobs").Attributes["ApproximateReceiveCount"])
		require.Empty(t, e.receive(`{"QueueUrl":"`+q+`"}`))

		var dead struct{ Messages []attributed }
		ok(t, e.call("ReceiveMessage", `{"QueueUrl":"`+baseURL+`/dlq","MessageAttributeNames":["All"],"VisibilityTimeout":1}`), &dead)
		require.Len(t, dead.Messages, 1)
		require.Equal(t, "Number", dead.Messages[0].MessageAttributes["n"].DataType)
		require.Equal(t, "7", *dead.Messages[0].MessageAttributes["n"].StringValue)
		require.Len(t, dead.Messages[0].MessageAttributes, 1, "the source header is no message attribute")
		time.Sleep(time.Second) // its lease lapses (a fake clock: synctest)
		synctest.Wait()

		var started struct{ TaskHandle string }
		ok(t, e.call("StartMessageMoveTask", `{"SourceArn":"`+dlqArn+`"}`), &started)
		require.NotEmpty(t, started.TaskHandle)
		synctest.Wait()
		tasks := e.moveTasks(dlqArn, 10)
		require.Len(t, tasks, 1)
		require.Equal(t, "COMPLETED", tasks[0].Status)
		require.Empty(t, tasks[0].TaskHandle, "only a running task has its handle listed")
		require.Equal(t, int64(1), tasks[0].ApproximateNumberOfMessagesMoved)
		require.Equal(t, int64(1), tasks[0].ApproximateNumberOfMessagesToMove)

		var back struct {
			Messages []struct {
				attributed
				Body, ReceiptHandle string
			}
		}
		ok(t, e.call("ReceiveMessage", `{"QueueUrl":"`+q+`","MessageAttributeNames":["All"]}`), &back)
		require.Len(t, back.Messages, 1)
		require.Equal(t, "poison", back.Messages[0].Body)
		require.Equal(t, dead.Messages[0].MD5OfMessageAttributes, back.Messages[0].MD5OfMessageAttributes)
		require.Empty(t, e.receive(`{"QueueUrl":"`+baseURL+`/dlq"}`))

		// A RedrivePolicy of "" removes it (the store's Changed reloads the topic): no
		// quarantine after two receives now.
		ok(t, e.call("SetQueueAttributes", `{"QueueUrl":"`+q+`","Attributes":{"RedrivePolicy":""}}`), nil)
		_, has := e.storeAttributes("jobs")["RedrivePolicy"]
		require.False(t, has)
		ok(t, e.call("ChangeMessageVisibility", `{"QueueUrl":"`+q+`","ReceiptHandle":`+jsonString(back.Messages[0].ReceiptHandle)+`,"VisibilityTimeout":0}`), nil)
		for i := range 3 {
			require.Equal(t, itoa(i+2), e.giveUp("jobs").Attributes["ApproximateReceiveCount"])
		}
		require.Empty(t, e.receive(`{"QueueUrl":"`+baseURL+`/dlq"}`))
	})
}

// storeAttributes is a queue's attributes as GetQueueAttributes answers All.
func (e *redriveEnv) storeAttributes(queue string) map[string]string {
	e.t.Helper()
	var out struct{ Attributes map[string]string }
	ok(e.t, e.call("GetQueueAttributes", `{"QueueUrl":"`+baseURL+`/`+queue+`","AttributeNames":["All"]}`), &out)
	return out.Attributes
}

// deadLetter puts n messages into the dead-letter queue as DeadLetter does, from queue.
func (e *redriveEnv) deadLetter(queue string, n int) {
	for i := range n {
		off := e.logs.Log("dlq", 0).AppendRecord(router.Record{Value: []byte("m" + itoa(i)), Timestamp: sentAt,
			Headers: []router.Header{{Key: sourceHeader, Value: []byte(queue)}}})
		e.node.Appended("dlq", 0, off+1)
	}
}

// TestMoveTaskCancel: a cancelled task stops after the message it is moving, the rest
// staying in the dead-letter queue; a task with a DestinationArn moves there; one source
// runs one task at a time.
func TestMoveTaskCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRedriveEnv(t)
		ok(t, e.call("CreateQueue", `{"QueueName":"dlq"}`), nil)
		ok(t, e.call("CreateQueue", `{"QueueName":"other"}`), nil)
		ok(t, e.call("CreateQueue", `{"QueueName":"jobs","Attributes":{"RedrivePolicy":`+jsonString(`{"maxReceiveCount":3,"deadLetterTargetArn":"`+dlqArn+`"}`)+`}}`), nil)
		e.deadLetter("jobs", 3)

		var started struct{ TaskHandle string }
		ok(t, e.call("StartMessageMoveTask", `{"SourceArn":"`+dlqArn+`","MaxNumberOfMessagesPerSecond":1}`), &started)
		synctest.Wait() // the first moved, the task waits for its second's second
		require.Equal(t, "InvalidParameterValue", failed(t, e.call("StartMessageMoveTask", `{"SourceArn":"`+dlqArn+`"}`)).Type)
		tasks := e.moveTasks(dlqArn, 1)
		require.Equal(t, "RUNNING", tasks[0].Status)
		require.Equal(t, started.TaskHandle, tasks[0].TaskHandle)
		require.Equal(t, 1, tasks[0].MaxNumberOfMessagesPerSecond)

		var cancelled struct{ ApproximateNumberOfMessagesMoved int64 }
		ok(t, e.call("CancelMessageMoveTask", `{"TaskHandle":"`+started.TaskHandle+`"}`), &cancelled)
		require.Equal(t, int64(1), cancelled.ApproximateNumberOfMessagesMoved)
		synctest.Wait()
		tasks = e.moveTasks(dlqArn, 1)
		require.Equal(t, "CANCELLED", tasks[0].Status)
		require.Equal(t, "ResourceNotFoundException", failed(t, e.call("CancelMessageMoveTask", `{"TaskHandle":"`+started.TaskHandle+`"}`)).Type)
		require.Len(t, e.receive(`{"QueueUrl":"`+baseURL+`/jobs","MaxNumberOfMessages":10}`), 1)

		// The two left, to another queue.
		ok(t, e.call("StartMessageMoveTask", `{"SourceArn":"`+dlqArn+`","DestinationArn":"arn:aws:sqs:us-east-1:000000000000:other"}`), &started)
		synctest.Wait()
		tasks = e.moveTasks(dlqArn, 10)
		require.Len(t, tasks, 2)
		require.Equal(t, "COMPLETED", tasks[0].Status)
		require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:other", tasks[0].DestinationArn)
		require.Len(t, e.receive(`{"QueueUrl":"`+baseURL+`/other","MaxNumberOfMessages":10}`), 2)
	})
}

// TestRedriveRefusals: a bad RedrivePolicy or move task request gets SQS's typed error and
// changes nothing.
func TestRedriveRefusals(t *testing.T) {
	e := newRedriveEnv(t)
	ok(t, e.call("CreateQueue", `{"QueueName":"dlq"}`), nil)
	ok(t, e.call("CreateQueue", `{"QueueName":"jobs"}`), nil)
	q := baseURL + "/jobs"
	policy := func(p string) string { return `{"RedrivePolicy":` + jsonString(p) + `}` }
	before := e.storeAttributes("jobs")
	for _, tc := range []struct{ action, body, code string }{
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":` + policy(`{"maxReceiveCount":0,"deadLetterTargetArn":"`+dlqArn+`"}`) + `}`, "InvalidParameterValue"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":` + policy(`{"maxReceiveCount":1001,"deadLetterTargetArn":"`+dlqArn+`"}`) + `}`, "InvalidParameterValue"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":` + policy(`{"maxReceiveCount":"x","deadLetterTargetArn":"`+dlqArn+`"}`) + `}`, "InvalidParameterValue"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":` + policy(`{"maxReceiveCount":2}`) + `}`, "InvalidParameterValue"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":` + policy(`{"maxReceiveCount":2,"deadLetterTargetArn":"`+dlqArn+`","x":1}`) + `}`, "InvalidParameterValue"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":` + policy(`{"maxReceiveCount":2,"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:nope"}`) + `}`, "InvalidParameterValue"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":` + policy(`{"maxReceiveCount":2,"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:000000000000:dlq"}`) + `}`, "InvalidParameterValue"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":` + policy(`{"maxReceiveCount":2,"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:jobs"}`) + `}`, "InvalidParameterValue"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":` + policy(`[]`) + `}`, "InvalidParameterValue"},
		{"CreateQueue", `{"QueueName":"new","Attributes":` + policy(`{"maxReceiveCount":2,"deadLetterTargetArn":"nope"}`) + `}`, "InvalidParameterValue"},
		{"StartMessageMoveTask", `{}`, "MissingParameter"},
		{"StartMessageMoveTask", `{"SourceArn":"` + dlqArn + `"}`, "InvalidParameterValue"}, // no queue's DLQ
		{"StartMessageMoveTask", `{"SourceArn":"arn:aws:sqs:us-east-1:000000000000:nope"}`, "ResourceNotFoundException"},
		{"StartMessageMoveTask", `{"SourceArn":"nope"}`, "ResourceNotFoundException"},
		{"StartMessageMoveTask", `{"SourceArn":"` + dlqArn + `","MaxNumberOfMessagesPerSecond":501}`, "InvalidParameterValue"},
		{"StartMessageMoveTask", `{"SourceArn":"` + dlqArn + `","DestinationArn":"` + dlqArn + `"}`, "InvalidParameterValue"},
		{"ListMessageMoveTasks", `{}`, "MissingParameter"},
		{"ListMessageMoveTasks", `{"SourceArn":"` + dlqArn + `","MaxResults":11}`, "InvalidParameterValue"},
		{"ListMessageMoveTasks", `{"SourceArn":"arn:aws:sqs:us-east-1:000000000000:nope"}`, "ResourceNotFoundException"},
		{"CancelMessageMoveTask", `{}`, "MissingParameter"},
		{"CancelMessageMoveTask", `{"TaskHandle":"nope"}`, "ResourceNotFoundException"},
		{"ListDeadLetterSourceQueues", `{}`, "MissingParameter"},
		{"ListDeadLetterSourceQueues", `{"QueueUrl":"` + baseURL + `/nope"}`, "QueueDoesNotExist"},
		{"ListDeadLetterSourceQueues", `{"QueueUrl":"` + baseURL + `/dlq","MaxResults":1,"NextToken":"!"}`, "InvalidParameterValue"},
		{"ListDeadLetterSourceQueues", `{"QueueUrl":"` + baseURL + `/dlq","NextToken":"am9icw"}`, "InvalidParameterValue"},
	} {
		got := failed(t, e.call(tc.action, tc.body))
		require.Equal(t, tc.code, got.Type, tc.action+" "+tc.body)
	}
	require.Equal(t, []string{"dlq", "jobs"}, e.store.ListQueues(""))
	require.Equal(t, before, e.storeAttributes("jobs"))
	require.Empty(t, e.moveTasks(dlqArn, 10))

	// Without ProduceRecord a dead-letter queue cannot keep a message's attributes.
	h := mustNew(t, e.node, sqsapi.Config{Store: e.store, Produce: func(context.Context, string, []byte) (int32, int64, error) { return 0, 0, nil }})
	got := failed(t, call(h, "SetQueueAttributes", `{"QueueUrl":"`+q+`","Attributes":`+policy(`{"maxReceiveCount":2,"deadLetterTargetArn":"`+dlqArn+`"}`)+`}`))
	require.Equal(t, "InvalidAttributeValue", got.Type)
}

// TestRedriveQuery: the query protocol sets a RedrivePolicy (Attribute.N.Name and .Value)
// and serves the move tasks in SQS's XML.
func TestRedriveQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRedriveEnv(t)
		queryOK(t, queryCall(e.h, "CreateQueue", url.Values{"QueueName": {"dlq"}}))
		queryOK(t, queryCall(e.h, "CreateQueue", url.Values{"QueueName": {"jobs"}, "Attribute.1.Name": {"RedrivePolicy"},
			"Attribute.1.Value": {`{"maxReceiveCount":"1","deadLetterTargetArn":"` + dlqArn + `"}`}}))
		attrs := queryOK(t, queryCall(e.h, "GetQueueAttributes", url.Values{"QueueUrl": {baseURL + "/jobs"}, "AttributeName.1": {"RedrivePolicy"}}))
		require.Equal(t, `{"deadLetterTargetArn":"`+dlqArn+`","maxReceiveCount":1}`, attrs.Result.Attribute[0].Value)
		require.Equal(t, [3]string{"Bad Request", "Sender", "InvalidParameterValue"}, queryError(t, queryCall(e.h, "SetQueueAttributes",
			url.Values{"QueueUrl": {baseURL + "/jobs"}, "Attribute.1.Name": {"RedrivePolicy"}, "Attribute.1.Value": {`{"maxReceiveCount":"0"}`}})))

		e.deadLetter("jobs", 1)
		rec := queryCall(e.h, "StartMessageMoveTask", url.Values{"SourceArn": {dlqArn}})
		require.Equal(t, 200, rec.Code, rec.Body.String())
		var started struct {
			Result struct{ TaskHandle string } `xml:"StartMessageMoveTaskResult"`
		}
		require.NoError(t, xml.Unmarshal(rec.Body.Bytes(), &started))
		require.NotEmpty(t, started.Result.TaskHandle)
		synctest.Wait()

		rec = queryCall(e.h, "ListMessageMoveTasks", url.Values{"SourceArn": {dlqArn}, "MaxResults": {"10"}})
		require.Equal(t, 200, rec.Code, rec.Body.String())
		var list struct {
			Result struct {
				Entries []struct {
					Status                           string
					SourceArn                        string
					ApproximateNumberOfMessagesMoved int64
					StartedTimestamp                 int64
				} `xml:"ListMessageMoveTasksResultEntry"`
			} `xml:"ListMessageMoveTasksResult"`
		}
		require.NoError(t, xml.Unmarshal(rec.Body.Bytes(), &list))
		require.Len(t, list.Result.Entries, 1, rec.Body.String())
		require.Equal(t, "COMPLETED", list.Result.Entries[0].Status)
		require.Equal(t, int64(1), list.Result.Entries[0].ApproximateNumberOfMessagesMoved)
		require.Equal(t, "m0", e.receive(`{"QueueUrl":"` + baseURL + `/jobs"}`)[0].Body)
		require.Equal(t, [3]string{"Bad Request", "Sender", "ResourceNotFoundException"},
			queryError(t, queryCall(e.h, "CancelMessageMoveTask", url.Values{"TaskHandle": {"x"}})))
		require.True(t, strings.Contains(rec.Body.String(), "<ListMessageMoveTasksResponse"))
	})
}
