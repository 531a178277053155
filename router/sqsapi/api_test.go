package sqsapi_test

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/sqsapi"
)

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestReceiveAndDelete: a receive takes up to MaxNumberOfMessages records with their
// MessageId, body, MD5 and the attributes asked for; deleted, they are gone.
func TestReceiveAndDelete(t *testing.T) {
	now := time.Unix(1800000000, 0)
	e := newEnv(t, sqsapi.Config{Now: func() time.Time { return now }})
	e.produce(0, "a", "b<&>\n", "c")
	msgs := e.receive(`{"QueueUrl":"` + queueURL + `","MaxNumberOfMessages":10,"MessageSystemAttributeNames":["All"]}`)
	require.Len(t, msgs, 3)
	for i, m := range msgs {
		require.Equal(t, fmt.Sprintf("0:%d", i), m.MessageId)
		require.Equal(t, []string{"a", "b<&>\n", "c"}[i], m.Body)
		require.Equal(t, md5hex(m.Body), m.MD5OfBody)
		require.Equal(t, int64(i), handleOf(t, m.ReceiptHandle).Offset)
		require.Equal(t, map[string]string{
			"ApproximateReceiveCount":          "1",
			"SentTimestamp":                    "1700000000123",
			"ApproximateFirstReceiveTimestamp": "1800000000000",
		}, m.Attributes)
	}
	for _, m := range msgs {
		ok(t, e.call("DeleteMessage", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+m.ReceiptHandle+`"}`), nil)
	}
	rec := e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`"}`)
	ok(t, rec, nil)
	require.Equal(t, "{}", rec.Body.String(), "no messages: an empty result")
	st, err := e.node.PartitionStatus("orders", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Frontier, "every record acked")
}

// TestSystemAttributes: Attributes holds what MessageSystemAttributeNames (or the older
// AttributeNames) asks for, and nothing when nothing is asked for; SQS's other names are
// accepted and not answered, and a name SQS does not have is refused.
func TestSystemAttributes(t *testing.T) {
	for _, tc := range []struct {
		ask  string
		want map[string]string
		code string
	}{
		{ask: ``, want: nil},
		{ask: `,"MessageSystemAttributeNames":["SentTimestamp"]`, want: map[string]string{"SentTimestamp": "1700000000123"}},
		{ask: `,"AttributeNames":["ApproximateReceiveCount"]`, want: map[string]string{"ApproximateReceiveCount": "1"}},
		{ask: `,"AttributeNames":["All"]`, want: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000123", "ApproximateFirstReceiveTimestamp": "5000"}},
		{ask: `,"MessageSystemAttributeNames":["SenderId","AWSTraceHeader"]`, want: nil},
		{ask: `,"MessageSystemAttributeNames":["SentTimestamp"],"AttributeNames":["ApproximateReceiveCount"]`, want: map[string]string{"SentTimestamp": "1700000000123", "ApproximateReceiveCount": "1"}},
		{ask: `,"MessageSystemAttributeNames":["Bogus"]`, code: "InvalidAttributeName"},
		{ask: `,"MessageAttributeNames":["All","trace.*"]`, want: nil},
		{ask: `,"MessageAttributeNames":[""]`, code: "InvalidParameterValue"},
	} {
		t.Run(tc.ask, func(t *testing.T) {
			e := newEnv(t, sqsapi.Config{Now: func() time.Time { return time.UnixMilli(5000) }})
			e.produce(0, "v")
			rec := e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`"`+tc.ask+`}`)
			if tc.code != "" {
				require.Equal(t, tc.code, failed(t, rec).Type)
				return
			}
			var out struct{ Messages []message }
			ok(t, rec, &out)
			require.Len(t, out.Messages, 1)
			require.Equal(t, tc.want, out.Messages[0].Attributes)
			require.NotContains(t, rec.Body.String(), "MessageAttributes", "records carry no headers yet")
		})
	}
}

// TestBinaryBody: a value that is not UTF-8 is delivered as its base64, with the MD5 of that.
func TestBinaryBody(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.produce(0, "\xff\x00\xfe")
	m := e.receiveOne()
	require.Equal(t, base64.StdEncoding.EncodeToString([]byte("\xff\x00\xfe")), m.Body)
	require.Equal(t, md5hex(m.Body), m.MD5OfBody)
}

