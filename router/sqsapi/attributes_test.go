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
// headers, in order of name (a String's or Number's text, a Binary's bytes), and the response
// carries their MD5 as SQS computes it (the values other implementations publish); a receive
// asking for them answers them back, String when the value is UTF-8 and Binary otherwise,
// with the MD5 of what it answers.
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
	require.Equal(t, []router.Header{{Key: "SellerName", Value: []byte("Example Store")}, {Key: "blob", Value: []byte{0xff, 0, 1}}, {Key: "count", Value: []byte("-12.5e3")}}, rec.Headers)

	first := e.receiveAttributed(`["All"]`)
	require.Equal(t, "0:0", first.MessageId)
	require.Equal(t, "String", first.MessageAttributes["timestamp"].DataType, "a Number comes back as a String: the data type is not kept")
	require.Equal(t, "1493147359900", *first.MessageAttributes["timestamp"].StringValue)
	second := e.receiveAttributed(`["SellerName"]`)
	require.Len(t, second.MessageAttributes, 1)
	require.Equal(t, "Example Store", *second.MessageAttributes["SellerName"].StringValue)
	require.Equal(t, "cd28f3b68aeee4b2eac9c66f2f694b58", second.MD5OfMessageAttributes)
}

// TestReceiveSelectsAttributes: MessageAttributeNames selects among a record's headers:
// All or .* every one, a name that one, "prefix.*" every name beginning with "prefix.",
// none of them none (no MessageAttributes, no MD5). A repeated key answers its last value;
// a header no SQS client could name (empty, not UTF-8) is left out.
func TestReceiveSelectsAttributes(t *testing.T) {
	e := newEnv(t, sqsapi.Config{}, func(c *router.Config) {})
	headers := []router.Header{
		{Key: "trace.id", Value: []byte("t1")}, {Key: "trace.span", Value: []byte("s1")},
		{Key: "retry", Value: []byte("1")}, {Key: "retry", Value: []byte("2")},
		{Key: "bin", Value: []byte{0xc3, 0x28}}, {Key: "", Value: []byte("anonymous")}, {Key: "\xff", Value: []byte("bad")},
		{Key: "tracer", Value: []byte("not under trace.")},
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
			}
			if a, ok := m.MessageAttributes["bin"]; ok {
				require.Equal(t, "Binary", a.DataType)
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
	rec, err := e.logs.Log("orders", 0).Read(0)
	require.NoError(t, err)
	require.Equal(t, []router.Header{{Key: "SellerName", Value: []byte("Example Store")}}, rec.Headers)
}
