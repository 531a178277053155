package sqsapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"narad.dev/consume/router"
)

// decodeActions are the decoding and validation each action does before anything reaches
// the host or the node, by FuzzDecode's first argument.
var decodeActions = []func(t *testing.T, body []byte) error{
	func(t *testing.T, body []byte) error { // ReceiveMessage
		var in receiveInput
		if err := decode(body, &in); err != nil {
			return err
		}
		req, err := in.request()
		if err != nil {
			return err
		}
		o := req.opts
		if o.Max < 1 || o.Max > MaxReceive || o.Wait < 0 || o.Wait > MaxWaitSeconds*time.Second ||
			o.Visibility < 0 || o.Visibility > router.MaxVisibility || o.Pinned || req.attrs >= 1<<len(systemAttributes) {
			t.Fatalf("accepted %+v", req)
		}
		if in.ReceiveRequestAttemptId != nil { // a FIFO queue's receive checks it
			checkRefusal(t, checkFIFOID("ReceiveRequestAttemptId", *in.ReceiveRequestAttemptId))
		}
		_, err = queueName(in.QueueUrl)
		return err
	},
	func(t *testing.T, body []byte) error { // DeleteMessage, ChangeMessageVisibility
		var in visibilityInput
		if err := decode(body, &in); err != nil {
			return err
		}
		rc, err := parseReceipt(in.ReceiptHandle)
		if err != nil {
			return err
		}
		checkHandle(t, rc.handle)
		d, err := visibility(in.VisibilityTimeout, "VisibilityTimeout")
		if err != nil {
			return err
		}
		if d < 0 || d > router.MaxVisibility {
			t.Fatalf("accepted a visibility of %v", d)
		}
		_, err = queueName(in.QueueUrl)
		return err
	},
	func(t *testing.T, body []byte) error { // DeleteMessageBatch, ChangeMessageVisibilityBatch
		in, err := decodeBatch(&call{json: body})
		if err != nil {
			return err
		}
		if len(in.Entries) < 1 || len(in.Entries) > MaxBatchEntries {
			t.Fatalf("accepted %d entries", len(in.Entries))
		}
		for _, e := range in.Entries {
			if !validBatchID(*e.Id) {
				t.Fatalf("accepted the entry id %q", *e.Id)
			}
			rc, err := parseReceipt(e.ReceiptHandle)
			if err == nil {
				checkHandle(t, rc.handle)
				_, err = visibility(e.VisibilityTimeout, "VisibilityTimeout")
			}
			checkRefusal(t, err)
		}
		_, err = queueName(in.QueueUrl)
		return err
	},
	func(t *testing.T, body []byte) error { // SendMessage
		var in sendInput
		if err := decode(body, &in); err != nil {
			return err
		}
		m, err := in.message("", true)
		if err != nil {
			return err
		}
		msg, attrs := m.body, m.attrs
		if len(msg) == 0 || m.size() > MaxMessageBytes {
			t.Fatalf("accepted a body of %d bytes with %d attributes", len(msg), len(attrs))
		}
		if len(attrs) > maxMessageAttributes || !slices.IsSortedFunc(attrs, func(a, b messageAttribute) int { return strings.Compare(a.name, b.name) }) {
			t.Fatalf("accepted attributes %+v", attrs)
		}
		for _, a := range attrs {
			if _, ok := checkDataType(a.dataType); checkAttributeName("p", a.name) != nil || len(a.value) == 0 || !ok {
				t.Fatalf("accepted attribute %+v", a)
			}
		}
		if _, ok := invalidCharacter(string(msg)); !ok {
			t.Fatalf("accepted %q", msg)
		}
		if m.group != nil && checkFIFOID("g", string(m.group)) != nil {
			t.Fatalf("accepted the group %q", m.group)
		}
		// As a FIFO queue's message, with and without content-based deduplication, and a
		// standard queue's.
		for _, ref := range []queueRef{{fifo: true}, {fifo: true, rec: QueueRecord{Attributes: fifoDefaults()}},
			{fifo: true, rec: QueueRecord{Attributes: map[string]string{attrContentBasedDeduplication: "true"}}}, {}} {
			fm := m
			err := ref.fitQueue("", &in, &fm)
			checkRefusal(t, err)
			switch {
			case err != nil:
			case ref.fifo && (fm.group == nil || checkFIFOID("d", fm.dedupID) != nil && len(fm.dedupID) != 64):
				t.Fatalf("accepted a FIFO message of group %q, deduplication id %q", fm.group, fm.dedupID)
			case !ref.fifo && (fm.dedupID != "" || in.MessageDeduplicationId != nil):
				t.Fatalf("accepted a standard queue's message with a deduplication id")
			case in.DelaySeconds != nil && (*in.DelaySeconds < 0 || *in.DelaySeconds > MaxDelaySeconds || ref.fifo && *in.DelaySeconds != 0):
				t.Fatalf("accepted a delay of %d", *in.DelaySeconds)
			}
		}
		_, err = queueName(in.QueueUrl)
		return err
	},
	func(t *testing.T, body []byte) error { // SendMessageBatch
		var in sendBatchInput
		if err := decode(body, &in); err != nil {
			return err
		}
		if err := batchIDs(len(in.Entries), func(i int) *string { return in.Entries[i].Id }); err != nil {
			return err
		}
		for i := range in.Entries {
			_, err := in.Entries[i].message("Entries.1.", true)
			checkRefusal(t, err)
		}
		return nil
	},
	func(t *testing.T, body []byte) error { // GetQueueUrl
		var in getQueueURLInput
		if err := decode(body, &in); err != nil {
			return err
		}
		if in.QueueName == nil {
			return missing("QueueName")
		}
		return checkQueueName(*in.QueueName)
	},
	func(t *testing.T, body []byte) error { // GetQueueAttributes
		var in getQueueAttributesInput
		if err := decode(body, &in); err != nil {
			return err
		}
		set, err := attributeNames("AttributeNames", in.AttributeNames, knownQueueAttributeNames, queueAttributes)
		if err == nil && set >= 1<<len(queueAttributes) {
			t.Fatalf("accepted the attributes %b", set)
		}
		return err
	},
	func(t *testing.T, body []byte) error { // CreateQueue
		var in createQueueInput
		if err := decode(body, &in); err != nil {
			return err
		}
		if in.QueueName == nil {
			return missing("QueueName")
		}
		if err := checkQueueName(*in.QueueName); err != nil {
			return err
		}
		if err := checkKept(t, in.Attributes); err != nil {
			return err
		}
		return checkTags(in.Tags, nil)
	},
	func(t *testing.T, body []byte) error { // SetQueueAttributes
		var in setQueueAttributesInput
		if err := decode(body, &in); err != nil {
			return err
		}
		if err := checkKept(t, in.Attributes); err != nil {
			return err
		}
		_, err := queueName(in.QueueUrl)
		return err
	},
	func(t *testing.T, body []byte) error { // TagQueue
		var in tagQueueInput
		if err := decode(body, &in); err != nil {
			return err
		}
		if err := checkTags(in.Tags, nil); err != nil {
			return err
		}
		if len(in.Tags) > maxTags {
			t.Fatalf("accepted %d tags", len(in.Tags))
		}
		_, err := queueName(in.QueueUrl)
		return err
	},
	func(t *testing.T, body []byte) error { // ListQueues
		var in listQueuesInput
		if err := decode(body, &in); err != nil {
			return err
		}
		n, err := integer("MaxResults", in.MaxResults, 1, maxListResults, maxListResults)
		if err == nil && (n < 1 || n > maxListResults) {
			t.Fatalf("accepted MaxResults %d", n)
		}
		return err
	},
}

