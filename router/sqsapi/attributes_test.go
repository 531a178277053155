package sqsapi_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/sqsapi"
)

// produceRecordFunc is a Config.ProduceRecord that appends to the env's log of the topic's
// partition 0, headers and all.
func (e *env) produceRecordFunc() func(ctx context.Context, topic string, rec router.Record) (int32, int64, error) {
	return func(ctx context.Context, topic string, rec router.Record) (int32, int64, error) {
		if topic != "orders" {
			return 0, 0, router.ErrUnknownTopic
		}
		e.mu.Lock()
		e.produced = append(e.produced, topic+"/"+string(rec.Value))
		e.mu.Unlock()
		rec.Timestamp = sentAt
		off := e.logs.Log(topic, 0).AppendRecord(rec)
		e.node.Appended(topic, 0, off+1)
		return 0, off, nil
	}
}

// attributed is a received message with its message attributes, as an SDK decodes it.
type attributed struct {
	MessageId              string
	MD5OfMessageAttributes string
	MessageAttributes      map[string]struct {
		DataType    string
		StringValue *string
		BinaryValue []byte
	}
}

func (e *env) receiveAttributed(names string) attributed {
	e.t.Helper()
	var out struct{ Messages []attributed }
	ok(e.t, e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`","MessageAttributeNames":`+names+`}`), &out)
	require.Len(e.t, out.Messages, 1)
	return out.Messages[0]
}

// TestSendAttributesReachTheRecord: SendMessage's MessageAttributes become the record's
// headers, in order of name (a String's or Number's text, a Binary's bytes), with a header
// of its data type for each of another type than String, and the response carries their MD5
// as SQS computes it (the values other implementations publish); a receive asking for them
// answers them back with their data types, and the MD5 the send answered.
func TestSendAttributesReachTheRecord(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{ProduceRecord: e.produceRecordFunc()})
	var out struct{ MessageId, MD5OfMessageBody, MD5OfMessageAttributes string }
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"x","MessageAttributes":{"timestamp":{"DataType":"Number","StringValue":"1493147359900"}}}`), &out)
	require.Equal(t, "235c5c510d26fb653d073faed50ae77c", out.MD5OfMessageAttributes)
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"y","MessageAttributes":{`+
		`"SellerName":{"DataType":"String","StringValue":"Example Store"},`+
		`"blob":{"DataType":"Binary","BinaryValue":"`+base64.StdEncoding.EncodeToString([]byte{0xff, 0, 1})+`"},`+
		`"count":{"DataType":"Number.int","StringValue":"-12.5e3"}}}`), &out)
	rec, err := e.logs.Log("orders", 0).Read(1)
	require.NoError(t, err)
	require.Equal(t, []router.Header{
		{Key: "SellerName", Value: []byte("Example Store")}, {Key: "blob", Value: []byte{0xff, 0, 1}}, {Key: "count", Value: []byte("-12.5e3")},
		{Key: "AWS.SQS.DataType.blob", Value: []byte("Binary")}, {Key: "AWS.SQS.DataType.count", Value: []byte("Number.int")},
	}, rec.Headers)

	first := e.receiveAttributed(`["All"]`)
	require.Equal(t, "0:0", first.MessageId)
	require.Equal(t, "Number", first.MessageAttributes["timestamp"].DataType, "the data type is kept")
	require.Equal(t, "1493147359900", *first.MessageAttributes["timestamp"].StringValue)
	require.Equal(t, "235c5c510d26fb653d073faed50ae77c", first.MD5OfMessageAttributes, "the MD5 the send answered")
	second := e.receiveAttributed(`["SellerName"]`)
	require.Len(t, second.MessageAttributes, 1)
	require.Equal(t, "Example Store", *second.MessageAttributes["SellerName"].StringValue)
	require.Equal(t, "cd28f3b68aeee4b2eac9c66f2f694b58", second.MD5OfMessageAttributes)
}

