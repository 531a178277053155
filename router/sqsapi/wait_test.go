package sqsapi_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/sqsapi"
)

// TestLongPollWokenBySend: a parked ReceiveMessage answers with the message a SendMessage
// brings, at once.
func TestLongPollWokenBySend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, sqsapi.Config{})
		e.h = mustNew(t, e.node, sqsapi.Config{Produce: e.produceFunc()})
		done := make(chan *httptest.ResponseRecorder)
		go func() {
			done <- e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`","WaitTimeSeconds":20,"MaxNumberOfMessages":10}`)
		}()
		synctest.Wait()
		require.Equal(t, 1, e.node.Parked("orders"))
		start := time.Now()
		ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"hello"}`), nil)
		var out struct{ Messages []message }
		ok(t, <-done, &out)
		require.Len(t, out.Messages, 1)
		require.Equal(t, "hello", out.Messages[0].Body)
		require.Equal(t, start, time.Now(), "answered at the send, not at the wait's end")
	})
}

// TestWaitEnds: a wait nothing ends answers {} when its WaitTimeSeconds run out.
func TestWaitEnds(t *testing.T) {
	for _, wait := range []int{0, 1, 20} {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, sqsapi.Config{})
			start := time.Now()
			rec := e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`","WaitTimeSeconds":`+itoa(wait)+`}`)
			ok(t, rec, nil)
			require.Equal(t, "{}", rec.Body.String())
			require.Equal(t, time.Duration(wait)*time.Second, time.Since(start))
		})
	}
}

// TestDisconnectHoldsNoLease: a client that goes away ends its long-poll at once, holding no
// lease: the next message goes to the next consumer as a first delivery.
func TestDisconnectHoldsNoLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, sqsapi.Config{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *httptest.ResponseRecorder)
		go func() {
			done <- callCtx(ctx, e.h, "ReceiveMessage", `{"QueueUrl":"`+queueURL+`","WaitTimeSeconds":20}`)
		}()
		synctest.Wait()
		require.Equal(t, 1, e.node.Parked("orders"))
		start := time.Now()
		cancel()
		require.Equal(t, "ServiceUnavailable", failed(t, <-done).Type)
		require.Equal(t, start, time.Now())
		synctest.Wait()
		require.Equal(t, 0, e.node.Parked("orders"))

		e.produce(0, "v")
		m := e.receiveOne(`,"AttributeNames":["ApproximateReceiveCount"]`)
		require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
	})
}

// TestVisibilityTimeout: a message not deleted within its VisibilityTimeout comes back, its
// receive count one higher and its first-receive time the first receive's; a
// ChangeMessageVisibility moves that moment.
func TestVisibilityTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, sqsapi.Config{})
		e.produce(0, "v")
		all := `,"MessageSystemAttributeNames":["All"]`
		first := e.receiveOne(`,"VisibilityTimeout":30` + all)
		require.Equal(t, "1", first.Attributes["ApproximateReceiveCount"])
		require.Contains(t, first.Attributes, "ApproximateFirstReceiveTimestamp")

		// Extended at 10 s to 60 s from then: invisible until 70 s.
		time.Sleep(10 * time.Second)
		ok(t, e.call("ChangeMessageVisibility", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+first.ReceiptHandle+`","VisibilityTimeout":60}`), nil)
		start := time.Now()
		time.Sleep(5 * time.Second) // so that no long-poll ends at the instant the lease lapses
		var out struct{ Messages []message }
		empty := 0
		for ; len(out.Messages) == 0; empty++ {
			ok(t, e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`","WaitTimeSeconds":20,"VisibilityTimeout":5`+all+`}`), &out)
		}
		require.Len(t, out.Messages, 1)
		require.Equal(t, 60*time.Second, time.Since(start), "visible again once the extension lapsed")
		require.Equal(t, 3, empty, "two long-polls ran out first")
		m := out.Messages[0]
		require.Equal(t, first.MessageId, m.MessageId)
		require.NotEqual(t, first.ReceiptHandle, m.ReceiptHandle)
		require.Equal(t, "2", m.Attributes["ApproximateReceiveCount"])
		require.Equal(t, first.Attributes["ApproximateFirstReceiveTimestamp"], m.Attributes["ApproximateFirstReceiveTimestamp"], "the first receive's time")

		// Shortened, by a ChangeMessageVisibility below what is left.
		ok(t, e.call("ChangeMessageVisibility", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+m.ReceiptHandle+`","VisibilityTimeout":1}`), nil)
		start = time.Now()
		third := e.receive(`{"QueueUrl":"` + queueURL + `","WaitTimeSeconds":20` + all + `}`)
		require.Len(t, third, 1)
		require.Equal(t, time.Second, time.Since(start))
		require.Equal(t, "3", third[0].Attributes["ApproximateReceiveCount"])

		// The first handle is stale: its delete is refused as expired, and deletes nothing.
		got := failed(t, e.call("DeleteMessage", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+first.ReceiptHandle+`"}`))
		require.Equal(t, "InvalidParameterValue", got.Type, got.Message)
		st, err := e.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		require.Equal(t, 1, st.Leased)
	})
}

