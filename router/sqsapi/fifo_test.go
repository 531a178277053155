package sqsapi_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/sqsapi"
)

// fifoEnv is a handler over a real node whose queues live in a MemQueueStore, each a topic
// of one partition whose TopicConfig is sqsapi.TopicConfig of its record (a FIFO queue's
// ordered), with a ProduceRecord that appends to the log (key, headers and all), and a clock
// of its own.
type fifoEnv struct {
	*env
	store *sqsapi.MemQueueStore

	mu         sync.Mutex
	clock      time.Time
	failNext   error         // the next produce fails so
	entered    chan struct{} // with gate: each produce says it started, then waits for gate
	gate       chan struct{}
	produceLog []string // queue/body of every record produced
}

func newFIFOEnv(t *testing.T) *fifoEnv {
	t.Helper()
	store := &sqsapi.MemQueueStore{}
	f := &fifoEnv{store: store, clock: time.Unix(1767000000, 0)}
	f.env = newEnv(t, sqsapi.Config{}, func(c *router.Config) {
		c.Topic = func(topic string) router.TopicConfig {
			rec, _ := store.Queue(topic)
			return sqsapi.TopicConfig(rec)
		}
	})
	store.CreateTopic = func(_ context.Context, queue, _ string) (string, error) {
		f.logs.Log(queue, 0)
		f.routes.Set(queue, 0)
		return queue, nil
	}
	f.restart()
	return f
}

// restart puts a new handler in place of the env's, over the same node, log and store: a
// handler restarted, which remembers nothing of the old one's.
func (f *fifoEnv) restart() {
	f.h = mustNew(f.t, f.node, sqsapi.Config{
		Store: f.store, BaseURL: baseURL, ProduceRecord: f.produceRecord,
		Now: func() time.Time {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.clock
		},
	})
}

func (f *fifoEnv) produceRecord(_ context.Context, topic string, rec router.Record) (int32, int64, error) {
	f.mu.Lock()
	err := f.failNext
	f.failNext = nil
	entered, gate := f.entered, f.gate
	f.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
		<-gate
	}
	if err != nil {
		return 0, 0, err
	}
	if _, _, ok := f.routes.Partitions(topic); !ok {
		return 0, 0, router.ErrUnknownTopic
	}
	if rec.Timestamp.IsZero() { // a FIFO queue's send is stamped by the handler
		rec.Timestamp = sentAt
	}
	off := f.logs.Log(topic, 0).AppendRecord(rec)
	f.node.Appended(topic, 0, off+1)
	f.mu.Lock()
	f.produceLog = append(f.produceLog, topic+"/"+string(rec.Value))
	f.mu.Unlock()
	return 0, off, nil
}

func (f *fifoEnv) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock = f.clock.Add(d)
}

func (f *fifoEnv) produced() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.produceLog...)
}

// create creates queue with attrs (a JSON object's members).
func (f *fifoEnv) create(queue, attrs string) {
	f.t.Helper()
	ok(f.t, f.call("CreateQueue", `{"QueueName":"`+queue+`","Attributes":{`+attrs+`}}`), nil)
}

// sent is SendMessage's answer.
type sent struct{ MessageId, MD5OfMessageBody, SequenceNumber string }

// send sends body to queue with the members extra adds, and answers what SendMessage did.
func (f *fifoEnv) send(queue, body, extra string) sent {
	f.t.Helper()
	var out sent
	ok(f.t, f.call("SendMessage", `{"QueueUrl":"`+baseURL+`/`+queue+`","MessageBody":`+jsonString(body)+extra+`}`), &out)
	return out
}

// receiveFrom receives from queue, every system attribute asked for, with the members extra
// adds.
func (f *fifoEnv) receiveFrom(queue, extra string) []message {
	f.t.Helper()
	return f.receive(`{"QueueUrl":"` + baseURL + `/` + queue + `","MessageSystemAttributeNames":["All"]` + extra + `}`)
}

func bodies(msgs []message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Body
	}
	return out
}

const fifoAttrs = `"FifoQueue":"true"`

