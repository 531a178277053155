package crashfs

import (
	"errors"
	"io"
	"io/fs"
	"syscall"
	"time"

	"narad.dev/consume/offsets"
)

// file is an offsets.File and an offsets.FullSyncer: an open regular file.
type file struct {
	fs     *FS
	n      *inode
	path   string // as opened; used in Op.Path and errors
	name   string
	read   bool
	write  bool
	append bool
	closed bool
}

var (
	_ offsets.File       = (*file)(nil)
	_ offsets.FullSyncer = (*file)(nil)
)

// start checks the handle and admits the op. The caller holds mu.
func (h *file) start(kind OpKind) error {
	if h.fs.frozen {
		return ErrCrashed
	}
	if h.closed {
		return fs.ErrClosed
	}
	return h.fs.begin(kind, h.path)
}

// ReadAt reads the page cache. Like os.File.ReadAt it returns io.EOF when it reads fewer than
// len(b) bytes because the file ends.
func (h *file) ReadAt(b []byte, off int64) (int, error) {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.start(OpRead); err != nil {
		return 0, pathErr("read", h.path, err)
	}
	if !h.read {
		return 0, pathErr("read", h.path, syscall.EBADF)
	}
	if off < 0 {
		return 0, pathErr("read", h.path, errors.New("negative offset"))
	}
	if off >= int64(len(h.n.data)) {
		return 0, io.EOF
	}
	n := copy(b, h.n.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt writes to the page cache and marks the touched sectors dirty. It is all or nothing:
// past the disk budget it fails with syscall.ENOSPC, past MaxFileSize with syscall.EFBIG.
func (h *file) WriteAt(b []byte, off int64) (int, error) {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.start(OpWrite); err != nil {
		return 0, pathErr("write", h.path, err)
	}
	switch {
	case !h.write:
		return 0, pathErr("write", h.path, syscall.EBADF)
	case h.append:
		return 0, pathErr("write", h.path, errors.New("invalid use of WriteAt on file opened with O_APPEND"))
	case off < 0:
		return 0, pathErr("write", h.path, errors.New("negative offset"))
	case off > MaxFileSize || int64(len(b)) > MaxFileSize-off:
		return 0, pathErr("write", h.path, syscall.EFBIG)
	}
	n := h.n
	if len(b) > 0 {
		end := off + int64(len(b))
		old := int64(len(n.data))
		if end > old {
			if !f.grow(n, end-old) {
				return 0, pathErr("write", h.path, syscall.ENOSPC)
			}
			n.data = append(n.data, make([]byte, end-old)...)
			n.sizeDirty = true
		}
		copy(n.data[off:], b)
		n.markDirty(min(old, off), end)
		f.seq++
		n.last = &writeRec{seq: f.seq, off: off, data: clone(b)}
		f.pending[n] = struct{}{}
	}
	f.applied(OpWrite)
	return len(b), nil
}

// Truncate changes the page-cache size, zero-filling growth, and marks the sectors between
// the old and the new size dirty.
func (h *file) Truncate(size int64) error {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.start(OpTruncate); err != nil {
		return pathErr("truncate", h.path, err)
	}
	switch {
	case !h.write || size < 0:
		return pathErr("truncate", h.path, syscall.EINVAL)
	case size > MaxFileSize:
		return pathErr("truncate", h.path, syscall.EFBIG)
	case !f.resize(h.n, size):
		return pathErr("truncate", h.path, syscall.ENOSPC)
	}
	f.applied(OpTruncate)
	return nil
}

// resize sets the page-cache size of n, within the disk budget. The caller holds mu.
func (f *FS) resize(n *inode, size int64) bool {
	old := int64(len(n.data))
	if size == old {
		return true
	}
	if !f.grow(n, size-old) {
		return false
	}
	if size < old {
		n.data = n.data[:size:size]
	} else {
		n.data = append(n.data, make([]byte, size-old)...)
	}
	n.sizeDirty = true
	n.markDirty(min(old, size), max(old, size))
	return true
}

func (n *inode) markDirty(lo, hi int64) {
	if lo >= hi {
		return
	}
	if n.dirty == nil {
		n.dirty = map[int64]struct{}{}
	}
	for s := lo / SectorSize; s*SectorSize < hi; s++ {
		n.dirty[s] = struct{}{}
	}
}

// SyncData copies the dirty sectors and the size to the durable image. An injected failure
// changes nothing in SyncKeepDirty mode; in SyncDropDirty mode it marks the dirty sectors
// clean without copying them (a size change stays pending).
func (h *file) SyncData() error {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.start(OpSyncData); err != nil {
		if !f.frozen && !h.closed && f.syncMode == SyncDropDirty {
			h.n.dirty, h.n.last = nil, nil
			delete(f.pending, h.n)
		}
		return pathErr("sync", h.path, err)
	}
	f.persist(h.n)
	f.applied(OpSyncData)
	return nil
}

// persist makes n's page cache durable as far as it is dirty. The caller holds mu.
func (f *FS) persist(n *inode) {
	if n.sizeDirty {
		size := len(n.data)
		if size <= len(n.disk) {
			n.disk = n.disk[:size:size]
		} else {
			n.disk = append(n.disk, make([]byte, size-len(n.disk))...)
		}
	}
	for s := range n.dirty {
		lo, hi := s*SectorSize, min((s+1)*SectorSize, int64(len(n.data)))
		if lo >= hi {
			continue
		}
		if int64(len(n.disk)) < hi {
			n.disk = append(n.disk, make([]byte, hi-int64(len(n.disk)))...)
		}
		copy(n.disk[lo:hi], n.data[lo:hi])
	}
	n.dirty, n.sizeDirty, n.last = nil, false, nil
	delete(f.pending, n)
}

// FullSync is counted and injected as OpFullSync and otherwise does nothing: SyncData already
// reaches the durable image in this model, so there is no drive cache to flush. An injected
// failure changes nothing in either sync failure mode.
func (h *file) FullSync() error {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.start(OpFullSync); err != nil {
		return pathErr("fullsync", h.path, err)
	}
	f.applied(OpFullSync)
	return nil
}

// Stat describes the open file, with its page-cache size.
func (h *file) Stat() (offsets.FileInfo, error) {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.start(OpStat); err != nil {
		return nil, pathErr("stat", h.path, err)
	}
	return newInfo(h.name, h.n), nil
}

// Close closes the file; later calls return fs.ErrClosed. An injected failure leaves it open.
func (h *file) Close() error {
	f := h.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := h.start(OpClose); err != nil {
		return pathErr("close", h.path, err)
	}
	h.closed = true
	return nil
}

// info is an offsets.FileInfo: a snapshot of an inode.
type info struct {
	name string
	size int64
	mode fs.FileMode
	ino  uint64
}

var _ offsets.FileInfo = info{}

func newInfo(name string, n *inode) info {
	return info{name: name, size: int64(len(n.data)), mode: n.mode, ino: n.ino}
}

func (i info) Name() string          { return i.name }
func (i info) Size() int64           { return i.size }
func (i info) Mode() fs.FileMode     { return i.mode }
func (i info) ModTime() time.Time    { return time.Time{} }
func (i info) IsDir() bool           { return i.mode.IsDir() }
func (i info) Sys() any              { return nil }
func (i info) ID() (dev, ino uint64) { return Device, i.ino }
