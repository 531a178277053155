package sqsapi_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/sqsapi"
)

// delayEnv is an env whose node delays what sqsapi.NotBefore says, and whose handler keeps
// headers (ProduceRecord), on the bubble's clock.
func delayEnv(t *testing.T) *env {
	var e *env
	e = newEnv(t, sqsapi.Config{Now: time.Now, ProduceRecord: func(_ context.Context, topic string, rec router.Record) (int32, int64, error) {
		rec.Timestamp = time.Now()
		off := e.logs.Log(topic, 0).AppendRecord(rec)
		e.node.Appended(topic, 0, off+1)
		return 0, off, nil
	}}, func(c *router.Config) { c.NotBefore = sqsapi.NotBefore })
	return e
}

// A message sent with DelaySeconds is received only once its delay is over, by a receive
// then or by one long-polling for it; ApproximateNumberOfMessagesDelayed counts it meanwhile
// (once the node has read it); its receive is its first. Out of range, or to a handler that
// keeps no headers, it is refused.
func TestDelaySeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := delayEnv(t)
		sent := time.Now()
		ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"later","DelaySeconds":30}`), nil)
		ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"now"}`), nil)
		var out struct {
			Messages []struct{ Body, ReceiptHandle string }
		}
		ok(t, e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`","MaxNumberOfMessages":10}`), &out)
		require.Len(t, out.Messages, 1)
		require.Equal(t, "now", out.Messages[0].Body)
		ok(t, e.call("DeleteMessage", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+out.Messages[0].ReceiptHandle+`"}`), nil)
		var attrs struct{ Attributes map[string]string }
		ok(t, e.call("GetQueueAttributes", `{"QueueUrl":"`+queueURL+`","AttributeNames":["ApproximateNumberOfMessagesDelayed"]}`), &attrs)
		require.Equal(t, "1", attrs.Attributes["ApproximateNumberOfMessagesDelayed"])

		time.Sleep(15 * time.Second)
		var later struct {
			Messages []struct {
				Body       string
				Attributes map[string]string
			}
		}
		ok(t, e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`","MaxNumberOfMessages":10,"WaitTimeSeconds":20,"AttributeNames":["ApproximateReceiveCount"]}`), &later)
		require.Len(t, later.Messages, 1)
		require.Equal(t, "later", later.Messages[0].Body)
		require.Equal(t, "1", later.Messages[0].Attributes["ApproximateReceiveCount"])
		require.Equal(t, 30*time.Second, time.Since(sent), "the long-poll got it as its delay ended")
	})
}

func TestDelaySecondsRefused(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{BaseURL: baseURL, Queues: func(name string) (string, bool) { return name, name == "orders" },
		Produce: e.produceFunc()})
	require.Equal(t, "InvalidParameterValue", failed(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"x","DelaySeconds":5}`)).Type,
		"a Produce of bodies cannot carry the delay")
	require.Empty(t, e.produced)
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"x","DelaySeconds":0}`), nil)
}