// TestFIFOCreateQueue: a queue whose name ends in .fifo is created with FifoQueue=true, and
// answers its FIFO attributes; its topic is ordered. The rule of the name and the FIFO
// attributes' values are SQS's, each refusal creating or changing nothing.
func TestFIFOCreateQueue(t *testing.T) {
	f := newFIFOEnv(t)
	f.create("jobs.fifo", fifoAttrs)
	f.create("plain", "")
	attrs := func(queue string) map[string]string {
		var out struct{ Attributes map[string]string }
		ok(t, f.call("GetQueueAttributes", `{"QueueUrl":"`+baseURL+`/`+queue+`","AttributeNames":["All"]}`), &out)
		return out.Attributes
	}
	got := attrs("jobs.fifo")
	for k, v := range map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "false", "DeduplicationScope": "queue", "FifoThroughputLimit": "perQueue"} {
		require.Equal(t, v, got[k], k)
	}
	for _, k := range []string{"FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"} {
		require.NotContains(t, attrs("plain"), k)
	}
	rec, _ := f.store.Queue("jobs.fifo")
	require.True(t, sqsapi.IsFIFO(rec))
	require.Equal(t, router.TopicConfig{Ordered: true, VisibilityTimeout: 30 * time.Second, ReadAhead: router.ReadAheadOff}, sqsapi.TopicConfig(rec),
		"a FIFO queue's receive takes a group's run from its owner: no node reads ahead")
	plain, _ := f.store.Queue("plain")
	require.Equal(t, router.TopicConfig{VisibilityTimeout: 30 * time.Second}, sqsapi.TopicConfig(plain), "the queue's visibility timeout, the topic's")

	// The same again is the same queue; another value of a FIFO attribute is another.
	f.create("jobs.fifo", fifoAttrs+`,"ContentBasedDeduplication":"false"`)
	require.Equal(t, "QueueNameExists", failed(t, f.call("CreateQueue", `{"QueueName":"jobs.fifo","Attributes":{`+fifoAttrs+`,"ContentBasedDeduplication":"true"}}`)).Type)

	// The FIFO attributes set, in any case of their values, and answered as SQS writes them.
	ok(t, f.call("SetQueueAttributes", `{"QueueUrl":"`+baseURL+`/jobs.fifo","Attributes":{"ContentBasedDeduplication":"TRUE","DeduplicationScope":"messageGroup","FifoThroughputLimit":"perMessageGroupId"}}`), nil)
	got = attrs("jobs.fifo")
	require.Equal(t, []string{"true", "messageGroup", "perMessageGroupId"}, []string{got["ContentBasedDeduplication"], got["DeduplicationScope"], got["FifoThroughputLimit"]})
	f.create("high.fifo", fifoAttrs+`,"DeduplicationScope":"messageGroup","FifoThroughputLimit":"perMessageGroupId"`)

	before := f.queues()
	for _, tc := range []struct{ name, action, body, code string }{
		{"a .fifo name without FifoQueue", "CreateQueue", `{"QueueName":"x.fifo"}`, "InvalidParameterValue"},
		{"a .fifo name with FifoQueue false", "CreateQueue", `{"QueueName":"x.fifo","Attributes":{"FifoQueue":"false"}}`, "InvalidParameterValue"},
		{"FifoQueue without .fifo", "CreateQueue", `{"QueueName":"x","Attributes":{"FifoQueue":"true"}}`, "InvalidParameterValue"},
		{"FifoQueue false on a standard queue", "CreateQueue", `{"QueueName":"x","Attributes":{"FifoQueue":"false"}}`, "InvalidAttributeName"},
		{"content-based deduplication on a standard queue", "CreateQueue", `{"QueueName":"x","Attributes":{"ContentBasedDeduplication":"true"}}`, "InvalidAttributeName"},
		{"a scope on a standard queue", "CreateQueue", `{"QueueName":"x","Attributes":{"DeduplicationScope":"queue"}}`, "InvalidAttributeName"},
		{"FifoQueue not a boolean", "CreateQueue", `{"QueueName":"x.fifo","Attributes":{"FifoQueue":"yes"}}`, "InvalidParameterValue"},
		{"ContentBasedDeduplication not a boolean", "CreateQueue", `{"QueueName":"x.fifo","Attributes":{` + fifoAttrs + `,"ContentBasedDeduplication":"1"}}`, "InvalidAttributeValue"},
		{"an unknown scope", "CreateQueue", `{"QueueName":"x.fifo","Attributes":{` + fifoAttrs + `,"DeduplicationScope":"group"}}`, "InvalidAttributeValue"},
		{"an unknown throughput limit", "CreateQueue", `{"QueueName":"x.fifo","Attributes":{` + fifoAttrs + `,"FifoThroughputLimit":"perGroup"}}`, "InvalidAttributeValue"},
		{"per group throughput with a queue's scope", "CreateQueue", `{"QueueName":"x.fifo","Attributes":{` + fifoAttrs + `,"FifoThroughputLimit":"perMessageGroupId"}}`, "InvalidAttributeValue"},
		{"FifoQueue set after creation", "SetQueueAttributes", `{"QueueUrl":"` + baseURL + `/jobs.fifo","Attributes":{"FifoQueue":"true"}}`, "InvalidAttributeName"},
		{"a FIFO attribute set on a standard queue", "SetQueueAttributes", `{"QueueUrl":"` + baseURL + `/plain","Attributes":{"ContentBasedDeduplication":"false"}}`, "InvalidAttributeName"},
		{"a scope that per group throughput cannot have", "SetQueueAttributes", `{"QueueUrl":"` + baseURL + `/high.fifo","Attributes":{"DeduplicationScope":"queue","ContentBasedDeduplication":"true"}}`, "InvalidAttributeValue"},
	} {
		got := failed(t, f.call(tc.action, tc.body))
		require.Equal(t, tc.code, got.Type, tc.name+": "+got.Message)
	}
	require.Equal(t, before, f.queues())
	got = attrs("high.fifo")
	require.Equal(t, []string{"false", "messageGroup"}, []string{got["ContentBasedDeduplication"], got["DeduplicationScope"]}, "a refused change changes nothing")
}

