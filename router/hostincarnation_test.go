package router_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// namingLogs is a host's log that knows each topic's incarnation, as Kafka knows a topic's ID:
// a topic created again under its name gets another. A topic it holds no id for has none.
type namingLogs struct {
	*routertest.MemLogs
	mu  sync.Mutex
	ids map[string]string
}

var _ router.TopicIncarnation = (*namingLogs)(nil)

func newNamingLogs(logs *routertest.MemLogs, topic, id string) *namingLogs {
	return &namingLogs{MemLogs: logs, ids: map[string]string{topic: id}}
}

func (l *namingLogs) Incarnation(topic string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id, ok := l.ids[topic]
	return id, ok
}

// name sets the incarnation the host names for topic; "" names none.
func (l *namingLogs) name(topic, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id == "" {
		delete(l.ids, topic)
		return
	}
	l.ids[topic] = id
}

// crash kills the harness's node as kill -9 would: what it did not sync is lost (its final
// writes, as Close makes them, land on a frozen file system). The caller starts it again.
func (h *harness) crash() {
	crashed := h.fs.ProcessCrash()
	h.node.Close()
	h.fs = crashed
}

// restart closes the harness's node and starts it again on cfg as edit leaves it.
func (h *harness) restart(edit func(cfg *router.Config)) {
	h.t.Helper()
	h.close()
	if edit != nil {
		edit(&h.cfg)
	}
	h.start()
}

// drain consumes the topic until a consume comes back empty, and returns the offsets
// delivered (leased, not acked: each once).
func (h *harness) drain() []int64 {
	h.t.Helper()
	var got []int64
	for {
		msgs := h.consume(router.ConsumeOptions{Max: 100})
		if len(msgs) == 0 {
			return got
		}
		got = append(got, offsetsOf(msgs)...)
	}
}

// backup is a copy of a partition's state as a host backs it up: its files, or what its
// state store holds.
type backup struct {
	files map[string][]byte
	store []byte
}

func takeBackup(t *testing.T, h *harness, store *routertest.MemStore) backup {
	t.Helper()
	if store != nil {
		b, err := store.Load(context.Background(), "orders", 0)
		require.NoError(t, err)
		require.NotNil(t, b)
		return backup{store: b}
	}
	files := map[string][]byte{}
	for _, name := range []string{"consumer.id", "consumer.ahead", "consumer.offset"} {
		b, err := h.fs.ReadFile(h.node.PartitionDir("orders", 0) + "/" + name)
		require.NoError(t, err)
		files[name] = b
	}
	return backup{files: files}
}

// restore puts the backup back in place of what the partition's state is now.
func (b backup) restore(t *testing.T, h *harness, store *routertest.MemStore) {
	t.Helper()
	if b.store != nil {
		require.NoError(t, store.Save(context.Background(), []router.PartitionState{{Topic: "orders", Partition: 0, State: b.store}}))
		return
	}
	dir := h.node.PartitionDir("orders", 0)
	require.NoError(t, h.fs.MkdirAll(dir))
	for name, data := range b.files {
		require.NoError(t, h.fs.WriteFile(dir+"/"+name, data))
	}
}

