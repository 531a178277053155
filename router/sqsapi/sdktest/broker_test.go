package sdktest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
	"narad.dev/consume/router/sqsapi"
)

// accessKey is the access key ID the tests' clients sign with, and the one Authorize takes.
const accessKey = "AKIDSQSAPITEST"

// broker is a node serving topic "orders" (partition 0) behind an sqsapi handler on
// 127.0.0.1, mounted at /sqs as doc.go's example mounts it, with a ProduceRecord that
// appends to the node's log (message attributes as headers) and an Authorize that takes only requests SigV4-signed with accessKey.
type broker struct {
	t        testing.TB
	logs     *routertest.MemLogs
	node     *router.Node
	srv      *httptest.Server
	queueURL string

	consumes chan struct{} // one value each time the handler starts a consume
}

func newBroker(t testing.TB) *broker {
	t.Helper()
	b := &broker{t: t, logs: &routertest.MemLogs{}, consumes: make(chan struct{}, 64)}
	routes := &routertest.Routes{}
	routes.Set("orders", 0)
	b.logs.Log("orders", 0)
	node, err := router.New(router.Config{Logs: b.logs, Routes: routes, Dir: "/state", FS: crashfs.New()})
	require.NoError(t, err)
	b.node = node
	var api *sqsapi.Handler
	mux := http.NewServeMux()
	b.srv = httptest.NewUnstartedServer(mux)
	b.srv.Start()
	base := b.srv.URL + "/sqs"
	api, err = sqsapi.New(&signalling{Node: node, consumes: b.consumes}, sqsapi.Config{
		Queues:        func(name string) (string, bool) { return name, name == "orders" },
		BaseURL:       base,
		ProduceRecord: b.produce,
		Authorize:     authorize,
	})
	require.NoError(t, err)
	mux.Handle("/sqs", api)
	mux.Handle("/sqs/", api) // the SDKs that post to the queue's URL
	b.queueURL = base + "/orders"
	t.Cleanup(func() {
		b.srv.Close()
		node.Close()
	})
	return b
}

// produce is the broker's Config.ProduceRecord: append to the log, tell the node.
func (b *broker) produce(_ context.Context, topic string, rec router.Record) (int32, int64, error) {
	if topic != "orders" {
		return 0, 0, router.ErrUnknownTopic
	}
	rec.Timestamp = time.Now()
	off := b.logs.Log(topic, 0).AppendRecord(rec)
	b.node.Appended(topic, 0, off+1)
	return 0, off, nil
}

// authorize is the broker's Config.Authorize: it stands for a host's SigV4 check, which the
// handler leaves to it, and takes the requests signed with accessKey.
func authorize(r *http.Request, req sqsapi.Request) error {
	auth := r.Header.Get("Authorization")
	switch {
	case !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+accessKey+"/"):
		return errors.New("not signed with the broker's access key")
	case r.Header.Get("X-Amz-Date") == "":
		return errors.New("no X-Amz-Date")
	case len(req.Body) == 0 || req.Action == "":
		return errors.New("nothing to check the signature against")
	}
	return nil
}

// signalling is the node, telling when a consume starts.
type signalling struct {
	*router.Node
	consumes chan struct{}
}

func (s *signalling) Consume(ctx context.Context, topic string, opts router.ConsumeOptions) ([]router.Message, error) {
	select {
	case s.consumes <- struct{}{}:
	default:
	}
	return s.Node.Consume(ctx, topic, opts)
}

// client is an SDK client of the broker, signing with key, on an HTTP client of its own
// whose connections are closed at the test's end.
func (b *broker) client(key string) *sqs.Client {
	tr := &http.Transport{}
	b.t.Cleanup(tr.CloseIdleConnections)
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(b.srv.URL + "/sqs"),
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(key, "secret", "")),
		HTTPClient:   &http.Client{Transport: tr},
	})
}

// newClient starts a broker and returns it with a client signing with accessKey and the
// URL of its queue.
func newClient(t testing.TB) (*broker, *sqs.Client, *string) {
	b := newBroker(t)
	return b, b.client(accessKey), aws.String(b.queueURL)
}

// drainConsumes forgets the consumes signalled so far.
func (b *broker) drainConsumes() {
	for {
		select {
		case <-b.consumes:
		default:
			return
		}
	}
}
