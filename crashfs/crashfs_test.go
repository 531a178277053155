package crashfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"narad.dev/consume/offsets"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const rw = os.O_RDWR | os.O_CREATE

func fill(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// open pins dir (created durably) and opens name in it, creating it with a durable entry.
func open(t *testing.T, f *FS, dir, name string) (offsets.Root, offsets.File) {
	t.Helper()
	require.NoError(t, f.MkdirAll(dir))
	r, err := f.OpenRoot(dir)
	require.NoError(t, err)
	h, err := r.OpenFile(name, rw, 0o644)
	require.NoError(t, err)
	require.NoError(t, r.Sync())
	return r, h
}

func write(t *testing.T, h offsets.File, b []byte, off int64) {
	t.Helper()
	n, err := h.WriteAt(b, off)
	require.NoError(t, err)
	require.Equal(t, len(b), n)
}

func TestCrashKinds(t *testing.T) {
	a, b := fill('a', 1024), fill('b', 512)
	tests := []struct {
		name    string
		crash   func(*FS) *FS
		wantF   []byte
		wantNew bool // the created file whose entry was never synced
	}{
		{"process crash keeps unsynced writes and entries", (*FS).ProcessCrash, cat(a[:512], b), true},
		{"power cut keeps only synced data and entries", cut(PowerCut{}), a, false},
		{"power cut keeping every unsynced sector", cut(PowerCut{KeepUnsynced: 1}), cat(a[:512], b), true},
		{"nil rand keeps nothing below 1", cut(PowerCut{KeepUnsynced: 0.99}), a, false},
		{"torn at a byte keeps exactly the prefix", cut(PowerCut{TearLastWrite: true, TearAt: 100}), cat(a[:512], b[:100], a[:412]), false},
		{"torn at 0 keeps nothing", cut(PowerCut{TearLastWrite: true, TearAt: 0}), a, false},
		{"torn at the end keeps the whole write", cut(PowerCut{TearLastWrite: true, TearAt: 512}), cat(a[:512], b), false},
		{"tear point is clamped", cut(PowerCut{TearLastWrite: true, TearAt: 1 << 40}), cat(a[:512], b), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New()
			r, h := open(t, f, "/d", "f")
			write(t, h, a, 0)
			require.NoError(t, h.SyncData())
			nw, err := r.OpenFile("new", rw, 0o644)
			require.NoError(t, err)
			write(t, nw, []byte("synced data, unsynced entry"), 0)
			require.NoError(t, nw.SyncData())
			write(t, h, b, 512)

			g := tt.crash(f)
			got, err := g.ReadFile("/d/f")
			require.NoError(t, err)
			require.Equal(t, tt.wantF, got)
			_, err = g.Stat("/d/new")
			if tt.wantNew {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, fs.ErrNotExist)
			}

			// The old FS is frozen, all the way down.
			_, err = h.WriteAt(b, 0)
			require.ErrorIs(t, err, ErrCrashed)
			require.ErrorIs(t, r.Sync(), ErrCrashed)
			_, err = f.Stat("/d/f")
			require.ErrorIs(t, err, ErrCrashed)
			require.ErrorIs(t, f.WriteFile("/d/x", nil), ErrCrashed)
			require.True(t, f.Crashed())
			require.False(t, g.Crashed())

			// The same frozen state crashes the same way again.
			again, err := tt.crash(f).ReadFile("/d/f")
			require.NoError(t, err)
			require.Equal(t, got, again)
		})
	}
}

func cut(opt PowerCut) func(*FS) *FS { return func(f *FS) *FS { return f.PowerCut(opt) } }

