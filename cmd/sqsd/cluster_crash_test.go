package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runAsServer, set to 1 in a process's environment, makes the test binary the server
// (TestMain calls main).
const runAsServer = "SQSD_TEST_RUN_AS_SERVER"

// A serverProcess is the server run as a process of its own (the test binary, as the
// server), which a test may kill.
type serverProcess struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	mu     sync.Mutex
	log    strings.Builder
	copied sync.WaitGroup // the goroutine copying its standard error
	ended  bool
}

var servingLine = regexp.MustCompile(`msg="sqsd: serving" url=(\S+)`)

// startProcess runs the server with args and waits for it to say it serves (the start of a
// process on a busy machine has no deadline of ours: the test's own bounds it).
func startProcess(t *testing.T, args ...string) *serverProcess {
	t.Helper()
	p := &serverProcess{t: t, cmd: exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0"}, args...)...)}
	p.cmd.Env = append(os.Environ(), runAsServer+"=1")
	p.cmd.Stdout = io.Discard
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		if !p.ended {
			p.cmd.Process.Kill()
			p.wait()
		}
	})
	serving := make(chan string, 1)
	p.copied.Go(func() {
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
	})
	u, ok := <-serving
	require.True(t, ok, "the server ended before serving:\n%s", p.output())
	p.url = u
	return p
}

func (p *serverProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *serverProcess) wait() error {
	p.copied.Wait()
	err := p.cmd.Wait()
	p.ended = true
	return err
}

// kill kills the server with SIGKILL.
func (p *serverProcess) kill() {
	require.NoError(p.t, p.cmd.Process.Kill())
	p.wait()
}

// stop stops it as SIGTERM does, and checks it stopped cleanly.
func (p *serverProcess) stop() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(p.t, p.wait(), "the server's log:\n%s", p.output())
	require.Contains(p.t, p.output(), "every ack is on disk")
}

