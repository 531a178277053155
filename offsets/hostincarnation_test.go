package offsets_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// Two lives of topic d in the host's log (its incarnations, as the router digests them).
const lifeOne, lifeTwo = uint64(0x1111), uint64(0x2222)

const msgIgnoredState = "consumer offsets: ignoring damaged or foreign persisted state; " +
	"records it would have settled are delivered again"

func shortInterval(c *offsets.Config) { c.Interval = 100 * time.Millisecond }

// writeLife leaves in fsys the durable state of one life of d/0, loaded under a host that
// names host (0: none): offsets 0 to 5 and 7 acked. It returns the shard's state.
func writeLife(t *testing.T, fsys *crashfs.FS, host uint64) offsets.State {
	t.Helper()
	h := newMemHarness(t, fsys, shortInterval)
	h.mkdir("d", 0)
	h.createBound("d", 0, host)
	h.ack("d", 0, 0, 1, 2, 3, 4, 5, 7)
	h.ticks(3)
	truth := h.shards.Snapshot("d", 0)
	require.NoError(t, h.c.Close())
	return truth
}

// LoadBound trusts a state bound to the host's incarnation of the topic, and one bound to
// none (the upgrade); a state bound to another life is ignored whole, loudly, and the
// partition starts as new. Whatever it loaded, the prime binds consumer.id to the life the
// shard was loaded under (a host that names none keeps the binding as it is), and replaces an
// earlier life's consumer.id rather than strand the partition.
func TestLoadBoundTrustsOnlyItsLife(t *testing.T) {
	tests := []struct {
		name          string
		written, host uint64 // the life the state was written under, the one the host names now
		wantFound     bool
		wantBinding   uint64
	}{
		{"the same life", lifeOne, lifeOne, true, lifeOne},
		{"another life: an earlier one restored, or stale files", lifeOne, lifeTwo, false, lifeTwo},
		{"a host that names none keeps the binding", lifeOne, 0, true, lifeOne},
		{"an unbound state is trusted once, then bound", 0, lifeOne, true, lifeOne},
		{"unbound, under a host that names none", 0, 0, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := crashfs.New()
			truth := writeLife(t, fsys, tt.written)
			before, err := offsets.Inspect(fsys, dirOf("d", 0), "d", 0)
			require.NoError(t, err)
			require.Equal(t, tt.written, before.ID.HostIncarnation, "consumer.id bound to the life it was written under")

			h := newMemHarness(t, fsys, shortInterval)
			st := h.createBound("d", 0, tt.host)
			require.Equal(t, tt.wantFound, st.Found)
			require.Equal(t, tt.wantBinding, st.HostIncarnation)
			lines := h.logs.Lines(msgIgnoredState)
			if tt.wantFound {
				requireSameState(t, truth, st, "its own life's state")
				require.Equal(t, before.ID.Incarnation, st.Incarnation)
				require.Zero(t, h.c.Stats().IgnoredFiles)
				require.Empty(t, lines)
			} else {
				require.EqualValues(t, -1, st.Frontier, "starts as new: every retained record delivered again")
				require.NotEqual(t, before.ID.Incarnation, st.Incarnation, "under a fresh incarnation")
				require.Equal(t, uint64(1), h.c.Stats().IgnoredFiles, "counted")
				require.Len(t, lines, 1, "ignored loudly")
				require.Contains(t, lines[0]["consumer_id"].String(), "bound to host incarnation")
			}

			h.ack("d", 0, st.Frontier+1)
			h.ticks(3)
			require.Zero(t, h.c.Stats().Stranded, "an earlier life's consumer.id is replaced, not stranded on")
			require.NoError(t, h.c.Close())
			cut := fsys.PowerCut(crashfs.PowerCut{})
			after, err := offsets.Inspect(cut, dirOf("d", 0), "d", 0)
			require.NoError(t, err)
			require.Equal(t, st.Incarnation, after.ID.Incarnation)
			require.Equal(t, tt.wantBinding, after.ID.HostIncarnation, "consumer.id bound by the prime, durably")
			if tt.wantBinding != 0 {
				c, err := offsets.New(offsets.Config{FS: cut, Dir: dirOf, Source: offsets.NewShards()})
				require.NoError(t, err)
				defer c.Close()
				got, err := c.LoadBound("d", 0, tt.wantBinding)
				require.NoError(t, err)
				requireSameState(t, h.shards.Snapshot("d", 0), got, "what the partition acked since, under its binding")
				other, err := c.LoadBound("d", 0, tt.wantBinding+1)
				require.NoError(t, err)
				require.False(t, other.Found, "and not under another life")
			}
		})
	}
}

// The upgrade from a release before consumer.id under a host that names its topic's
// incarnation writes the adopted form bound to it (52 bytes), and the legacy record it
// adopted still counts under it.
func TestLegacyUpgradeIsBound(t *testing.T) {
	fsys := crashfs.New()
	k := offsets.PartitionKey("d", 0)
	require.NoError(t, fsys.MkdirAll(dirOf("d", 0)))
	legacy := slot(t, offsets.Record{Seq: 3, Key: k, Frontier: 9, Ahead: offsets.RunsOf(11)})
	require.NoError(t, fsys.WriteFile(aheadPath("d", 0), append(legacy, make([]byte, offsets.SlotSize)...)))
	require.NoError(t, fsys.WriteFile(offsetPath("d", 0), be64(9)))

	h := newMemHarness(t, fsys, shortInterval)
	st := h.createBound("d", 0, lifeOne)
	require.True(t, st.Found)
	require.EqualValues(t, 9, st.Frontier)
	h.ticks(1) // the prime, and nothing written naming the incarnation yet
	id, err := fsys.ReadFile(dirOf("d", 0) + "/" + offsets.IDFile)
	require.NoError(t, err)
	require.Len(t, id, offsets.MaxIDFileSize, "adopted and bound")
	adopted, frontier := offsets.IDAdoptsLegacy(id, "d", 0)
	require.True(t, adopted)
	require.EqualValues(t, 9, frontier)

	cut := fsys.PowerCut(crashfs.PowerCut{})
	c, err := offsets.New(offsets.Config{FS: cut, Dir: dirOf, Source: offsets.NewShards()})
	require.NoError(t, err)
	defer c.Close()
	got, err := c.LoadBound("d", 0, lifeOne)
	require.NoError(t, err)
	requireSameState(t, st, got, "the adopted legacy record, under the bound consumer.id")
	h.closeCommitter()
}
