//go:build unix && !solaris && !aix

package statedir

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive flock on path, creating the file. The kernel releases it when
// the process ends, however it ends.
func lockFile(path string) (unlock func() error, ok bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	fd := int(f.Fd())
	for {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, &fs.PathError{Op: "flock", Path: path, Err: err}
	}
	return f.Close, true, nil // closing the descriptor releases the lock
}
