package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/nodehttp"
)

// A testCluster is a cluster of servers in this process: each opened on its own data
// directory, its peer listener on a loopback port, its SQS front end called in-process.
type testCluster struct {
	t     *testing.T
	file  string // the cluster file
	cf    clusterFile
	dirs  []string
	nodes []*server // nil: closed
}

// freeAddrs returns n loopback addresses free now.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addrs = append(addrs, ln.Addr().String())
		defer ln.Close()
	}
	return addrs
}

// writeClusterFile writes a cluster file of n nodes ("node-1"...) on free loopback ports
// into dir.
func writeClusterFile(t testing.TB, dir string, n int) (string, clusterFile) {
	t.Helper()
	cf := clusterFile{Secret: "0123456789abcdef0123456789abcdef"}
	for i, addr := range freeAddrs(t, n) {
		cf.Nodes = append(cf.Nodes, clusterNode{ID: fmt.Sprintf("node-%d", i+1), Peer: addr})
	}
	data, err := json.Marshal(cf)
	require.NoError(t, err)
	path := filepath.Join(dir, "cluster.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path, cf
}

// newTestCluster opens a cluster of n nodes whose new queues have partitions partitions,
// the home first.
func newTestCluster(t *testing.T, n, partitions int) *testCluster {
	t.Helper()
	root := t.TempDir()
	tc := &testCluster{t: t, nodes: make([]*server, n)}
	tc.file, tc.cf = writeClusterFile(t, root, n)
	for i := range n {
		tc.dirs = append(tc.dirs, filepath.Join(root, fmt.Sprintf("node-%d", i+1)))
	}
	for i := range n {
		tc.open(i, partitions)
	}
	t.Cleanup(func() {
		for i := range tc.nodes {
			if tc.nodes[i] != nil {
				tc.close(i)
			}
		}
	})
	return tc
}

func (tc *testCluster) open(i, partitions int) {
	tc.t.Helper()
	s, err := openServer(config{
		dir: tc.dirs[i], noAuth: true, partitions: partitions, baseURL: "http://localhost:9324",
		clusterPath: tc.file, nodeID: tc.cf.Nodes[i].ID,
	}, slog.New(slog.DiscardHandler))
	require.NoError(tc.t, err)
	tc.nodes[i] = s
}

func (tc *testCluster) close(i int) {
	tc.t.Helper()
	require.NoError(tc.t, tc.nodes[i].Close())
	tc.nodes[i] = nil
}

// call sends action with body (JSON) to node i's front end and returns the status and the
// answer.
func (tc *testCluster) call(i int, action, body string) (int, string) {
	tc.t.Helper()
	return tc.callTB(i, action, body)
}

// callTB is call without the test (a benchmark's).
func (tc *testCluster) callTB(i int, action, body string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, "http://localhost:9324/", strings.NewReader(body))
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	rec := httptest.NewRecorder()
	tc.nodes[i].api.ServeHTTP(rec, req)
	answer, _ := io.ReadAll(rec.Body)
	return rec.Code, string(answer)
}

// ok is call whose answer must be 200.
func (tc *testCluster) ok(i int, action, body string) string {
	tc.t.Helper()
	status, out := tc.call(i, action, body)
	require.Equal(tc.t, http.StatusOK, status, "node %d: %s: %s", i, action, out)
	return out
}

// queue is the QueueUrl member naming queue name.
func queue(name string) string { return `"QueueUrl":"http://localhost:9324/` + name + `"` }

// depth returns queue name's visible and in-flight counts as node i answers them.
func (tc *testCluster) depth(i int, name string) (visible, inFlight int) {
	tc.t.Helper()
	var out struct{ Attributes map[string]string }
	require.NoError(tc.t, json.Unmarshal([]byte(tc.ok(i, "GetQueueAttributes", `{`+queue(name)+`,"AttributeNames":["All"]}`)), &out))
	visible, err := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	require.NoError(tc.t, err)
	inFlight, err = strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	require.NoError(tc.t, err)
	return visible, inFlight
}

type sqsMessage struct {
	MessageId, Body, ReceiptHandle string
	Attributes                     map[string]string
}

// receive receives up to max messages of queue name at node i, long-polling wait seconds.
func (tc *testCluster) receive(i int, name string, max, wait int) []sqsMessage {
	tc.t.Helper()
	var out struct{ Messages []sqsMessage }
	require.NoError(tc.t, json.Unmarshal([]byte(tc.ok(i, "ReceiveMessage", fmt.Sprintf(`{%s,"MaxNumberOfMessages":%d,"WaitTimeSeconds":%d,"VisibilityTimeout":600,"AttributeNames":["All"]}`, queue(name), max, wait))), &out))
	return out.Messages
}