// sqsCall sends action with body (JSON) to url with client c and decodes a 200 answer into
// out; it returns an error for any other answer or none.
func sqsCall(c *http.Client, url, action, body string, out any) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", action, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// TestClusterKill9: three server processes, one queue with partitions on each. While
// clients send and delete through every node, the owner of a third of the partitions is
// killed with SIGKILL; the clients go on through the other two (calls that reach the dead
// node's partitions fail, and are not counted), then it starts again on its directory. No
// message whose send succeeded is lost, and none whose delete succeeded is delivered again:
// a delete whose handle named a lease the killed node held before its kill is refused as an
// expired handle (its restart forgot the lease), never answered success. The killed node was
// also a gateway: the messages it read ahead at the other two, and those its receives in
// flight leased there (replies never sent), wait out their leases at their owners (as a
// consumer's crash would strand them), so the queue's visibility timeout is one the drain
// can wait for.
func TestClusterKill9(t *testing.T) {
	const lease = 15 * time.Second // the queue's visibility timeout
	// stalled fails the test when nothing has moved for several leases: what a dead node
	// stranded is back by then, so the cluster lost something (a bound, not a wait: the
	// loops below end on progress).
	stalled := func(since time.Time, format string, args ...any) {
		if time.Since(since) > 4*lease {
			t.Fatalf("no progress for %v: "+format, append([]any{time.Since(since).Round(time.Second)}, args...)...)
		}
	}
	root := t.TempDir()
	file, cf := writeClusterFile(t, root, 3)
	args := func(i int) []string {
		return []string{"-dir", filepath.Join(root, cf.Nodes[i].ID), "-cluster", file, "-node", cf.Nodes[i].ID,
			"-no-auth", "-partitions", "6", "-fsync=false"}
	}
	procs := make([]*serverProcess, 3)
	for i := range procs {
		procs[i] = startProcess(t, args(i)...)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 60 * time.Second} // no call may hang
	urls := make([]string, 3)
	var urlsMu sync.Mutex
	url := func(i int) string {
		urlsMu.Lock()
		defer urlsMu.Unlock()
		return urls[i]
	}
	for i, p := range procs {
		urls[i] = p.url
	}
	// The queue's visibility timeout, not the receives': a receive that names none is served
	// from what its node read ahead at the owners, which the kill strands too.
	require.NoError(t, sqsCall(c, url(1), "CreateQueue", `{"QueueName":"work","Attributes":{"VisibilityTimeout":"`+strconv.Itoa(int(lease/time.Second))+`"}}`, nil))
	q := func(i int) string { return `"QueueUrl":"` + url(i) + `/work"` }

	var mu sync.Mutex
	// A delete that failed may have been applied all the same (its owner killed after its
	// disk had it, before it answered): such a message may or may not come back.
	sent, deleted, uncertain := map[string]bool{}, map[string]bool{}, map[string]bool{}
	count := func(m map[string]bool) int {
		mu.Lock()
		defer mu.Unlock()
		return len(m)
	}
	var failedSends, failedDeletes int
	stop := make(chan struct{})
	// The sender keeps at most maxBacklog messages undeleted: it waits for deletes.
	const maxBacklog = 300
	progress := sync.NewCond(&mu)
	stopped := false
	var wg sync.WaitGroup
	wg.Go(func() { // a sender through every node in turn
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			for !stopped && len(sent)-len(deleted)-len(uncertain) >= maxBacklog {
				progress.Wait()
			}
			mu.Unlock()
			node := i % 3
			var entries []string
			for j := range 10 {
				entries = append(entries, fmt.Sprintf(`{"Id":"%d","MessageBody":"m%d-%d"}`, j, i, j))
			}
			var out struct{ Successful []struct{ Id string } }
			if err := sqsCall(c, url(node), "SendMessageBatch", `{`+q(node)+`,"Entries":[`+strings.Join(entries, ",")+`]}`, &out); err != nil {
				mu.Lock()
				failedSends++
				mu.Unlock()
				continue
			}
			mu.Lock()
			for _, e := range out.Successful {
				sent[fmt.Sprintf("m%d-%s", i, e.Id)] = true
			}
			mu.Unlock()
		}
	})
	wg.Go(func() { // a consumer receiving through one node and deleting through another
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var out struct{ Messages []sqsMessage }
			if err := sqsCall(c, url(i%3), "ReceiveMessage", `{`+q(i%3)+`,"MaxNumberOfMessages":10,"WaitTimeSeconds":1}`, &out); err != nil {
				continue
			}
			for _, m := range out.Messages {
				// Through the next node, or, if it cannot be reached, the one after (as a
				// client behind a balancer would): what fails then is the cluster's answer.
				err := sqsCall(c, url((i+1)%3), "DeleteMessage", `{`+q((i+1)%3)+`,"ReceiptHandle":"`+m.ReceiptHandle+`"}`, nil)
				if _, unreachable := errors.AsType[*neturl.Error](err); unreachable {
					err = sqsCall(c, url((i+2)%3), "DeleteMessage", `{`+q((i+2)%3)+`,"ReceiptHandle":"`+m.ReceiptHandle+`"}`, nil)
				}
				if err != nil {
					mu.Lock()
					failedDeletes++
					uncertain[m.Body] = true
					progress.Broadcast()
					mu.Unlock()
					continue
				}
				mu.Lock()
				deleted[m.Body] = true
				progress.Broadcast()
				mu.Unlock()
			}
		}
	})
	// Progress is counted, not timed: the kill comes after 200 deletes, the restart after
	// 200 more through the two nodes left.
	waitFor := func(n int) {
		for last, since := count(deleted), time.Now(); count(deleted) < n; {
			if d := count(deleted); d > last {
				last, since = d, time.Now()
			}
			stalled(since, "%d of %d deletes", last, n)
			var out struct{ Messages []sqsMessage }
			sqsCall(c, url(0), "ReceiveMessage", `{`+q(0)+`,"MaxNumberOfMessages":1,"WaitTimeSeconds":1,"VisibilityTimeout":1}`, &out)
		}
	}
	waitFor(200)
	procs[1].kill()
	waitFor(count(deleted) + 200)
	procs[1] = startProcess(t, args(1)...)
	urlsMu.Lock()
	urls[1] = procs[1].url
	urlsMu.Unlock()
	waitFor(count(deleted) + 50) // through every node again
	close(stop)
	mu.Lock()
	stopped = true
	progress.Broadcast()
	mu.Unlock()
	wg.Wait()

	mu.Lock()
	t.Logf("%d sent and %d deleted; %d sends and %d deletes failed", len(sent), len(deleted), failedSends, failedDeletes)
	require.NotZero(t, failedSends, "calls failed while the node was down")
	left := map[string]bool{}
	for b := range sent {
		if !deleted[b] && !uncertain[b] {
			left[b] = true
		}
	}
	mu.Unlock()

	// Drain through every node: each message sent and not deleted comes, none deleted does.
	seen, drain := map[string]bool{}, time.Now()
	for i, last, since := 0, 0, time.Now(); len(seen) < len(left); i++ {
		if len(seen) > last {
			last, since = len(seen), time.Now()
		}
		stalled(since, "%d of %d messages left received", len(seen), len(left))
		var out struct{ Messages []sqsMessage }
		require.NoError(t, sqsCall(c, url(i%3), "ReceiveMessage", `{`+q(i%3)+`,"MaxNumberOfMessages":10,"WaitTimeSeconds":1,"VisibilityTimeout":30}`, &out))
		for _, m := range out.Messages {
			require.False(t, deleted[m.Body], "message %s, whose delete succeeded, delivered again", m.Body)
			if left[m.Body] {
				seen[m.Body] = true
			}
			require.NoError(t, sqsCall(c, url((i+2)%3), "DeleteMessage", `{`+q((i+2)%3)+`,"ReceiptHandle":"`+m.ReceiptHandle+`"}`, nil))
		}
	}
	t.Logf("the %d messages left drained in %v", len(left), time.Since(drain).Round(time.Millisecond))
	for _, p := range procs {
		p.stop()
	}
}
