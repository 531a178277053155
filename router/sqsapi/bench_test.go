package sqsapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/cputime"
	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
	"narad.dev/consume/router/routertest"
	"narad.dev/consume/router/sqsapi"
)

// BenchmarkReceiveDelete drains b.N records of a 4-partition topic over loopback HTTP/1.1,
// each consumer's round one receive of up to 10 and one batch delete of what came: through
// sqsapi (ReceiveMessage with MaxNumberOfMessages 10, DeleteMessageBatch) and, in the same
// run, through httpapi (GET /consume?max=10, POST /ack-batch); api=sqsapi-signed is sqsapi
// with every request SigV4-signed by the client (the tests' signer, in the same process) and
// checked by the handler (Config.Credentials). The clients are plain
// http.Clients, the same for both: they decode the responses with encoding/json and write
// the batch's body by hand. Reported: messages per
// second, the process's CPU time per message (node, handler, client, both ends of HTTP), and
// the messages a round carried.
func BenchmarkReceiveDelete(b *testing.B) {
	for _, api := range []string{"sqsapi", "sqsapi-signed", "httpapi"} {
		for _, consumers := range []int{1, 4} {
			b.Run(fmt.Sprintf("api=%s/consumers=%d", api, consumers), func(b *testing.B) {
				benchReceiveDelete(b, api, consumers)
			})
		}
	}
}

// benchValue is each record's value: a small JSON document.
var benchValue = []byte(`{"order":12345,"customer":"c-678","total":"99.90","items":3}`)