// TestStaleHandles: DeleteMessage and ChangeMessageVisibility answer each kind of handle as
// doc.go's table says (CHECKLIST: stale handles never settle another lease).
func TestStaleHandles(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stale      func(e *env, handle string) string // makes the handle stale, returns the one to use
		deleteCode string                             // "" : success
		changeCode string
	}{
		{name: "live", stale: func(e *env, h string) string { return h }},
		{name: "released", stale: func(e *env, h string) string {
			require.NoError(e.t, e.node.Release(context.Background(), "orders", handleOf(e.t, h)))
			return h
		}, deleteCode: "InvalidParameterValue", changeCode: "MessageNotInflight"},
		{name: "superseded", stale: func(e *env, h string) string {
			require.NoError(e.t, e.node.Release(context.Background(), "orders", handleOf(e.t, h)))
			e.receiveOne() // leased again: a new nonce
			return h
		}, deleteCode: "InvalidParameterValue", changeCode: "MessageNotInflight"},
		{name: "never issued", stale: func(e *env, h string) string {
			parsed := handleOf(e.t, h)
			parsed.Nonce++
			return rh(parsed.String())
		}, deleteCode: "InvalidParameterValue", changeCode: "MessageNotInflight"},
		{name: "deleted", stale: func(e *env, h string) string {
			require.NoError(e.t, e.node.Ack(context.Background(), "orders", handleOf(e.t, h)))
			return h
		}, changeCode: "InvalidParameterValue"},
		{name: "malformed", stale: func(e *env, h string) string { return h + "x" }, deleteCode: "ReceiptHandleIsInvalid", changeCode: "ReceiptHandleIsInvalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, act := range []string{"DeleteMessage", "ChangeMessageVisibility"} {
				e := newEnv(t, sqsapi.Config{})
				e.produce(0, "v")
				handle := tc.stale(e, e.receiveOne().ReceiptHandle)
				rec := e.call(act, `{"QueueUrl":"`+queueURL+`","ReceiptHandle":`+jsonString(handle)+`,"VisibilityTimeout":60}`)
				want := tc.deleteCode
				if act == "ChangeMessageVisibility" {
					want = tc.changeCode
				}
				if want == "" {
					ok(t, rec, nil)
					require.Equal(t, "{}", rec.Body.String())
					st, err := e.node.PartitionStatus("orders", 0)
					require.NoError(t, err)
					acked := act == "DeleteMessage" && tc.name == "live" || tc.name == "deleted"
					require.Equal(t, acked, st.Frontier == 0, "%s acked the record: %v", act, st)
					continue
				}
				got := failed(t, rec)
				require.Equal(t, want, got.Type, "%s: %s", act, got.Message)
			}
		})
	}
}