func TestProcessCrashKeepsDataUnsynced(t *testing.T) {
	f := New()
	_, h := open(t, f, "/d", "f")
	write(t, h, []byte("unsynced"), 0)
	g := f.ProcessCrash()
	got, err := g.ReadFile("/d/f")
	require.NoError(t, err)
	require.Equal(t, []byte("unsynced"), got)
	got, err = g.PowerCut(PowerCut{}).ReadFile("/d/f")
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestTornWriteExtendsFile(t *testing.T) {
	f := New()
	_, h := open(t, f, "/d", "f")
	write(t, h, fill('a', 4096), 0)
	require.NoError(t, h.SyncData())
	write(t, h, fill('x', 100), 0) // an older unsynced write, lost
	write(t, h, fill('b', 4096), 4096)
	for _, at := range []int{0, 512, 1000, 4096} {
		got, err := f.PowerCut(PowerCut{TearLastWrite: true, TearAt: at}).ReadFile("/d/f")
		require.NoError(t, err)
		require.Equal(t, cat(fill('a', 4096), fill('b', at)), got, "tear at %d", at)
	}
}

func TestKeepUnsyncedSeeded(t *testing.T) {
	f := New()
	r, h := open(t, f, "/d", "f")
	write(t, h, make([]byte, 8192), 0)
	require.NoError(t, h.SyncData())
	write(t, h, fill(0xff, 8192), 0)
	for i := range 8 {
		_, err := r.OpenFile(string(rune('a'+i)), rw, 0o644)
		require.NoError(t, err)
	}

	powerCut := func(seed uint64) ([]byte, int) {
		g := f.PowerCut(PowerCut{Rand: rand.New(rand.NewPCG(seed, 1)), KeepUnsynced: 0.5})
		got, err := g.ReadFile("/d/f")
		require.NoError(t, err)
		entries := 0
		for i := range 8 {
			if _, err := g.Stat("/d/" + string(rune('a'+i))); err == nil {
				entries++
			}
		}
		return got, entries
	}
	got, entries := powerCut(7)
	require.Len(t, got, 8192)
	kept := 0
	for s := 0; s < 8192; s += SectorSize {
		sector := got[s : s+SectorSize]
		switch {
		case bytes.Equal(sector, fill(0xff, SectorSize)):
			kept++
		case bytes.Equal(sector, make([]byte, SectorSize)):
		default:
			t.Fatalf("sector %d is neither old nor new", s/SectorSize)
		}
	}
	require.Greater(t, kept, 0)
	require.Less(t, kept, 16)
	require.Greater(t, entries, 0)
	require.Less(t, entries, 8)

	again, againEntries := powerCut(7)
	require.Equal(t, got, again, "the same seed keeps the same sectors")
	require.Equal(t, entries, againEntries)
}

func TestSyncFailureModes(t *testing.T) {
	old, dropped := fill('o', 1024), fill('n', 1024)
	tests := []struct {
		mode        SyncFailureMode
		wantDurable []byte
	}{
		{SyncKeepDirty, dropped},
		{SyncDropDirty, old},
	}
	for _, tt := range tests {
		t.Run(map[SyncFailureMode]string{SyncKeepDirty: "keep", SyncDropDirty: "drop"}[tt.mode], func(t *testing.T) {
			f := New()
			_, h := open(t, f, "/d", "f")
			write(t, h, old, 0)
			require.NoError(t, h.SyncData())
			f.SetSyncFailureMode(tt.mode)
			f.Inject(Nth(OpSyncData, 0, ErrInjected))
			write(t, h, dropped, 0)
			err := h.SyncData()
			require.ErrorIs(t, err, ErrInjected)
			require.ErrorIs(t, err, syscall.EIO)

			got := make([]byte, 1024)
			_, err = h.ReadAt(got, 0)
			require.NoError(t, err)
			require.Equal(t, dropped, got, "reads still see the page cache")
			require.NoError(t, h.SyncData())

			durable, err := f.PowerCut(PowerCut{}).ReadFile("/d/f")
			require.NoError(t, err)
			require.Equal(t, tt.wantDurable, durable)
		})
	}

	t.Run("a rewrite after a drop persists", func(t *testing.T) {
		f := New()
		_, h := open(t, f, "/d", "f")
		f.SetSyncFailureMode(SyncDropDirty)
		f.Inject(Nth(OpSyncData, 0, ErrInjected))
		write(t, h, fill('a', 2048), 0) // grows the file: the size survives the drop, zero-filled
		require.Error(t, h.SyncData())
		write(t, h, fill('b', 10), 600)
		require.NoError(t, h.SyncData())
		got, err := f.PowerCut(PowerCut{}).ReadFile("/d/f")
		require.NoError(t, err)
		want := make([]byte, 2048)
		copy(want[512:1024], fill('a', 512)) // the rewritten sector goes out whole
		copy(want[600:], fill('b', 10))
		require.Equal(t, want, got)
	})
}

// TestCrashAfter sweeps every crash point of a small script, checking the freeze lands on
// exactly the n-th mutating op and the frozen state is the one after n ops.
func TestCrashAfter(t *testing.T) {
	type step struct {
		mutating bool
		run      func(offsets.Root, offsets.File) error
	}
	steps := []step{
		{true, func(_ offsets.Root, h offsets.File) error { _, err := h.WriteAt([]byte("one"), 0); return err }},
		{false, func(_ offsets.Root, h offsets.File) error { _, err := h.ReadAt(make([]byte, 3), 0); return err }},
		{true, func(_ offsets.Root, h offsets.File) error { return h.SyncData() }},
		{true, func(_ offsets.Root, h offsets.File) error { return h.Truncate(8192) }},
		{false, func(_ offsets.Root, h offsets.File) error { _, err := h.Stat(); return err }},
		{true, func(r offsets.Root, _ offsets.File) error { _, err := r.OpenFile("g", rw, 0o644); return err }},
		{true, func(r offsets.Root, _ offsets.File) error { return r.Sync() }},
		{true, func(_ offsets.Root, h offsets.File) error { _, err := h.WriteAt([]byte("two"), 4096); return err }},
		{true, func(_ offsets.Root, h offsets.File) error { return h.(offsets.FullSyncer).FullSync() }},
	}
	// sizes[n] is the page-cache size of f after n mutating ops.
	sizes := []int{0, 3, 3, 8192, 8192, 8192, 8192, 8192}
	for n := range 7 {
		f := New()
		r, h := open(t, f, "/d", "f")
		base := f.MutatingOps()
		f.CrashAfter(n)
		done := 0
		for i, s := range steps {
			err := s.run(r, h)
			if s.mutating && done == n || done > n {
				require.ErrorIs(t, err, ErrCrashed, "n=%d step %d", n, i)
				done = n + 1
				continue
			}
			require.NoError(t, err, "n=%d step %d", n, i)
			if s.mutating {
				done++
			}
		}
		require.True(t, f.Crashed())
		require.Equal(t, base+n, f.MutatingOps())
		got, err := f.ProcessCrash().ReadFile("/d/f")
		require.NoError(t, err)
		require.Len(t, got, sizes[n], "n=%d", n)
	}
}

func TestDiskBudget(t *testing.T) {
	f := New()
	require.NoError(t, f.MkdirAll("/d"))
	require.NoError(t, f.WriteFile("/d/other", fill('x', 5000)))
	_, h := open(t, f, "/d", "f")
	f.SetFreeBytes(1000)

	write(t, h, fill('a', 1000), 0)
	_, err := h.WriteAt([]byte{1}, 1000)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorIs(t, h.Truncate(1001), syscall.ENOSPC)
	write(t, h, fill('b', 1000), 0) // in place: no new space
	info, err := h.Stat()
	require.NoError(t, err)
	require.EqualValues(t, 1000, info.Size(), "a refused op has no effect")

	require.NoError(t, h.Truncate(500))
	write(t, h, fill('c', 500), 500)
	require.NoError(t, f.RemoveAll("/d/other")) // frees 5000
	write(t, h, fill('d', 5000), 1000)
	_, err = h.WriteAt([]byte{1}, 6000)
	require.ErrorIs(t, err, syscall.ENOSPC)

	f.SetFreeBytes(-1)
	write(t, h, fill('e', 1<<20), 6000)
}

func TestRootPinsDirectoryInode(t *testing.T) {
	f := New()
	require.NoError(t, f.MkdirAll("/t/p0"))
	r, err := f.OpenRoot("/t/p0")
	require.NoError(t, err)
	pinned, err := r.Stat(".")
	require.NoError(t, err)
	require.True(t, pinned.IsDir())
	pdev, pino := pinned.ID()

	// A move installs a copy: the old directory is set aside, a new one takes the path.
	require.NoError(t, f.Rename("/t/p0", "/t/old"))
	require.NoError(t, f.MkdirAll("/t/p0"))
	now, err := f.Stat("/t/p0")
	require.NoError(t, err)
	dev, ino := now.ID()
	require.Equal(t, pdev, dev)
	require.NotEqual(t, pino, ino, "the path names another inode")
	moved, err := f.Stat("/t/old")
	require.NoError(t, err)
	_, mino := moved.ID()
	require.Equal(t, pino, mino, "renaming keeps the inode")

	h, err := r.OpenFile("consumer.ahead", rw, 0o644)
	require.NoError(t, err)
	write(t, h, []byte("stale"), 0)
	got, err := f.ReadFile("/t/old/consumer.ahead")
	require.NoError(t, err)
	require.Equal(t, []byte("stale"), got)
	_, err = f.Stat("/t/p0/consumer.ahead")
	require.ErrorIs(t, err, fs.ErrNotExist)

	// A reclaim removes it: nothing can be created in it any more.
	require.NoError(t, f.RemoveAll("/t/old"))
	_, err = r.OpenFile("consumer.offset", rw, 0o644)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = r.Stat("consumer.ahead")
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = r.Stat(".")
	require.NoError(t, err)
	require.NoError(t, r.Sync())
	write(t, h, []byte("still open"), 0) // an open file outlives its entry
	require.NoError(t, h.SyncData())
	require.NoError(t, r.Close())
	_, err = r.Stat(".")
	require.ErrorIs(t, err, fs.ErrClosed)

	_, err = f.OpenRoot("/t/old")
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = f.OpenRoot("/t/p0/../p0") // cleaned, like os
	require.NoError(t, err)
}

func TestInjectors(t *testing.T) {
	f := New()
	require.NoError(t, f.MkdirAll("/d/p1"))
	require.NoError(t, f.WriteFile("/d/p1/old", []byte("x")))
	var seen []Op
	f.Inject(func(op Op) error { seen = append(seen, op); return nil })
	r, err := f.OpenRoot("/d/p1")
	require.NoError(t, err)
	h, err := r.OpenFile("f", rw, 0o644)
	require.NoError(t, err)
	_, err = r.OpenFile("f", rw, 0o644)
	require.NoError(t, err)
	_, err = r.OpenFile("old", os.O_RDWR|os.O_TRUNC, 0)
	require.NoError(t, err)
	write(t, h, []byte("x"), 0)
	require.NoError(t, h.SyncData())
	require.NoError(t, r.Sync())
	require.NoError(t, h.Close())
	want := []Op{
		{OpOpenRoot, "/d/p1", 0},
		{OpCreate, "/d/p1/f", 1},
		{OpOpenFile, "/d/p1/f", 2},
		{OpTruncate, "/d/p1/old", 3},
		{OpWrite, "/d/p1/f", 4},
		{OpSyncData, "/d/p1/f", 5},
		{OpSyncDir, "/d/p1", 6},
		{OpClose, "/d/p1/f", 7},
	}
	require.Equal(t, want, seen)
	require.Equal(t, 8, f.Ops())
	require.Equal(t, "#1 create /d/p1/f", seen[1].String())

	h, err = r.OpenFile("f", os.O_RDWR, 0)
	require.NoError(t, err)
	f.Inject(OnIndex(f.Ops(), ErrInjected))
	require.ErrorIs(t, h.SyncData(), ErrInjected)
	require.NoError(t, h.SyncData())

	f.Inject(PathContains("p1/f", Times(OnKind(OpStat, syscall.ESTALE), 2)))
	for range 2 {
		_, err = f.Stat("/d/p1/f")
		require.ErrorIs(t, err, syscall.ESTALE)
		require.False(t, errors.Is(err, fs.ErrNotExist))
	}
	_, err = f.Stat("/d/p1/f")
	require.NoError(t, err)
	_, err = f.Stat("/d/p1") // another path: never failed
	require.NoError(t, err)

	f.Inject(Any(Nth(OpWrite, 1, syscall.EACCES), Nth(OpRead, 0, ErrInjected)))
	write(t, h, []byte("y"), 0)
	_, err = h.WriteAt([]byte("z"), 0)
	require.ErrorIs(t, err, syscall.EACCES)
	_, err = h.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, ErrInjected)
	got, err := f.ReadFile("/d/p1/f")
	require.NoError(t, err)
	require.Equal(t, []byte("y"), got, "a failed write has no effect")

	f.Inject(Random(rand.New(rand.NewPCG(1, 2)), 0.5, OnKind(OpStat, ErrInjected)))
	failed := 0
	for range 100 {
		if _, err := h.Stat(); err != nil {
			failed++
		}
	}
	require.InDelta(t, 50, failed, 25)

	f.Inject(OnKind(OpCreate, syscall.ENOSPC))
	_, err = r.OpenFile("h", rw, 0o644)
	require.ErrorIs(t, err, syscall.ENOSPC)
	_, err = r.Stat("h")
	require.ErrorIs(t, err, fs.ErrNotExist, "a failed create creates nothing")
	f.Inject(nil)
	_, err = r.OpenFile("h", rw, 0o644)
	require.NoError(t, err)
}