// TestAttributeTypesRoundTrip: every data type comes back as it was sent, custom suffixes
// included, a Binary of valid UTF-8 (even \x00\x01) a Binary still; the MD5 a receive answers
// is the one the send answered; AWSTraceHeader is kept, answered as a system attribute, and
// takes no message attribute's place.
func TestAttributeTypesRoundTrip(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{ProduceRecord: e.produceRecordFunc()})
	b64 := func(b string) string { return base64.StdEncoding.EncodeToString([]byte(b)) }
	attrs := `{"s":{"DataType":"String","StringValue":"text"},` +
		`"s.custom":{"DataType":"String.json","StringValue":"{}"},` +
		`"n":{"DataType":"Number","StringValue":"12"},` +
		`"nf":{"DataType":"Number.float","StringValue":"1.5"},` +
		`"b":{"DataType":"Binary","BinaryValue":"` + b64("\x00\x01") + `"},` +
		`"butf8":{"DataType":"Binary","BinaryValue":"` + b64("plain") + `"},` +
		`"bcustom":{"DataType":"Binary.gif","BinaryValue":"` + b64("GIF89a") + `"}}`
	var sent struct{ MD5OfMessageAttributes, MD5OfMessageSystemAttributes string }
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"x","MessageAttributes":`+attrs+
		`,"MessageSystemAttributes":{"AWSTraceHeader":{"DataType":"String","StringValue":"Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"}}}`), &sent)
	require.Len(t, sent.MD5OfMessageSystemAttributes, 32)

	var out struct {
		Messages []struct {
			attributed
			Attributes map[string]string
		}
	}
	ok(t, e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`","MessageAttributeNames":["All"],"MessageSystemAttributeNames":["All"]}`), &out)
	require.Len(t, out.Messages, 1)
	m := out.Messages[0]
	require.Equal(t, sent.MD5OfMessageAttributes, m.MD5OfMessageAttributes)
	types := map[string]string{}
	for name, a := range m.MessageAttributes {
		types[name] = a.DataType
	}
	require.Equal(t, map[string]string{"s": "String", "s.custom": "String.json", "n": "Number", "nf": "Number.float",
		"b": "Binary", "butf8": "Binary", "bcustom": "Binary.gif"}, types)
	require.Equal(t, []byte("\x00\x01"), m.MessageAttributes["b"].BinaryValue)
	require.Equal(t, []byte("plain"), m.MessageAttributes["butf8"].BinaryValue)
	require.Nil(t, m.MessageAttributes["butf8"].StringValue)
	require.Equal(t, "1.5", *m.MessageAttributes["nf"].StringValue)
	require.Equal(t, "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", m.Attributes["AWSTraceHeader"])

	// Without a trace header, none is answered; a system attribute SQS does not have, or a
	// trace header of another type, is refused and sends nothing.
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"y"}`), nil)
	out.Messages = nil
	ok(t, e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`","MessageSystemAttributeNames":["All"]}`), &out)
	require.NotContains(t, out.Messages[0].Attributes, "AWSTraceHeader")
	for _, bad := range []string{
		`{"Other":{"DataType":"String","StringValue":"v"}}`,
		`{"AWSTraceHeader":{"DataType":"Number","StringValue":"1"}}`,
		`{"AWSTraceHeader":{"DataType":"String"}}`,
	} {
		got := failed(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"z","MessageSystemAttributes":`+bad+`}`))
		require.Equal(t, "InvalidParameterValue", got.Type, bad)
	}
	require.Len(t, e.produced, 2, "the refused sends sent nothing")
}

// TestMessageSize: a message of 1 MiB (1,048,576 bytes, its attributes included) is sent and
// received whole; one byte more is InvalidParameterValue, and a batch over 1 MiB together
// BatchRequestTooLong, with nothing sent.
func TestMessageSize(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{ProduceRecord: e.produceRecordFunc()})
	require.Equal(t, 1048576, sqsapi.MaxMessageBytes)
	body := strings.Repeat("m", sqsapi.MaxMessageBytes-len("k")-len("String")-len("v"))
	attr := `,"MessageAttributes":{"k":{"DataType":"String","StringValue":"v"}}`
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"`+body+`"`+attr+`}`), nil)
	got := failed(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"`+body+`m"`+attr+`}`))
	require.Equal(t, sqsError{400, "InvalidParameterValue", "InvalidParameterValue;Sender", got.Message}, got)
	got = failed(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"`+strings.Repeat("m", sqsapi.MaxMessageBytes+1)+`"}`))
	require.Equal(t, "InvalidParameterValue", got.Type)
	half := strings.Repeat("h", sqsapi.MaxMessageBytes/2)
	got = failed(t, e.call("SendMessageBatch", `{"QueueUrl":"`+queueURL+`","Entries":[{"Id":"a","MessageBody":"`+half+`"},{"Id":"b","MessageBody":"`+half+`x"}]}`))
	require.Equal(t, "BatchRequestTooLong", got.Type)
	require.Len(t, e.produced, 1)

	var out struct{ Messages []message }
	ok(t, e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`"}`), &out)
	require.Len(t, out.Messages, 1)
	require.Equal(t, body, out.Messages[0].Body)
	require.Equal(t, md5hex(body), out.Messages[0].MD5OfBody)
}