// queues is the names the env's store holds.
func (f *fifoEnv) queues() []string { return f.store.ListQueues("") }

// TestFIFORedriveType: a FIFO queue's dead-letter queue is a FIFO queue, a standard queue's a
// standard one.
func TestFIFORedriveType(t *testing.T) {
	f := newFIFOEnv(t)
	f.create("jobs.fifo", fifoAttrs)
	f.create("dlq.fifo", fifoAttrs)
	f.create("dlq", "")
	policy := func(dlq string) string {
		return jsonString(`{"maxReceiveCount":3,"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:` + dlq + `"}`)
	}
	ok(t, f.call("SetQueueAttributes", `{"QueueUrl":"`+baseURL+`/jobs.fifo","Attributes":{"RedrivePolicy":`+policy("dlq.fifo")+`}}`), nil)
	rec, _ := f.store.Queue("jobs.fifo")
	require.Equal(t, router.TopicConfig{MaxDeliveries: 3, Ordered: true, VisibilityTimeout: 30 * time.Second, ReadAhead: router.ReadAheadOff}, sqsapi.TopicConfig(rec))
	require.Equal(t, "InvalidParameterValue", failed(t, f.call("SetQueueAttributes", `{"QueueUrl":"`+baseURL+`/jobs.fifo","Attributes":{"RedrivePolicy":`+policy("dlq")+`}}`)).Type)
	require.Equal(t, "InvalidParameterValue", failed(t, f.call("CreateQueue", `{"QueueName":"plain","Attributes":{"RedrivePolicy":`+policy("dlq.fifo")+`}}`)).Type)
	require.NotContains(t, f.queues(), "plain")
}

// TestFIFOSendRefusals: what SQS refuses of a message to a FIFO queue, and of a FIFO
// message to a standard queue, is refused with its code, and nothing is sent; a batch's
// refused entries fail alone.
func TestFIFOSendRefusals(t *testing.T) {
	f := newFIFOEnv(t)
	f.create("jobs.fifo", fifoAttrs)
	f.create("plain", "")
	long := strings.Repeat("g", 129)
	for _, tc := range []struct{ name, queue, extra, code string }{
		{"no group", "jobs.fifo", `,"MessageDeduplicationId":"d"`, "MissingParameter"},
		{"no deduplication id, nor content-based deduplication", "jobs.fifo", `,"MessageGroupId":"g"`, "InvalidParameterValue"},
		{"a delay", "jobs.fifo", `,"MessageGroupId":"g","MessageDeduplicationId":"d","DelaySeconds":5`, "InvalidParameterValue"},
		{"an empty group", "jobs.fifo", `,"MessageGroupId":"","MessageDeduplicationId":"d"`, "InvalidParameterValue"},
		{"a group too long", "jobs.fifo", `,"MessageGroupId":"` + long + `","MessageDeduplicationId":"d"`, "InvalidParameterValue"},
		{"a space in a group", "jobs.fifo", `,"MessageGroupId":"a b","MessageDeduplicationId":"d"`, "InvalidParameterValue"},
		{"a deduplication id too long", "jobs.fifo", `,"MessageGroupId":"g","MessageDeduplicationId":"` + long + `"`, "InvalidParameterValue"},
		{"a deduplication id not ASCII", "jobs.fifo", `,"MessageGroupId":"g","MessageDeduplicationId":"d\u00e9"`, "InvalidParameterValue"},
		{"a deduplication id to a standard queue", "plain", `,"MessageDeduplicationId":"d"`, "InvalidParameterValue"},
		{"a delay too long to a standard queue", "plain", `,"DelaySeconds":901`, "InvalidParameterValue"},
	} {
		got := failed(t, f.call("SendMessage", `{"QueueUrl":"`+baseURL+`/`+tc.queue+`","MessageBody":"x"`+tc.extra+`}`))
		require.Equal(t, tc.code, got.Type, tc.name+": "+got.Message)
	}
	require.Empty(t, f.produced())

	var out batchResult
	ok(t, f.call("SendMessageBatch", `{"QueueUrl":"`+baseURL+`/jobs.fifo","Entries":[`+
		`{"Id":"a","MessageBody":"1","MessageGroupId":"g","MessageDeduplicationId":"1"},`+
		`{"Id":"b","MessageBody":"2","MessageDeduplicationId":"2"},`+
		`{"Id":"c","MessageBody":"3","MessageGroupId":"g"},`+
		`{"Id":"d","MessageBody":"4","MessageGroupId":"g","MessageDeduplicationId":"4","DelaySeconds":1}]}`), &out)
	require.Equal(t, []string{"a"}, out.successIDs())
	require.Equal(t, []string{"b=MissingParameter", "c=InvalidParameterValue", "d=InvalidParameterValue"}, out.failedCodes())
	require.Equal(t, []string{"jobs.fifo/1"}, f.produced())

	// A standard queue takes a MessageGroupId (SQS's fair queues): the record's key.
	f.send("plain", "fair", `,"MessageGroupId":"tenant-1"`)
	msgs := f.receiveFrom("plain", "")
	require.Len(t, msgs, 1)
	require.Equal(t, "tenant-1", msgs[0].Attributes["MessageGroupId"])
	require.NotContains(t, msgs[0].Attributes, "SequenceNumber", "a FIFO queue's only")
	require.NotContains(t, msgs[0].Attributes, "MessageDeduplicationId")
}

