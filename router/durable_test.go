package router_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
)

// A durable ack returns only once the ack is on disk: a power cut right after it keeps it. It
// waits for the writeout it starts, not for a tick.
func TestAckDurableSurvivesPowerLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.produce(0, 9)
		msgs := h.consume(router.ConsumeOptions{Max: 9})
		require.Len(t, msgs, 9)
		time.Sleep(2 * time.Second) // nothing acked yet: a new partition has no files to write
		synctest.Wait()
		var syncs int
		h.fs.Inject(func(op crashfs.Op) error {
			if op.Kind == crashfs.OpSyncData {
				syncs++
			}
			return nil
		})
		start := time.Now()
		errs := make(chan error, 8)
		for _, m := range msgs[:8] {
			go func() { errs <- h.node.AckDurable(context.Background(), "orders", m.Receipt) }()
		}
		for range 8 {
			require.NoError(t, <-errs)
		}
		// The file system's syncs take no time here: the acks wait for no tick at all. Group
		// commit, which shares a sync among the acks that come during it, is the committer's
		// (offsets' TestDurableGroupCommitUnderRun).
		assert.Less(t, time.Since(start), 100*time.Millisecond, "no tick waited for")
		assert.LessOrEqual(t, syncs, 10,
			"at most a writeout per ack, consumer.offset levelled once, consumer.id made durable once")
		require.NoError(t, h.ack(msgs[8])) // an ordinary ack: in memory, durable later

		cut := h.fs.PowerCut(crashfs.PowerCut{})
		h.node.Close()
		h.fs = cut
		h.start()
		defer h.close()
		again := offsetsOf(h.consume(router.ConsumeOptions{Max: 9}))
		for off := range int64(8) {
			assert.NotContains(t, again, off, "a durable ack survives the power cut")
		}
	})
}

// The quarantine and the requeued set survive a power loss like the frontier.
func TestQuarantineSurvivesPowerLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 1}
		}
		h.close()
		h.start()
		h.produce(0, 3)
		msgs := h.consume(router.ConsumeOptions{Max: 3})
		for _, m := range msgs {
			require.NoError(t, h.node.Nack(context.Background(), "orders", m.Receipt, 0))
		}
		ok, err := h.node.Requeue("orders", 0, 1)
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(3 * time.Second) // more than the durability interval
		synctest.Wait()

		cut := h.fs.PowerCut(crashfs.PowerCut{})
		h.node.Close()
		h.fs = cut
		h.start()
		defer h.close()
		q, err := h.node.Quarantined("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, []int64{0, 2}, q)
		m := h.one()
		assert.Equal(t, int64(1), m.Offset, "the requeued record is delivered after the power loss")
	})
}

// A record that crashes its consumer's process every time still reaches MaxDeliveries: the
// attempt is counted, and persisted, when the lease is granted.
func TestAttemptsSurviveProcessCrashes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 2}
		}
		var dead []int64
		h.cfg.OnQuarantine = func(_ string, _ int32, off int64, _ uint32) { dead = append(dead, off) }
		h.close()
		h.start()
		h.produce(0, 2)
		for attempt := uint32(1); attempt <= 2; attempt++ {
			m := h.one()
			require.Equal(t, int64(0), m.Offset)
			require.Equal(t, attempt, m.Attempt)
			time.Sleep(200 * time.Millisecond) // the poison record kills the process a tick later
			synctest.Wait()
			h.crash()
			h.start()
		}
		defer h.close()
		assert.Equal(t, int64(1), h.one().Offset, "the partition moves on")
		assert.Equal(t, []int64{0}, dead, "the record that took down two processes is quarantined")
	})
}

// A release uncounts its delivery on disk too, under MaxDeliveries: the count the lease's
// grant persisted is written again without it. Before, a give-back changed the count in
// memory only, so after a restart (graceful or not) the record was quarantined a delivery
// early, never having failed that often (found by the cluster simulation, seeds 15 and 1555).
func TestReleaseUncountsOnDisk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var quarantined []int64
		h := newHarness(t, 0)
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 2}
		}
		h.cfg.OnQuarantine = func(_ string, _ int32, off int64, _ uint32) { quarantined = append(quarantined, off) }
		h.close()
		h.start()
		ctx := context.Background()
		h.produce(0, 1)
		m := h.one()
		require.NoError(t, h.node.Nack(ctx, "orders", m.Receipt, 0)) // attempt 1 counts
		m = h.one()
		require.Equal(t, uint32(2), m.Attempt)
		time.Sleep(time.Second)                                      // the count of 2 is written out
		require.NoError(t, h.node.Release(ctx, "orders", m.Receipt)) // attempt 2 does not count
		h.close()
		h.start()
		m = h.one()
		assert.Equal(t, uint32(2), m.Attempt, "the released delivery was not counted")
		assert.Empty(t, quarantined)
		h.close()
	})
}

