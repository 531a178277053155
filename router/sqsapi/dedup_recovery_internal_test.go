package sqsapi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/router"
)

// sliceLog is a Replayer of one partition: records from oldest on (retention removed the
// ones below), each stamped at stamps[offset-oldest].
type sliceLog struct {
	oldest int64
	stamps []time.Time
	reads  int
}

func (l *sliceLog) Replay(_ context.Context, _ string, _ int32, offset int64, limit int) ([]router.Message, error) {
	l.reads++
	offset = max(offset, l.oldest)
	var out []router.Message
	for off := offset; off < l.oldest+int64(len(l.stamps)) && len(out) < max(limit, 1); off++ {
		out = append(out, router.Message{Offset: off, Timestamp: l.stamps[off-l.oldest]})
	}
	return out, nil
}

// TestFirstSince: the binary search finds the first record at or after since among records
// whose timestamps never decrease, whatever retention removed, within about log2 reads.
func TestFirstSince(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		t0 := time.Unix(1767000000, 0)
		n := rapid.IntRange(0, 300).Draw(t, "records")
		l := &sliceLog{oldest: rapid.Int64Range(0, 50).Draw(t, "oldest")}
		at := t0
		for range n {
			at = at.Add(time.Duration(rapid.IntRange(0, 3).Draw(t, "step")) * time.Second)
			l.stamps = append(l.stamps, at)
		}
		hi := l.oldest + int64(n)
		lo := rapid.Int64Range(0, hi).Draw(t, "lo")
		since := t0.Add(time.Duration(rapid.IntRange(-5, 3*n+5).Draw(t, "since")) * time.Second)
		got, err := firstSince(context.Background(), l, "t", 0, lo, hi, since)
		require.NoError(t, err)
		want := hi
		for off := max(lo, l.oldest); off < hi; off++ {
			if !l.stamps[off-l.oldest].Before(since) {
				want = off
				break
			}
		}
		if want > max(lo, l.oldest) {
			require.Equal(t, want, got)
		} else {
			require.LessOrEqual(t, got, want, "at or below the first retained: a replay from it starts there")
			require.GreaterOrEqual(t, got, lo)
		}
		require.LessOrEqual(t, l.reads, 2+bitsLen(hi-lo))
	})
}

func bitsLen(n int64) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// TestNewest: the newest MaxDeduplicationIDs ids are kept, the older dropped.
func TestNewest(t *testing.T) {
	t0 := time.Unix(1767000000, 0)
	var ids []recoveredID
	for i := range MaxDeduplicationIDs + 10 {
		ids = append(ids, recoveredID{at: t0.Add(time.Duration((i*7919)%(MaxDeduplicationIDs+10)) * time.Millisecond)})
	}
	kept := newest(ids)
	require.Len(t, kept, MaxDeduplicationIDs)
	require.Equal(t, t0.Add(10*time.Millisecond), kept[0].at)
	require.Equal(t, t0.Add(time.Duration(MaxDeduplicationIDs+9)*time.Millisecond), kept[len(kept)-1].at)
}
