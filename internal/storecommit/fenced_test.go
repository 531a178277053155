package storecommit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/realclock"
	"narad.dev/consume/offsets"
)

// A batch the store refuses as fenced is saved again one entry at a time: the entries it
// refuses are not marked again, their durable waits answer that they are gone, and Fenced is
// told of each; the others are saved. Each entry carries the epoch of the state it holds.
func TestFencedSaveIsSplit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var fenced []int32
		h := newHarness(t, Config{Interval: time.Second, Fenced: func(topic string, p int32, epoch uint64) {
			require.Equal(t, uint64(4), epoch, "the refused entry's")
			mu.Lock()
			fenced = append(fenced, p)
			mu.Unlock()
		}})
		h.store.refuse = func(batch []Entry) error {
			for _, e := range batch {
				if e.Epoch < 5 {
					return fmt.Errorf("held under epoch 5: %w", ErrFenced)
				}
			}
			return nil
		}
		for p, epoch := range []uint64{5, 4, 6} {
			h.src.set("t", int32(p), offsets.State{Frontier: 10, Epoch: epoch})
			h.c.MarkDirty("t", int32(p))
		}
		wait := make(chan error, 1)
		go func() { wait <- h.c.Durable(context.Background(), "t", 1) }()
		synctest.Wait() // the wait is registered before the first save
		h.run(realclock.Clock{})
		time.Sleep(3 * time.Second)
		synctest.Wait()
		require.ErrorIs(t, <-wait, offsets.ErrShardGone, "the fenced partition's durable wait")
		mu.Lock()
		require.Equal(t, []int32{1}, fenced)
		mu.Unlock()
		require.NotNil(t, h.store.bytesOf("t", 0))
		require.Nil(t, h.store.bytesOf("t", 1))
		require.NotNil(t, h.store.bytesOf("t", 2))
		require.False(t, h.marked("t", 1), "not saved again")
	})
}
