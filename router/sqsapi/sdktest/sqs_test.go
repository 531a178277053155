package sdktest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
)

var ctx = context.Background()

// all asks for every system attribute.
var all = []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}

// TestSendReceiveDelete: GetQueueUrl, SendMessage, SendMessageBatch (an entry with message
// attributes among them), a receive of them all
// (the SDK checks each body's MD5), DeleteMessage and DeleteMessageBatch, with a stale and a
// malformed handle in the batch; then the queue is empty.
func TestSendReceiveDelete(t *testing.T) {
	b := newBroker(t)
	c := b.client(accessKey)
	url, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders")})
	require.NoError(t, err)
	require.Equal(t, b.queueURL, aws.ToString(url.QueueUrl))

	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url.QueueUrl, MessageBody: aws.String("first <&> é")})
	require.NoError(t, err)
	require.Equal(t, "0:0", aws.ToString(sent.MessageId))
	batch, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url.QueueUrl, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("second")},
		{Id: aws.String("b"), MessageBody: aws.String("third\n")},
		{Id: aws.String("c"), MessageBody: aws.String("with attributes"), MessageAttributes: map[string]types.MessageAttributeValue{
			"k": {DataType: aws.String("String"), StringValue: aws.String("v")}}},
	}})
	require.NoError(t, err)
	require.Len(t, batch.Successful, 3)
	require.Empty(t, batch.Failed)

	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageSystemAttributeNames: all})
	require.NoError(t, err)
	require.Len(t, got.Messages, 4)
	var bodies []string
	for _, m := range got.Messages {
		bodies = append(bodies, aws.ToString(m.Body))
		require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
		sentAt, err := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64)
		require.NoError(t, err)
		require.InDelta(t, time.Now().UnixMilli(), sentAt, float64(time.Minute.Milliseconds()))
		require.Contains(t, m.Attributes, "ApproximateFirstReceiveTimestamp")
	}
	require.Equal(t, "first <&> é", bodies[0])
	require.ElementsMatch(t, []string{"second", "third\n", "with attributes"}, bodies[1:], "a standard queue's batch, sent at once, in any order")
	require.Equal(t, aws.ToString(sent.MessageId), aws.ToString(got.Messages[0].MessageId))

	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url.QueueUrl, ReceiptHandle: got.Messages[0].ReceiptHandle})
	require.NoError(t, err)
	del, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: url.QueueUrl, Entries: []types.DeleteMessageBatchRequestEntry{
		{Id: aws.String("one"), ReceiptHandle: got.Messages[1].ReceiptHandle},
		{Id: aws.String("two"), ReceiptHandle: got.Messages[2].ReceiptHandle},
		{Id: aws.String("three"), ReceiptHandle: got.Messages[3].ReceiptHandle},
		{Id: aws.String("again"), ReceiptHandle: got.Messages[0].ReceiptHandle}, // deleted already: succeeds
		{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-handle")},
	}})
	require.NoError(t, err)
	require.Len(t, del.Successful, 4)
	require.Len(t, del.Failed, 1)
	require.Equal(t, "bad", aws.ToString(del.Failed[0].Id))
	require.Equal(t, "ReceiptHandleIsInvalid", aws.ToString(del.Failed[0].Code))
	require.True(t, del.Failed[0].SenderFault)

	empty, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url.QueueUrl, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Empty(t, empty.Messages)
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.NoError(t, err)
	for _, count := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		require.Equal(t, "0", attrs.Attributes[count], count)
	}
}

