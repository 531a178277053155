package sqsapi_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router/sqsapi"
)

// memMoveTasks is a MoveTaskStore in memory that keeps every save, and fails them while
// failing is set.
type memMoveTasks struct {
	mu      sync.Mutex
	saves   [][]sqsapi.MoveTask
	failing error
	loadErr error
}

func (s *memMoveTasks) SaveMoveTasks(tasks []sqsapi.MoveTask) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing != nil {
		return s.failing
	}
	s.saves = append(s.saves, slices.Clone(tasks))
	return nil
}

func (s *memMoveTasks) MoveTasks() ([]sqsapi.MoveTask, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.saves) == 0 {
		return nil, s.loadErr
	}
	return slices.Clone(s.saves[len(s.saves)-1]), s.loadErr
}

// last is the tasks of the last save.
func (s *memMoveTasks) last(t *testing.T) []sqsapi.MoveTask {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NotEmpty(t, s.saves)
	return s.saves[len(s.saves)-1]
}

// restart closes the env's handler, as a stop does, and makes another over the same node
// and stores.
func (e *redriveEnv) restart() {
	e.t.Helper()
	require.NoError(e.t, e.h.Close())
	e.h = mustNew(e.t, e.node, e.cfg)
}

// withMoveTasks is a redrive env whose move tasks are kept in store, with a dead-letter
// queue dlq of queue jobs holding n messages.
func withMoveTasks(t *testing.T, store sqsapi.MoveTaskStore, n int) *redriveEnv {
	e := newRedriveEnv(t, func(c *sqsapi.Config) { c.MoveTasks = store })
	ok(t, e.call("CreateQueue", `{"QueueName":"dlq"}`), nil)
	ok(t, e.call("CreateQueue", `{"QueueName":"jobs","Attributes":{"RedrivePolicy":`+jsonString(`{"maxReceiveCount":3,"deadLetterTargetArn":"`+dlqArn+`"}`)+`}}`), nil)
	e.deadLetter("jobs", n)
	return e
}

// A task is saved at its start, RUNNING; a stop (Close) while it runs saves it RUNNING with
// what it moved; the next handler over the store lists it, with its handle and counts, and
// resumes it at its rate, from what the source still holds, until every message is moved
// (COMPLETED, saved). Its progress is saved as it goes, at most once a second.
func TestMoveTaskResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &memMoveTasks{}
		e := withMoveTasks(t, store, 4)
		var started struct{ TaskHandle string }
		ok(t, e.call("StartMessageMoveTask", `{"SourceArn":"`+dlqArn+`","MaxNumberOfMessagesPerSecond":1}`), &started)
		synctest.Wait() // the first moved, the task waits for its second's second
		saved := store.last(t)
		require.Len(t, saved, 1)
		require.Equal(t, sqsapi.MoveTask{Handle: started.TaskHandle, Source: "dlq", Rate: 1, Started: saved[0].Started,
			ToMove: 4, Moved: 0, Status: "RUNNING"}, saved[0], "saved at its start")

		e.restart()
		saved = store.last(t)
		require.Equal(t, "RUNNING", saved[0].Status, "a stop keeps it running")
		require.Equal(t, int64(1), saved[0].Moved)
		tasks := e.moveTasks(dlqArn, 10)
		require.Len(t, tasks, 1)
		require.Equal(t, "RUNNING", tasks[0].Status)
		require.Equal(t, started.TaskHandle, tasks[0].TaskHandle, "listed after the restart")
		require.Equal(t, int64(4), tasks[0].ApproximateNumberOfMessagesToMove)
		require.GreaterOrEqual(t, tasks[0].ApproximateNumberOfMessagesMoved, int64(1))
		require.Equal(t, "InvalidParameterValue", failed(t, e.call("StartMessageMoveTask", `{"SourceArn":"`+dlqArn+`"}`)).Type,
			"the resumed task runs: one task a source")

		time.Sleep(2500 * time.Millisecond) // its rate, one a second from the resume: the three left by 2 s
		synctest.Wait()
		tasks = e.moveTasks(dlqArn, 10)
		require.Equal(t, "COMPLETED", tasks[0].Status)
		require.Equal(t, int64(4), tasks[0].ApproximateNumberOfMessagesMoved)
		require.Len(t, e.receive(`{"QueueUrl":"`+baseURL+`/jobs","MaxNumberOfMessages":10}`), 4, "every message moved")
		require.Empty(t, e.receive(`{"QueueUrl":"`+baseURL+`/dlq"}`))
		saved = store.last(t)
		require.Equal(t, "COMPLETED", saved[0].Status)
		require.Equal(t, int64(4), saved[0].Moved)
		store.mu.Lock()
		defer store.mu.Unlock()
		// start, stop, then one a second of the three moved after the restart (their first
		// within a second of the resume), and the end
		require.LessOrEqual(t, len(store.saves), 6)
	})
}

