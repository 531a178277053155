// Package fronttest holds the test doubles the node's HTTP front ends (router/httpapi and
// router/sqsapi) share in their tests: a fake node that records what it is handed, a real
// node wrapped so that a test fails when a handler hands it a value no valid request
// carries, a node over in-memory logs, and a response writer whose client is gone.
//
// It is internal: only the front ends' tests use it, and it is not API.
package fronttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// FakeNode answers every call with Err (Consume with Msgs, TopicStatus with Status), and
// records the calls, one line each ("Ack orders 0:1:2"). It has every method either front
// end's Node interface asks for. Safe for concurrent use; read its fields once the calls
// are done.
type FakeNode struct {
	mu        sync.Mutex
	Err       error
	Msgs      []router.Message
	Status    []router.PartitionStatus
	OnConsume func(ctx context.Context) // run inside Consume
	Calls     []string
	Released  []string // the handles Release was handed, as text
	Nacked    []string // the handles Nack was handed, as text
	FitLimit  int      // FitResponse's last limit
	FitSizes  []int    // what FitResponse's last size answered for each message
	FitKeep   int      // FitResponse keeps this many (0: all)
}

func (f *FakeNode) record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, fmt.Sprintf(format, args...))
}

func (f *FakeNode) Consume(ctx context.Context, topic string, opts router.ConsumeOptions) ([]router.Message, error) {
	f.record("Consume %s %+v", topic, opts)
	if f.OnConsume != nil {
		f.OnConsume(ctx)
	}
	return f.Msgs, f.Err
}

func (f *FakeNode) Replay(ctx context.Context, topic string, partition int32, offset int64, limit int) ([]router.Message, error) {
	f.record("Replay %s %d %d %d", topic, partition, offset, limit)
	return f.Msgs, f.Err
}

func (f *FakeNode) FitResponse(msgs []router.Message, size func(*router.Message) int, limit int) []router.Message {
	f.FitLimit = limit
	f.FitSizes = f.FitSizes[:0]
	for i := range msgs {
		f.FitSizes = append(f.FitSizes, size(&msgs[i]))
	}
	if f.FitKeep > 0 {
		return msgs[:f.FitKeep]
	}
	return msgs
}

func (f *FakeNode) Ack(ctx context.Context, topic string, handle router.Handle) error {
	f.record("Ack %s %s", topic, handle)
	return f.Err
}

func (f *FakeNode) AckBatch(ctx context.Context, topic string, handles []router.Handle) []error {
	f.record("AckBatch %s %v", topic, handles)
	errs := make([]error, len(handles))
	for i := range errs {
		errs[i] = f.Err
	}
	return errs
}

func (f *FakeNode) Extend(ctx context.Context, topic string, handle router.Handle, d time.Duration) (time.Time, error) {
	f.record("Extend %s %s %v", topic, handle, d)
	return time.Unix(100, 0), f.Err
}

func (f *FakeNode) Nack(ctx context.Context, topic string, handle router.Handle, delay time.Duration) error {
	f.record("Nack %s %s %v", topic, handle, delay)
	return f.gave(&f.Nacked, handle)
}

func (f *FakeNode) Release(ctx context.Context, topic string, handle router.Handle) error {
	f.record("Release %s %s", topic, handle)
	return f.gave(&f.Released, handle)
}

// gave notes handle in list, and answers Err.
func (f *FakeNode) gave(list *[]string, handle router.Handle) error {
	f.mu.Lock()
	*list = append(*list, handle.String())
	f.mu.Unlock()
	return f.Err
}

func (f *FakeNode) Reject(ctx context.Context, topic string, handle router.Handle) error {
	f.record("Reject %s %s", topic, handle)
	return f.Err
}

func (f *FakeNode) TopicStatus(topic string) ([]router.PartitionStatus, error) {
	f.record("TopicStatus %s", topic)
	return f.Status, f.Err
}

// LeasedMessages are n leased messages of topic, offsets 0 to n-1 of partition 0, each
// with the value "v<", attempt 1, the nonce offset+1, the expiry 9 s after the epoch and
// the timestamp sent.
func LeasedMessages(n int, topic string, sent time.Time) []router.Message {
	msgs := make([]router.Message, n)
	for i := range msgs {
		msgs[i] = router.Message{Topic: topic, Offset: int64(i), Value: []byte("v<"),
			Receipt: router.Handle{Offset: int64(i), Nonce: uint64(i + 1)}, Attempt: 1, Expiry: time.Unix(9, 0), Timestamp: sent}
	}
	return msgs
}

// JSONAnswer checks that rec is answered with contentType and a body of one JSON object,
// and returns the object.
func JSONAnswer(t testing.TB, rec *httptest.ResponseRecorder, contentType string) map[string]any {
	if got := rec.Header().Get("Content-Type"); got != contentType {
		t.Fatalf("status %d with Content-Type %q", rec.Code, got)
	}
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("status %d: a body that is not a JSON object: %v: %q", rec.Code, err, rec.Body.String())
	}
	return v
}

