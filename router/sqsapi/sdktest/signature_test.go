package sdktest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router/sqsapi"
)

// refusedWith asserts err is the SDK's error of SQS's code.
func refusedWith(t *testing.T, err error, code string) {
	t.Helper()
	var api smithy.APIError
	require.ErrorAs(t, err, &api)
	require.Equal(t, code, api.ErrorCode(), api.ErrorMessage())
	require.Equal(t, smithy.FaultClient, api.ErrorFault())
}

// requireUntouched asserts the broker's queue holds nothing and no message is leased: the
// refused requests changed nothing.
func requireUntouched(t *testing.T, b *broker) {
	t.Helper()
	st, err := b.node.PartitionStatus("orders", 0)
	require.NoError(t, err)
	require.Zero(t, st.Leased)
	require.Equal(t, int64(0), b.logs.Log("orders", 0).HighWatermark(), "nothing produced")
}

// TestSignatures: the SDK's signed requests are served; a client with a wrong secret is
// refused SignatureDoesNotMatch, one with an unknown key InvalidClientTokenId, and neither
// changes anything.
func TestSignatures(t *testing.T) {
	b := newBroker(t)
	q := aws.String(b.queueURL)
	_, err := b.clientWith(accessKey, "not the secret").SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("x")})
	refusedWith(t, err, "SignatureDoesNotMatch")
	_, err = b.clientWith("AKIDNOBODY", secretKey).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("x")})
	refusedWith(t, err, "InvalidClientTokenId")
	_, err = b.clientWith(accessKey, "not the secret").ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q})
	refusedWith(t, err, "SignatureDoesNotMatch")
	requireUntouched(t, b)

	c := b.client(accessKey)
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("signed")})
	require.NoError(t, err)
	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
}

// rawRequest is a JSON request to the broker, signed by the SDK's own SigV4 signer at at
// with key and its secret, then passed to tamper; it returns the SDK's error for the
// answer (nil for a 200).
func rawRequest(t *testing.T, b *broker, action, body string, at time.Time, tamper func(*http.Request)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/sqs", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	sum := sha256.Sum256([]byte(body))
	err = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey},
		req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", at)
	require.NoError(t, err)
	if tamper != nil {
		tamper(req)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	code, _, _ := strings.Cut(resp.Header.Get("x-amzn-query-error"), ";")
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, code + " " + string(msg)
	}
	return resp.StatusCode, ""
}

// TestSignaturesTampered: requests the SDK's signer signed are served as signed; with the
// body or a signed header changed after signing, or signed 6 minutes ago, they are refused
// SignatureDoesNotMatch and change nothing.
func TestSignaturesTampered(t *testing.T) {
	b := newBroker(t)
	send := `{"QueueUrl":"` + b.queueURL + `","MessageBody":"hello"}`
	status, _ := rawRequest(t, b, "GetQueueUrl", `{"QueueName":"orders"}`, time.Now(), nil)
	require.Equal(t, http.StatusOK, status)
	for name, tc := range map[string]struct {
		at     time.Time
		tamper func(*http.Request)
		want   string
	}{
		"body changed": {time.Now(), func(r *http.Request) {
			changed := strings.Replace(send, "hello", "hellO", 1)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader([]byte(changed))), int64(len(changed))
		}, "SignatureDoesNotMatch"},
		"action changed":       {time.Now(), func(r *http.Request) { r.Header.Set("X-Amz-Target", "AmazonSQS.PurgeQueue") }, "SignatureDoesNotMatch"},
		"content type changed": {time.Now(), func(r *http.Request) { r.Header.Set("Content-Type", "application/x-amz-json-1.1") }, "SignatureDoesNotMatch"},
		"6 minutes old":        {time.Now().Add(-6 * time.Minute), nil, "SignatureDoesNotMatch Signature expired"},
		"6 minutes ahead":      {time.Now().Add(6 * time.Minute), nil, "SignatureDoesNotMatch Signature not yet current"},
	} {
		status, msg := rawRequest(t, b, "SendMessage", send, tc.at, tc.tamper)
		require.Equal(t, http.StatusForbidden, status, name)
		code, detail, _ := strings.Cut(tc.want, " ")
		require.True(t, strings.HasPrefix(msg, code+" "), "%s: %s", name, msg)
		require.Contains(t, msg, detail, name)
	}
	requireUntouched(t, b)
}

// TestClockSkew: a client whose clock is 6 minutes behind the broker's is refused
// SignatureDoesNotMatch ("Signature expired"), which the SDK takes, with the answer's Date,
// as clock skew: with no retries it surfaces the error; with its retries it signs again at
// the broker's time and is served.
func TestClockSkew(t *testing.T) {
	b := newBroker(t, func(c *sqsapi.Config) { c.Now = func() time.Time { return time.Now().Add(6 * time.Minute) } })
	q := aws.String(b.queueURL)
	_, err := b.client(accessKey, func(o *sqs.Options) { o.RetryMaxAttempts = 1 }).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("x")})
	refusedWith(t, err, "SignatureDoesNotMatch")
	require.Contains(t, err.Error(), "Signature expired")
	requireUntouched(t, b)
	_, err = b.client(accessKey).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("x")})
	require.NoError(t, err, "the SDK corrects its clock's skew")
}
