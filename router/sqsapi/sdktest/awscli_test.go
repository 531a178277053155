package sdktest

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// TestServerAWSCLI drives cmd/sqsd with the AWS CLI, as the README's example does: its
// credentials from the environment, --endpoint-url the server's, --output json parsed here.
// It creates a queue, sends a message with String, Number and Binary attributes (the MD5s
// answered checked against attributesMD5's), long-polls it, reads the queue's attributes,
// deletes it, purges (a second purge refused: PurgeQueueInProgress), is refused a wrong
// secret, deletes the queue and is refused its name again (QueueDeletedRecently); then it
// drives a FIFO queue (cliFIFO) and delayed messages (cliDelays). Each command is a process
// of its own, a second or so of CPU: few are run.
//
// SQSAPI_AWSCLI_ROOT names a directory Debian's awscli (2.9, whose botocore speaks the query
// protocol) and its Python dependencies were unpacked into with dpkg -x, run as
// SQSAPI_PYTHON (python3 when unset) root/usr/bin/aws with root/usr/lib/python3/dist-packages
// on PYTHONPATH (see doc.go); unset, the aws command on PATH, if any. Skipped when there is
// neither, unless SQSAPI_AWSCLI_ROOT is set: then it fails, since the run asked for it
// (.ci/run sets it).
func TestServerAWSCLI(t *testing.T) {
	cl := awsCLI(t)
	bin := buildServer(t)
	dir := t.TempDir()
	p := startServer(t, bin, filepath.Join(dir, "data"), "-credentials", writeCredentials(t, dir), "-partitions", "1")
	cl.endpoint = p.url
	cl.home = dir

	var created struct{ QueueUrl string }
	cl.json(&created, "create-queue", "--queue-name", "cli-jobs", "--attributes", "VisibilityTimeout=45")
	q := created.QueueUrl
	require.Equal(t, p.url+"/cli-jobs", q)

	body := "hello from the cli ✓"
	attrs := map[string]types.MessageAttributeValue{
		"colour": {DataType: aws.String("String"), StringValue: aws.String("blue")},
		"count":  {DataType: aws.String("Number"), StringValue: aws.String("1.5")},
		"blob":   {DataType: aws.String("Binary"), BinaryValue: []byte("raw\x01bytes ✓")},
	}
	var sent struct{ MessageId, MD5OfMessageBody, MD5OfMessageAttributes string }
	cl.json(&sent, "send-message", "--queue-url", q, "--message-body", body, "--message-attributes",
		`{"colour":{"DataType":"String","StringValue":"blue"},"count":{"DataType":"Number","StringValue":"1.5"},`+
			`"blob":{"DataType":"Binary","BinaryValue":"raw\u0001bytes ✓"}}`)
	sum := md5.Sum([]byte(body))
	require.Equal(t, hex.EncodeToString(sum[:]), sent.MD5OfMessageBody)
	require.Equal(t, attributesMD5(attrs), sent.MD5OfMessageAttributes)

	type message struct {
		MessageId, ReceiptHandle, MD5OfBody, Body, MD5OfMessageAttributes string
		Attributes                                                        map[string]string
		MessageAttributes                                                 map[string]struct{ DataType, StringValue, BinaryValue string }
	}
	var got struct{ Messages []message }
	for range 10 { // a bound on a broken server: the message is there at once
		// A lease longer than any run of commands: on a busy machine each is seconds of CPU,
		// and the counts below must not see it lapse.
		if cl.json(&got, "receive-message", "--queue-url", q, "--wait-time-seconds", "5", "--max-number-of-messages", "10",
			"--visibility-timeout", "900", "--attribute-names", "All", "--message-attribute-names", "All"); len(got.Messages) > 0 {
			break
		}
	}
	require.Len(t, got.Messages, 1)
	m := got.Messages[0]
	require.Equal(t, sent.MessageId, m.MessageId)
	require.Equal(t, body, m.Body)
	require.Equal(t, sent.MD5OfMessageBody, m.MD5OfBody)
	require.Equal(t, sent.MD5OfMessageAttributes, m.MD5OfMessageAttributes)
	require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
	require.Equal(t, base64.StdEncoding.EncodeToString(attrs["blob"].BinaryValue), m.MessageAttributes["blob"].BinaryValue,
		"the CLI prints a Binary in base64")
	require.Equal(t, "Number", m.MessageAttributes["count"].DataType)
	require.Equal(t, "1.5", m.MessageAttributes["count"].StringValue)

	var queueAttrs struct{ Attributes map[string]string }
	cl.json(&queueAttrs, "get-queue-attributes", "--queue-url", q, "--attribute-names", "All")
	require.Equal(t, "45", queueAttrs.Attributes["VisibilityTimeout"])
	require.Equal(t, "1", queueAttrs.Attributes["ApproximateNumberOfMessagesNotVisible"])
	require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:cli-jobs", queueAttrs.Attributes["QueueArn"])

	cl.json(nil, "delete-message", "--queue-url", q, "--receipt-handle", m.ReceiptHandle)
	cl.json(nil, "send-message", "--queue-url", q, "--message-body", "to purge")
	cl.json(nil, "purge-queue", "--queue-url", q)
	var counts struct{ Attributes map[string]string }
	cl.json(&counts, "get-queue-attributes", "--queue-url", q, "--attribute-names",
		"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")
	require.Equal(t, map[string]string{"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}, counts.Attributes)
	require.Contains(t, cl.fail("purge-queue", "--queue-url", q), "(AWS.SimpleQueueService.PurgeQueueInProgress)")

	wrong := *cl
	wrong.secret = "not the secret"
	require.Contains(t, wrong.fail("list-queues"), "(SignatureDoesNotMatch)")

	cl.json(nil, "delete-queue", "--queue-url", q)
	require.Contains(t, cl.fail("create-queue", "--queue-name", "cli-jobs"), "(AWS.SimpleQueueService.QueueDeletedRecently)")

	cliFIFO(t, cl, p.url)
	cliDelays(t, cl)
	p.stop()
}

// cliFIFO drives a FIFO queue with the CLI: a batch of two groups sent with their
// deduplication ids (each answered a SequenceNumber), a resend within the deduplication
// window (5 minutes) answered with the original's MessageId and SequenceNumber and not sent,
// a send without a MessageGroupId refused (MissingParameter); one receive gets a group's two
// messages in order with the other group's, their FIFO attributes set; a message sent to a
// group whose messages are in flight is not received until they are deleted, and then it is
// the only one.
func cliFIFO(t *testing.T, cl *cli, base string) {
	t.Helper()
	var created struct{ QueueUrl string }
	cl.json(&created, "create-queue", "--queue-name", "cli-jobs.fifo", "--attributes", "FifoQueue=true")
	q := created.QueueUrl
	require.Equal(t, base+"/cli-jobs.fifo", q)

	type sentEntry struct{ Id, MessageId, SequenceNumber string }
	var batch struct{ Successful, Failed []sentEntry }
	cl.json(&batch, "send-message-batch", "--queue-url", q, "--entries",
		`[{"Id":"a1","MessageBody":"a1","MessageGroupId":"a","MessageDeduplicationId":"a1"},`+
			`{"Id":"b1","MessageBody":"b1","MessageGroupId":"b","MessageDeduplicationId":"b1"},`+
			`{"Id":"a2","MessageBody":"a2","MessageGroupId":"a","MessageDeduplicationId":"a2"}]`)
	require.Empty(t, batch.Failed)
	require.Len(t, batch.Successful, 3)
	sent := map[string]sentEntry{}
	for _, e := range batch.Successful {
		require.NotEmpty(t, e.SequenceNumber, e.Id)
		sent[e.Id] = e
	}

	var dup struct{ MessageId, SequenceNumber string }
	cl.json(&dup, "send-message", "--queue-url", q, "--message-body", "a1 again", "--message-group-id", "a",
		"--message-deduplication-id", "a1")
	require.Equal(t, sent["a1"].MessageId, dup.MessageId, "a resend within the window answers the original")
	require.Equal(t, sent["a1"].SequenceNumber, dup.SequenceNumber)
	require.Contains(t, cl.fail("send-message", "--queue-url", q, "--message-body", "x", "--message-deduplication-id", "x"),
		"(MissingParameter)")

	type fifoMessage struct {
		MessageId, ReceiptHandle, Body string
		Attributes                     map[string]string
	}
	var got struct{ Messages []fifoMessage }
	cl.json(&got, "receive-message", "--queue-url", q, "--max-number-of-messages", "10", "--wait-time-seconds", "5",
		"--visibility-timeout", "900", "--attribute-names", "All") // held through the receive below, however slow
	groups := map[string][]string{}
	for _, m := range got.Messages {
		g := m.Attributes["MessageGroupId"]
		groups[g] = append(groups[g], m.Body)
		require.Equal(t, m.Body, m.Attributes["MessageDeduplicationId"])
		require.Equal(t, sent[m.Body].MessageId, m.MessageId)
		require.Equal(t, sent[m.Body].SequenceNumber, m.Attributes["SequenceNumber"])
	}
	require.Equal(t, map[string][]string{"a": {"a1", "a2"}, "b": {"b1"}}, groups, "one receive: each group in order, a's two together")

	cl.json(nil, "send-message", "--queue-url", q, "--message-body", "a3", "--message-group-id", "a",
		"--message-deduplication-id", "a3")
	var held struct{ Messages []fifoMessage }
	cl.json(&held, "receive-message", "--queue-url", q, "--max-number-of-messages", "10", "--wait-time-seconds", "1")
	require.Empty(t, held.Messages, "a and b are in flight: a3 waits")

	entries := make([]map[string]string, len(got.Messages))
	for i, m := range got.Messages {
		entries[i] = map[string]string{"Id": m.Body, "ReceiptHandle": m.ReceiptHandle}
	}
	list, err := json.Marshal(entries)
	require.NoError(t, err)
	var deleted struct{ Successful, Failed []struct{ Id string } }
	cl.json(&deleted, "delete-message-batch", "--queue-url", q, "--entries", string(list))
	require.Empty(t, deleted.Failed)
	require.Len(t, deleted.Successful, 3)

	var next struct{ Messages []fifoMessage }
	cl.json(&next, "receive-message", "--queue-url", q, "--max-number-of-messages", "10", "--wait-time-seconds", "5")
	require.Len(t, next.Messages, 1, "a3 only: the resend of a1 was not sent")
	require.Equal(t, "a3", next.Messages[0].Body)
}

// cliDelays sends delayed messages with the CLI to a queue whose DelaySeconds is 900 (longer
// than the test, however slow each command is on a busy machine): a message
// without a delay of its own takes the queue's (not received; counted in
// ApproximateNumberOfMessagesDelayed), one with --delay-seconds 0 is received at once, and one
// with --delay-seconds 3 comes to a long-poll once its own delay is over, not the queue's.
func cliDelays(t *testing.T, cl *cli) {
	t.Helper()
	var created struct{ QueueUrl string }
	cl.json(&created, "create-queue", "--queue-name", "cli-delayed", "--attributes", "DelaySeconds=900")
	q := created.QueueUrl
	cl.json(nil, "send-message", "--queue-url", q, "--message-body", "the queue's delay")
	cl.json(nil, "send-message", "--queue-url", q, "--message-body", "no delay", "--delay-seconds", "0")
	var got struct{ Messages []struct{ Body string } }
	cl.json(&got, "receive-message", "--queue-url", q, "--max-number-of-messages", "10", "--wait-time-seconds", "5",
		"--visibility-timeout", "900")
	require.Len(t, got.Messages, 1, "the message's own delay of 0 overrides the queue's")
	require.Equal(t, "no delay", got.Messages[0].Body)

	var counts struct{ Attributes map[string]string }
	cl.json(&counts, "get-queue-attributes", "--queue-url", q, "--attribute-names", "DelaySeconds",
		"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed")
	require.Equal(t, map[string]string{"DelaySeconds": "900", "ApproximateNumberOfMessages": "0",
		"ApproximateNumberOfMessagesNotVisible": "1", "ApproximateNumberOfMessagesDelayed": "1"}, counts.Attributes)

	sentAt := time.Now()
	cl.json(nil, "send-message", "--queue-url", q, "--message-body", "in 3 s", "--delay-seconds", "3")
	var later struct{ Messages []struct{ Body string } }
	cl.json(&later, "receive-message", "--queue-url", q, "--max-number-of-messages", "10", "--wait-time-seconds", "20")
	require.Len(t, later.Messages, 1, "the message's own delay of 3 s, not the queue's")
	require.Equal(t, "in 3 s", later.Messages[0].Body)
	require.GreaterOrEqual(t, time.Since(sentAt), 3*time.Second, "not before its delay")
}

// cli runs the AWS CLI's sqs commands against a server.
type cli struct {
	t        *testing.T
	command  []string // the aws command: python and the script, or an installed aws
	env      []string // besides the credentials: PYTHONPATH, ...
	endpoint string
	home     string // HOME and the config files' directory: nothing of the machine's
	secret   string
}

// awsCLI finds the AWS CLI (see TestServerAWSCLI), or skips.
func awsCLI(t *testing.T) *cli {
	t.Helper()
	c := &cli{t: t, secret: secretKey}
	root := os.Getenv("SQSAPI_AWSCLI_ROOT")
	if root == "" {
		path, err := exec.LookPath("aws")
		if err != nil {
			t.Skip("no aws on PATH and no SQSAPI_AWSCLI_ROOT (Debian's awscli unpacked: see doc.go)")
		}
		c.command = []string{path}
		return c
	}
	python := os.Getenv("SQSAPI_PYTHON")
	if python == "" {
		python = "python3"
	}
	script := filepath.Join(root, "usr", "bin", "aws")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("SQSAPI_AWSCLI_ROOT holds no usr/bin/aws: %v", err)
	}
	c.command = []string{python, script}
	c.env = []string{"PYTHONPATH=" + filepath.Join(root, "usr", "lib", "python3", "dist-packages")}
	return c
}

// run runs aws sqs args, and returns its standard output and error and whether it succeeded.
func (c *cli) run(args ...string) (stdout, stderr string, ok bool) {
	c.t.Helper()
	cmd := exec.Command(c.command[0], append(append(c.command[1:], "--endpoint-url", c.endpoint, "--output", "json", "sqs"), args...)...)
	// The credentials and region from the environment, and none of the machine's AWS
	// configuration: a config file of the test's, no credentials file.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "PYTHONPATH=") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, c.env...)
	cmd.Env = append(cmd.Env, "HOME="+c.home, "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+c.secret,
		"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE="+c.config(),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(c.home, "no-credentials"), "AWS_PAGER=", "AWS_EC2_METADATA_DISABLED=true")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		if _, exited := err.(*exec.ExitError); !exited {
			c.t.Fatalf("aws %s: %v", args[0], err)
		}
	}
	return out.String(), errOut.String(), err == nil
}

