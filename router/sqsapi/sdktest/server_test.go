package sdktest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// The server's tests build cmd/sqsd and run it as a user would: a process over a data
// directory, driven by the SDK over loopback, stopped with SIGTERM or killed with SIGKILL
// and started again over the same directory.

// serverBuild is cmd/sqsd built once for the tests that run it, in a directory TestMain
// removes.
var serverBuild struct {
	once sync.Once
	dir  string
	err  error
}

// buildServer builds cmd/sqsd (once) and returns the binary's path.
func buildServer(t *testing.T) string {
	t.Helper()
	serverBuild.once.Do(func() {
		if serverBuild.dir, serverBuild.err = os.MkdirTemp("", "sqsd-build"); serverBuild.err != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(serverBuild.dir, "sqsd"), "narad.dev/consume/cmd/sqsd").CombinedOutput()
		if err != nil {
			serverBuild.err = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, serverBuild.err)
	return filepath.Join(serverBuild.dir, "sqsd")
}

// A serverProc is one run of the server.
type serverProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	mu     sync.Mutex
	log    strings.Builder // its standard error
	stderr sync.WaitGroup  // the goroutine copying it
	done   bool
}

var servingLine = regexp.MustCompile(`msg="sqsd: serving" url=(\S+)`)

// startServer runs bin over dir with args and waits (up to a deadline) for it to say it
// serves.
func startServer(t *testing.T, bin, dir string, args ...string) *serverProc {
	t.Helper()
	p := &serverProc{t: t, cmd: exec.Command(bin, append([]string{"-dir", dir, "-addr", "127.0.0.1:0"}, args...)...)}
	p.cmd.Stdout = io.Discard
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		if !p.done {
			p.cmd.Process.Kill()
			p.wait()
		}
	})
	serving := make(chan string, 1)
	p.stderr.Add(1)
	go func() {
		defer p.stderr.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				serving <- m[1]
			}
		}
		close(serving)
	}()
	select {
	case u, ok := <-serving:
		require.True(t, ok, "the server ended before serving:\n%s", p.output())
		p.url = u
	case <-time.After(60 * time.Second):
		t.Fatalf("the server did not start within 60 s:\n%s", p.output())
	}
	return p
}

func (p *serverProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *serverProc) wait() error {
	p.stderr.Wait() // the copy ends when the process's stderr closes
	err := p.cmd.Wait()
	p.done = true
	return err
}

// stop sends SIGTERM and checks the server stopped gracefully, every ack on disk.
func (p *serverProc) stop() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(p.t, p.wait(), "the server's log:\n%s", p.output())
	require.Contains(p.t, p.output(), "every ack is on disk")
}

// kill kills the server with SIGKILL.
func (p *serverProc) kill() {
	require.NoError(p.t, p.cmd.Process.Kill())
	p.wait()
}

// client is an SDK client of the server, signing with the test's credentials.
func (p *serverProc) client() *sqs.Client {
	tr := &http.Transport{}
	p.t.Cleanup(tr.CloseIdleConnections)
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(p.url),
		Credentials:  aws.NewCredentialsCache(awscreds.NewStaticCredentialsProvider(accessKey, secretKey, "")),
		HTTPClient:   &http.Client{Transport: tr},
	})
}

// writeCredentials writes the test's key into a credentials file in dir.
func writeCredentials(t *testing.T, dir string) string {
	path := filepath.Join(dir, "creds")
	require.NoError(t, os.WriteFile(path, []byte("# test\n"+accessKey+" "+secretKey+"\n"), 0o600))
	return path
}

// receiveAll receives (and deletes, when del is set) from queue until want says it has
// everything, or fails at the deadline; it returns every body received, in order.
func receiveAll(t *testing.T, ctx context.Context, c *sqs.Client, queue string, del bool, want func(bodies []string) bool) []string {
	t.Helper()
	var bodies []string
	deadline := time.Now().Add(60 * time.Second)
	for !want(bodies) {
		require.True(t, time.Now().Before(deadline), "received %d messages, not all wanted", len(bodies))
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}})
		require.NoError(t, err)
		for _, m := range out.Messages {
			bodies = append(bodies, *m.Body)
			if del {
				_, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queue, ReceiptHandle: m.ReceiptHandle})
				require.NoError(t, err)
			}
		}
	}
	return bodies
}

