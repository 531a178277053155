package sqsapi_test

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router/sqsapi"
)

// queryCall serves one query-protocol request as botocore sends it: a POST of a form with
// Action and Version, no X-Amz-Target, Content-Type application/x-www-form-urlencoded with a
// charset.
func queryCall(h http.Handler, action string, params url.Values) *httptest.ResponseRecorder {
	form := url.Values{"Action": {action}, "Version": {"2012-11-05"}}
	for k, v := range params {
		form[k] = v
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// queryMessage is a received message as the query protocol's XML carries it.
type queryMessage struct {
	MessageId, ReceiptHandle, MD5OfBody, Body, MD5OfMessageAttributes string
	Attribute                                                         []struct{ Name, Value string }
	MessageAttribute                                                  []struct {
		Name  string
		Value struct{ StringValue, BinaryValue, DataType string }
	}
}

// queryResponse is any of the actions' answers.
type queryResponse struct {
	XMLName xml.Name
	Result  struct {
		QueueUrl, MessageId, MD5OfMessageBody, MD5OfMessageAttributes string
		Message                                                       []queryMessage
		Attribute                                                     []struct{ Name, Value string }
		Entries                                                       []struct {
			XMLName           xml.Name
			Id, Code, Message string
			SenderFault       bool
		} `xml:",any"`
	} `xml:",any"`
	ResponseMetadata struct{ RequestId string }
}

// queryOK decodes a query answer of 200.
func queryOK(t testing.TB, rec *httptest.ResponseRecorder) queryResponse {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "text/xml", rec.Header().Get("Content-Type"))
	var out queryResponse
	require.NoError(t, xml.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	require.NotEmpty(t, out.ResponseMetadata.RequestId)
	return out
}

// queryError is a query-protocol error: its status, Type and Code.
func queryError(t testing.TB, rec *httptest.ResponseRecorder) [3]string {
	t.Helper()
	require.Equal(t, "text/xml", rec.Header().Get("Content-Type"))
	var out struct {
		XMLName xml.Name
		Error   struct{ Type, Code, Message string }
	}
	require.NoError(t, xml.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	require.Equal(t, "ErrorResponse", out.XMLName.Local)
	require.Equal(t, "http://queue.amazonaws.com/doc/2012-11-05/", out.XMLName.Space)
	require.NotEmpty(t, out.Error.Message)
	return [3]string{http.StatusText(rec.Code), out.Error.Type, out.Error.Code}
}

// TestQueryProtocol: every action served answers the query protocol in SQS's XML: a send
// with typed attributes, a receive with its system and message attributes (the MD5s the
// send answered), a visibility change, the batches and the queue's URL and attributes.
func TestQueryProtocol(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{ProduceRecord: e.produceRecordFunc()})
	q := url.Values{"QueueUrl": {queueURL}}
	with := func(kv ...string) url.Values {
		v := url.Values{"QueueUrl": {queueURL}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}

	got := queryOK(t, queryCall(e.h, "GetQueueUrl", url.Values{"QueueName": {"orders"}}))
	require.Equal(t, "GetQueueUrlResponse", got.XMLName.Local)
	require.Equal(t, queueURL, got.Result.QueueUrl)

	body := "a <b> & \"c\"\r\n"
	sent := queryOK(t, queryCall(e.h, "SendMessage", with("MessageBody", body,
		"MessageAttribute.1.Name", "n", "MessageAttribute.1.Value.DataType", "Number.float", "MessageAttribute.1.Value.StringValue", "1.5",
		"MessageAttribute.2.Name", "b", "MessageAttribute.2.Value.DataType", "Binary", "MessageAttribute.2.Value.BinaryValue", base64.StdEncoding.EncodeToString([]byte{0, 1}),
		"MessageSystemAttribute.1.Name", "AWSTraceHeader", "MessageSystemAttribute.1.Value.DataType", "String", "MessageSystemAttribute.1.Value.StringValue", "Root=1")))
	require.Equal(t, "0:0", sent.Result.MessageId)
	require.Equal(t, md5hex(body), sent.Result.MD5OfMessageBody)
	require.Len(t, sent.Result.MD5OfMessageAttributes, 32)

	batch := queryOK(t, queryCall(e.h, "SendMessageBatch", with(
		"SendMessageBatchRequestEntry.1.Id", "a", "SendMessageBatchRequestEntry.1.MessageBody", "one",
		"SendMessageBatchRequestEntry.2.Id", "b", "SendMessageBatchRequestEntry.2.MessageBody", "two", "SendMessageBatchRequestEntry.2.DelaySeconds", "901")))
	require.Len(t, batch.Result.Entries, 2)
	require.Equal(t, "SendMessageBatchResultEntry", batch.Result.Entries[0].XMLName.Local)
	require.Equal(t, "BatchResultErrorEntry", batch.Result.Entries[1].XMLName.Local)
	require.Equal(t, "InvalidParameterValue", batch.Result.Entries[1].Code)
	require.True(t, batch.Result.Entries[1].SenderFault)

	recv := queryOK(t, queryCall(e.h, "ReceiveMessage", with("MaxNumberOfMessages", "10", "AttributeName.1", "All", "MessageAttributeName.1", "All")))
	require.Len(t, recv.Result.Message, 2)
	m := recv.Result.Message[0]
	require.Equal(t, body, m.Body, "escaped as XML, \\r included")
	require.Equal(t, md5hex(body), m.MD5OfBody)
	require.Equal(t, sent.Result.MD5OfMessageAttributes, m.MD5OfMessageAttributes)
	attrs := map[string]string{}
	for _, a := range m.Attribute {
		attrs[a.Name] = a.Value
	}
	require.Equal(t, "1", attrs["ApproximateReceiveCount"])
	require.Equal(t, "Root=1", attrs["AWSTraceHeader"])
	require.Len(t, m.MessageAttribute, 2)
	require.Equal(t, "b", m.MessageAttribute[0].Name)
	require.Equal(t, "Binary", m.MessageAttribute[0].Value.DataType)
	require.Equal(t, "AAE=", m.MessageAttribute[0].Value.BinaryValue)
	require.Equal(t, "Number.float", m.MessageAttribute[1].Value.DataType)

	got = queryOK(t, queryCall(e.h, "ChangeMessageVisibility", with("ReceiptHandle", m.ReceiptHandle, "VisibilityTimeout", "0")))
	require.Equal(t, "ChangeMessageVisibilityResponse", got.XMLName.Local)
	again := queryOK(t, queryCall(e.h, "ReceiveMessage", with("AttributeName.1", "ApproximateReceiveCount")))
	require.Len(t, again.Result.Message, 1)
	require.Equal(t, "2", again.Result.Message[0].Attribute[0].Value)

	cmv := queryOK(t, queryCall(e.h, "ChangeMessageVisibilityBatch", with(
		"ChangeMessageVisibilityBatchRequestEntry.1.Id", "x", "ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle", again.Result.Message[0].ReceiptHandle,
		"ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout", "60")))
	require.Equal(t, "ChangeMessageVisibilityBatchResultEntry", cmv.Result.Entries[0].XMLName.Local)
	queryOK(t, queryCall(e.h, "DeleteMessage", with("ReceiptHandle", again.Result.Message[0].ReceiptHandle)))
	del := queryOK(t, queryCall(e.h, "DeleteMessageBatch", with(
		"DeleteMessageBatchRequestEntry.1.Id", "y", "DeleteMessageBatchRequestEntry.1.ReceiptHandle", recv.Result.Message[1].ReceiptHandle)))
	require.Equal(t, "DeleteMessageBatchResultEntry", del.Result.Entries[0].XMLName.Local)
	require.Equal(t, "y", del.Result.Entries[0].Id)

	qa := queryOK(t, queryCall(e.h, "GetQueueAttributes", url.Values{"QueueUrl": q["QueueUrl"], "AttributeName.1": {"All"}}))
	require.Len(t, qa.Result.Attribute, 3)
	require.Equal(t, "ApproximateNumberOfMessages", qa.Result.Attribute[0].Name)
	require.Equal(t, "0", qa.Result.Attribute[0].Value)
	empty := queryOK(t, queryCall(e.h, "ReceiveMessage", q))
	require.Equal(t, "ReceiveMessageResponse", empty.XMLName.Local)
	require.Empty(t, empty.Result.Message)
}

// TestQueryErrors: a query request's refusal is SQS's XML error, its Code the query code
// the SDKs map to their exceptions, and changes nothing.
func TestQueryErrors(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{ProduceRecord: e.produceRecordFunc()})
	e.produce(0, "v")
	for _, tc := range []struct {
		action string
		params url.Values
		want   [3]string
	}{
		{"GetQueueUrl", url.Values{"QueueName": {"nope"}}, [3]string{"Bad Request", "Sender", "AWS.SimpleQueueService.NonExistentQueue"}},
		{"DeleteMessage", url.Values{"QueueUrl": {queueURL}, "ReceiptHandle": {"0:0:1"}}, [3]string{"Not Found", "Sender", "ReceiptHandleIsInvalid"}},
		{"ReceiveMessage", url.Values{"QueueUrl": {queueURL}, "MaxNumberOfMessages": {"11"}}, [3]string{"Bad Request", "Sender", "InvalidParameterValue"}},
		{"ReceiveMessage", url.Values{"QueueUrl": {queueURL}, "MaxNumberOfMessages": {"ten"}}, [3]string{"Bad Request", "Sender", "InvalidParameterValue"}},
		{"SendMessage", url.Values{"QueueUrl": {queueURL}, "MessageBody": {"x"}, "MessageAttribute.1.Name": {"b"},
			"MessageAttribute.1.Value.DataType": {"Binary"}, "MessageAttribute.1.Value.BinaryValue": {"%%"}}, [3]string{"Bad Request", "Sender", "InvalidParameterValue"}},
		{"SendMessage", url.Values{"QueueUrl": {queueURL}, "MessageBody": {"x"}, "MessageAttribute.1.Name": {"a"}, "MessageAttribute.2.Name": {"a"}}, [3]string{"Bad Request", "Sender", "InvalidParameterValue"}},
		{"SendMessage", url.Values{"QueueUrl": {queueURL}}, [3]string{"Bad Request", "Sender", "MissingParameter"}},
		{"DeleteMessageBatch", url.Values{"QueueUrl": {queueURL}}, [3]string{"Bad Request", "Sender", "AWS.SimpleQueueService.EmptyBatchRequest"}},
		{"PurgeQueue", url.Values{"QueueUrl": {baseURL + "/ghost"}}, [3]string{"Bad Request", "Sender", "AWS.SimpleQueueService.NonExistentQueue"}},
		{"Nope", nil, [3]string{"Bad Request", "Sender", "InvalidAction"}},
		{"", nil, [3]string{"Bad Request", "Sender", "MissingAction"}},
	} {
		require.Equal(t, tc.want, queryError(t, queryCall(e.h, tc.action, tc.params)), "%s %v", tc.action, tc.params)
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("Action=ReceiveMessage&%zz"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	require.Equal(t, [3]string{"Bad Request", "Sender", "MalformedQueryString"}, queryError(t, serve(e.h, req)))
	req = httptest.NewRequest(http.MethodPost, "/", strings.NewReader("Action=SendMessageBatch&QueueUrl=x&"+strings.Repeat("a", sqsapi.MaxRequestBytes)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	require.Equal(t, [3]string{"Bad Request", "Sender", "AWS.SimpleQueueService.BatchRequestTooLong"}, queryError(t, serve(e.h, req)))

	require.Empty(t, e.produced, "nothing sent")
	st, err := e.node.PartitionStatus("orders", 0)
	require.NoError(t, err)
	require.Zero(t, st.Leased, "nothing received")
}

// TestProtocolChoice: the protocol is chosen per request as SQS chooses it: X-Amz-Target
// means JSON (a form body with it is a SerializationException), a form without it the query
// protocol; Authorize is handed the body as it arrived, the form for the query protocol.
func TestProtocolChoice(t *testing.T) {
	var bodies []string
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{Authorize: func(r *http.Request, req sqsapi.Request) error {
		bodies = append(bodies, req.Action+" "+string(req.Body))
		return nil
	}})
	form := "Action=GetQueueUrl&QueueName=orders"
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Amz-Target", "AmazonSQS.GetQueueUrl")
	got := failed(t, serve(e.h, req))
	require.Equal(t, "SerializationException", got.Type)

	queryOK(t, queryCall(e.h, "GetQueueUrl", url.Values{"QueueName": {"orders"}}))
	ok(t, e.call("GetQueueUrl", `{"QueueName":"orders"}`), nil)
	require.Equal(t, []string{"GetQueueUrl Action=GetQueueUrl&QueueName=orders&Version=2012-11-05", `GetQueueUrl {"QueueName":"orders"}`}, bodies)

	req = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(form))
	got = failed(t, serve(e.h, req))
	require.Equal(t, "MissingAction", got.Type, "no X-Amz-Target, no form: the JSON protocol's refusal")
}