// TestFIFOWithoutProduceRecord: a handler whose Produce keeps bodies only refuses a message
// group rather than dropping it; a FIFO queue of Config.Queues (its name's) answers SQS's
// FIFO attributes' defaults, and a CreateQueue of it with those.
func TestFIFOWithoutProduceRecord(t *testing.T) {
	fk := &fakeNode{}
	produced := 0
	h := fakeHandler(t, fk, func(c *sqsapi.Config) {
		c.Produce = func(context.Context, string, []byte) (int32, int64, error) { produced++; return 0, 0, nil }
	})
	got := failed(t, call(h, "SendMessage", `{"QueueUrl":"`+baseURL+`/jobs.fifo","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"d"}`))
	require.Equal(t, "InvalidParameterValue", got.Type, got.Message)
	require.Zero(t, produced)
	var out struct{ Attributes map[string]string }
	ok(t, call(h, "GetQueueAttributes", `{"QueueUrl":"`+baseURL+`/jobs.fifo","AttributeNames":["FifoQueue","ContentBasedDeduplication"]}`), &out)
	require.Equal(t, map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "false"}, out.Attributes)
	var created struct{ QueueUrl string }
	ok(t, call(h, "CreateQueue", `{"QueueName":"jobs.fifo","Attributes":{"FifoQueue":"true"}}`), &created)
	require.Equal(t, baseURL+"/jobs.fifo", created.QueueUrl, "the host's FIFO queue, as its client expects it")
	require.Equal(t, "UnsupportedOperation", failed(t, call(h, "CreateQueue", `{"QueueName":"jobs.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"true"}}`)).Type)
	var plain struct{ Attributes map[string]string }
	ok(t, call(h, "GetQueueAttributes", `{"QueueUrl":"`+baseURL+`/orders","AttributeNames":["FifoQueue"]}`), &plain)
	require.Empty(t, plain.Attributes)
}

