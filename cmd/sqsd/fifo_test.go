package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fifoMessage is a received message of a FIFO queue, as the JSON protocol answers it.
type fifoMessage struct {
	Body, ReceiptHandle string
	Attributes          map[string]string
}

// TestFIFORestart: a FIFO queue's groups keep their order across a restart: the messages
// received and not deleted before it come first, in each group's order, before the group's
// later ones; a group is held by the receive that holds its first message, after the
// restart as before.
func TestFIFORestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	r := start(t, config{dir: dir, noAuth: true})
	c := http.DefaultClient
	call := func(action, body string) string {
		t.Helper()
		status, out := post(t, c, r.url, action, body)
		require.Equal(t, http.StatusOK, status, out)
		return out
	}
	status, out := post(t, c, r.url, "CreateQueue", `{"QueueName":"jobs.fifo"}`)
	require.Equal(t, http.StatusBadRequest, status, out)
	call("CreateQueue", `{"QueueName":"jobs.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"true"}}`)
	q := `"QueueUrl":"` + r.url + `/jobs.fifo"`
	var entries []string
	for _, m := range [][2]string{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"c", "c1"}, {"b", "b2"}, {"a", "a3"}, {"b", "b3"}, {"a", "a4"}} {
		entries = append(entries, `{"Id":"`+m[1]+`","MessageBody":"`+m[1]+`","MessageGroupId":"`+m[0]+`"}`)
	}
	out = call("SendMessageBatch", `{`+q+`,"Entries":[`+strings.Join(entries, ",")+`]}`)
	require.NotContains(t, out, "Failed\":[{")

	receive := func(max int) []fifoMessage {
		t.Helper()
		var got struct{ Messages []fifoMessage }
		require.NoError(t, json.Unmarshal([]byte(call("ReceiveMessage", `{`+q+`,"MaxNumberOfMessages":`+strconv.Itoa(max)+`,"VisibilityTimeout":600,"AttributeNames":["All"]}`)), &got))
		return got.Messages
	}
	del := func(m fifoMessage) { call("DeleteMessage", `{`+q+`,"ReceiptHandle":"`+m.ReceiptHandle+`"}`) }
	// drain receives until nothing comes, each group's messages in order.
	drain := func(deleteAll bool) map[string][]string {
		t.Helper()
		order := map[string][]string{}
		for {
			msgs := receive(10)
			if len(msgs) == 0 {
				return order
			}
			for _, m := range msgs {
				g := m.Attributes["MessageGroupId"]
				order[g] = append(order[g], m.Body)
				if deleteAll {
					del(m)
				}
			}
		}
	}

	// Before the restart: each group's first message received and deleted, the rest of a
	// and b received and left in flight.
	first := receive(10)
	require.NotEmpty(t, first)
	seen := map[string]bool{}
	for _, m := range first {
		if g := m.Attributes["MessageGroupId"]; !seen[g] {
			seen[g] = true
			require.Equal(t, g+"1", m.Body, "a group's first message first")
			del(m)
		}
	}
	drain(false) // what the first receive left: in flight, not deleted
	r.stop(t)

	r = start(t, config{dir: dir, noAuth: true})
	q = `"QueueUrl":"` + r.url + `/jobs.fifo"`
	call("SendMessage", `{`+q+`,"MessageBody":"a5","MessageGroupId":"a"}`)
	// One group's head to one receive holds the group: the next receive gets the other's.
	one := receive(1)
	require.Len(t, one, 1)
	two := receive(1)
	require.Len(t, two, 1)
	require.NotEqual(t, one[0].Attributes["MessageGroupId"], two[0].Attributes["MessageGroupId"])
	require.ElementsMatch(t, []string{"a2", "b2"}, []string{one[0].Body, two[0].Body}, "each group's lowest message not deleted")
	require.Empty(t, receive(10), "a and b are held")
	del(one[0])
	del(two[0])
	require.Equal(t, map[string][]string{"a": {"a3", "a4", "a5"}, "b": {"b3"}}, drain(true))
	r.stop(t)
}

// TestFIFODeduplicationRestart: a send to a FIFO queue retried after a restart, within the
// 5 minutes of SQS's deduplication interval, is deduplicated (the original's MessageId, and
// nothing sent), whichever partition its group is in; after the interval it is sent.
func TestFIFODeduplicationRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var ahead atomic.Int64
	cfg := config{dir: dir, noAuth: true, now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }}
	r := start(t, cfg)
	c := http.DefaultClient
	call := func(action, body string) string {
		t.Helper()
		status, out := post(t, c, r.url, action, body)
		require.Equal(t, http.StatusOK, status, out)
		return out
	}
	call("CreateQueue", `{"QueueName":"jobs.fifo","Attributes":{"FifoQueue":"true"}}`)
	q := `"QueueUrl":"` + r.url + `/jobs.fifo"`
	send := func(i int) string {
		t.Helper()
		var out struct{ MessageId string }
		require.NoError(t, json.Unmarshal([]byte(call("SendMessage", `{`+q+`,"MessageBody":"m","MessageGroupId":"g`+strconv.Itoa(i)+`","MessageDeduplicationId":"d`+strconv.Itoa(i)+`"}`)), &out))
		return out.MessageId
	}
	const n = 8 // groups over both partitions
	ids := map[int]string{}
	partitions := map[string]bool{}
	for i := range n {
		ids[i] = send(i)
		partitions[strings.Split(ids[i], ":")[0]] = true
	}
	require.Len(t, partitions, 2)
	depth := func() string {
		var out struct{ Attributes map[string]string }
		require.NoError(t, json.Unmarshal([]byte(call("GetQueueAttributes", `{`+q+`,"AttributeNames":["ApproximateNumberOfMessages"]}`)), &out))
		return out.Attributes["ApproximateNumberOfMessages"]
	}
	r.stop(t)

	r = start(t, cfg)
	q = `"QueueUrl":"` + r.url + `/jobs.fifo"`
	for i := range n {
		require.Equal(t, ids[i], send(i), "d%d retried after the restart", i)
	}
	require.Equal(t, strconv.Itoa(n), depth(), "nothing sent again")
	ahead.Store(int64(5*time.Minute + time.Second))
	require.NotEqual(t, ids[0], send(0), "after the interval")
	require.Equal(t, strconv.Itoa(n+1), depth())
	r.stop(t)
}
