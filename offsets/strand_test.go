package offsets

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireStrandLogged checks the spec's strand line, word for word and with its fields
// (checklist item 67).
func requireStrandLogged(t *testing.T, logs *LogRecorder, topic string, p int32) {
	t.Helper()
	lines := logs.Lines("consumer offsets: partition directory removed or replaced under its persisted state; " +
		"its acks are not persisted until the partition is dropped")
	require.Len(t, lines, 1)
	require.Equal(t, topic, lines[0]["topic"].String())
	require.Equal(t, int64(p), lines[0]["partition"].Int64())
}

// Checklist items 64 to 67, invariant I10, RELIABILITY row 5, on the real file system: a
// partition directory removed or replaced under the committer strands the partition, logged
// once; nothing is written into the new directory and no directory is recreated; Forget clears
// it.
func TestStrandOnRealFS(t *testing.T) {
	tests := []struct {
		name    string
		replace bool // replace the directory, rather than remove it
	}{{"removed", false}, {"replaced", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newDiskHarness(t, nil)
			h.create("t", 0)
			h.create("t", 1)
			h.ack("t", 0, 0, 1, 2)
			h.ack("t", 1, 0, 1, 2)
			h.ticks(11)
			dir := h.dir("t", 0)
			require.NoError(t, os.Rename(dir, dir+".aside"))
			if tt.replace {
				require.NoError(t, os.Mkdir(dir, 0o755))
			}
			h.ack("t", 0, 3, 4)
			h.ack("t", 1, 3, 4)
			h.ticks(11) // window writes and writeouts go through the held descriptor
			require.NoError(t, h.c.Close(), "a strand is not an error")

			requireStrandLogged(t, h.logs, "t", 0)
			require.True(t, Stranded(h.c, "t", 0))
			require.Equal(t, int64(1), h.c.Stats().StrandedNow)
			entries, err := os.ReadDir(dir)
			if tt.replace {
				require.NoError(t, err)
				require.Empty(t, entries, "nothing written into the new directory")
			} else {
				require.ErrorIs(t, err, os.ErrNotExist, "the directory is never recreated")
			}
			require.Equal(t, int64(4), h.load("t", 1).Frontier, "the other partition is unaffected")

			h.c.Forget("t", 0)
			require.False(t, Known(h.c, "t", 0))
			require.Zero(t, h.c.Stats().StrandedNow)
		})
	}
}

// A stranded partition stays stranded however many acks and ticks follow, and its next
// Forget lets a fresh shard prime the new directory (checklist item 67).
func TestStrandUntilForget(t *testing.T) {
	h := newDiskHarness(t, func(c *Config) { c.Interval = 100e6 })
	h.create("t", 0)
	h.ack("t", 0, 0)
	h.ticks(2)
	dir := h.dir("t", 0)
	require.NoError(t, os.RemoveAll(dir))
	SetLevelInterval(h.c, 0) // level at every writeout: the levelling finds the directory gone
	for i := range int64(5) {
		h.ack("t", 0, 1+i)
		h.ticks(2)
	}
	require.True(t, Stranded(h.c, "t", 0))
	require.NoDirExists(t, dir)
	requireStrandLogged(t, h.logs, "t", 0)

	h.c.Forget("t", 0)
	h.shards.Drop("t", 0)
	h.create("t", 0) // the host recreates the directory and the shard
	h.ack("t", 0, 0, 1)
	h.ticks(2)
	require.False(t, Stranded(h.c, "t", 0))
	require.NoError(t, h.c.Close())
	require.Equal(t, int64(1), h.load("t", 0).Frontier)
}

// Checklist item 64: a directory replaced between the prime's open and its check strands the
// partition; what the prime opened lives in the directory it pinned, never in the new one.
func TestStrandInsideOpenThenCheckWindow(t *testing.T) {
	h := newDiskHarness(t, nil)
	h.create("t", 0)
	dir := h.dir("t", 0)
	fired := false
	SetOpenHook(h.c, func(d string) {
		if d == dir && !fired {
			fired = true
			require.NoError(t, os.Rename(dir, dir+".aside"))
			require.NoError(t, os.Mkdir(dir, 0o755))
		}
	})
	h.ack("t", 0, 0, 1)
	h.ticks(11)
	require.True(t, fired)
	require.True(t, Stranded(h.c, "t", 0))
	requireStrandLogged(t, h.logs, "t", 0)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// Checklist item 65: a missing partition directory is never created; the partition is stranded.
func TestMissingDirectoryIsNeverCreated(t *testing.T) {
	h := newDiskHarness(t, nil)
	h.shards.Seed("t", 0, State{Frontier: -1})
	h.ack("t", 0, 0)
	h.ticks(3)
	require.NoError(t, h.c.Close())
	require.NoDirExists(t, h.dir("t", 0))
	require.True(t, Stranded(h.c, "t", 0))
}

// Checklist items 62, 66: with the cap forced to 6 (so 2 held), the durable partition's
// descriptor is evicted; its reopen goes by path and is refused (stranded) when the path names
// another file than the one primed.
func TestReopenRefusedWhenFileReplaced(t *testing.T) {
	h := newDiskHarness(t, func(c *Config) { c.MaxDescriptors = 6 })
	h.create("t", 0)
	h.create("t", 2)
	h.ack("t", 0, 0, 1)
	h.ack("t", 2, 0)
	h.ticks(11) // t/0 and t/2 primed, written out: durable
	h.create("t", 1)
	h.ack("t", 1, 0)
	h.ticks(1) // t/1 needs a held descriptor: t/0's, written longest ago, is evicted
	require.Equal(t, uint64(1), h.c.Stats().Evictions)

	// Someone swaps t/0's consumer.ahead for another file.
	name := filepath.Join(h.dir("t", 0), AheadFile)
	require.NoError(t, os.WriteFile(name+".new", make([]byte, AheadFileSize), 0o644))
	require.NoError(t, os.Rename(name+".new", name))
	h.ack("t", 0, 2)
	h.ticks(11)
	require.True(t, Stranded(h.c, "t", 0))
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, make([]byte, AheadFileSize), b, "nothing written into the other file")
}
