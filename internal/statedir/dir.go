package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"narad.dev/consume/offsets"
)

// FS is what a Dir needs of a custom file system: router.FS, whose doc comment is the
// contract. Locker, TreeSyncer and Renamer are its optional capabilities.
type FS interface {
	offsets.FS
	MkdirAll(path string) error
	RemoveAll(path string) error
}

// Renamer is the capability of a custom FS that Dir.AdoptLegacyTopic moves a directory
// with, found by type assertion (router.Renamer is this contract as hosts read it).
type Renamer interface {
	Rename(from, to string) error
}

// A Dir is a node's state directory, open: created, locked, and with what a previous process
// left there made durable. Its methods are the node's file-system operations on it, through
// the custom FS it was opened with or the real file system. It is safe for concurrent use.
type Dir struct {
	path   string
	fsys   FS      // the FS opened with, or the real one
	rename Renamer // nil: a custom FS that cannot rename
	unlock func() error
}

// Open opens the state directory path on fsys (nil: the real file system, where
// directories are made with mode 0755): it creates path and its parents if needed, takes
// its lock (see Lock; an error matching ErrLocked when another holder has it), and makes
// durable what a previous process left below it (through fsys's TreeSyncer, syncfs(2) or a
// walk on the real file system, nothing on a custom FS without one), so that a power loss
// after a restart never undoes state the new process loaded. Close releases the lock.
func Open(fsys FS, path string) (*Dir, error) {
	d := &Dir{path: path, fsys: fsys}
	if fsys == nil {
		d.fsys = osFS{offsets.OS()}
	}
	d.rename, _ = d.fsys.(Renamer)
	if err := d.fsys.MkdirAll(path); err != nil {
		return nil, fmt.Errorf("router: create state directory: %w", err)
	}
	unlock, err := Lock(fsys, path)
	if err != nil {
		return nil, err
	}
	if err := syncInherited(fsys, path); err != nil {
		unlock()
		return nil, err
	}
	d.unlock = unlock
	return d, nil
}

// Close releases the directory's lock: another holder may open it now. It does not stop the
// Dir's methods, which the caller stops calling first.
func (d *Dir) Close() error { return d.unlock() }

// PartitionPath is the directory below the state directory dir that holds a partition's
// state: dir/TopicDir(topic)/partition.
func PartitionPath(dir, topic string, partition int32) string {
	return filepath.Join(dir, TopicDir(topic), strconv.Itoa(int(partition)))
}

// Partition is the directory holding a partition's state (see PartitionPath).
func (d *Dir) Partition(topic string, partition int32) string {
	return PartitionPath(d.path, topic, partition)
}

// MkdirAll creates the directory path and any missing parents.
func (d *Dir) MkdirAll(path string) error { return d.fsys.MkdirAll(path) }

// RemoveAll removes path and everything below it; a missing path is no error.
func (d *Dir) RemoveAll(path string) error { return d.fsys.RemoveAll(path) }

// Exists reports whether path names a file or directory now; a failing Stat counts as
// none.
func (d *Dir) Exists(path string) bool {
	_, err := d.fsys.Stat(path)
	return err == nil
}

// OpenRoot pins the directory path (see router.FS).
func (d *Dir) OpenRoot(path string) (offsets.Root, error) { return d.fsys.OpenRoot(path) }

// AdoptLegacyTopic moves a topic's directory from the name an earlier release gave it to its
// TopicDir name, so an upgrade keeps the topic's state: where the legacy directory exists
// and the current one does not, and the file system can rename. It answers the error of a
// move that failed and left no directory under the current name, with the two paths.
func (d *Dir) AdoptLegacyTopic(topic string) (from, to string, err error) {
	legacy, current := legacyTopicDir(topic), TopicDir(topic)
	if legacy == current || d.rename == nil {
		return "", "", nil
	}
	from, to = filepath.Join(d.path, legacy), filepath.Join(d.path, current)
	if d.Exists(to) || !d.Exists(from) {
		return "", "", nil
	}
	if err := d.rename.Rename(from, to); err != nil && !d.Exists(to) {
		return from, to, err
	}
	return "", "", nil
}

// RemoveTopic removes a topic's state, under its name and under the name an earlier release
// gave it, so neither is read as the state of a topic created again.
func (d *Dir) RemoveTopic(topic string) error {
	err := d.fsys.RemoveAll(filepath.Join(d.path, TopicDir(topic)))
	if legacy := legacyTopicDir(topic); legacy != TopicDir(topic) {
		err = errors.Join(err, d.fsys.RemoveAll(filepath.Join(d.path, legacy)))
	}
	return err
}

// osFS is the real file system, as the node has always used it: directories made with mode
// 0755, pinned with os.OpenRoot.
type osFS struct{ offsets.FS }

func (osFS) MkdirAll(path string) error   { return os.MkdirAll(path, 0o755) }
func (osFS) RemoveAll(path string) error  { return os.RemoveAll(path) }
func (osFS) Rename(from, to string) error { return os.Rename(from, to) }
