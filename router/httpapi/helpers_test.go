package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
	"narad.dev/consume/router/routertest"
)

// env is a real node serving topic "orders" (partition 0, and 1 when asked) behind a handler.
type env struct {
	t      testing.TB
	logs   *routertest.MemLogs
	routes *routertest.Routes
	node   *router.Node
	h      *httpapi.Handler
}

func newEnv(t testing.TB, opts httpapi.Options, cfg ...func(*router.Config)) *env {
	t.Helper()
	e := &env{t: t, logs: &routertest.MemLogs{}, routes: &routertest.Routes{}}
	e.routes.Set("orders", 0)
	e.logs.Log("orders", 0)
	c := router.Config{Logs: e.logs, Routes: e.routes, Dir: "/state", FS: crashfs.New()}
	for _, f := range cfg {
		f(&c)
	}
	node, err := router.New(c)
	require.NoError(t, err)
	t.Cleanup(func() { node.Close() })
	e.node = node
	e.h, err = httpapi.New(node, opts)
	require.NoError(t, err)
	return e
}

// produce appends records to orders/partition and tells the node.
func (e *env) produce(partition int32, values ...string) {
	log := e.logs.Log("orders", partition)
	var off int64
	for _, v := range values {
		off = log.Append(nil, []byte(v), time.Unix(1700000000, 0))
	}
	e.node.Appended("orders", partition, off+1)
}

// do serves one request through the handler with a recorder.
func (e *env) do(method, target string, body ...string) *httptest.ResponseRecorder {
	return do(e.h, method, target, body...)
}

func do(h http.Handler, method, target string, body ...string) *httptest.ResponseRecorder {
	var r io.Reader
	if len(body) > 0 {
		r = strings.NewReader(body[0])
	}
	req := httptest.NewRequest(method, target, r)
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if strings.HasPrefix(body[0], "{") {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// doCtx serves a GET with ctx as the request's context.
func doCtx(ctx context.Context, h http.Handler, target string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// wireMessage is the JSON of one message, as a client decodes it. Its fields are in the
// order the handler writes them, so json.Marshal of it is the handler's encoding.
type wireMessage struct {
	Topic         string       `json:"topic"`
	Partition     int32        `json:"partition"`
	Offset        int64        `json:"offset"`
	Key           *string      `json:"key,omitempty"`
	KeyBase64     []byte       `json:"key_base64,omitempty"`
	Value         *string      `json:"value,omitempty"`
	ValueBase64   []byte       `json:"value_base64,omitempty"`
	Timestamp     time.Time    `json:"timestamp"`
	Headers       []wireHeader `json:"headers,omitempty"`
	ReceiptHandle string       `json:"receipt_handle,omitempty"`
	Attempt       uint32       `json:"attempt,omitempty"`
	Reason        string       `json:"reason,omitempty"`
	Expiry        *time.Time   `json:"expiry,omitempty"`
	Fence         string       `json:"fence,omitempty"`
}

// wireHeader is one header of a message on the wire.
type wireHeader struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// value is the message's value, from whichever field carries it.
func (m wireMessage) value() []byte {
	if m.Value != nil {
		return []byte(*m.Value)
	}
	return m.ValueBase64
}

func (m wireMessage) key() []byte {
	if m.Key != nil {
		return []byte(*m.Key)
	}
	return m.KeyBase64
}

// messages decodes a 200's body, checking its headers, and returns its messages.
func messages(t testing.TB, rec *httptest.ResponseRecorder) []wireMessage {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Equal(t, rec.Header().Get("Content-Length"), itoa(rec.Body.Len()))
	var body struct {
		Messages []wireMessage `json:"messages"`
	}
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&body))
	require.NotEmpty(t, body.Messages)
	return body.Messages
}

// one decodes a 200 with exactly one message.
func one(t testing.TB, rec *httptest.ResponseRecorder) wireMessage {
	t.Helper()
	msgs := messages(t, rec)
	require.Len(t, msgs, 1)
	return msgs[0]
}

type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// failed checks a response is status with a JSON error body, and returns the body.
func failed(t testing.TB, rec *httptest.ResponseRecorder, status int) errorBody {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var body errorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.NotEmpty(t, body.Error)
	require.NotEmpty(t, body.Code)
	return body
}

func itoa(n int) string { return strconv.Itoa(n) }
