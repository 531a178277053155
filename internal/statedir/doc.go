// Package statedir is a node's state directory (router's Config.Dir) as the node touches it
// outside its state files: a Dir, opened once, holds the directory's lock for the node's
// life and carries the node's file-system operations on it (partition paths, making,
// removing and finding directories, pinning a partition's directory, moving a topic's
// directory from the name an earlier release gave it), through a custom FS or the real
// file system.
//
// Open creates the directory, locks it and makes durable what a previous process left
// below it, in that order:
//   - the lock is a file of the directory, LockName: an flock on Unix, LockFileEx on
//     Windows, or the custom FS's Locker; a process-wide table also keeps two holders of
//     one process apart where the platform's lock would not (or is absent). A lock held
//     elsewhere answers ErrLocked. Lock takes it alone, for a tool that must not write
//     beside a running node;
//   - the sync is one syncfs(2) on Linux, a walk fsyncing every file and directory
//     elsewhere, or the custom FS's TreeSyncer, so that a power loss after a restart never
//     undoes state the restarted node loaded;
//   - a topic's directory is named by TopicDir, an escaping that every file system takes and
//     that keeps topics apart where case is folded; TopicOfDir reads a name back.
//
// The package knows nothing of router: router declares the host's contracts (router.FS,
// router.DirLocker, router.TreeSyncer, router.Renamer) and this package the small
// interfaces it uses, which those satisfy. Its errors read "router: ...", as they always
// have: hosts receive them from router.New and router.LockDir.
package statedir