// TestReceiptNamesItsQueue: a live handle sent with another queue's URL, or changed in any
// part (its partition, offset, nonce or tag), or without its tag, is ReceiptHandleIsInvalid,
// singly and in a batch, and changes nothing: the record stays leased. A handle of a
// partition the queue lacks is ReceiptHandleIsInvalid too, never the ServiceUnavailable the
// SDKs retry.
func TestReceiptNamesItsQueue(t *testing.T) {
	e := newEnv(t, sqsapi.Config{Queues: func(name string) (string, bool) {
		return "orders", name == "orders" || name == "alias" // two queues, one topic
	}})
	e.produce(0, "v")
	live := e.receiveOne().ReceiptHandle
	node := handleOf(t, live)
	moved := func(f func(h *router.Handle)) string {
		h := node
		f(&h)
		return h.String() + live[strings.LastIndexByte(live, ':'):]
	}
	bad := map[string]string{
		"other queue":   "",
		"partition":     moved(func(h *router.Handle) { h.Partition = 7 }),
		"offset":        moved(func(h *router.Handle) { h.Offset++ }),
		"nonce":         moved(func(h *router.Handle) { h.Nonce++ }),
		"tag":           live[:len(live)-1] + string("10"[live[len(live)-1]&1]),
		"no tag":        node.String(),
		"tag too short": live[:len(live)-1],
		"upper tag":     strings.ToUpper(live),
	}
	for name, handle := range bad {
		queue := queueURL
		if handle == "" {
			queue, handle = baseURL+"/alias", live
		}
		for _, act := range []string{"DeleteMessage", "ChangeMessageVisibility"} {
			got := failed(t, e.call(act, `{"QueueUrl":"`+queue+`","ReceiptHandle":`+jsonString(handle)+`,"VisibilityTimeout":0}`))
			require.Equal(t, "ReceiptHandleIsInvalid", got.Type, "%s: %s", name, act)
			require.Equal(t, 404, got.Status)
		}
		for _, act := range []string{"DeleteMessageBatch", "ChangeMessageVisibilityBatch"} {
			var out batchResult
			ok(t, e.call(act, `{"QueueUrl":"`+queue+`","Entries":[{"Id":"a","ReceiptHandle":`+jsonString(handle)+`,"VisibilityTimeout":0}]}`), &out)
			require.Equal(t, []string{"a=ReceiptHandleIsInvalid"}, out.failedCodes(), "%s: %s", name, act)
		}
	}
	st, err := e.node.PartitionStatus("orders", 0)
	require.NoError(t, err)
	require.Equal(t, 1, st.Leased, "nothing changed")
	require.Equal(t, int64(-1), st.Frontier)
	ok(t, e.call("DeleteMessage", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":`+jsonString(live)+`}`), nil)
	st, err = e.node.PartitionStatus("orders", 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), st.Frontier, "the live handle with its own queue deletes")
}

// TestPartitionTheQueueLacks: a well-tagged handle of a partition the topic does not have
// (made up by a client that knows the empty key's scheme) is ReceiptHandleIsInvalid with
// Config.Routes, singly and in a batch; without them, the node's ServiceUnavailable.
func TestPartitionTheQueueLacks(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{Routes: e.routes})
	ghost := rh("7:0:1")
	for _, act := range []string{"DeleteMessage", "ChangeMessageVisibility"} {
		got := failed(t, e.call(act, `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+ghost+`","VisibilityTimeout":5}`))
		require.Equal(t, sqsError{404, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid;Sender", got.Message}, got, act)
	}
	for _, act := range []string{"DeleteMessageBatch", "ChangeMessageVisibilityBatch"} {
		var out batchResult
		ok(t, e.call(act, `{"QueueUrl":"`+queueURL+`","Entries":[{"Id":"a","ReceiptHandle":"`+ghost+`","VisibilityTimeout":5}]}`), &out)
		require.Equal(t, []string{"a=ReceiptHandleIsInvalid"}, out.failedCodes(), act)
	}
	e.h = mustNew(t, e.node, sqsapi.Config{})
	got := failed(t, e.call("DeleteMessage", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+ghost+`"}`))
	require.Equal(t, "ServiceUnavailable", got.Type, "without Routes the node's answer")
}

// TestReceiptKey: handlers with the same ReceiptKey take each other's handles (the nodes
// of a cluster behind one endpoint); with another key, a handle is ReceiptHandleIsInvalid.
func TestReceiptKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	e := newEnv(t, sqsapi.Config{ReceiptKey: key})
	e.produce(0, "a", "b")
	a, b := e.receiveOne().ReceiptHandle, e.receiveOne().ReceiptHandle
	require.Equal(t, sqsapi.ReceiptFor(key, "orders", handleOf(t, a).String()), a)
	require.NotEqual(t, rh(handleOf(t, a).String()), a, "the key is in the tag")
	other := mustNew(t, e.node, sqsapi.Config{ReceiptKey: []byte("another key")})
	got := failed(t, call(other, "DeleteMessage", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":`+jsonString(a)+`}`))
	require.Equal(t, "ReceiptHandleIsInvalid", got.Type)
	same := mustNew(t, e.node, sqsapi.Config{ReceiptKey: key})
	ok(t, call(same, "DeleteMessage", `{"QueueUrl":"`+queueURL+`","ReceiptHandle":`+jsonString(b)+`}`), nil)
}

// TestDeleteMessageBatch: each entry is answered as DeleteMessage would answer it: a
// malformed handle fails, a stale one fails as expired and deletes nothing.
func TestDeleteMessageBatch(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.produce(0, "a", "b", "c")
	msgs := e.receive(`{"QueueUrl":"` + queueURL + `","MaxNumberOfMessages":3}`)
	require.Len(t, msgs, 3)
	require.NoError(t, e.node.Release(context.Background(), "orders", handleOf(t, msgs[2].ReceiptHandle))) // stale: visible again
	body := `{"QueueUrl":"` + queueURL + `","Entries":[` +
		`{"Id":"a","ReceiptHandle":"` + msgs[0].ReceiptHandle + `"},` +
		`{"Id":"bad","ReceiptHandle":"nope"},` +
		`{"Id":"b","ReceiptHandle":"` + msgs[1].ReceiptHandle + `"},` +
		`{"Id":"stale","ReceiptHandle":"` + msgs[2].ReceiptHandle + `"}]}`
	var out batchResult
	ok(t, e.call("DeleteMessageBatch", body), &out)
	require.Equal(t, []string{"a", "b"}, out.successIDs())
	require.Equal(t, []string{"bad=ReceiptHandleIsInvalid", "stale=InvalidParameterValue"}, out.failedCodes())
	require.True(t, out.Failed[0].SenderFault)
	require.NotEmpty(t, out.Failed[0].Message)
	require.True(t, out.Failed[1].SenderFault)
	require.Contains(t, out.Failed[1].Message, "The receipt handle has expired.")
	// The stale entry deleted nothing: c comes back.
	require.Equal(t, "c", e.receiveOne().Body)
}

// TestChangeMessageVisibilityBatch: each entry as ChangeMessageVisibility would answer it.
func TestChangeMessageVisibilityBatch(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.produce(0, "a", "b", "c")
	msgs := e.receive(`{"QueueUrl":"` + queueURL + `","MaxNumberOfMessages":3}`)
	require.Len(t, msgs, 3)
	require.NoError(t, e.node.Ack(context.Background(), "orders", handleOf(t, msgs[2].ReceiptHandle)))
	body := `{"QueueUrl":"` + queueURL + `","Entries":[` +
		`{"Id":"release","ReceiptHandle":"` + msgs[0].ReceiptHandle + `","VisibilityTimeout":0},` +
		`{"Id":"extend","ReceiptHandle":"` + msgs[1].ReceiptHandle + `","VisibilityTimeout":600},` +
		`{"Id":"deleted","ReceiptHandle":"` + msgs[2].ReceiptHandle + `","VisibilityTimeout":5},` +
		`{"Id":"bad","ReceiptHandle":"0:0","VisibilityTimeout":5},` +
		`{"Id":"far","ReceiptHandle":"` + msgs[1].ReceiptHandle + `","VisibilityTimeout":43201},` +
		`{"Id":"none","ReceiptHandle":"` + msgs[1].ReceiptHandle + `"}]}`
	var out batchResult
	ok(t, e.call("ChangeMessageVisibilityBatch", body), &out)
	require.Equal(t, []string{"release", "extend"}, out.successIDs())
	require.Equal(t, []string{"deleted=InvalidParameterValue", "bad=ReceiptHandleIsInvalid",
		"far=InvalidParameterValue", "none=MissingParameter"}, out.failedCodes())
	// Made visible at once, its receive counted, as SQS counts every receive.
	m := e.receiveOne(`,"MessageSystemAttributeNames":["ApproximateReceiveCount"]`)
	require.Equal(t, "a", m.Body)
	require.Equal(t, "2", m.Attributes["ApproximateReceiveCount"])
	rec := e.call("ReceiveMessage", `{"QueueUrl":"`+queueURL+`"}`)
	require.Equal(t, "{}", rec.Body.String(), "b is extended, c deleted")
}

// TestBatchEntries: a batch's entries are checked as SQS checks them before any is applied.
func TestBatchEntries(t *testing.T) {
	entries := func(n int, entry func(i int) string) string {
		var parts []string
		for i := range n {
			parts = append(parts, entry(i))
		}
		return `{"QueueUrl":"` + queueURL + `","Entries":[` + strings.Join(parts, ",") + `]}`
	}
	plain := func(i int) string {
		return fmt.Sprintf(`{"Id":"e%d","ReceiptHandle":"%s"}`, i, rh(fmt.Sprintf("0:%d:1", i)))
	}
	for _, tc := range []struct {
		name, body, code string
	}{
		{"none", `{"QueueUrl":"` + queueURL + `"}`, "EmptyBatchRequest"},
		{"empty", entries(0, plain), "EmptyBatchRequest"},
		{"eleven", entries(11, plain), "TooManyEntriesInBatchRequest"},
		{"same id", entries(2, func(int) string { return `{"Id":"x","ReceiptHandle":"` + rh("0:0:1") + `"}` }), "BatchEntryIdsNotDistinct"},
		{"bad id", entries(1, func(int) string { return `{"Id":"a b","ReceiptHandle":"` + rh("0:0:1") + `"}` }), "InvalidBatchEntryId"},
		{"long id", entries(1, func(int) string {
			return `{"Id":"` + strings.Repeat("a", 81) + `","ReceiptHandle":"` + rh("0:0:1") + `"}`
		}), "InvalidBatchEntryId"},
		{"no id", entries(1, func(int) string { return `{"ReceiptHandle":"` + rh("0:0:1") + `"}` }), "MissingParameter"},
		{"no handle", entries(1, func(int) string { return `{"Id":"a"}` }), "MissingParameter"},
	} {
		for _, act := range []string{"DeleteMessageBatch", "ChangeMessageVisibilityBatch"} {
			t.Run(tc.name+"/"+act, func(t *testing.T) {
				e := newEnv(t, sqsapi.Config{})
				require.Equal(t, tc.code, failed(t, e.call(act, tc.body)).Type)
			})
		}
	}
	e := newEnv(t, sqsapi.Config{})
	var out batchResult
	ok(t, e.call("DeleteMessageBatch", entries(10, plain)), &out)
	require.Len(t, out.Failed, 10, "ten entries are a batch; their handles, never issued, are expired")
	require.Empty(t, out.Successful)
}

// TestSendMessage: SendMessage produces the body through Config.Produce and answers its
// MessageId and MD5, and the record is received with that MessageId.
func TestSendMessage(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{Produce: e.produceFunc()})
	body := "héllo <\t> \U0001F600"
	var out struct{ MessageId, MD5OfMessageBody string }
	ok(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":`+jsonString(body)+`,"DelaySeconds":0}`), &out)
	require.Equal(t, "0:0", out.MessageId)
	require.Equal(t, md5hex(body), out.MD5OfMessageBody)
	m := e.receiveOne()
	require.Equal(t, body, m.Body)
	require.Equal(t, out.MessageId, m.MessageId)
	require.Equal(t, "QueueDoesNotExist", failed(t, e.call("SendMessage", `{"QueueUrl":"`+baseURL+`/nope","MessageBody":"x"}`)).Type)
	require.Equal(t, "QueueDoesNotExist", failed(t, e.call("SendMessage", `{"QueueUrl":"`+baseURL+`/ghost","MessageBody":"x"}`)).Type,
		"Produce's ErrUnknownTopic")
}

func mustNew(t testing.TB, node sqsapi.Node, cfg sqsapi.Config) *sqsapi.Handler {
	t.Helper()
	if cfg.Queues == nil && cfg.Store == nil {
		cfg.Queues = func(name string) (string, bool) { return name, name == "orders" || name == "ghost" }
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = baseURL
	}
	h, err := sqsapi.New(node, cfg)
	require.NoError(t, err)
	return h
}

// TestSendRefusals: what a record cannot carry is refused, and nothing is produced.
func TestSendRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, members, code string
	}{
		{"no body", ``, "MissingParameter"},
		{"empty body", `,"MessageBody":""`, "InvalidParameterValue"},
		{"too long", `,"MessageBody":"` + strings.Repeat("x", sqsapi.MaxMessageBytes+1) + `"`, "InvalidParameterValue"},
		{"control character", `,"MessageBody":"a\u0001b"`, "InvalidMessageContents"},
		{"U+FFFE", `,"MessageBody":"a\ufffeb"`, "InvalidMessageContents"},
		{"delay too long", `,"MessageBody":"x","DelaySeconds":901`, "InvalidParameterValue"},
		{"delay negative", `,"MessageBody":"x","DelaySeconds":-1`, "InvalidParameterValue"},
		{"attributes", `,"MessageBody":"x","MessageAttributes":{"k":{"DataType":"String","StringValue":"v"}}`, "InvalidParameterValue"},
		{"system attributes", `,"MessageBody":"x","MessageSystemAttributes":{"AWSTraceHeader":{"DataType":"String","StringValue":"v"}}`, "InvalidParameterValue"},
		{"group", `,"MessageBody":"x","MessageGroupId":"g"`, "InvalidParameterValue"},
		{"dedup", `,"MessageBody":"x","MessageDeduplicationId":"d"`, "InvalidParameterValue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, sqsapi.Config{})
			e.h = mustNew(t, e.node, sqsapi.Config{Produce: e.produceFunc()})
			require.Equal(t, tc.code, failed(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`"`+tc.members+`}`)).Type)
			batch := e.call("SendMessageBatch", `{"QueueUrl":"`+queueURL+`","Entries":[{"Id":"x"`+tc.members+`}]}`)
			if tc.name == "too long" { // a batch's bodies are bounded together, before any entry
				require.Equal(t, "BatchRequestTooLong", failed(t, batch).Type)
			} else {
				var out batchResult
				ok(t, batch, &out)
				require.Equal(t, []string{"x=" + tc.code}, out.failedCodes())
			}
			require.Empty(t, e.produced)
		})
	}
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{Produce: e.produceFunc()})
	require.Equal(t, "AWS.SimpleQueueService.BatchRequestTooLong;Sender", failed(t, e.call("SendMessageBatch",
		`{"QueueUrl":"`+queueURL+`","Entries":[{"Id":"a","MessageBody":"`+strings.Repeat("x", sqsapi.MaxMessageBytes/2)+`"},`+
			`{"Id":"b","MessageBody":"`+strings.Repeat("x", sqsapi.MaxMessageBytes/2+1)+`"}]}`)).Query)
	require.Empty(t, e.produced)
}

