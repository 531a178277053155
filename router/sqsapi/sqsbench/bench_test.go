package sqsbench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"narad.dev/consume/internal/cputime"
)

// The credentials the clients sign with; cmd/sqsd checks them, GoAWS checks none.
const (
	accessKey = "AKIDSQSBENCH"
	secretKey = "bench-secret"
)

// body is every message's body: a small JSON document.
const body = `{"order":12345,"customer":"c-678","total":"99.90","items":3}`

// workers is how many clients run the workload at once, each with its own SDK client.
const workers = 4

// BenchmarkServers runs one workload against each server, in one run: b.N messages sent in
// SendMessage (batch=1) or SendMessageBatch of 10 (batch=10) calls, then received in
// ReceiveMessage calls of MaxNumberOfMessages 1 or 10 and deleted with DeleteMessage or
// DeleteMessageBatch, by 4 clients at once, over a new queue of each server. The servers:
// sqsd (cmd/sqsd as its README runs it: every send fsynced, every delete durable, signatures
// checked), sqsd-nofsync (-fsync=false: a send reaches the page cache, a delete is still
// durable), goaws (GoAWS 0.4.5, in memory). Reported: msgs/s (wall time of the whole
// workload), server-cpu-ns/msg (the server process's CPU time) and cpu-ns/msg (the server's
// and this process's, the SDK's clients included).
func BenchmarkServers(b *testing.B) {
	if _, err := procCPU(os.Getpid()); err != nil {
		b.Skipf("no /proc/<pid>/stat to read a server's CPU time from: %v", err)
	}
	bins := build(b)
	parent := b
	servers := []string{"sqsd", "sqsd-nofsync", "goaws"}
	if bins.baseline != "" {
		servers = []string{"sqsd-baseline", "sqsd", "sqsd-baseline-nofsync", "sqsd-nofsync", "goaws"}
	}
	for _, server := range servers {
		var p *proc // started by the first run that -bench selects
		for _, batch := range []int{1, 10} {
			b.Run(fmt.Sprintf("server=%s/batch=%d", server, batch), func(b *testing.B) {
				if p == nil {
					switch server {
					case "goaws":
						p = startGoAWS(b, parent.TempDir(), bins)
					default:
						bin := bins.sqsd
						if strings.HasPrefix(server, "sqsd-baseline") {
							bin = bins.baseline
						}
						p = startSqsd(b, server, parent.TempDir(), bin, !strings.HasSuffix(server, "-nofsync"))
					}
				}
				runWorkload(b, p, batch)
			})
		}
		if p != nil {
			p.stop(b)
		}
	}
}

// queues numbers the queues the runs create, so that each run has a new, empty one.
var queues atomic.Int64

