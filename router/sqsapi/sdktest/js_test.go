package sdktest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJSClient drives the handler with the AWS SDK for JavaScript v3 (@aws-sdk/client-sqs,
// of testdata/jsclient/package-lock.json) over SQS's JSON protocol, every request signed
// with SigV4 from static credentials: it creates queues, sends with String, Number, Binary
// and custom-typed message attributes and checks the MD5OfMessageBody and
// MD5OfMessageAttributes answered against its own (the SDK checks the bodies' MD5 too),
// long-polls, gives a message back and extends another with ChangeMessageVisibility,
// deletes alone and in batches, purges (a second purge PurgeQueueInProgress), and checks the
// SDK's typed errors, a wrong secret's, an unknown key's and QueueDeletedRecently among them
// (testdata/jsclient/sqs_client.js).
//
// SQSAPI_JS_DIR names the node_modules directory holding the SDK (npm ci of
// testdata/jsclient, in a directory of its own or there); unset, testdata/jsclient/node_modules.
// SQSAPI_NODE names Node.js (node when unset). Skipped when there is no node or no SDK in
// that directory, unless SQSAPI_JS_DIR is set: then it fails, since the run asked for it
// (.ci/run sets it).
func TestJSClient(t *testing.T) {
	node, modules := jsClient(t)
	b := newBroker(t)
	runJS(t, node, modules, b.srv.URL+"/sqs")
}

// TestServerJSClient: cmd/sqsd answers the JavaScript SDK as the broker of TestJSClient does,
// and moves a message received maxReceiveCount times to its dead-letter queue, from which a
// message move task brings it back.
func TestServerJSClient(t *testing.T) {
	node, modules := jsClient(t)
	bin := buildServer(t)
	dir := t.TempDir()
	p := startServer(t, bin, filepath.Join(dir, "data"), "-credentials", writeCredentials(t, dir), "-partitions", "1")
	runJS(t, node, modules, p.url, "redrive")
	p.stop()
}

// jsClient finds Node.js and the SDK's node_modules, or skips (fails when SQSAPI_JS_DIR asked
// for them).
func jsClient(t *testing.T) (node, modules string) {
	t.Helper()
	modules, asked := os.LookupEnv("SQSAPI_JS_DIR")
	if !asked || modules == "" {
		modules, asked = filepath.Join("testdata", "jsclient", "node_modules"), false
	}
	unavailable := func(format string, args ...any) {
		t.Helper()
		if asked {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (npm ci in testdata/jsclient, or SQSAPI_JS_DIR: see js_test.go)", args...)
	}
	node = os.Getenv("SQSAPI_NODE")
	if node == "" {
		node = "node"
	}
	if _, err := exec.LookPath(node); err != nil {
		unavailable("no %s on PATH", node)
	}
	abs, err := filepath.Abs(modules)
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(abs, "@aws-sdk", "client-sqs", "package.json")); err != nil {
		unavailable("no @aws-sdk/client-sqs in %s", abs)
	}
	return node, abs
}

// runJS runs testdata/jsclient/sqs_client.js with node and modules against endpoint, which
// knows accessKey (see TestJSClient), with args after its own.
func runJS(t *testing.T, node, modules, endpoint string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), node,
		append([]string{filepath.Join("testdata", "jsclient", "sqs_client.js"), endpoint, accessKey, secretKey}, args...)...)
	// NODE_PATH: the script requires the SDK from wherever npm ci put it. The AWS_ variables
	// are dropped so that nothing of the machine's configuration reaches the client.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "NODE_PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "NODE_PATH="+modules, "AWS_SDK_LOAD_CONFIG=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "OK js")
	t.Log(strings.TrimSpace(string(out)))
}
