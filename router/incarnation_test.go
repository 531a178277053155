package router_test

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// gatedRoutes answers as the host's routes do, and, when armed, holds the caller right after
// it read its answer: a consume or an ack that has resolved the topic and has not finished.
type gatedRoutes struct {
	*routertest.Routes
	mu      sync.Mutex
	reached chan struct{} // closed when the armed call has read its answer
	release chan struct{} // the armed call goes on when this is closed
}

func (g *gatedRoutes) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reached, g.release = make(chan struct{}), make(chan struct{})
}

func (g *gatedRoutes) Partitions(topic string) ([]int32, map[string][]int32, bool) {
	local, remote, ok := g.Routes.Partitions(topic)
	g.mu.Lock()
	reached, release := g.reached, g.release
	g.reached = nil
	g.mu.Unlock()
	if reached != nil {
		close(reached)
		<-release
	}
	return local, remote, ok
}

// Issue 9, case 1: a consume or an ack that read the routes before DeleteTopic and finishes
// after it must not recreate a shard, a committer entry or a directory of the deleted
// incarnation; before the fix, the stale shard served the topic created again under the name
// with the old frontier, and 10 of its 20 records were never delivered, still after a restart.
func TestDeleteAndRecreateRace(t *testing.T) {
	h := newHarness(t, 0)
	h.close()
	gate := &gatedRoutes{Routes: h.routes}
	h.cfg.Routes = gate
	h.start()
	defer h.close()
	h.produce(0, 20)

	// A consume resolves the topic, then the host deletes it.
	gate.arm()
	reached, release := gate.reached, gate.release
	type result struct {
		msgs []router.Message
		err  error
	}
	stale := make(chan result, 1)
	go func() {
		msgs, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 10})
		stale <- result{msgs, err}
	}()
	<-reached
	h.routes.Delete("orders")
	require.NoError(t, h.node.DeleteTopic("orders"))
	close(release)
	r := <-stale
	require.ErrorIs(t, r.err, router.ErrUnknownTopic, "a consume of a deleted topic serves nothing")
	require.Empty(t, r.msgs)

	// An ack that resolved the topic before the delete creates nothing either.
	gate.arm()
	reached, release = gate.reached, gate.release
	acked := make(chan error, 1)
	go func() { acked <- h.node.Ack(context.Background(), "orders", router.Handle{Offset: 3, Nonce: 12345}) }()
	<-reached
	require.NoError(t, h.node.DeleteTopic("orders"))
	close(release)
	require.ErrorIs(t, <-acked, router.ErrUnknownTopic)
	_, err := h.fs.Stat("/state/orders")
	require.ErrorIs(t, err, fs.ErrNotExist, "no directory of the deleted incarnation is made again")

	// The topic is created again: every record of the new incarnation is delivered, before
	// and after a restart.
	h.logs.Replace("orders", 0, routertest.NewMemLog())
	h.routes.Set("orders", 0)
	h.produce(0, 20)
	first := h.consume(router.ConsumeOptions{Max: 5})
	require.Equal(t, []int64{0, 1, 2, 3, 4}, offsetsOf(first))
	for _, m := range first {
		require.NoError(t, h.ack(m))
	}
	h.close()
	h.start()
	var got []int64
	for {
		msgs := h.consume(router.ConsumeOptions{Max: 100})
		if len(msgs) == 0 {
			break
		}
		got = append(got, offsetsOf(msgs)...)
		for _, m := range msgs {
			require.NoError(t, h.ack(m))
		}
	}
	want := make([]int64, 0, 15)
	for o := int64(5); o < 20; o++ {
		want = append(want, o)
	}
	require.Equal(t, want, got, "the new incarnation's records, none skipped")
}

// The tracker's fence alone: a shard create through a generation taken before DropTopic fails.
func TestStaleConsumeAfterDeleteIsUnknownTopic(t *testing.T) {
	h := newHarness(t, 0)
	defer h.close()
	h.produce(0, 3)
	h.routes.Delete("orders")
	require.NoError(t, h.node.DeleteTopic("orders"))
	_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{})
	require.True(t, errors.Is(err, router.ErrUnknownTopic), "%v", err)
}

// Issue 9, case 2: the state files of an earlier incarnation, restored into the directory of
// the topic created again under the name (without the consumer.id that named them), are
// ignored, whether they are restored before the partition's first touch or after it: every
// record of the new incarnation is delivered. Before the files named their incarnation, the old
// frontier (14) was clamped to the new log's watermark and all 5 records were lost.
func TestEarlierIncarnationFilesIgnored(t *testing.T) {
	for _, afterTouch := range []bool{false, true} {
		t.Run(map[bool]string{false: "before first touch", true: "after first touch"}[afterTouch], func(t *testing.T) {
			h := newHarness(t, 0)
			h.produce(0, 20)
			for _, m := range h.consume(router.ConsumeOptions{Max: 15}) {
				require.NoError(t, h.ack(m))
			}
			h.close()
			dir := h.node.PartitionDir("orders", 0)
			saved := map[string][]byte{}
			for _, name := range []string{"consumer.ahead", "consumer.offset"} {
				b, err := h.fs.ReadFile(dir + "/" + name)
				require.NoError(t, err)
				saved[name] = b
			}
			h.start()
			defer h.close()
			h.routes.Delete("orders")
			require.NoError(t, h.node.DeleteTopic("orders"))
			h.logs.Replace("orders", 0, routertest.NewMemLog())
			h.routes.Set("orders", 0)
			h.produce(0, 5)

			var got []int64
			if afterTouch {
				m := h.one()
				require.NoError(t, h.ack(m))
				got = append(got, m.Offset)
				require.NoError(t, h.node.Persist(context.Background(), "orders", 0))
			} else {
				require.NoError(t, h.fs.MkdirAll(dir))
			}
			for name, b := range saved {
				require.NoError(t, h.fs.WriteFile(dir+"/"+name, b))
			}
			h.node.DropPartition("orders", 0) // the next touch loads from disk
			for {
				msgs := h.consume(router.ConsumeOptions{Max: 100})
				if len(msgs) == 0 {
					break
				}
				got = append(got, offsetsOf(msgs)...)
			}
			want := []int64{0, 1, 2, 3, 4}
			if afterTouch {
				// The restore overwrote the file holding the ack of 0: it is delivered
				// again (a duplicate, never a loss).
				want = []int64{0, 0, 1, 2, 3, 4}
			}
			require.Equal(t, want, got)
			require.NotZero(t, h.node.Stats().Committer.IgnoredFiles)
		})
	}
}
