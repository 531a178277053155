package sqsapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
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

// storeEnv is an env whose handler manages its queues in a MemQueueStore: a queue's topic is
// its name, with one partition, created in the env's routes and logs; deleting the queue
// deletes the topic; purging it is the node's (router.Node.Purge: the store has no
// PurgeTopic), or, with PurgeTopic set to storeEnv.purge, trims the topic's log to its high
// watermark and drops the node's state of it.
type storeEnv struct {
	*env
	store *sqsapi.MemQueueStore
	clock time.Time

	mu          sync.Mutex
	deleted     []string // the topics DeleteTopic was handed
	storePurges int      // the calls of purge
	calls       []sqsapi.Request
}

func newStoreEnv(t *testing.T, cfg sqsapi.Config) *storeEnv {
	e := &storeEnv{env: newEnv(t, sqsapi.Config{}), clock: time.Unix(1767000000, 0)}
	e.store = &sqsapi.MemQueueStore{
		CreateTopic: func(_ context.Context, queue, topic string) (string, error) {
			if queue == "refused" {
				return "", errors.New("the host's log is full")
			}
			e.logs.Log(queue, 0)
			e.routes.Set(queue, 0)
			return queue, nil
		},
		DeleteTopic: func(_ context.Context, topic string) error {
			e.mu.Lock()
			e.deleted = append(e.deleted, topic)
			e.mu.Unlock()
			e.routes.Delete(topic)
			return e.node.DeleteTopic(topic)
		},
	}
	cfg.Store = e.store
	if cfg.Produce == nil {
		cfg.Produce = func(_ context.Context, topic string, body []byte) (int32, int64, error) {
			if _, _, ok := e.routes.Partitions(topic); !ok {
				return 0, 0, router.ErrUnknownTopic
			}
			off := e.logs.Log(topic, 0).Append(nil, body, sentAt)
			e.node.Appended(topic, 0, off+1)
			return 0, off, nil
		}
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.clock
		}
	}
	cfg.Authorize = func(_ *http.Request, req sqsapi.Request) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.calls = append(e.calls, sqsapi.Request{Action: req.Action, Queue: req.Queue})
		return nil
	}
	e.h = mustNew(t, e.node, cfg)
	return e
}

// purge is a store's PurgeTopic: every record below the high watermark is removed from
// the log, and the node's state of the topic dropped, so that it starts at the new oldest.
func (e *storeEnv) purge(_ context.Context, topic string) error {
	e.mu.Lock()
	e.storePurges++
	e.mu.Unlock()
	e.routes.Delete(topic)
	if err := e.node.DeleteTopic(topic); err != nil {
		return err
	}
	log := e.logs.Log(topic, 0)
	log.Trim(log.HighWatermark())
	e.routes.Set(topic, 0)
	return nil
}

func (e *storeEnv) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.clock = e.clock.Add(d)
}

// queues is the names the store holds.
func (e *storeEnv) queues() []string { return e.store.ListQueues("") }

// attributes answers GetQueueAttributes of queue for names.
func (e *storeEnv) attributes(queue string, names ...string) map[string]string {
	e.t.Helper()
	var out struct{ Attributes map[string]string }
	ok(e.t, e.call("GetQueueAttributes", `{"QueueUrl":"`+baseURL+`/`+queue+`","AttributeNames":`+jsonList(names)+`}`), &out)
	return out.Attributes
}

func jsonList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = jsonString(s)
	}
	return "[" + strings.Join(quoted, ",") + "]"
}

