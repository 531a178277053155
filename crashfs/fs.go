package crashfs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"narad.dev/consume/offsets"
)

const (
	// SectorSize is the unit in which unsynced file data survives or is lost at a power cut.
	SectorSize = 512
	// MaxFileSize bounds every file; a write or truncate past it fails with syscall.EFBIG.
	MaxFileSize = 1 << 24
	// Device is the device number of every file and directory (FileInfo.ID).
	Device = 1
)

var (
	// ErrCrashed is returned (inside an *fs.PathError) by every operation on an FS that crashed
	// or froze (ProcessCrash, PowerCut, CrashAfter), and on its roots and files.
	ErrCrashed = errors.New("crashfs: file system crashed")

	// ErrInjected is a ready-made error for injectors. It wraps syscall.EIO, so
	// errors.Is(err, syscall.EIO) holds for it as for a real I/O error.
	ErrInjected error = &injectedError{}

	errEscapes = errors.New("path escapes from parent")
)

type injectedError struct{}

func (*injectedError) Error() string { return "crashfs: injected error (EIO)" }
func (*injectedError) Unwrap() error { return syscall.EIO }

// FS is a strict in-memory file system; see the package documentation. The zero value is an
// empty file system holding only the directory "/", as New returns. All methods are safe for
// concurrent use.
type FS struct {
	mu       sync.Mutex
	frozen   bool
	root     *inode
	nextIno  uint64
	ops      int  // ops seen on this lineage: the Index of the next one
	mutating int  // mutating ops applied on this lineage
	crashAt  int  // freeze when mutating reaches it, if armed
	armed    bool // CrashAfter set a limit
	inj      Injector
	syncMode SyncFailureMode
	capacity int64 // bytes all linked files may hold, if budgeted
	budgeted bool  // SetFreeBytes set a budget
	used     int64 // bytes all linked files hold (page-cache sizes)
	seq      uint64
	pending  map[*inode]struct{} // files with a write not synced since (for TearLastWrite)
	locks    map[string]*byte    // path → the token of its holder (TryLock); never inherited by a crash
}

var _ offsets.FS = (*FS)(nil)

// inode is a file or a directory. Everything in it is guarded by the owning FS's mu.
type inode struct {
	ino  uint64
	mode fs.FileMode

	// Directory.
	entries map[string]*inode // the live namespace
	durable map[string]*inode // the entries a power cut keeps; a subset of entries
	removed bool              // unlinked (RemoveAll, or replaced by Rename): no new entries

	// Regular file.
	data      []byte             // page cache: what reads see
	disk      []byte             // durable image: what a power cut keeps
	dirty     map[int64]struct{} // sectors of data the next SyncData copies to disk
	sizeDirty bool               // the next SyncData sets len(disk) to len(data)
	last      *writeRec          // the newest WriteAt not synced since
	unlinked  bool
}

type writeRec struct {
	seq  uint64
	off  int64
	data []byte
}

func (n *inode) isDir() bool { return n.mode.IsDir() }

// New returns an empty file system holding only the directory "/". So is a zero FS.
func New() *FS { return &FS{} }

// lock locks f, first making a zero FS the empty file system it stands for.
func (f *FS) lock() {
	f.mu.Lock()
	if f.root == nil {
		f.root = f.newDir()
		f.pending = map[*inode]struct{}{}
	}
}

func (f *FS) newDir() *inode {
	f.nextIno++
	return &inode{ino: f.nextIno, mode: fs.ModeDir | 0o755, entries: map[string]*inode{}, durable: map[string]*inode{}}
}

func (f *FS) newFile(perm fs.FileMode) *inode {
	f.nextIno++
	return &inode{ino: f.nextIno, mode: perm & fs.ModePerm}
}

// clean makes p an absolute, clean slash path; a relative path is taken from "/".
func clean(p string) string { return path.Clean("/" + p) }