// checkKept checks attributes to set as CreateQueue and SetQueueAttributes do, on a FIFO
// queue and a standard one, and that what is accepted is within the kept attributes'
// ranges.
func checkKept(t *testing.T, in map[string]string) error {
	if out, err := checkAttributes(in, true, true); err == nil {
		for name, v := range out {
			if ok := fifoAttributeValues[name]; ok != nil && !slices.Contains(ok, v) {
				t.Fatalf("accepted %s=%q", name, v)
			}
		}
	} else {
		checkRefusal(t, err)
	}
	out, err := checkAttributes(in, false, false)
	if err != nil {
		return err
	}
	for name, v := range out {
		i := slices.IndexFunc(keptAttributes, func(a queueAttribute) bool { return a.name == name })
		if i < 0 {
			t.Fatalf("accepted the attribute %q", name)
		}
		a := keptAttributes[i]
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < a.lo || n > a.hi || a.refusal != "" && n != a.def {
			t.Fatalf("accepted %s=%q", name, v)
		}
	}
	return nil
}

func checkHandle(t *testing.T, h router.Handle) {
	if err := h.Check(); err != nil {
		t.Fatalf("accepted the handle %+v", h)
	}
}

// checkRefusal checks that a refusal carries an SQS code and a message.
func checkRefusal(t *testing.T, err error) {
	if err == nil {
		return
	}
	var ae *apiError
	if !errors.As(err, &ae) || ae.code == nil || ae.msg == "" {
		t.Fatalf("a refusal without a code or a message: %v", err)
	}
	if ae.code.status < 400 || ae.code.status >= 500 || !ae.code.sender {
		t.Fatalf("a malformed request answered as the service's fault: %v", err)
	}
}

