package httpapi_test

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
	"unicode/utf8"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
	"narad.dev/consume/router/routertest"
)

// checkedNode passes every call to a real node after checking that the handler hands it
// only what it validated: nothing out of bounds ever reaches the node.
type checkedNode struct {
	*router.Node
	maxWait time.Duration
	t       *testing.T
}

func (c *checkedNode) topic(topic string) {
	if topic == "" || len(topic) > router.MaxTopicLength || !utf8.ValidString(topic) {
		c.t.Fatalf("topic %q reached the node", topic)
	}
}

func (c *checkedNode) handle(handle router.Handle) {
	if err := handle.Check(); err != nil {
		c.t.Fatalf("handle %+v reached the node", handle)
	}
}

func (c *checkedNode) Consume(ctx context.Context, topic string, opts router.ConsumeOptions) ([]router.Message, error) {
	c.topic(topic)
	if opts.Max < 1 || opts.Max > router.MaxBatch || opts.Wait < 0 || opts.Wait > c.maxWait ||
		opts.Visibility < 0 || opts.Visibility > router.MaxVisibility || opts.Partition < 0 || (!opts.Pinned && opts.Partition != 0) {
		c.t.Fatalf("options %+v reached the node", opts)
	}
	return c.Node.Consume(ctx, topic, opts)
}

func (c *checkedNode) Replay(ctx context.Context, topic string, partition int32, offset int64, limit int) ([]router.Message, error) {
	c.topic(topic)
	if partition < 0 || offset < 0 || limit < 1 || limit > router.MaxBatch {
		c.t.Fatalf("replay %d %d %d reached the node", partition, offset, limit)
	}
	return c.Node.Replay(ctx, topic, partition, offset, limit)
}

func (c *checkedNode) Ack(ctx context.Context, topic string, handle router.Handle) error {
	c.topic(topic)
	c.handle(handle)
	return c.Node.Ack(ctx, topic, handle)
}

func (c *checkedNode) AckBatch(ctx context.Context, topic string, handles []router.Handle) []error {
	c.topic(topic)
	if len(handles) < 1 || len(handles) > router.MaxBatch {
		c.t.Fatalf("a batch of %d reached the node", len(handles))
	}
	return c.Node.AckBatch(ctx, topic, handles)
}

func (c *checkedNode) Extend(ctx context.Context, topic string, handle router.Handle, d time.Duration) (time.Time, error) {
	c.topic(topic)
	c.handle(handle)
	if d < 0 || d > router.MaxVisibility {
		c.t.Fatalf("extend by %v reached the node", d)
	}
	return c.Node.Extend(ctx, topic, handle, d)
}

func (c *checkedNode) Nack(ctx context.Context, topic string, handle router.Handle, delay time.Duration) error {
	c.topic(topic)
	c.handle(handle)
	if delay < 0 || delay > router.MaxDelay {
		c.t.Fatalf("nack delay %v reached the node", delay)
	}
	return c.Node.Nack(ctx, topic, handle, delay)
}

func (c *checkedNode) Release(ctx context.Context, topic string, handle router.Handle) error {
	c.topic(topic)
	c.handle(handle)
	return c.Node.Release(ctx, topic, handle)
}

func (c *checkedNode) Reject(ctx context.Context, topic string, handle router.Handle) error {
	c.topic(topic)
	c.handle(handle)
	return c.Node.Reject(ctx, topic, handle)
}

// fuzzRoutes are the routes FuzzQuery picks from by its first argument.
var fuzzRoutes = []struct{ path, method string }{
	{"/consume", http.MethodGet}, {"/ack", http.MethodPost}, {"/ack-batch", http.MethodPost},
	{"/extend", http.MethodPost}, {"/nack", http.MethodPost}, {"/release", http.MethodPost}, {"/other", http.MethodGet},
	{"/reject", http.MethodPost},
}

// documented are the statuses doc.go lists, but 500 (a host error resolving a log, which
// these logs never give).
var documented = map[int]bool{200: true, 204: true, 400: true, 404: true, 405: true, 410: true, 429: true, 502: true, 503: true}

