package router

import "narad.dev/consume/internal/statedir"

// ErrDirLocked: another node, in this process or another, holds Config.Dir. New refuses to
// start a second node on one state directory: two nodes would lease the same records and
// overwrite each other's ack state.
var ErrDirLocked = statedir.ErrLocked

// LockName is the file in Config.Dir that New locks for as long as the node lives. No
// topic's directory takes this name (see TopicDir).
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
func LockDir(dir string) (unlock func() error, err error) { return statedir.Lock(nil, dir) }