// TestServerRestart: queues, their attributes and their unacked messages survive a stop
// and a start; deleted messages do not come back.
func TestServerRestart(t *testing.T) {
	bin := buildServer(t)
	dir := t.TempDir()
	creds := writeCredentials(t, dir)
	ctx := context.Background()

	p := startServer(t, bin, filepath.Join(dir, "data"), "-credentials", creds, "-partitions", "2")
	c := p.client()
	created, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs"),
		Attributes: map[string]string{"VisibilityTimeout": "600"}, Tags: map[string]string{"team": "a"}})
	require.NoError(t, err)
	q := *created.QueueUrl
	for i := range 10 {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String(fmt.Sprint("m", i)),
			MessageAttributes: map[string]types.MessageAttributeValue{"n": {DataType: aws.String("Number"), StringValue: aws.String("1.5")}}})
		require.NoError(t, err)
	}
	// Receive all ten, leased for 600 s; delete four.
	var handles []string
	var bodies []string
	deadline := time.Now().Add(30 * time.Second)
	for len(bodies) < 10 {
		require.True(t, time.Now().Before(deadline))
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		require.NoError(t, err)
		for _, m := range out.Messages {
			bodies, handles = append(bodies, *m.Body), append(handles, *m.ReceiptHandle)
		}
	}
	deleted := map[string]bool{}
	for i := range 4 {
		_, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: &handles[i]})
		require.NoError(t, err)
		deleted[bodies[i]] = true
	}
	p.stop()

	p = startServer(t, bin, filepath.Join(dir, "data"), "-credentials", creds)
	c = p.client()
	list, err := c.ListQueues(ctx, &sqs.ListQueuesInput{})
	require.NoError(t, err)
	require.Len(t, list.QueueUrls, 1)
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &q, AttributeNames: []types.QueueAttributeName{"All"}})
	require.NoError(t, err)
	require.Equal(t, "600", attrs.Attributes["VisibilityTimeout"])
	tags, err := c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &q})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"team": "a"}, tags.Tags)

	depth, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &q,
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})
	require.NoError(t, err)
	require.Equal(t, "6", depth.Attributes["ApproximateNumberOfMessages"], "counted before any receive")

	// The six unacked come back (their leases were the stopped process's), with their
	// attributes; the four deleted do not.
	got := receiveAll(t, ctx, c, q, true, func(b []string) bool { return len(b) >= 6 })
	require.Len(t, got, 6)
	for _, b := range got {
		require.False(t, deleted[b], "deleted message %s delivered again", b)
	}
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Empty(t, out.Messages)
	p.stop()
}

