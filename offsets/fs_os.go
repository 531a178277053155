package offsets

import (
	"io/fs"
	"os"
)

// OS returns the real file system: directories are pinned with os.OpenRoot, data is made durable
// with fdatasync on Linux and fsync(2) on macOS (whose File also offers FullSyncer, the
// F_FULLFSYNC device flush), and f.Sync elsewhere.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) OpenRoot(dir string) (Root, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &osRoot{r: r}, nil
}

func (osFS) Stat(path string) (FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	return osInfo{fi}, nil
}

type osRoot struct{ r *os.Root }

func (r *osRoot) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := r.r.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return newOSFile(f), nil
}

func (r *osRoot) Stat(name string) (FileInfo, error) {
	fi, err := r.r.Stat(name)
	if err != nil {
		return nil, err
	}
	return osInfo{fi}, nil
}

// Sync fsyncs the pinned directory itself (opened as "." inside the root, so it is the directory
// that was pinned, whatever its path names now).
func (r *osRoot) Sync() error {
	d, err := r.r.Open(".")
	if err != nil {
		return err
	}
	err = syncDir(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (r *osRoot) Close() error { return r.r.Close() }

// osFile keeps the descriptor number it was opened with, so the sync calls of the hot path go
// straight to the system call without allocating.
type osFile struct {
	f  *os.File
	fd int
}

func newOSFile(f *os.File) *osFile { return &osFile{f: f, fd: int(f.Fd())} }

func (f *osFile) ReadAt(p []byte, off int64) (int, error)  { return f.f.ReadAt(p, off) }
func (f *osFile) WriteAt(p []byte, off int64) (int, error) { return f.f.WriteAt(p, off) }
func (f *osFile) Close() error                             { return f.f.Close() }
func (f *osFile) Truncate(size int64) error                { return f.f.Truncate(size) }

func (f *osFile) Stat() (FileInfo, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return nil, err
	}
	return osInfo{fi}, nil
}

type osInfo struct{ fs.FileInfo }

func (i osInfo) ID() (dev, ino uint64) { return fileID(i.FileInfo) }