func TestFileSemantics(t *testing.T) {
	f := New()
	r, h := open(t, f, "/d", "f")
	write(t, h, []byte("hello"), 0)

	b := make([]byte, 10)
	n, err := h.ReadAt(b, 2)
	require.Equal(t, 3, n)
	require.ErrorIs(t, err, io.EOF)
	n, err = h.ReadAt(b, 5)
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, io.EOF)
	_, err = h.ReadAt(b, -1)
	require.Error(t, err)
	_, err = h.WriteAt(b, -1)
	require.Error(t, err)
	_, err = h.WriteAt(b, MaxFileSize)
	require.ErrorIs(t, err, syscall.EFBIG)
	require.ErrorIs(t, h.Truncate(-1), syscall.EINVAL)

	write(t, h, []byte("!"), 8) // a hole reads as zeros
	got, err := f.ReadFile("/d/f")
	require.NoError(t, err)
	require.Equal(t, []byte("hello\x00\x00\x00!"), got)
	info, err := h.Stat()
	require.NoError(t, err)
	require.Equal(t, "f", info.Name())
	require.EqualValues(t, 9, info.Size())
	require.False(t, info.IsDir())
	require.Equal(t, fs.FileMode(0o644), info.Mode())
	require.Nil(t, info.Sys())
	require.True(t, info.ModTime().IsZero())

	_, err = r.OpenFile("f", rw|os.O_EXCL, 0o644)
	require.ErrorIs(t, err, fs.ErrExist)
	_, err = r.OpenFile("missing", os.O_RDONLY, 0)
	require.ErrorIs(t, err, fs.ErrNotExist)
	for _, bad := range []string{"", "..", "../f", "/d/f", "a//b", "a/", "a/../f"} {
		_, err = r.OpenFile(bad, rw, 0o644)
		require.Error(t, err, "%q", bad)
		_, err = r.Stat(bad)
		require.Error(t, err, "%q", bad)
	}
	require.NoError(t, f.MkdirAll("/d/sub"))
	_, err = r.OpenFile("sub", os.O_RDONLY, 0)
	require.ErrorIs(t, err, syscall.EISDIR)
	s, err := r.OpenFile("sub/g", rw, 0o600)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = r.OpenFile("f/g", rw, 0o644)
	require.ErrorIs(t, err, syscall.ENOTDIR)

	ro, err := r.OpenFile("f", os.O_RDONLY, 0)
	require.NoError(t, err)
	_, err = ro.WriteAt([]byte("x"), 0)
	require.ErrorIs(t, err, syscall.EBADF)
	require.Error(t, ro.Truncate(0))
	wo, err := r.OpenFile("f", os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = wo.ReadAt(b, 0)
	require.ErrorIs(t, err, syscall.EBADF)
	ap, err := r.OpenFile("f", os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = ap.WriteAt([]byte("x"), 0)
	require.Error(t, err)

	tr, err := r.OpenFile("f", os.O_RDWR|os.O_TRUNC, 0)
	require.NoError(t, err)
	info, err = tr.Stat()
	require.NoError(t, err)
	require.Zero(t, info.Size())

	require.NoError(t, h.Close())
	require.ErrorIs(t, h.Close(), fs.ErrClosed)
	_, err = h.ReadAt(b, 0)
	require.ErrorIs(t, err, fs.ErrClosed)
	require.ErrorIs(t, h.SyncData(), fs.ErrClosed)

	_, err = f.OpenRoot("/d/f")
	require.ErrorIs(t, err, syscall.ENOTDIR)
	_, err = f.OpenRoot("/nope")
	require.ErrorIs(t, err, fs.ErrNotExist)
	dir, err := f.Stat("/")
	require.NoError(t, err)
	require.True(t, dir.IsDir())
}

func TestSetupMethods(t *testing.T) {
	f := New()
	require.NoError(t, f.MkdirAll("/a/b"))
	require.NoError(t, f.MkdirAll("/a/b"))
	require.NoError(t, f.WriteFile("/a/b/f", []byte("1")))
	require.ErrorIs(t, f.MkdirAll("/a/b/f/g"), syscall.ENOTDIR)
	require.ErrorIs(t, f.WriteFile("/nope/f", nil), fs.ErrNotExist)
	require.ErrorIs(t, f.WriteFile("/a", nil), syscall.EISDIR)
	_, err := f.ReadFile("/a")
	require.ErrorIs(t, err, syscall.EISDIR)

	require.NoError(t, f.MkdirAll("/c"))
	require.ErrorIs(t, f.Rename("/a", "/a/b/x"), syscall.EINVAL)
	require.ErrorIs(t, f.Rename("/a", "/"), syscall.EBUSY)
	require.ErrorIs(t, f.Rename("/missing", "/x"), fs.ErrNotExist)
	require.ErrorIs(t, f.Rename("/a/b/f", "/c"), syscall.EISDIR)
	require.ErrorIs(t, f.Rename("/c", "/a"), syscall.ENOTEMPTY)
	require.NoError(t, f.Rename("/a", "/c")) // replaces an empty directory
	require.NoError(t, f.Rename("/c", "/c"))
	got, err := f.ReadFile("/c/b/f")
	require.NoError(t, err)
	require.Equal(t, []byte("1"), got)

	require.NoError(t, f.RemoveAll("/missing/x"))
	require.ErrorIs(t, f.RemoveAll("/"), syscall.EBUSY)
	require.NoError(t, f.RemoveAll("/c"))
	_, err = f.Stat("/c")
	require.ErrorIs(t, err, fs.ErrNotExist)

	// Setup changes are durable at once.
	require.NoError(t, f.MkdirAll("/x/y"))
	require.NoError(t, f.WriteFile("/x/y/z", []byte("durable")))
	require.NoError(t, f.Rename("/x/y", "/x/w"))
	got, err = f.PowerCut(PowerCut{}).ReadFile("/x/w/z")
	require.NoError(t, err)
	require.Equal(t, []byte("durable"), got)
}

func TestConcurrentUse(t *testing.T) {
	f := New()
	require.NoError(t, f.MkdirAll("/d"))
	r, err := f.OpenRoot("/d")
	require.NoError(t, err)
	done := make(chan struct{})
	for i := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			h, err := r.OpenFile(string(rune('a'+i)), rw, 0o644)
			if err != nil {
				return
			}
			for j := range 100 {
				_, _ = h.WriteAt([]byte{byte(j)}, int64(j))
				_ = h.SyncData()
				_, _ = f.Stat("/d")
			}
		}()
	}
	g := f.ProcessCrash() // races with the writers: they then see ErrCrashed
	for range 4 {
		<-done
	}
	_, err = g.Stat("/d")
	require.NoError(t, err)
}

// A zero FS is the empty file system New returns, crashes included.
func TestZeroValue(t *testing.T) {
	var f FS
	_, err := f.Stat("/")
	require.NoError(t, err)
	r, h := open(t, &f, "/d", "x")
	write(t, h, []byte("synced"), 0)
	require.NoError(t, h.SyncData())
	write(t, h, []byte("cached"), 0)
	require.NoError(t, r.Close())
	got, err := f.ProcessCrash().ReadFile("/d/x")
	require.NoError(t, err)
	require.Equal(t, "cached", string(got))
	got, err = f.PowerCut(PowerCut{}).ReadFile("/d/x")
	require.NoError(t, err)
	require.Equal(t, "synced", string(got))

	var g FS // a zero FS crashed at once is still empty
	_, err = g.PowerCut(PowerCut{}).Stat("/d")
	require.ErrorIs(t, err, fs.ErrNotExist)
}