// TestServerKill9: a server killed with SIGKILL while messages are sent, received and
// deleted loses no message whose send succeeded, and delivers none whose delete succeeded
// again.
func TestServerKill9(t *testing.T) {
	bin := buildServer(t)
	dir := t.TempDir()
	creds := writeCredentials(t, dir)
	data := filepath.Join(dir, "data")
	ctx := context.Background()

	p := startServer(t, bin, data, "-credentials", creds, "-fsync=false")
	c := p.client()
	created, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work")})
	require.NoError(t, err)
	q := *created.QueueUrl

	var mu sync.Mutex
	sent, deleted := map[string]bool{}, map[string]bool{}
	count := func(m map[string]bool) int {
		mu.Lock()
		defer mu.Unlock()
		return len(m)
	}
	reached := make(chan struct{}) // closed once 300 deletes succeeded
	var wg sync.WaitGroup
	wg.Go(func() { // a sender, until the kill
		for i := 0; ; i += 10 {
			var entries []types.SendMessageBatchRequestEntry
			for j := range 10 {
				entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(fmt.Sprint("m", i+j))})
			}
			out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &q, Entries: entries})
			if err != nil {
				return
			}
			mu.Lock()
			for _, e := range out.Successful {
				sent[*entries[int((*e.Id)[0]-'0')].MessageBody] = true
			}
			mu.Unlock()
		}
	})
	wg.Go(func() { // a consumer that deletes what it receives, until the kill
		for {
			out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil {
				return
			}
			var entries []types.DeleteMessageBatchRequestEntry
			for i, m := range out.Messages {
				entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
			}
			if len(entries) == 0 {
				continue
			}
			del, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &q, Entries: entries})
			if err != nil {
				return
			}
			mu.Lock()
			before := len(deleted)
			for _, e := range del.Successful {
				deleted[*out.Messages[int((*e.Id)[0]-'0')].Body] = true
			}
			if before < 300 && len(deleted) >= 300 {
				close(reached)
			}
			mu.Unlock()
		}
	})
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("%d deleted within 60 s", count(deleted))
	}
	p.kill() // in the middle of sends and deletes
	wg.Wait()

	mu.Lock()
	wantSent, wantDeleted := sent, deleted
	mu.Unlock()
	t.Logf("%d sent and %d deleted before the kill", len(wantSent), len(wantDeleted))

	p = startServer(t, bin, data, "-credentials", creds)
	c = p.client()
	left := 0
	for b := range wantSent {
		if !wantDeleted[b] {
			left++
		}
	}
	seen := map[string]bool{}
	receiveAll(t, ctx, c, q, true, func(bodies []string) bool {
		for _, b := range bodies {
			require.False(t, wantDeleted[b], "message %s, deleted before the kill, delivered again", b)
			if wantSent[b] {
				seen[b] = true
			}
		}
		return len(seen) == left
	})
	p.stop()
}

// TestServerRedrive: in the server, a message received maxReceiveCount times without a
// delete lands in the dead-letter queue with its attributes, and a move task brings it
// back; the RedrivePolicy survives a restart.
func TestServerRedrive(t *testing.T) {
	bin := buildServer(t)
	dir := t.TempDir()
	creds := writeCredentials(t, dir)
	ctx := context.Background()
	p := startServer(t, bin, filepath.Join(dir, "data"), "-credentials", creds, "-partitions", "2")
	c := p.client()

	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs-dlq")})
	require.NoError(t, err)
	created, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	require.NoError(t, err)
	q, d := *created.QueueUrl, *dlq.QueueUrl
	dlqAttrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &d, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	require.NoError(t, err)
	dlqArn := dlqAttrs.Attributes["QueueArn"]
	// Set on a queue that exists: the node takes the new MaxDeliveries at once.
	policy := `{"maxReceiveCount":"2","deadLetterTargetArn":"` + dlqArn + `"}`
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &q, Attributes: map[string]string{"RedrivePolicy": policy}})
	require.NoError(t, err)

	sources, err := c.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: &d})
	require.NoError(t, err)
	require.Equal(t, []string{q}, sources.QueueUrls)

	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String("poison"),
		MessageAttributes: map[string]types.MessageAttributeValue{"n": {DataType: aws.String("Number.int"), StringValue: aws.String("7")}}})
	require.NoError(t, err)
	receiveOne := func(queue string) types.Message {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			require.True(t, time.Now().Before(deadline), "nothing received from %s", queue)
			out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queue, WaitTimeSeconds: 2,
				MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}})
			require.NoError(t, err)
			if len(out.Messages) == 1 {
				return out.Messages[0]
			}
		}
	}
	giveUp := func(queue string, m types.Message) {
		t.Helper()
		_, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &queue, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
		require.NoError(t, err)
	}
	for i := range 2 {
		m := receiveOne(q)
		require.Equal(t, fmt.Sprint(i+1), m.Attributes["ApproximateReceiveCount"])
		giveUp(q, m)
	}
	dead := receiveOne(d)
	require.Equal(t, "poison", *dead.Body)
	require.Equal(t, "Number.int", *dead.MessageAttributes["n"].DataType)
	require.Equal(t, *sent.MD5OfMessageAttributes, *dead.MD5OfMessageAttributes)
	giveUp(d, dead)

	task, err := c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn})
	require.NoError(t, err)
	require.NotEmpty(t, *task.TaskHandle)
	back := receiveOne(q) // the long-poll ends when the task moves it
	require.Equal(t, "poison", *back.Body)
	require.Equal(t, "1", back.Attributes["ApproximateReceiveCount"], "a moved message is received afresh")
	require.Equal(t, *sent.MD5OfMessageAttributes, *back.MD5OfMessageAttributes)
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: &dlqArn})
		require.NoError(t, err)
		require.Len(t, list.Results, 1)
		if *list.Results[0].Status == "COMPLETED" {
			require.Equal(t, int64(1), list.Results[0].ApproximateNumberOfMessagesMoved)
			break
		}
		require.True(t, time.Now().Before(deadline), "the task is %s", *list.Results[0].Status)
		// A long-poll of the empty dead-letter queue paces the next look.
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &d, WaitTimeSeconds: 1})
		require.NoError(t, err)
		require.Empty(t, out.Messages)
	}
	_, err = c.CancelMessageMoveTask(ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: task.TaskHandle})
	var notFound *types.ResourceNotFoundException
	require.ErrorAs(t, err, &notFound, "a completed task cannot be cancelled")
	p.stop()

	p = startServer(t, bin, filepath.Join(dir, "data"), "-credentials", creds)
	c = p.client()
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &q, AttributeNames: []types.QueueAttributeName{"RedrivePolicy"}})
	require.NoError(t, err)
	require.Equal(t, `{"deadLetterTargetArn":"`+dlqArn+`","maxReceiveCount":2}`, attrs.Attributes["RedrivePolicy"])
	p.stop()
}

