package sqsapi_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
	"narad.dev/consume/router/sqsapi"
)

// TestPurgeQueueDurable: a handler of Config.Queues serves PurgeQueue through its node's
// Purge: every message of both partitions goes, one in flight, one delayed and the others
// never received, and it is durable when PurgeQueue answers: a power cut at once, and the
// node started again on what the disk kept delivers the message sent after the purge and
// nothing before it.
func TestPurgeQueueDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		disk := crashfs.New()
		queues := func(name string) (string, bool) { return name, name == "orders" }
		var e *env
		e = newEnv(t, sqsapi.Config{Now: time.Now, Queues: queues,
			ProduceRecord: func(_ context.Context, topic string, rec router.Record) (int32, int64, error) {
				rec.Timestamp = time.Now()
				off := e.logs.Log(topic, 0).AppendRecord(rec)
				e.node.Appended(topic, 0, off+1)
				return 0, off, nil
			}},
			func(c *router.Config) {
				c.FS, c.NotBefore = disk, sqsapi.NotBefore
				c.Routes.(*routertest.Routes).Set("orders", 0, 1)
			})
		e.produce(1, "p1-a", "p1-b")
		for _, body := range []string{"a", "b", "c"} {
			ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"`+body+`"}`), nil)
		}
		ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"delayed","DelaySeconds":600}`), nil)
		held := e.receive(`{"QueueUrl":"` + queueURL + `","VisibilityTimeout":600}`)
		require.Len(t, held, 1)

		ok(t, e.call("PurgeQueue", `{"QueueUrl":"`+queueURL+`"}`), nil)
		require.Empty(t, e.receive(`{"QueueUrl":"`+queueURL+`","MaxNumberOfMessages":10}`))
		ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"after"}`), nil)

		cut := disk.PowerCut(crashfs.PowerCut{})
		e.node.Close()
		node, err := router.New(router.Config{Logs: e.logs, Routes: e.routes, Dir: "/state", FS: cut, NotBefore: sqsapi.NotBefore})
		require.NoError(t, err)
		defer node.Close()
		h := mustNew(t, node, sqsapi.Config{BaseURL: baseURL, Queues: queues, Now: time.Now})
		var out struct{ Messages []message }
		ok(t, call(h, "ReceiveMessage", `{"QueueUrl":"`+queueURL+`","MaxNumberOfMessages":10}`), &out)
		require.Len(t, out.Messages, 1, "what was sent after the purge, and nothing before it")
		require.Equal(t, "after", out.Messages[0].Body)
		status, err := node.TopicStatus("orders")
		require.NoError(t, err)
		require.Len(t, status, 2)
		for i, want := range []struct{ frontier, hwm int64 }{{3, 5}, {1, 2}} {
			require.True(t, status[i].Loaded, i)
			require.Equal(t, want.frontier, status[i].Frontier, "partition %d: the purge's frontier, on disk", i)
			require.Equal(t, want.hwm, status[i].HighWatermark, i)
		}
	})
}