// TestCreateQueue: CreateQueue creates a queue (and its topic) with the attributes given and
// the others' defaults, and its tags; the same call again answers its URL and changes
// nothing; one with another value for an attribute is QueueNameExists, and changes nothing.
func TestCreateQueue(t *testing.T) {
	e := newStoreEnv(t, sqsapi.Config{})
	var out struct{ QueueUrl string }
	create := `{"QueueName":"jobs","Attributes":{"VisibilityTimeout":"60","MessageRetentionPeriod":"0086400"},"tags":{"team":"a"}}`
	ok(t, e.call("CreateQueue", create), &out)
	require.Equal(t, baseURL+"/jobs", out.QueueUrl)
	created := strconv.FormatInt(e.clock.Unix(), 10)
	want := map[string]string{
		"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0", "ApproximateNumberOfMessagesDelayed": "0",
		"VisibilityTimeout": "60", "DelaySeconds": "0", "MaximumMessageSize": "1048576", "MessageRetentionPeriod": "86400",
		"ReceiveMessageWaitTimeSeconds": "0", "QueueArn": "arn:aws:sqs:us-east-1:000000000000:jobs",
		"CreatedTimestamp": created, "LastModifiedTimestamp": created,
	}
	require.Equal(t, want, e.attributes("jobs", "All"))

	e.advance(time.Hour)
	for _, again := range []string{create, `{"QueueName":"jobs"}`, `{"QueueName":"jobs","Attributes":{"DelaySeconds":"0","VisibilityTimeout":"60"}}`} {
		ok(t, e.call("CreateQueue", again), &out)
		require.Equal(t, baseURL+"/jobs", out.QueueUrl, again)
	}
	for _, other := range []string{`{"QueueName":"jobs","Attributes":{"VisibilityTimeout":"61"}}`, `{"QueueName":"jobs","Attributes":{"MaximumMessageSize":"1024"}}`} {
		got := failed(t, e.call("CreateQueue", other))
		require.Equal(t, sqsError{400, "QueueNameExists", "QueueAlreadyExists;Sender", got.Message}, got)
	}
	require.Equal(t, want, e.attributes("jobs", "All"), "unchanged")
	var tags struct{ Tags map[string]string }
	ok(t, e.call("ListQueueTags", `{"QueueUrl":"`+baseURL+`/jobs"}`), &tags)
	require.Equal(t, map[string]string{"team": "a"}, tags.Tags)

	// The queue's topic is the host's, where messages go.
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+baseURL+`/jobs","MessageBody":"first"}`), nil)
	require.Equal(t, "first", e.receive(`{"QueueUrl":"` + baseURL + `/jobs"}`)[0].Body)
	require.Equal(t, "1", e.attributes("jobs", "ApproximateNumberOfMessagesNotVisible")["ApproximateNumberOfMessagesNotVisible"])
}

// TestQueueAttributesAct: a queue's VisibilityTimeout is its receives' lease when they ask
// for none, its ReceiveMessageWaitTimeSeconds their long-poll, and its MaximumMessageSize
// the bound of its sends; SetQueueAttributes changes them, and LastModifiedTimestamp.
func TestQueueAttributesAct(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newStoreEnv(t, sqsapi.Config{Now: time.Now})
		q := baseURL + "/jobs"
		ok(t, e.call("CreateQueue", `{"QueueName":"jobs","Attributes":{"VisibilityTimeout":"5","ReceiveMessageWaitTimeSeconds":"20","MaximumMessageSize":"1024"}}`), nil)
		created := e.attributes("jobs", "CreatedTimestamp")["CreatedTimestamp"]

		// The queue's wait: a receive without WaitTimeSeconds parks until a send.
		done := make(chan []message)
		go func() { done <- e.receive(`{"QueueUrl":"` + q + `"}`) }()
		synctest.Wait()
		require.Equal(t, 1, e.node.Parked("jobs"))
		ok(t, e.call("SendMessage", `{"QueueUrl":"`+q+`","MessageBody":"`+strings.Repeat("x", 1024)+`"}`), nil)
		got := <-done
		require.Len(t, got, 1)

		// The queue's visibility timeout: visible again after 5 s.
		time.Sleep(4 * time.Second)
		require.Empty(t, e.receive(`{"QueueUrl":"`+q+`","WaitTimeSeconds":0}`))
		time.Sleep(2 * time.Second)
		again := e.receive(`{"QueueUrl":"` + q + `","WaitTimeSeconds":0,"VisibilityTimeout":60}`)
		require.Len(t, again, 1)

		// The queue's maximum size.
		got2 := failed(t, e.call("SendMessage", `{"QueueUrl":"`+q+`","MessageBody":"`+strings.Repeat("x", 1025)+`"}`))
		require.Equal(t, "InvalidParameterValue", got2.Type)
		var batch batchResult
		ok(t, e.call("SendMessageBatch", `{"QueueUrl":"`+q+`","Entries":[{"Id":"a","MessageBody":"small"},{"Id":"b","MessageBody":"`+strings.Repeat("x", 1025)+`"}]}`), &batch)
		require.Equal(t, []string{"a"}, batch.successIDs())
		require.Equal(t, []string{"b=InvalidParameterValue"}, batch.failedCodes())

		time.Sleep(time.Minute)
		ok(t, e.call("SetQueueAttributes", `{"QueueUrl":"`+q+`","Attributes":{"MaximumMessageSize":"2048","ReceiveMessageWaitTimeSeconds":"0"}}`), nil)
		ok(t, e.call("SendMessage", `{"QueueUrl":"`+q+`","MessageBody":"`+strings.Repeat("x", 1025)+`"}`), nil)
		start := time.Now()
		e.receive(`{"QueueUrl":"` + q + `","MaxNumberOfMessages":10}`)
		e.receive(`{"QueueUrl":"` + q + `"}`)
		require.Equal(t, start, time.Now(), "no wait now")
		attrs := e.attributes("jobs", "All")
		require.Equal(t, created, attrs["CreatedTimestamp"])
		require.Equal(t, strconv.FormatInt(time.Now().Unix(), 10), attrs["LastModifiedTimestamp"])
		require.Equal(t, "2048", attrs["MaximumMessageSize"])
	})
}