// TestSendMessageBatch: each valid entry is produced (a standard queue's in any order, at
// once), and answered in the entries' order with the MessageId of its own record; the others
// are answered in Failed; without Produce both sends are UnsupportedOperation.
func TestSendMessageBatch(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.h = mustNew(t, e.node, sqsapi.Config{Produce: e.produceFunc()})
	var out batchResult
	ok(t, e.call("SendMessageBatch", `{"QueueUrl":"`+queueURL+`","Entries":[`+
		`{"Id":"one","MessageBody":"1"},{"Id":"bad","MessageBody":"\u0000"},{"Id":"two","MessageBody":"2"}]}`), &out)
	require.Equal(t, []string{"one", "two"}, out.successIDs())
	for i, body := range []string{"1", "2"} {
		require.Equal(t, md5hex(body), out.Successful[i].MD5OfMessageBody)
		off, err := strconv.ParseInt(strings.TrimPrefix(out.Successful[i].MessageId, "0:"), 10, 64)
		require.NoError(t, err, out.Successful[i].MessageId)
		rec, err := e.logs.Log("orders", 0).Read(off)
		require.NoError(t, err)
		require.Equal(t, body, string(rec.Value), "entry %s's MessageId names its own record", out.Successful[i].Id)
	}
	require.Equal(t, []string{"bad=InvalidMessageContents"}, out.failedCodes())
	require.ElementsMatch(t, []string{"orders/1", "orders/2"}, e.produced)

	bare := newEnv(t, sqsapi.Config{})
	for _, act := range []string{"SendMessage", "SendMessageBatch"} {
		got := failed(t, bare.call(act, `{"QueueUrl":"`+queueURL+`","MessageBody":"x","Entries":[{"Id":"a","MessageBody":"x"}]}`))
		require.Equal(t, "UnsupportedOperation", got.Type)
		require.Equal(t, "AWS.SimpleQueueService.UnsupportedOperation;Sender", got.Query)
	}
}

