package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/cputime"
	"narad.dev/consume/router"
)

// BenchmarkRoundTrip measures a message's way through the server: a batch of 10 sent, then
// received (long-polled) and deleted in a batch, each call made in-process at a node's front
// end. "one" is one server; "cluster" three nodes over loopback, the batch sent through one
// node, received through the next and deleted through the third, so that most records and
// acks cross the node wire. Either way the batch lands on one partition (the one server's
// queue has one, each node owns one of the cluster's three), so its delete syncs one
// partition's acks, and what differs is the node wire. With fsync=true (the default) a send is fsynced before it is
// answered; either way a delete is durable. Reported per message.
func BenchmarkRoundTrip(b *testing.B) {
	for _, fsync := range []bool{true, false} {
		b.Run(fmt.Sprintf("one/fsync=%v", fsync), func(b *testing.B) {
			s, err := openServer(config{dir: filepath.Join(b.TempDir(), "data"), noAuth: true, partitions: 1, fsync: fsync, baseURL: "http://localhost:9324"}, slog.New(slog.DiscardHandler))
			require.NoError(b, err)
			defer s.Close()
			roundTrips(b, []*server{s, s, s})
		})
		b.Run(fmt.Sprintf("cluster/fsync=%v", fsync), func(b *testing.B) {
			roundTrips(b, openBenchCluster(b, func(cfg *config) { cfg.partitions, cfg.fsync = 3, fsync }))
		})
	}
}

// roundTrips runs the benchmark's loop: sends through nodes[0], receives through nodes[1],
// deletes through nodes[2].
func roundTrips(b *testing.B, nodes []*server) {
	call := benchCall(b, nodes)
	call(0, "CreateQueue", `{"QueueName":"bench"}`)
	var entries []string
	for j := range 10 {
		entries = append(entries, fmt.Sprintf(`{"Id":"%d","MessageBody":"message %d of the benchmark"}`, j, j))
	}
	send := `{` + queue("bench") + `,"Entries":[` + strings.Join(entries, ",") + `]}`
	receive := `{` + queue("bench") + `,"MaxNumberOfMessages":10,"WaitTimeSeconds":1}`
	b.ResetTimer()
	for b.Loop() {
		call(0, "SendMessageBatch", send)
		for got := 0; got < 10; {
			got += receiveAndDelete(b, call, 1, 2, "bench", receive)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10), "ns/msg")
}

// openBenchCluster opens three nodes of one cluster, each configured by tune (no
// authentication, no fsync and three partitions a queue before it), closed at the end.
func openBenchCluster(b *testing.B, tune func(*config)) []*server {
	root := b.TempDir()
	file, cf := writeClusterFile(b, root, 3)
	var nodes []*server
	for i := range 3 {
		cfg := config{dir: filepath.Join(root, cf.Nodes[i].ID), noAuth: true, partitions: 3, baseURL: "http://localhost:9324",
			clusterPath: file, nodeID: cf.Nodes[i].ID}
		tune(&cfg)
		s, err := openServer(cfg, slog.New(slog.DiscardHandler))
		require.NoError(b, err)
		b.Cleanup(func() { s.Close() })
		nodes = append(nodes, s)
	}
	return nodes
}

// benchCall returns a call of action with body (JSON) at node i's front end of nodes, in
// process, that fails the benchmark unless it is answered 200, and returns the answer.
func benchCall(b *testing.B, nodes []*server) func(i int, action, body string) string {
	tc := &testCluster{nodes: nodes}
	return func(i int, action, body string) string {
		status, out := tc.callTB(i, action, body)
		if status != 200 {
			b.Fatalf("%s: %d %s", action, status, out)
		}
		return out
	}
}

// receiveAndDelete makes the receive (a ReceiveMessage body) of queue name at node from, and
// deletes what it got in one DeleteMessageBatch at node by; it returns how many it got.
func receiveAndDelete(b *testing.B, call func(i int, action, body string) string, from, by int, name, receive string) int {
	var out struct{ Messages []sqsMessage }
	if err := json.Unmarshal([]byte(call(from, "ReceiveMessage", receive)), &out); err != nil {
		b.Fatal(err)
	}
	if len(out.Messages) == 0 {
		return 0
	}
	var dels []string
	for k, m := range out.Messages {
		dels = append(dels, fmt.Sprintf(`{"Id":"%d","ReceiptHandle":"%s"}`, k, m.ReceiptHandle))
	}
	call(by, "DeleteMessageBatch", `{`+queue(name)+`,"Entries":[`+strings.Join(dels, ",")+`]}`)
	return len(out.Messages)
}

// BenchmarkGatewayReceive drains a backlog through a node that owns none of the queue's
// partitions (three nodes over loopback, the queue's two partitions on the first two): a
// receive of ten naming no visibility timeout and a DeleteMessageBatch of what it got, each
// in-process at that node's front end, until every message sent (through the first node,
// before the timer starts) was deleted. readahead=true is sqsd's default, the receives served
// from what the node reserved ahead at the owners; readahead=false (-read-ahead 0) asks the
// owners on each receive. One op is one message; cpu-ns/msg is the process's CPU (all three
// nodes, both ends of every RPC) per message, ahead/msg the share handed over from what was
// read ahead.
func BenchmarkGatewayReceive(b *testing.B) {
	for _, ahead := range []bool{true, false} {
		b.Run(fmt.Sprintf("readahead=%v", ahead), func(b *testing.B) {
			nodes := openBenchCluster(b, func(cfg *config) {
				cfg.partitions = 2
				if !ahead {
					cfg.readAhead = router.ReadAheadOff
				}
			})
			call := benchCall(b, nodes)
			call(0, "CreateQueue", `{"QueueName":"backlog"}`)
			for sent := 0; sent < b.N; sent += 10 {
				var entries []string
				for j := range 10 {
					entries = append(entries, fmt.Sprintf(`{"Id":"%d","MessageBody":"message %d"}`, j, sent+j))
				}
				call(0, "SendMessageBatch", `{`+queue("backlog")+`,"Entries":[`+strings.Join(entries, ",")+`]}`)
			}
			want := (b.N + 9) / 10 * 10
			receive := `{` + queue("backlog") + `,"MaxNumberOfMessages":10}`
			cpu := cputime.Process()
			b.ResetTimer()
			for got, empty := 0, 0; got < want; {
				n := receiveAndDelete(b, call, 2, 2, "backlog", receive)
				if n == 0 {
					if empty++; empty > 1000 {
						b.Fatalf("%d of %d received, then nothing", got, want)
					}
				}
				got += n
			}
			b.StopTimer()
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(want), "cpu-ns/msg")
			b.ReportMetric(float64(nodes[2].node.Stats().Ahead.HandedOver)/float64(want), "ahead/msg")
		})
	}
}