func runWorkload(b *testing.B, p *proc, batch int) {
	ctx := context.Background()
	clients := make([]*sqs.Client, workers)
	for i := range clients {
		clients[i] = p.client(b)
	}
	name := fmt.Sprintf("bench-%d", queues.Add(1))
	created, err := createQueue(ctx, clients[0], name)
	if err != nil {
		b.Fatalf("%s: CreateQueue: %v", p.name, err)
	}
	q := created.QueueUrl
	n := b.N

	b.ResetTimer()
	start, cpu, serverCPU := time.Now(), cputime.Process(), p.cpu(b)
	// Send: the messages split among the clients, in calls of batch.
	var sent atomic.Int64
	err = each(clients, func(c *sqs.Client, w int) error {
		mine := n / workers
		if w < n%workers {
			mine++
		}
		for mine > 0 {
			k := min(batch, mine)
			if batch == 1 {
				if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String(body)}); err != nil {
					return err
				}
			} else {
				entries := make([]types.SendMessageBatchRequestEntry, k)
				for i := range entries {
					entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body)}
				}
				out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q, Entries: entries})
				if err != nil {
					return err
				}
				if len(out.Failed) > 0 {
					return fmt.Errorf("SendMessageBatch: %d failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
				}
			}
			sent.Add(int64(k))
			mine -= k
		}
		return nil
	})
	if err != nil {
		b.Fatalf("%s: send: %v", p.name, err)
	}
	// Receive and delete until every message is deleted. A receive that finds nothing while
	// messages are left finds them leased by the other clients, which delete them.
	var deleted atomic.Int64
	err = each(clients, func(c *sqs.Client, _ int) error {
		for deleted.Load() < int64(n) {
			out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: int32(batch)})
			if err != nil {
				return err
			}
			if len(out.Messages) == 0 {
				continue
			}
			if batch == 1 {
				for _, m := range out.Messages {
					if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q, ReceiptHandle: m.ReceiptHandle}); err != nil {
						return err
					}
				}
			} else {
				entries := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
				for i, m := range out.Messages {
					entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
				}
				del, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: q, Entries: entries})
				if err != nil {
					return err
				}
				if len(del.Failed) > 0 {
					return fmt.Errorf("DeleteMessageBatch: %d failed: %s", len(del.Failed), aws.ToString(del.Failed[0].Message))
				}
			}
			for _, m := range out.Messages {
				if aws.ToString(m.Body) != body {
					return fmt.Errorf("received %q", aws.ToString(m.Body))
				}
			}
			deleted.Add(int64(len(out.Messages)))
		}
		return nil
	})
	elapsed, used, serverUsed := time.Since(start), cputime.Process()-cpu, p.cpu(b)-serverCPU
	b.StopTimer()
	if err != nil {
		b.Fatalf("%s: receive and delete: %v", p.name, err)
	}
	if got := deleted.Load(); got != int64(n) || sent.Load() != int64(n) {
		b.Fatalf("%s: sent %d, deleted %d, of %d", p.name, sent.Load(), got, n)
	}
	// Nothing is left: no message was received twice and deleted once.
	attrs, err := clients[0].GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		b.Fatalf("%s: GetQueueAttributes: %v", p.name, err)
	}
	for k, v := range attrs.Attributes {
		if v != "0" {
			b.Fatalf("%s: %s is %s after the workload", p.name, k, v)
		}
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(serverUsed)/float64(n), "server-cpu-ns/msg")
	b.ReportMetric(float64(used+serverUsed)/float64(n), "cpu-ns/msg")
	b.ReportMetric(0, "ns/op") // the wall time is msgs/s's
}

// createQueue creates queue name, retrying while the server is still coming up (GoAWS says
// it listens just before it does): the SDK's retryer paces the attempts.
func createQueue(ctx context.Context, c *sqs.Client, name string) (*sqs.CreateQueueOutput, error) {
	var err error
	for range 5 {
		var out *sqs.CreateQueueOutput
		if out, err = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)}); err == nil {
			return out, nil
		}
		var op *net.OpError
		if !errors.As(err, &op) {
			return nil, err
		}
	}
	return nil, err
}

// each runs f once per client, at once, and returns the first error.
func each(clients []*sqs.Client, f func(c *sqs.Client, w int) error) error {
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { errs[i] = f(c, i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// binaries are the servers' executables, built once a process; baseline is cmd/sqsd of
// SQSBENCH_BASELINE's checkout ("" when unset).
type binaries struct{ dir, sqsd, goaws, baseline string }

var built struct {
	once sync.Once
	bins binaries
	err  error
}

// build builds cmd/sqsd and GoAWS into a directory of their own.
func build(b testing.TB) binaries {
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "sqsbench")
		if err != nil {
			built.err = err
			return
		}
		built.bins = binaries{dir: dir, sqsd: filepath.Join(dir, "sqsd"), goaws: filepath.Join(dir, "goaws")}
		for pkg, out := range map[string]string{"narad.dev/consume/cmd/sqsd": built.bins.sqsd, "github.com/Admiral-Piett/goaws/app/cmd": built.bins.goaws} {
			if msg, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
				built.err = fmt.Errorf("go build %s: %v: %s", pkg, err, msg)
				return
			}
		}
		if root := os.Getenv("SQSBENCH_BASELINE"); root != "" {
			built.bins.baseline = filepath.Join(dir, "sqsd-baseline")
			cmd := exec.Command("go", "build", "-o", built.bins.baseline, "./cmd/sqsd")
			cmd.Dir = root
			if msg, err := cmd.CombinedOutput(); err != nil {
				built.err = fmt.Errorf("go build %s/cmd/sqsd: %v: %s", root, err, msg)
				return
			}
		}
	})
	if built.err != nil {
		b.Fatal(built.err)
	}
	return built.bins
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.bins.dir != "" {
		os.RemoveAll(built.bins.dir)
	}
	os.Exit(code)
}

