package sqsapi_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router/sqsapi"
)

// The tests' credentials.
const (
	testKey    = "AKIDTESTKEY"
	testSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	otherKey   = "AKIDOTHERKEY"
)

// testNow is the handlers' clock in the signature tests.
var testNow = time.Date(2026, 12, 6, 10, 30, 0, 0, time.UTC)

// testSigner signs requests as the AWS SDKs do (SigV4 over every header it is told to sign,
// the body's SHA-256 as the payload hash): written from AWS's description, apart from the
// handler's verifier, and checked against AWS's published example (TestSignerExample).
type testSigner struct {
	key, secret     string
	region, service string
	at              time.Time
}

func hmacSum(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// uriEncode is SigV4's URI encoding: all but the unreserved characters, '/' kept unless
// slash.
func uriEncode(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 || c == '/' && !slash {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

// canonical is the canonical request of req with body, signing the headers named (all of
// req's but Authorization and User-Agent when none are named), and the list signed.
func (s testSigner) canonical(req *http.Request, body []byte, names []string) (string, string) {
	if names == nil {
		names = []string{"host"}
		for k := range req.Header {
			if k != "Authorization" && k != "User-Agent" {
				names = append(names, strings.ToLower(k))
			}
		}
	}
	sort.Strings(names)
	var hdrs strings.Builder
	for _, n := range names {
		v := req.Host
		if n != "host" {
			v = strings.Join(req.Header.Values(n), ",")
		}
		hdrs.WriteString(n + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	var query []string
	for k, vs := range req.URL.Query() {
		for _, v := range vs {
			query = append(query, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	sort.Strings(query)
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	signed := strings.Join(names, ";")
	payload := req.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = sha256Hex(body)
	}
	return strings.Join([]string{req.Method, uriEncode(path, false), strings.Join(query, "&"), hdrs.String(), signed, payload}, "\n"), signed
}

// signature signs the canonical request.
func (s testSigner) signature(canonical string) string {
	amzDate := s.at.UTC().Format("20060102T150405Z")
	scope := amzDate[:8] + "/" + s.region + "/" + s.service + "/aws4_request"
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + sha256Hex([]byte(canonical))
	k := hmacSum([]byte("AWS4"+s.secret), amzDate[:8])
	for _, part := range []string{s.region, s.service, "aws4_request"} {
		k = hmacSum(k, part)
	}
	return hex.EncodeToString(hmacSum(k, toSign))
}

// sign sets req's X-Amz-Date and Authorization, signing the headers named (see canonical).
func (s testSigner) sign(req *http.Request, body []byte, names ...string) {
	if s.region == "" {
		s.region = "us-east-1"
	}
	if s.service == "" {
		s.service = "sqs"
	}
	amzDate := s.at.UTC().Format("20060102T150405Z")
	req.Header.Set("X-Amz-Date", amzDate)
	canonical, signed := s.canonical(req, body, names)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+s.key+"/"+amzDate[:8]+"/"+s.region+"/"+s.service+"/aws4_request, SignedHeaders="+signed+", Signature="+s.signature(canonical))
}

// TestSignerExample: the tests' signer gives the signature of AWS's example in its SigV4
// documentation (IAM's ListUsers, signed on 2015-08-30 with the example secret).
func TestSignerExample(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", nil)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	s := testSigner{key: "AKIDEXAMPLE", secret: testSecret, region: "us-east-1", service: "iam", at: time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)}
	req.Header.Set("X-Amz-Date", "20150830T123600Z")
	canonical, _ := s.canonical(req, nil, nil)
	require.Equal(t, "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59", sha256Hex([]byte(canonical)))
	require.Equal(t, "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7", s.signature(canonical))
}

// signedEnv is an env whose handler checks signatures with testKey's secret, at testNow,
// counting what reaches Queues and Authorize.
type signedEnv struct {
	*env
	resolved, authorized atomic.Int32
	keys                 []string // the AccessKeyID Authorize saw, in order
}

func newSignedEnv(t *testing.T, cfg sqsapi.Config) *signedEnv {
	e := &signedEnv{env: newEnv(t, sqsapi.Config{})}
	cfg.Credentials = func(id string) (string, bool) {
		switch id {
		case testKey:
			return testSecret, true
		case otherKey:
			return "another secret", true
		}
		return "", false
	}
	cfg.Queues = func(name string) (string, bool) { e.resolved.Add(1); return name, name == "orders" }
	cfg.Authorize = func(_ *http.Request, req sqsapi.Request) error {
		e.authorized.Add(1)
		e.keys = append(e.keys, req.AccessKeyID)
		return nil
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return testNow }
	}
	if cfg.Produce == nil {
		cfg.Produce = e.produceFunc()
	}
	e.h = mustNew(t, e.node, cfg)
	return e
}

// jsonRequest is a request of the JSON protocol, as the AWS SDK for Go sends it.
func jsonRequest(action, body string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://sqs.test/q", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	req.Header.Set("Amz-Sdk-Invocation-Id", "4f0c7d0e-1b2a-4c3d-8e9f-000000000001")
	req.Header.Set("User-Agent", "aws-sdk-go-v2/1.0")
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Length", itoa(len(body)))
	return req
}

// queryRequest is a request of the query protocol, as botocore sends it.
func queryRequest(action string, params url.Values) (*http.Request, string) {
	form := url.Values{"Action": {action}, "Version": {"2012-11-05"}}
	for k, v := range params {
		form[k] = v
	}
	body := form.Encode()
	req := httptest.NewRequest(http.MethodPost, "http://sqs.test/q", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	return req, body
}

// TestSignedRequests: requests signed with a known key's secret are served, in both
// protocols, signed at any time within MaxClockSkew of the handler's clock, posted to the
// base URL or to a queue's URL; Authorize is told the key.
func TestSignedRequests(t *testing.T) {
	e := newSignedEnv(t, sqsapi.Config{})
	e.produce(0, "a", "b", "c", "d")
	signer := testSigner{key: testKey, secret: testSecret, at: testNow}
	send := `{"QueueUrl":"` + queueURL + `","MessageBody":"hello"}`
	req := jsonRequest("SendMessage", send)
	signer.sign(req, []byte(send))
	ok(t, serve(e.h, req), nil)

	for _, skew := range []time.Duration{-sqsapi.MaxClockSkew, -4 * time.Minute, 0, 4 * time.Minute, sqsapi.MaxClockSkew} {
		body := `{"QueueUrl":"` + queueURL + `"}`
		req := jsonRequest("ReceiveMessage", body)
		s := signer
		s.at = testNow.Add(skew)
		s.sign(req, []byte(body))
		var out struct{ Messages []message }
		ok(t, serve(e.h, req), &out)
		require.Len(t, out.Messages, 1, "signed %v from the handler's clock", skew)
	}

	// The query protocol: its form is the payload; posted to the queue's URL, with a query
	// string, and with only the headers botocore signs.
	req, body := queryRequest("GetQueueUrl", url.Values{"QueueName": {"orders"}})
	req.URL.Path, req.URL.RawQuery = "/q/orders", "x=1&a=b%20c&a=a"
	signer.sign(req, []byte(body), "content-type", "host", "x-amz-date")
	require.Equal(t, queueURL, queryOK(t, serve(e.h, req)).Result.QueueUrl)

	require.Equal(t, []string{testKey, testKey, testKey, testKey, testKey, testKey, testKey}, e.keys)
	require.Equal(t, []string{"orders/hello"}, e.produced)
}

// TestSignatureRefusals: a request with no signature, a malformed one, one of an unknown
// key, of a wrong secret, with a body or a signed header changed after signing, made more
// than MaxClockSkew from the handler's clock, or scoped to another service, region or day,
// is refused with the code SQS answers it with, in both protocols, before anything else is
// looked at: nothing reaches Queues, Authorize, Produce or the node. The answer's Date is
// the handler's clock, for the SDKs' clock skew correction.
func TestSignatureRefusals(t *testing.T) {
	send := `{"QueueUrl":"` + queueURL + `","MessageBody":"hello"}`
	good := testSigner{key: testKey, secret: testSecret, at: testNow}
	for _, tc := range []struct {
		name    string
		prepare func(req *http.Request) // after signing
		query   func(req *http.Request) // after signing the query request: prepare when nil
		json    bool                    // of the JSON protocol only
		signer  *testSigner
		names   []string // the headers signed; nil: all
		code    string
		status  int
		message string // a part of it
	}{
		{name: "unsigned", prepare: func(req *http.Request) { req.Header.Del("Authorization") }, code: "MissingAuthenticationToken", status: 403},
		{name: "unknown key", signer: &testSigner{key: "AKIDNOBODY", secret: testSecret, at: testNow}, code: "InvalidClientTokenId", status: 403},
		{name: "wrong secret", signer: &testSigner{key: testKey, secret: "not the secret", at: testNow}, code: "SignatureDoesNotMatch", status: 403, message: "does not match"},
		{name: "another key's secret", signer: &testSigner{key: otherKey, secret: testSecret, at: testNow}, code: "SignatureDoesNotMatch", status: 403},
		{name: "body changed", prepare: func(req *http.Request) {
			req.Body = httptestRequest("POST", strings.Replace(send, "hello", "hellO", 1)).Body
		}, query: func(req *http.Request) {
			body := url.Values{"Action": {"SendMessage"}, "Version": {"2012-11-05"}, "QueueUrl": {queueURL}, "MessageBody": {"hellO"}}.Encode()
			req.Body = httptestRequest("POST", body).Body
		}, code: "SignatureDoesNotMatch", status: 403},
		{name: "signed header changed", prepare: func(req *http.Request) { req.Header.Set("Amz-Sdk-Invocation-Id", "another") },
			query: func(req *http.Request) { req.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, code: "SignatureDoesNotMatch", status: 403},
		{name: "action changed", prepare: func(req *http.Request) { req.Header.Set("X-Amz-Target", "AmazonSQS.PurgeQueue") }, json: true, code: "SignatureDoesNotMatch", status: 403},
		{name: "host changed", prepare: func(req *http.Request) { req.Host = "evil.test" }, code: "SignatureDoesNotMatch", status: 403},
		{name: "date changed", prepare: func(req *http.Request) { req.Header.Set("X-Amz-Date", "20261206T103001Z") }, code: "SignatureDoesNotMatch", status: 403},
		{name: "target unsigned", names: []string{"host", "x-amz-date"}, json: true, code: "IncompleteSignature", status: 400},
		{name: "6 minutes old", signer: &testSigner{key: testKey, secret: testSecret, at: testNow.Add(-6 * time.Minute)}, code: "SignatureDoesNotMatch", status: 403,
			message: "Signature expired: 20261206T102400Z is now earlier than 20261206T102500Z (20261206T103000Z - 5 min.)"},
		{name: "6 minutes ahead", signer: &testSigner{key: testKey, secret: testSecret, at: testNow.Add(6 * time.Minute)}, code: "SignatureDoesNotMatch", status: 403,
			message: "Signature not yet current"},
		{name: "another service", signer: &testSigner{key: testKey, secret: testSecret, at: testNow, service: "sns"}, code: "SignatureDoesNotMatch", status: 403, message: "'sqs'"},
		{name: "scope of another day", prepare: func(req *http.Request) {
			req.Header.Set("Authorization", strings.Replace(req.Header.Get("Authorization"), "/20261206/", "/20261205/", 1))
		}, code: "SignatureDoesNotMatch", status: 403, message: "Date in Credential scope"},
		{name: "payload hash not the body's", prepare: func(req *http.Request) {
			req.Header.Set("X-Amz-Content-Sha256", sha256Hex([]byte("other")))
		}, code: "IncompleteSignature", status: 400},
		{name: "SigV2", prepare: func(req *http.Request) { req.Header.Set("Authorization", "AWS "+testKey+":c2lnbmF0dXJl") }, code: "IncompleteSignature", status: 400},
		{name: "no signature component", prepare: func(req *http.Request) {
			a := req.Header.Get("Authorization")
			req.Header.Set("Authorization", a[:strings.Index(a, ", Signature=")])
		}, code: "IncompleteSignature", status: 400},
		{name: "no X-Amz-Date", prepare: func(req *http.Request) { req.Header.Del("X-Amz-Date") }, code: "IncompleteSignature", status: 400},
		{name: "two Authorization headers", prepare: func(req *http.Request) { req.Header.Add("Authorization", req.Header.Get("Authorization")) }, code: "IncompleteSignature", status: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSignedEnv(t, sqsapi.Config{})
			e.produce(0, "v")
			signer := good
			if tc.signer != nil {
				signer = *tc.signer
			}
			req := jsonRequest("SendMessage", send)
			signer.sign(req, []byte(send), tc.names...)
			if tc.prepare != nil {
				tc.prepare(req)
			}
			rec := serve(e.h, req)
			got := failed(t, rec)
			require.Equal(t, sqsError{tc.status, tc.code, tc.code + ";Sender", got.Message}, got)
			require.Contains(t, got.Message, tc.message)
			require.Equal(t, testNow.Format(http.TimeFormat), rec.Header().Get("Date"))
			require.Zero(t, e.resolved.Load(), "Queues")
			require.Zero(t, e.authorized.Load(), "Authorize")
			require.Empty(t, e.produced, "Produce")
			st, err := e.node.PartitionStatus("orders", 0)
			require.NoError(t, err)
			require.False(t, st.Loaded, "nothing reached the node")

			// The query protocol answers the same code.
			if tc.json {
				return // the query protocol's action is in its body, which is signed
			}
			qreq, body := queryRequest("SendMessage", url.Values{"QueueUrl": {queueURL}, "MessageBody": {"hello"}})
			signer.sign(qreq, []byte(body))
			switch {
			case tc.query != nil:
				tc.query(qreq)
			case tc.prepare != nil:
				tc.prepare(qreq)
			}
			qrec := serve(e.h, qreq)
			require.Equal(t, [3]string{http.StatusText(tc.status), "Sender", tc.code}, queryError(t, qrec))
			require.Empty(t, e.produced, "Produce")
			require.Zero(t, e.resolved.Load(), "Queues")
		})
	}
}

// TestSignatureRegion: with Config.Region, a signature scoped to another region is refused.
func TestSignatureRegion(t *testing.T) {
	e := newSignedEnv(t, sqsapi.Config{Region: "eu-west-1"})
	body := `{"QueueName":"orders"}`
	for region, code := range map[string]string{"eu-west-1": "", "us-east-1": "SignatureDoesNotMatch"} {
		req := jsonRequest("GetQueueUrl", body)
		testSigner{key: testKey, secret: testSecret, at: testNow, region: region}.sign(req, []byte(body))
		rec := serve(e.h, req)
		if code == "" {
			ok(t, rec, nil)
			continue
		}
		require.Equal(t, code, failed(t, rec).Type)
	}
}

// TestThrottledByAccessKey: with signatures checked, the bound on receives in flight is per
// access key, wherever the requests come from.
func TestThrottledByAccessKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newSignedEnv(t, sqsapi.Config{MaxInFlight: 1, Now: time.Now})
		receive := func(ctx context.Context, key, secret, remote string, wait int) *httptest.ResponseRecorder {
			body := `{"QueueUrl":"` + queueURL + `","WaitTimeSeconds":` + itoa(wait) + `}`
			req := jsonRequest("ReceiveMessage", body).WithContext(ctx)
			req.RemoteAddr = remote
			testSigner{key: key, secret: secret, at: time.Now()}.sign(req, []byte(body))
			return serve(e.h, req)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			receive(ctx, testKey, testSecret, "192.0.2.1:1000", 20)
		}()
		synctest.Wait()
		got := failed(t, receive(context.Background(), testKey, testSecret, "192.0.2.2:1000", 0))
		require.Equal(t, "RequestThrottled", got.Type, "the same key from another address")
		ok(t, receive(context.Background(), otherKey, "another secret", "192.0.2.1:1001", 0), nil)
		cancel()
		<-done
		ok(t, receive(context.Background(), testKey, testSecret, "192.0.2.2:1000", 0), nil)
	})
}

// TestUnsignedWhenNoCredentials: without Credentials, a request's Authorization is not
// looked at: a wrong signature is served.
func TestUnsignedWhenNoCredentials(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	body := `{"QueueName":"orders"}`
	req := jsonRequest("GetQueueUrl", body)
	testSigner{key: "anyone", secret: "wrong", at: testNow.Add(-time.Hour)}.sign(req, []byte(body))
	ok(t, serve(e.h, req), nil)
}

// TestSignedPayloadHash: a request whose signed X-Amz-Content-Sha256 is the body's hash is
// served (its hex in either case); one whose hash is another body's is SignatureDoesNotMatch,
// as is one that claims an unsigned payload.
func TestSignedPayloadHash(t *testing.T) {
	e := newSignedEnv(t, sqsapi.Config{})
	body := `{"QueueName":"orders"}`
	for hash, code := range map[string]string{
		sha256Hex([]byte(body)):                  "",
		strings.ToUpper(sha256Hex([]byte(body))): "",
		sha256Hex([]byte(body + " ")):            "SignatureDoesNotMatch",
		"UNSIGNED-PAYLOAD":                       "SignatureDoesNotMatch",
	} {
		req := jsonRequest("GetQueueUrl", body)
		req.Header.Set("X-Amz-Content-Sha256", hash)
		testSigner{key: testKey, secret: testSecret, at: testNow}.sign(req, []byte(body))
		rec := serve(e.h, req)
		if code == "" {
			ok(t, rec, nil)
			continue
		}
		require.Equal(t, code, failed(t, rec).Type, hash)
	}
}

// BenchmarkHandlerSignature: what checking a request's signature adds to the handler's CPU
// per request: a GetQueueUrl served straight through ServeHTTP, signed (checked with
// Credentials) or not (no Credentials), the client's signing outside the measure.
func BenchmarkHandlerSignature(b *testing.B) {
	body := []byte(`{"QueueName":"orders"}`)
	for _, signed := range []bool{false, true} {
		b.Run("signed="+strconv.FormatBool(signed), func(b *testing.B) {
			e := newEnv(b, sqsapi.Config{})
			cfg := sqsapi.Config{Now: func() time.Time { return testNow }}
			if signed {
				cfg.Credentials = func(id string) (string, bool) { return testSecret, id == testKey }
			}
			h := mustNew(b, e.node, cfg)
			req := jsonRequest("GetQueueUrl", string(body))
			testSigner{key: testKey, secret: testSecret, at: testNow}.sign(req, body)
			rd := bytes.NewReader(body)
			rec := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				req.Body = io.NopCloser(rd)
				rec.Body.Reset()
				clear(rec.Header())
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Body.String())
				}
			}
		})
	}
}
