package routertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
)

// StoreHarness tells TestStateStore how to make the host's store. New is required.
type StoreHarness struct {
	// New returns a new, empty store.
	New func(t *testing.T) router.StateStore
	// Reopen, if set, returns the store s as a new process would find it after s's process
	// ended (s is not used again): what Save returned for must be there.
	Reopen func(t *testing.T, s router.StateStore) router.StateStore
	// Fences says the store fences by ownership epoch, as a store shared by the nodes of a
	// cluster must (see router.StateStore): TestStateStore then checks that it refuses a save
	// under an older epoch than the partition's, with an error wrapping router.ErrFenced, and
	// changes nothing for it.
	Fences bool
	// Grant, for a store that learns a partition's epoch from the host's grant (a key the
	// host's failover writes) rather than from the saves, grants the partition anew as the
	// host does and returns the grant's epoch, larger than the last. Nil: the store holds the
	// newest epoch saved, and the suite makes epochs up.
	Grant func(t *testing.T, s router.StateStore, topic string, partition int32) (epoch uint64)
}

// TestStateStore runs the library's conformance suite against a host's router.StateStore:
// the contract of Load, Save and Delete case by case (absent states, replacement, batches,
// odd topic names and partitions, copies), concurrent use (run it under -race), durability
// across a reopen when the harness can reopen, and acks kept through a router.Node that
// restarts on another machine with the same store, and through a failover that adopts a
// stored state.
func TestStateStore(t *testing.T, h StoreHarness) {
	t.Run("Contract", func(t *testing.T) { testStoreContract(t, h) })
	t.Run("Concurrent", func(t *testing.T) { testStoreConcurrent(t, h) })
	if h.Reopen != nil {
		t.Run("Reopen", func(t *testing.T) { testStoreReopen(t, h) })
	}
	t.Run("ThroughANode", func(t *testing.T) { testStoreThroughNode(t, h) })
	if h.Fences {
		t.Run("Fences", func(t *testing.T) { testStoreFences(t, h) })
	}
}

// testStoreFences checks a fencing store: a save under the partition's epoch passes, one
// under an older epoch (the owner it was taken from) is refused with router.ErrFenced and
// changes nothing, and another partition's epoch is its own.
func testStoreFences(t *testing.T, h StoreHarness) {
	s := h.New(t)
	grant := h.Grant
	if grant == nil {
		last := uint64(4)
		grant = func(*testing.T, router.StateStore, string, int32) uint64 { last++; return last }
	}
	save := func(p int32, gen int, epoch uint64) error {
		return s.Save(context.Background(), []router.PartitionState{{Topic: "orders", Partition: p, State: state("orders", p, gen), Epoch: epoch}})
	}
	old := grant(t, s, "orders", 0)
	if err := save(0, 1, old); err != nil {
		t.Fatalf("a first save under epoch %d: %v", old, err)
	}
	if err := save(0, 2, old); err != nil {
		t.Fatalf("a save under the same epoch: %v", err)
	}
	current := grant(t, s, "orders", 0) // failed over: the new owner's epoch
	if current <= old {
		t.Fatalf("Grant returned epoch %d after %d: epochs must grow", current, old)
	}
	want := state("orders", 0, 2)
	if h.Grant == nil { // the store learns the epoch from the new owner's first save
		if err := save(0, 3, current); err != nil {
			t.Fatalf("the new owner's save under epoch %d: %v", current, err)
		}
		want = state("orders", 0, 3)
	}
	for _, older := range []uint64{old, 0} {
		err := save(0, 9, older)
		if !errors.Is(err, router.ErrFenced) {
			t.Fatalf("a save under epoch %d after epoch %d: %v, want an error wrapping router.ErrFenced", older, current, err)
		}
		if b := mustLoad(t, s, "orders", 0); !bytes.Equal(b, want) {
			t.Fatalf("a refused save changed the state: %q", b)
		}
	}
	if err := save(0, 4, current); err != nil {
		t.Fatalf("a save under the partition's epoch: %v", err)
	}
	other := grant(t, s, "orders", 1)
	if err := save(1, 1, other); err != nil {
		t.Fatalf("another partition's save under its own epoch: %v", err)
	}
}