// receiveAll receives at node i until want messages came (each receive long-polls, and
// their number is bounded, not their time).
func (tc *testCluster) receiveAll(i int, name string, want int) []sqsMessage {
	tc.t.Helper()
	var got []sqsMessage
	for range 100 {
		if len(got) >= want {
			break
		}
		got = append(got, tc.receive(i, name, min(10, want-len(got)), 1)...)
	}
	require.Len(tc.t, got, want, "node %d received", i)
	return got
}

// TestClusterQueue: a queue created on one node is served by all three: sends through a
// node that owns none of its partitions land on the owners, a receive through a third
// node gets every message wherever it is, deletes through the first settle them at their
// owners, and every node counts the whole queue; a DeleteQueue through a node that is not
// the catalogue's home deletes it everywhere.
func TestClusterQueue(t *testing.T) {
	tc := newTestCluster(t, 3, 2) // partitions 0 and 1: node-3 owns none
	tc.ok(1, "CreateQueue", `{"QueueName":"orders"}`)
	const n = 12
	ids := map[string]bool{}
	for i := range n {
		var out struct{ MessageId string }
		require.NoError(t, json.Unmarshal([]byte(tc.ok(2, "SendMessage", `{`+queue("orders")+`,"MessageBody":"m`+strconv.Itoa(i)+`"}`)), &out))
		ids[out.MessageId] = true
	}
	require.Len(t, ids, n)
	for i := range 3 {
		visible, inFlight := tc.depth(i, "orders")
		require.Equal(t, [2]int{n, 0}, [2]int{visible, inFlight}, "node %d counts the whole queue", i)
	}
	for i := range 2 {
		local := tc.nodes[i].localPartitions(tc.nodes[i].topicOf(t, "orders"))
		require.Equal(t, []int32{int32(i)}, local, "node %d owns partition %d", i, i)
	}

	got := tc.receiveAll(2, "orders", n)
	bodies := map[string]bool{}
	for _, m := range got {
		bodies[m.Body] = true
		require.True(t, ids[m.MessageId])
	}
	require.Len(t, bodies, n, "every message once")
	visible, inFlight := tc.depth(0, "orders")
	require.Equal(t, [2]int{0, n}, [2]int{visible, inFlight})

	for _, m := range got {
		tc.ok(0, "DeleteMessage", `{`+queue("orders")+`,"ReceiptHandle":"`+m.ReceiptHandle+`"}`)
	}
	for i := range 3 {
		visible, inFlight := tc.depth(i, "orders")
		require.Equal(t, [2]int{0, 0}, [2]int{visible, inFlight}, "node %d", i)
	}

	tc.ok(1, "DeleteQueue", `{`+queue("orders")+`}`)
	for i := range 3 {
		status, out := tc.call(i, "GetQueueUrl", `{"QueueName":"orders"}`)
		if i == 2 && status == http.StatusOK { // a mirror that has not asked the home since
			require.NoError(t, tc.nodes[i].cat.mirror.fresh(context.Background()))
			status, out = tc.call(i, "GetQueueUrl", `{"QueueName":"orders"}`)
		}
		require.Equal(t, http.StatusBadRequest, status, "node %d: %s", i, out)
		require.Contains(t, out, "QueueDoesNotExist")
	}
}

