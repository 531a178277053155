package sqsapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestVerifierExample: the verifier's canonical request, signing key and signature of AWS's
// example in its SigV4 documentation (IAM's ListUsers, a GET with a query string, signed on
// 2015-08-30 with the example secret) are AWS's.
func TestVerifierExample(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", nil)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("X-Amz-Date", "20150830T123600Z")
	a, err := parseAuthorization("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7")
	require.NoError(t, err)
	empty := sha256.Sum256(nil)
	canonical := appendCanonicalRequest(nil, req, &a, []byte(hex.EncodeToString(empty[:])))
	require.Equal(t, "GET\n/\nAction=ListUsers&Version=2010-05-08\ncontent-type:application/x-www-form-urlencoded; charset=utf-8\nhost:iam.amazonaws.com\nx-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", string(canonical))
	sum := sha256.Sum256(canonical)
	require.Equal(t, "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59", hex.EncodeToString(sum[:]))
	v := newVerifier(func(string) (string, bool) { return "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", true }, "")
	key := v.signingKey(&a, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	require.Equal(t, "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9", hex.EncodeToString(key[:]))
	sig := hmacSHA256(key[:], []byte("AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/iam/aws4_request\n"+hex.EncodeToString(sum[:])))
	require.Equal(t, a.signature, sig)
}

// TestHMAC: hmacSHA256 is crypto/hmac's HMAC-SHA256, for keys and data of any length.
func TestHMAC(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "key")
		data := rapid.SliceOfN(rapid.Byte(), 0, 1000).Draw(t, "data")
		m := hmac.New(sha256.New, key)
		m.Write(data)
		got := hmacSHA256(key, data)
		if !hmac.Equal(m.Sum(nil), got[:]) {
			t.Fatalf("HMAC of %x over %x: %x", key, data, got)
		}
	})
}

// TestAmzDate: X-Amz-Date's form, and only it, is a time.
func TestAmzDate(t *testing.T) {
	at, ok := parseAmzDate("20240229T235959Z")
	require.True(t, ok)
	require.Equal(t, time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC), at)
	for _, bad := range []string{"", "20230229T000000Z", "20240231T000000Z", "20241301T000000Z", "20240101T240000Z", "20240101T000060Z",
		"20240101 000000Z", "20240101T000000", "2024-01-01T00:00:00Z", "+0240101T000000Z", "20240101T00000aZ", "20240100T000000Z"} {
		_, ok := parseAmzDate(bad)
		require.False(t, ok, bad)
	}
}

// signedRequest is a JSON request signed with secret at, as the AWS SDK for Go signs one.
func signedRequest(t testing.TB, secret string, at time.Time, body string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9324/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS.ReceiveMessage")
	req.Header.Set("Amz-Sdk-Invocation-Id", "4f0c7d0e-1b2a-4c3d-8e9f-000000000001")
	req.Header.Set("Amz-Sdk-Request", "attempt=1; max=3")
	req.Header.Set("Content-Length", "100")
	amzDate := at.UTC().Format(amzDateLayout)
	req.Header.Set("X-Amz-Date", amzDate)
	a := authorization{accessKey: "AKIDEXAMPLE", date: amzDate[:8], region: "us-east-1", service: "sqs",
		signedHeaders: "amz-sdk-invocation-id;amz-sdk-request;content-length;content-type;host;x-amz-date;x-amz-target"}
	payload := sha256.Sum256([]byte(body))
	canonical := appendCanonicalRequest(nil, req, &a, []byte(hex.EncodeToString(payload[:])))
	sum := sha256.Sum256(canonical)
	v := newVerifier(nil, "")
	key := v.signingKey(&a, secret)
	sig := hmacSHA256(key[:], []byte(sigAlgorithm+"\n"+amzDate+"\n"+string(a.appendScope(nil))+"\n"+hex.EncodeToString(sum[:])))
	req.Header.Set("Authorization", sigAlgorithm+" Credential=AKIDEXAMPLE/"+string(a.appendScope(nil))+", SignedHeaders="+a.signedHeaders+", Signature="+hex.EncodeToString(sig[:]))
	return req
}