// split returns the components of a clean absolute path; "/" has none.
func split(p string) []string {
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

func pathErr(op, p string, err error) error { return &fs.PathError{Op: op, Path: p, Err: err} }

// walk follows the live entries from dir along parts.
func walk(dir *inode, parts []string) (*inode, error) {
	n := dir
	for _, name := range parts {
		if !n.isDir() {
			return nil, syscall.ENOTDIR
		}
		c := n.entries[name]
		if c == nil {
			return nil, syscall.ENOENT
		}
		n = c
	}
	return n, nil
}

// parentOf walks to the directory holding the last of parts.
func parentOf(dir *inode, parts []string) (*inode, error) {
	p, err := walk(dir, parts[:len(parts)-1])
	if err != nil {
		return nil, err
	}
	if !p.isDir() {
		return nil, syscall.ENOTDIR
	}
	return p, nil
}

// begin admits an op of the seam. The caller holds f.mu and has checked its handle is open.
// A nil return means the op goes ahead; the caller then calls f.applied if it took effect.
func (f *FS) begin(kind OpKind, p string) error {
	if f.frozen {
		return ErrCrashed
	}
	if kind.Mutating() && f.armed && f.mutating >= f.crashAt {
		f.frozen = true
		return ErrCrashed
	}
	op := Op{Kind: kind, Path: p, Index: f.ops}
	f.ops++
	if f.inj != nil {
		return f.inj(op)
	}
	return nil
}

func (f *FS) applied(kind OpKind) {
	if kind.Mutating() {
		f.mutating++
	}
}

// OpenRoot pins the directory dir. A missing directory is an error satisfying
// errors.Is(err, fs.ErrNotExist); a file is syscall.ENOTDIR. The Root keeps working on the
// directory's inode whatever later happens to the path (see the package documentation).
func (f *FS) OpenRoot(dir string) (offsets.Root, error) {
	f.lock()
	defer f.mu.Unlock()
	p := clean(dir)
	if err := f.begin(OpOpenRoot, p); err != nil {
		return nil, pathErr("openroot", p, err)
	}
	n, err := walk(f.root, split(p))
	if err == nil && !n.isDir() {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return nil, pathErr("openroot", p, err)
	}
	return &root{fs: f, dir: n, path: p}, nil
}

// Stat describes what path names now in the live namespace.
func (f *FS) Stat(name string) (offsets.FileInfo, error) {
	f.lock()
	defer f.mu.Unlock()
	p := clean(name)
	if err := f.begin(OpStat, p); err != nil {
		return nil, pathErr("stat", p, err)
	}
	n, err := walk(f.root, split(p))
	if err != nil {
		return nil, pathErr("stat", p, err)
	}
	return newInfo(path.Base(p), n), nil
}

// MkdirAll creates path and any missing parents, durably. It is a setup method: it is no op
// of the seam, so it is neither counted nor injected.
func (f *FS) MkdirAll(name string) error {
	f.lock()
	defer f.mu.Unlock()
	p := clean(name)
	if f.frozen {
		return pathErr("mkdir", p, ErrCrashed)
	}
	n := f.root
	for _, part := range split(p) {
		c := n.entries[part]
		if c == nil {
			c = f.newDir()
			n.entries[part] = c
			n.durable[part] = c
		} else if !c.isDir() {
			return pathErr("mkdir", p, syscall.ENOTDIR)
		}
		n = c
	}
	return nil
}

// WriteFile sets the contents of the file path, creating it (mode 0644) if needed; contents
// and entry are durable at once. An existing file keeps its inode, as with os.WriteFile. The
// parent directory must exist. A setup method: not counted, injected or budgeted.
func (f *FS) WriteFile(name string, data []byte) error {
	f.lock()
	defer f.mu.Unlock()
	p := clean(name)
	if f.frozen {
		return pathErr("writefile", p, ErrCrashed)
	}
	parts := split(p)
	if len(parts) == 0 {
		return pathErr("writefile", p, syscall.EISDIR)
	}
	dir, err := parentOf(f.root, parts)
	if err != nil {
		return pathErr("writefile", p, err)
	}
	base := parts[len(parts)-1]
	n := dir.entries[base]
	switch {
	case n == nil:
		n = f.newFile(0o644)
		dir.entries[base] = n
	case n.isDir():
		return pathErr("writefile", p, syscall.EISDIR)
	}
	dir.durable[base] = n
	f.used += int64(len(data) - len(n.data))
	n.data = clone(data)
	n.disk = clone(data)
	n.dirty, n.sizeDirty, n.last = nil, false, nil
	delete(f.pending, n)
	return nil
}

// ReadFile returns the page-cache contents of the file path. A setup method: not counted or
// injected.
func (f *FS) ReadFile(name string) ([]byte, error) {
	f.lock()
	defer f.mu.Unlock()
	p := clean(name)
	if f.frozen {
		return nil, pathErr("readfile", p, ErrCrashed)
	}
	n, err := walk(f.root, split(p))
	if err == nil && n.isDir() {
		err = syscall.EISDIR
	}
	if err != nil {
		return nil, pathErr("readfile", p, err)
	}
	return clone(n.data), nil
}

// Rename moves oldpath to newpath with rename(2) semantics (a file replaces a file, a
// directory replaces an empty directory), durably at once: it models a move or a reclaim done
// by someone else. Inodes are kept, so a Root on a moved directory follows it. A replaced
// directory is unlinked like a removed one. A setup method: not counted or injected.
func (f *FS) Rename(oldpath, newpath string) error {
	f.lock()
	defer f.mu.Unlock()
	op, np := clean(oldpath), clean(newpath)
	fail := func(err error) error { return &os.LinkError{Op: "rename", Old: op, New: np, Err: err} }
	if f.frozen {
		return fail(ErrCrashed)
	}
	if op == np {
		_, err := walk(f.root, split(op))
		if err != nil {
			return fail(err)
		}
		return nil
	}
	oparts, nparts := split(op), split(np)
	if len(oparts) == 0 || len(nparts) == 0 {
		return fail(syscall.EBUSY)
	}
	if strings.HasPrefix(np, op+"/") {
		return fail(syscall.EINVAL)
	}
	odir, err := parentOf(f.root, oparts)
	if err != nil {
		return fail(err)
	}
	obase, nbase := oparts[len(oparts)-1], nparts[len(nparts)-1]
	n := odir.entries[obase]
	if n == nil {
		return fail(syscall.ENOENT)
	}
	ndir, err := parentOf(f.root, nparts)
	if err != nil {
		return fail(err)
	}
	if t := ndir.entries[nbase]; t != nil {
		switch {
		case n.isDir() && !t.isDir():
			return fail(syscall.ENOTDIR)
		case !n.isDir() && t.isDir():
			return fail(syscall.EISDIR)
		case t.isDir() && len(t.entries) > 0:
			return fail(syscall.ENOTEMPTY)
		}
		f.unlink(t)
	}
	delete(odir.entries, obase)
	delete(odir.durable, obase)
	ndir.entries[nbase] = n
	ndir.durable[nbase] = n
	return nil
}

// RemoveAll removes path and everything below it, durably at once. A missing path is no
// error. Removed directories keep their inodes for the Roots pinned to them (see the package
// documentation); files open on removed files keep working, and their space is freed at once.
// "/" cannot be removed. A setup method: not counted or injected.
func (f *FS) RemoveAll(name string) error {
	f.lock()
	defer f.mu.Unlock()
	p := clean(name)
	if f.frozen {
		return pathErr("removeall", p, ErrCrashed)
	}
	parts := split(p)
	if len(parts) == 0 {
		return pathErr("removeall", p, syscall.EBUSY)
	}
	dir, err := parentOf(f.root, parts)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		return pathErr("removeall", p, err)
	}
	base := parts[len(parts)-1]
	if n := dir.entries[base]; n != nil {
		delete(dir.entries, base)
		delete(dir.durable, base)
		f.unlink(n)
	}
	return nil
}