// TestLongPoll: a receive with WaitTimeSeconds parks on the empty queue and returns with
// the message a SendMessage brings, before its wait runs out.
func TestLongPoll(t *testing.T) {
	b := newBroker(t)
	consumer, producer := b.client(accessKey), b.client(accessKey)
	type result struct {
		out *sqs.ReceiveMessageOutput
		err error
	}
	done := make(chan result)
	start := time.Now()
	go func() {
		out, err := consumer.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.queueURL), WaitTimeSeconds: 20})
		done <- result{out, err}
	}()
	<-b.consumes // the receive reached the node
	_, err := producer.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.queueURL), MessageBody: aws.String("awaited")})
	require.NoError(t, err)
	r := <-done
	require.NoError(t, r.err)
	require.Len(t, r.out.Messages, 1)
	require.Equal(t, "awaited", aws.ToString(r.out.Messages[0].Body))
	require.Less(t, time.Since(start), 20*time.Second, "woken by the send, not by the wait's end")
}

// TestDelaySeconds: a message sent with a delay (its own, or its queue's) is received only
// once the delay is over, by a long-poll waiting for it; one delayed a minute is not received
// at once.
func TestDelaySeconds(t *testing.T) {
	b := newBroker(t)
	c := b.client(accessKey)
	q := aws.String(b.queueURL)
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("in a minute"), DelaySeconds: 60})
	require.NoError(t, err)
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Empty(t, out.Messages, "delayed a minute")
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	require.NoError(t, err)
	require.Equal(t, "1", attrs.Attributes["ApproximateNumberOfMessagesDelayed"])

	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: q, Attributes: map[string]string{"DelaySeconds": "1"}})
	require.NoError(t, err)
	sent := time.Now()
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("in a second")})
	require.NoError(t, err)
	out, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10, WaitTimeSeconds: 20})
	require.NoError(t, err)
	require.Len(t, out.Messages, 1)
	require.Equal(t, "in a second", aws.ToString(out.Messages[0].Body))
	require.GreaterOrEqual(t, time.Since(sent), time.Second, "not before its queue's delay")
}

// receiveWithin polls with long receives until a message comes, for at most budget.
func receiveWithin(t *testing.T, c *sqs.Client, queueURL string, budget time.Duration, max int32) []types.Message {
	t.Helper()
	for deadline := time.Now().Add(budget); time.Now().Before(deadline); {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: max,
			WaitTimeSeconds: 2, VisibilityTimeout: 30, MessageSystemAttributeNames: all})
		require.NoError(t, err)
		if len(out.Messages) > 0 {
			return out.Messages
		}
	}
	t.Fatalf("no message within %v", budget)
	return nil
}

// TestReceiveCountAfterTimeout: a message not deleted within its 1 s visibility timeout
// comes back with ApproximateReceiveCount 2 and the first receive's
// ApproximateFirstReceiveTimestamp, and its first handle is stale: a delete with it is
// refused as expired (InvalidParameterValue, as SQS answers an expired handle) and deletes
// nothing, a visibility change with it is MessageNotInflight; a malformed handle is
// ReceiptHandleIsInvalid.
func TestReceiveCountAfterTimeout(t *testing.T) {
	b := newBroker(t)
	c := b.client(accessKey)
	q := aws.String(b.queueURL)
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("v")})
	require.NoError(t, err)
	first, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, VisibilityTimeout: 1, MessageSystemAttributeNames: all})
	require.NoError(t, err)
	require.Len(t, first.Messages, 1)
	require.Equal(t, "1", first.Messages[0].Attributes["ApproximateReceiveCount"])

	again := receiveWithin(t, c, b.queueURL, 10*time.Second, 1)
	require.Equal(t, "2", again[0].Attributes["ApproximateReceiveCount"])
	require.Equal(t, aws.ToString(first.Messages[0].MessageId), aws.ToString(again[0].MessageId))
	require.Equal(t, first.Messages[0].Attributes["ApproximateFirstReceiveTimestamp"], again[0].Attributes["ApproximateFirstReceiveTimestamp"], "on every delivery: the first's")

	stale := first.Messages[0].ReceiptHandle
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q, ReceiptHandle: stale})
	requireCode(t, err, "InvalidParameterValue")
	require.ErrorContains(t, err, "The receipt handle has expired.")
	_, err = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: q, ReceiptHandle: stale, VisibilityTimeout: 0})
	var notInflight *types.MessageNotInflight
	require.ErrorAs(t, err, &notInflight)
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q, ReceiptHandle: aws.String("0:0")})
	var invalid *types.ReceiptHandleIsInvalid
	require.ErrorAs(t, err, &invalid)

	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	require.NoError(t, err)
	require.Equal(t, "1", attrs.Attributes["ApproximateNumberOfMessagesNotVisible"], "the stale delete deleted nothing")
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q, ReceiptHandle: again[0].ReceiptHandle})
	require.NoError(t, err)
	attrs, err = c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	require.NoError(t, err)
	require.Equal(t, "0", attrs.Attributes["ApproximateNumberOfMessagesNotVisible"])
}