// TestClusterReceiveReadsAhead: a receive through a node that owns none of a standard
// queue's partitions, naming no visibility timeout of its own, is served from the records
// that node reserved ahead at the owners (the queue's visibility timeout is its topic's),
// and leases for the queue's visibility timeout; one naming its own, and a FIFO queue's
// (whose group's run comes together from its owner), ask the owners themselves.
func TestClusterReceiveReadsAhead(t *testing.T) {
	tc := newTestCluster(t, 3, 2) // node-3 owns none
	tc.ok(0, "CreateQueue", `{"QueueName":"orders","Attributes":{"VisibilityTimeout":"77"}}`)
	tc.ok(0, "CreateQueue", `{"QueueName":"jobs.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"true"}}`)
	require.NoError(t, tc.nodes[2].cat.mirror.fresh(context.Background()))
	for i := range 40 {
		tc.ok(0, "SendMessage", `{`+queue("orders")+`,"MessageBody":"m`+strconv.Itoa(i)+`"}`)
	}
	for i := range 4 {
		tc.ok(0, "SendMessage", `{`+queue("jobs.fifo")+`,"MessageBody":"f`+strconv.Itoa(i)+`","MessageGroupId":"g"}`)
	}
	ahead := func() router.AheadStats { return tc.nodes[2].node.Stats().Ahead }

	received := 0
	for i := 0; received < 10; i++ {
		require.Less(t, i, 100, "%d received", received)
		var out struct{ Messages []sqsMessage }
		require.NoError(t, json.Unmarshal([]byte(tc.ok(2, "ReceiveMessage", `{`+queue("orders")+`,"MaxNumberOfMessages":2}`)), &out))
		received += len(out.Messages)
	}
	// Served from memory (how many depends on whether a slow machine let the hold of
	// 50 ms pass between two receives: what outstays it goes back).
	served := ahead()
	require.NotZero(t, served.Reserved)
	require.NotZero(t, served.HandedOver, "%+v", served)
	// Held for a receive to come, a reservation is a lease at its owner: not visible, for at
	// most the hold.
	_, inFlight := tc.depth(0, "orders")
	require.GreaterOrEqual(t, inFlight, received)
	require.LessOrEqual(t, uint64(inFlight), uint64(received)+served.Reserved-served.HandedOver)

	tc.receive(2, "orders", 2, 0) // its own visibility timeout: asked of the owners
	require.Equal(t, served.HandedOver, ahead().HandedOver)

	var fifo struct{ Messages []sqsMessage }
	require.NoError(t, json.Unmarshal([]byte(tc.ok(2, "ReceiveMessage", `{`+queue("jobs.fifo")+`,"MaxNumberOfMessages":10}`)), &fifo))
	require.Len(t, fifo.Messages, 4, "the group's run together, from its owner")
	require.Equal(t, served.HandedOver, ahead().HandedOver)

	// -read-ahead 0: none, once the topic's settings are read again.
	tc.nodes[2].readAhead = router.ReadAheadOff
	tc.nodes[2].node.ReloadTopic(tc.nodes[2].topicOf(t, "orders"))
	before := ahead()
	for range 3 {
		tc.ok(2, "ReceiveMessage", `{`+queue("orders")+`,"MaxNumberOfMessages":2}`)
	}
	require.Equal(t, before.Reserved, ahead().Reserved, "nothing more reserved")
	require.Equal(t, before.HandedOver, ahead().HandedOver, "nothing served from what is held")
}

// TestClusterSendsLandOnOwners: each node's file log holds its own partitions of a queue
// and no others, and a standard send through a node lands on one of them (the file log's
// pick among its partitions), so that every message sent is received: a send appended to a
// partition another node serves would never be.
func TestClusterSendsLandOnOwners(t *testing.T) {
	tc := newTestCluster(t, 3, 6)
	tc.ok(0, "CreateQueue", `{"QueueName":"spread"}`)
	const each = 20
	for i := range 3 {
		topic := tc.nodes[i].topicOf(t, "spread")
		inLog, _, ok := tc.nodes[i].store.Partitions(topic)
		require.True(t, ok)
		require.Equal(t, []int32{int32(i), int32(i + 3)}, inLog, "node %d's log holds its own partitions alone", i)
		for j := range each {
			var out struct{ MessageId string }
			require.NoError(t, json.Unmarshal([]byte(tc.ok(i, "SendMessage", fmt.Sprintf(`{%s,"MessageBody":"n%d-%d"}`, queue("spread"), i, j))), &out))
			p, err := strconv.Atoi(strings.Split(out.MessageId, ":")[0])
			require.NoError(t, err)
			require.Equal(t, i, p%3, "a send through node %d lands on a partition of its own: %s", i, out.MessageId)
		}
	}
	require.Len(t, tc.receiveAll(1, "spread", 3*each), 3*each)
}

// topicOf returns the topic of queue name, as this node's catalogue has it.
func (s *server) topicOf(t *testing.T, name string) string {
	t.Helper()
	rec, ok := s.cat.lookup(name)
	require.True(t, ok, name)
	return rec.Topic
}

