package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// TestServerCluster: three cmd/sqsd processes in cluster mode (-cluster, -node) serve the
// same queues to the SDK through each of them: a queue created through one, messages sent
// through a second with their attributes, received through the third and deleted in a
// batch through the first, counted the same through every node; a FIFO queue's groups
// come in order when sends and receives go through different nodes; a purge through one
// node empties the queue for all.
func TestServerCluster(t *testing.T) {
	bin := buildServer(t)
	dir := t.TempDir()
	creds := writeCredentials(t, dir)
	ctx := context.Background()

	type node struct {
		ID   string `json:"id"`
		Peer string `json:"peer"`
	}
	file := struct {
		Secret string `json:"secret"`
		Nodes  []node `json:"nodes"`
	}{Secret: "an example secret of the test's own"}
	var held []net.Listener // the peer ports, held until all three are chosen
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		held = append(held, ln)
		file.Nodes = append(file.Nodes, node{ID: fmt.Sprint("sqs-", i+1), Peer: ln.Addr().String()})
	}
	for _, ln := range held {
		ln.Close()
	}
	data, err := json.Marshal(file)
	require.NoError(t, err)
	clusterFile := filepath.Join(dir, "cluster.json")
	require.NoError(t, os.WriteFile(clusterFile, data, 0o600))
	var procs []*serverProc
	var clients []*sqs.Client
	for _, n := range file.Nodes {
		p := startServer(t, bin, filepath.Join(dir, n.ID), "-cluster", clusterFile, "-node", n.ID, "-credentials", creds, "-partitions", "3")
		procs, clients = append(procs, p), append(clients, p.client())
	}
	// urlAt is a queue's URL as node i answers it.
	urlAt := func(i int, name string) *string {
		out, err := clients[i].GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		require.NoError(t, err, "node %d", i)
		return out.QueueUrl
	}
	depth := func(i int, q *string) string {
		out, err := clients[i].GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q,
			AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
		require.NoError(t, err)
		return out.Attributes["ApproximateNumberOfMessages"] + "/" + out.Attributes["ApproximateNumberOfMessagesNotVisible"]
	}

	_, err = clients[0].CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs"), Attributes: map[string]string{"VisibilityTimeout": "600"}})
	require.NoError(t, err)
	var entries []types.SendMessageBatchRequestEntry
	for i := range 9 {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(fmt.Sprint("m", i)),
			MessageAttributes: map[string]types.MessageAttributeValue{"n": {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(i))}}})
	}
	sent, err := clients[1].SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: urlAt(1, "jobs"), Entries: entries})
	require.NoError(t, err)
	require.Len(t, sent.Successful, 9)
	for i := range 3 {
		require.Equal(t, "9/0", depth(i, urlAt(i, "jobs")), "node %d counts the whole queue", i)
	}
	var received []types.Message
	for len(received) < 9 {
		out, err := clients[2].ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: urlAt(2, "jobs"), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"}})
		require.NoError(t, err)
		received = append(received, out.Messages...)
	}
	require.Len(t, received, 9)
	var deletes []types.DeleteMessageBatchRequestEntry
	for i, m := range received {
		require.Equal(t, (*m.Body)[1:], *m.MessageAttributes["n"].StringValue, "its attributes came with it")
		deletes = append(deletes, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	del, err := clients[0].DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: urlAt(0, "jobs"), Entries: deletes})
	require.NoError(t, err)
	require.Len(t, del.Successful, 9, "%v", del.Failed)
	for i := range 3 {
		require.Equal(t, "0/0", depth(i, urlAt(i, "jobs")), "node %d", i)
	}

	// A FIFO queue: each group's messages sent through every node in turn, received
	// through one node and deleted through another.
	_, err = clients[1].CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	require.NoError(t, err)
	groups := []string{"a", "b", "c", "d"}
	for k := range 4 {
		for j, g := range groups {
			i := (k + j) % 3
			_, err := clients[i].SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: urlAt(i, "jobs.fifo"), MessageBody: aws.String(fmt.Sprint(g, k)), MessageGroupId: aws.String(g)})
			require.NoError(t, err)
		}
	}
	order := map[string][]string{}
	for n, r := 0, 0; n < 16; r++ {
		require.Less(t, r, 200, "receives for %d messages", 16-n)
		out, err := clients[r%3].ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: urlAt(r%3, "jobs.fifo"), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"MessageGroupId"}})
		require.NoError(t, err)
		for _, m := range out.Messages {
			g := m.Attributes["MessageGroupId"]
			order[g] = append(order[g], *m.Body)
			_, err := clients[(r+1)%3].DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: urlAt((r+1)%3, "jobs.fifo"), ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
			n++
		}
	}
	for _, g := range groups {
		require.Equal(t, []string{g + "0", g + "1", g + "2", g + "3"}, order[g], "group %s", g)
	}

	// A purge through one node empties the queue for every node.
	for i := range 6 {
		_, err := clients[i%3].SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: urlAt(i%3, "jobs"), MessageBody: aws.String("old")})
		require.NoError(t, err)
	}
	require.Equal(t, "6/0", depth(0, urlAt(0, "jobs")))
	_, err = clients[2].PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: urlAt(2, "jobs")})
	require.NoError(t, err)
	for i := range 3 {
		require.Equal(t, "0/0", depth(i, urlAt(i, "jobs")), "node %d after the purge", i)
	}
	for _, p := range procs {
		p.stop()
	}
}