func state(topic string, p int32, gen int) []byte {
	return []byte(fmt.Sprintf("state of %s/%d, generation %d", topic, p, gen))
}

func mustLoad(t *testing.T, s router.StateStore, topic string, p int32) []byte {
	t.Helper()
	b, err := s.Load(context.Background(), topic, p)
	if err != nil {
		t.Fatalf("Load(%q, %d): %v", topic, p, err)
	}
	return b
}

func mustSave(t *testing.T, s router.StateStore, batch ...router.PartitionState) {
	t.Helper()
	if err := s.Save(context.Background(), batch); err != nil {
		t.Fatalf("Save of %d states: %v", len(batch), err)
	}
}

func testStoreContract(t *testing.T, h StoreHarness) {
	s := h.New(t)
	ctx := context.Background()
	if b := mustLoad(t, s, "orders", 0); b != nil {
		t.Fatalf("Load of a partition never saved returned %q, want nil", b)
	}
	mustSave(t, s) // an empty batch is no error
	mustSave(t, s, router.PartitionState{Topic: "orders", Partition: 0, State: state("orders", 0, 1)})
	if b := mustLoad(t, s, "orders", 0); !bytes.Equal(b, state("orders", 0, 1)) {
		t.Fatalf("Load after Save returned %q, want %q", b, state("orders", 0, 1))
	}
	b := mustLoad(t, s, "orders", 0)
	for i := range b {
		b[i] = 0
	}
	if b := mustLoad(t, s, "orders", 0); !bytes.Equal(b, state("orders", 0, 1)) {
		t.Fatalf("changing what Load returned changed the store: %q", b)
	}
	mustSave(t, s, router.PartitionState{Topic: "orders", Partition: 0, State: state("orders", 0, 2)})
	if b := mustLoad(t, s, "orders", 0); !bytes.Equal(b, state("orders", 0, 2)) {
		t.Fatalf("a second Save did not replace the first: Load returned %q", b)
	}

	// A batch of many partitions, odd names and extreme partition numbers among them.
	topics := []string{"orders", "a/b", "a%2Fb", "ü", "dot.", "..", strings.Repeat("x", router.MaxTopicLength), "ORDERS"}
	partitions := []int32{0, 1, 2, 1000, math.MaxInt32}
	var batch []router.PartitionState
	for _, topic := range topics {
		for _, p := range partitions {
			batch = append(batch, router.PartitionState{Topic: topic, Partition: p, State: state(topic, p, 3)})
		}
	}
	mustSave(t, s, batch...)
	for _, topic := range topics {
		for _, p := range partitions {
			if b := mustLoad(t, s, topic, p); !bytes.Equal(b, state(topic, p, 3)) {
				t.Fatalf("Load(%q, %d) after a batch returned %q, want %q", topic, p, b, state(topic, p, 3))
			}
		}
	}
	if b := mustLoad(t, s, "orders", 3); b != nil {
		t.Fatalf("Load of a partition never saved returned %q", b)
	}

	// Delete removes every partition of its topic and nothing else.
	if err := s.Delete(ctx, "orders"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, p := range partitions {
		if b := mustLoad(t, s, "orders", p); b != nil {
			t.Fatalf("Load(orders, %d) after Delete returned %q", p, b)
		}
		if b := mustLoad(t, s, "ORDERS", p); !bytes.Equal(b, state("ORDERS", p, 3)) {
			t.Fatalf("Delete(orders) removed ORDERS/%d: Load returned %q", p, b)
		}
	}
	if err := s.Delete(ctx, "never-saved"); err != nil {
		t.Fatalf("Delete of a topic with no state: %v", err)
	}
}

func testStoreConcurrent(t *testing.T, h StoreHarness) {
	s := h.New(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Go(func() {
			for gen := range 20 {
				topic := fmt.Sprintf("topic-%d", w)
				batch := []router.PartitionState{
					{Topic: topic, Partition: 0, State: state(topic, 0, gen)},
					{Topic: topic, Partition: 1, State: state(topic, 1, gen)},
				}
				if err := s.Save(context.Background(), batch); err != nil {
					errs <- err
					return
				}
				for p := range int32(2) {
					b, err := s.Load(context.Background(), topic, p)
					if err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(b, state(topic, p, gen)) {
						errs <- fmt.Errorf("Load(%s, %d) after its own Save of generation %d returned %q", topic, p, gen, b)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func testStoreReopen(t *testing.T, h StoreHarness) {
	s := h.New(t)
	mustSave(t, s, router.PartitionState{Topic: "orders", Partition: 7, State: state("orders", 7, 1)},
		router.PartitionState{Topic: "orders", Partition: 8, State: state("orders", 8, 1)})
	mustSave(t, s, router.PartitionState{Topic: "orders", Partition: 7, State: state("orders", 7, 2)})
	s = h.Reopen(t, s)
	if b := mustLoad(t, s, "orders", 7); !bytes.Equal(b, state("orders", 7, 2)) {
		t.Fatalf("after a reopen, Load(orders, 7) returned %q, want %q", b, state("orders", 7, 2))
	}
	if b := mustLoad(t, s, "orders", 8); !bytes.Equal(b, state("orders", 8, 1)) {
		t.Fatalf("after a reopen, Load(orders, 8) returned %q, want %q", b, state("orders", 8, 1))
	}
}

// testStoreThroughNode acks through a node that keeps its state in the store, closes it, and
// consumes everything through a node on another machine (another state directory) with the
// same store: no acked record comes back, every other one does. Then that node's state
// fails over to a third node through the stored bytes (Adopt), with the same outcome.
func testStoreThroughNode(t *testing.T, h StoreHarness) {
	s := h.New(t)
	logs := &MemLogs{}
	log := logs.Log("orders", 0)
	routes := &Routes{}
	routes.Set("orders", 0)
	newNode := func(dir string) *router.Node {
		n, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: dir, FS: crashfs.New(), Store: s})
		if err != nil {
			t.Fatalf("router.New with the store: %v", err)
		}
		return n
	}
	const records = 40
	for range records {
		log.Append(nil, []byte("v"), time.Now())
	}
	ctx := context.Background()
	acked := map[int64]bool{}
	first := newNode("/machine-1")
	msgs, err := first.Consume(ctx, "orders", router.ConsumeOptions{Max: records})
	if err != nil || len(msgs) != records {
		t.Fatalf("consume: %d records, %v", len(msgs), err)
	}
	for i, m := range msgs {
		if i%3 != 1 { // gaps, so that acked-ahead offsets are stored too
			if err := first.Ack(ctx, "orders", m.Receipt); err != nil {
				t.Fatalf("ack: %v", err)
			}
			acked[m.Offset] = true
		}
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close of a node with the store: %v", err)
	}
	check := func(n *router.Node, what string) {
		t.Helper()
		got, err := n.Consume(ctx, "orders", router.ConsumeOptions{Max: records})
		if err != nil {
			t.Fatalf("%s: consume: %v", what, err)
		}
		seen := map[int64]bool{}
		for _, m := range got {
			if acked[m.Offset] {
				t.Fatalf("%s: offset %d acked before the restart was delivered again: the store lost it", what, m.Offset)
			}
			seen[m.Offset] = true
			if err := n.Release(ctx, "orders", m.Receipt); err != nil {
				t.Fatalf("%s: release: %v", what, err)
			}
		}
		for off := range int64(records) {
			if !acked[off] && !seen[off] {
				t.Fatalf("%s: offset %d, never acked, was not delivered", what, off)
			}
		}
	}
	second := newNode("/machine-2")
	check(second, "a node on another machine with the same store")
	if err := second.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	stored := mustLoad(t, s, "orders", 0)
	if stored == nil {
		t.Fatalf("the node stored nothing for orders/0")
	}
	third, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/machine-3", FS: crashfs.New()})
	if err != nil {
		t.Fatalf("router.New: %v", err)
	}
	defer third.Close()
	if err := third.Adopt(ctx, "orders", 0, stored); err != nil {
		t.Fatalf("Adopt of the stored state: %v", err)
	}
	check(third, "a failover adopting the stored state")
}
