package sdktest

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
)

// TestFIFOQueue: the Go SDK creates a FIFO queue, sends a batch of two interleaved groups,
// receives them in each group's order with their FIFO attributes, finds the groups held
// while their messages are in flight, deletes them, and has a resend within the
// deduplication window answered with the original's MessageId and not delivered again; a
// receive retried with its ReceiveRequestAttemptId answers the same messages and handles.
func TestFIFOQueue(t *testing.T) {
	b := newBroker(t)
	c := b.client(accessKey)
	_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo")})
	requireCode(t, err, "InvalidParameterValue")
	created, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo"), Attributes: map[string]string{
		string(types.QueueAttributeNameFifoQueue): "true"}})
	require.NoError(t, err)
	q := created.QueueUrl
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.NoError(t, err)
	require.Equal(t, "true", attrs.Attributes["FifoQueue"])
	require.Equal(t, "false", attrs.Attributes["ContentBasedDeduplication"])
	require.Equal(t, "queue", attrs.Attributes["DeduplicationScope"])
	require.Equal(t, "perQueue", attrs.Attributes["FifoThroughputLimit"])

	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("x")})
	requireCode(t, err, "MissingParameter")
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("x"), MessageGroupId: aws.String("a")})
	requireCode(t, err, "InvalidParameterValue")

	var entries []types.SendMessageBatchRequestEntry
	for _, m := range [][2]string{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"b", "b2"}, {"a", "a3"}} {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(m[1]), MessageBody: aws.String(m[1]),
			MessageGroupId: aws.String(m[0]), MessageDeduplicationId: aws.String(m[1])})
	}
	batch, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q, Entries: entries})
	require.NoError(t, err)
	require.Empty(t, batch.Failed)
	require.Len(t, batch.Successful, 5)
	seq := map[string]string{}
	for _, s := range batch.Successful {
		require.NotEmpty(t, aws.ToString(s.SequenceNumber))
		seq[aws.ToString(s.MessageId)] = aws.ToString(s.SequenceNumber)
	}

	// A resend of a1 within the window: a1's MessageId and SequenceNumber, nothing sent.
	dup, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("a1 again"),
		MessageGroupId: aws.String("a"), MessageDeduplicationId: aws.String("a1")})
	require.NoError(t, err)
	require.Equal(t, aws.ToString(batch.Successful[0].MessageId), aws.ToString(dup.MessageId))
	require.Equal(t, aws.ToString(batch.Successful[0].SequenceNumber), aws.ToString(dup.SequenceNumber))

	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10, VisibilityTimeout: 30,
		MessageSystemAttributeNames: all, ReceiveRequestAttemptId: aws.String("attempt-1")})
	require.NoError(t, err)
	order := map[string][]string{}
	for _, m := range got.Messages {
		g := m.Attributes["MessageGroupId"]
		order[g] = append(order[g], aws.ToString(m.Body))
		require.Equal(t, aws.ToString(m.Body), m.Attributes["MessageDeduplicationId"])
		require.Equal(t, seq[aws.ToString(m.MessageId)], m.Attributes["SequenceNumber"])
	}
	require.Equal(t, map[string][]string{"a": {"a1", "a2", "a3"}, "b": {"b1", "b2"}}, order, "one receive: each group in order")

	// Both groups are in flight: nothing more until they are deleted.
	none, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Empty(t, none.Messages)

	// The receive retried with its ReceiveRequestAttemptId (its answer lost, say): the same
	// messages and receipt handles.
	retried, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10, VisibilityTimeout: 30,
		MessageSystemAttributeNames: all, ReceiveRequestAttemptId: aws.String("attempt-1")})
	require.NoError(t, err)
	require.Len(t, retried.Messages, len(got.Messages))
	for i, m := range retried.Messages {
		require.Equal(t, aws.ToString(got.Messages[i].MessageId), aws.ToString(m.MessageId))
		require.Equal(t, aws.ToString(got.Messages[i].ReceiptHandle), aws.ToString(m.ReceiptHandle))
		require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
	}
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("a4"), MessageGroupId: aws.String("a"), MessageDeduplicationId: aws.String("a4")})
	require.NoError(t, err)
	none, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Empty(t, none.Messages, "a is held: a4 waits")
	var dels []types.DeleteMessageBatchRequestEntry
	for i, m := range got.Messages {
		dels = append(dels, types.DeleteMessageBatchRequestEntry{Id: aws.String(string(rune('a' + i))), ReceiptHandle: m.ReceiptHandle})
	}
	del, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: q, Entries: dels})
	require.NoError(t, err)
	require.Empty(t, del.Failed)

	next, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10, MessageSystemAttributeNames: all})
	require.NoError(t, err)
	require.Len(t, next.Messages, 1, "a4 only: the resend of a1 was not sent")
	require.Equal(t, "a4", aws.ToString(next.Messages[0].Body))
	// Given back, it comes again, counted twice.
	_, err = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: q, ReceiptHandle: next.Messages[0].ReceiptHandle, VisibilityTimeout: 0})
	require.NoError(t, err)
	again, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10, MessageSystemAttributeNames: all})
	require.NoError(t, err)
	require.Len(t, again.Messages, 1)
	require.Equal(t, "2", again.Messages[0].Attributes["ApproximateReceiveCount"])
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q, ReceiptHandle: again.Messages[0].ReceiptHandle})
	require.NoError(t, err)

	// Content-based deduplication, set on the queue.
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: q, Attributes: map[string]string{"ContentBasedDeduplication": "true"}})
	require.NoError(t, err)
	one, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("same"), MessageGroupId: aws.String("c")})
	require.NoError(t, err)
	two, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("same"), MessageGroupId: aws.String("c")})
	require.NoError(t, err)
	require.Equal(t, aws.ToString(one.MessageId), aws.ToString(two.MessageId))

	// A standard queue refuses a deduplication id, as SQS does.
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.queueURL), MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")})
	requireCode(t, err, "InvalidParameterValue")
}

// requireCode requires err to be an API error of code.
func requireCode(t *testing.T, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, code, ae.ErrorCode(), ae.ErrorMessage())
}
