//go:build darwin

package offsets

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// SyncData is a plain fsync(2), which gets the data to the drive but not past its write cache.
// (os.File.Sync would issue F_FULLFSYNC for every file; the committer issues one per device per
// tick instead, through FullSync.)
func (f *osFile) SyncData() error { return ignoringEINTR(func() error { return unix.Fsync(f.fd) }) }

// FullSync flushes the drive's write cache of the device the file lives on (F_FULLFSYNC).
// File systems that do not support it (SMB mounts) answer ENOTSUP; a plain fsync is then all
// there is, as the standard library does in os.File.Sync.
func (f *osFile) FullSync() error {
	return ignoringEINTR(func() error {
		_, err := unix.FcntlInt(uintptr(f.fd), unix.F_FULLFSYNC, 0)
		if errors.Is(err, unix.ENOTSUP) {
			err = unix.Fsync(f.fd)
		}
		return err
	})
}

var _ FullSyncer = (*osFile)(nil)

// syncDir is a plain fsync of the directory; the device flush that follows the prime phase
// (FullSync on a file of the same device) takes it past the drive cache.
func syncDir(d *os.File) error {
	return ignoringEINTR(func() error { return unix.Fsync(int(d.Fd())) })
}

func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}
