package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router/sqsapi"
)

// listedTask is a task as ListMessageMoveTasks answers it.
type listedTask struct {
	TaskHandle, Status                                                  string
	ApproximateNumberOfMessagesMoved, ApproximateNumberOfMessagesToMove int64
}

func (ts *sqsServer) moveTasks(sourceArn string) []listedTask {
	ts.t.Helper()
	var out struct{ Results []listedTask }
	ts.call("ListMessageMoveTasks", map[string]any{"SourceArn": sourceArn, "MaxResults": 10}, &out)
	return out.Results
}

// A message move task running when the server stops is in movetasks.json, RUNNING, and the
// next start lists it (its handle and counts) and resumes it, at its rate, until every
// message of the dead-letter queue is back in its queue (COMPLETED, kept across another
// restart).
func TestMoveTaskResumesAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		ts := openTestServer(t, dir)
		ts.call("CreateQueue", map[string]any{"QueueName": "dlq"}, nil)
		var attrs struct{ Attributes map[string]string }
		ts.call("GetQueueAttributes", map[string]any{"QueueUrl": ts.url("dlq"), "AttributeNames": []string{"QueueArn"}}, &attrs)
		dlqArn := attrs.Attributes["QueueArn"]
		policy := `{"deadLetterTargetArn":"` + dlqArn + `","maxReceiveCount":"1"}`
		ts.call("CreateQueue", map[string]any{"QueueName": "orders", "Attributes": map[string]string{"RedrivePolicy": policy}}, nil)
		bodies := []string{"a", "b", "c", "d"}
		for _, b := range bodies {
			ts.poison("orders", b)
		}
		synctest.Wait()

		var started struct{ TaskHandle string }
		ts.call("StartMessageMoveTask", map[string]any{"SourceArn": dlqArn, "MaxNumberOfMessagesPerSecond": 1}, &started)
		synctest.Wait() // the first moved, the task waits for its second's second
		require.NoError(t, ts.s.Close())

		ts = openTestServer(t, dir)
		tasks := ts.moveTasks(dlqArn)
		require.Len(t, tasks, 1)
		require.Equal(t, "RUNNING", tasks[0].Status, "resumed")
		require.Equal(t, started.TaskHandle, tasks[0].TaskHandle)
		require.Equal(t, int64(4), tasks[0].ApproximateNumberOfMessagesToMove)
		require.GreaterOrEqual(t, tasks[0].ApproximateNumberOfMessagesMoved, int64(1))
		time.Sleep(5 * time.Second) // its rate: one a second
		synctest.Wait()
		tasks = ts.moveTasks(dlqArn)
		require.Equal(t, "COMPLETED", tasks[0].Status)
		require.Equal(t, int64(4), tasks[0].ApproximateNumberOfMessagesMoved)
		var got []string
		for range 2 {
			b, _ := ts.receive("orders")
			got = append(got, b...)
		}
		require.ElementsMatch(t, bodies, got, "every message moved back, once")
		b, _ := ts.receive("dlq")
		require.Empty(t, b)
		require.NoError(t, ts.s.Close())

		ts = openTestServer(t, dir)
		defer func() { require.NoError(t, ts.s.Close()) }()
		tasks = ts.moveTasks(dlqArn)
		require.Len(t, tasks, 1)
		require.Equal(t, "COMPLETED", tasks[0].Status, "kept")
		require.Empty(t, tasks[0].TaskHandle)
	})
}

// A move tasks file cut short or with a byte changed stops the server at start, naming the
// file, rather than starting it without the tasks.
func TestMoveTasksDamaged(t *testing.T) {
	dir := t.TempDir()
	f, err := openMoveTasks(dir)
	require.NoError(t, err)
	require.Empty(t, f.tasks)
	task := sqsapi.MoveTask{Handle: "h", Source: "dlq", Status: "COMPLETED", ToMove: 3, Moved: 3, Started: time.Unix(1700000000, 0).UTC()}
	require.NoError(t, f.SaveMoveTasks([]sqsapi.MoveTask{task}))
	f, err = openMoveTasks(dir)
	require.NoError(t, err)
	require.Equal(t, []sqsapi.MoveTask{task}, f.tasks, "read back")

	path := filepath.Join(dir, moveTasksName)
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	for name, bad := range map[string][]byte{
		"cut short":        good[:len(good)-5],
		"a byte changed":   append(append([]byte{}, good[:len(good)-10]...), append([]byte{good[len(good)-10] ^ 1}, good[len(good)-9:]...)...),
		"no header":        good[len(moveTasksMagic)+10:],
		"an unknown field": withBody(t, `{"tasks":[],"other":1}`),
	} {
		require.NoError(t, os.WriteFile(path, bad, 0o600))
		_, err := openMoveTasks(dir)
		require.ErrorIs(t, err, errCorruptMoveTasks, name)
		require.ErrorContains(t, err, path, name)

		data := filepath.Join(t.TempDir(), "data")
		require.NoError(t, os.MkdirAll(data, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(data, moveTasksName), bad, 0o600))
		_, err = openServer(config{dir: data, noAuth: true, partitions: 1, baseURL: "http://localhost:9324"}, slog.New(slog.DiscardHandler))
		require.ErrorIs(t, err, errCorruptMoveTasks, "the server does not start: %s", name)
	}
}

// withBody is a move tasks file of body, its checksum right.
func withBody(t *testing.T, body string) []byte {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	data, err := encodeChecked(moveTasksMagic, v)
	require.NoError(t, err)
	return data
}

// FuzzDecodeMoveTasks: whatever the file holds, decoding never panics, and what decodes
// encodes to a file that decodes to the same tasks.
func FuzzDecodeMoveTasks(f *testing.F) {
	good, err := encodeMoveTasks([]sqsapi.MoveTask{{Handle: "h", Source: "dlq", Destination: "jobs", Rate: 5, Status: "RUNNING", ToMove: 9, Moved: 2, Started: time.Unix(1700000000, 0).UTC()}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(moveTasksMagic + "00000000\n"))
	f.Add([]byte(moveTasksMagic + "zz\n{}"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		tasks, err := decodeMoveTasks(data)
		if err != nil {
			return
		}
		again, err := encodeMoveTasks(tasks)
		if err != nil {
			t.Fatalf("decoded tasks do not encode: %v", err)
		}
		back, err := decodeMoveTasks(again)
		if err != nil || !reflect.DeepEqual(back, tasks) {
			t.Fatalf("%+v reads back as %+v, %v", tasks, back, err)
		}
	})
}