func benchReceiveDelete(b *testing.B, api string, consumers int) {
	logs, routes := &routertest.MemLogs{}, &routertest.Routes{}
	const partitions = 4
	routes.Set("orders", 0, 1, 2, 3)
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New()})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	for p := range int32(partitions) {
		log := logs.Log("orders", p)
		var off int64 = -1
		for i := int(p); i < b.N; i += partitions {
			off = log.Append(nil, benchValue, time.Unix(1700000000, 0))
		}
		node.Appended("orders", p, off+1)
	}
	var h http.Handler
	var round func(c *http.Client, url string) (int, error)
	switch api {
	case "sqsapi":
		h, err = sqsapi.New(node, sqsapi.Config{Queues: func(n string) (string, bool) { return n, true }, BaseURL: "http://sqs.test"})
		round = sqsRound(nil)
	case "sqsapi-signed":
		h, err = sqsapi.New(node, sqsapi.Config{Queues: func(n string) (string, bool) { return n, true }, BaseURL: "http://sqs.test",
			Credentials: func(id string) (string, bool) { return testSecret, id == testKey }})
		round = sqsRound(func(req *http.Request, body string) {
			testSigner{key: testKey, secret: testSecret, at: time.Now()}.sign(req, []byte(body))
		})
	default:
		h, err = httpapi.New(node, httpapi.Options{})
		round = httpapiRound
	}
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: consumers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	var received, rounds atomic.Int64
	var failure atomic.Value
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cputime.Process()
	var wg sync.WaitGroup
	for range consumers {
		wg.Go(func() {
			for {
				n, err := round(client, srv.URL)
				if err != nil {
					failure.Store(err)
					return
				}
				if n == 0 { // what is left is leased by the other consumers
					return
				}
				received.Add(int64(n))
				rounds.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed, used := time.Since(start), cputime.Process()-cpu
	b.StopTimer()
	if err, _ := failure.Load().(error); err != nil {
		b.Fatal(err)
	}
	if got := received.Load(); got != int64(b.N) {
		b.Fatalf("received %d of %d", got, b.N)
	}
	if acked := node.Stats().Shards.Acked; acked != uint64(b.N) {
		b.Fatalf("acked %d of %d", acked, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(b.N)/float64(rounds.Load()), "msgs/round")
}

// post sends body to url and decodes a 200's JSON into out.
func post(c *http.Client, req *http.Request, out any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", req.URL, resp.StatusCode, body)
	}
	return json.Unmarshal(body, out)
}

func sqsRequest(url, action, body string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	return req
}

const benchQueueURL = "http://sqs.test/orders"

// sqsRound is one ReceiveMessage of up to 10 and a DeleteMessageBatch of what came, each
// request signed with sign unless it is nil.
func sqsRound(sign func(req *http.Request, body string)) func(c *http.Client, url string) (int, error) {
	request := func(url, action, body string) *http.Request {
		req := sqsRequest(url, action, body)
		if sign != nil {
			sign(req, body)
		}
		return req
	}
	return func(c *http.Client, url string) (int, error) {
		var got struct {
			Messages []struct{ ReceiptHandle string }
		}
		if err := post(c, request(url, "ReceiveMessage", `{"QueueUrl":"`+benchQueueURL+`","MaxNumberOfMessages":10}`), &got); err != nil {
			return 0, err
		}
		if len(got.Messages) == 0 {
			return 0, nil
		}
		var body bytes.Buffer
		body.WriteString(`{"QueueUrl":"` + benchQueueURL + `","Entries":[`)
		for i, m := range got.Messages {
			if i > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"Id":"m%d","ReceiptHandle":"%s"}`, i, m.ReceiptHandle)
		}
		body.WriteString(`]}`)
		var del struct{ Failed []json.RawMessage }
		if err := post(c, request(url, "DeleteMessageBatch", body.String()), &del); err != nil {
			return 0, err
		}
		if len(del.Failed) > 0 {
			return 0, fmt.Errorf("deletes failed: %s", del.Failed)
		}
		return len(got.Messages), nil
	}
}

// httpapiRound is one GET /consume?max=10 and a POST /ack-batch of what came.
func httpapiRound(c *http.Client, url string) (int, error) {
	var got struct {
		Messages []struct {
			ReceiptHandle string `json:"receipt_handle"`
		} `json:"messages"`
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/consume?topic=orders&max=10", nil)
	if err := post(c, req, &got); err != nil {
		return 0, err
	}
	if len(got.Messages) == 0 {
		return 0, nil
	}
	var body bytes.Buffer
	body.WriteString(`{"topic":"orders","receipt_handles":[`)
	for i, m := range got.Messages {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `"%s"`, m.ReceiptHandle)
	}
	body.WriteString(`]}`)
	req, _ = http.NewRequest(http.MethodPost, url+"/ack-batch", &body)
	req.Header.Set("Content-Type", "application/json")
	var acks struct {
		Results []struct{ Status int } `json:"results"`
	}
	if err := post(c, req, &acks); err != nil {
		return 0, err
	}
	for _, r := range acks.Results {
		if r.Status != http.StatusNoContent {
			return 0, fmt.Errorf("an ack answered %d", r.Status)
		}
	}
	return len(got.Messages), nil
}

// BenchmarkQueryMessage serves one message's calls in the query protocol, as the AWS SDKs
// of the query protocol make them, each signed, straight into the handler (no HTTP): a
// SendMessage, a ReceiveMessage of 1 and a DeleteMessage of its receipt handle. The node is
// the tests' (an in-memory log); the signing of each request is not timed. It is the
// handler's own cost per message, the part of cmd/sqsd's that router/sqsapi holds.
func BenchmarkQueryMessage(b *testing.B) {
	e := newEnv(b, sqsapi.Config{})
	var err error
	e.h, err = sqsapi.New(e.node, sqsapi.Config{Queues: func(n string) (string, bool) { return n, n == "orders" }, BaseURL: baseURL,
		Produce:     e.produceFunc(),
		Credentials: func(id string) (string, bool) { return testSecret, id == testKey },
		Now:         func() time.Time { return testNow }})
	if err != nil {
		b.Fatal(err)
	}
	signer := testSigner{key: testKey, secret: testSecret, at: testNow}
	signed := func(action string, params url.Values) *http.Request {
		req, body := queryRequest(action, params)
		signer.sign(req, []byte(body))
		return req
	}
	serveOK := func(req *http.Request) []byte {
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	send := url.Values{"QueueUrl": {queueURL}, "MessageBody": {string(benchValue)}}
	receive := url.Values{"QueueUrl": {queueURL}, "MaxNumberOfMessages": {"1"}}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		sreq, rreq := signed("SendMessage", send), signed("ReceiveMessage", receive)
		b.StartTimer()
		serveOK(sreq)
		out := serveOK(rreq)
		b.StopTimer()
		_, rest, _ := bytes.Cut(out, []byte("<ReceiptHandle>"))
		handle, _, found := bytes.Cut(rest, []byte("</ReceiptHandle>"))
		if !found {
			b.Fatalf("no receipt handle in %s", out)
		}
		dreq := signed("DeleteMessage", url.Values{"QueueUrl": {queueURL}, "ReceiptHandle": {html.UnescapeString(string(handle))}})
		b.StartTimer()
		serveOK(dreq)
	}
}