// config writes the CLI's config file and returns its path: a Binary's value on the command
// line is its bytes (raw-in-base64-out), as CLI v1 always takes it, rather than CLI v2's
// default base64, so that either CLI sends the same bytes.
func (c *cli) config() string {
	c.t.Helper()
	path := filepath.Join(c.home, "aws-config")
	require.NoError(c.t, os.WriteFile(path, []byte("[default]\ncli_binary_format = raw-in-base64-out\n"), 0o600))
	return path
}

// json runs aws sqs args, which must succeed, and decodes its output into out (when not nil
// and there is output: a receive of nothing prints nothing).
func (c *cli) json(out any, args ...string) {
	c.t.Helper()
	stdout, stderr, ok := c.run(args...)
	require.True(c.t, ok, "aws sqs %s: %s%s", args[0], stdout, stderr)
	if out != nil && strings.TrimSpace(stdout) != "" {
		require.NoError(c.t, json.Unmarshal([]byte(stdout), out), stdout)
	}
}

// fail runs aws sqs args, which must fail, and returns its standard error.
func (c *cli) fail(args ...string) string {
	c.t.Helper()
	stdout, stderr, ok := c.run(args...)
	require.False(c.t, ok, "aws sqs %s succeeded: %s", args[0], stdout)
	return stderr
}