// Item 7: a deleted topic's earlier life, backed up whole (consumer.id, consumer.ahead and
// consumer.offset, or the state store's entry) and restored under the topic created again.
// With a host that names the topic's incarnation (TopicIncarnation) the state is bound to the
// life it was written under, the restored one is ignored, and every record of the new life is
// delivered. Without it the node has only consumer.id to tell lives apart, which the new life
// writes at its first ack: the restore is taken for this life's state, and the new life's
// records up to the old frontier are never delivered (the limit the docs of PartitionDir,
// DeleteTopic and StateStore state). Before the fix every case lost all 5 records.
func TestEarlierLifeRestored(t *testing.T) {
	tests := []struct {
		name  string
		store bool // the state lives in a StateStore, not in files
		// ownState: the new life acked its first record, and made it durable, before the
		// restore replaced its own state; otherwise it had acked nothing (no state at all).
		ownState   bool
		capability bool
		want       []int64 // delivered after the restore
	}{
		{"files, new life acked nothing", false, false, true, []int64{0, 1, 2, 3, 4}},
		{"files, new life's own state replaced", false, true, true, []int64{0, 1, 2, 3, 4}},
		{"store, new life acked nothing", true, false, true, []int64{0, 1, 2, 3, 4}},
		{"store, new life's own state replaced", true, true, true, []int64{0, 1, 2, 3, 4}},
		{"files, new life acked nothing, without TopicIncarnation: the limit", false, false, false, nil},
		{"files, new life's own state replaced, without TopicIncarnation: the limit", false, true, false, nil},
		{"store, new life acked nothing, without TopicIncarnation: the limit", true, false, false, nil},
		{"store, new life's own state replaced, without TopicIncarnation: the limit", true, true, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 0)
			logs := newNamingLogs(h.logs, "orders", "life-1")
			var store *routertest.MemStore
			h.restart(func(cfg *router.Config) {
				if tt.store {
					store = &routertest.MemStore{}
					cfg.Store = store
				}
				if tt.capability {
					cfg.Logs = logs
				}
			})

			// The earlier life: 20 records, 15 acked; the host backs its state up.
			h.produce(0, 20)
			for _, m := range h.consume(router.ConsumeOptions{Max: 15}) {
				require.NoError(t, h.ack(m))
			}
			h.restart(nil)
			old := takeBackup(t, h, store)

			// The topic is deleted and created again; the new life gets 5 records.
			h.routes.Delete("orders")
			require.NoError(t, h.node.DeleteTopic("orders"))
			h.logs.Replace("orders", 0, routertest.NewMemLog())
			logs.name("orders", "life-2")
			h.routes.Set("orders", 0)
			h.produce(0, 5)
			if tt.ownState {
				m := h.one()
				require.Equal(t, int64(0), m.Offset)
				require.NoError(t, h.ack(m))
				require.NoError(t, h.node.Persist(context.Background(), "orders", 0))
			}
			ignoredBefore := h.node.Stats().Committer.IgnoredFiles

			// The earlier life's backup restored, and the node started again on it.
			h.close()
			old.restore(t, h, store)
			h.start()
			defer h.close()
			got := h.drain()
			require.Equal(t, tt.want, got)
			ignored := h.node.Stats().Committer.IgnoredFiles - ignoredBefore
			if tt.capability {
				require.Equal(t, uint64(1), ignored, "the earlier life's state is ignored, and counted")
			} else {
				require.Zero(t, ignored, "taken for this life's: the new life's records up to the old frontier are lost")
			}
		})
	}
}

// A state written before the binding existed (by a node whose host named no incarnation) is
// trusted once under a host that names one, then bound to it: a later load under the same
// life keeps it, and one under another life ignores it.
func TestUnboundStateIsBoundAtItsFirstLoad(t *testing.T) {
	for _, inStore := range []bool{false, true} {
		t.Run(map[bool]string{false: "files", true: "store"}[inStore], func(t *testing.T) {
			h := newHarness(t, 0)
			if inStore {
				h.restart(func(cfg *router.Config) { cfg.Store = &routertest.MemStore{} })
			}
			h.produce(0, 10)
			for _, m := range h.consume(router.ConsumeOptions{Max: 6}) {
				require.NoError(t, h.ack(m))
			}
			logs := newNamingLogs(h.logs, "orders", "life-1")
			h.restart(func(cfg *router.Config) { cfg.Logs = logs })
			require.Equal(t, []int64{6, 7, 8, 9}, h.drain(), "the unbound state trusted: nothing acked delivered again")
			require.Zero(t, h.node.Stats().Committer.IgnoredFiles)

			h.restart(nil)
			require.Equal(t, []int64{6, 7, 8, 9}, h.drain(), "bound to life-1, and trusted under it")
			logs.name("orders", "life-2")
			h.restart(nil)
			defer h.close()
			require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, h.drain(),
				"bound to life-1: under life-2 it is not trusted, and every retained record is delivered again")
			require.Equal(t, uint64(1), h.node.Stats().Committer.IgnoredFiles)
		})
	}
}

// A host that names no incarnation for a topic whose state it bound breaks TopicIncarnation's
// contract: the partition does not load (ErrHostContract, counted), and it loads as soon as
// the host names the incarnation again, its state intact.
func TestBoundStateWhileTheHostNamesNone(t *testing.T) {
	h := newHarness(t, 0)
	logs := newNamingLogs(h.logs, "orders", "life-1")
	h.restart(func(cfg *router.Config) { cfg.Logs = logs })
	h.produce(0, 5)
	for _, m := range h.consume(router.ConsumeOptions{Max: 2}) {
		require.NoError(t, h.ack(m))
	}
	logs.name("orders", "")
	h.restart(nil)
	defer h.close()
	_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Pinned: true, Partition: 0})
	require.ErrorIs(t, err, router.ErrHostContract)
	require.NotZero(t, h.node.Stats().HostContractViolations)
	require.Zero(t, h.node.Stats().SetAsideNow, "the host's fault, not the state's")
	logs.name("orders", "life-1")
	require.Equal(t, []int64{2, 3, 4}, h.drain())
}