// TestReceiveSelectsAttributes: MessageAttributeNames selects among a record's headers:
// All or .* every one, a name that one, "prefix.*" every name beginning with "prefix.",
// none of them none (no MessageAttributes, no MD5). A repeated key answers its last value;
// a header no SQS client could name (empty, not UTF-8) is left out, and so are the headers
// that carry data types and the trace header, whose types are followed where SQS could
// have sent them.
func TestReceiveSelectsAttributes(t *testing.T) {
	e := newEnv(t, sqsapi.Config{}, func(c *router.Config) {})
	headers := []router.Header{
		{Key: "trace.id", Value: []byte("t1")}, {Key: "trace.span", Value: []byte("s1")},
		{Key: "retry", Value: []byte("1")}, {Key: "retry", Value: []byte("2")},
		{Key: "bin", Value: []byte{0xc3, 0x28}}, {Key: "", Value: []byte("anonymous")}, {Key: "\xff", Value: []byte("bad")},
		{Key: "tracer", Value: []byte("not under trace.")},
		{Key: "AWS.SQS.DataType.retry", Value: []byte("Number.int")}, {Key: "AWS.SQS.DataType.bin", Value: []byte("String")},
		{Key: "AWS.SQS.DataType.tracer", Value: []byte("Date")}, {Key: "AWS.SQS.AWSTraceHeader", Value: []byte("Root=1")},
	}
	for _, tc := range []struct {
		names string
		want  []string
	}{
		{`["All"]`, []string{"bin", "retry", "trace.id", "trace.span", "tracer"}},
		{`[".*"]`, []string{"bin", "retry", "trace.id", "trace.span", "tracer"}},
		{`["trace.*"]`, []string{"trace.id", "trace.span"}},
		{`["retry","bin","nope"]`, []string{"bin", "retry"}},
		{`[]`, nil},
		{`["nope"]`, nil},
	} {
		t.Run(tc.names, func(t *testing.T) {
			log := e.logs.Log("orders", 0)
			off := log.AppendRecord(router.Record{Value: []byte("v"), Headers: headers})
			e.node.Appended("orders", 0, off+1)
			raw := e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`","MessageAttributeNames":`+tc.names+`}`)
			body := raw.Body.String()
			var out struct{ Messages []attributed }
			ok(t, raw, &out)
			require.Len(t, out.Messages, 1)
			m := out.Messages[0]
			for i := 1; i < len(tc.want); i++ { // written in order of name
				require.Less(t, strings.Index(body, `"`+tc.want[i-1]+`":{`), strings.Index(body, `"`+tc.want[i]+`":{`))
			}
			var got []string
			for name := range m.MessageAttributes {
				got = append(got, name)
			}
			require.ElementsMatch(t, tc.want, got)
			if tc.want == nil {
				require.Empty(t, m.MD5OfMessageAttributes)
				return
			}
			require.Len(t, m.MD5OfMessageAttributes, 32)
			if a, ok := m.MessageAttributes["retry"]; ok {
				require.Equal(t, "2", *a.StringValue, "the last of a repeated key")
				require.Equal(t, "Number.int", a.DataType, "its type header's")
			}
			if a, ok := m.MessageAttributes["tracer"]; ok {
				require.Equal(t, "String", a.DataType, "a type SQS does not have is not followed")
			}
			if a, ok := m.MessageAttributes["bin"]; ok {
				require.Equal(t, "Binary", a.DataType, "a String type header is not followed for a value that is not UTF-8")
				require.Equal(t, []byte{0xc3, 0x28}, a.BinaryValue)
			}
		})
	}
}