// TestClusterBatch: a DeleteMessageBatch through one node of messages of every owner
// deletes them all, durably (the other owners' forwarded), and a SendMessageBatch through
// each node spreads over the owners.
func TestClusterBatch(t *testing.T) {
	tc := newTestCluster(t, 3, 3)
	tc.ok(2, "CreateQueue", `{"QueueName":"batch"}`)
	for i := range 3 {
		var entries []string
		for j := range 3 {
			entries = append(entries, fmt.Sprintf(`{"Id":"e%d","MessageBody":"n%d-%d"}`, j, i, j))
		}
		out := tc.ok(i, "SendMessageBatch", `{`+queue("batch")+`,"Entries":[`+strings.Join(entries, ",")+`]}`)
		require.NotContains(t, out, `"Failed":[{`)
	}
	got := tc.receiveAll(1, "batch", 9)
	partitions := map[string]bool{}
	var entries []string
	for j, m := range got {
		partitions[strings.Split(m.MessageId, ":")[0]] = true
		entries = append(entries, fmt.Sprintf(`{"Id":"d%d","ReceiptHandle":"%s"}`, j, m.ReceiptHandle))
	}
	require.Len(t, partitions, 3, "every owner's partition")
	out := tc.ok(0, "DeleteMessageBatch", `{`+queue("batch")+`,"Entries":[`+strings.Join(entries[:9], ",")+`]}`)
	require.NotContains(t, out, `"Failed":[{`, out)
	visible, inFlight := tc.depth(2, "batch")
	require.Equal(t, [2]int{0, 0}, [2]int{visible, inFlight})
}

// TestClusterPurge: a PurgeQueue through one node empties the queue on every owner, and
// what is sent afterwards is delivered.
func TestClusterPurge(t *testing.T) {
	tc := newTestCluster(t, 3, 3)
	tc.ok(0, "CreateQueue", `{"QueueName":"jobs"}`)
	for i := range 9 {
		tc.ok(i%3, "SendMessage", `{`+queue("jobs")+`,"MessageBody":"old"}`)
	}
	tc.receiveAll(1, "jobs", 2) // two in flight: purged too
	visible, inFlight := tc.depth(2, "jobs")
	require.Equal(t, [2]int{7, 2}, [2]int{visible, inFlight})
	tc.ok(2, "PurgeQueue", `{`+queue("jobs")+`}`)
	for i := range 3 {
		visible, inFlight := tc.depth(i, "jobs")
		require.Equal(t, [2]int{0, 0}, [2]int{visible, inFlight}, "node %d after the purge", i)
		require.Empty(t, tc.receive(i, "jobs", 10, 0))
	}
	tc.ok(1, "SendMessage", `{`+queue("jobs")+`,"MessageBody":"new"}`)
	got := tc.receiveAll(0, "jobs", 1)
	require.Equal(t, "new", got[0].Body)
}

// TestClusterFIFO: a FIFO queue's groups keep their order when their messages are sent
// through every node (forwarded to the group's owner) and received and deleted through
// others; a group is held while a message of it is in flight, wherever it was received.
func TestClusterFIFO(t *testing.T) {
	tc := newTestCluster(t, 3, 3)
	tc.ok(1, "CreateQueue", `{"QueueName":"jobs.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"true"}}`)
	groups := []string{"a", "b", "c", "d", "e", "f"}
	const perGroup = 5
	sent := 0
	for k := range perGroup {
		for _, g := range groups {
			body := fmt.Sprintf("%s%d", g, k)
			tc.ok(sent%3, "SendMessage", `{`+queue("jobs.fifo")+`,"MessageBody":"`+body+`","MessageGroupId":"`+g+`"}`)
			sent++
		}
	}
	order := map[string][]string{}
	for r := 0; len(slices.Concat(slices.Collect(mapValues(order))...)) < sent; r++ {
		require.Less(t, r, 200, "receives")
		msgs := tc.receive(r%3, "jobs.fifo", 10, 1)
		held := map[string]bool{}
		for _, m := range msgs {
			held[m.Attributes["MessageGroupId"]] = true
		}
		// A group in flight is held: no other receive gets any of it meanwhile.
		for _, m := range tc.receive((r+1)%3, "jobs.fifo", 10, 0) {
			require.False(t, held[m.Attributes["MessageGroupId"]], "group %s held by another receive", m.Attributes["MessageGroupId"])
			tc.ok((r+2)%3, "ChangeMessageVisibility", `{`+queue("jobs.fifo")+`,"ReceiptHandle":"`+m.ReceiptHandle+`","VisibilityTimeout":0}`)
		}
		for _, m := range msgs {
			g := m.Attributes["MessageGroupId"]
			order[g] = append(order[g], m.Body)
			tc.ok((r+2)%3, "DeleteMessage", `{`+queue("jobs.fifo")+`,"ReceiptHandle":"`+m.ReceiptHandle+`"}`)
		}
	}
	for _, g := range groups {
		var want []string
		for k := range perGroup {
			want = append(want, fmt.Sprintf("%s%d", g, k))
		}
		require.Equal(t, want, order[g], "group %s in order", g)
	}
}

