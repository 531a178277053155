package crashfs

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
)

// OpKind is the kind of an op of the seam (a call on the FS, a Root or a File).
type OpKind int

const (
	OpOpenRoot OpKind = iota // FS.OpenRoot
	OpOpenFile               // Root.OpenFile that neither creates nor truncates
	OpCreate                 // Root.OpenFile with O_CREATE of a missing name
	OpStat                   // FS.Stat, Root.Stat, File.Stat
	OpRead                   // File.ReadAt
	OpWrite                  // File.WriteAt
	OpTruncate               // File.Truncate, and Root.OpenFile with O_TRUNC of an existing file
	OpSyncData               // File.SyncData
	OpSyncDir                // Root.Sync
	OpFullSync               // File.FullSync
	OpClose                  // Root.Close, File.Close
)

var kindNames = [...]string{"openroot", "openfile", "create", "stat", "read", "write", "truncate", "syncdata", "syncdir", "fullsync", "close"}

func (k OpKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Mutating reports whether ops of kind k can change what the file system holds: creates,
// writes, truncates and syncs. CrashAfter counts these.
func (k OpKind) Mutating() bool {
	switch k {
	case OpCreate, OpWrite, OpTruncate, OpSyncData, OpSyncDir, OpFullSync:
		return true
	}
	return false
}

// Op is one op of the seam, as an Injector sees it before it runs.
type Op struct {
	Kind OpKind
	// Path is the path the op names: the root's directory as opened, joined with the name
	// for Root ops; the path a File was opened as for File ops.
	Path string
	// Index counts the ops seen on this FS lineage (crashed FSes and those returned by their
	// crashes), from 0. Ops on a crashed FS or a closed handle are not seen.
	Index int
}

func (o Op) String() string { return fmt.Sprintf("#%d %s %s", o.Index, o.Kind, o.Path) }

// Injector decides the fate of each op: nil lets it run, an error fails it, and the op then
// has no effect (except for SyncData in SyncDropDirty mode). The error is returned inside an
// *fs.PathError, so errors.Is sees through. An Injector runs with the FS locked: it must not
// call the FS or its roots and files.
type Injector func(op Op) error

// Inject installs inj for every later op; nil removes it.
func (f *FS) Inject(inj Injector) {
	f.lock()
	defer f.mu.Unlock()
	f.inj = inj
}

// OnIndex fails the op with the given Index.
func OnIndex(i int, err error) Injector {
	return func(op Op) error {
		if op.Index == i {
			return err
		}
		return nil
	}
}

// OnKind fails every op of kind k.
func OnKind(k OpKind, err error) Injector {
	return func(op Op) error {
		if op.Kind == k {
			return err
		}
		return nil
	}
}

// Nth fails the n-th op of kind k (from 0) this injector sees.
func Nth(k OpKind, n int, err error) Injector {
	var seen atomic.Int64
	return func(op Op) error {
		if op.Kind == k && seen.Add(1)-1 == int64(n) {
			return err
		}
		return nil
	}
}

// Times lets inj fail at most count ops, then lets everything through: a transient fault.
func Times(inj Injector, count int) Injector {
	var failed atomic.Int64
	return func(op Op) error {
		err := inj(op)
		if err != nil && failed.Add(1) <= int64(count) {
			return err
		}
		return nil
	}
}

// PathContains applies inj only to ops whose Path contains s; other ops pass, unseen by inj.
func PathContains(s string, inj Injector) Injector {
	return func(op Op) error {
		if strings.Contains(op.Path, s) {
			return inj(op)
		}
		return nil
	}
}

// Any asks each injector in turn and returns the first error.
func Any(injs ...Injector) Injector {
	return func(op Op) error {
		for _, inj := range injs {
			if err := inj(op); err != nil {
				return err
			}
		}
		return nil
	}
}

// Random fails each op inj would fail with probability p, drawn from r. With a nil r, only
// p >= 1 fails anything.
func Random(r *rand.Rand, p float64, inj Injector) Injector {
	var mu sync.Mutex
	return func(op Op) error {
		err := inj(op)
		if err == nil {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if p >= 1 || (r != nil && r.Float64() < p) {
			return err
		}
		return nil
	}
}

// SyncFailureMode is what a failed SyncData does to the file's dirty data.
type SyncFailureMode int

const (
	// SyncKeepDirty: the data stays dirty, and a later successful SyncData persists it.
	SyncKeepDirty SyncFailureMode = iota
	// SyncDropDirty (fsyncgate; Linux ext4 and XFS): the dirty sectors are marked clean
	// without reaching the durable image. Reads still return them from the page cache; the
	// next SyncData returns nil and persists nothing of them (a pending size change it does
	// persist, zero-filled).
	SyncDropDirty
)

// SetSyncFailureMode sets what an injected SyncData failure does; the default is
// SyncKeepDirty.
func (f *FS) SetSyncFailureMode(m SyncFailureMode) {
	f.lock()
	defer f.mu.Unlock()
	f.syncMode = m
}

// CrashAfter lets n more mutating ops succeed, then freezes f: the next mutating op and every
// op after it returns ErrCrashed and is not applied. Non-mutating ops still run before the
// freeze. ProcessCrash or PowerCut on the frozen f gives the state to recover from. A
// negative n removes the limit.
func (f *FS) CrashAfter(n int) {
	f.lock()
	defer f.mu.Unlock()
	f.armed = n >= 0
	f.crashAt = f.mutating + n
}

// MutatingOps returns how many mutating ops were applied on this FS lineage (a failed op is
// not applied).
func (f *FS) MutatingOps() int {
	f.lock()
	defer f.mu.Unlock()
	return f.mutating
}

// Ops returns how many ops were seen on this FS lineage: the Index the next op gets.
func (f *FS) Ops() int {
	f.lock()
	defer f.mu.Unlock()
	return f.ops
}

// Crashed reports whether f is frozen, by a crash or by CrashAfter.
func (f *FS) Crashed() bool {
	f.lock()
	defer f.mu.Unlock()
	return f.frozen
}

// SetFreeBytes leaves n bytes free from now on: a write or truncate that would make the files
// hold more than n bytes beyond what they hold now fails with syscall.ENOSPC and has no effect;
// shrinking or removing files frees space again. A negative n removes the budget (the
// default). Sizes are page-cache sizes; setup methods are not refused but do count.
func (f *FS) SetFreeBytes(n int64) {
	f.lock()
	defer f.mu.Unlock()
	f.budgeted = n >= 0
	f.capacity = f.used + n
}
