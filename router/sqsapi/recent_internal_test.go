package sqsapi

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRecent: a name's time holds for RecentWindow and no longer; undo puts back what a set
// replaced unless a later set came; the sweep drops only expired names.
func TestRecent(t *testing.T) {
	t0 := time.Unix(1767000000, 0)
	var r recent
	for _, step := range []struct {
		name string
		do   func() bool
		want bool
	}{
		{"a claimed", func() bool { return r.claim("a", t0) }, true},
		{"a again at once", func() bool { return r.claim("a", t0) }, false},
		{"a within, just before 60 s", func() bool { return r.within("a", t0.Add(RecentWindow-time.Nanosecond)) }, true},
		{"a not within at 60 s", func() bool { return r.within("a", t0.Add(RecentWindow)) }, false},
		{"a claimed at 60 s", func() bool { return r.claim("a", t0.Add(RecentWindow)) }, true},
		{"b never set", func() bool { return r.within("b", t0) }, false},
	} {
		require.Equal(t, step.want, step.do(), step.name)
	}

	prev, had := r.set("a", t0.Add(2*RecentWindow))
	require.True(t, had)
	require.Equal(t, t0.Add(RecentWindow), prev)
	r.undo("a", t0.Add(2*RecentWindow), prev, had)
	require.True(t, r.within("a", t0.Add(RecentWindow)), "undone to the time before")
	r.set("a", t0.Add(3*RecentWindow))
	r.undo("a", t0.Add(2*RecentWindow), prev, had)
	require.True(t, r.within("a", t0.Add(3*RecentWindow)), "a later set stays")

	// Many names, one window apart: a sweep keeps the map to about a window's names.
	for i := range 1000 {
		r.set(fmt.Sprint("q", i), t0.Add(time.Duration(i)*RecentWindow))
	}
	require.Less(t, len(r.at), 40)
	require.True(t, r.within("q999", t0.Add(999*RecentWindow)))
}

// TestRecentCodes: the refusals are typed: errors.Is tells them, and their encodings are
// SQS's model's.
func TestRecentCodes(t *testing.T) {
	for _, tc := range []struct {
		code         *code
		query        string
		status       int
		notOtherwise *code
	}{
		{codePurgeQueueInProgress, "AWS.SimpleQueueService.PurgeQueueInProgress", 403, codeQueueDeletedRecently},
		{codeQueueDeletedRecently, "AWS.SimpleQueueService.QueueDeletedRecently", 400, codePurgeQueueInProgress},
	} {
		err := fmt.Errorf("wrapped: %w", fail(tc.code, "refused"))
		require.ErrorIs(t, err, tc.code)
		require.False(t, errors.Is(err, tc.notOtherwise))
		c, _ := codeOf(err)
		require.Equal(t, tc.query, c.query)
		require.Equal(t, tc.status, c.status)
		require.True(t, c.sender)
	}
}