// TestProduceFails: a host's produce error is InternalFailure (logged), a node's is mapped.
func TestProduceFails(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	var err error
	e.h = mustNew(t, e.node, sqsapi.Config{Produce: func(context.Context, string, []byte) (int32, int64, error) { return 0, 0, err }})
	for _, tc := range []struct {
		err  error
		code string
	}{
		{errors.New("disk full"), "InternalFailure"},
		{fmt.Errorf("owner b: %w", router.ErrUnavailable), "ServiceUnavailable"},
	} {
		err = tc.err
		require.Equal(t, tc.code, failed(t, e.call("SendMessage", `{"QueueUrl":"`+queueURL+`","MessageBody":"x"}`)).Type)
		var out batchResult
		ok(t, e.call("SendMessageBatch", `{"QueueUrl":"`+queueURL+`","Entries":[{"Id":"a","MessageBody":"x"}]}`), &out)
		require.Equal(t, []string{"a=" + tc.code}, out.failedCodes())
		require.False(t, out.Failed[0].SenderFault)
	}
}

// TestGetQueueURL: a queue Config.Queues knows has BaseURL/name; another does not exist.
func TestGetQueueURL(t *testing.T) {
	e := newEnv(t, sqsapi.Config{BaseURL: "https://broker.example.com/sqs/"})
	var out struct{ QueueUrl string }
	ok(t, e.call("GetQueueUrl", `{"QueueName":"orders","QueueOwnerAWSAccountId":"123"}`), &out)
	require.Equal(t, "https://broker.example.com/sqs/orders", out.QueueUrl)
	for body, code := range map[string]string{
		`{"QueueName":"nope"}`:                            "QueueDoesNotExist",
		`{"QueueName":"a/b"}`:                             "InvalidParameterValue",
		`{"QueueName":""}`:                                "InvalidParameterValue",
		`{"QueueName":"` + strings.Repeat("a", 81) + `"}`: "InvalidParameterValue",
		`{}`: "MissingParameter",
	} {
		require.Equal(t, code, failed(t, e.call("GetQueueUrl", body)).Type, body)
	}
	// The URL it answers reaches the queue, as does any URL ending in the name.
	e.produce(0, "v")
	for _, u := range []string{out.QueueUrl, "http://127.0.0.1:9/000000000000/orders", "orders", "http://x/orders/"} {
		rec := e.call("GetQueueAttributes", `{"QueueUrl":"`+u+`","AttributeNames":["ApproximateNumberOfMessages"]}`)
		ok(t, rec, nil)
	}
}