// TestListQueues: the queues whose names begin with a prefix, in order of name, a page of
// MaxResults at a time with a NextToken; without MaxResults, all of them.
func TestListQueues(t *testing.T) {
	e := newStoreEnv(t, sqsapi.Config{})
	for _, n := range []string{"b-2", "a", "b-1", "b-3", "c"} {
		ok(t, e.call("CreateQueue", `{"QueueName":"`+n+`"}`), nil)
	}
	type page struct {
		QueueUrls []string
		NextToken string
	}
	var p page
	ok(t, e.call("ListQueues", `{}`), &p)
	require.Equal(t, page{QueueUrls: []string{baseURL + "/a", baseURL + "/b-1", baseURL + "/b-2", baseURL + "/b-3", baseURL + "/c"}}, p)
	var urls []string
	token := ""
	for {
		p = page{}
		body := `{"QueueNamePrefix":"b-","MaxResults":2`
		if token != "" {
			body += `,"NextToken":"` + token + `"`
		}
		ok(t, e.call("ListQueues", body+`}`), &p)
		urls = append(urls, p.QueueUrls...)
		if p.NextToken == "" {
			break
		}
		token = p.NextToken
	}
	require.Equal(t, []string{baseURL + "/b-1", baseURL + "/b-2", baseURL + "/b-3"}, urls)
	p = page{}
	ok(t, e.call("ListQueues", `{"QueueNamePrefix":"z"}`), &p)
	require.Empty(t, p.QueueUrls)
	for _, bad := range []string{`{"MaxResults":0}`, `{"MaxResults":1001}`, `{"MaxResults":2,"NextToken":"x"}`, `{"NextToken":"` + token + `"}`,
		`{"QueueNamePrefix":"a","MaxResults":2,"NextToken":"` + token + `"}`} {
		require.Equal(t, "InvalidParameterValue", failed(t, e.call("ListQueues", bad)).Type, bad)
	}
}

// TestTags: TagQueue sets tags (adding to those there), UntagQueue removes them,
// ListQueueTags lists them; a tag SQS would refuse is refused, and changes nothing.
func TestTags(t *testing.T) {
	e := newStoreEnv(t, sqsapi.Config{})
	q := baseURL + "/jobs"
	ok(t, e.call("CreateQueue", `{"QueueName":"jobs","tags":{"a":"1"}}`), nil)
	ok(t, e.call("TagQueue", `{"QueueUrl":"`+q+`","Tags":{"b":"2","a":"3"}}`), nil)
	ok(t, e.call("UntagQueue", `{"QueueUrl":"`+q+`","TagKeys":["b","absent"]}`), nil)
	var tags struct{ Tags map[string]string }
	ok(t, e.call("ListQueueTags", `{"QueueUrl":"`+q+`"}`), &tags)
	require.Equal(t, map[string]string{"a": "3"}, tags.Tags)
	many := map[string]string{}
	for i := range 50 {
		many["k"+strconv.Itoa(i)] = ""
	}
	for _, bad := range []string{`{"QueueUrl":"` + q + `","Tags":{"aws:x":"1"}}`, `{"QueueUrl":"` + q + `","Tags":{"":"1"}}`,
		`{"QueueUrl":"` + q + `","Tags":{"k":"` + strings.Repeat("v", 257) + `"}}`, `{"QueueUrl":"` + q + `","Tags":` + mustJSON(many) + `}`,
		`{"QueueUrl":"` + q + `"}`} {
		got := failed(t, e.call("TagQueue", bad))
		require.Contains(t, []string{"InvalidParameterValue", "MissingParameter"}, got.Type, bad)
	}
	require.Equal(t, "MissingParameter", failed(t, e.call("UntagQueue", `{"QueueUrl":"`+q+`"}`)).Type)
	ok(t, e.call("ListQueueTags", `{"QueueUrl":"`+q+`"}`), &tags)
	require.Equal(t, map[string]string{"a": "3"}, tags.Tags, "unchanged")
	require.Equal(t, "QueueDoesNotExist", failed(t, e.call("TagQueue", `{"QueueUrl":"`+baseURL+`/nope","Tags":{"a":"1"}}`)).Type)
}