// TestSendAttributeRefusals: attributes SQS refuses are refused, and nothing is produced;
// with Produce, which cannot keep attributes, any are refused.
func TestSendAttributeRefusals(t *testing.T) {
	many := make([]string, 11)
	for i := range many {
		many[i] = `"a` + itoa(i) + `":{"DataType":"String","StringValue":"v"}`
	}
	for _, tc := range []struct {
		name, attrs, code string
	}{
		{"eleven", strings.Join(many, ","), "InvalidParameterValue"},
		{"a name with a space", `"a b":{"DataType":"String","StringValue":"v"}`, "InvalidParameterValue"},
		{"a name opening with a period", `".a":{"DataType":"String","StringValue":"v"}`, "InvalidParameterValue"},
		{"a name of two periods in a row", `"a..b":{"DataType":"String","StringValue":"v"}`, "InvalidParameterValue"},
		{"a name reserved for AWS", `"aws.x":{"DataType":"String","StringValue":"v"}`, "InvalidParameterValue"},
		{"a name reserved for Amazon", `"Amazon.x":{"DataType":"String","StringValue":"v"}`, "InvalidParameterValue"},
		{"a name too long", `"` + strings.Repeat("n", 257) + `":{"DataType":"String","StringValue":"v"}`, "InvalidParameterValue"},
		{"an empty name", `"":{"DataType":"String","StringValue":"v"}`, "InvalidParameterValue"},
		{"no data type", `"a":{"StringValue":"v"}`, "InvalidParameterValue"},
		{"an unknown data type", `"a":{"DataType":"Date","StringValue":"v"}`, "InvalidParameterValue"},
		{"an empty custom type", `"a":{"DataType":"String.","StringValue":"v"}`, "InvalidParameterValue"},
		{"a string without a value", `"a":{"DataType":"String"}`, "InvalidParameterValue"},
		{"an empty string", `"a":{"DataType":"String","StringValue":""}`, "InvalidParameterValue"},
		{"a binary without a value", `"a":{"DataType":"Binary"}`, "InvalidParameterValue"},
		{"a binary with a string value", `"a":{"DataType":"Binary","StringValue":"v","BinaryValue":"AA=="}`, "InvalidParameterValue"},
		{"a number that is not one", `"a":{"DataType":"Number","StringValue":"twelve"}`, "InvalidParameterValue"},
		{"a number that is infinite", `"a":{"DataType":"Number","StringValue":"Inf"}`, "InvalidParameterValue"},
		{"list values", `"a":{"DataType":"String","StringValue":"v","StringListValues":["x"]}`, "InvalidParameterValue"},
		{"a control character", `"a":{"DataType":"String","StringValue":"\u0001"}`, "InvalidMessageContents"},
		{"a body and attributes too long together", `"a":{"DataType":"String","StringValue":"` + strings.Repeat("v", sqsapi.MaxMessageBytes) + `"}`, "InvalidParameterValue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, sqsapi.Config{})
			e.h = mustNew(t, e.node, sqsapi.Config{ProduceRecord: e.produceRecordFunc()})
			require.Equal(t, tc.code, failed(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"x","MessageAttributes":{`+tc.attrs+`}}`)).Type)
			require.Empty(t, e.produced)
		})
	}
	_, err := sqsapi.New(nil, sqsapi.Config{})
	require.Error(t, err)
	e := newEnv(t, sqsapi.Config{})
	_, err = sqsapi.New(e.node, sqsapi.Config{Queues: func(string) (string, bool) { return "", false }, BaseURL: baseURL,
		Produce: e.produceFunc(), ProduceRecord: e.produceRecordFunc()})
	require.ErrorContains(t, err, "not both")
}

// TestSendMessageBatchAttributes: each entry's attributes reach its record, and its
// MD5OfMessageAttributes is answered with it.
func TestSendMessageBatchAttributes(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{ProduceRecord: e.produceRecordFunc()})
	var out struct {
		Successful []struct{ Id, MD5OfMessageAttributes string }
	}
	ok(t, e.call("SendMessageBatch", `{"QueueUrl":"`+queueURL+`","Entries":[`+
		`{"Id":"a","MessageBody":"x","MessageAttributes":{"SellerName":{"DataType":"String","StringValue":"Example Store"}}},`+
		`{"Id":"b","MessageBody":"y"}]}`), &out)
	require.Len(t, out.Successful, 2)
	require.Equal(t, "cd28f3b68aeee4b2eac9c66f2f694b58", out.Successful[0].MD5OfMessageAttributes)
	require.Empty(t, out.Successful[1].MD5OfMessageAttributes)
	for off := range int64(2) { // the entries were sent at once: in either order
		rec, err := e.logs.Log("orders", 0).Read(off)
		require.NoError(t, err)
		if string(rec.Value) == "x" {
			require.Equal(t, []router.Header{{Key: "SellerName", Value: []byte("Example Store")}}, rec.Headers)
		} else {
			require.Empty(t, rec.Headers)
		}
	}
}
