package statedir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// TreeSyncer is the capability of a custom FS that Open uses to make inherited state
// durable, found by type assertion: make everything below dir durable (every file's data
// and every directory's entries), as syncfs(2) does for a whole file system. (router.TreeSyncer
// is this contract as hosts read it.)
type TreeSyncer interface {
	SyncTree(dir string) error
}

// syncInherited makes what a previous process left below dir durable, through the FS's
// TreeSyncer, or on the real file system when fsys is nil; a custom FS without TreeSyncer
// gets no such sync.
func syncInherited(fsys FS, dir string) error {
	var err error
	switch s := fsys.(type) {
	case nil:
		err = syncTree(dir)
	case TreeSyncer:
		err = s.SyncTree(dir)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("router: make the state a previous process left in %s durable: %w", dir, err)
	}
	return nil
}

// syncTreeByWalk fsyncs every regular file and directory below dir: the portable way, where
// the platform has no syncfs.
func syncTreeByWalk(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil // a symbolic link or anything else is not the node's
		}
		flag := os.O_RDONLY
		if runtime.GOOS == "windows" {
			if d.IsDir() {
				return nil // a directory cannot be flushed there; its entries need no sync
			}
			flag = os.O_RDWR // FlushFileBuffers wants a handle that may write
		}
		f, err := os.OpenFile(path, flag, 0)
		if err != nil {
			return err
		}
		syncErr := f.Sync()
		closeErr := f.Close()
		if syncErr != nil {
			return syncErr
		}
		return closeErr
	})
}