// TestChangeVisibility: ChangeMessageVisibility to 0 makes a message visible at once (its
// receive counted, as SQS counts every receive); the batch changes several, answering a
// malformed handle in Failed.
func TestChangeVisibility(t *testing.T) {
	b := newBroker(t)
	c := b.client(accessKey)
	q := aws.String(b.queueURL)
	for i := range 3 {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 3, VisibilityTimeout: 60})
	require.NoError(t, err)
	require.Len(t, got.Messages, 3)

	_, err = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: q, ReceiptHandle: got.Messages[0].ReceiptHandle, VisibilityTimeout: 0})
	require.NoError(t, err)
	back, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10, VisibilityTimeout: 60, MessageSystemAttributeNames: all})
	require.NoError(t, err)
	require.Len(t, back.Messages, 1, "only the released one is visible")
	require.Equal(t, "0", aws.ToString(back.Messages[0].Body))
	require.Equal(t, "2", back.Messages[0].Attributes["ApproximateReceiveCount"])

	res, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: q, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
		{Id: aws.String("release"), ReceiptHandle: got.Messages[1].ReceiptHandle, VisibilityTimeout: 0},
		{Id: aws.String("keep"), ReceiptHandle: got.Messages[2].ReceiptHandle, VisibilityTimeout: 600},
		{Id: aws.String("stale"), ReceiptHandle: got.Messages[0].ReceiptHandle, VisibilityTimeout: 5},
		{Id: aws.String("bad"), ReceiptHandle: aws.String("x"), VisibilityTimeout: 5},
	}})
	require.NoError(t, err)
	require.Len(t, res.Successful, 2)
	codes := map[string]string{}
	for _, f := range res.Failed {
		codes[aws.ToString(f.Id)] = aws.ToString(f.Code)
	}
	require.Equal(t, map[string]string{"stale": "AWS.SimpleQueueService.MessageNotInflight", "bad": "ReceiptHandleIsInvalid"}, codes)
	back, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Len(t, back.Messages, 1)
	require.Equal(t, "1", aws.ToString(back.Messages[0].Body))
}

// TestEveryReceiveCounts: a consumer that gives up on a message with ChangeMessageVisibility
// 0 sees ApproximateReceiveCount 1, 2, ... 6 over six receives, as SQS counts them.
func TestEveryReceiveCounts(t *testing.T) {
	_, c, q := newClient(t)
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("poison")})
	require.NoError(t, err)
	for want := 1; want <= 6; want++ {
		got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MessageSystemAttributeNames: all})
		require.NoError(t, err)
		require.Len(t, got.Messages, 1)
		require.Equal(t, fmt.Sprint(want), got.Messages[0].Attributes["ApproximateReceiveCount"])
		_, err = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: q, ReceiptHandle: got.Messages[0].ReceiptHandle, VisibilityTimeout: 0})
		require.NoError(t, err)
	}
}