// TestFIFOOrder: a FIFO queue delivers each group's messages in order, several of one group
// in one receive, holds a group while one of its messages is in flight without holding the
// others, and delivers a group's message again (a ChangeMessageVisibility to 0, a visibility
// timeout that lapsed) before the group's later ones.
func TestFIFOOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFIFOEnv(t)
		f.create("jobs.fifo", fifoAttrs+`,"ContentBasedDeduplication":"true"`)
		var batch batchResult
		entries := []string{}
		for i, m := range [][2]string{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"b", "b2"}, {"a", "a3"}} {
			entries = append(entries, `{"Id":"e`+itoa(i)+`","MessageBody":"`+m[1]+`","MessageGroupId":"`+m[0]+`"}`)
		}
		ok(t, f.call("SendMessageBatch", `{"QueueUrl":"`+baseURL+`/jobs.fifo","Entries":[`+strings.Join(entries, ",")+`]}`), &batch)
		require.Len(t, batch.Successful, 5)
		var seqs struct {
			Successful []struct{ Id, MessageId, SequenceNumber string }
		}
		ok(t, f.call("SendMessageBatch", `{"QueueUrl":"`+baseURL+`/jobs.fifo","Entries":[`+strings.Join(entries, ",")+`]}`), &seqs)
		require.Len(t, f.produced(), 5, "the batch again is five duplicates: content-based deduplication")

		first := f.receiveFrom("jobs.fifo", `,"MaxNumberOfMessages":3,"VisibilityTimeout":30`)
		require.Equal(t, []string{"a1", "b1", "a2"}, bodies(first), "two of a in one receive")
		for i, m := range first {
			require.Equal(t, seqs.Successful[i].MessageId, m.MessageId)
			require.Equal(t, seqs.Successful[i].SequenceNumber, m.Attributes["SequenceNumber"], "what the send answered")
			require.Equal(t, []string{"a", "b", "a"}[i], m.Attributes["MessageGroupId"])
			require.Len(t, m.Attributes["MessageDeduplicationId"], 64, "the body's SHA-256")
		}
		require.Less(t, seqNum(t, first[0]), seqNum(t, first[2]))
		require.Empty(t, f.receiveFrom("jobs.fifo", `,"MaxNumberOfMessages":10`), "both groups are held")

		// a's received messages deleted: a goes on while b stays held.
		del := func(m message) {
			ok(t, f.call("DeleteMessage", `{"QueueUrl":"`+baseURL+`/jobs.fifo","ReceiptHandle":"`+m.ReceiptHandle+`"}`), nil)
		}
		del(first[0])
		require.Empty(t, f.receiveFrom("jobs.fifo", `,"MaxNumberOfMessages":10`), "a2 still holds a")
		del(first[2])
		second := f.receiveFrom("jobs.fifo", `,"MaxNumberOfMessages":10,"VisibilityTimeout":30`)
		require.Equal(t, []string{"a3"}, bodies(second), "a held b holds only b")

		// b1 given up: it comes again before b2 (which waited behind it), counted twice.
		ok(t, f.call("ChangeMessageVisibility", `{"QueueUrl":"`+baseURL+`/jobs.fifo","ReceiptHandle":"`+first[1].ReceiptHandle+`","VisibilityTimeout":0}`), nil)
		third := f.receiveFrom("jobs.fifo", `,"MaxNumberOfMessages":10,"VisibilityTimeout":60`)
		require.Equal(t, []string{"b1", "b2"}, bodies(third))
		require.Equal(t, []string{"2", "1"}, []string{third[0].Attributes["ApproximateReceiveCount"], third[1].Attributes["ApproximateReceiveCount"]})
		require.Equal(t, first[1].Attributes["SequenceNumber"], third[0].Attributes["SequenceNumber"])
		require.Empty(t, f.receiveFrom("jobs.fifo", `,"MaxNumberOfMessages":10`), "b1 and b2 hold b")
		del(third[0])
		del(third[1])

		// a3's visibility timeout lapses: it comes again before anything later of a.
		f.send("jobs.fifo", "a4", `,"MessageGroupId":"a"`)
		require.Empty(t, f.receiveFrom("jobs.fifo", `,"MaxNumberOfMessages":10`), "a is held")
		time.Sleep(31 * time.Second) // a fake clock: synctest
		synctest.Wait()
		again := f.receiveFrom("jobs.fifo", `,"MaxNumberOfMessages":10,"VisibilityTimeout":30`)
		require.Equal(t, []string{"a3", "a4"}, bodies(again))
		require.Equal(t, "2", again[0].Attributes["ApproximateReceiveCount"])
		del(again[0])
		del(again[1])
		require.Empty(t, f.receiveFrom("jobs.fifo", `,"MaxNumberOfMessages":10`))
	})
}

// seqNum is a received message's SequenceNumber.
func seqNum(t *testing.T, m message) uint64 {
	n, err := strconv.ParseUint(m.Attributes["SequenceNumber"], 10, 64)
	require.NoError(t, err)
	return n
}

