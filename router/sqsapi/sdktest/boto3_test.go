package sdktest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBoto3Query drives the handler with boto3 over SQS's query protocol (form bodies, XML
// answers), as Debian's python3-boto3 (1.26) and every botocore before 1.31 speak it: it
// sends with typed attributes and a trace header, receives, gives up six times with
// ChangeMessageVisibility 0, changes and deletes in batches, reads the queue's attributes,
// creates, lists, configures, tags, purges and deletes queues (a second purge and a new
// queue of the deleted name refused within 60 s), sets a RedrivePolicy (and
// is refused a bad one), and checks the SDK's errors,
// a wrong secret's and an unknown key's among them, every request signed with SigV4 as
// botocore signs it (testdata/boto3_query.py). SQSAPI_PYTHON names the Python (python3 when
// unset) and SQSAPI_BOTO3_PATH a directory holding such a boto3 and botocore, put first on
// its PYTHONPATH (with Debian's packages unpacked into dir, that is
// dir/usr/lib/python3/dist-packages). Skipped when that Python has no boto3, or a boto3
// that speaks the JSON protocol, unless SQSAPI_BOTO3_PATH is set: then it fails, since the
// run asked for that boto3 (.ci/run sets it).
func TestBoto3Query(t *testing.T) {
	b := newBroker(t)
	runBoto3Query(t, b.srv.URL+"/sqs")
}

// runBoto3Query runs testdata/boto3_query.py against endpoint, whose queue "orders" exists
// and which knows accessKey (see TestBoto3Query), with args after its own.
func runBoto3Query(t *testing.T, endpoint string, args ...string) {
	python := os.Getenv("SQSAPI_PYTHON")
	if python == "" {
		python = "python3"
	}
	asked := os.Getenv("SQSAPI_BOTO3_PATH") != ""
	if _, err := exec.LookPath(python); err != nil {
		if asked {
			t.Fatalf("no %s on PATH", python)
		}
		t.Skipf("no %s on PATH", python)
	}
	cmd := exec.Command(python, append([]string{"testdata/boto3_query.py", endpoint, accessKey, secretKey}, args...)...)
	cmd.Env = os.Environ()
	if path := os.Getenv("SQSAPI_BOTO3_PATH"); path != "" {
		cmd.Env = append(cmd.Env, "PYTHONPATH="+path)
	}
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok && exit.ExitCode() == 3 || strings.Contains(string(out), "No module named 'boto3'") {
		if asked {
			t.Fatalf("SQSAPI_BOTO3_PATH holds no boto3 of the query protocol: %s", strings.TrimSpace(string(out)))
		}
		t.Skipf("no boto3 of the query protocol: %s", strings.TrimSpace(string(out)))
	}
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "OK boto3")
	t.Log(strings.TrimSpace(string(out)))
}
