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

// A process crash leaves the last acks in the page cache only; the restarted node makes them
// durable before it serves, so a power loss after the restart does not undo what the
// previous process acked and the new one loaded (found by the cluster simulation: an ack
// came back 4.5 s after it was made, after a crash and then a power cut).
func TestRestartMakesInheritedStateDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.cfg.CommitInterval = router.MaxCommitInterval // writeouts rare: acks stay in the page cache
		h.close()
		h.start()
		h.produce(0, 4)
		msgs := h.consume(router.ConsumeOptions{Max: 4})
		time.Sleep(150 * time.Millisecond) // the partition primed
		for _, m := range msgs {
			require.NoError(t, h.ack(m))
		}
		time.Sleep(150 * time.Millisecond) // past a tick: in the page cache, not yet synced
		h.crash()
		h.start() // syncs what the crashed process left
		h.fs = h.fs.PowerCut(crashfs.PowerCut{})
		h.node.Close()
		h.start()
		defer h.close()
		msgs, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 4})
		require.NoError(t, err)
		assert.Empty(t, msgs, "acked before the crash, 200 ms before: durable since the restart")
	})
}

// A durable wait while every sync fails ends at its deadline: the committer retries on its
// cadence, not at once (an immediate retry spun it, and the deadline never came; found by the
// cluster simulation, whose Persist never returned).
func TestDurableWaitEndsWhileSyncsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 1)
		m := h.one()
		time.Sleep(time.Second) // primed
		h.fs.Inject(func(op crashfs.Op) error {
			if op.Kind == crashfs.OpSyncData {
				return crashfs.ErrInjected
			}
			return nil
		})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := h.node.AckDurable(ctx, "orders", m.Receipt)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		h.fs.Inject(nil)
	})
}
