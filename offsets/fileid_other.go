//go:build !unix

package offsets

import "io/fs"

// fileID has no device and inode number to offer on this platform: every file reports (0, 0),
// so the identity checks of the strand rules cannot tell a replaced directory from the pinned
// one here. Only a missing path strands a partition.
func fileID(fs.FileInfo) (dev, ino uint64) { return 0, 0 }