// TestFIFODeduplication: a message whose deduplication id was sent within
// DeduplicationWindow, on the handler's clock, is answered with the original's MessageId and
// SequenceNumber and not sent; after the window, or once the queue was deleted, it is sent.
// Content-based deduplication takes the body's SHA-256, which an explicit id overrides; a
// DeduplicationScope of messageGroup scopes ids to a group; a send that failed holds no id.
func TestFIFODeduplication(t *testing.T) {
	f := newFIFOEnv(t)
	f.create("jobs.fifo", fifoAttrs)
	g := `,"MessageGroupId":"g"`
	orig := f.send("jobs.fifo", "one", g+`,"MessageDeduplicationId":"d1"`)
	require.NotEmpty(t, orig.SequenceNumber)
	f.advance(sqsapi.DeduplicationWindow - time.Nanosecond)
	dup := f.send("jobs.fifo", "other", g+`,"MessageDeduplicationId":"d1"`)
	require.Equal(t, orig.MessageId, dup.MessageId)
	require.Equal(t, orig.SequenceNumber, dup.SequenceNumber)
	require.NotEqual(t, orig.MD5OfMessageBody, dup.MD5OfMessageBody, "the MD5 of the body sent, which the SDKs check")
	require.Equal(t, []string{"jobs.fifo/one"}, f.produced())
	f.advance(time.Nanosecond)
	later := f.send("jobs.fifo", "again", g+`,"MessageDeduplicationId":"d1"`)
	require.NotEqual(t, orig.MessageId, later.MessageId, "the window has passed")
	require.Greater(t, seqNum(t, message{Attributes: map[string]string{"SequenceNumber": later.SequenceNumber}}),
		seqNum(t, message{Attributes: map[string]string{"SequenceNumber": orig.SequenceNumber}}))

	// Within one batch, the second entry of an id is the first's duplicate.
	var batch struct {
		Successful []struct{ Id, MessageId, SequenceNumber string }
	}
	ok(t, f.call("SendMessageBatch", `{"QueueUrl":"`+baseURL+`/jobs.fifo","Entries":[`+
		`{"Id":"a","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"b1"},`+
		`{"Id":"b","MessageBody":"y","MessageGroupId":"h","MessageDeduplicationId":"b1"}]}`), &batch)
	require.Len(t, batch.Successful, 2)
	require.Equal(t, batch.Successful[0].MessageId, batch.Successful[1].MessageId)
	require.Equal(t, batch.Successful[0].SequenceNumber, batch.Successful[1].SequenceNumber)

	// A failed send leaves its id free.
	f.mu.Lock()
	f.failNext = errors.New("the disk is full")
	f.mu.Unlock()
	require.Equal(t, "InternalFailure", failed(t, f.call("SendMessage", `{"QueueUrl":"`+baseURL+`/jobs.fifo","MessageBody":"z"`+g+`,"MessageDeduplicationId":"f1"}`)).Type)
	f.send("jobs.fifo", "z", g+`,"MessageDeduplicationId":"f1"`)
	require.Equal(t, []string{"jobs.fifo/one", "jobs.fifo/again", "jobs.fifo/x", "jobs.fifo/z"}, f.produced())

	// Content-based deduplication: the body's hash, unless an id is given.
	f.create("cbd.fifo", fifoAttrs+`,"ContentBasedDeduplication":"true"`)
	a := f.send("cbd.fifo", "same", g)
	require.Equal(t, a.MessageId, f.send("cbd.fifo", "same", `,"MessageGroupId":"other"`).MessageId, "a queue's scope: any group")
	require.NotEqual(t, a.MessageId, f.send("cbd.fifo", "same", g+`,"MessageDeduplicationId":"explicit"`).MessageId)
	require.NotEqual(t, a.MessageId, f.send("cbd.fifo", "different", g).MessageId)
	require.Len(t, f.produced(), 7)

	// A group's scope: one id in two groups is two messages.
	f.create("scoped.fifo", fifoAttrs+`,"DeduplicationScope":"messageGroup"`)
	s1 := f.send("scoped.fifo", "1", `,"MessageGroupId":"g1","MessageDeduplicationId":"d"`)
	s2 := f.send("scoped.fifo", "2", `,"MessageGroupId":"g2","MessageDeduplicationId":"d"`)
	require.NotEqual(t, s1.MessageId, s2.MessageId)
	require.Equal(t, s1.MessageId, f.send("scoped.fifo", "3", `,"MessageGroupId":"g1","MessageDeduplicationId":"d"`).MessageId)
	require.Len(t, f.produced(), 9)

	// A queue deleted forgets its ids: the queue created again under its name sends them.
	ok(t, f.call("DeleteQueue", `{"QueueUrl":"`+baseURL+`/scoped.fifo"}`), nil)
	f.advance(sqsapi.RecentWindow)
	f.create("scoped.fifo", fifoAttrs+`,"DeduplicationScope":"messageGroup"`)
	f.send("scoped.fifo", "4", `,"MessageGroupId":"g1","MessageDeduplicationId":"d"`)
	require.Len(t, f.produced(), 10)
}

// TestFIFODeduplicationRestart: a restarted handler rebuilds a FIFO queue's deduplication
// window from the log at its first send: a send retried within DeduplicationWindow of the
// first is answered with the original's MessageId and SequenceNumber and not sent again, one
// retried after is sent; a group's scope keys the rebuilt ids by group.
func TestFIFODeduplicationRestart(t *testing.T) {
	f := newFIFOEnv(t)
	f.create("jobs.fifo", fifoAttrs)
	f.create("scoped.fifo", fifoAttrs+`,"DeduplicationScope":"messageGroup"`)
	const n = 40
	var orig []sent
	for i := range n { // one every 10 s: the last 30 within the window at the end
		orig = append(orig, f.send("jobs.fifo", "m"+itoa(i), `,"MessageGroupId":"g`+itoa(i%3)+`","MessageDeduplicationId":"d`+itoa(i)+`"`))
		f.advance(10 * time.Second)
	}
	scoped := f.send("scoped.fifo", "s", `,"MessageGroupId":"g1","MessageDeduplicationId":"d"`)
	f.advance(-10 * time.Second) // the last send of jobs.fifo was 0 s ago, the first 390 s ago
	f.restart()
	require.Len(t, f.produced(), n+1)
	for i := n - 1; i >= 0; i-- {
		again := f.send("jobs.fifo", "again", `,"MessageGroupId":"g`+itoa(i%3)+`","MessageDeduplicationId":"d`+itoa(i)+`"`)
		if i >= 10 { // sent less than 300 s before
			require.Equal(t, orig[i], sent{again.MessageId, orig[i].MD5OfMessageBody, again.SequenceNumber}, "d%d, sent %d s ago", i, 390-10*i)
			continue
		}
		require.NotEqual(t, orig[i].MessageId, again.MessageId, "d%d, sent %d s ago", i, 390-10*i)
	}
	require.Len(t, f.produced(), n+1+10)

	require.Equal(t, scoped.MessageId, f.send("scoped.fifo", "s", `,"MessageGroupId":"g1","MessageDeduplicationId":"d"`).MessageId)
	require.NotEqual(t, scoped.MessageId, f.send("scoped.fifo", "s", `,"MessageGroupId":"g2","MessageDeduplicationId":"d"`).MessageId)

	// The window rebuilt ends as it would have: 300 s after each first send.
	last := `,"MessageGroupId":"g0","MessageDeduplicationId":"d` + itoa(n-1) + `"`
	f.advance(sqsapi.DeduplicationWindow - time.Nanosecond)
	require.Equal(t, orig[n-1].MessageId, f.send("jobs.fifo", "late", last).MessageId)
	f.advance(time.Nanosecond)
	require.NotEqual(t, orig[n-1].MessageId, f.send("jobs.fifo", "late", last).MessageId)
}