// unlink takes n, already out of its parent, and everything below it out of the namespace.
func (f *FS) unlink(n *inode) {
	if n.isDir() {
		for _, c := range n.entries {
			f.unlink(c)
		}
		n.entries, n.durable, n.removed = map[string]*inode{}, map[string]*inode{}, true
		return
	}
	if !n.unlinked {
		n.unlinked = true
		f.used -= int64(len(n.data))
	}
}

// grow reports whether n may grow by delta bytes under the disk budget, and accounts for it.
func (f *FS) grow(n *inode, delta int64) bool {
	if n.unlinked {
		return true
	}
	if delta > 0 && f.budgeted && f.used+delta > f.capacity {
		return false
	}
	f.used += delta
	return true
}

// root is an offsets.Root: a directory inode pinned by OpenRoot.
type root struct {
	fs     *FS
	dir    *inode
	path   string // as opened; used in Op.Path and errors
	closed bool
}

// check returns the error for an op on a crashed FS or a closed root. The caller holds mu.
func (r *root) check() error {
	if r.fs.frozen {
		return ErrCrashed
	}
	if r.closed {
		return fs.ErrClosed
	}
	return nil
}

// names validates a name inside the root: "." or an fs.ValidPath (no "..", no leading or
// trailing slash, no empty element).
func names(name string) ([]string, error) {
	if !fs.ValidPath(name) {
		return nil, errEscapes
	}
	if name == "." {
		return nil, nil
	}
	return strings.Split(name, "/"), nil
}

