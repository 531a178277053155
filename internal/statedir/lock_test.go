package statedir

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

	"narad.dev/consume/crashfs"
)

// The in-memory file system the tests run on offers the directory's whole contract.
var (
	_ FS         = (*crashfs.FS)(nil)
	_ Locker     = (*crashfs.FS)(nil)
	_ TreeSyncer = (*crashfs.FS)(nil)
	_ Renamer    = (*crashfs.FS)(nil)
)

// plainFS is a custom FS with none of the optional capabilities.
type plainFS struct{ FS }

// lockerFS is a custom FS whose TryLock answers what the test says.
type lockerFS struct {
	plainFS
	ok    bool
	err   error
	calls []string
}

func (f *lockerFS) TryLock(path string) (func() error, bool, error) {
	f.calls = append(f.calls, path)
	if f.err != nil || !f.ok {
		return nil, false, f.err
	}
	return func() error { return nil }, true, nil
}

// The text hosts match (consumestate prints it, its tests look for it).
func TestErrLockedReadsAsTheRouters(t *testing.T) {
	assert.Equal(t, "router: state directory in use by another node", ErrLocked.Error())
}

// One holder at a time per directory, in this process, on the real file system and through
// an FS's Locker; unlock lets the next one in; two in-memory file systems are two machines.
func TestLockOneHolder(t *testing.T) {
	real := t.TempDir()
	mem := crashfs.New()
	require.NoError(t, mem.MkdirAll("/state"))
	for _, tt := range []struct {
		name string
		fsys FS
		dir  string
	}{
		{"real file system", nil, real},
		{"crashfs", mem, "/state"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			unlock, err := Lock(tt.fsys, tt.dir)
			require.NoError(t, err)
			_, err = Lock(tt.fsys, tt.dir)
			require.ErrorIs(t, err, ErrLocked)
			assert.Contains(t, err.Error(), "held by a node of this process")
			require.NoError(t, unlock())
			unlock, err = Lock(tt.fsys, tt.dir)
			require.NoError(t, err, "unlock released it")
			require.NoError(t, unlock())
		})
	}

	t.Run("a relative path is the same directory", func(t *testing.T) {
		t.Chdir(real)
		unlock, err := Lock(nil, real)
		require.NoError(t, err)
		defer unlock()
		_, err = Lock(nil, ".")
		require.ErrorIs(t, err, ErrLocked)
	})

	t.Run("another crashfs is another machine", func(t *testing.T) {
		other := crashfs.New()
		require.NoError(t, other.MkdirAll("/state"))
		unlock, err := Lock(mem, "/state")
		require.NoError(t, err)
		defer unlock()
		unlockOther, err := Lock(other, "/state")
		require.NoError(t, err)
		require.NoError(t, unlockOther())
	})

	t.Run("a crash releases the crashfs lock", func(t *testing.T) {
		fsys := crashfs.New()
		require.NoError(t, fsys.MkdirAll("/state"))
		crashed, err := Lock(fsys, "/state")
		require.NoError(t, err)
		after := fsys.ProcessCrash()
		unlock, err := Lock(after, "/state")
		require.NoError(t, err, "the crashed process's lock went with it")
		require.NoError(t, unlock())
		require.NoError(t, crashed())
	})
}

// What TryLock answers becomes Lock's answer: a lock held elsewhere is ErrLocked, a failure
// to lock is an error that is not; neither leaves the path in the process's table. An FS
// without TryLock is not locked at all.
func TestLockThroughTheFS(t *testing.T) {
	broken := errors.New("broken")
	for _, tt := range []struct {
		name     string
		ok       bool
		err      error
		isLocked bool
		want     string
	}{
		{name: "granted", ok: true},
		{name: "held elsewhere", isLocked: true, want: "router: state directory in use by another node: /state is held by another process"},
		{name: "failed", err: broken, want: "router: lock state directory /state: broken"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys := &lockerFS{ok: tt.ok, err: tt.err}
			unlock, err := Lock(fsys, "/state")
			assert.Equal(t, []string{filepath.Join("/state", LockName)}, fsys.calls)
			if tt.want == "" {
				require.NoError(t, err)
				require.NoError(t, unlock())
			} else {
				require.EqualError(t, err, tt.want)
				assert.Equal(t, tt.isLocked, errors.Is(err, ErrLocked))
				if tt.err != nil {
					assert.ErrorIs(t, err, tt.err)
				}
			}
			fsys.ok, fsys.err = true, nil
			unlock, err = Lock(fsys, "/state")
			require.NoError(t, err, "the refused or failed lock left nothing in the table")
			require.NoError(t, unlock())
		})
	}

	t.Run("no TryLock", func(t *testing.T) {
		fsys := plainFS{crashfs.New()}
		first, err := Lock(fsys, "/state")
		require.NoError(t, err)
		second, err := Lock(fsys, "/state")
		require.NoError(t, err, "unlocked: keeping one holder is the host's duty")
		require.NoError(t, first())
		require.NoError(t, second())
	})
}

// A missing directory fails the real file system's lock, and not as a held lock.
func TestLockMissingDirectory(t *testing.T) {
	_, err := Lock(nil, filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrLocked)
	_, err = Lock(nil, filepath.Join(t.TempDir(), "missing"))
	require.NotErrorIs(t, err, ErrLocked, "the failure left nothing in the table")
}

// lockHolderEnv names the directory a re-executed test binary locks (TestLockHolderProcess).
const lockHolderEnv = "STATEDIR_TEST_LOCK_HOLDER"

// TestLockHolderProcess is the child of TestKilledHolderReleasesTheLock: it locks the
// directory, says so, and waits to be killed.
func TestLockHolderProcess(t *testing.T) {
	dir := os.Getenv(lockHolderEnv)
	if dir == "" {
		t.Skip("the child process of TestKilledHolderReleasesTheLock")
	}
	if _, err := Lock(nil, dir); err != nil {
		fmt.Println("error", err)
		return
	}
	fmt.Println("locked")
	bufio.NewReader(os.Stdin).ReadString('\n') // until the parent kills this process
}

// Issue 9 item 7: another process holds the directory; once that process is killed (SIGKILL:
// no unlock, no cleanup), the kernel releases its lock and Lock succeeds.
func TestKilledHolderReleasesTheLock(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "solaris", "aix", "illumos":
		t.Skip("the cross-process lock is tested where flock is used")
	}
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$", "-test.count=1")
	child.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)

	_, err = Lock(nil, dir)
	require.ErrorIs(t, err, ErrLocked, "held by the other process")
	assert.Contains(t, err.Error(), "held by another process")

	require.NoError(t, child.Process.Kill())
	err = child.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "killed: %v", err)

	unlock, err := Lock(nil, dir)
	require.NoError(t, err, "the kernel released the dead process's lock")
	require.NoError(t, unlock())
}
