package sdktest

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// TestQueueManagement: the SDK creates a queue with attributes and tags (again: its URL;
// with another attribute: *types.QueueNameExists), lists queues a page at a time with its
// paginator, reads and sets the attributes, which act (a send over MaximumMessageSize is
// refused), tags and untags, purges (again at once: *types.PurgeQueueInProgress) and deletes
// (created again at once: *types.QueueDeletedRecently); bad attributes are the SDK's typed
// errors.
func TestQueueManagement(t *testing.T) {
	_, c, _ := newClient(t)
	in := &sqs.CreateQueueInput{QueueName: aws.String("jobs"),
		Attributes: map[string]string{"VisibilityTimeout": "60", "MaximumMessageSize": "1024"}, Tags: map[string]string{"team": "a"}}
	created, err := c.CreateQueue(ctx, in)
	require.NoError(t, err)
	q := created.QueueUrl
	again, err := c.CreateQueue(ctx, in)
	require.NoError(t, err)
	require.Equal(t, aws.ToString(q), aws.ToString(again.QueueUrl))
	_, err = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs"), Attributes: map[string]string{"VisibilityTimeout": "61"}})
	var exists *types.QueueNameExists
	require.ErrorAs(t, err, &exists)

	for _, n := range []string{"jobs-2", "jobs-3", "other"} {
		_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(n)})
		require.NoError(t, err)
	}
	var urls []string
	pages := sqs.NewListQueuesPaginator(c, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("jobs"), MaxResults: aws.Int32(2)})
	n := 0
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		require.NoError(t, err)
		urls = append(urls, page.QueueUrls...)
		n++
	}
	require.Equal(t, 2, n, "two pages")
	require.Equal(t, []string{aws.ToString(q), aws.ToString(q) + "-2", aws.ToString(q) + "-3"}, urls)

	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.NoError(t, err)
	require.Equal(t, "60", attrs.Attributes["VisibilityTimeout"])
	require.Equal(t, "1024", attrs.Attributes["MaximumMessageSize"])
	require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:jobs", attrs.Attributes["QueueArn"])
	_, err = strconv.ParseInt(attrs.Attributes["CreatedTimestamp"], 10, 64)
	require.NoError(t, err)

	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String(string(make([]byte, 1025)))})
	require.Error(t, err, "over MaximumMessageSize")
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: q, Attributes: map[string]string{"MaximumMessageSize": "4096"}})
	require.NoError(t, err)
	big := make([]byte, 2000)
	for i := range big {
		big[i] = 'x'
	}
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String(string(big))})
	require.NoError(t, err)

	var badValue *types.InvalidAttributeValue
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: q, Attributes: map[string]string{"ReceiveMessageWaitTimeSeconds": "21"}})
	require.ErrorAs(t, err, &badValue)
	var badName *types.InvalidAttributeName
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: q, Attributes: map[string]string{"Bogus": "1"}})
	require.ErrorAs(t, err, &badName)

	_, err = c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: q, Tags: map[string]string{"env": "test"}})
	require.NoError(t, err)
	_, err = c.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: q, TagKeys: []string{"team"}})
	require.NoError(t, err)
	tags, err := c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: q})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"env": "test"}, tags.Tags)

	_, err = c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: q})
	require.NoError(t, err)
	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Empty(t, got.Messages, "purged")
	_, err = c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: q})
	var inProgress *types.PurgeQueueInProgress
	require.ErrorAs(t, err, &inProgress, "one purge in 60 s")

	_, err = c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q})
	require.NoError(t, err)
	var missing *types.QueueDoesNotExist
	_, err = c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("jobs")})
	require.ErrorAs(t, err, &missing)
	_, err = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	var recently *types.QueueDeletedRecently
	require.ErrorAs(t, err, &recently, "a deleted queue's name is refused for 60 s")
	list, err := c.ListQueues(ctx, &sqs.ListQueuesInput{})
	require.NoError(t, err)
	require.Len(t, list.QueueUrls, 4, "orders, jobs-2, jobs-3, other")
}
