package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncerFS is a custom FS whose SyncTree records its calls and answers err.
type syncerFS struct {
	plainFS
	err   error
	calls []string
}

func (f *syncerFS) SyncTree(dir string) error {
	f.calls = append(f.calls, dir)
	return f.err
}

// stateTree makes a state directory as a previous process leaves it: a topic, two
// partitions with their files, the lock file, and a symbolic link that is not the node's.
func stateTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"0", "1"} {
		part := filepath.Join(dir, "orders", p)
		require.NoError(t, os.MkdirAll(part, 0o755))
		for _, name := range []string{"consumer.id", "consumer.ahead", "consumer.offset"} {
			require.NoError(t, os.WriteFile(filepath.Join(part, name), []byte(name), 0o644))
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, LockName), nil, 0o644))
	if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, "link")); err != nil {
		t.Logf("no symbolic link: %v", err)
	}
	return dir
}

// The real file system syncs the whole tree, by syncfs on Linux and by the walk elsewhere;
// the walk, which Linux does not run, is tested here on every platform. A dangling link is
// skipped, not followed.
func TestSyncInheritedOnTheRealFileSystem(t *testing.T) {
	dir := stateTree(t)
	require.NoError(t, syncInherited(nil, dir))
	require.NoError(t, syncTreeByWalk(dir))

	missing := filepath.Join(dir, "missing")
	err := syncInherited(nil, missing)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "router: make the state a previous process left in "+missing+" durable")
	require.ErrorIs(t, syncTreeByWalk(missing), os.ErrNotExist)
}

// A custom FS syncs through its TreeSyncer, once, for the directory; its failure is New's;
// an FS without TreeSyncer gets no sync.
func TestSyncInheritedThroughTheFS(t *testing.T) {
	broken := errors.New("broken")
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"synced", nil},
		{"failed", broken},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys := &syncerFS{err: tt.err}
			err := syncInherited(fsys, "/state")
			assert.Equal(t, []string{"/state"}, fsys.calls)
			if tt.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.err)
			assert.EqualError(t, err, "router: make the state a previous process left in /state durable: broken")
		})
	}
	require.NoError(t, syncInherited(plainFS{}, "/state"), "no TreeSyncer: nothing to call")
}