// A proc is a server process.
type proc struct {
	name string
	cmd  *exec.Cmd
	url  string // the SDK's endpoint
	done chan struct{}
}

var servingLine = regexp.MustCompile(`msg="sqsd: serving" url=(\S+)`)

// startSqsd starts the sqsd executable bin as server name over a data directory in dir, with
// credentials, 4 partitions a queue and -fsync, and waits for it to say where it serves.
func startSqsd(b *testing.B, name, dir, bin string, fsync bool) *proc {
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte(accessKey+" "+secretKey+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	p := &proc{name: name, cmd: exec.Command(bin, "-dir", filepath.Join(dir, "data"), "-addr", "127.0.0.1:0",
		"-credentials", creds, "-partitions", "4", "-fsync="+strconv.FormatBool(fsync)), done: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	serving := make(chan string, 1)
	var log strings.Builder
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				serving <- m[1]
			} else if log.Len() < 1<<16 {
				log.WriteString(sc.Text() + "\n")
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case p.url = <-serving:
	case <-p.done:
		b.Fatalf("sqsd ended before serving: %s", log.String())
	}
	return p
}

// startGoAWS starts GoAWS in dir with a config file naming a free port on 127.0.0.1 (it listens on
// every address), its logs (one line a request, as it runs by default) to /dev/null.
func startGoAWS(b testing.TB, dir string, bins binaries) *proc {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	config := filepath.Join(dir, "goaws.yaml")
	yaml := "Local:\n  Host: 127.0.0.1\n  Port: " + port + "\n  Region: us-east-1\n  AccountId: \"000000000000\"\n" +
		"  LogToFile: false\n  QueueAttributeDefaults:\n    VisibilityTimeout: 30\n    ReceiveMessageWaitTimeSeconds: 0\n"
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	p := &proc{name: "goaws", cmd: exec.Command(bins.goaws, "-config", config), url: "http://127.0.0.1:" + port, done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = devnull, devnull
	if name := os.Getenv("GOAWS_STDERR"); name != "" {
		f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close() // the child has its own descriptor
		p.cmd.Stderr = f
	}
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	close(p.done)
	return p
}

// client is an SDK client of the server, signing with the bench's credentials.
func (p *proc) client(b *testing.B) *sqs.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(p.url),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey}, nil
		}),
		HTTPClient: ownBody{&http.Client{Transport: tr}},
	})
}

// ownBody hands the transport a copy of each request's body. The SDK closes the body it
// built as soon as the response's headers are in, which can be before the transport's
// writer is done with it: the writer then fails and closes the connection under the
// response's body (seen with GoAWS at batch 10: a ReceiveMessage answered 200 whose body
// fails with "use of closed network connection", a few a run; the same workload through a
// plain http.Client sees none).
type ownBody struct{ c *http.Client }

func (o ownBody) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return o.c.Do(req)
}

// cpu is the server's CPU time so far, in ns.
func (p *proc) cpu(b *testing.B) int64 {
	ns, err := procCPU(p.cmd.Process.Pid)
	if err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	return ns
}

// stop ends the server with SIGTERM and waits for it.
func (p *proc) stop(b *testing.B) {
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		b.Fatal(err)
	}
	<-p.done
	p.cmd.Wait() // GoAWS has no graceful stop: killed by the signal
}

// clockTicks is the unit of /proc/<pid>/stat's times (USER_HZ), 100 on Linux.
const clockTicks = 100

// procCPU reads process pid's CPU time, user and system, from /proc/<pid>/stat, in ns.
func procCPU(pid int) (int64, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command's name, which is in parentheses and may hold spaces:
	// state is the 3rd field, utime the 14th, stime the 15th.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
		}
		ticks += v
	}
	return ticks * (int64(time.Second) / clockTicks), nil
}