func mustJSON(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, jsonString(k)+":"+jsonString(v))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// TestDeleteQueue: DeleteQueue deletes the queue and its topic: it is not there any more,
// and a queue created again under its name starts empty.
func TestDeleteQueue(t *testing.T) {
	e := newStoreEnv(t, sqsapi.Config{})
	q := baseURL + "/jobs"
	ok(t, e.call("CreateQueue", `{"QueueName":"jobs"}`), nil)
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+q+`","MessageBody":"old"}`), nil)
	ok(t, e.call("DeleteQueue", `{"QueueUrl":"`+q+`"}`), nil)
	require.Equal(t, []string{"jobs"}, e.deleted)
	require.Empty(t, e.queues())
	for _, req := range [][2]string{{"GetQueueUrl", `{"QueueName":"jobs"}`}, {"DeleteQueue", `{"QueueUrl":"` + q + `"}`},
		{"ReceiveMessage", `{"QueueUrl":"` + q + `"}`}, {"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":{}}`}} {
		require.Equal(t, "QueueDoesNotExist", failed(t, e.call(req[0], req[1])).Type, req[0])
	}
	require.Empty(t, e.queues(), "SetQueueAttributes created nothing")
}

// TestPurgeQueue: PurgeQueue through the node's Purge (the store has no PurgeTopic)
// deletes every message, the one in flight and the one given back too: none is received, the
// counts are 0, the in-flight one's handle deletes nothing more, and a message sent after
// it is received. A store that purges (PurgeTopic) purges instead of the node; a node that
// cannot purge with a store that does not answers UnsupportedOperation.
func TestPurgeQueue(t *testing.T) {
	e := newStoreEnv(t, sqsapi.Config{})
	q := baseURL + "/jobs"
	ok(t, e.call("CreateQueue", `{"QueueName":"jobs"}`), nil)
	for _, b := range []string{"a", "b", "c"} {
		ok(t, e.call("SendMessage", `{"QueueUrl":"`+q+`","MessageBody":"`+b+`"}`), nil)
	}
	held := e.receive(`{"QueueUrl":"` + q + `","VisibilityTimeout":600}`)
	require.Len(t, held, 1)
	ok(t, e.call("ChangeMessageVisibility", `{"QueueUrl":"`+q+`","ReceiptHandle":"`+
		e.receive(`{"QueueUrl":"` + q + `"}`)[0].ReceiptHandle+`","VisibilityTimeout":0}`), nil) // b back, visible
	ok(t, e.call("PurgeQueue", `{"QueueUrl":"`+q+`"}`), nil)
	require.Empty(t, e.receive(`{"QueueUrl":"`+q+`","MaxNumberOfMessages":10}`))
	require.Equal(t, map[string]string{"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0",
		"ApproximateNumberOfMessagesDelayed": "0"},
		e.attributes("jobs", "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"))
	require.Zero(t, e.storePurges)
	ok(t, e.call("DeleteMessage", `{"QueueUrl":"`+q+`","ReceiptHandle":"`+held[0].ReceiptHandle+`"}`), nil) // deleted already
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+q+`","MessageBody":"after"}`), nil)
	require.Equal(t, "after", e.receive(`{"QueueUrl":"` + q + `"}`)[0].Body)
	st, err := e.node.PartitionStatus("jobs", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Frontier, "the purged three settled (offsets 0 to 2)")

	// A store that purges: its purge, not the node's.
	e.advance(sqsapi.RecentWindow) // past the one purge a queue SQS allows in 60 s
	e.store.PurgeTopic = e.purge
	ok(t, e.call("PurgeQueue", `{"QueueUrl":"`+q+`"}`), nil)
	require.Equal(t, 1, e.storePurges)
	require.Equal(t, "QueueDoesNotExist", failed(t, e.call("PurgeQueue", `{"QueueUrl":"`+baseURL+`/nope"}`)).Type)

	// Neither purges.
	h, err := sqsapi.New(&fakeNode{}, sqsapi.Config{BaseURL: baseURL, Store: &sqsapi.MemQueueStore{}})
	require.NoError(t, err)
	ok(t, call(h, "CreateQueue", `{"QueueName":"jobs"}`), nil)
	got := failed(t, call(h, "PurgeQueue", `{"QueueUrl":"`+q+`"}`))
	require.Equal(t, sqsError{400, "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation;Sender", got.Message}, got)
}

