package offsets

import (
	"io"
	"io/fs"
)

// FS is the file system the committer reaches the disk through. The committer never touches a
// path outside what it opens here. OS returns the real one; crashfs is a strict
// in-memory one that keeps page-cache and durable contents apart so tests can cut power.
//
// Implementations must be safe for concurrent use; the committer itself calls them from one
// goroutine at a time.
type FS interface {
	// OpenRoot pins the directory dir, as os.OpenRoot does: names opened through the Root stay
	// inside the directory that was opened, whatever later happens to the path dir.
	// A missing directory is an error satisfying errors.Is(err, fs.ErrNotExist); it is never
	// created.
	OpenRoot(dir string) (Root, error)
	// Stat describes the file or directory the path names now (following symbolic links).
	// A missing path satisfies errors.Is(err, fs.ErrNotExist).
	Stat(path string) (FileInfo, error)
}

// Root is a pinned directory.
type Root interface {
	// OpenFile opens name inside the pinned directory (flag and perm as for os.OpenFile;
	// O_CREATE creates the file there and nowhere else).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Stat describes name inside the pinned directory; "." is the directory itself.
	Stat(name string) (FileInfo, error)
	// Sync makes the directory's entries durable (fsync of the directory), so a file created
	// inside it survives a power loss.
	Sync() error
	Close() error
}

// File is an open state file. The committer writes whole slots with WriteAt and never appends.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Stat() (FileInfo, error)
	// Truncate changes the size of the file (the prime extends a short consumer.ahead to 12 KiB).
	Truncate(size int64) error
	// SyncData makes the file's data durable: fdatasync on Linux, fsync(2) on macOS (which gets
	// the data to the drive but not past its cache; see FullSyncer).
	SyncData() error
}

// FileInfo is fs.FileInfo plus the identity the strand rules compare: the device and inode
// number. Two FileInfos with the same ID name the same file or directory.
type FileInfo interface {
	fs.FileInfo
	ID() (dev, ino uint64)
}

// FullSyncer is an optional capability of a File, found by type assertion: flush the drive's
// write cache of the device the file lives on (F_FULLFSYNC on macOS). The committer calls it
// once per device per tick after the SyncData calls of that tick's writeouts on the device (and
// once more, in a tick that primed partitions, after the primes, before any window write). A
// writeout or prime counts as done only once this flush succeeds.
type FullSyncer interface {
	FullSync() error
}
