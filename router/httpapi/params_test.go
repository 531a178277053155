package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router/httpapi"
)

// TestMalformedRequests: every malformed parameter or body is a 400 naming what is wrong,
// before anything reaches the node.
func TestMalformedRequests(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	long := strings.Repeat("t", 250)
	handle := "&receipt_handle=0:0:1"
	cases := []struct {
		method, target, body, names string
	}{
		{"GET", "/consume", "", "topic"},
		{"GET", "/consume?topic=", "", "topic"},
		{"GET", "/consume?topic=" + long, "", "topic"},
		{"GET", "/consume?topic=%ff", "", "topic"},
		{"GET", "/consume?topic=orders&topic=orders", "", "topic"},
		{"GET", "/consume?topic=orders&max=0", "", "max"},
		{"GET", "/consume?topic=orders&max=1001", "", "max"},
		{"GET", "/consume?topic=orders&max=-1", "", "max"},
		{"GET", "/consume?topic=orders&max=", "", "max"},
		{"GET", "/consume?topic=orders&max=ten", "", "max"},
		{"GET", "/consume?topic=orders&max=1e3", "", "max"},
		{"GET", "/consume?topic=orders&max=+5", "", "max"},
		{"GET", "/consume?topic=orders&max=99999999999999999999999", "", "max"},
		{"GET", "/consume?topic=orders&max=" + strings.Repeat("9", 100), "", "max"},
		{"GET", "/consume?topic=orders&wait=25h", "", "wait"},
		{"GET", "/consume?topic=orders&wait=86400001", "", "wait"},
		{"GET", "/consume?topic=orders&wait=-1s", "", "wait"},
		{"GET", "/consume?topic=orders&wait=-5", "", "wait"},
		{"GET", "/consume?topic=orders&wait=%2B5s", "", "wait"},
		{"GET", "/consume?topic=orders&wait=soon", "", "wait"},
		{"GET", "/consume?topic=orders&wait=0&max=1000&visibility=12h&partition=0", "", ""}, // all in range
		{"GET", "/consume?topic=orders&wait=", "", "wait"},
		{"GET", "/consume?topic=orders&wait=1s2", "", "wait"},
		{"GET", "/consume?topic=orders&wait=99999999999999999999h", "", "wait"},
		{"GET", "/consume?topic=orders&wait=" + strings.Repeat("1", 40), "", "wait"},
		{"GET", "/consume?topic=orders&visibility=13h", "", "visibility"},
		{"GET", "/consume?topic=orders&visibility=-1ms", "", "visibility"},
		{"GET", "/consume?topic=orders&partition=-1", "", "partition"},
		{"GET", "/consume?topic=orders&partition=2147483648", "", "partition"},
		{"GET", "/consume?topic=orders&partition=x", "", "partition"},
		{"GET", "/consume?topic=orders&offset=0", "", "offset"},
		{"GET", "/consume?topic=orders&partition=0&offset=-1", "", "offset"},
		{"GET", "/consume?topic=orders&partition=0&offset=9223372036854775808", "", "offset"},
		{"GET", "/consume?topic=orders&partition=0&offset=0&wait=1s", "", "wait"},
		{"GET", "/consume?topic=orders&partition=0&offset=0&visibility=1s", "", "visibility"},
		{"GET", "/consume?topic=orders&partition=0&offset=0&max=1001", "", "max"},
		{"GET", "/consume?topic=orders&vis=1s", "", "vis"},
		{"GET", "/consume?topic=orders&%zz=1", "", "query"},
		{"GET", "/consume?topic=orders;max=2", "", "query"},
		{"GET", "/consume?topic=orders&x=" + strings.Repeat("a", httpapi.MaxQueryBytes), "", "query"},
		{"POST", "/ack?topic=orders", "", "receipt_handle"},
		{"POST", "/ack?topic=orders&receipt_handle=", "", "receipt_handle"},
		{"POST", "/ack?topic=orders&receipt_handle=1:2", "", "receipt_handle"},
		{"POST", "/ack?topic=orders&receipt_handle=0:0:0", "", "receipt_handle"},
		{"POST", "/ack?receipt_handle=0:0:1", "", "topic"},
		{"POST", "/ack?topic=" + long + handle, "", "topic"},
		{"POST", "/ack?topic=orders" + handle, "receipt_handle=0:0:1", "receipt_handle"},
		{"POST", "/ack?topic=orders" + handle + "&visibility=1s", "", "visibility"},
		{"POST", "/ack?topic=orders", "receipt_handle=%zz", "body"},
		{"POST", "/ack?topic=orders", "receipt_handle=0:0:1&" + strings.Repeat("a", httpapi.MaxBodyBytes), "body"},
		{"POST", "/extend?topic=orders" + handle + "&visibility=13h", "", "visibility"},
		{"POST", "/extend?topic=orders" + handle + "&visibility=-1", "", "visibility"},
		{"POST", "/extend?topic=orders" + handle + "&delay=1s", "", "delay"},
		{"POST", "/nack?topic=orders" + handle + "&delay=13h", "", "delay"},
		{"POST", "/nack?topic=orders" + handle + "&delay=x", "", "delay"},
		{"POST", "/release?topic=orders&receipt_handle=abc", "", "receipt_handle"},
		{"POST", "/reject?topic=orders&receipt_handle=abc", "", "receipt_handle"},
		{"POST", "/reject?topic=orders" + handle + "&delay=1s", "", "delay"},
		{"POST", "/ack-batch?topic=orders", "", "body"},
		{"POST", "/ack-batch?topic=orders", "{", "body"},
		{"POST", "/ack-batch?topic=orders", `{"receipt_handles":[]}`, "receipt_handles"},
		{"POST", "/ack-batch?topic=orders", `{"receipt_handles":null}`, "receipt_handles"},
		{"POST", "/ack-batch?topic=orders", `{"receipt_handles":"0:0:1"}`, "body"},
		{"POST", "/ack-batch?topic=orders", `{"receipt_handles":[1]}`, "body"},
		{"POST", "/ack-batch?topic=orders", `{"handles":["0:0:1"]}`, "body"},
		{"POST", "/ack-batch?topic=orders", `{"receipt_handles":["0:0:1"]} {}`, "body"},
		{"POST", "/ack-batch?topic=orders", `{"receipt_handles":["0:0:1"]}]`, "body"},
		// A key spelt otherwise, or twice: one request that two readers would read two ways.
		{"POST", "/ack-batch?topic=orders", `{"Receipt_Handles":["0:0:1"]}`, "body"},
		{"POST", "/ack-batch?topic=orders", `{"receipt_handles":["0:0:1"],"receipt_handles":["0:0:2"]}`, "body"},
		{"POST", "/ack-batch", `{"topic":"orders","TOPIC":"other","receipt_handles":["0:0:1"]}`, "body"},
		{"POST", "/ack-batch", `{"topic":"orders","topic":"orders","receipt_handles":["0:0:1"]}`, "body"},
		{"POST", "/ack-batch", `{"receipt_handles":["0:0:1"]}`, "topic"},
		{"POST", "/ack-batch?topic=orders", `{"topic":"other","receipt_handles":["0:0:1"]}`, "topic"},
		{"POST", "/ack-batch?topic=orders&max=1", `{"receipt_handles":["0:0:1"]}`, "max"},
		{"POST", "/ack-batch?topic=orders", `{"receipt_handles":[` + strings.Repeat(`"0:0:1",`, 1000) + `"0:0:1"]}`, "receipt_handles"},
		{"POST", "/ack-batch?topic=orders", `{"receipt_handles":["` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"]}`, "body"},
	}
	for _, tc := range cases {
		rec := e.do(tc.method, tc.target, tc.body)
		if tc.body == "" {
			rec = e.do(tc.method, tc.target)
		}
		if tc.names == "" {
			require.Less(t, rec.Code, 300, "%s %s: %s", tc.method, tc.target, rec.Body.String())
			continue
		}
		body := failed(t, rec, http.StatusBadRequest)
		require.Equal(t, "bad_request", body.Code)
		require.True(t, strings.HasPrefix(body.Error, tc.names+": "), "%s %s %q: %s", tc.method, truncate(tc.target), truncate(tc.body), body.Error)
	}
	// Nothing reached the node's queue: a record produced now is a first delivery.
	e.produce(0, "v")
	m := one(t, e.do(http.MethodGet, "/consume?topic=orders"))
	require.Equal(t, uint32(1), m.Attempt)
}

// TestContentTypes: a settle's body is a URL-encoded form, a batch's is JSON; a body of
// another media type is refused, one with none is taken for the route's.
func TestContentTypes(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	send := func(target, ct, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		return rec
	}
	require.Equal(t, "Content-Type: the body must be application/x-www-form-urlencoded",
		failed(t, send("/ack", "application/json", `{"topic":"orders"}`), http.StatusBadRequest).Error)
	require.Equal(t, "Content-Type: the body must be application/json",
		failed(t, send("/ack-batch?topic=orders", "text/plain", `{"receipt_handles":["0:0:1"]}`), http.StatusBadRequest).Error)
	failed(t, send("/ack", "garbage;;", "topic=orders"), http.StatusBadRequest)
	require.Equal(t, http.StatusGone, send("/ack", "", "topic=orders&receipt_handle=0:0:1").Code)
	require.Equal(t, http.StatusGone, send("/ack", "application/x-www-form-urlencoded; charset=utf-8", "topic=orders&receipt_handle=0:0:1").Code)
	require.Equal(t, http.StatusOK, send("/ack-batch?topic=orders", "", `{"receipt_handles":["0:0:1"]}`).Code)
	require.Equal(t, http.StatusOK, send("/ack-batch?topic=orders", "application/json; charset=utf-8", `{"receipt_handles":["0:0:1"]}`).Code)
}

func truncate(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

// TestEmptyBodyOfAnyType: an empty body is no body, whatever Content-Type says.
func TestEmptyBodyOfAnyType(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	req := httptest.NewRequest(http.MethodPost, "/ack?topic=orders&receipt_handle=0:0:1", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	failed(t, rec, http.StatusGone)
}
