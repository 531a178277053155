// Package crashfs is a strict in-memory file system for crash tests: it keeps what the page
// cache holds apart from what the disk holds, and can crash the process, cut the power, tear a
// write, fail any op, and fill the disk. It is the file system the library's own crash tests
// run the committer and the node on, exported so that a host can run its own code on it (an
// FS wrapper it passes as router.Config.FS, a router.StateStore that keeps its state in files,
// or a whole node), cut the power under it at any op, and check what a restart over what
// survived finds.
//
// An *FS is a router.FS and an offsets.FS, with the optional capabilities the node looks for
// (TryLock, SyncTree, Rename); its files are offsets.File and offsets.FullSyncer.
//
// # Usage
//
// A test makes an FS with New, passes it (or its own wrapper of it) where the real file system
// would go, runs its code, and calls PowerCut or ProcessCrash: each returns a new FS holding
// what a restart would find, and freezes the old one, so that the code still running on it
// fails with ErrCrashed instead of changing what survived. The test then starts its code again
// on the new FS and checks the outcome. To crash at every point of a run, CrashAfter(n)
// freezes the FS after n more mutating ops (see Crashes); Inject fails chosen ops (see Faults).
// The example of a node over a host's FS wrapper shows the whole cycle.
//
// # Two images per file
//
// Each file has a page-cache image, which reads, Stat and ReadFile see, and a durable image,
// which is what survives a power cut. WriteAt and Truncate change the page cache and mark the
// 512-byte sectors they touch dirty (a truncate marks those between the old and the new size)
// and the size dirty if it changed. SyncData copies the dirty sectors and the size to the
// durable image. FullSync does nothing more: SyncData already reaches the durable image here,
// so there is no drive cache to flush; it is still counted and can be failed.
//
// # Directory entries
//
// Each directory has live entries, which lookups see, and durable ones. An entry created by
// Root.OpenFile with O_CREATE is live at once and durable only after Root.Sync on the
// directory holding it (not on one above it). The setup methods MkdirAll, WriteFile, Rename
// and RemoveAll model work done by someone else, fully synced: their entries and data are
// durable at once. They are not ops of the seam, so they are neither counted nor injected.
//
// Every file and directory has an inode number, kept across renames and crashes, on device
// Device; FileInfo.ID returns both. A Root pins the directory inode it opened, as os.Root
// does: after the path is renamed it keeps working on the moved directory, while FS.Stat
// resolves the live namespace and so names whatever is at the path now. A removed directory
// (RemoveAll, or replaced by Rename) is emptied and unlinked, as rmdir leaves it on Linux:
// its Root's Stat(".") and Sync still work, while lookups find nothing and creating a name
// in it fails with ENOENT. Files open on removed files keep working until the next crash.
//
// # Crashes
//
// ProcessCrash returns the FS a restarted process sees: the page cache is the kernel's, so
// all of it survives, still unsynced (a later PowerCut of the new FS can lose it). PowerCut
// returns what a power loss leaves: the durable images and durable entries only, or, per its
// options, also each unsynced sector, size change and entry with a probability drawn from a
// seeded *rand.Rand, and the newest unsynced WriteAt torn at a chosen byte. Either call
// freezes the FS it was called on: every later op there, and on the roots and files opened
// through it, returns ErrCrashed. The new FS continues the lineage's op counters.
//
// CrashAfter(n) freezes the FS in place once n more mutating ops succeed (creates, writes,
// truncates, syncs), so a test can run the committer until the n-th op and then crash the
// frozen FS in every way to sweep all crash points: the frozen state does not change, and
// each ProcessCrash or PowerCut of it starts from the same state.
//
// # Faults
//
// An Injector sees each op (kind, path and index) before it runs and may fail it; the op then
// has no effect. Helpers select ops by index, kind, n-th of a kind and path, and limit how
// often they fire. Any error can be injected: syscall.ESTALE or EACCES on a Stat,
// syscall.ENOSPC on a create, or ErrInjected (an EIO).
//
// A failed SyncData leaves the dirty data dirty by default (SyncKeepDirty). In SyncDropDirty
// mode it behaves as Linux ext4 and XFS do after a writeback error ("fsyncgate"): the dirty
// sectors are marked clean without reaching the durable image, reads still return them, and
// the next SyncData returns nil and persists nothing of them. Only a rewrite makes them dirty
// again, which is why the committer must not trust the page cache after a failed sync.
//
// SetFreeBytes gives the disk a budget: a write or truncate that would need more fails with
// syscall.ENOSPC and has no effect.
//
// # Locks
//
// TryLock is an exclusive, non-blocking lock per path, as flock gives a process: it lives
// beside the tree, creates no file, and is released by its unlock or by a crash
// (ProcessCrash and PowerCut return a file system with no lock held).
//
// All methods are safe for concurrent use; one mutex guards the whole file system.
package crashfs