// TestServerBoto3Query: the server answers boto3 over SQS's query protocol as the broker of
// TestBoto3Query does (see there for the boto3 it needs), and moves a message received
// maxReceiveCount times to its dead-letter queue.
func TestServerBoto3Query(t *testing.T) {
	bin := buildServer(t)
	dir := t.TempDir()
	p := startServer(t, bin, filepath.Join(dir, "data"), "-credentials", writeCredentials(t, dir), "-partitions", "1")
	_, err := p.client().CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("orders")})
	require.NoError(t, err)
	runBoto3Query(t, p.url, "redrive")
	p.stop()
}

// TestServerFIFODeduplicationKill9: a send to a FIFO queue retried after the server was
// killed (SIGKILL) and started again, within the 5 minutes of SQS's deduplication interval,
// is answered with the original's MessageId and SequenceNumber, and the message is
// delivered once.
func TestServerFIFODeduplicationKill9(t *testing.T) {
	bin := buildServer(t)
	dir := t.TempDir()
	creds := writeCredentials(t, dir)
	ctx := context.Background()

	p := startServer(t, bin, filepath.Join(dir, "data"), "-credentials", creds, "-partitions", "2")
	c := p.client()
	created, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo"),
		Attributes: map[string]string{"FifoQueue": "true"}})
	require.NoError(t, err)
	q := *created.QueueUrl
	send := func(c *sqs.Client, i int) *sqs.SendMessageOutput {
		t.Helper()
		out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String(fmt.Sprint("m", i)),
			MessageGroupId: aws.String(fmt.Sprint("g", i)), MessageDeduplicationId: aws.String(fmt.Sprint("d", i))})
		require.NoError(t, err)
		return out
	}
	var first []*sqs.SendMessageOutput
	for i := range 6 {
		first = append(first, send(c, i))
	}
	p.kill()

	p = startServer(t, bin, filepath.Join(dir, "data"), "-credentials", creds)
	c = p.client()
	for i := range 6 {
		again := send(c, i)
		require.Equal(t, aws.ToString(first[i].MessageId), aws.ToString(again.MessageId), "d%d", i)
		require.Equal(t, aws.ToString(first[i].SequenceNumber), aws.ToString(again.SequenceNumber), "d%d", i)
	}
	got := receiveAll(t, ctx, c, q, true, func(b []string) bool { return len(b) >= 6 })
	require.ElementsMatch(t, []string{"m0", "m1", "m2", "m3", "m4", "m5"}, got, "each once")
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Empty(t, out.Messages)
	p.stop()
}
