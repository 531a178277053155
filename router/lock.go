package router

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
)

// ErrDirLocked: another node, in this process or another, holds Config.Dir. New refuses to
// start a second node on one state directory: two nodes would lease the same records and
// overwrite each other's ack state.
var ErrDirLocked = errors.New("router: state directory in use by another node")

// LockName is the file in Config.Dir that New locks for as long as the node lives. No
// topic's directory takes this name (see topicDir).
const LockName = "%LOCK"

// DirLocker is an optional capability of a custom Config.FS, found by type assertion: an
// exclusive lock on a path, which New takes on Config.Dir/LockName and Close releases.
//
// TryLock must not wait: a lock held elsewhere answers ok false (and a nil error), which New
// turns into ErrDirLocked; an error is a failure to lock at all. A lock must be released when
// its holder dies (the kernel releases an flock when the process exits), so a crash never
// leaves the directory locked. A custom FS without TryLock runs unlocked: keeping one node
// per directory is then the host's duty.
type DirLocker interface {
	TryLock(path string) (unlock func() error, ok bool, err error)
}

// LockDir takes the lock a node holds on its state directory dir (Dir/LockName, on the real
// file system), for a tool that must not write beside a running node: it answers an error
// matching ErrDirLocked while a node, of this process or another, holds dir, and a node
// started while the tool holds it fails New the same way. dir must exist; LockDir creates
// the lock file as New does. The returned unlock releases it.
func LockDir(dir string) (unlock func() error, err error) { return lockDir(nil, dir) }

// heldDirs are the lock paths nodes of this process hold, so a second node of the process
// is refused even where the platform's lock is per process (or absent).
var heldDirs struct {
	sync.Mutex
	paths map[string]bool
}

// lockDir takes the lock of the state directory dir (which exists) for a node: through fsys
// when it offers DirLocker, through the operating system's file lock when fsys is nil, and
// not at all for another custom FS. The returned unlock releases it.
func lockDir(fsys FS, dir string) (unlock func() error, err error) {
	path := filepath.Join(dir, LockName)
	key := path
	if fsys == nil {
		if abs, err := filepath.Abs(path); err == nil {
			key = abs
		}
	} else if _, ok := fsys.(DirLocker); !ok {
		return func() error { return nil }, nil
	}
	// The key names the FS too: two in-memory file systems are two machines.
	if fsys != nil {
		key = fmt.Sprintf("%p:%s", fsys, path)
	}
	heldDirs.Lock()
	if heldDirs.paths[key] {
		heldDirs.Unlock()
		return nil, fmt.Errorf("%w: %s is held by a node of this process", ErrDirLocked, dir)
	}
	if heldDirs.paths == nil {
		heldDirs.paths = map[string]bool{}
	}
	heldDirs.paths[key] = true
	heldDirs.Unlock()
	forget := func() {
		heldDirs.Lock()
		delete(heldDirs.paths, key)
		heldDirs.Unlock()
	}

	var release func() error
	var ok bool
	if fsys == nil {
		release, ok, err = lockFile(path)
	} else {
		release, ok, err = fsys.(DirLocker).TryLock(path)
	}
	switch {
	case err != nil:
		forget()
		return nil, fmt.Errorf("router: lock state directory %s: %w", dir, err)
	case !ok:
		forget()
		return nil, fmt.Errorf("%w: %s is held by another process", ErrDirLocked, dir)
	}
	return func() error {
		err := release()
		forget()
		return err
	}, nil
}