// TestPurgeQueueInProgress: a queue is purged once in RecentWindow, as SQS purges it: a
// second PurgeQueue within 60 s of the last one that purged is PurgeQueueInProgress (403 in
// both protocols) and deletes nothing; one at 60 s purges; another queue's purges are its
// own; a purge that failed does not count.
func TestPurgeQueueInProgress(t *testing.T) {
	e := newStoreEnv(t, sqsapi.Config{})
	q, other := baseURL+"/jobs", baseURL+"/other"
	ok(t, e.call("CreateQueue", `{"QueueName":"jobs"}`), nil)
	ok(t, e.call("CreateQueue", `{"QueueName":"other"}`), nil)
	inProgress := sqsError{403, "PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress;Sender",
		"Only one PurgeQueue operation on jobs is allowed every 60 seconds."}
	for _, step := range []struct {
		name    string
		advance time.Duration
		queue   string
		refused bool
	}{
		{name: "first", queue: q},
		{name: "at once", queue: q, refused: true},
		{name: "another queue", queue: other},
		{name: "59 s later", advance: 59 * time.Second, queue: q, refused: true},
		{name: "59.999 s later", advance: time.Second - time.Millisecond, queue: q, refused: true},
		{name: "60 s later", advance: time.Millisecond, queue: q},
		{name: "30 s after that", advance: 30 * time.Second, queue: q, refused: true},
		{name: "the other, 90 s after its purge", queue: other},
	} {
		e.advance(step.advance)
		ok(t, e.call("SendMessage", `{"QueueUrl":"`+step.queue+`","MessageBody":"kept?"}`), nil)
		rec := e.call("PurgeQueue", `{"QueueUrl":"`+step.queue+`"}`)
		if !step.refused {
			ok(t, rec, nil)
			require.Empty(t, e.receive(`{"QueueUrl":"`+step.queue+`"}`), step.name)
			continue
		}
		require.Equal(t, inProgress, failed(t, rec), step.name)
		got := e.receive(`{"QueueUrl":"` + step.queue + `","VisibilityTimeout":1}`)
		require.Len(t, got, 1, "%s: a refused purge deletes nothing", step.name)
		ok(t, e.call("DeleteMessage", `{"QueueUrl":"`+step.queue+`","ReceiptHandle":"`+got[0].ReceiptHandle+`"}`), nil)
	}

	// The query protocol's encoding of the refusal.
	require.Equal(t, [3]string{"Forbidden", "Sender", "AWS.SimpleQueueService.PurgeQueueInProgress"},
		queryError(t, queryCall(e.h, "PurgeQueue", url.Values{"QueueUrl": {q}})))

	// A purge the store failed is no purge: the next may come at once.
	e.advance(sqsapi.RecentWindow)
	purge := e.store.PurgeTopic
	e.store.PurgeTopic = func(context.Context, string) error { return errors.New("the host's log is down") }
	require.Equal(t, "InternalFailure", failed(t, e.call("PurgeQueue", `{"QueueUrl":"`+q+`"}`)).Type)
	e.store.PurgeTopic = purge
	ok(t, e.call("PurgeQueue", `{"QueueUrl":"`+q+`"}`), nil)

	// Purges at once: one purges, the others are refused.
	e.advance(sqsapi.RecentWindow)
	codes := make([]int, 8)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() { codes[i] = e.call("PurgeQueue", `{"QueueUrl":"`+q+`"}`).Code })
	}
	wg.Wait()
	slices.Sort(codes)
	require.Equal(t, []int{200, 403, 403, 403, 403, 403, 403, 403}, codes)
}