// mapValues is the values of m.
func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// TestClusterPeerAuth: the peer endpoints and the node wire refuse a request without the
// cluster's token, or with another, before anything reads it; with it they serve.
func TestClusterPeerAuth(t *testing.T) {
	tc := newTestCluster(t, 2, 2)
	tc.ok(0, "CreateQueue", `{"QueueName":"q"}`)
	peer := "http://" + tc.cf.Nodes[0].Peer
	do := func(method, path, token string, header map[string]string, body string) (int, string) {
		req, err := http.NewRequest(method, peer+path, strings.NewReader(body))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	c := tc.nodes[1].cluster
	node := map[string]string{nodehttp.Header: "node-2"}
	for _, token := range []string{"", "Bearer wrong", c.bearer + "x", strings.TrimPrefix(c.bearer, "Bearer ")} {
		status, _ := do(http.MethodGet, "/sqsd/catalog", token, nil, "")
		require.Equal(t, http.StatusForbidden, status, "catalogue with %q", token)
		status, _ = do(http.MethodPost, "/sqsd/produce", token, nil, `{"topic":"x","partition":0,"record":{}}`)
		require.Equal(t, http.StatusForbidden, status, "produce with %q", token)
		status, _ = do(http.MethodPost, "/node", token, node, "frame")
		require.Equal(t, http.StatusForbidden, status, "node wire with %q", token)
	}
	status, body := do(http.MethodGet, "/sqsd/catalog", c.bearer, nil, "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"q"`)
	status, _ = do(http.MethodPost, "/node", c.bearer, map[string]string{nodehttp.Header: "stranger"}, "frame")
	require.Equal(t, http.StatusForbidden, status, "a node the file does not name")
	// Hostile input with the token: typed refusals, nothing appended.
	status, body = do(http.MethodPost, "/sqsd/produce", c.bearer, nil, `{"topic":"`+tc.nodes[0].topicOf(t, "q")+`","partition":7,"record":{}}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	status, body = do(http.MethodPost, "/sqsd/produce", c.bearer, nil, `{"topic":"`+tc.nodes[0].topicOf(t, "q")+`","partition":1,"record":{}}`)
	require.Equal(t, http.StatusConflict, status, "partition 1 is node-2's: %s", body)
	status, _ = do(http.MethodPost, "/sqsd/produce", c.bearer, nil, `{"topic":`)
	require.Equal(t, http.StatusBadRequest, status)
	status, body = do(http.MethodPost, "/sqsd/catalog/put", c.bearer, nil, `{"name":"q2","exists":false,"record":{"Topic":"stolen"}}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	visible, _ := tc.depth(1, "q")
	require.Zero(t, visible)
	status, _ = tc.call(1, "GetQueueUrl", `{"QueueName":"q2"}`)
	require.Equal(t, http.StatusBadRequest, status)
}

// TestClusterCatalog: a change of a queue through a node other than the home is seen at
// once on that node (the home's answer) and on the home, and on a third node once its mirror
// asked the home (as it does every second); a queue created through one node is found at
// once through another (a miss asks the home).
func TestClusterCatalog(t *testing.T) {
	tc := newTestCluster(t, 3, 2)
	tc.ok(1, "CreateQueue", `{"QueueName":"cfg"}`)
	tc.ok(2, "GetQueueUrl", `{"QueueName":"cfg"}`) // found through a miss
	tc.ok(1, "SetQueueAttributes", `{`+queue("cfg")+`,"Attributes":{"VisibilityTimeout":"77"}}`)
	attr := func(i int) string {
		var out struct{ Attributes map[string]string }
		require.NoError(t, json.Unmarshal([]byte(tc.ok(i, "GetQueueAttributes", `{`+queue("cfg")+`,"AttributeNames":["VisibilityTimeout"]}`)), &out))
		return out.Attributes["VisibilityTimeout"]
	}
	require.Equal(t, "77", attr(1), "read your writes")
	require.Equal(t, "77", attr(0), "the home")
	require.NoError(t, tc.nodes[2].cat.mirror.fresh(context.Background()))
	require.Equal(t, "77", attr(2), "the third node after its refresh")

	// A write based on a record the home no longer has is refused (a 409, which the
	// forwarding node answers ServiceUnavailable: the SDKs retry), not applied.
	stale, ok := tc.nodes[2].cat.lookup("cfg")
	require.True(t, ok)
	tc.ok(0, "TagQueue", `{`+queue("cfg")+`,"Tags":{"team":"a"}}`)
	changed := stale
	changed.Attributes = map[string]string{"VisibilityTimeout": "5"}
	var ans catalogPutAnswer
	err := tc.nodes[2].cluster.call(context.Background(), 0, "/sqsd/catalog/put", catalogPut{Name: "cfg", Exists: true, Base: stale, Record: changed}, &ans)
	var refused *peerStatusError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, http.StatusConflict, refused.Code)
	require.Equal(t, "77", attr(0), "not applied")

	// A restarted mirror serves its last copy of the catalogue, and catches up.
	tc.close(2)
	tc.ok(0, "CreateQueue", `{"QueueName":"later"}`)
	tc.open(2, 2)
	tc.ok(2, "GetQueueUrl", `{"QueueName":"later"}`)
	require.Equal(t, "77", attr(2))
}

// TestClusterNodeDown: while a node is down its partitions are unavailable, and the calls
// that need them are answered at once with ServiceUnavailable (503), which the SDKs retry:
// a delete of its message, a FIFO send of a group it owns; the other partitions serve on.
// Once it is back on its directory, its message (leased when it went down) is delivered
// again, and deleted. With the catalogue's home down, the others serve the queues they know
// and refuse a CreateQueue with ServiceUnavailable.
//
// (A FIFO queue's first send through a node since its start needs every owner: it rebuilds
// the deduplication window from every partition, and fails ServiceUnavailable while one is
// down.)
func TestClusterNodeDown(t *testing.T) {
	tc := newTestCluster(t, 3, 3)
	tc.ok(0, "CreateQueue", `{"QueueName":"s"}`)
	tc.ok(0, "CreateQueue", `{"QueueName":"f.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"true"}}`)
	groupOn := func(p uint32) string { // a group whose partition is p
		for i := 0; ; i++ {
			if g := "g" + strconv.Itoa(i); crc32.ChecksumIEEE([]byte(g))%3 == p {
				return g
			}
		}
	}
	// A FIFO queue's first send through a node rebuilds its deduplication window from every
	// partition: made before the owner goes down.
	for i := range 3 {
		tc.ok(i, "SendMessage", `{`+queue("f.fifo")+`,"MessageBody":"first","MessageGroupId":"`+groupOn(0)+`"}`)
	}
	tc.ok(1, "SendMessage", `{`+queue("s")+`,"MessageBody":"on node-2"}`) // its own partition, 1
	got := tc.receiveAll(0, "s", 1)
	require.True(t, strings.HasPrefix(got[0].MessageId, "1:"), got[0].MessageId)

	tc.close(1)
	status, out := tc.call(0, "DeleteMessage", `{`+queue("s")+`,"ReceiptHandle":"`+got[0].ReceiptHandle+`"}`)
	require.Equal(t, http.StatusServiceUnavailable, status, out)
	require.Contains(t, out, "ServiceUnavailable")
	status, out = tc.call(2, "SendMessage", `{`+queue("f.fifo")+`,"MessageBody":"x","MessageGroupId":"`+groupOn(1)+`"}`)
	require.Equal(t, http.StatusServiceUnavailable, status, out)
	tc.ok(2, "SendMessage", `{`+queue("f.fifo")+`,"MessageBody":"y","MessageGroupId":"`+groupOn(2)+`"}`)
	tc.ok(0, "SendMessage", `{`+queue("s")+`,"MessageBody":"on node-1"}`)
	visible, _ := tc.depth(2, "s")
	require.Equal(t, 1, visible, "node-2's partition counts nothing while it is down")
	require.Equal(t, "on node-1", tc.receiveAll(2, "s", 1)[0].Body)

	tc.open(1, 3)
	back := tc.receiveAll(2, "s", 1)
	require.Equal(t, "on node-2", back[0].Body, "leased when its owner went down: delivered again")
	tc.ok(0, "DeleteMessage", `{`+queue("s")+`,"ReceiptHandle":"`+back[0].ReceiptHandle+`"}`)
	tc.ok(2, "SendMessage", `{`+queue("f.fifo")+`,"MessageBody":"x","MessageGroupId":"`+groupOn(1)+`"}`)

	tc.close(0)
	tc.ok(2, "GetQueueUrl", `{"QueueName":"s"}`)
	status, out = tc.call(1, "CreateQueue", `{"QueueName":"new"}`)
	require.Equal(t, http.StatusServiceUnavailable, status, out)
	tc.open(0, 3)
	tc.ok(1, "CreateQueue", `{"QueueName":"new"}`)
}

// TestClusterRedrive: a message received through one node and given up through another
// (a nack forwarded to its owner) reaches its maxReceiveCount at its owner, which copies it
// into the dead-letter queue; the copy is received through a third node, and the source
// delivers it no more.
func TestClusterRedrive(t *testing.T) {
	tc := newTestCluster(t, 3, 3)
	tc.ok(2, "CreateQueue", `{"QueueName":"dlq"}`)
	var attrs struct{ Attributes map[string]string }
	require.NoError(t, json.Unmarshal([]byte(tc.ok(2, "GetQueueAttributes", `{`+queue("dlq")+`,"AttributeNames":["QueueArn"]}`)), &attrs))
	policy, err := json.Marshal(`{"deadLetterTargetArn":"` + attrs.Attributes["QueueArn"] + `","maxReceiveCount":"1"}`)
	require.NoError(t, err)
	tc.ok(2, "CreateQueue", `{"QueueName":"src","Attributes":{"RedrivePolicy":`+string(policy)+`}}`)
	tc.ok(1, "SendMessage", `{`+queue("src")+`,"MessageBody":"poison"}`) // on node-2's partition
	got := tc.receiveAll(0, "src", 1)
	require.True(t, strings.HasPrefix(got[0].MessageId, "1:"), got[0].MessageId)
	tc.ok(2, "ChangeMessageVisibility", `{`+queue("src")+`,"ReceiptHandle":"`+got[0].ReceiptHandle+`","VisibilityTimeout":0}`)
	dead := tc.receiveAll(2, "dlq", 1)
	require.Equal(t, "poison", dead[0].Body)
	require.Empty(t, tc.receive(0, "src", 10, 0))
	topic := tc.nodes[1].topicOf(t, "src")
	quarantined, err := tc.nodes[1].node.Quarantined(topic, 1)
	require.NoError(t, err)
	require.Empty(t, quarantined, "settled at its owner once copied")
}

// TestClusterFileMismatch: nodes whose cluster files list the nodes in another order (and
// would disagree about ownership) refuse each other's calls; a bad file stops the server.
func TestClusterFileMismatch(t *testing.T) {
	_, cf := writeClusterFile(t, t.TempDir(), 3)
	swapped := cf
	swapped.Nodes = []clusterNode{cf.Nodes[1], cf.Nodes[0], cf.Nodes[2]}
	require.NotEqual(t, newCluster(cf, 0).bearer, newCluster(swapped, 1).bearer)
	require.Equal(t, newCluster(cf, 0).bearer, newCluster(cf, 2).bearer, "one token for every node of a file")
	require.Equal(t, newCluster(cf, 0).receiptKey, newCluster(swapped, 1).receiptKey, "the receipt key is the secret's alone")

	dir := t.TempDir()
	for name, content := range map[string]string{
		"short secret": `{"secret":"short","nodes":[{"id":"a","peer":"127.0.0.1:1"}]}`,
		"no nodes":     `{"secret":"0123456789abcdef","nodes":[]}`,
		"twice":        `{"secret":"0123456789abcdef","nodes":[{"id":"a","peer":"127.0.0.1:1"},{"id":"a","peer":"127.0.0.1:2"}]}`,
		"bad peer":     `{"secret":"0123456789abcdef","nodes":[{"id":"a","peer":"nowhere"}]}`,
		"unknown":      `{"secret":"0123456789abcdef","nodes":[{"id":"a","peer":"127.0.0.1:1"}],"extra":1}`,
		"not me":       `{"secret":"0123456789abcdef","nodes":[{"id":"b","peer":"127.0.0.1:1"}]}`,
		"not json":     `{"secret":`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		_, _, err := readClusterFile(path, "a")
		require.ErrorIs(t, err, errBadClusterFile, name)
	}
	_, err := parseFlags([]string{"-cluster", "c.json", "-node", "a"}, io.Discard)
	require.ErrorContains(t, err, "-credentials", "a cluster needs one credentials file on every node")
	_, err = parseFlags([]string{"-cluster", "c.json"}, io.Discard)
	require.Error(t, err)
}

// TestClusterOtherHome: a home started on another (empty) directory serves a catalogue of
// another ID, which the other nodes refuse rather than drop every queue they have: they
// serve the queues as they last saw them, and their messages with them.
func TestClusterOtherHome(t *testing.T) {
	tc := newTestCluster(t, 2, 2)
	tc.ok(1, "CreateQueue", `{"QueueName":"kept"}`)
	tc.ok(1, "SendMessage", `{`+queue("kept")+`,"MessageBody":"m"}`)
	tc.close(0)
	require.NoError(t, os.Rename(tc.dirs[0], tc.dirs[0]+".old"))
	tc.open(0, 2)
	status, _ := tc.call(0, "GetQueueUrl", `{"QueueName":"kept"}`)
	require.Equal(t, http.StatusBadRequest, status, "the new home has no queue")
	require.ErrorIs(t, tc.nodes[1].cat.mirror.fresh(context.Background()), errOtherCatalog)
	tc.ok(1, "GetQueueUrl", `{"QueueName":"kept"}`)
	got := tc.receive(1, "kept", 10, 1)
	require.Len(t, got, 1, "its own partition's message")
	require.Equal(t, "m", got[0].Body)
}

// TestMirrorRefusesBadSnapshots: a catalogue from the home that is not one (a queue of no
// partitions or too many, no ID, another ID) is refused with a typed error and changes
// nothing; an older snapshot of the same start of the home is passed over.
func TestMirrorRefusesBadSnapshots(t *testing.T) {
	tc := newTestCluster(t, 2, 2)
	tc.ok(0, "CreateQueue", `{"QueueName":"q"}`)
	m := tc.nodes[1].cat.mirror
	require.NoError(t, m.fresh(context.Background()))
	before := jsonOf(tc.nodes[1].cat.next())
	good := tc.nodes[0].cat.snapshot(tc.nodes[0].home.epoch)
	with := func(change func(*catalogSnapshot)) catalogSnapshot {
		snap := good
		snap.Queues = map[string]catalogQueue{}
		for name, q := range good.Queues {
			snap.Queues[name] = q
		}
		change(&snap)
		return snap
	}
	for name, c := range map[string]struct {
		snap catalogSnapshot
		want error
	}{
		"no partitions": {with(func(s *catalogSnapshot) {
			s.Queues["bad"] = catalogQueue{Record: good.Queues["q"].Record, Partitions: 0}
		}), errBadPeerAnswer},
		"too many": {with(func(s *catalogSnapshot) {
			s.Queues["bad"] = catalogQueue{Record: good.Queues["q"].Record, Partitions: 5000}
		}), errBadPeerAnswer},
		"no topic":   {with(func(s *catalogSnapshot) { s.Queues["bad"] = catalogQueue{Partitions: 1} }), errBadPeerAnswer},
		"no ID":      {with(func(s *catalogSnapshot) { s.ID = "" }), errBadPeerAnswer},
		"another ID": {with(func(s *catalogSnapshot) { s.ID = "other"; s.Gen++ }), errOtherCatalog},
	} {
		require.ErrorIs(t, m.apply(c.snap), c.want, name)
		require.Equal(t, before, jsonOf(tc.nodes[1].cat.next()), "%s changed nothing", name)
	}
	older := with(func(s *catalogSnapshot) { delete(s.Queues, "q"); s.Gen-- })
	require.NoError(t, m.apply(older))
	_, ok := tc.nodes[1].cat.lookup("q")
	require.True(t, ok, "an older snapshot is passed over")
}

// TestClusterNodeOnOneProcessDirectory: a node started in cluster mode on the directory of
// a server of one process, with queues of its own, refuses the home's catalogue rather than
// drop them.
func TestClusterNodeOnOneProcessDirectory(t *testing.T) {
	tc := newTestCluster(t, 2, 2)
	tc.close(1)
	require.NoError(t, os.RemoveAll(tc.dirs[1]))
	one := openTestServer(t, tc.dirs[1])
	one.call("CreateQueue", map[string]any{"QueueName": "mine"}, nil)
	require.NoError(t, one.s.Close())
	tc.open(1, 2)
	require.ErrorIs(t, tc.nodes[1].cat.mirror.fresh(context.Background()), errOtherCatalog)
	tc.ok(1, "GetQueueUrl", `{"QueueName":"mine"}`)
}