// FuzzDecode: whatever body an action is given, its decoding never panics, refuses with an
// SQS code of the client's fault and a message, and accepts only values within their bounds.
func FuzzDecode(f *testing.F) {
	for _, seed := range []struct {
		action uint8
		body   string
	}{
		{0, `{"QueueUrl":"http://h/q/orders","MaxNumberOfMessages":10,"WaitTimeSeconds":20,"VisibilityTimeout":30,"MessageSystemAttributeNames":["All"],"MessageAttributeNames":["All"]}`},
		{0, `{"QueueUrl":"orders","AttributeNames":["SentTimestamp","Bogus"]}`},
		{0, `{"QueueUrl":"http://[::1","MaxNumberOfMessages":-1}`},
		{0, `{"MaxNumberOfMessages":1e3,"WaitTimeSeconds":"1"}`},
		{0, `{"QueueUrl":null,"VisibilityTimeout":43201}`},
		{0, `[]`},
		{0, `{} x`},
		{1, `{"QueueUrl":"http://h/orders","ReceiptHandle":"0:42:1311768467294899695","VisibilityTimeout":0}`},
		{1, `{"QueueUrl":"http://h/orders","ReceiptHandle":"0:42","VisibilityTimeout":1}`},
		{1, `{"QueueUrl":"http://h/orders","ReceiptHandle":"-1:0:1"}`},
		{2, `{"QueueUrl":"http://h/orders","Entries":[{"Id":"a","ReceiptHandle":"0:0:1","VisibilityTimeout":5},{"Id":"b","ReceiptHandle":"x"}]}`},
		{2, `{"QueueUrl":"http://h/orders","Entries":[{"Id":"a","ReceiptHandle":"0:0:1"},{"Id":"a","ReceiptHandle":"0:0:1"}]}`},
		{2, `{"QueueUrl":"http://h/orders","Entries":[{"Id":"a b"}]}`},
		{2, `{"Entries":[]}`},
		{3, `{"QueueUrl":"http://h/orders","MessageBody":"hello","DelaySeconds":0}`},
		{3, `{"QueueUrl":"http://h/orders","MessageBody":"\u0000"}`},
		{3, `{"QueueUrl":"http://h/orders","MessageBody":"x","MessageAttributes":{"a":{}}}`},
		{3, `{"MessageBody":"\ud800"}`},
		{4, `{"QueueUrl":"http://h/orders","Entries":[{"Id":"a","MessageBody":"1"},{"Id":"b","MessageGroupId":"g","MessageBody":"2"}]}`},
		{3, `{"QueueUrl":"http://h/q.fifo","MessageBody":"x","MessageGroupId":"g-1","MessageDeduplicationId":"d!~"}`},
		{3, `{"QueueUrl":"http://h/q.fifo","MessageBody":"x","MessageGroupId":"g 1","MessageDeduplicationId":""}`},
		{3, `{"QueueUrl":"http://h/q.fifo","MessageBody":"x","MessageGroupId":"g","DelaySeconds":5}`},
		{7, `{"QueueName":"q.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"TRUE","DeduplicationScope":"messageGroup","FifoThroughputLimit":"perMessageGroupId"}}`},
		{7, `{"QueueName":"q","Attributes":{"FifoQueue":"false","DeduplicationScope":"group"}}`},
		{8, `{"QueueUrl":"http://h/q.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"yes"}}`},
		{5, `{"QueueName":"orders"}`},
		{5, `{"QueueName":"a/b"}`},
		{6, `{"QueueUrl":"http://h/orders","AttributeNames":["All","QueueArn"]}`},
		{6, `{"QueueUrl":"http://h/orders","AttributeNames":["Nope"]}`},
		{7, `{"QueueName":"orders","Attributes":{"VisibilityTimeout":"60","MaximumMessageSize":"1024"},"tags":{"team":"a"}}`},
		{7, `{"QueueName":"orders","Attributes":{"DelaySeconds":"5","Policy":"{}"},"tags":{"aws:x":""}}`},
		{8, `{"QueueUrl":"http://h/orders","Attributes":{"ReceiveMessageWaitTimeSeconds":"21","QueueArn":"x"}}`},
		{8, `{"QueueUrl":"http://h/orders","Attributes":{"MessageRetentionPeriod":"+60"}}`},
		{9, `{"QueueUrl":"http://h/orders","Tags":{"k":"v","":"x"}}`},
		{10, `{"QueueNamePrefix":"ord","MaxResults":1000,"NextToken":"b3JkAG9yZGVycw"}`},
		{10, `{"MaxResults":0}`},
	} {
		f.Add(seed.action, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, action uint8, body []byte) {
		err := decodeActions[int(action)%len(decodeActions)](t, body)
		checkRefusal(t, err)
	})
}