// TestQueueDeletedRecently: a queue's name is not created again within RecentWindow of its
// deletion, as SQS refuses it: QueueDeletedRecently (400 in both protocols), creating
// nothing; another name is created at once, and the name again at 60 s.
func TestQueueDeletedRecently(t *testing.T) {
	e := newStoreEnv(t, sqsapi.Config{})
	q := baseURL + "/jobs"
	ok(t, e.call("CreateQueue", `{"QueueName":"jobs"}`), nil)
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+q+`","MessageBody":"old"}`), nil)
	ok(t, e.call("DeleteQueue", `{"QueueUrl":"`+q+`"}`), nil)
	recently := sqsError{400, "QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently;Sender",
		"You must wait 60 seconds after deleting a queue before you can create another with the same name."}
	for _, step := range []struct {
		name    string
		advance time.Duration
		body    string
		refused bool
	}{
		{name: "at once", body: `{"QueueName":"jobs"}`, refused: true},
		{name: "with attributes", body: `{"QueueName":"jobs","Attributes":{"VisibilityTimeout":"60"}}`, refused: true},
		{name: "another name", body: `{"QueueName":"jobs2"}`},
		{name: "59.999 s later", advance: 59*time.Second + 999*time.Millisecond, body: `{"QueueName":"jobs"}`, refused: true},
		{name: "60 s later", advance: time.Millisecond, body: `{"QueueName":"jobs"}`},
		{name: "again, existing", body: `{"QueueName":"jobs"}`},
	} {
		e.advance(step.advance)
		rec := e.call("CreateQueue", step.body)
		if !step.refused {
			ok(t, rec, nil)
			continue
		}
		require.Equal(t, recently, failed(t, rec), step.name)
		require.NotContains(t, e.queues(), "jobs", "%s: nothing created", step.name)
	}
	require.Contains(t, e.queues(), "jobs")

	// The query protocol's encoding, and a deletion through it counts alike.
	queryOK(t, queryCall(e.h, "DeleteQueue", url.Values{"QueueUrl": {q}}))
	require.Equal(t, [3]string{"Bad Request", "Sender", "AWS.SimpleQueueService.QueueDeletedRecently"},
		queryError(t, queryCall(e.h, "CreateQueue", url.Values{"QueueName": {"jobs"}})))

	// A delete of a queue that is not there marks nothing.
	e.advance(sqsapi.RecentWindow)
	require.Equal(t, "QueueDoesNotExist", failed(t, e.call("DeleteQueue", `{"QueueUrl":"`+baseURL+`/nope"}`)).Type)
	ok(t, e.call("CreateQueue", `{"QueueName":"nope"}`), nil)

	// A delete whose topic the host failed to delete still deleted the queue: its name is
	// refused as any deleted one's.
	deleteTopic := e.store.DeleteTopic
	e.store.DeleteTopic = func(context.Context, string) error { return errors.New("the host's log is down") }
	require.Equal(t, "InternalFailure", failed(t, e.call("DeleteQueue", `{"QueueUrl":"`+baseURL+`/nope"}`)).Type)
	e.store.DeleteTopic = deleteTopic
	require.NotContains(t, e.queues(), "nope")
	require.Equal(t, "QueueDeletedRecently", failed(t, e.call("CreateQueue", `{"QueueName":"nope"}`)).Type)
}

// TestManagementRefusals: bad input to the management actions gets SQS's typed errors and
// changes nothing in the store; a store's error creating a topic creates no queue.
func TestManagementRefusals(t *testing.T) {
	e := newStoreEnv(t, sqsapi.Config{})
	ok(t, e.call("CreateQueue", `{"QueueName":"jobs"}`), nil)
	q := baseURL + "/jobs"
	before := e.attributes("jobs", "All")
	for _, tc := range []struct{ action, body, code string }{
		{"CreateQueue", `{}`, "MissingParameter"},
		{"CreateQueue", `{"QueueName":"a b"}`, "InvalidParameterValue"},
		{"CreateQueue", `{"QueueName":"` + strings.Repeat("q", 81) + `"}`, "InvalidParameterValue"},
		{"CreateQueue", `{"QueueName":"jobs.fifo"}`, "InvalidParameterValue"},
		{"CreateQueue", `{"QueueName":"new","Attributes":{"Bogus":"1"}}`, "InvalidAttributeName"},
		{"CreateQueue", `{"QueueName":"new","Attributes":{"QueueArn":"x"}}`, "InvalidAttributeName"},
		{"CreateQueue", `{"QueueName":"new","Attributes":{"VisibilityTimeout":"43201"}}`, "InvalidAttributeValue"},
		{"CreateQueue", `{"QueueName":"new","Attributes":{"VisibilityTimeout":"0"}}`, "InvalidAttributeValue"},
		{"CreateQueue", `{"QueueName":"new","Attributes":{"VisibilityTimeout":"ten"}}`, "InvalidAttributeValue"},
		{"CreateQueue", `{"QueueName":"new","Attributes":{"DelaySeconds":"901"}}`, "InvalidAttributeValue"},
		{"CreateQueue", `{"QueueName":"new","Attributes":{"RedrivePolicy":"{}"}}`, "InvalidParameterValue"},
		{"CreateQueue", `{"QueueName":"new","Attributes":{"RedriveAllowPolicy":"{}"}}`, "InvalidAttributeValue"},
		{"CreateQueue", `{"QueueName":"new","Attributes":{"MaximumMessageSize":"1023"}}`, "InvalidAttributeValue"},
		{"CreateQueue", `{"QueueName":"new","tags":{"aws:cost":"x"}}`, "InvalidParameterValue"},
		{"CreateQueue", `{"QueueName":"refused"}`, "InternalFailure"},
		{"CreateQueue", `{"QueueName":7}`, "SerializationException"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `"}`, "MissingParameter"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":{"ReceiveMessageWaitTimeSeconds":"21"}}`, "InvalidAttributeValue"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":{"VisibilityTimeout":"60","Policy":"{}"}}`, "InvalidAttributeValue"},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":{"ApproximateNumberOfMessages":"1"}}`, "InvalidAttributeName"},
		{"SetQueueAttributes", `{"QueueUrl":"` + baseURL + `/nope","Attributes":{"VisibilityTimeout":"60"}}`, "QueueDoesNotExist"},
		{"DeleteQueue", `{}`, "MissingParameter"},
		{"DeleteQueue", `{"QueueUrl":"` + baseURL + `/nope"}`, "QueueDoesNotExist"},
	} {
		got := failed(t, e.call(tc.action, tc.body))
		require.Equal(t, tc.code, got.Type, tc.action+" "+tc.body)
	}
	require.Equal(t, []string{"jobs"}, e.queues())
	require.Equal(t, before, e.attributes("jobs", "All"))
}

