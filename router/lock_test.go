package router_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/memfs"
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

// Through a custom FS offering TryLock (memfs): a second node is refused, and a crash of the
// holder's process releases the lock as the kernel releases an flock.
func TestDirectoryLockThroughTheFS(t *testing.T) {
	fsys := memfs.New()
	cfg := realConfig("/state")
	cfg.FS = fsys
	first, err := router.New(cfg)
	require.NoError(t, err)
	_, err = router.New(cfg)
	require.ErrorIs(t, err, router.ErrDirLocked)

	other := cfg
	other.FS = memfs.New()
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

// startChild runs this test binary again as a child process running only test run (which
// skips itself unless env names what it is to do), and waits for the first line it prints,
// which must be ready. The child waits on its standard input, closed when the test ends.
func startChild(t *testing.T, run, ready string, env ...string) *exec.Cmd {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1")
	child.Env = append(os.Environ(), env...)
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	t.Cleanup(func() { stdin.Close() })
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, ready+"\n", line)
	return child
}

// lockHolderEnv names the directory a re-executed test binary locks (TestLockHolderProcess).
const lockHolderEnv = "ROUTER_TEST_LOCK_HOLDER"

// TestLockHolderProcess is the child of TestKilledHolderReleasesTheLock: it opens a node on
// the directory, says so, and waits to be killed.
func TestLockHolderProcess(t *testing.T) {
	dir := os.Getenv(lockHolderEnv)
	if dir == "" {
		t.Skip("the child process of TestKilledHolderReleasesTheLock")
	}
	if _, err := router.New(realConfig(dir)); err != nil {
		fmt.Println("error", err)
		return
	}
	fmt.Println("locked")
	bufio.NewReader(os.Stdin).ReadString('\n') // until the parent kills this process
}

// Issue 9 item 7: a node in another process holds the directory; once that process is killed
// (SIGKILL: no Close, no cleanup), the kernel releases its lock and New succeeds.
func TestKilledHolderReleasesTheLock(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "solaris", "aix", "illumos":
		t.Skip("the cross-process lock is tested where flock is used")
	}
	dir := filepath.Join(t.TempDir(), "state")
	child := startChild(t, "TestLockHolderProcess", "locked", lockHolderEnv+"="+dir)

	_, err := router.New(realConfig(dir))
	require.ErrorIs(t, err, router.ErrDirLocked, "held by the other process")

	require.NoError(t, child.Process.Kill())
	err = child.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "killed: %v", err)

	node, err := router.New(realConfig(dir))
	require.NoError(t, err, "the kernel released the dead process's lock")
	require.NoError(t, node.Close())
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
