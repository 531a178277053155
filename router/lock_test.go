package router_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/statedir"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// realConfig is a node's Config on the real file system in dir.
func realConfig(dir string) router.Config {
	routes := &routertest.Routes{}
	routes.Set("orders", 0)
	logs := &routertest.MemLogs{}
	logs.Log("orders", 0)
	return router.Config{Logs: logs, Routes: routes, Dir: dir}
}

// Issue 9 item 7 (checklist row 22): a second node on one state directory is refused with
// ErrDirLocked, and writes nothing; Close releases the directory for the next node.
func TestSecondNodeOnOneDirectoryIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state") // created by New
	first, err := router.New(realConfig(dir))
	require.NoError(t, err)
	_, err = router.New(realConfig(dir))
	require.ErrorIs(t, err, router.ErrDirLocked)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "only the lock file: the refused node wrote nothing")

	require.NoError(t, first.Close())
	again, err := router.New(realConfig(dir))
	require.NoError(t, err, "Close released the directory")
	require.NoError(t, again.Close())
}

// A Dir that cannot be created fails New, not the first consume.
func TestUncreatableDirectoryFailsNew(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err := router.New(realConfig(filepath.Join(file, "state")))
	require.Error(t, err)
	assert.NotErrorIs(t, err, router.ErrDirLocked)
}

// Through a custom FS offering TryLock (crashfs): a second node is refused, and a crash of the
// holder's process releases the lock as the kernel releases an flock.
func TestDirectoryLockThroughTheFS(t *testing.T) {
	fsys := crashfs.New()
	cfg := realConfig("/state")
	cfg.FS = fsys
	first, err := router.New(cfg)
	require.NoError(t, err)
	_, err = router.New(cfg)
	require.ErrorIs(t, err, router.ErrDirLocked)

	other := cfg
	other.FS = crashfs.New()
	elsewhere, err := router.New(other)
	require.NoError(t, err, "another file system is another machine")
	require.NoError(t, elsewhere.Close())

	cfg.FS = fsys.ProcessCrash()
	after, err := router.New(cfg)
	require.NoError(t, err, "the crash released the lock")
	first.Close() // its file system is frozen: nothing it writes now lands
	_, err = router.New(cfg)
	require.ErrorIs(t, err, router.ErrDirLocked, "closing the crashed node released nothing of the new one")
	require.NoError(t, after.Close())
}

// Issue 26 (the state tool): LockDir is the node's own lock. A tool holding it keeps a node
// from starting, and a running node keeps the tool out.
func TestLockDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	node, err := router.New(realConfig(dir))
	require.NoError(t, err)
	_, err = router.LockDir(dir)
	require.ErrorIs(t, err, router.ErrDirLocked, "a node holds it")
	require.NoError(t, node.Close())

	unlock, err := router.LockDir(dir)
	require.NoError(t, err)
	_, err = router.New(realConfig(dir))
	require.ErrorIs(t, err, router.ErrDirLocked, "the tool holds it")
	_, err = router.LockDir(dir)
	require.ErrorIs(t, err, router.ErrDirLocked, "one holder at a time")
	require.NoError(t, unlock())
	node, err = router.New(realConfig(dir))
	require.NoError(t, err)
	require.NoError(t, node.Close())

	_, err = router.LockDir(filepath.Join(dir, "missing"))
	require.Error(t, err)
	require.NotErrorIs(t, err, router.ErrDirLocked)
}

// The lock file New and LockDir take is the one router documents.
func TestLockName(t *testing.T) {
	require.Equal(t, statedir.LockName, router.LockName)
	require.Same(t, statedir.ErrLocked, router.ErrDirLocked)
}
