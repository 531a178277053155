package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

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
			n := stores.Add(1)
			return newEtcdStore(cli, fmt.Sprintf("/test/%d/state/", n), fmt.Sprintf("/test/%d/epoch/", n))
		},
		Reopen: func(t *testing.T, s router.StateStore) router.StateStore {
			es := s.(*etcdStore)
			return newEtcdStore(testClient(t, endpoint), es.prefix, es.epochs)
		},
		Fences: true,
		// The controller grants a partition by putting its epoch key: the put's revision is
		// the grant's epoch.
		Grant: func(t *testing.T, s router.StateStore, topic string, partition int32) uint64 {
			es := s.(*etcdStore)
			resp, err := es.cli.Put(context.Background(), es.epochKey(topic, partition), "granted")
			if err != nil {
				t.Fatalf("granting %s/%d: %v", topic, partition, err)
			}
			return uint64(resp.Header.Revision)
		},
	})
}

// A batch larger than one Txn takes (etcd's max-txn-ops) is saved in several, all of it.
func TestStoreSaveSplitsTxns(t *testing.T) {
	s := newEtcdStore(testEtcd(t), "/split/state/", "/split/epoch/")
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

// grantEpoch plays the controller's grant of a partition: it puts the partition's epoch key and
// returns its mod revision, the grant's epoch.
func grantEpoch(t *testing.T, s *etcdStore, topic string, p int32) uint64 {
	t.Helper()
	resp, err := s.cli.Put(t.Context(), s.epochKey(topic, p), "granted")
	if err != nil {
		t.Fatal(err)
	}
	return uint64(resp.Header.Revision)
}

// The store refuses, with router.ErrFenced, a save under an epoch older than the
// partition's newest grant, and takes saves under that grant or a newer one; a batch with
// one fenced entry saves none of its entries. Deleting the topic's states leaves the epochs
// (they are the controller's): the old owner stays fenced.
func TestStoreFencesOlderEpochs(t *testing.T) {
	s := newEtcdStore(testEtcd(t), "/fence/state/", "/fence/epoch/")
	ctx := t.Context()
	save := func(p int32, epoch uint64, state string) error {
		return s.Save(ctx, []router.PartitionState{{Topic: "orders", Partition: p, State: []byte(state), Epoch: epoch}})
	}
	load := func(p int32) string {
		b, err := s.Load(ctx, "orders", p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := save(0, 0, "never granted"); err != nil {
		t.Fatalf("a partition never granted takes every save: %v", err)
	}
	first := grantEpoch(t, s, "orders", 0)
	if err := save(0, first, "owner 1"); err != nil {
		t.Fatalf("a save under the grant's epoch: %v", err)
	}
	second := grantEpoch(t, s, "orders", 0) // failed over
	err := save(0, first, "owner 1, deposed")
	if !errors.Is(err, router.ErrFenced) {
		t.Fatalf("a save under the older epoch %d after a grant of epoch %d: %v, want ErrFenced", first, second, err)
	}
	t.Logf("refused: %v", err)
	if got := load(0); got != "owner 1" {
		t.Fatalf("after the refused save the store holds %q", got)
	}
	if err := save(0, second, "owner 2"); err != nil {
		t.Fatalf("a save under the new grant: %v", err)
	}
	if err := save(0, second+5, "owner 2, a newer epoch"); err != nil {
		t.Fatalf("a save under an epoch above the grant's: %v", err)
	}

	// All or nothing: partition 1 is fine, partition 0's entry is fenced.
	err = s.Save(ctx, []router.PartitionState{
		{Topic: "orders", Partition: 1, State: []byte("p1"), Epoch: second},
		{Topic: "orders", Partition: 0, State: []byte("stale"), Epoch: first},
	})
	if !errors.Is(err, router.ErrFenced) {
		t.Fatalf("a batch with a fenced entry: %v, want ErrFenced", err)
	}
	if got := load(1); got != "" {
		t.Fatalf("a refused batch saved partition 1: %q", got)
	}

	if err := s.Delete(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := save(0, first, "deposed, after the delete"); !errors.Is(err, router.ErrFenced) {
		t.Fatalf("after Delete, a save under the older epoch: %v, want ErrFenced", err)
	}
}

// A save that times out may be committed later than the saves that follow it (etcd forwards
// a proposal held by a raft leader that was paused to the next leader when it continues):
// it then changes nothing, since its comparison of the state key's revision no longer holds.
// The save after a timeout reads the revision again, and saves.
func TestStoreLateSaveChangesNothing(t *testing.T) {
	s := newEtcdStore(testEtcd(t), "/late/state/", "/late/epoch/")
	ctx := t.Context()
	epoch := grantEpoch(t, s, "orders", 0)
	state := func(v string) []router.PartitionState {
		return []router.PartitionState{{Topic: "orders", Partition: 0, State: []byte(v), Epoch: epoch}}
	}
	if err := s.Save(ctx, state("v1")); err != nil {
		t.Fatal(err)
	}
	// v2's Txn is built and sent, and its answer never comes: the store forgets what it knew.
	late, err := s.build(ctx, state("v2"))
	if err != nil {
		t.Fatal(err)
	}
	s.forget(late.keys...)
	if err := s.Save(ctx, state("v3")); err != nil {
		t.Fatalf("the save after a timeout: %v", err)
	}
	resp, err := s.cli.Txn(ctx).If(late.cmps...).Then(late.puts...).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Succeeded {
		t.Fatal("the late save was committed over a newer state")
	}
	if got, err := s.Load(ctx, "orders", 0); err != nil || string(got) != "v3" {
		t.Fatalf("Load = %q, %v; want v3", got, err)
	}

	// The other order: the timed-out save is committed first, then the next save finds the
	// key moved on, reads it again, and saves.
	late, err = s.build(ctx, state("v4"))
	if err != nil {
		t.Fatal(err)
	}
	s.forget(late.keys...)
	if resp, err := s.cli.Txn(ctx).If(late.cmps...).Then(late.puts...).Commit(); err != nil || !resp.Succeeded {
		t.Fatalf("the timed-out save, committed: %v, %v", resp, err)
	}
	s.seen(late.keys[0], 1) // a revision it believes, wrongly: the next save compares it first
	if err := s.Save(ctx, state("v5")); err != nil {
		t.Fatalf("the save after the late one: %v", err)
	}
	if got, err := s.Load(ctx, "orders", 0); err != nil || string(got) != "v5" {
		t.Fatalf("Load = %q, %v; want v5", got, err)
	}
}

// The library deposes a partition whose save the store refused as fenced: a node granted a
// partition under an epoch that a newer grant replaced (the host never told it: a stale
// grant) stops serving it at its next save, and what it acked since is not in the store.
func TestFencedSaveDeposesTheNode(t *testing.T) {
	cli := testEtcd(t)
	s := newEtcdStore(cli, "/deposed/state/", "/deposed/epoch/")
	ctx := t.Context()
	epoch := grantEpoch(t, s, "orders", 0)
	logs := &routertest.MemLogs{}
	for range 3 {
		logs.Log("orders", 0).Append(nil, []byte("v"), time.Time{})
	}
	routes := &routertest.Routes{}
	routes.Set("orders", 0)
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: t.TempDir(), Store: s,
		CommitInterval: 20 * time.Millisecond, Ownership: staleGrant(epoch)})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	msgs, err := node.Consume(ctx, "orders", router.ConsumeOptions{Max: 3})
	if err != nil || len(msgs) != 3 {
		t.Fatalf("consume: %d, %v", len(msgs), err)
	}
	if err := node.AckDurable(ctx, "orders", msgs[0].Receipt); err != nil {
		t.Fatalf("a durable ack under the grant: %v", err)
	}
	grantEpoch(t, s, "orders", 0) // granted to another node; this one is not told
	if err := node.Ack(ctx, "orders", msgs[1].Receipt); err != nil {
		t.Fatalf("an ack before the next save: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for node.Stats().Deposed == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the node was not deposed by the fenced save")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := node.Ack(ctx, "orders", msgs[2].Receipt); !errors.Is(err, router.ErrMoved) {
		t.Fatalf("an ack after the fenced save: %v, want ErrMoved", err)
	}
	st, err := s.Load(context.Background(), "orders", 0)
	if err != nil || len(st) == 0 {
		t.Fatalf("the state stored under the first grant: %d bytes, %v", len(st), err)
	}
}

// staleGrant grants every partition under one epoch, for an hour: a host whose view of the
// grants never moves on.
type staleGrant uint64

func (g staleGrant) Grant(string, int32) (router.Grant, bool) {
	return router.Grant{Epoch: uint64(g), Left: time.Hour}, true
}
