package sdktest

import (
	"cmp"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// attributesMD5 is MD5OfMessageAttributes as AWS's SQS developer guide defines it, written
// here apart from the handler's so that the two check each other: the attributes in order
// of name, each as its name and data type (a 4-byte big-endian length, then the UTF-8
// bytes), a transport byte (1 for a StringValue, 2 for a BinaryValue) and the value, length
// first. (The SDK v2 checks only the bodies' MD5s, so the test checks this one.)
func attributesMD5(attrs map[string]types.MessageAttributeValue) string {
	names := slices.SortedFunc(func(yield func(string) bool) {
		for name := range attrs {
			if !yield(name) {
				return
			}
		}
	}, cmp.Compare)
	field := func(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }
	h := md5.New()
	for _, name := range names {
		a := attrs[name]
		h.Write(field([]byte(name)))
		h.Write(field([]byte(aws.ToString(a.DataType))))
		if strings.HasPrefix(aws.ToString(a.DataType), "Binary") {
			h.Write([]byte{2})
			h.Write(field(a.BinaryValue))
		} else {
			h.Write([]byte{1})
			h.Write(field([]byte(aws.ToString(a.StringValue))))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestMessageAttributes: SendMessage and SendMessageBatch with message attributes answer
// their MD5 as AWS computes it; the attributes reach the record as headers; ReceiveMessage
// answers those MessageAttributeNames asks for (All, names, a prefix) with their data types,
// and the MD5 the send answered; a record a host's producer wrote with headers is received with
// them as attributes.
func TestMessageAttributes(t *testing.T) {
	b := newBroker(t)
	c := b.client(accessKey)
	queue := aws.String(b.queueURL)
	attrs := map[string]types.MessageAttributeValue{
		"trace.id":   {DataType: aws.String("String"), StringValue: aws.String("abc-123 <é>")},
		"trace.span": {DataType: aws.String("String"), StringValue: aws.String("7")},
		"count":      {DataType: aws.String("Number"), StringValue: aws.String("42")},
		"blob":       {DataType: aws.String("Binary"), BinaryValue: []byte{0xff, 0x00, 0xfe}},
	}
	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: queue, MessageBody: aws.String("with attributes"), MessageAttributes: attrs})
	require.NoError(t, err)
	require.Equal(t, attributesMD5(attrs), aws.ToString(sent.MD5OfMessageAttributes))
	batch, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: queue, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("batched"), MessageAttributes: map[string]types.MessageAttributeValue{"count": attrs["count"]}},
	}})
	require.NoError(t, err)
	require.Len(t, batch.Successful, 1)
	require.Equal(t, attributesMD5(map[string]types.MessageAttributeValue{"count": attrs["count"]}), aws.ToString(batch.Successful[0].MD5OfMessageAttributes))

	rec, err := b.logs.Log("orders", 0).Read(0)
	require.NoError(t, err)
	require.Equal(t, []router.Header{
		{Key: "blob", Value: []byte{0xff, 0x00, 0xfe}}, {Key: "count", Value: []byte("42")},
		{Key: "trace.id", Value: []byte("abc-123 <é>")}, {Key: "trace.span", Value: []byte("7")},
		{Key: "AWS.SQS.DataType.blob", Value: []byte("Binary")}, {Key: "AWS.SQS.DataType.count", Value: []byte("Number")},
	}, rec.Headers, "the attributes, in order of name, then the types other than String")

	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: queue, MaxNumberOfMessages: 1, MessageAttributeNames: []string{"All"}})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	m := got.Messages[0]
	require.Len(t, m.MessageAttributes, 4)
	require.Equal(t, "Number", aws.ToString(m.MessageAttributes["count"].DataType), "the data type is kept")
	require.Equal(t, "42", aws.ToString(m.MessageAttributes["count"].StringValue))
	require.Equal(t, "abc-123 <é>", aws.ToString(m.MessageAttributes["trace.id"].StringValue))
	require.Equal(t, "Binary", aws.ToString(m.MessageAttributes["blob"].DataType))
	require.Equal(t, []byte{0xff, 0x00, 0xfe}, m.MessageAttributes["blob"].BinaryValue)
	require.Equal(t, attributesMD5(m.MessageAttributes), aws.ToString(m.MD5OfMessageAttributes))
	require.Equal(t, aws.ToString(sent.MD5OfMessageAttributes), aws.ToString(m.MD5OfMessageAttributes), "the MD5 the send answered")

	got, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: queue, MaxNumberOfMessages: 1, MessageAttributeNames: []string{"trace.*", "nope"}})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	m = got.Messages[0]
	require.Equal(t, "batched", aws.ToString(m.Body))
	require.Empty(t, m.MessageAttributes, "the batched message has no trace.* attribute")
	require.Nil(t, m.MD5OfMessageAttributes)

	// A record a host's own producer wrote: a key repeated, binary values.
	off := b.logs.Log("orders", 0).AppendRecord(router.Record{Value: []byte("from kafka"), Timestamp: time.Now(), Headers: []router.Header{
		{Key: "trace.id", Value: []byte("first")}, {Key: "trace.id", Value: []byte("last")}, {Key: "raw", Value: []byte{0xc3, 0x28}},
	}})
	b.node.Appended("orders", 0, off+1)
	got, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: queue, MaxNumberOfMessages: 1, MessageAttributeNames: []string{"trace.id", "raw"}})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	m = got.Messages[0]
	require.Equal(t, "last", aws.ToString(m.MessageAttributes["trace.id"].StringValue))
	require.Equal(t, "Binary", aws.ToString(m.MessageAttributes["raw"].DataType))
	require.Equal(t, attributesMD5(m.MessageAttributes), aws.ToString(m.MD5OfMessageAttributes))
}

// TestAttributeTypes: every data type, custom ones included, comes back as sent through the
// SDK, a Binary of valid UTF-8 a Binary still, with the MD5 the send answered; AWSTraceHeader
// is kept and answered; a 1 MiB message is sent and received whole, one byte more refused.
func TestAttributeTypes(t *testing.T) {
	_, c, queue := newClient(t)
	attrs := map[string]types.MessageAttributeValue{
		"n":     {DataType: aws.String("Number.float"), StringValue: aws.String("1.5")},
		"s":     {DataType: aws.String("String.json"), StringValue: aws.String("{}")},
		"b":     {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1}},
		"bgif":  {DataType: aws.String("Binary.gif"), BinaryValue: []byte("GIF89a")},
		"plain": {DataType: aws.String("String"), StringValue: aws.String("x")},
	}
	const trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: queue, MessageBody: aws.String("typed"), MessageAttributes: attrs,
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(trace)},
		}})
	require.NoError(t, err)
	require.Equal(t, attributesMD5(attrs), aws.ToString(sent.MD5OfMessageAttributes))
	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: queue, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	m := got.Messages[0]
	for name, a := range attrs {
		require.Equal(t, aws.ToString(a.DataType), aws.ToString(m.MessageAttributes[name].DataType), name)
	}
	require.Equal(t, []byte{0, 1}, m.MessageAttributes["b"].BinaryValue)
	require.Equal(t, aws.ToString(sent.MD5OfMessageAttributes), aws.ToString(m.MD5OfMessageAttributes))
	require.Equal(t, trace, m.Attributes["AWSTraceHeader"])

	body := strings.Repeat("m", 1<<20)
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: queue, MessageBody: aws.String(body)})
	require.NoError(t, err)
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: queue, MessageBody: aws.String(body + "m")})
	require.ErrorContains(t, err, "InvalidParameterValue")
	got, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: queue})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	require.Equal(t, body, aws.ToString(got.Messages[0].Body))
}