// TestManagementAuthorize: Authorize is asked about every management action with the queue
// it names, and ListQueues with none.
func TestManagementAuthorize(t *testing.T) {
	e := newStoreEnv(t, sqsapi.Config{})
	q := baseURL + "/jobs"
	for _, req := range [][2]string{
		{"CreateQueue", `{"QueueName":"jobs"}`}, {"ListQueues", `{}`}, {"TagQueue", `{"QueueUrl":"` + q + `","Tags":{"a":"b"}}`},
		{"ListQueueTags", `{"QueueUrl":"` + q + `"}`}, {"UntagQueue", `{"QueueUrl":"` + q + `","TagKeys":["a"]}`},
		{"SetQueueAttributes", `{"QueueUrl":"` + q + `","Attributes":{"VisibilityTimeout":"9"}}`}, {"PurgeQueue", `{"QueueUrl":"` + q + `"}`},
		{"DeleteQueue", `{"QueueUrl":"` + q + `"}`},
	} {
		ok(t, e.call(req[0], req[1]), nil)
	}
	require.Equal(t, []sqsapi.Request{{Action: "CreateQueue", Queue: "jobs"}, {Action: "ListQueues"}, {Action: "TagQueue", Queue: "jobs"},
		{Action: "ListQueueTags", Queue: "jobs"}, {Action: "UntagQueue", Queue: "jobs"}, {Action: "SetQueueAttributes", Queue: "jobs"},
		{Action: "PurgeQueue", Queue: "jobs"}, {Action: "DeleteQueue", Queue: "jobs"}}, e.calls)
}

// TestManagementWithoutStore: a handler of Config.Queues answers a CreateQueue of an
// existing queue without attributes with its URL (as a program that creates its queue at
// start-up calls it), and the other management actions UnsupportedOperation, but PurgeQueue,
// which the node serves (TestPurgeQueueDurable).
func TestManagementWithoutStore(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	var out struct{ QueueUrl string }
	ok(t, e.call("CreateQueue", `{"QueueName":"orders"}`), &out)
	require.Equal(t, queueURL, out.QueueUrl)
	for _, req := range [][2]string{
		{"CreateQueue", `{"QueueName":"orders","Attributes":{"VisibilityTimeout":"60"}}`}, {"CreateQueue", `{"QueueName":"new"}`},
		{"DeleteQueue", `{"QueueUrl":"` + queueURL + `"}`}, {"ListQueues", `{}`},
		{"SetQueueAttributes", `{"QueueUrl":"` + queueURL + `","Attributes":{"VisibilityTimeout":"60"}}`},
		{"TagQueue", `{"QueueUrl":"` + queueURL + `","Tags":{"a":"b"}}`}, {"ListQueueTags", `{"QueueUrl":"` + queueURL + `"}`},
	} {
		require.Equal(t, "UnsupportedOperation", failed(t, e.call(req[0], req[1])).Type, req[0])
	}
	_, err := sqsapi.New(e.node, sqsapi.Config{BaseURL: baseURL, Queues: func(string) (string, bool) { return "", false }, Store: &sqsapi.MemQueueStore{}})
	require.Error(t, err, "Queues and Store")
}