// TestGetQueueAttributes: the counts are the node's TopicStatus, summed over partitions.
func TestGetQueueAttributes(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.routes.Set("orders", 0, 1)
	e.produce(0, "a", "b", "c")
	e.produce(1, "d", "e")
	attrs := func(names string) map[string]string {
		var out struct{ Attributes map[string]string }
		ok(t, e.call("GetQueueAttributes", `{"QueueUrl":"`+queueURL+`","AttributeNames":`+names+`}`), &out)
		return out.Attributes
	}
	msgs := e.receive(`{"QueueUrl":"` + queueURL + `","MaxNumberOfMessages":2}`) // loads partitions
	require.Len(t, msgs, 2)
	m := e.receiveOne()
	require.NoError(t, e.node.Nack(context.Background(), "orders", handleOf(t, m.ReceiptHandle), time.Hour))
	require.Equal(t, map[string]string{
		"ApproximateNumberOfMessages":           "2",
		"ApproximateNumberOfMessagesNotVisible": "2",
		"ApproximateNumberOfMessagesDelayed":    "1",
	}, attrs(`["All"]`))
	require.Equal(t, map[string]string{"ApproximateNumberOfMessagesNotVisible": "2"},
		attrs(`["ApproximateNumberOfMessagesNotVisible","QueueArn","VisibilityTimeout"]`))
	rec := e.call("GetQueueAttributes", `{"QueueUrl":"`+queueURL+`"}`)
	ok(t, rec, nil)
	require.Equal(t, "{}", rec.Body.String(), "nothing asked for")
	require.Equal(t, "InvalidAttributeName", failed(t, e.call("GetQueueAttributes", `{"QueueUrl":"`+queueURL+`","AttributeNames":["Nope"]}`)).Type)
	require.Equal(t, "QueueDoesNotExist", failed(t, e.call("GetQueueAttributes", `{"QueueUrl":"`+baseURL+`/ghost","AttributeNames":["All"]}`)).Type)
}

// TestAuthorize: Authorize sees the action, the queue and the body; its refusal is
// AccessDenied, and nothing reaches the queues or the node.
func TestAuthorize(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	e.produce(0, "v")
	var seen []sqsapi.Request
	resolved := 0
	e.h = mustNew(t, e.node, sqsapi.Config{
		Queues: func(name string) (string, bool) { resolved++; return name, true },
		Authorize: func(r *http.Request, req sqsapi.Request) error {
			require.Equal(t, "application/x-amz-json-1.0", r.Header.Get("Content-Type"))
			seen = append(seen, req)
			return errors.New("the signature does not match")
		},
	})
	for _, tc := range []struct{ action, body, queue string }{
		{"ReceiveMessage", `{"QueueUrl":"` + queueURL + `"}`, "orders"},
		{"DeleteMessage", `{"QueueUrl":"` + queueURL + `","ReceiptHandle":"` + rh("0:0:1") + `"}`, "orders"},
		{"DeleteMessageBatch", `{"QueueUrl":"` + queueURL + `","Entries":[{"Id":"a","ReceiptHandle":"` + rh("0:0:1") + `"}]}`, "orders"},
		{"ChangeMessageVisibility", `{"QueueUrl":"` + queueURL + `","ReceiptHandle":"` + rh("0:0:1") + `","VisibilityTimeout":0}`, "orders"},
		{"ChangeMessageVisibilityBatch", `{"QueueUrl":"` + queueURL + `","Entries":[{"Id":"a","ReceiptHandle":"` + rh("0:0:1") + `","VisibilityTimeout":0}]}`, "orders"},
		{"GetQueueUrl", `{"QueueName":"other"}`, "other"},
		{"GetQueueAttributes", `{"QueueUrl":"` + queueURL + `"}`, "orders"},
	} {
		seen = nil
		got := failed(t, e.call(tc.action, tc.body))
		require.Equal(t, sqsError{Status: 403, Type: "AccessDenied", Query: "AccessDenied;Sender", Message: "the signature does not match"}, got)
		require.Equal(t, []sqsapi.Request{{Action: tc.action, Queue: tc.queue, Body: []byte(tc.body)}}, seen)
	}
	require.Zero(t, resolved)
	st, err := e.node.PartitionStatus("orders", 0)
	require.NoError(t, err)
	require.Zero(t, st.Leased, "nothing reached the node")
	require.False(t, st.Loaded)
}