// OpenFile opens name in the pinned directory. It honours the access mode, O_CREATE, O_EXCL,
// O_TRUNC and O_APPEND (which makes WriteAt fail, as with os.File). A directory cannot be
// opened (syscall.EISDIR). A created entry is durable only after Sync of its parent directory.
func (r *root) OpenFile(name string, flag int, perm fs.FileMode) (offsets.File, error) {
	f := r.fs
	f.lock()
	defer f.mu.Unlock()
	p := path.Join(r.path, name)
	if err := r.check(); err != nil {
		return nil, pathErr("open", p, err)
	}
	parts, nameErr := names(name)
	if nameErr == nil && len(parts) == 0 {
		nameErr = syscall.EISDIR
	}
	var dir, n *inode
	dirErr := nameErr
	if dirErr == nil {
		dir, dirErr = parentOf(r.dir, parts)
	}
	if dirErr == nil {
		n = dir.entries[parts[len(parts)-1]]
	}
	kind := OpOpenFile
	switch {
	case nameErr == nil && n == nil && flag&os.O_CREATE != 0:
		kind = OpCreate
	case n != nil && !n.isDir() && flag&os.O_TRUNC != 0 && flag&(os.O_CREATE|os.O_EXCL) != os.O_CREATE|os.O_EXCL:
		kind = OpTruncate
	}
	if err := f.begin(kind, p); err != nil {
		return nil, pathErr("open", p, err)
	}
	h := &file{fs: f, path: p, name: path.Base(p), append: flag&os.O_APPEND != 0}
	switch flag & (os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		h.read = true
	case os.O_WRONLY:
		h.write = true
	case os.O_RDWR:
		h.read, h.write = true, true
	default:
		return nil, pathErr("open", p, syscall.EINVAL)
	}
	if dirErr != nil {
		return nil, pathErr("open", p, dirErr)
	}
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", p, syscall.ENOENT)
	case n == nil && dir.removed:
		return nil, pathErr("open", p, syscall.ENOENT)
	case n == nil:
		n = f.newFile(perm)
		dir.entries[parts[len(parts)-1]] = n
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, pathErr("open", p, syscall.EEXIST)
	case n.isDir():
		return nil, pathErr("open", p, syscall.EISDIR)
	case flag&os.O_TRUNC != 0:
		f.resize(n, 0)
	}
	f.applied(kind)
	h.n = n
	return h, nil
}

// Stat describes name in the pinned directory; "." is the directory itself (which works even
// after the directory was removed, as fstatat does).
func (r *root) Stat(name string) (offsets.FileInfo, error) {
	f := r.fs
	f.lock()
	defer f.mu.Unlock()
	p := path.Join(r.path, name)
	if err := r.check(); err != nil {
		return nil, pathErr("stat", p, err)
	}
	if err := f.begin(OpStat, p); err != nil {
		return nil, pathErr("stat", p, err)
	}
	parts, err := names(name)
	if err != nil {
		return nil, pathErr("stat", p, err)
	}
	n, err := walk(r.dir, parts)
	if err != nil {
		return nil, pathErr("stat", p, err)
	}
	if len(parts) == 0 {
		return newInfo(".", n), nil
	}
	return newInfo(parts[len(parts)-1], n), nil
}

// Sync makes the pinned directory's entries durable (not those of its subdirectories). On a
// failure, injected in either sync failure mode, nothing changes.
func (r *root) Sync() error {
	f := r.fs
	f.lock()
	defer f.mu.Unlock()
	if err := r.check(); err != nil {
		return pathErr("sync", r.path, err)
	}
	if err := f.begin(OpSyncDir, r.path); err != nil {
		return pathErr("sync", r.path, err)
	}
	r.dir.durable = make(map[string]*inode, len(r.dir.entries))
	for name, n := range r.dir.entries {
		r.dir.durable[name] = n
	}
	f.applied(OpSyncDir)
	return nil
}

// Close closes the root; files opened through it stay open. An injected failure leaves it
// open.
func (r *root) Close() error {
	f := r.fs
	f.lock()
	defer f.mu.Unlock()
	if err := r.check(); err != nil {
		return pathErr("close", r.path, err)
	}
	if err := f.begin(OpClose, r.path); err != nil {
		return pathErr("close", r.path, err)
	}
	r.closed = true
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// SyncTree makes everything below dir durable, as syncfs(2) does for a whole file system:
// every file's page cache and every directory's entries. A node calls it once at start, so
// what a crashed process left in the page cache is durable before the new one serves. It is
// counted and injected as one OpSyncDir at dir; on a failure nothing changes.
func (f *FS) SyncTree(dir string) error {
	f.lock()
	defer f.mu.Unlock()
	p := clean(dir)
	if err := f.begin(OpSyncDir, p); err != nil {
		return pathErr("synctree", p, err)
	}
	n, err := walk(f.root, split(p))
	if err != nil {
		return pathErr("synctree", p, err)
	}
	var sync func(n *inode)
	sync = func(n *inode) {
		if !n.isDir() {
			f.persist(n)
			return
		}
		n.durable = make(map[string]*inode, len(n.entries))
		for name, c := range n.entries {
			n.durable[name] = c
			sync(c)
		}
	}
	sync(n)
	f.applied(OpSyncDir)
	return nil
}
