package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// The topics of the fixture: one whose directory name is the topic, one the node escapes.
const (
	topicOrders  = "orders"
	topicBilling = "Billing.Events"
)

// cluster is the host side of a node over a state directory: its logs and routes, kept
// across restarts.
type cluster struct {
	dir    string
	logs   *routertest.MemLogs
	routes *routertest.Routes
}

func newCluster(dir string) *cluster {
	c := &cluster{dir: dir, logs: &routertest.MemLogs{}, routes: &routertest.Routes{}}
	c.routes.Set(topicOrders, 0, 1)
	c.routes.Set(topicBilling, 0)
	return c
}

// start opens a node on the cluster's directory; a record is quarantined at its second
// delivery.
func (c *cluster) start(t testing.TB) *router.Node {
	t.Helper()
	n, err := router.New(router.Config{Logs: c.logs, Routes: c.routes, Dir: c.dir,
		Topic: func(string) router.TopicConfig { return router.TopicConfig{MaxDeliveries: 2} }})
	require.NoError(t, err)
	return n
}

func (c *cluster) append(n *router.Node, topic string, partition int32, count int) {
	log := c.logs.Log(topic, partition)
	for i := range count {
		off := log.Append(nil, fmt.Appendf(nil, "%s-%d-%d", topic, partition, i), time.Unix(0, 0))
		n.Appended(topic, partition, off+1)
	}
}

// consume leases up to max records of one partition, ascending.
func consume(t testing.TB, n *router.Node, topic string, partition int32, max int) []router.Message {
	t.Helper()
	msgs, err := n.Consume(context.Background(), topic, router.ConsumeOptions{Max: max, Pinned: true, Partition: partition})
	require.NoError(t, err)
	return msgs
}

// settle acks the messages at the offsets listed, and nacks those at the offsets nacked.
func settle(t testing.TB, n *router.Node, msgs []router.Message, acked, nacked []int64) {
	t.Helper()
	for _, m := range msgs {
		switch {
		case slices.Contains(acked, m.Offset):
			require.NoError(t, n.Ack(context.Background(), m.Topic, m.Receipt))
		case slices.Contains(nacked, m.Offset):
			require.NoError(t, n.Nack(context.Background(), m.Topic, m.Receipt, 0))
		}
	}
}

// buildState leaves in c.dir what a node leaves at a graceful Close after some work:
//   - orders/0: 20 records, 0 to 9, 12, 13 and 15 acked (frontier 9, 3 acked ahead in 2
//     runs), 11 nacked at both its deliveries (quarantined), the rest leased at Close (their
//     attempts kept); both slots hold a record, the older one from before the quarantine;
//   - orders/1: 3 records, all acked (frontier 2);
//   - Billing.Events/0: 5 records, 0, 1 and 3 acked (frontier 1, 3 acked ahead).
func buildState(t testing.TB, c *cluster) {
	t.Helper()
	n := c.start(t)
	c.append(n, topicOrders, 0, 20)
	c.append(n, topicOrders, 1, 3)
	c.append(n, topicBilling, 0, 5)
	msgs := consume(t, n, topicOrders, 0, 20)
	require.Len(t, msgs, 20)
	settle(t, n, msgs, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15}, []int64{11})
	require.NoError(t, n.Persist(context.Background(), topicOrders, 0)) // one record written out, the next in the other slot
	again := consume(t, n, topicOrders, 0, 1)
	require.Len(t, again, 1)
	require.Equal(t, int64(11), again[0].Offset)
	settle(t, n, again, nil, []int64{11})
	quarantined, err := n.Quarantined(topicOrders, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{11}, quarantined)
	settle(t, n, consume(t, n, topicOrders, 1, 3), []int64{0, 1, 2}, nil)
	settle(t, n, consume(t, n, topicBilling, 0, 5), []int64{0, 1, 3}, nil)
	require.NoError(t, n.Close())
}

// result is one run of the tool.
type result struct {
	code           int
	stdout, stderr string
}

// runTool runs the tool in-process with args, the clock at now.
func runTool(t testing.TB, now time.Time, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	tl := &tool{stdout: &stdout, stderr: &stderr, now: func() time.Time { return now }}
	code := tl.run(args)
	return result{code, stdout.String(), stderr.String()}
}

// verifyJSON runs verify -json over args and decodes its report.
func verifyJSON(t testing.TB, args ...string) (report, result) {
	t.Helper()
	res := runTool(t, time.Time{}, append([]string{"verify", "-json"}, args...)...)
	require.Contains(t, []int{exitOK, exitFindings}, res.code, "stderr: %s", res.stderr)
	var rep report
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep), res.stdout)
	return rep, res
}

// partitionOf finds a partition in a report.
func partitionOf(t testing.TB, rep report, topic string, partition int32) partitionReport {
	t.Helper()
	for _, p := range rep.Partitions {
		if p.Topic == topic && p.Partition == partition {
			return p
		}
	}
	t.Fatalf("no partition %s/%d in the report", topic, partition)
	return partitionReport{}
}

// tree lists every path below dir with its size and the bytes of small files, to tell whether
// anything was written.
func tree(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d", path, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", data)
		}
		b.WriteByte('\n')
		return nil
	}))
	return b.String()
}

// copyPartition copies the state files of one partition directory into another.
func copyPartition(t testing.TB, from, to string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(to, 0o755))
	entries, err := os.ReadDir(from)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, e.Name()), data, 0o644))
	}
}
