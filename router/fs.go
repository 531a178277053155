package router

import (
	"narad.dev/consume/internal/statedir"
	"narad.dev/consume/offsets"
)

// FS is the file system a node keeps its ack state in (Config.FS; nil means the real one).
// A host supplies its own to put the state somewhere else, or to test crashes and failing
// disks. Its whole contract is here; DirLocker, TreeSyncer and Renamer are its optional
// capabilities, found by type assertion. Implementations must be safe for concurrent use.
//
// Every path the node passes is Config.Dir or a path below it.
type FS interface {
	// OpenRoot pins the directory dir, as os.OpenRoot does: names opened through the Root
	// stay inside the directory that was opened, whatever later happens to the path dir. A
	// missing directory is an error satisfying errors.Is(err, fs.ErrNotExist); it is never
	// created.
	OpenRoot(dir string) (Root, error)
	// Stat describes the file or directory path names now, following symbolic links. A
	// missing path satisfies errors.Is(err, fs.ErrNotExist).
	Stat(path string) (FileInfo, error)
	// MkdirAll creates the directory path and any missing parents, as os.MkdirAll does; an
	// existing directory is no error, and a path (or a parent) that exists as anything else is
	// one. New calls it for Config.Dir, and a partition's first touch for the partition's
	// directory (Dir/<topic>/<partition>). The real file system creates them with mode 0755.
	MkdirAll(path string) error
	// RemoveAll removes path and everything below it, as os.RemoveAll does; a missing path is
	// no error. DeleteTopic calls it for the topic's directory, so the topic created again
	// starts afresh.
	RemoveAll(path string) error
}

// Renamer is an optional capability of an FS, found by type assertion: rename a directory,
// as os.Rename does. A topic's first touch uses it to move the topic's directory from the
// name a release before the current directory names gave it (a name the new encoding
// changed) to its current one, so an upgrade keeps the topic's ack state. An FS without it
// leaves such a directory where it is: the topic's records are delivered again, none
// skipped. The real file system has it.
type Renamer interface {
	Rename(from, to string) error
}

// TreeSyncer is an optional capability of an FS, found by type assertion: make everything
// below dir durable (every file's data and every directory's entries), as syncfs(2) does
// for a whole file system. New calls it once for Config.Dir, before the node serves, so that
// the acks a crashed process left only in the page cache are durable before a new process
// builds on them: a power loss after a restart then never undoes a frontier the restarted
// node loaded and served. A host FS without it gets no such sync: the node's first touch of
// each partition makes that partition's state durable within a commit tick instead. The real
// file system (a nil Config.FS) has it.
type TreeSyncer interface {
	SyncTree(dir string) error
}

// Root is a directory FS.OpenRoot pinned: a partition's directory, holding its state files.
type Root = offsets.Root

// File is an open state file of a partition. The node writes whole 4 KiB slots with WriteAt
// and makes them durable with SyncData.
type File = offsets.File

// FileInfo is fs.FileInfo plus the device and inode numbers (ID), which tell the node that a
// partition's directory was replaced underneath it.
type FileInfo = offsets.FileInfo

// FullSyncer is an optional capability of a File, found by type assertion: flush the drive's
// write cache of the device the file lives on (F_FULLFSYNC on macOS), called once per device
// per writeout after the SyncData calls.
type FullSyncer = offsets.FullSyncer

// The FS a node passes to its committer and its state directory is an FS: the contracts
// agree, and the state directory finds the capabilities hosts read of here.
var (
	_ offsets.FS          = FS(nil)
	_ statedir.FS         = FS(nil)
	_ statedir.Locker     = DirLocker(nil)
	_ statedir.Renamer    = Renamer(nil)
	_ statedir.TreeSyncer = TreeSyncer(nil)
)
