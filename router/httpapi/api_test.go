package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
)

func settle(path, handle string, extra ...string) string {
	q := url.Values{"topic": {"orders"}, "receipt_handle": {handle}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return path + "?" + q.Encode()
}

func TestConsumeAndAck(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	require.Equal(t, http.StatusNoContent, e.do(http.MethodGet, "/consume?topic=orders").Code)
	e.produce(0, "first", "second", "third")

	m := one(t, e.do(http.MethodGet, "/consume?topic=orders"))
	require.Equal(t, "orders", m.Topic)
	require.Equal(t, int32(0), m.Partition)
	require.Equal(t, int64(0), m.Offset)
	require.Equal(t, "first", string(m.value()))
	require.Nil(t, m.Key)
	require.True(t, time.Unix(1700000000, 0).Equal(m.Timestamp))
	require.Equal(t, uint32(1), m.Attempt)
	require.Equal(t, "first", m.Reason)
	require.NotNil(t, m.Expiry)
	require.NotEmpty(t, m.Fence)
	h, err := router.ParseHandle(m.ReceiptHandle)
	require.NoError(t, err)
	require.Equal(t, router.Handle{Partition: 0, Offset: 0, Nonce: h.Nonce}, h)

	rec := e.do(http.MethodPost, settle("/ack", m.ReceiptHandle))
	require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
	require.Empty(t, rec.Body.String())
	// A repeated ack is a 410 a client can tell apart from a lapsed lease.
	require.Equal(t, "already_settled", failed(t, e.do(http.MethodPost, settle("/ack", m.ReceiptHandle)), http.StatusGone).Code)

	// A batch takes the rest; the form body carries the handle as well as the query.
	msgs := messages(t, e.do(http.MethodGet, "/consume?topic=orders&max=10"))
	require.Len(t, msgs, 2)
	require.Equal(t, []int64{1, 2}, []int64{msgs[0].Offset, msgs[1].Offset})
	rec = e.do(http.MethodPost, "/ack", url.Values{"topic": {"orders"}, "receipt_handle": {msgs[0].ReceiptHandle}}.Encode())
	require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
	rec = e.do(http.MethodPost, "/ack?topic=orders", url.Values{"receipt_handle": {msgs[1].ReceiptHandle}}.Encode())
	require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
	require.Equal(t, http.StatusNoContent, e.do(http.MethodGet, "/consume?topic=orders").Code)
}

func TestExtendNackRelease(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	e.produce(0, "v")
	m := one(t, e.do(http.MethodGet, "/consume?topic=orders&visibility=10s"))
	require.WithinDuration(t, time.Now().Add(10*time.Second), *m.Expiry, 5*time.Second)

	rec := e.do(http.MethodPost, settle("/extend", m.ReceiptHandle, "visibility", "1h"))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var ext struct {
		ReceiptHandle string    `json:"receipt_handle"`
		Expiry        time.Time `json:"expiry"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ext))
	require.Equal(t, m.ReceiptHandle, ext.ReceiptHandle)
	require.True(t, ext.Expiry.After(*m.Expiry))

	// A nack with no delay: visible again at once, as a second attempt.
	require.Equal(t, http.StatusNoContent, e.do(http.MethodPost, settle("/nack", m.ReceiptHandle)).Code)
	require.Equal(t, "gone", failed(t, e.do(http.MethodPost, settle("/ack", m.ReceiptHandle)), http.StatusGone).Code)
	m2 := one(t, e.do(http.MethodGet, "/consume?topic=orders"))
	require.Equal(t, int64(0), m2.Offset)
	require.Equal(t, uint32(2), m2.Attempt)
	require.Equal(t, "nacked", m2.Reason)

	// A nack with a delay keeps it out of sight.
	require.Equal(t, http.StatusNoContent, e.do(http.MethodPost, settle("/nack", m2.ReceiptHandle, "delay", "3600000")).Code)
	require.Equal(t, http.StatusNoContent, e.do(http.MethodGet, "/consume?topic=orders").Code)

	// A release gives a lease back unprocessed: visible again at once.
	e.produce(0, "w")
	m3 := one(t, e.do(http.MethodGet, "/consume?topic=orders"))
	require.Equal(t, int64(1), m3.Offset)
	require.Equal(t, http.StatusNoContent, e.do(http.MethodPost, settle("/release", m3.ReceiptHandle)).Code)
	m4 := one(t, e.do(http.MethodGet, "/consume?topic=orders"))
	require.Equal(t, int64(1), m4.Offset)
	require.NotEqual(t, m3.ReceiptHandle, m4.ReceiptHandle)
	failed(t, e.do(http.MethodPost, settle("/release", m3.ReceiptHandle)), http.StatusGone)
	require.Equal(t, http.StatusGone, e.do(http.MethodPost, settle("/extend", m3.ReceiptHandle)).Code)
}

// TestReject: a reject quarantines the record at once, with no delivery limit set: it is not
// delivered again until Requeue, and its handle then answers as a settled one's does.
func TestReject(t *testing.T) {
	var told []int64
	e := newEnv(t, httpapi.Options{}, func(c *router.Config) {
		c.OnQuarantine = func(_ string, _ int32, offset int64, _ uint32) { told = append(told, offset) }
	})
	e.produce(0, "poison", "fine")
	m := one(t, e.do(http.MethodGet, "/consume?topic=orders"))
	rec := e.do(http.MethodPost, "/reject", url.Values{"topic": {"orders"}, "receipt_handle": {m.ReceiptHandle}}.Encode())
	require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
	require.Empty(t, rec.Body.String())
	require.Equal(t, []int64{0}, told)
	require.Equal(t, "already_settled", failed(t, e.do(http.MethodPost, settle("/reject", m.ReceiptHandle)), http.StatusGone).Code)
	require.Equal(t, "bad_request", failed(t, e.do(http.MethodPost, settle("/reject", m.ReceiptHandle, "delay", "1s")), http.StatusBadRequest).Code)

	next := one(t, e.do(http.MethodGet, "/consume?topic=orders&max=10"))
	require.Equal(t, int64(1), next.Offset, "the rejected record is not delivered again")
	ok, err := e.node.Requeue("orders", 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	again := one(t, e.do(http.MethodGet, "/consume?topic=orders"))
	require.Equal(t, int64(0), again.Offset)
	require.Equal(t, "requeued", again.Reason)
}

func TestAckBatch(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	e.produce(0, "a", "b", "c")
	msgs := messages(t, e.do(http.MethodGet, "/consume?topic=orders&max=3"))
	require.Len(t, msgs, 3)
	require.Equal(t, http.StatusNoContent, e.do(http.MethodPost, settle("/ack", msgs[2].ReceiptHandle)).Code)

	handles := []string{msgs[0].ReceiptHandle, "not-a-handle", msgs[1].ReceiptHandle, msgs[2].ReceiptHandle}
	body, err := json.Marshal(map[string]any{"receipt_handles": handles})
	require.NoError(t, err)
	rec := e.do(http.MethodPost, "/ack-batch?topic=orders", string(body))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var resp struct {
		Results []struct {
			ReceiptHandle string `json:"receipt_handle"`
			Status        int    `json:"status"`
			Error         string `json:"error"`
			Code          string `json:"code"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	require.Len(t, resp.Results, 4)
	for i, want := range []int{204, 400, 204, 410} {
		require.Equal(t, handles[i], resp.Results[i].ReceiptHandle)
		require.Equal(t, want, resp.Results[i].Status, resp.Results[i].Error)
	}
	require.Equal(t, "already_settled", resp.Results[3].Code)
	require.Empty(t, resp.Results[0].Error)

	// The topic may come in the body instead.
	e.produce(0, "d")
	m := one(t, e.do(http.MethodGet, "/consume?topic=orders"))
	rec = e.do(http.MethodPost, "/ack-batch", `{"topic":"orders","receipt_handles":["`+m.ReceiptHandle+`"]}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"status":204`)
	require.Equal(t, http.StatusNoContent, e.do(http.MethodGet, "/consume?topic=orders").Code)
}

func TestReplay(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	e.produce(0, "a", "b", "c")
	msgs := messages(t, e.do(http.MethodGet, "/consume?topic=orders&partition=0&offset=1&max=5"))
	require.Len(t, msgs, 2)
	for i, m := range msgs {
		require.Equal(t, int64(i+1), m.Offset)
		require.Empty(t, m.ReceiptHandle)
		require.Zero(t, m.Attempt)
		require.Empty(t, m.Reason)
		require.Nil(t, m.Expiry)
		require.Empty(t, m.Fence)
	}
	require.Equal(t, "b", string(msgs[0].value()))
	// max is the limit, one by default.
	require.Len(t, messages(t, e.do(http.MethodGet, "/consume?topic=orders&partition=0&offset=0")), 1)
	// Past the end: nothing.
	require.Equal(t, http.StatusNoContent, e.do(http.MethodGet, "/consume?topic=orders&partition=0&offset=3").Code)
	// A replay leases nothing: the queue still has all three.
	require.Len(t, messages(t, e.do(http.MethodGet, "/consume?topic=orders&max=5")), 3)
}

func TestPinnedConsume(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	e.routes.Set("orders", 0, 1)
	e.produce(0, "zero")
	e.produce(1, "one")
	m := one(t, e.do(http.MethodGet, "/consume?topic=orders&partition=1&max=5"))
	require.Equal(t, int32(1), m.Partition)
	require.Equal(t, "one", string(m.value()))
	require.Equal(t, http.StatusNoContent, e.do(http.MethodGet, "/consume?topic=orders&partition=1").Code)
	// A partition no node owns is not served here: try again elsewhere (503).
	failed(t, e.do(http.MethodGet, "/consume?topic=orders&partition=7"), http.StatusServiceUnavailable)
}

// TestBinaryKeysAndValues: a key or value that is not UTF-8 comes back in *_base64, byte
// for byte; text with characters JSON escapes comes back as text.
func TestBinaryKeysAndValues(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	log := e.logs.Log("orders", 0)
	binary := []byte{0xff, 0x00, 0xfe, '<'}
	text := "<a href=\"x\">&\u2028\n\x00é</a>"
	log.Append(binary, []byte(text), time.Unix(5, 0))
	log.Append([]byte("key"), binary, time.Unix(6, 0))
	e.node.Appended("orders", 0, 2)
	msgs := messages(t, e.do(http.MethodGet, "/consume?topic=orders&max=2"))
	require.Len(t, msgs, 2)
	require.Nil(t, msgs[0].Key)
	require.Equal(t, binary, msgs[0].KeyBase64)
	require.Equal(t, text, *msgs[0].Value)
	require.Equal(t, "key", *msgs[1].Key)
	require.Nil(t, msgs[1].Value)
	require.Equal(t, binary, msgs[1].ValueBase64)
}

func TestRoutesAndMethods(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	require.Equal(t, "no_route", failed(t, e.do(http.MethodGet, "/nope"), http.StatusNotFound).Code)
	require.Equal(t, "no_route", failed(t, e.do(http.MethodGet, "/consume/"), http.StatusNotFound).Code)
	for path, method := range map[string]string{"/consume": "GET", "/ack": "POST", "/ack-batch": "POST", "/extend": "POST", "/nack": "POST", "/release": "POST", "/reject": "POST"} {
		for _, other := range []string{"GET", "POST", "PUT", "DELETE", "HEAD"} {
			if other == method {
				continue
			}
			rec := e.do(other, path+"?topic=orders")
			require.Equal(t, http.StatusMethodNotAllowed, rec.Code, "%s %s", other, path)
			require.Equal(t, method, rec.Header().Get("Allow"))
		}
	}
	// Mounted under a prefix.
	mux := http.NewServeMux()
	mux.Handle("/queue/", http.StripPrefix("/queue", e.h))
	require.Equal(t, http.StatusNoContent, do(mux, http.MethodGet, "/queue/consume?topic=orders").Code)
}

func TestUnknownTopic(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	for _, target := range []string{
		"/consume?topic=nope", "/consume?topic=nope&wait=1s", "/consume?topic=nope&partition=0&offset=0",
	} {
		require.Equal(t, "unknown_topic", failed(t, e.do(http.MethodGet, target), http.StatusNotFound).Code, target)
	}
	for _, path := range []string{"/ack", "/nack", "/extend", "/release", "/reject"} {
		rec := e.do(http.MethodPost, path+"?topic=nope&receipt_handle=0:1:2")
		require.Equal(t, "unknown_topic", failed(t, rec, http.StatusNotFound).Code, path)
	}
	rec := e.do(http.MethodPost, "/ack-batch?topic=nope", `{"receipt_handles":["0:1:2"]}`)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `"status":404`)
}

// TestClosedNode: a node that closed answers 503 everywhere.
func TestClosedNode(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	e.produce(0, "v")
	m := one(t, e.do(http.MethodGet, "/consume?topic=orders"))
	require.NoError(t, e.node.Close())
	failed(t, e.do(http.MethodGet, "/consume?topic=orders"), http.StatusServiceUnavailable)
	failed(t, e.do(http.MethodGet, "/consume?topic=orders&partition=0&offset=0"), http.StatusServiceUnavailable)
	for _, path := range []string{"/ack", "/nack", "/extend", "/release", "/reject"} {
		failed(t, e.do(http.MethodPost, settle(path, m.ReceiptHandle)), http.StatusServiceUnavailable)
	}
	rec := e.do(http.MethodPost, "/ack-batch?topic=orders", `{"receipt_handles":["`+m.ReceiptHandle+`"]}`)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `"status":503`)
}

