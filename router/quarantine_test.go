package router_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
)

// Discard settles a quarantined record for good: once the committer has persisted it (the
// discard marks the partition dirty; no Persist is asked for), a power cut and a restart on
// the same file system find it neither quarantined nor deliverable, above a hole (acked
// ahead) and below the frontier alike. What is not quarantined (acked, requeued, never
// quarantined) answers false and changes nothing.
func TestDiscardSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 2}
		}
		var dead []int64
		h.cfg.OnQuarantine = func(_ string, _ int32, off int64, _ uint32) { dead = append(dead, off) }
		h.restart(nil)
		ctx := context.Background()
		discard := func(off int64) bool {
			t.Helper()
			ok, err := h.node.Discard("orders", 0, off)
			require.NoError(t, err)
			return ok
		}
		// poison nacks the record at off, first delivered in msg, until its second delivery
		// is nacked too and quarantines it.
		poison := func(msg router.Message) {
			t.Helper()
			require.NoError(t, h.node.Nack(ctx, "orders", msg.Receipt, 0))
			again := h.one()
			require.Equal(t, msg.Offset, again.Offset)
			require.NoError(t, h.node.Nack(ctx, "orders", again.Receipt, 0))
		}
		quarantined := func() []int64 {
			t.Helper()
			q, err := h.node.Quarantined("orders", 0)
			require.NoError(t, err)
			return q
		}

		h.produce(0, 4)
		msgs := h.consume(router.ConsumeOptions{Max: 4})
		require.Equal(t, []int64{0, 1, 2, 3}, offsetsOf(msgs))
		poison(msgs[1])
		poison(msgs[3])
		require.NoError(t, h.ack(msgs[2]))
		require.Equal(t, []int64{1, 3}, dead)
		require.Equal(t, []int64{1, 3}, quarantined())

		assert.True(t, discard(1), "quarantined above the hole at 0")
		assert.False(t, discard(1), "discarded already")
		assert.False(t, discard(2), "acked, never quarantined")
		assert.False(t, discard(0), "leased, never quarantined")
		assert.False(t, discard(9), "beyond the log")
		ok, err := h.node.Requeue("orders", 0, 3)
		require.NoError(t, err)
		require.True(t, ok)
		assert.False(t, discard(3), "requeued: waiting for delivery again")
		again := h.one()
		require.Equal(t, int64(3), again.Offset)
		poison(again)
		require.Equal(t, []int64{3}, quarantined(), "back in quarantine")
		time.Sleep(3 * time.Second) // everything so far is written out: the discard alone is dirty
		synctest.Wait()
		assert.True(t, discard(3))
		assert.Empty(t, quarantined())
		assert.Equal(t, uint64(2), h.node.Stats().Shards.Discarded)

		time.Sleep(3 * time.Second) // more than the durability interval
		synctest.Wait()
		cut := h.fs.PowerCut(crashfs.PowerCut{})
		h.node.Close()
		h.fs = cut
		h.start()
		assert.Empty(t, quarantined(), "the discards survive the power cut")
		m := h.one()
		assert.Equal(t, int64(0), m.Offset, "only the record whose lease the cut forgot")
		assert.Empty(t, h.consume(router.ConsumeOptions{Max: 10}), "1 and 3 are settled, 2 acked")

		// Below the frontier: the frontier passed the record when it was quarantined.
		require.NoError(t, h.ack(m))
		h.produce(0, 1)
		poison(h.one())
		require.Equal(t, []int64{4}, quarantined())
		st, err := h.node.PartitionStatus("orders", 0)
		require.NoError(t, err)
		require.Equal(t, int64(4), st.Frontier, "the frontier passed the quarantined record")
		assert.True(t, discard(4))
		require.NoError(t, h.node.Persist(ctx, "orders", 0))
		h.crash()
		h.start()
		defer h.close()
		assert.Empty(t, quarantined())
		assert.Empty(t, h.consume(router.ConsumeOptions{Max: 10}), "nothing is delivered again")
		assert.Equal(t, []int64{1, 3, 3, 4}, dead, "no quarantine since the discards")
	})
}

// Discard answers for a partition that is not here as Requeue does, and ErrClosed once the
// node is closed.
func TestDiscardRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.routes.SetRemote("orders", "b", 1)
		for _, tc := range []struct {
			topic     string
			partition int32
		}{{"orders", 1}, {"nosuch", 0}, {"", 0}} {
			_, rerr := h.node.Requeue(tc.topic, tc.partition, 0)
			require.Error(t, rerr)
			ok, err := h.node.Discard(tc.topic, tc.partition, 0)
			assert.False(t, ok)
			assert.Equal(t, rerr, err, "%s/%d: as Requeue answers", tc.topic, tc.partition)
		}
		h.close()
		_, err := h.node.Discard("orders", 0, 0)
		assert.ErrorIs(t, err, router.ErrClosed)
	})
}
