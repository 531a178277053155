package sqsapi

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSequenceNumber: a record's SequenceNumber is its partition times 2^64 plus its offset,
// in decimal, at every size.
func TestSequenceNumber(t *testing.T) {
	for _, tc := range []struct {
		p   int32
		off int64
	}{{0, 0}, {0, 42}, {0, math.MaxInt64}, {1, 0}, {1, 7}, {3, 1e18}, {math.MaxInt32, math.MaxInt64}} {
		want := new(big.Int).Lsh(big.NewInt(int64(tc.p)), 64)
		want.Add(want, big.NewInt(tc.off))
		require.Equal(t, want.String(), string(appendSequenceNumber(nil, tc.p, tc.off)), "%d:%d", tc.p, tc.off)
	}
}

// TestDedupWindow: an id is a duplicate for DeduplicationWindow after its send and no
// longer; a failed send frees it; a queue's window holds at most MaxDeduplicationIDs,
// forgetting the oldest first; windows of queues no longer sent to are swept.
func TestDedupWindow(t *testing.T) {
	t0 := time.Unix(1767000000, 0)
	var d dedupWindows
	send := func(queue, key string, at time.Time, err error) (string, bool) {
		e, dup := d.claim(queue, key, at)
		if !dup {
			d.finish(queue, e, 0, 7, err)
		}
		<-e.done
		return e.messageID, dup
	}
	id, dup := send("q", "a", t0, nil)
	require.Equal(t, "0:7", id)
	require.False(t, dup)
	_, dup = send("q", "a", t0.Add(DeduplicationWindow-time.Nanosecond), nil)
	require.True(t, dup)
	_, dup = send("other", "a", t0, nil)
	require.False(t, dup, "another queue's window")
	_, dup = send("q", "a", t0.Add(DeduplicationWindow), nil)
	require.False(t, dup, "the window has passed")

	_, dup = send("q", "f", t0, errors.New("failed"))
	require.False(t, dup)
	_, dup = send("q", "f", t0, nil)
	require.False(t, dup, "a failed send holds no id")

	// The bound: the oldest id goes first.
	for i := range MaxDeduplicationIDs {
		send("big", strconv.Itoa(i), t0, nil)
	}
	_, dup = send("big", "0", t0, nil)
	require.True(t, dup)
	send("big", "new", t0, nil) // forgets "0", the oldest (a duplicate is no new send)
	require.Len(t, d.queues["big"].ids, MaxDeduplicationIDs)
	_, dup = send("big", "1", t0, nil)
	require.True(t, dup)
	_, dup = send("big", "0", t0, nil)
	require.False(t, dup, "forgotten at the bound")
	require.LessOrEqual(t, len(d.queues["big"].order)-d.queues["big"].head, MaxDeduplicationIDs+1)

	// Queues whose ids all expired are swept as others come.
	later := t0.Add(2 * DeduplicationWindow)
	for i := range 40 {
		send("q"+strconv.Itoa(i), "a", later, nil)
	}
	require.NotContains(t, d.queues, "big")
	require.NotContains(t, d.queues, "other")
	d.forget("q0")
	_, dup = send("q0", "a", later, nil)
	require.False(t, dup, "a queue forgotten")
}
