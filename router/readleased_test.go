package router_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// Invariant 1: the node reads only offsets it has reserved. Through a single consume, a
// batch consume, a parked consume woken by the pump, a nack and an expired lease, every
// read of the log comes after the lease of its offset was granted (the node's delivered
// count is never behind the reads at each read), and the reads since each
// consume are exactly the offsets that consume delivered under those leases. Replay reads
// without a lease by design, and is left out. A batch reserves its offsets before its first
// read, so the leases granted are at least the reads at every read.
func TestNodeReadsOnlyLeasedOffsets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, clock, _ := newLoggedHarness(t)
		defer h.close()
		log := h.logs.Log("orders", 0)
		var replaying atomic.Bool
		var leasedReads atomic.Uint64
		log.OnRead(func(offset int64) {
			if replaying.Load() {
				return
			}
			reads := leasedReads.Add(1)
			if granted := h.node.Stats().Shards.Delivered; granted < reads {
				t.Errorf("read %d of offset %d after %d leases", reads, offset, granted)
			}
		})
		var mu sync.Mutex
		seen := 0
		check := func(msgs []offsetLease) {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			all := log.ReadOffsets()
			var want []int64
			for _, m := range msgs {
				want = append(want, m.offset)
			}
			assert.Equal(t, want, all[seen:], "the reads were the delivered leases")
			seen = len(all)
		}
		pinned := func(max int, visibility time.Duration) []offsetLease {
			msgs := h.consume(routerConsume(max, visibility))
			out := leasesOf(msgs)
			check(out)
			return out
		}

		h.produce(0, 5)
		pinned(1, 0)          // offset 0
		batch := pinned(3, 0) // 1, 2, 3
		require.NoError(t, h.node.Nack(context.Background(), "orders", batch[0].handle, 0))
		assert.Equal(t, int64(1), pinned(1, 0)[0].offset, "the nacked offset, leased again")
		short := pinned(1, time.Second) // 4, with a short lease
		clock.Advance(time.Second)      // it expires
		assert.Equal(t, short[0].offset, pinned(1, 0)[0].offset, "the expired offset, leased again")

		replaying.Store(true)
		_, err := h.node.Replay(context.Background(), "orders", 0, 0, 5)
		require.NoError(t, err)
		replaying.Store(false)
		mu.Lock()
		seen = len(log.ReadOffsets())
		mu.Unlock()

		parked := h.async(routerWait(time.Minute))
		synctest.Wait()
		h.produce(0, 1)
		check(leasesOf(<-parked))
		assert.Equal(t, h.node.Stats().Shards.Delivered, leasedReads.Load())
	})
}

type offsetLease struct {
	offset int64
	handle router.Handle
}

func leasesOf(msgs []router.Message) []offsetLease {
	out := make([]offsetLease, len(msgs))
	for i, m := range msgs {
		out[i] = offsetLease{m.Offset, m.Receipt}
	}
	return out
}

func routerConsume(max int, visibility time.Duration) router.ConsumeOptions {
	return router.ConsumeOptions{Max: max, Pinned: true, Partition: 0, Visibility: visibility}
}

func routerWait(wait time.Duration) router.ConsumeOptions {
	return router.ConsumeOptions{Pinned: true, Partition: 0, Wait: wait}
}
