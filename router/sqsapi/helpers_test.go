package sqsapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
	"narad.dev/consume/router/sqsapi"
)

// queueURL is the URL of queue orders under the tests' BaseURL.
const (
	baseURL  = "http://sqs.test/q"
	queueURL = baseURL + "/orders"
)

// sentAt is the timestamp of every record the tests append.
var sentAt = time.Unix(1700000000, 123e6)

// env is a real node serving topic "orders" (partition 0, and 1 when asked) behind a
// handler whose queue "orders" is the topic, and whose queue "ghost" is a topic the node's
// routes do not know.
type env struct {
	t      testing.TB
	logs   *routertest.MemLogs
	routes *routertest.Routes
	node   *router.Node
	h      *sqsapi.Handler

	mu       sync.Mutex
	produced []string // topic/body of each record Produce appended
}

func newEnv(t testing.TB, cfg sqsapi.Config, nodeCfg ...func(*router.Config)) *env {
	t.Helper()
	e := &env{t: t, logs: &routertest.MemLogs{}, routes: &routertest.Routes{}}
	e.routes.Set("orders", 0)
	e.logs.Log("orders", 0)
	c := router.Config{Logs: e.logs, Routes: e.routes, Dir: "/state", FS: crashfs.New()}
	for _, f := range nodeCfg {
		f(&c)
	}
	node, err := router.New(c)
	require.NoError(t, err)
	t.Cleanup(func() { node.Close() })
	e.node = node
	if cfg.Queues == nil {
		cfg.Queues = func(name string) (string, bool) {
			switch name {
			case "orders", "ghost":
				return name, true
			}
			return "", false
		}
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = baseURL
	}
	e.h, err = sqsapi.New(node, cfg)
	require.NoError(t, err)
	return e
}

// withProduce is a Config whose Produce appends to the env's log of the topic's partition 0.
func (e *env) produceFunc() func(ctx context.Context, topic string, body []byte) (int32, int64, error) {
	return func(ctx context.Context, topic string, body []byte) (int32, int64, error) {
		if topic != "orders" {
			return 0, 0, router.ErrUnknownTopic
		}
		e.mu.Lock()
		e.produced = append(e.produced, topic+"/"+string(body))
		e.mu.Unlock()
		off := e.logs.Log(topic, 0).Append(nil, body, sentAt)
		e.node.Appended(topic, 0, off+1)
		return 0, off, nil
	}
}

// produce appends records to orders/partition and tells the node.
func (e *env) produce(partition int32, values ...string) {
	log := e.logs.Log("orders", partition)
	var off int64
	for _, v := range values {
		off = log.Append(nil, []byte(v), sentAt)
	}
	e.node.Appended("orders", partition, off+1)
}

// call serves one SQS action through the handler.
// handleOf parses a receipt handle a response carried, for a call of the node itself.
func handleOf(t testing.TB, text string) router.Handle {
	t.Helper()
	h, err := router.ParseHandle(text)
	require.NoError(t, err)
	return h
}

func (e *env) call(action, body string) *httptest.ResponseRecorder {
	return call(e.h, action, body)
}

func call(h http.Handler, action, body string) *httptest.ResponseRecorder {
	return callCtx(context.Background(), h, action, body)
}

func callCtx(ctx context.Context, h http.Handler, action, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// ok decodes a 200's body into out, checking its headers.
func ok(t testing.TB, rec *httptest.ResponseRecorder, out any) {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "application/x-amz-json-1.0", rec.Header().Get("Content-Type"))
	require.Equal(t, strconv.Itoa(rec.Body.Len()), rec.Header().Get("Content-Length"))
	require.Empty(t, rec.Header().Get("x-amzn-query-error"))
	if out != nil {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), out), rec.Body.String())
	}
}

// sqsError is an error response, as the SDK reads it.
type sqsError struct {
	Status  int
	Type    string // __type after the #
	Query   string // x-amzn-query-error
	Message string
}

// failed decodes an error response.
func failed(t testing.TB, rec *httptest.ResponseRecorder) sqsError {
	t.Helper()
	require.GreaterOrEqual(t, rec.Code, 400, rec.Body.String())
	require.Equal(t, "application/x-amz-json-1.0", rec.Header().Get("Content-Type"))
	var body struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	ns, name, found := strings.Cut(body.Type, "#")
	require.True(t, found, body.Type)
	require.Equal(t, "com.amazonaws.sqs", ns)
	require.NotEmpty(t, body.Message)
	return sqsError{Status: rec.Code, Type: name, Query: rec.Header().Get("x-amzn-query-error"), Message: body.Message}
}

// message is a received message as a client decodes it.
type message struct {
	MessageId     string
	ReceiptHandle string
	MD5OfBody     string
	Body          string
	Attributes    map[string]string
}

// receive serves a ReceiveMessage and returns its messages.
func (e *env) receive(body string) []message {
	e.t.Helper()
	var out struct{ Messages []message }
	ok(e.t, e.call("ReceiveMessage", body), &out)
	return out.Messages
}

// receiveOne receives exactly one message of queue orders.
func (e *env) receiveOne(extra ...string) message {
	e.t.Helper()
	msgs := e.receive(`{"QueueUrl":"` + queueURL + `"` + strings.Join(extra, "") + `}`)
	require.Len(e.t, msgs, 1)
	return msgs[0]
}

// batchResult is a batch action's response.
type batchResult struct {
	Successful []struct{ Id, MessageId, MD5OfMessageBody string }
	Failed     []struct {
		Id          string
		SenderFault bool
		Code        string
		Message     string
	}
}

// failedCodes is each failed entry's Id and Code, as "id=code".
func (b batchResult) failedCodes() []string {
	var out []string
	for _, f := range b.Failed {
		out = append(out, f.Id+"="+f.Code)
	}
	return out
}

func (b batchResult) successIDs() []string {
	var out []string
	for _, s := range b.Successful {
		out = append(out, s.Id)
	}
	return out
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func httptestRequest(method, body string) *http.Request {
	return httptest.NewRequest(method, "/", strings.NewReader(body))
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

type httptestRequestType = http.Request

func itoa(n int) string { return strconv.Itoa(n) }