// TestVerifyAllocates: verifying a signature allocates nothing once the key's signing key
// is derived.
func TestVerifyAllocates(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"QueueUrl":"http://127.0.0.1:9324/orders","MaxNumberOfMessages":10}`)
	req := signedRequest(t, "secret", at, string(body))
	v := newVerifier(func(string) (string, bool) { return "secret", true }, "us-east-1")
	key, err := v.verify(req, body, at)
	require.NoError(t, err)
	require.Equal(t, "AKIDEXAMPLE", key)
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := v.verify(req, body, at); err != nil {
			t.Fatal(err)
		}
	}))
}

// BenchmarkVerify: the CPU a signature check adds to a request of the receive/delete
// benchmark's size.
func BenchmarkVerify(b *testing.B) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"QueueUrl":"http://127.0.0.1:9324/orders","MaxNumberOfMessages":10}`)
	req := signedRequest(b, "secret", at, string(body))
	v := newVerifier(func(string) (string, bool) { return "secret", true }, "us-east-1")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.verify(req, body, at); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzAuthorization: whatever an Authorization header holds, parsing it never panics and
// either refuses it with IncompleteSignature or returns its parts: a valid access key, a
// scope of five parts, SignedHeaders ascending with host and x-amz-date, and a header that,
// written again from the parts, parses to the same.
func FuzzAuthorization(f *testing.F) {
	for _, seed := range []string{
		"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/sqs/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
		"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/sqs/aws4_request,SignedHeaders=host;x-amz-date,Signature=5D672D79C15B13162D9279B0855CFBA6789A8EDB4C82C400E06B5924A6F2B5D7",
		"AWS4-HMAC-SHA256 Signature=00, Credential=a/b/c/d/e, SignedHeaders=host",
		"AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/sqs/aws4_request, Credential=A/20150830/us-east-1/sqs/aws4_request",
		"AWS4-HMAC-SHA256 Credential=A//us-east-1/sqs/aws4_request, SignedHeaders=x-amz-date;host, Signature=",
		"AWS4-HMAC-SHA256 ,,,",
		"AWS4-HMAC-SHA256 Credential=A/20150830/us-east-1/sqs/aws4_request/extra, SignedHeaders=host;x-amz-date, Signature=zz",
		"AWS AKIDEXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=",
		"AWS4-ECDSA-P256-SHA256 Credential=AKIDEXAMPLE/20150830/sqs/aws4_request, SignedHeaders=host;x-amz-date;x-amz-region-set, Signature=3045",
		"AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/sqs/aws4_request, SignedHeaders=host;;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
		"AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/sqs/aws4_request, SignedHeaders=Host;X-Amz-Date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		a, err := parseAuthorization(header)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.code != codeIncompleteSignature || ae.msg == "" {
				t.Fatalf("%q refused with %v, not IncompleteSignature", header, err)
			}
			return
		}
		switch {
		case !validAccessKey(a.accessKey), len(a.date) != 8 || !digits(a.date), a.region == "", a.service == "":
			t.Fatalf("%q: a credential of %+v", header, a)
		case !signedHeader(a.signedHeaders, "host") || !signedHeader(a.signedHeaders, "x-amz-date"):
			t.Fatalf("%q: SignedHeaders %q", header, a.signedHeaders)
		case checkSignedHeaders(a.signedHeaders) != nil:
			t.Fatalf("%q: SignedHeaders %q accepted and refused", header, a.signedHeaders)
		}
		again, err := parseAuthorization(sigAlgorithm + " Credential=" + a.accessKey + "/" + string(a.appendScope(nil)) +
			", SignedHeaders=" + a.signedHeaders + ", Signature=" + hex.EncodeToString(a.signature[:]))
		if err != nil || again != a {
			t.Fatalf("%q parsed to %+v, written again to %+v (%v)", header, a, again, err)
		}
	})
}