// A task whose start cannot be saved is refused (InternalFailure), moves nothing and is
// not listed; a cancel is saved, so that a restart does not resume the task.
func TestMoveTaskSaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &memMoveTasks{failing: errors.New("disk full")}
		e := withMoveTasks(t, store, 3)
		got := failed(t, e.call("StartMessageMoveTask", `{"SourceArn":"`+dlqArn+`"}`))
		require.Equal(t, "InternalFailure", got.Type)
		synctest.Wait()
		require.Empty(t, e.moveTasks(dlqArn, 10))
		require.Empty(t, e.receive(`{"QueueUrl":"`+baseURL+`/jobs"}`), "nothing moved")

		store.mu.Lock()
		store.failing = nil
		store.mu.Unlock()
		var started struct{ TaskHandle string }
		ok(t, e.call("StartMessageMoveTask", `{"SourceArn":"`+dlqArn+`","MaxNumberOfMessagesPerSecond":1}`), &started)
		synctest.Wait()
		ok(t, e.call("CancelMessageMoveTask", `{"TaskHandle":"`+started.TaskHandle+`"}`), nil)
		require.Contains(t, []string{"CANCELLING", "CANCELLED"}, store.last(t)[0].Status)
		synctest.Wait()
		require.Equal(t, "CANCELLED", store.last(t)[0].Status)
		e.restart()
		synctest.Wait()
		tasks := e.moveTasks(dlqArn, 10)
		require.Len(t, tasks, 1)
		require.Equal(t, "CANCELLED", tasks[0].Status, "not resumed")
		require.Len(t, e.receive(`{"QueueUrl":"`+baseURL+`/dlq","MaxNumberOfMessages":10}`), 2, "the rest stay")
	})
}

// What a store kept is checked at New: a task being cancelled comes back CANCELLED, a
// RUNNING one whose source queue is gone FAILED; a store that cannot load, a task with no
// handle, or MoveTasks without a Store refuse New.
func TestMoveTasksLoaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &memMoveTasks{}
		e := withMoveTasks(t, store, 0)
		store.saves = [][]sqsapi.MoveTask{{
			{Handle: "gone", Source: "vanished", Status: "RUNNING", ToMove: 5, Moved: 2, Started: time.Now()},
			{Handle: "c", Source: "dlq", Status: "CANCELLING", Started: time.Now()},
			{Handle: "b", Source: "dlq", Status: "FAILED", FailureReason: "why", Started: time.Now()},
		}}
		e.restart()
		tasks := e.moveTasks(dlqArn, 10)
		require.Len(t, tasks, 2)
		require.Equal(t, []string{"CANCELLED", "FAILED"}, []string{tasks[0].Status, tasks[1].Status}, "the latest first, as saved")
		require.Equal(t, "why", tasks[1].FailureReason)
		ok(t, e.call("CreateQueue", `{"QueueName":"vanished"}`), nil)
		ok(t, e.call("CreateQueue", `{"QueueName":"x","Attributes":{"RedrivePolicy":`+jsonString(`{"maxReceiveCount":3,"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:vanished"}`)+`}}`), nil)
		gone := e.moveTasks("arn:aws:sqs:us-east-1:000000000000:vanished", 10)
		require.Len(t, gone, 1)
		require.Equal(t, "FAILED", gone[0].Status)
		require.Equal(t, int64(2), gone[0].ApproximateNumberOfMessagesMoved)

		for _, tc := range []struct {
			name string
			cfg  sqsapi.Config
		}{
			{"load error", sqsapi.Config{Store: e.store, MoveTasks: &memMoveTasks{loadErr: errors.New("damaged")}}},
			{"no handle", sqsapi.Config{Store: e.store, MoveTasks: &memMoveTasks{saves: [][]sqsapi.MoveTask{{{Source: "dlq", Status: "FAILED"}}}}}},
			{"a handle twice", sqsapi.Config{Store: e.store, MoveTasks: &memMoveTasks{saves: [][]sqsapi.MoveTask{{{Handle: "h", Source: "dlq"}, {Handle: "h", Source: "dlq"}}}}}},
			{"no store", sqsapi.Config{Queues: func(string) (string, bool) { return "", false }, MoveTasks: &memMoveTasks{}}},
		} {
			tc.cfg.BaseURL = baseURL
			_, err := sqsapi.New(e.node, tc.cfg)
			require.Error(t, err, tc.name)
		}
	})
}
