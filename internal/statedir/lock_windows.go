//go:build windows

package statedir

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// lockFile takes an exclusive LockFileEx lock on the first byte of path, creating the file.
// Windows releases it when the process ends, however it ends.
func lockFile(path string) (unlock func() error, ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	var ol windows.Overlapped
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if err != nil {
		f.Close()
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
			return nil, false, nil
		}
		return nil, false, &fs.PathError{Op: "LockFileEx", Path: path, Err: err}
	}
	return f.Close, true, nil // closing the handle releases the lock
}