// TestFIFODeduplicationRebuildFails: a rebuild of the window that fails fails the send
// (which the SDKs retry), sending nothing, and the next send rebuilds it; once rebuilt, the
// log is not read again.
func TestFIFODeduplicationRebuildFails(t *testing.T) {
	fk := &fakeNode{Err: router.ErrUnavailable, Status: []router.PartitionStatus{{Partition: 0, HighWatermark: 5}}}
	produced := 0
	h := fakeHandler(t, fk, func(c *sqsapi.Config) {
		c.ProduceRecord = func(context.Context, string, router.Record) (int32, int64, error) {
			produced++
			return 0, int64(produced), nil
		}
	})
	body := `{"QueueUrl":"` + baseURL + `/jobs.fifo","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"d"}`
	require.Equal(t, "ServiceUnavailable", failed(t, call(h, "SendMessage", body)).Type)
	require.Zero(t, produced)
	fk.Err = nil
	replays := func() int {
		n := 0
		for _, c := range fk.Calls {
			if strings.HasPrefix(c, "Replay ") {
				n++
			}
		}
		return n
	}
	var first, second sent
	ok(t, call(h, "SendMessage", body), &first)
	read := replays()
	require.Positive(t, read, "the log read")
	ok(t, call(h, "SendMessage", body), &second)
	require.Equal(t, first.MessageId, second.MessageId)
	ok(t, call(h, "SendMessage", strings.Replace(body, `"d"`, `"e"`, 1)), nil)
	require.Equal(t, 2, produced)
	require.Equal(t, read, replays(), "read once")
}

// TestFIFODeduplicationConcurrent: a send of an id whose first send is still in progress
// waits for it and answers its MessageId: one record for both.
func TestFIFODeduplicationConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFIFOEnv(t)
		f.create("jobs.fifo", fifoAttrs)
		f.mu.Lock()
		f.entered, f.gate = make(chan struct{}, 2), make(chan struct{})
		f.mu.Unlock()
		answers := make(chan sent, 2)
		for range 2 {
			go func() { answers <- f.send("jobs.fifo", "x", `,"MessageGroupId":"g","MessageDeduplicationId":"d"`) }()
		}
		<-f.entered // one send produces; the other waits for it
		synctest.Wait()
		require.Len(t, f.entered, 0, "the second send did not produce")
		close(f.gate)
		a, b := <-answers, <-answers
		require.Equal(t, a, b)
		require.Len(t, f.produced(), 1)
	})
}

