package statedir

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
)

// ErrLocked: another holder, in this process or another, has the directory's lock. Its text
// is the router's, whose ErrDirLocked it is: hosts read it there.
var ErrLocked = errors.New("router: state directory in use by another node")

// LockName is the file of the state directory that Lock locks. No topic's directory takes
// this name (see TopicDir).
const LockName = "%LOCK"

// Locker is the capability of a custom FS that Lock uses, found by type assertion: an
// exclusive lock on a path. TryLock must not wait: a lock held elsewhere answers ok false
// (and a nil error); an error is a failure to lock at all. A lock must be released when its
// holder dies, so a crash never leaves the directory locked. (router.DirLocker is this
// contract as hosts read it.)
type Locker interface {
	TryLock(path string) (unlock func() error, ok bool, err error)
}

// heldDirs are the lock paths holders in this process have, so a second holder of the
// process is refused even where the platform's lock is per process (or absent).
var heldDirs struct {
	sync.Mutex
	paths map[string]bool
}

// Lock takes the lock of the state directory dir (which exists), dir/LockName: through fsys
// when it offers Locker, through the operating system's file lock (flock, LockFileEx) when
// fsys is nil, and not at all for another custom FS, where keeping one holder per directory
// is the caller's duty. A lock held elsewhere answers an error matching ErrLocked. The
// returned unlock releases it.
func Lock(fsys FS, dir string) (unlock func() error, err error) {
	path := filepath.Join(dir, LockName)
	key := path
	if fsys == nil {
		if abs, err := filepath.Abs(path); err == nil {
			key = abs
		}
	} else if _, ok := fsys.(Locker); !ok {
		return func() error { return nil }, nil
	}
	// The key names the FS too: two in-memory file systems are two machines.
	if fsys != nil {
		key = fmt.Sprintf("%p:%s", fsys, path)
	}
	heldDirs.Lock()
	if heldDirs.paths[key] {
		heldDirs.Unlock()
		return nil, fmt.Errorf("%w: %s is held by a node of this process", ErrLocked, dir)
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
		release, ok, err = fsys.(Locker).TryLock(path)
	}
	switch {
	case err != nil:
		forget()
		return nil, fmt.Errorf("router: lock state directory %s: %w", dir, err)
	case !ok:
		forget()
		return nil, fmt.Errorf("%w: %s is held by another process", ErrLocked, dir)
	}
	return func() error {
		err := release()
		forget()
		return err
	}, nil
}