func TestNewRefusesBadOptions(t *testing.T) {
	_, err := httpapi.New(nil, httpapi.Options{})
	require.Error(t, err)
	e := newEnv(t, httpapi.Options{})
	_, err = httpapi.New(e.node, httpapi.Options{MaxWait: router.MaxWait + 1})
	require.Error(t, err)
	_, err = httpapi.New(e.node, httpapi.Options{MaxWait: -1})
	require.Error(t, err)
	_, err = httpapi.New(e.node, httpapi.Options{RetryAfter: -1})
	require.Error(t, err)
	// A lower MaxWait bounds wait.
	h, err := httpapi.New(e.node, httpapi.Options{MaxWait: time.Minute})
	require.NoError(t, err)
	require.Contains(t, failed(t, do(h, http.MethodGet, "/consume?topic=orders&wait=61s"), http.StatusBadRequest).Error, "wait")
	require.Equal(t, http.StatusNoContent, do(h, http.MethodGet, "/consume?topic=orders&wait=0").Code)
}

// TestHeaders: a record's headers come back in "headers", in order, keys as strings and
// values as base64, byte for byte, for a consume and a replay; a record without any has no
// "headers" field at all.
func TestHeaders(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	log := e.logs.Log("orders", 0)
	headers := []router.Header{{Key: "trace-id", Value: []byte("abc")}, {Key: "bin", Value: []byte{0xff, 0}}, {Key: "trace-id", Value: nil}}
	log.AppendRecord(router.Record{Value: []byte("with"), Headers: headers})
	log.Append(nil, []byte("without"), time.Unix(6, 0))
	e.node.Appended("orders", 0, 2)
	for _, target := range []string{"/consume?topic=orders&max=2", "/consume?topic=orders&partition=0&offset=0&max=2"} {
		rec := e.do(http.MethodGet, target)
		body := rec.Body.String()
		msgs := messages(t, rec)
		require.Len(t, msgs, 2)
		require.Equal(t, []wireHeader{{"trace-id", []byte("abc")}, {"bin", []byte{0xff, 0}}, {"trace-id", []byte{}}}, msgs[0].Headers, target)
		require.Nil(t, msgs[1].Headers)
		require.Contains(t, body, `"headers":[{"key":"trace-id","value":"YWJj"},{"key":"bin","value":"/wA="},{"key":"trace-id","value":""}]`)
		require.Equal(t, 1, strings.Count(body, `"headers"`), "left out for a record without")
	}
}
