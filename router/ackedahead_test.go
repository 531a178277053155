package router_test

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/inflight"
	"narad.dev/consume/offsets"
	"narad.dev/consume/router"
	"narad.dev/consume/router/metrics"
)

const stallLine = "consume: partition at its acked-ahead cap; only the frontier hole is handed out until it is settled"

// The ceiling of the offsets a partition parks acked ahead is what one persisted record may
// hold: no record the node writes is one an older release's decoder refuses.
func TestAckedAheadCeilingIsWhatARecordHolds(t *testing.T) {
	assert.Equal(t, offsets.MaxAheadOffsets, inflight.MaxAckedAheadCeiling)
	assert.Equal(t, inflight.MaxAckedAheadCeiling, router.MaxAckedAheadCeiling)
	assert.Equal(t, inflight.MaxAckedAheadCeiling, router.DefaultMaxAckedAhead)
}

// drainAll consumes every record it can get from the node, a batch at a time, and returns
// their offsets, sorted.
func (h *harness) drainAll() []int64 {
	h.t.Helper()
	var offs []int64
	for {
		msgs := h.consume(router.ConsumeOptions{Max: 100})
		if len(msgs) == 0 {
			slices.Sort(offs)
			return offs
		}
		offs = append(offs, offsetsOf(msgs)...)
	}
}

// Issue 25: the shard's acked-ahead runs reach consumer.ahead through the committer and come
// back through Load as they were, after a graceful close and after a process crash a tick
// after the acks: the node delivers again exactly the offsets that were not acked, and the
// restored set holds as many offsets as the one written. One long run (offsets 1 to 999
// above the hole at 0) and some 300 short ones.
func TestAckedAheadRunsSurviveRestarts(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := map[bool]string{false: "graceful", true: "process crash"}[crash]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, 0)
				h.cfg.Topic = func(string) router.TopicConfig {
					return router.TopicConfig{VisibilityTimeout: vt, MaxInFlight: 4096}
				}
				h.close()
				h.start()
				h.produce(0, 3000)
				var msgs []router.Message
				for len(msgs) < 3000 {
					got := h.consume(router.ConsumeOptions{Max: 100})
					require.NotEmpty(t, got)
					msgs = append(msgs, got...)
				}
				var holes []int64
				for _, m := range msgs {
					if m.Offset == 0 || (m.Offset >= 1000 && m.Offset%7 == 3) {
						holes = append(holes, m.Offset)
						continue
					}
					require.NoError(t, h.ack(m))
				}
				slices.Sort(holes)
				before, err := h.node.PartitionStatus("orders", 0)
				require.NoError(t, err)
				require.Equal(t, 3000-len(holes), before.AckedAhead)

				if crash {
					time.Sleep(200 * time.Millisecond) // a tick writes the window
					synctest.Wait()
					h.crash()
				} else {
					h.close()
				}
				h.start()
				defer h.close()
				assert.Equal(t, holes, h.drainAll(), "only what was not acked is delivered again")
				after, err := h.node.PartitionStatus("orders", 0)
				require.NoError(t, err)
				assert.Equal(t, before.Frontier, after.Frontier)
				assert.Equal(t, before.AckedAhead, after.AckedAhead, "the restored set holds every acked offset")
			})
		})
	}
}

// Issue 25: a partition at its acked-ahead cap hands out only the frontier hole, and each
// such episode is counted; it is logged, naming the topic, the partition and the hole, at
// most once a minute per partition, the line counting the episodes held back since.
func TestAckedAheadStallIsCountedAndLogged(t *testing.T) {
	h, clock, rec := newLoggedHarness(t)
	h.cfg.Topic = func(string) router.TopicConfig {
		return router.TopicConfig{VisibilityTimeout: time.Hour, MaxAckedAheadRuns: 2}
	}
	h.close()
	h.start()
	defer h.close()
	pinned := router.ConsumeOptions{Pinned: true, Partition: 0}
	take := func() []router.Message {
		opts := pinned
		opts.Max = 100
		return h.consume(opts)
	}
	h.produce(0, 6)
	held := take() // offsets 0 to 5
	require.Len(t, held, 6)
	h.produce(0, 4) // offsets 6 to 9, not yet delivered
	require.NoError(t, h.ack(held[1]))
	require.NoError(t, h.ack(held[3])) // runs {1} {3}: the cap, with the hole 0 leased
	assert.Empty(t, take(), "only the hole is handed out, and it is leased")
	assert.Empty(t, take(), "the same episode")
	assert.Equal(t, uint64(1), h.node.Stats().Shards.AckedAheadStalls)

	require.NoError(t, h.ack(held[0])) // the frontier passes 0 and 1: one run left, {3}
	got := take()
	require.Len(t, got, 4, "below the cap: offsets 6 to 9")
	require.NoError(t, h.ack(held[5])) // runs {3} {5}: a second episode, within the minute
	assert.Empty(t, take())
	assert.Equal(t, uint64(2), h.node.Stats().Shards.AckedAheadStalls)

	clock.Advance(time.Minute)
	require.NoError(t, h.ack(held[2])) // the frontier passes 2 and 3: {5} left
	require.NoError(t, h.ack(got[1]))  // offset 7: runs {5} {7}, a third episode, hole 4
	assert.Empty(t, take())
	assert.Equal(t, uint64(3), h.node.Stats().Shards.AckedAheadStalls)
	var exported strings.Builder
	require.NoError(t, metrics.Write(&exported, h.node))
	assert.Contains(t, exported.String(), "\nnarad_consume_shards_acked_ahead_stalls_total 3\n")

	assert.Equal(t, [][3]int64{{0, -1, 0}, {0, -1, 4}}, rec.matching(stallLine, "hole"), "partition, -, hole")
	assert.Equal(t, [][3]int64{{0, -1, 0}, {0, -1, 1}}, rec.matching(stallLine, "suppressed"), "partition, -, episodes held back")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, l := range rec.lines {
		if l.msg == stallLine {
			assert.Equal(t, "orders", l.attrs["topic"])
			assert.Equal(t, int64(2), l.attrs["runs"])
		}
	}
}