// TestVisibilityZeroCountsTheReceive: ChangeMessageVisibility 0 makes the message visible at
// once, to a consumer parked on the queue, and the receive it ends counts, as SQS counts every
// receive: six receive and give-up cycles (single and batch) read ApproximateReceiveCount 1 to
// 6.
func TestVisibilityZeroCountsTheReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, sqsapi.Config{})
		e.produce(0, "v")
		const all = `,"AttributeNames":["All"]`
		m := e.receiveOne(all)
		require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
		done := make(chan []message)
		go func() {
			done <- e.receive(`{"QueueUrl":"` + queueURL + `","WaitTimeSeconds":20` + all + `}`)
		}()
		synctest.Wait()
		start := time.Now()
		ok(t, e.call("ChangeMessageVisibility", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+m.ReceiptHandle+`","VisibilityTimeout":0}`), nil)
		got := <-done
		require.Len(t, got, 1)
		require.Equal(t, start, time.Now(), "visible at once")
		firstAt := m.Attributes["ApproximateFirstReceiveTimestamp"]
		require.NotEmpty(t, firstAt)
		m = got[0]
		for want := 2; want <= 6; want++ {
			require.Equal(t, strconv.Itoa(want), m.Attributes["ApproximateReceiveCount"], "every receive counts")
			require.Equal(t, firstAt, m.Attributes["ApproximateFirstReceiveTimestamp"], "on every delivery, the first's")
			if want%2 == 0 {
				ok(t, e.call("ChangeMessageVisibility", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+m.ReceiptHandle+`","VisibilityTimeout":0}`), nil)
			} else {
				var out batchResult
				ok(t, e.call("ChangeMessageVisibilityBatch", `{"QueueUrl":"`+queueURL+`","Entries":[{"Id":"a","ReceiptHandle":"`+m.ReceiptHandle+`","VisibilityTimeout":0}]}`), &out)
				require.Empty(t, out.Failed)
			}
			m = e.receiveOne(all)
		}
	})
}

// TestVisibilityZeroReachesMaxDeliveries: a message a consumer keeps giving up on with
// ChangeMessageVisibility 0 is quarantined at the topic's MaxDeliveries, and not received
// again.
func TestVisibilityZeroReachesMaxDeliveries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, sqsapi.Config{}, func(c *router.Config) {
			c.Topic = func(string) router.TopicConfig { return router.TopicConfig{MaxDeliveries: 3} }
		})
		e.produce(0, "poison", "fine")
		for want := 1; want <= 3; want++ {
			m := e.receiveOne(`,"AttributeNames":["ApproximateReceiveCount"]`)
			require.Equal(t, "0:0", m.MessageId)
			require.Equal(t, strconv.Itoa(want), m.Attributes["ApproximateReceiveCount"])
			ok(t, e.call("ChangeMessageVisibility", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+m.ReceiptHandle+`","VisibilityTimeout":0}`), nil)
		}
		q, err := e.node.Quarantined("orders", 0)
		require.NoError(t, err)
		require.Equal(t, []int64{0}, q)
		require.Equal(t, "0:1", e.receiveOne().MessageId, "the quarantined message is not received again")
		require.Empty(t, e.receive(`{"QueueUrl":"`+queueURL+`"}`))
	})
}

// TestVisibilityZeroSkipsBackoff: on a topic with a Backoff, ChangeMessageVisibility 0 (and
// its batch entry) makes the message receivable at once, its ApproximateReceiveCount one
// more each time, as SQS does; a Node with no NackNow falls back to a plain nack, which
// waits the Backoff.
func TestVisibilityZeroSkipsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, sqsapi.Config{}, func(c *router.Config) {
			c.Topic = func(string) router.TopicConfig {
				return router.TopicConfig{Backoff: router.Backoff{Delays: []time.Duration{time.Hour}}}
			}
		})
		e.produce(0, "again")
		count := `,"AttributeNames":["ApproximateReceiveCount"]`
		m := e.receiveOne(count)
		require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
		ok(t, e.call("ChangeMessageVisibility", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+m.ReceiptHandle+`","VisibilityTimeout":0}`), nil)
		m = e.receiveOne(count)
		require.Equal(t, "2", m.Attributes["ApproximateReceiveCount"], "receivable at once, the receive counted")
		var out batchResult
		ok(t, e.call("ChangeMessageVisibilityBatch", `{"QueueUrl":"`+queueURL+`","Entries":[{"Id":"a","ReceiptHandle":"`+m.ReceiptHandle+`","VisibilityTimeout":0}]}`), &out)
		require.Empty(t, out.Failed)
		m = e.receiveOne(count)
		require.Equal(t, "3", m.Attributes["ApproximateReceiveCount"], "the batch entry too")

		e.h = mustNew(t, plainNode{e.node}, sqsapi.Config{})
		ok(t, e.call("ChangeMessageVisibility", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+m.ReceiptHandle+`","VisibilityTimeout":0}`), nil)
		require.Empty(t, e.receive(`{"QueueUrl":"`+queueURL+`"}`), "a plain nack waits the Backoff")
		time.Sleep(time.Hour)
		synctest.Wait()
		m = e.receiveOne(count)
		require.Equal(t, "4", m.Attributes["ApproximateReceiveCount"])
	})
}

// plainNode is a Node with none of the optional capabilities.
type plainNode struct{ sqsapi.Node }

// TestThrottled: one identity has at most MaxInFlight receives in flight; another identity
// is not held back by it.
func TestThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, sqsapi.Config{})
		e.h = mustNew(t, e.node, sqsapi.Config{MaxInFlight: 1, Identity: func(r *httptestRequestType) string { return r.Header.Get("X-Id") }})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			callCtx(ctx, e.h, "ReceiveMessage", `{"QueueUrl":"`+queueURL+`","WaitTimeSeconds":20}`)
		}()
		synctest.Wait()
		got := failed(t, e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`"}`))
		require.Equal(t, sqsError{403, "RequestThrottled", "RequestThrottled;Sender", got.Message}, got)
		req := httptestRequest("POST", `{"QueueUrl":"`+queueURL+`"}`)
		req.Header.Set("X-Amz-Target", "AmazonSQS.ReceiveMessage")
		req.Header.Set("X-Id", "other")
		ok(t, serve(e.h, req), nil)
		cancel()
		<-done
		ok(t, e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`"}`), nil)
	})
}