// FailingWriter is a ResponseWriter whose client is gone: every Write fails.
type FailingWriter struct{ *httptest.ResponseRecorder }

func (FailingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// Env is a node over in-memory logs and a memory file system, with the topic "orders" of
// one partition, 0, routed to it.
type Env struct {
	Logs   *routertest.MemLogs
	Routes *routertest.Routes
	Node   *router.Node
}

// NewEnv starts an Env's node, with cfg applied to its config, and closes it when t ends.
func NewEnv(t testing.TB, cfg ...func(*router.Config)) Env {
	t.Helper()
	e := Env{Logs: &routertest.MemLogs{}, Routes: &routertest.Routes{}}
	e.Routes.Set("orders", 0)
	e.Logs.Log("orders", 0)
	c := router.Config{Logs: e.Logs, Routes: e.Routes, Dir: "/state", FS: crashfs.New()}
	for _, f := range cfg {
		f(&c)
	}
	node, err := router.New(c)
	require.NoError(t, err)
	t.Cleanup(func() { node.Close() })
	e.Node = node
	return e
}

// CheckedNode passes every call to a real node after checking that the handler hands it
// only what it validated: a topic Topic allows, a well-formed handle, consume options
// Options allows, a batch of 1 to MaxBatch handles (each well-formed, with CheckBatchHandles), an extension of MinExtend to
// router.MaxVisibility and a nack delay of 0 to router.MaxDelay. Anything else fails T.
type CheckedNode struct {
	*router.Node
	T         testing.TB
	Topic     func(topic string) bool
	Options   func(router.ConsumeOptions) bool
	MaxBatch  int
	MinExtend time.Duration
	// CheckBatchHandles: a batch's handles must be well-formed too (a front end that does not
	// check them leaves the node to answer each).
	CheckBatchHandles bool
}

func (c *CheckedNode) topic(topic string) {
	if topic == "" || len(topic) > router.MaxTopicLength || !utf8.ValidString(topic) || !c.Topic(topic) {
		c.T.Fatalf("topic %q reached the node", topic)
	}
}

func (c *CheckedNode) handle(topic string, handle router.Handle) {
	c.topic(topic)
	if err := handle.Check(); err != nil {
		c.T.Fatalf("handle %+v reached the node", handle)
	}
}

func (c *CheckedNode) Consume(ctx context.Context, topic string, opts router.ConsumeOptions) ([]router.Message, error) {
	c.topic(topic)
	if opts.Max < 1 || opts.Max > router.MaxBatch || opts.Wait < 0 || opts.Visibility < 0 || opts.Visibility > router.MaxVisibility ||
		opts.Partition < 0 || (!opts.Pinned && opts.Partition != 0) || !c.Options(opts) {
		c.T.Fatalf("options %+v reached the node", opts)
	}
	return c.Node.Consume(ctx, topic, opts)
}

func (c *CheckedNode) Replay(ctx context.Context, topic string, partition int32, offset int64, limit int) ([]router.Message, error) {
	c.topic(topic)
	if partition < 0 || offset < 0 || limit < 1 || limit > router.MaxBatch {
		c.T.Fatalf("replay %d %d %d reached the node", partition, offset, limit)
	}
	return c.Node.Replay(ctx, topic, partition, offset, limit)
}

func (c *CheckedNode) Ack(ctx context.Context, topic string, handle router.Handle) error {
	c.handle(topic, handle)
	return c.Node.Ack(ctx, topic, handle)
}

func (c *CheckedNode) AckBatch(ctx context.Context, topic string, handles []router.Handle) []error {
	c.topic(topic)
	if len(handles) < 1 || len(handles) > c.MaxBatch {
		c.T.Fatalf("a batch of %d reached the node", len(handles))
	}
	for _, h := range handles {
		if c.CheckBatchHandles {
			c.handle(topic, h)
		}
	}
	return c.Node.AckBatch(ctx, topic, handles)
}

func (c *CheckedNode) Extend(ctx context.Context, topic string, handle router.Handle, d time.Duration) (time.Time, error) {
	c.handle(topic, handle)
	if d < c.MinExtend || d > router.MaxVisibility {
		c.T.Fatalf("extend by %v reached the node", d)
	}
	return c.Node.Extend(ctx, topic, handle, d)
}

func (c *CheckedNode) Nack(ctx context.Context, topic string, handle router.Handle, delay time.Duration) error {
	c.handle(topic, handle)
	if delay < 0 || delay > router.MaxDelay {
		c.T.Fatalf("nack delay %v reached the node", delay)
	}
	return c.Node.Nack(ctx, topic, handle, delay)
}

func (c *CheckedNode) Release(ctx context.Context, topic string, handle router.Handle) error {
	c.handle(topic, handle)
	return c.Node.Release(ctx, topic, handle)
}

func (c *CheckedNode) Reject(ctx context.Context, topic string, handle router.Handle) error {
	c.handle(topic, handle)
	return c.Node.Reject(ctx, topic, handle)
}

func (c *CheckedNode) Purge(ctx context.Context, topic string) (int64, error) {
	c.topic(topic)
	return c.Node.Purge(ctx, topic)
}
