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
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
	"narad.dev/consume/router/sqsapi"
)

// The access keys the broker knows (Config.Credentials), and their secrets: accessKey may
// do anything, readOnlyKey anything but send (Config.Authorize refuses its sends).
const (
	accessKey    = "AKIDSQSAPITEST"
	secretKey    = "secret"
	readOnlyKey  = "AKIDSQSAPIREADONLY"
	readOnlySecr = "read-only secret"
)

// credentials is the broker's Config.Credentials.
func credentials(id string) (string, bool) {
	switch id {
	case accessKey:
		return secretKey, true
	case readOnlyKey:
		return readOnlySecr, true
	}
	return "", false
}

// broker is a node behind an sqsapi handler on 127.0.0.1, mounted at /sqs as doc.go's
// example mounts it, whose queues are kept in a MemQueueStore (a queue's topic is its
// name, of one partition; deleting a queue deletes its topic; it has no PurgeTopic, so the
// node purges: router.Node.Purge), with queue "orders" created at its start, a ProduceRecord
// that appends to the node's log (message attributes as headers), signatures checked with
// credentials, and an Authorize that refuses readOnlyKey's sends.
type broker struct {
	t        testing.TB
	logs     *routertest.MemLogs
	routes   *routertest.Routes
	store    *sqsapi.MemQueueStore
	node     *router.Node
	srv      *httptest.Server
	queueURL string

	consumes chan struct{} // one value each time the handler starts a consume
}

func newBroker(t testing.TB, opts ...func(*sqsapi.Config)) *broker {
	t.Helper()
	b := &broker{t: t, logs: &routertest.MemLogs{}, routes: &routertest.Routes{}, consumes: make(chan struct{}, 64)}
	node, err := router.New(router.Config{Logs: b.logs, Routes: b.routes, Dir: "/state", FS: crashfs.New(),
		NotBefore: sqsapi.NotBefore, // DelaySeconds
		// A queue's topic is configured by its record: a FIFO queue's is ordered.
		Topic: func(topic string) router.TopicConfig {
			rec, _ := b.store.Queue(topic)
			return sqsapi.TopicConfig(rec)
		}})
	require.NoError(t, err)
	b.node = node
	b.store = &sqsapi.MemQueueStore{
		CreateTopic: func(_ context.Context, queue, _ string) (string, error) {
			b.logs.Log(queue, 0)
			b.routes.Set(queue, 0)
			return queue, nil
		},
		DeleteTopic: func(_ context.Context, topic string) error {
			b.routes.Delete(topic)
			return node.DeleteTopic(topic)
		},
	}
	var api *sqsapi.Handler
	mux := http.NewServeMux()
	b.srv = httptest.NewUnstartedServer(mux)
	b.srv.Start()
	base := b.srv.URL + "/sqs"
	cfg := sqsapi.Config{
		Store:         b.store,
		BaseURL:       base,
		ProduceRecord: b.produce,
		Credentials:   credentials,
		Region:        "us-east-1",
		Authorize:     authorize,
	}
	for _, o := range opts {
		o(&cfg)
	}
	api, err = sqsapi.New(&signalling{Node: node, consumes: b.consumes}, cfg)
	require.NoError(t, err)
	mux.Handle("/sqs", api)
	mux.Handle("/sqs/", api) // the SDKs that post to the queue's URL
	t.Cleanup(func() {
		b.srv.Close()
		node.Close()
	})
	created, err := b.client(accessKey).CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("orders")})
	require.NoError(t, err)
	b.queueURL = aws.ToString(created.QueueUrl)
	require.Equal(t, base+"/orders", b.queueURL)
	return b
}

// produce is the broker's Config.ProduceRecord: append to the log, tell the node.
func (b *broker) produce(_ context.Context, topic string, rec router.Record) (int32, int64, error) {
	if _, _, ok := b.routes.Partitions(topic); !ok {
		return 0, 0, router.ErrUnknownTopic
	}
	rec.Timestamp = time.Now()
	off := b.logs.Log(topic, 0).AppendRecord(rec)
	b.node.Appended(topic, 0, off+1)
	return 0, off, nil
}

// authorize is the broker's Config.Authorize: the handler has checked the signature, and
// readOnlyKey may not send.
func authorize(_ *http.Request, req sqsapi.Request) error {
	if req.AccessKeyID == readOnlyKey && strings.HasPrefix(req.Action, "SendMessage") {
		return errors.New(readOnlyKey + " may not send")
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

// client is an SDK client of the broker, signing with key and its secret, on an HTTP client
// of its own whose connections are closed at the test's end.
func (b *broker) client(key string, opts ...func(*sqs.Options)) *sqs.Client {
	secret, _ := credentials(key)
	return b.clientWith(key, secret, opts...)
}

// clientWith is client signing with key and secret.
func (b *broker) clientWith(key, secret string, opts ...func(*sqs.Options)) *sqs.Client {
	tr := &http.Transport{}
	b.t.Cleanup(tr.CloseIdleConnections)
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(b.srv.URL + "/sqs"),
		Credentials:  aws.NewCredentialsCache(awscreds.NewStaticCredentialsProvider(key, secret, "")),
		HTTPClient:   &http.Client{Transport: tr},
	}, opts...)
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