// Under MaxDeliveries a scan's lease counts its attempt on disk only once its record goes to
// the consumer: a record the scan gives back (its read failed) or postpones (Config.NotBefore)
// was never an attempt, even when a commit lands between the lease's grant and its return,
// and the process dies before the next one. Before, that commit persisted the attempt, and
// under MaxDeliveries 1 the record was quarantined at the next process's first reserve, no
// consumer having got it. Each case forces the commit from inside the scan's read.
func TestScanGiveBackNotPersistedAcrossCrash(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ordered bool
		// arrange makes the first consume's read of offset 0 come to nothing.
		arrange func(h *harness)
		// cure undoes it for the process after the crash.
		cure func(h *harness)
	}{
		{"read failure", false,
			func(h *harness) { h.logs.Log("orders", 0).FailReads(router.ErrLogClosed) },
			func(h *harness) { h.logs.Log("orders", 0).FailReads(nil) }},
		{"postponed", false,
			func(h *harness) { h.cfg.NotBefore = notBeforeOf },
			func(h *harness) { h.cfg.NotBefore = nil }},
		{"postponed, ordered", true,
			func(h *harness) { h.cfg.NotBefore = notBeforeOf },
			func(h *harness) { h.cfg.NotBefore = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var quarantined []int64
				h := newHarness(t, 0)
				h.cfg.Topic = func(string) router.TopicConfig {
					return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 1, Ordered: tc.ordered}
				}
				h.cfg.OnQuarantine = func(_ string, _ int32, off int64, _ uint32) { quarantined = append(quarantined, off) }
				tc.arrange(h)
				h.restart(nil)
				h.produceDelayed("k", time.Minute)
				log := h.logs.Log("orders", 0)
				log.OnRead(func(int64) {
					// A commit tick while the scan holds the lease, before its read.
					require.NoError(t, h.node.Persist(context.Background(), "orders", 0))
				})
				msgs, _ := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 10})
				require.Empty(t, msgs)
				log.OnRead(nil)

				h.crash() // before the next tick
				tc.cure(h)
				h.start()
				defer h.close()
				m := h.one()
				assert.Equal(t, int64(0), m.Offset, "delivered, not quarantined")
				assert.Equal(t, uint32(1), m.Attempt, "its first attempt")
				assert.Empty(t, quarantined)
			})
		})
	}
}

// The same for an owner's records another node asked for: a consume frame served while its
// requester gives up gives its records back, and they were never an attempt, even when a
// commit lands between the scan's hand-over of one partition's records and the give-back,
// and the owner's process dies before the next one. Here the scan reads one record of each
// of two partitions, and the requester leaves, after a commit, as it reads the second.
func TestServedConsumeGivenBackNotPersistedAcrossCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var quarantined []int64
		h := newHarness(t, 0, 1)
		h.cfg.Topic = func(string) router.TopicConfig {
			return router.TopicConfig{VisibilityTimeout: vt, MaxDeliveries: 1}
		}
		h.cfg.OnQuarantine = func(_ string, _ int32, off int64, _ uint32) { quarantined = append(quarantined, off) }
		h.restart(nil)
		h.produce(0, 1)
		h.produce(1, 1)
		ctx, giveUp := context.WithCancel(context.Background())
		reads := 0
		onRead := func(int64) {
			if reads++; reads == 2 {
				for _, p := range []int32{0, 1} { // a commit tick
					require.NoError(t, h.node.Persist(context.Background(), "orders", p))
				}
				giveUp() // the requester leaves
			}
		}
		for _, p := range []int32{0, 1} {
			h.logs.Log("orders", p).OnRead(onRead)
		}
		frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpConsume, Topic: "orders",
			Consume: wire.Consume{RequestID: 1, Pinned: -1, Max: 2, RelativeExpiry: true}})
		require.NoError(t, err)
		reply, err := h.node.Serve(ctx, "peer", frame)
		require.NoError(t, err)
		decoded, err := wire.DecodeConsumeReply(reply)
		require.NoError(t, err)
		require.Equal(t, 2, reads)
		require.Empty(t, decoded.Deliveries, "given back: %+v", decoded)
		for _, p := range []int32{0, 1} {
			h.logs.Log("orders", p).OnRead(nil)
		}

		h.crash() // before the next tick
		h.start()
		defer h.close()
		msgs := h.consume(router.ConsumeOptions{Max: 2})
		require.Len(t, msgs, 2, "delivered, not quarantined")
		for _, m := range msgs {
			assert.Equal(t, uint32(1), m.Attempt, "%d/%d: its first attempt", m.Partition, m.Offset)
		}
		assert.Empty(t, quarantined)
	})
}
