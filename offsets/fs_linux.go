//go:build linux

package offsets

import (
	"os"

	"golang.org/x/sys/unix"
)

// SyncData is fdatasync(2): the data and the metadata needed to read it back (the size, after
// the prime extends consumer.ahead), not the timestamps.
func (f *osFile) SyncData() error { return ignoringEINTR(func() error { return unix.Fdatasync(f.fd) }) }

func syncDir(d *os.File) error { return d.Sync() }

func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}
