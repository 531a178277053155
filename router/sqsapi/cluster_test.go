package sqsapi_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
	"narad.dev/consume/router/sqsapi"
)

// twoNodes is a queue's topic split over two nodes on one in-memory network: a owns
// partition 0, b partition 1, and they share the logs.
type twoNodes struct {
	t         *testing.T
	net       *routertest.Network
	logs      *routertest.MemLogs
	a, b      *router.Node
	routesA   *routertest.Routes
	routesB   *routertest.Routes
	diskB     *crashfs.FS
	configOfB func(fs *crashfs.FS) router.Config
}

// newTwoNodes starts the two nodes, b at node wire version bVersion (0: the newest).
func newTwoNodes(t *testing.T, bVersion uint8) *twoNodes {
	c := &twoNodes{t: t, net: &routertest.Network{}, logs: &routertest.MemLogs{}, routesA: &routertest.Routes{}, routesB: &routertest.Routes{}, diskB: crashfs.New()}
	c.routesA.Set("orders", 0)
	c.routesA.SetRemote("orders", "b", 1)
	c.routesB.Set("orders", 1)
	c.routesB.SetRemote("orders", "a", 0)
	c.logs.Log("orders", 0)
	c.logs.Log("orders", 1)
	var err error
	c.a, err = router.New(router.Config{Logs: c.logs, Routes: c.routesA, Dir: "/state", FS: crashfs.New(), Transport: c.net.Transport("a")})
	require.NoError(t, err)
	c.net.Join("a", c.a.Serve)
	c.configOfB = func(fs *crashfs.FS) router.Config {
		return router.Config{Logs: c.logs, Routes: c.routesB, Dir: "/state", FS: fs, Transport: c.net.Transport("b"), WireVersion: bVersion}
	}
	c.startB(c.diskB)
	return c
}

func (c *twoNodes) startB(fs *crashfs.FS) {
	var err error
	c.b, err = router.New(c.configOfB(fs))
	require.NoError(c.t, err)
	c.net.Join("b", c.b.Serve)
}

func (c *twoNodes) close() {
	c.a.Close()
	c.b.Close()
}

// produce appends n messages to partition p and tells its owner.
func (c *twoNodes) produce(p int32, n int) {
	owner := c.a
	if p == 1 {
		owner = c.b
	}
	for range n {
		off := c.logs.Log("orders", p).Append(nil, []byte("m"), time.Now())
		owner.Appended("orders", p, off+1)
	}
}

// In a cluster, GetQueueAttributes on one node counts the whole queue, the partitions other
// nodes own included (what they lease counts as not visible), and PurgeQueue empties the
// whole queue, durably at every owner: a power cut of the other owner right after the
// answer brings nothing back.
func TestClusterQueueDepthAndPurge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTwoNodes(t, 0)
		defer func() { c.close() }()
		queues := func(name string) (string, bool) { return name, name == "orders" }
		h := mustNew(t, c.a, sqsapi.Config{BaseURL: baseURL, Queues: queues, Now: time.Now})
		c.produce(0, 2)
		c.produce(1, 3)
		leased, err := c.b.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 1, Pinned: true, Partition: 1})
		require.NoError(t, err)
		require.Len(t, leased, 1)

		counts := func() map[string]string {
			var out struct{ Attributes map[string]string }
			ok(t, call(h, "GetQueueAttributes", `{"QueueUrl":"`+queueURL+`","AttributeNames":["All"]}`), &out)
			return out.Attributes
		}
		got := counts()
		require.Equal(t, "4", got["ApproximateNumberOfMessages"], "both partitions' visible messages")
		require.Equal(t, "1", got["ApproximateNumberOfMessagesNotVisible"], "the lease b holds")

		ok(t, call(h, "PurgeQueue", `{"QueueUrl":"`+queueURL+`"}`), nil)
		cut := c.diskB.PowerCut(crashfs.PowerCut{})
		c.b.Close()
		c.startB(cut)
		got = counts()
		require.Equal(t, "0", got["ApproximateNumberOfMessages"], "b's partition purged, on its disk")
		require.Equal(t, "0", got["ApproximateNumberOfMessagesNotVisible"])
		status, err := c.b.TopicStatus("orders")
		require.NoError(t, err)
		require.Equal(t, int64(2), status[0].Frontier)
	})
}

// With an owner on a release before node wire version 12, GetQueueAttributes counts what it
// can (the partitions of the nodes that answer), and PurgeQueue fails, naming the partition
// it could not purge, while the purge of the others stands; it counts as no purge, so
// another may follow at once.
func TestClusterPurgeWithAnOlderOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTwoNodes(t, 11)
		defer c.close()
		queues := func(name string) (string, bool) { return name, name == "orders" }
		h := mustNew(t, c.a, sqsapi.Config{BaseURL: baseURL, Queues: queues, Now: time.Now})
		c.produce(0, 2)
		c.produce(1, 3)
		var out struct{ Attributes map[string]string }
		ok(t, call(h, "GetQueueAttributes", `{"QueueUrl":"`+queueURL+`","AttributeNames":["ApproximateNumberOfMessages"]}`), &out)
		require.Equal(t, "2", out.Attributes["ApproximateNumberOfMessages"], "b's partition is not counted")

		for range 2 {
			e := failed(t, call(h, "PurgeQueue", `{"QueueUrl":"`+queueURL+`"}`))
			require.Equal(t, "InternalFailure", e.Type)
			require.Contains(t, e.Message, "not purged: partition 1 (router: unsupported rpc operation: b runs a release before node wire version 12")
		}
		status, err := c.a.TopicStatus("orders")
		require.NoError(t, err)
		require.Zero(t, status[0].Backlog, "a's partition purged")
		msgs, err := c.b.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 10})
		require.NoError(t, err)
		require.Len(t, msgs, 3, "b's messages were not purged")
	})
}