// TestQueueManagementQuery: the management actions in the query protocol, as botocore
// sends them (Attribute.N.Name and .Value, Tag.N.Key and .Value, TagKey.N), answered in
// SQS's XML.
func TestQueueManagementQuery(t *testing.T) {
	e := newStoreEnv(t, sqsapi.Config{})
	res := queryOK(t, queryCall(e.h, "CreateQueue", url.Values{"QueueName": {"jobs"},
		"Attribute.1.Name": {"VisibilityTimeout"}, "Attribute.1.Value": {"60"}, "Tag.1.Key": {"team"}, "Tag.1.Value": {"a"}}))
	q := baseURL + "/jobs"
	require.Equal(t, q, res.Result.QueueUrl)
	queryOK(t, queryCall(e.h, "CreateQueue", url.Values{"QueueName": {"other"}}))
	queryOK(t, queryCall(e.h, "SetQueueAttributes", url.Values{"QueueUrl": {q}, "Attribute.1.Name": {"MaximumMessageSize"}, "Attribute.1.Value": {"2048"}}))
	queryOK(t, queryCall(e.h, "TagQueue", url.Values{"QueueUrl": {q}, "Tag.1.Key": {"env"}, "Tag.1.Value": {"test"}, "Tag.2.Key": {"x"}, "Tag.2.Value": {"y"}}))
	queryOK(t, queryCall(e.h, "UntagQueue", url.Values{"QueueUrl": {q}, "TagKey.1": {"x"}}))
	rec := queryCall(e.h, "ListQueueTags", url.Values{"QueueUrl": {q}})
	require.Contains(t, rec.Body.String(), "<ListQueueTagsResult><Tag><Key>env</Key><Value>test</Value></Tag><Tag><Key>team</Key><Value>a</Value></Tag></ListQueueTagsResult>")
	rec = queryCall(e.h, "ListQueues", url.Values{"MaxResults": {"1"}})
	require.Contains(t, rec.Body.String(), "<ListQueuesResult><QueueUrl>"+q+"</QueueUrl><NextToken>")
	attrs := map[string]string{}
	for _, a := range queryOK(t, queryCall(e.h, "GetQueueAttributes", url.Values{"QueueUrl": {q}, "AttributeName.1": {"All"}})).Result.Attribute {
		attrs[a.Name] = a.Value
	}
	require.Equal(t, "60", attrs["VisibilityTimeout"])
	require.Equal(t, "2048", attrs["MaximumMessageSize"])
	require.Equal(t, [3]string{"Bad Request", "Sender", "QueueAlreadyExists"},
		queryError(t, queryCall(e.h, "CreateQueue", url.Values{"QueueName": {"jobs"}, "Attribute.1.Name": {"VisibilityTimeout"}, "Attribute.1.Value": {"1"}})))
	require.Equal(t, [3]string{"Bad Request", "Sender", "InvalidAttributeValue"},
		queryError(t, queryCall(e.h, "SetQueueAttributes", url.Values{"QueueUrl": {q}, "Attribute.1.Name": {"DelaySeconds"}, "Attribute.1.Value": {"901"}})))
	queryOK(t, queryCall(e.h, "PurgeQueue", url.Values{"QueueUrl": {q}}))
	queryOK(t, queryCall(e.h, "DeleteQueue", url.Values{"QueueUrl": {q}}))
	require.Equal(t, []string{"other"}, e.queues())
}

// TestAgeOfOldestMessage: ApproximateAgeOfOldestMessage, asked by name, is the age of the
// oldest message not deleted, in seconds (not in All, as it is not one of SQS's attributes).
func TestAgeOfOldestMessage(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.produce(0, "v")
	e.receiveOne()
	var out struct{ Attributes map[string]string }
	ok(t, e.call("GetQueueAttributes", `{"QueueUrl":"`+queueURL+`","AttributeNames":["ApproximateAgeOfOldestMessage"]}`), &out)
	age, err := strconv.Atoi(out.Attributes["ApproximateAgeOfOldestMessage"])
	require.NoError(t, err)
	require.Positive(t, age, "the node's clock less the record's timestamp")
	var all struct{ Attributes map[string]string }
	ok(t, e.call("GetQueueAttributes", `{"QueueUrl":"`+queueURL+`","AttributeNames":["All"]}`), &all)
	require.NotContains(t, all.Attributes, "ApproximateAgeOfOldestMessage")
}