// TestRequestErrors: each malformed or refused request gets SQS's code, status and query
// code, and reaches nothing.
func TestRequestErrors(t *testing.T) {
	receive := func(members string) string { return `{"QueueUrl":"` + queueURL + `"` + members + `}` }
	for _, tc := range []struct {
		name        string
		method      string // POST when empty
		target      string // AmazonSQS.ReceiveMessage when empty; "-" for none
		contentType string // the JSON protocol's when empty
		body        string
		want        sqsError // Message unchecked
	}{
		{name: "GET", method: "GET", body: receive(""), want: sqsError{405, "MethodNotAllowed", "MethodNotAllowed;Sender", ""}},
		{name: "no target", target: "-", body: receive(""), want: sqsError{400, "MissingAction", "MissingAction;Sender", ""}},
		{name: "unknown action", target: "AmazonSQS.Frobnicate", body: receive(""), want: sqsError{400, "InvalidAction", "InvalidAction;Sender", ""}},
		{name: "another service", target: "DynamoDB_20120810.GetItem", body: receive(""), want: sqsError{400, "InvalidAction", "InvalidAction;Sender", ""}},
		{name: "CreateQueue", target: "AmazonSQS.CreateQueue", body: `{"QueueName":"x"}`, want: sqsError{400, "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation;Sender", ""}},
		{name: "query protocol", contentType: "application/x-www-form-urlencoded", body: "Action=ReceiveMessage", want: sqsError{400, "SerializationException", "SerializationException;Sender", ""}},
		{name: "not JSON", body: `{"QueueUrl":`, want: sqsError{400, "SerializationException", "SerializationException;Sender", ""}},
		{name: "not an object", body: `["QueueUrl"]`, want: sqsError{400, "SerializationException", "SerializationException;Sender", ""}},
		{name: "data after", body: receive("") + `{}`, want: sqsError{400, "SerializationException", "SerializationException;Sender", ""}},
		{name: "string for a number", body: receive(`,"MaxNumberOfMessages":"10"`), want: sqsError{400, "SerializationException", "SerializationException;Sender", ""}},
		{name: "fraction", body: receive(`,"WaitTimeSeconds":1.5`), want: sqsError{400, "SerializationException", "SerializationException;Sender", ""}},
		{name: "number for a list", body: receive(`,"AttributeNames":7`), want: sqsError{400, "SerializationException", "SerializationException;Sender", ""}},
		{name: "max 0", body: receive(`,"MaxNumberOfMessages":0`), want: sqsError{400, "InvalidParameterValue", "InvalidParameterValue;Sender", ""}},
		{name: "max 11", body: receive(`,"MaxNumberOfMessages":11`), want: sqsError{400, "InvalidParameterValue", "InvalidParameterValue;Sender", ""}},
		{name: "wait 21", body: receive(`,"WaitTimeSeconds":21`), want: sqsError{400, "InvalidParameterValue", "InvalidParameterValue;Sender", ""}},
		{name: "wait -1", body: receive(`,"WaitTimeSeconds":-1`), want: sqsError{400, "InvalidParameterValue", "InvalidParameterValue;Sender", ""}},
		{name: "visibility 0", body: receive(`,"VisibilityTimeout":0`), want: sqsError{400, "InvalidParameterValue", "InvalidParameterValue;Sender", ""}},
		{name: "visibility 12h+1s", body: receive(`,"VisibilityTimeout":43201`), want: sqsError{400, "InvalidParameterValue", "InvalidParameterValue;Sender", ""}},
		{name: "no queue", body: `{}`, want: sqsError{400, "MissingParameter", "MissingParameter;Sender", ""}},
		{name: "empty body", body: ``, want: sqsError{400, "MissingParameter", "MissingParameter;Sender", ""}},
		{name: "unknown queue", body: `{"QueueUrl":"` + baseURL + `/nope"}`, want: sqsError{400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue;Sender", ""}},
		{name: "unknown topic", body: `{"QueueUrl":"` + baseURL + `/ghost"}`, want: sqsError{400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue;Sender", ""}},
		{name: "bad queue name", body: `{"QueueUrl":"` + baseURL + `/a%20b"}`, want: sqsError{400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue;Sender", ""}},
		{name: "not a URL", body: `{"QueueUrl":"http://[::1"}`, want: sqsError{404, "InvalidAddress", "InvalidAddress;Sender", ""}},
		{name: "empty URL", body: `{"QueueUrl":""}`, want: sqsError{404, "InvalidAddress", "InvalidAddress;Sender", ""}},
		{name: "too large", body: receive(`,"Pad":"` + strings.Repeat("x", sqsapi.MaxRequestBytes) + `"`), want: sqsError{400, "InvalidParameterValue", "InvalidParameterValue;Sender", ""}},
		{name: "batch too large", target: "AmazonSQS.DeleteMessageBatch", body: receive(`,"Pad":"` + strings.Repeat("x", sqsapi.MaxRequestBytes) + `"`), want: sqsError{400, "BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong;Sender", ""}},
		{name: "delete: no handle", target: "AmazonSQS.DeleteMessage", body: receive(""), want: sqsError{400, "MissingParameter", "MissingParameter;Sender", ""}},
		{name: "delete: bad handle", target: "AmazonSQS.DeleteMessage", body: receive(`,"ReceiptHandle":"0:0"`), want: sqsError{404, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid;Sender", ""}},
		{name: "change: no timeout", target: "AmazonSQS.ChangeMessageVisibility", body: receive(`,"ReceiptHandle":"` + rh("0:0:1") + `"`), want: sqsError{400, "MissingParameter", "MissingParameter;Sender", ""}},
		{name: "change: timeout over", target: "AmazonSQS.ChangeMessageVisibility", body: receive(`,"ReceiptHandle":"` + rh("0:0:1") + `","VisibilityTimeout":43201`), want: sqsError{400, "InvalidParameterValue", "InvalidParameterValue;Sender", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, sqsapi.Config{})
			e.produce(0, "v")
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req := httptestRequest(method, tc.body)
			switch tc.target {
			case "":
				req.Header.Set("X-Amz-Target", "AmazonSQS.ReceiveMessage")
			case "-":
			default:
				req.Header.Set("X-Amz-Target", tc.target)
			}
			ct := tc.contentType
			if ct == "" {
				ct = "application/x-amz-json-1.0"
			}
			req.Header.Set("Content-Type", ct)
			rec := serve(e.h, req)
			got := failed(t, rec)
			got.Message = ""
			require.Equal(t, tc.want, got)
			if tc.method == "GET" {
				require.Equal(t, "POST", rec.Header().Get("Allow"))
			}
			st, err := e.node.PartitionStatus("orders", 0)
			require.NoError(t, err)
			require.Zero(t, st.Leased, "nothing reached the node")
		})
	}
}

// TestNewRefusesBadConfig: a handler needs a node, Queues and an absolute BaseURL.
func TestNewRefusesBadConfig(t *testing.T) {
	e := newEnv(t, sqsapi.Config{})
	queues := func(string) (string, bool) { return "", false }
	_, err := sqsapi.New(nil, sqsapi.Config{Queues: queues, BaseURL: baseURL})
	require.Error(t, err)
	_, err = sqsapi.New(e.node, sqsapi.Config{BaseURL: baseURL})
	require.Error(t, err)
	for _, u := range []string{"", "/sqs", "ftp://h/x", "http://", "http://h/x?q=1", "http://h/#f", "://"} {
		_, err = sqsapi.New(e.node, sqsapi.Config{Queues: queues, BaseURL: u})
		require.Error(t, err, u)
	}
	_, err = sqsapi.New(e.node, sqsapi.Config{Queues: queues, BaseURL: "http://127.0.0.1:9324"})
	require.NoError(t, err)
}

// TestSendMessageBatchAtOnce: a standard queue's entries reach the host's produce at once,
// so that its log may share one fsync among them: here a produce that answers only once
// every entry of the batch is in it (with the entries sent one after the other, the first
// would wait for ever, and synctest reports the deadlock).
func TestSendMessageBatchAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, sqsapi.Config{})
		const entries = 10
		var mu sync.Mutex
		arrived, all := 0, make(chan struct{})
		e.h = mustNew(t, e.node, sqsapi.Config{Produce: func(ctx context.Context, topic string, body []byte) (int32, int64, error) {
			mu.Lock()
			if arrived++; arrived == entries {
				close(all)
			}
			mu.Unlock()
			<-all
			return e.produceFunc()(ctx, topic, body)
		}})
		var list []string
		for i := range entries {
			list = append(list, fmt.Sprintf(`{"Id":"e%d","MessageBody":"m%d"}`, i, i))
		}
		var out batchResult
		ok(t, e.call("SendMessageBatch", `{"QueueUrl":"`+queueURL+`","Entries":[`+strings.Join(list, ",")+`]}`), &out)
		require.Len(t, out.Successful, entries)
		require.Empty(t, out.Failed)
	})
}