// TestFIFOReceiveRequestAttemptId: a FIFO queue's receive retried with its
// ReceiveRequestAttemptId within ReceiveAttemptWindow answers the same messages with the
// same receipt handles, their visibility timeout reset, while none was deleted, had its
// visibility changed or lapsed; otherwise, after the window, or with another id, it is a new
// receive. An id SQS would refuse is refused.
func TestFIFOReceiveRequestAttemptId(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFIFOEnv(t)
		f.create("jobs.fifo", fifoAttrs+`,"ContentBasedDeduplication":"true"`)
		f.create("other.fifo", fifoAttrs+`,"ContentBasedDeduplication":"true"`)
		for _, m := range [][2]string{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"c", "c1"}, {"d", "d1"}} {
			f.send("jobs.fifo", m[1], `,"MessageGroupId":"`+m[0]+`"`)
		}
		f.send("other.fifo", "o1", `,"MessageGroupId":"o"`)
		receive := func(id string, vis int) []message {
			t.Helper()
			extra := `,"MaxNumberOfMessages":2,"VisibilityTimeout":` + itoa(vis)
			if id != "" {
				extra += `,"ReceiveRequestAttemptId":"` + id + `"`
			}
			return f.receiveFrom("jobs.fifo", extra)
		}
		handles := func(msgs []message) []string {
			var out []string
			for _, m := range msgs {
				out = append(out, m.ReceiptHandle)
			}
			return out
		}
		first := receive("r1", 30)
		require.Equal(t, []string{"a1", "b1"}, bodies(first))
		require.Equal(t, first, receive("r1", 30), "the same messages, handles and counts")

		// The retry reset the visibility timeout: 20 s after it, 40 s after the receive,
		// a and b are still held.
		time.Sleep(20 * time.Second)
		synctest.Wait()
		require.Equal(t, first, receive("r1", 30))
		time.Sleep(20 * time.Second)
		synctest.Wait()
		require.Equal(t, []string{"c1", "d1"}, bodies(receive("", 30)), "a and b held, by the leases the retry renewed")

		// Another id, or another queue, is another receive.
		require.Empty(t, receive("r2", 30))
		other := f.receiveFrom("other.fifo", `,"ReceiveRequestAttemptId":"r1"`)
		require.Equal(t, []string{"o1"}, bodies(other))

		// A message of the answer deleted: the retry is a new receive (of a2, which a1 held).
		ok(t, f.call("DeleteMessage", `{"QueueUrl":"`+baseURL+`/jobs.fifo","ReceiptHandle":"`+first[0].ReceiptHandle+`"}`), nil)
		second := receive("r1", 60)
		require.Equal(t, []string{"a2"}, bodies(second))
		require.Equal(t, second, receive("r1", 60))

		// Its visibility changed: a new receive, which finds every group held.
		ok(t, f.call("ChangeMessageVisibility", `{"QueueUrl":"`+baseURL+`/jobs.fifo","ReceiptHandle":"`+second[0].ReceiptHandle+`","VisibilityTimeout":600}`), nil)
		require.Empty(t, receive("r1", 60))

		// Its visibility timeout lapsed: a new receive, which delivers again.
		time.Sleep(31 * time.Second) // b1's lease (renewed at 20 s for 30 s) lapsed; c1 and d1's too
		synctest.Wait()
		third := receive("r3", 30)
		require.Equal(t, []string{"b1", "c1"}, bodies(third))
		require.Equal(t, "2", third[0].Attributes["ApproximateReceiveCount"])
		time.Sleep(31 * time.Second)
		synctest.Wait()
		again := receive("r3", 600)
		require.Equal(t, []string{"b1", "c1"}, bodies(again))
		require.Equal(t, "3", again[0].Attributes["ApproximateReceiveCount"], "received anew")
		require.NotEqual(t, handles(third), handles(again))

		// The window is ReceiveAttemptWindow on the handler's clock, from the receive.
		f.advance(sqsapi.ReceiveAttemptWindow - time.Nanosecond)
		require.Equal(t, handles(again), handles(receive("r3", 600)))
		f.advance(time.Nanosecond)
		require.Equal(t, []string{"d1"}, bodies(receive("r3", 600)), "a new receive: the window ended (b1 and c1 held)")
	})
	f := newFIFOEnv(t)
	f.create("jobs.fifo", fifoAttrs+`,"ContentBasedDeduplication":"true"`)
	for _, id := range []string{"", "a b", strings.Repeat("a", 129)} {
		got := failed(t, f.call("ReceiveMessage", `{"QueueUrl":"`+baseURL+`/jobs.fifo","ReceiveRequestAttemptId":`+jsonString(id)+`}`))
		require.Equal(t, "InvalidParameterValue", got.Type, id)
	}
}

// TestFIFOQuery: the query protocol's answers carry a FIFO queue's SequenceNumber and its
// messages' FIFO attributes.
func TestFIFOQuery(t *testing.T) {
	f := newFIFOEnv(t)
	f.create("jobs.fifo", fifoAttrs)
	q := url.Values{"QueueUrl": {baseURL + "/jobs.fifo"}}
	send := url.Values{"MessageBody": {"hello"}, "MessageGroupId": {"g"}, "MessageDeduplicationId": {"d"}}
	for k, v := range q {
		send[k] = v
	}
	rec := queryCall(f.h, "SendMessage", send)
	queryOK(t, rec)
	require.Contains(t, rec.Body.String(), "<SequenceNumber>0</SequenceNumber>")
	batch := url.Values{"SendMessageBatchRequestEntry.1.Id": {"a"}, "SendMessageBatchRequestEntry.1.MessageBody": {"two"},
		"SendMessageBatchRequestEntry.1.MessageGroupId": {"g"}, "SendMessageBatchRequestEntry.1.MessageDeduplicationId": {"d2"}}
	for k, v := range q {
		batch[k] = v
	}
	rec = queryCall(f.h, "SendMessageBatch", batch)
	queryOK(t, rec)
	require.Contains(t, rec.Body.String(), "<SequenceNumber>1</SequenceNumber>")
	receive := url.Values{"AttributeName.1": {"All"}, "MaxNumberOfMessages": {"10"}}
	for k, v := range q {
		receive[k] = v
	}
	got := queryOK(t, queryCall(f.h, "ReceiveMessage", receive))
	require.Len(t, got.Result.Message, 2)
	attrs := map[string]string{}
	for _, a := range got.Result.Message[1].Attribute {
		attrs[a.Name] = a.Value
	}
	require.Equal(t, "g", attrs["MessageGroupId"])
	require.Equal(t, "d2", attrs["MessageDeduplicationId"])
	require.Equal(t, "1", attrs["SequenceNumber"])
}
