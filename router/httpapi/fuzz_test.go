package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
	"narad.dev/consume/router/internal/fronttest"
	"narad.dev/consume/router/routertest"
)

// checkedNode passes every call to a real node after checking that the handler hands it
// only what it validated: nothing out of bounds ever reaches the node.
func checkedNode(t *testing.T, node *router.Node, maxWait time.Duration) *fronttest.CheckedNode {
	return &fronttest.CheckedNode{Node: node, T: t, MaxBatch: router.MaxBatch,
		Topic:   func(string) bool { return true },
		Options: func(o router.ConsumeOptions) bool { return o.Wait <= maxWait }}
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
	h, err := httpapi.New(checkedNode(t, node, time.Minute), httpapi.Options{MaxWait: time.Minute})
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
	v := fronttest.JSONAnswer(t, rec, "application/json")
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
