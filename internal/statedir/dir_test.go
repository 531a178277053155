package statedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
)

// syncFailFS is crashfs (its lock included) whose SyncTree fails.
type syncFailFS struct{ *crashfs.FS }

func (syncFailFS) SyncTree(string) error { return errors.New("broken") }

// renameFailFS is crashfs whose Rename fails.
type renameFailFS struct{ *crashfs.FS }

func (renameFailFS) Rename(string, string) error { return errors.New("broken") }

// Both file systems a Dir runs on, each with a fresh state directory path (not yet created).
func fileSystems(t *testing.T) []struct {
	name string
	fsys FS
	dir  string
} {
	return []struct {
		name string
		fsys FS
		dir  string
	}{
		{"real file system", nil, filepath.Join(t.TempDir(), "a", "state")},
		{"crashfs", crashfs.New(), "/a/state"},
	}
}

// stat is os.Stat or fsys.Stat.
func stat(fsys FS, path string) (fs.FileInfo, error) {
	if fsys == nil {
		return os.Stat(path)
	}
	return fsys.Stat(path)
}

// Open creates the directory and its parents and holds its lock until Close: a second Open
// is refused with ErrLocked, and opens again once the first is closed.
func TestOpen(t *testing.T) {
	for _, tt := range fileSystems(t) {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Open(tt.fsys, tt.dir)
			require.NoError(t, err)
			fi, err := stat(tt.fsys, tt.dir)
			require.NoError(t, err)
			assert.True(t, fi.IsDir())
			if tt.fsys == nil && runtime.GOOS != "windows" {
				assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm()&^0o022, "made with mode 0755 (less the umask)")
			}
			_, err = Open(tt.fsys, tt.dir)
			require.ErrorIs(t, err, ErrLocked)
			require.NoError(t, d.Close())
			d, err = Open(tt.fsys, tt.dir)
			require.NoError(t, err, "Close released the lock")
			require.NoError(t, d.Close())
		})
	}
}

// A directory that cannot be made fails Open, not as a held lock; a failed sync of what a
// previous process left fails it too, and releases the lock it took.
func TestOpenFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err := Open(nil, filepath.Join(file, "state"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), "router: create state directory: ")

	mem := crashfs.New()
	_, err = Open(syncFailFS{mem}, "/state")
	require.EqualError(t, err, "router: make the state a previous process left in /state durable: broken")
	d, err := Open(mem, "/state")
	require.NoError(t, err, "the failed Open released its lock")
	require.NoError(t, d.Close())
}

// The node's operations on its directory, on either file system: partition paths below it,
// made, found, pinned and removed.
func TestDirOperations(t *testing.T) {
	for _, tt := range fileSystems(t) {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Open(tt.fsys, tt.dir)
			require.NoError(t, err)
			defer d.Close()

			part := d.Partition("Orders", 7)
			assert.Equal(t, filepath.Join(tt.dir, "%4Frders", "7"), part)
			assert.Equal(t, part, PartitionPath(tt.dir, "Orders", 7))
			assert.False(t, d.Exists(part))
			_, err = d.OpenRoot(part)
			require.ErrorIs(t, err, fs.ErrNotExist, "a missing directory is not created")

			require.NoError(t, d.MkdirAll(part))
			require.NoError(t, d.MkdirAll(part), "an existing directory is no error")
			assert.True(t, d.Exists(part))
			root, err := d.OpenRoot(part)
			require.NoError(t, err)
			f, err := root.OpenFile("consumer.moved", os.O_CREATE|os.O_WRONLY, 0o644)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.NoError(t, root.Close())
			assert.True(t, d.Exists(filepath.Join(part, "consumer.moved")))

			require.NoError(t, d.RemoveAll(filepath.Dir(part)))
			assert.False(t, d.Exists(part))
			require.NoError(t, d.RemoveAll(part), "a missing path is no error")
			assert.True(t, d.Exists(tt.dir), "the state directory stays")
		})
	}
}

// A topic's directory under the name an earlier release gave it moves to its current name,
// unless the current one exists (it is read instead), there is none, the names agree, or the
// file system cannot rename; a move that fails answers its paths, for the node's log.
func TestAdoptLegacyTopic(t *testing.T) {
	const topic = "Orders" // legacy "Orders", current "%4Frders"
	for _, tt := range []struct {
		name            string
		legacy, current bool // which directories exist before
		wrap            func(*crashfs.FS) FS
		topic           string
		// wantCurrent: the partition is found under the topic's current name after.
		wantCurrent, wantFail bool
	}{
		{name: "moved", legacy: true, wantCurrent: true},
		{name: "the current name exists", legacy: true, current: true},
		{name: "no legacy directory"},
		{name: "the names agree", topic: "orders", legacy: true, wantCurrent: true},
		{name: "no Renamer", legacy: true, wrap: func(f *crashfs.FS) FS { return plainFS{f} }},
		{name: "the rename fails", legacy: true, wrap: func(f *crashfs.FS) FS { return renameFailFS{f} }, wantFail: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			topic := topic
			if tt.topic != "" {
				topic = tt.topic
			}
			mem := crashfs.New()
			legacy, current := filepath.Join("/state", legacyTopicDir(topic)), filepath.Join("/state", TopicDir(topic))
			if tt.legacy {
				require.NoError(t, mem.MkdirAll(filepath.Join(legacy, "0")))
			}
			if tt.current {
				require.NoError(t, mem.MkdirAll(current))
			}
			var fsys FS = mem
			if tt.wrap != nil {
				fsys = tt.wrap(mem)
			}
			d, err := Open(fsys, "/state")
			require.NoError(t, err)
			defer d.Close()

			from, to, err := d.AdoptLegacyTopic(topic)
			if tt.wantFail {
				require.EqualError(t, err, "broken")
				assert.Equal(t, [2]string{legacy, current}, [2]string{from, to})
			} else {
				require.NoError(t, err)
				assert.Empty(t, from+to)
			}
			_, err = mem.Stat(filepath.Join(current, "0"))
			assert.Equal(t, tt.wantCurrent, err == nil, "the partition is under the current name")
			if tt.wantCurrent && legacy != current {
				assert.False(t, d.Exists(legacy), "moved, not copied")
			}
		})
	}
}

// A deleted topic's state goes under both its names, and a missing one is no error.
func TestRemoveTopic(t *testing.T) {
	mem := crashfs.New()
	d, err := Open(mem, "/state")
	require.NoError(t, err)
	defer d.Close()
	for _, name := range []string{"Orders", "%4Frders", "orders"} {
		require.NoError(t, mem.MkdirAll(filepath.Join("/state", name, "0")))
	}
	require.NoError(t, d.RemoveTopic("Orders"))
	assert.False(t, d.Exists("/state/Orders"))
	assert.False(t, d.Exists("/state/%4Frders"))
	assert.True(t, d.Exists("/state/orders"), "another topic's")
	require.NoError(t, d.RemoveTopic("Orders"))
	require.NoError(t, d.RemoveTopic("orders"), "one name for both")
	assert.False(t, d.Exists("/state/orders"))
}

// A partition's directory is computed at its load, at a hand-off or a drop, and once per
// partition by the committer: not a hot path, but cheap.
func BenchmarkPartition(b *testing.B) {
	d := &Dir{path: "/var/lib/consume/state"}
	b.ReportAllocs()
	for b.Loop() {
		_ = d.Partition("orders.eu-west-1", 17)
	}
}
