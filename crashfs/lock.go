package crashfs

import "syscall"

// TryLock takes the exclusive lock of path without waiting, as flock(LOCK_EX|LOCK_NB) does:
// ok is false while another holder has it. The lock lives in memory beside the tree and
// creates no file; it is not an op of the seam, so it is neither counted nor injected. It
// belongs to the process: ProcessCrash and PowerCut return a file system with no lock held,
// as the kernel releases a dead process's flocks. The directory holding path must exist.
// unlock releases the lock (once; later calls do nothing) and never fails, even after a
// crash froze the file system.
func (f *FS) TryLock(path string) (unlock func() error, ok bool, err error) {
	p := clean(path)
	f.lock()
	defer f.mu.Unlock()
	if f.frozen {
		return nil, false, pathErr("lock", p, ErrCrashed)
	}
	parts := split(p)
	if len(parts) == 0 {
		return nil, false, pathErr("lock", p, syscall.EISDIR)
	}
	if _, err := parentOf(f.root, parts); err != nil {
		return nil, false, pathErr("lock", p, err)
	}
	if f.locks[p] != nil {
		return nil, false, nil
	}
	token := new(byte)
	if f.locks == nil {
		f.locks = map[string]*byte{}
	}
	f.locks[p] = token
	return func() error {
		f.lock()
		defer f.mu.Unlock()
		if f.locks[p] == token {
			delete(f.locks, p)
		}
		return nil
	}, true, nil
}