// TestErrors: the SDK's typed errors match (errors.As), and its error codes are SQS's.
func TestErrors(t *testing.T) {
	b := newBroker(t)
	c := b.client(accessKey)
	var missing *types.QueueDoesNotExist
	_, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
	require.ErrorAs(t, err, &missing)
	require.Equal(t, "AWS.SimpleQueueService.NonExistentQueue", missing.ErrorCode())
	_, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.srv.URL + "/sqs/nope")})
	require.ErrorAs(t, err, &missing)
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.srv.URL + "/sqs/nope"), MessageBody: aws.String("x")})
	require.ErrorAs(t, err, &missing)

	var unsupported *types.UnsupportedOperation
	_, err = c.AddPermission(ctx, &sqs.AddPermissionInput{QueueUrl: aws.String(b.queueURL), Label: aws.String("l"),
		AWSAccountIds: []string{"000000000000"}, Actions: []string{"SendMessage"}})
	require.ErrorAs(t, err, &unsupported)

	var api smithy.APIError
	_, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.queueURL), MaxNumberOfMessages: 11})
	require.ErrorAs(t, err, &api)
	require.Equal(t, "InvalidParameterValue", api.ErrorCode())
	require.Equal(t, smithy.FaultClient, api.ErrorFault())

	var invalid *types.InvalidMessageContents
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.queueURL), MessageBody: aws.String("\x01")})
	require.ErrorAs(t, err, &invalid)

	// A known key the host's Authorize refuses a send.
	_, err = b.client(readOnlyKey).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.queueURL), MessageBody: aws.String("x")})
	require.ErrorAs(t, err, &api)
	require.Equal(t, "AccessDenied", api.ErrorCode())
	_, err = b.client(readOnlyKey).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders")})
	require.NoError(t, err)
}

// TestConsumerDies: a consumer that receives and never deletes (it died) holds its
// messages for their visibility timeout only: another consumer gets them then, counted as
// second receives. One that disconnects in the middle of a long-poll holds nothing.
func TestConsumerDies(t *testing.T) {
	b := newBroker(t)
	q := aws.String(b.queueURL)
	producer, survivor := b.client(accessKey), b.client(accessKey)
	for i := range 4 {
		_, err := producer.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	doomed := b.client(accessKey)
	taken, err := doomed.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10, VisibilityTimeout: 1})
	require.NoError(t, err)
	require.Len(t, taken.Messages, 4)

	// A consumer whose long-poll is cut (its process died) while the queue looks empty.
	cut, cancel := context.WithCancel(ctx)
	b.drainConsumes()
	done := make(chan error)
	go func() {
		_, err := b.client(accessKey).ReceiveMessage(cut, &sqs.ReceiveMessageInput{QueueUrl: q, WaitTimeSeconds: 20, VisibilityTimeout: 60})
		done <- err
	}()
	<-b.consumes
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	seen := map[string]string{}
	for len(seen) < 4 {
		for _, m := range receiveWithin(t, survivor, b.queueURL, 10*time.Second, 10) {
			seen[aws.ToString(m.Body)] = m.Attributes["ApproximateReceiveCount"]
			_, err := survivor.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q, ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
	require.Equal(t, map[string]string{"0": "2", "1": "2", "2": "2", "3": "2"}, seen)

	// The cut long-poll held no lease: a new message is a first receive of the survivor's.
	_, err = producer.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("after")})
	require.NoError(t, err)
	m := receiveWithin(t, survivor, b.queueURL, 10*time.Second, 1)
	require.Equal(t, "after", aws.ToString(m[0].Body))
	require.Equal(t, "1", m[0].Attributes["ApproximateReceiveCount"])
}

// TestBinaryValue: a record whose value is not text (a host's own producer wrote it) is
// received as its base64, and the SDK's MD5 check of the body passes.
func TestBinaryValue(t *testing.T) {
	b := newBroker(t)
	off := b.logs.Log("orders", 0).Append(nil, []byte{0xff, 0x00, 0xfe}, time.Now())
	b.node.Appended("orders", 0, off+1)
	got, err := b.client(accessKey).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.queueURL)})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	require.Equal(t, "/wD+", aws.ToString(got.Messages[0].Body))
}