// FuzzQuery: whatever query string, content type and body a request carries, on any
// route, the handler never panics, answers a documented status, with a JSON body that
// decodes (none for a 204), and hands the node only validated values.
func FuzzQuery(f *testing.F) {
	for _, seed := range []struct {
		route       uint8
		query, ct   string
		body        string
		wrongMethod bool
	}{
		{0, "topic=orders", "", "", false},
		{0, "topic=orders&max=10&wait=1&visibility=30s", "", "", false},
		{0, "topic=orders&partition=0&max=3", "", "", false},
		{0, "topic=orders&partition=0&offset=1&max=2", "", "", false},
		{0, "topic=orders&partition=1&offset=0", "", "", false},
		{0, "topic=later&wait=1ms", "", "", false},
		{0, "topic=orders&wait=1m&partition=0", "", "", false},
		{0, "topic=later&wait=60000", "", "", false},
		{0, "topic=later&wait=60001", "", "", false},
		{0, "topic=nope", "", "", false},
		{0, "topic=orders&wait=-1&max=1001&partition=-3", "", "", false},
		{0, "topic=orders&wait=1h&max=1e9", "", "", false},
		{0, "topic=%ff%fe&max=%zz", "", "", false},
		{0, "topic=orders;max=2", "", "", false},
		{0, "topic=orders", "", "", true},
		{1, "topic=orders&receipt_handle=0:0:1", "", "", false},
		{1, "", "application/x-www-form-urlencoded", "topic=orders&receipt_handle=0:1:2", false},
		{1, "topic=orders", "application/x-www-form-urlencoded", "receipt_handle=0:1:2&receipt_handle=0:1:3", false},
		{1, "topic=orders", "text/plain", "receipt_handle=0:1:2", false},
		{2, "topic=orders", "application/json", `{"receipt_handles":["0:0:1","x"]}`, false},
		{2, "", "application/json", `{"topic":"orders","receipt_handles":["0:0:1"]}`, false},
		{2, "topic=orders", "application/json", `{"receipt_handles":[null,1,{}]}`, false},
		{2, "topic=orders", "", `[`, false},
		{3, "topic=orders&receipt_handle=0:0:1&visibility=1500", "", "", false},
		{3, "topic=orders&receipt_handle=0:0:1&visibility=1e400s", "", "", false},
		{4, "topic=orders&receipt_handle=0:0:1&delay=2s", "", "", false},
		{4, "topic=orders&receipt_handle=0:0:1&delay=-0", "", "", false},
		{5, "topic=orders&receipt_handle=1:0:1", "", "", false},
		{6, "topic=orders", "", "", false},
		{7, "topic=orders&receipt_handle=0:0:1", "", "", false},
		{7, "topic=orders&receipt_handle=0:0:1&delay=1s", "", "", false},
	} {
		f.Add(seed.route, seed.wrongMethod, seed.query, seed.ct, []byte(seed.body))
	}

	f.Fuzz(func(t *testing.T, route uint8, wrongMethod bool, query, ct string, body []byte) {
		// In a bubble, with a node of its own: a wait passes at once. Waits are bounded at a
		// minute: a long-poll on a topic no node serves looks at the routes every 50 ms.
		synctest.Test(t, func(t *testing.T) { fuzzRequest(t, route, wrongMethod, query, ct, body) })
	})
}

func fuzzRequest(t *testing.T, route uint8, wrongMethod bool, query, ct string, body []byte) {
	logs := &routertest.MemLogs{}
	routes := &routertest.Routes{}
	routes.Set("orders", 0)
	routes.Set("later")
	log := logs.Log("orders", 0)
	for i := range 5 {
		log.Append([]byte{byte(i), 0xff}, []byte(fmt.Sprintf("<%d>", i)), time.Unix(int64(i), 0))
	}
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	h, err := httpapi.New(&checkedNode{Node: node, maxWait: time.Minute, t: t}, httpapi.Options{MaxWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r := fuzzRoutes[int(route)%len(fuzzRoutes)]
	method := r.method
	if wrongMethod {
		method = http.MethodPut
	}
	req := httptest.NewRequest(method, r.path, bytes.NewReader(body))
	req.URL.RawQuery = query
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	if !documented[rec.Code] {
		t.Fatalf("%s %s?%q: status %d: %s", method, r.path, query, rec.Code, rec.Body.String())
	}
	if rec.Code == http.StatusNoContent {
		if rec.Body.Len() != 0 {
			t.Fatalf("a 204 with a body: %q", rec.Body.String())
		}
		return
	}
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Fatalf("status %d with Content-Type %q", rec.Code, got)
	}
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("status %d: a body that is not JSON: %v: %q", rec.Code, err, rec.Body.String())
	}
	if rec.Code >= 400 {
		msg, _ := v["error"].(string)
		if msg == "" || v["code"] == nil {
			t.Fatalf("status %d without an error: %q", rec.Code, rec.Body.String())
		}
		if rec.Code == http.StatusBadRequest && !strings.Contains(msg, ": ") {
			t.Fatalf("a 400 that names nothing: %q", msg)
		}
	}
}