// Adopt checks a state's binding against the host's incarnation of the topic: a state bound to
// another life is refused (ErrOtherIncarnation, wrapping ErrInvalidArgument), one bound to a
// life the host cannot name too (ErrHostContract), and an unbound one is adopted and bound.
// Without TopicIncarnation, Adopt takes the state as it is.
func TestAdoptChecksTheIncarnation(t *testing.T) {
	tests := []struct {
		name     string
		from, to string // what the old and the new owner's hosts name; "-": no TopicIncarnation
		wantErr  []error
	}{
		{"bound, the same life", "life-1", "life-1", nil},
		{"bound, another life", "life-1", "life-2", []error{router.ErrOtherIncarnation, router.ErrInvalidArgument}},
		{"bound, a host that names none", "life-1", "", []error{router.ErrHostContract}},
		{"bound, a new owner without TopicIncarnation", "life-1", "-", nil},
		{"unbound, bound at the adoption", "-", "life-1", nil},
		{"unbound, without TopicIncarnation", "-", "-", nil},
	}
	hostOf := func(logs *routertest.MemLogs, id string) router.Logs {
		if id == "-" {
			return logs
		}
		return newNamingLogs(logs, "orders", id)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := newHarness(t, 0)
			from.restart(func(cfg *router.Config) { cfg.Logs = hostOf(from.logs, tt.from) })
			defer from.close()
			from.produce(0, 10)
			for _, m := range from.consume(router.ConsumeOptions{Max: 4}) {
				require.NoError(t, from.ack(m))
			}
			state, err := from.node.HandOff(context.Background(), "orders", 0)
			require.NoError(t, err)

			to := &harness{t: t, logs: from.logs, routes: &routertest.Routes{}, fs: crashfs.New(), dir: "/state-to"}
			to.cfg = router.Config{Logs: hostOf(from.logs, tt.to), Routes: to.routes, Dir: to.dir,
				Topic: func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: vt} }}
			to.start()
			defer to.close()
			err = to.node.Adopt(context.Background(), "orders", 0, state)
			for _, want := range tt.wantErr {
				require.ErrorIs(t, err, want)
			}
			to.routes.Set("orders", 0)
			if tt.wantErr != nil {
				return
			}
			require.NoError(t, err)
			require.Equal(t, []int64{4, 5, 6, 7, 8, 9}, to.drain())
			if tt.to == "-" {
				return
			}
			// Bound to the new owner's life now: under another it is not trusted.
			to.restart(func(cfg *router.Config) { cfg.Logs = newNamingLogs(from.logs, "orders", fmt.Sprint(tt.to, "-again")) })
			require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, to.drain())
		})
	}
}

// A failover reads a dead owner's files (ReadState) with their binding: the new owner adopts
// them under the same life, and refuses them under another.
func TestReadStateCarriesTheBinding(t *testing.T) {
	dead := newHarness(t, 0)
	dead.restart(func(cfg *router.Config) { cfg.Logs = newNamingLogs(dead.logs, "orders", "life-1") })
	dead.produce(0, 10)
	for _, m := range dead.consume(router.ConsumeOptions{Max: 3}) {
		require.NoError(t, dead.ack(m))
	}
	dead.close()
	state, err := router.ReadState(dead.fs, dead.dir, "orders", 0)
	require.NoError(t, err)

	for _, tt := range []struct {
		life    string
		wantErr error
	}{{"life-2", router.ErrOtherIncarnation}, {"life-1", nil}} {
		to := &harness{t: t, logs: dead.logs, routes: &routertest.Routes{}, fs: crashfs.New(), dir: "/state-to"}
		to.cfg = router.Config{Logs: newNamingLogs(dead.logs, "orders", tt.life), Routes: to.routes, Dir: to.dir,
			Topic: func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: vt} }}
		to.start()
		err := to.node.Adopt(context.Background(), "orders", 0, state)
		if tt.wantErr != nil {
			require.ErrorIs(t, err, tt.wantErr, tt.life)
		} else {
			require.NoError(t, err, tt.life)
			to.routes.Set("orders", 0)
			require.Equal(t, []int64{3, 4, 5, 6, 7, 8, 9}, to.drain(), tt.life)
		}
		to.close()
	}
}
