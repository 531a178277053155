//go:build unix

package offsets

import (
	"io/fs"
	"syscall"
)

// fileID is the device and inode number of a file: what the strand rules compare, and the
// device the macOS flush is issued for.
func fileID(fi fs.FileInfo) (dev, ino uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return uint64(st.Dev), uint64(st.Ino)
}