// formActions are the actions FuzzFormDecode picks from by its first argument, in the
// order of decodeActions (ChangeMessageVisibility's form also decodes DeleteMessage's).
var formActions = []string{"ReceiveMessage", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch", "SendMessage",
	"SendMessageBatch", "GetQueueUrl", "GetQueueAttributes", "CreateQueue", "SetQueueAttributes", "TagQueue", "ListQueues"}

// FuzzFormDecode: whatever form body a query request carries, reading it and translating it
// for its action never panics and refuses with an SQS code of the client's fault and a
// message; what it accepts decodes as the action's JSON does, within the same bounds.
func FuzzFormDecode(f *testing.F) {
	q := "QueueUrl=http%3A%2F%2Fh%2Fq%2Forders"
	for _, seed := range []struct {
		action uint8
		body   string
	}{
		{0, "Action=ReceiveMessage&Version=2012-11-05&" + q + "&MaxNumberOfMessages=10&WaitTimeSeconds=20&AttributeName.1=All&MessageAttributeName.1=All"},
		{0, q + "&MaxNumberOfMessages=x&AttributeName.01=All&AttributeName.1001=All"},
		{0, q + "&VisibilityTimeout=43201&MessageSystemAttributeName.2=SentTimestamp&MessageSystemAttributeName.1=Bogus"},
		{1, q + "&ReceiptHandle=0%3A42%3A1311768467294899695%3A0123456789abcdef&VisibilityTimeout=0"},
		{1, q + "&ReceiptHandle=0%3A42&VisibilityTimeout=99999999999999999999"},
		{2, q + "&ChangeMessageVisibilityBatchRequestEntry.1.Id=a&ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle=x&ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout=5"},
		{2, q + "&ChangeMessageVisibilityBatchRequestEntry.3.Id=a&ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle=x"},
		{3, q + "&MessageBody=hello&MessageAttribute.1.Name=n&MessageAttribute.1.Value.DataType=Number.float&MessageAttribute.1.Value.StringValue=1.5" +
			"&MessageAttribute.2.Name=b&MessageAttribute.2.Value.DataType=Binary&MessageAttribute.2.Value.BinaryValue=AAE%3D" +
			"&MessageSystemAttribute.1.Name=AWSTraceHeader&MessageSystemAttribute.1.Value.DataType=String&MessageSystemAttribute.1.Value.StringValue=Root%3D1"},
		{3, q + "&MessageBody=x&MessageAttribute.1.Name=a&MessageAttribute.2.Name=a&MessageAttribute.1.Value.BinaryValue=%25%25"},
		{3, q + "&MessageBody=x&MessageAttribute.1.Value.DataType=String&MessageAttribute.1.Value.StringListValue.1=v"},
		{3, "MessageBody=%ff&DelaySeconds=1"},
		{4, q + "&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=one&SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=two&SendMessageBatchRequestEntry.2.DelaySeconds=3"},
		{5, "QueueName=orders&QueueOwnerAWSAccountId=1"},
		{6, q + "&AttributeName.1=All&AttributeName.2=QueueArn"},
		{6, "%zz=1"},
		{6, "a=1;b=2"},
		{7, "QueueName=orders&Attribute.1.Name=VisibilityTimeout&Attribute.1.Value=60&Tag.1.Key=team&Tag.1.Value=a"},
		{7, "QueueName=orders&Attribute.1.Name=VisibilityTimeout&Attribute.2.Name=VisibilityTimeout&Tag.1.Value=a"},
		{8, q + "&Attribute.1.Name=MaximumMessageSize&Attribute.1.Value=1023"},
		{9, q + "&Tag.1.Key=k&Tag.1.Value=v&Tag.2.Key=aws%3Ax"},
		{0, q + "&ReceiveRequestAttemptId=a1&AttributeName.1=MessageGroupId&MessageSystemAttributeName.1=SequenceNumber"},
		{3, q + "&MessageBody=x&MessageGroupId=g&MessageDeduplicationId=d"},
		{4, q + "&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=one&SendMessageBatchRequestEntry.1.MessageGroupId=g&SendMessageBatchRequestEntry.1.MessageDeduplicationId=%7F"},
		{7, "QueueName=q.fifo&Attribute.1.Name=FifoQueue&Attribute.1.Value=true&Attribute.2.Name=ContentBasedDeduplication&Attribute.2.Value=true"},
		{10, "QueueNamePrefix=o&MaxResults=2&NextToken=x"},
	} {
		f.Add(seed.action, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, action uint8, body []byte) {
		i := int(action) % len(formActions)
		name := formActions[i]
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("Action="+name+"&"+string(body)))
		req.Header.Set("Content-Type", queryContentType)
		raw, err := readQuery(httptest.NewRecorder(), req)
		var form url.Values
		var got string
		if err == nil {
			form, got, err = parseQuery(raw)
		}
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if got != name && !strings.Contains(string(body), "Action") {
			t.Fatalf("read the action %q of %q", got, name)
		}
		js, err := formJSON(name, form)
		agreeWithModel(t, name, form, js, err)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if !json.Valid(js) {
			t.Fatalf("translated %q to invalid JSON %q", body, js)
		}
		c := &call{json: js, query: true}
		var probe map[string]any
		if err := c.decode(&probe); err != nil {
			t.Fatalf("a translation that is no JSON object: %q: %v", js, err)
		}
		err = decodeActions[i](t, js)
		checkRefusal(t, err)
	})
}

// agreeWithModel checks formJSON's answer (js, err) against formJSONByMaps's: the same error,
// or JSON of the same value.
func agreeWithModel(t *testing.T, action string, form url.Values, js []byte, err error) {
	t.Helper()
	want, wantErr := formJSONByMaps(action, form)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("%s %v: formJSON answered %q, %v; the model %q, %v", action, form, js, err, want, wantErr)
	case err != nil:
		if err.Error() != wantErr.Error() {
			t.Fatalf("%s %v: formJSON refused with %v; the model with %v", action, form, err, wantErr)
		}
		return
	}
	var got, model any
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatalf("%s %v: formJSON wrote %q: %v", action, form, js, err)
	}
	if err := json.Unmarshal(want, &model); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, model) {
		t.Fatalf("%s %v: formJSON wrote %s; the model %s", action, form, js, want)
	}
}
