package main

import (
	"fmt"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// testEtcd starts a single-member etcd in the test's temporary directory and returns a
// client of it; both end with the test.
func testEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	addrs, err := launch.FreeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	m := member{Name: "test", ClientURL: "http://" + addrs[0], PeerURL: "http://" + addrs[1], Dir: t.TempDir()}
	e, err := startMember(m, initialCluster([]member{m}), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return testClient(t, m.ClientURL)
}

func testClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := newClient(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestStateStore runs the library's conformance suite for a router.StateStore against
// etcdStore over an embedded etcd: each store its own prefix, and a reopen a new client
// (a new process) over the same etcd.
func TestStateStore(t *testing.T) {
	cli := testEtcd(t)
	endpoint := cli.Endpoints()[0]
	var stores atomic.Int64
	routertest.TestStateStore(t, routertest.StoreHarness{
		New: func(t *testing.T) router.StateStore {
			return newEtcdStore(cli, fmt.Sprintf("/test/%d/", stores.Add(1)))
		},
		Reopen: func(t *testing.T, s router.StateStore) router.StateStore {
			return newEtcdStore(testClient(t, endpoint), s.(*etcdStore).prefix)
		},
	})
}

// A batch larger than one Txn takes (etcd's max-txn-ops) is saved in several, all of it.
func TestStoreSaveSplitsTxns(t *testing.T) {
	s := newEtcdStore(testEtcd(t), "/split/")
	var batch []router.PartitionState
	for p := range int32(3*maxTxnOps + 5) {
		batch = append(batch, router.PartitionState{Topic: "orders", Partition: p, State: []byte(fmt.Sprint("state ", p))})
	}
	if err := s.Save(t.Context(), batch); err != nil {
		t.Fatalf("Save of %d states: %v", len(batch), err)
	}
	for _, e := range batch {
		b, err := s.Load(t.Context(), e.Topic, e.Partition)
		if err != nil || string(b) != string(e.State) {
			t.Fatalf("Load(orders, %d) = %q, %v; want %q", e.Partition, b, err, e.State)
		}
	}
}
