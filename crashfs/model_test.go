package crashfs

import (
	"bytes"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/offsets"
)

// mfile is the model of one file: what reads see, what a power cut keeps, and, for
// fsyncgate, the sectors whose dirty data a failed sync dropped.
type mfile struct {
	cache, durable []byte
	entryDurable   bool
	touched        map[int]bool // sectors written or truncated since the last sync or drop
	lost           map[int]bool // sectors a dropped sync lost: no sync persists them until rewritten
	last           *mwrite      // newest write not synced since
}

type mwrite struct {
	seq  int
	off  int
	data []byte
}

func (m *mfile) touch(lo, hi int) {
	for s := lo / SectorSize; s*SectorSize < hi; s++ {
		m.touched[s] = true
		delete(m.lost, s)
	}
}

// sector returns sector s of b, zero-padded to SectorSize.
func sector(b []byte, s int) []byte {
	out := make([]byte, SectorSize)
	if lo := s * SectorSize; lo < len(b) {
		copy(out, b[lo:])
	}
	return out
}

type machine struct {
	fs      *FS
	root    offsets.Root
	handles map[string]offsets.File
	files   map[string]*mfile
	seq     int
}

var fileNames = []string{"a", "b", "c"}

func (m *machine) reopen(t *rapid.T) {
	var err error
	m.root, err = m.fs.OpenRoot("/d")
	require.NoError(t, err)
	m.handles = map[string]offsets.File{}
	for name := range m.files {
		m.handles[name], err = m.root.OpenFile(name, os.O_RDWR, 0)
		require.NoError(t, err)
	}
}

func (m *machine) pick(t *rapid.T) (string, *mfile, offsets.File) {
	if len(m.files) == 0 {
		// Creating one rather than skipping: rapid.MakeFuzz inputs can draw the same action
		// every step, and a run whose every action skips fails as "no valid action".
		m.create(t)
	}
	keys := make([]string, 0, len(m.files))
	for k := range m.files {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	name := rapid.SampledFrom(keys).Draw(t, "file")
	return name, m.files[name], m.handles[name]
}

func (m *machine) create(t *rapid.T) {
	name := rapid.SampledFrom(fileNames).Draw(t, "name")
	if m.files[name] != nil {
		return // already there: nothing to create (a skip could leave a run with no valid action)
	}
	h, err := m.root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	require.NoError(t, err)
	m.handles[name] = h
	m.files[name] = &mfile{touched: map[int]bool{}, lost: map[int]bool{}}
}

func (m *machine) setup(t *rapid.T) {
	name := rapid.SampledFrom(fileNames).Draw(t, "name")
	data := rapid.SliceOfN(rapid.Byte(), 0, 1500).Draw(t, "data")
	require.NoError(t, m.fs.WriteFile("/d/"+name, data))
	if m.files[name] == nil {
		h, err := m.root.OpenFile(name, os.O_RDWR, 0)
		require.NoError(t, err)
		m.handles[name] = h
	}
	m.files[name] = &mfile{cache: clone(data), durable: clone(data), entryDurable: true, touched: map[int]bool{}, lost: map[int]bool{}}
}

func (m *machine) syncDir(t *rapid.T) {
	require.NoError(t, m.root.Sync())
	for _, f := range m.files {
		f.entryDurable = true
	}
}

func (m *machine) write(t *rapid.T) {
	_, f, h := m.pick(t)
	off := rapid.IntRange(0, 2500).Draw(t, "off")
	data := rapid.SliceOfN(rapid.Byte(), 0, 1300).Draw(t, "data")
	n, err := h.WriteAt(data, int64(off))
	require.NoError(t, err)
	require.Equal(t, len(data), n)
	if len(data) == 0 {
		return
	}
	end := off + len(data)
	f.touch(min(off, len(f.cache)), end)
	if end > len(f.cache) {
		f.cache = append(f.cache, make([]byte, end-len(f.cache))...)
	}
	copy(f.cache[off:], data)
	m.seq++
	f.last = &mwrite{seq: m.seq, off: off, data: clone(data)}
}

func (m *machine) truncate(t *rapid.T) {
	_, f, h := m.pick(t)
	size := rapid.IntRange(0, 3000).Draw(t, "size")
	require.NoError(t, h.Truncate(int64(size)))
	if size != len(f.cache) {
		f.touch(min(size, len(f.cache)), max(size, len(f.cache)))
	}
	if size < len(f.cache) {
		f.cache = f.cache[:size:size]
	} else {
		f.cache = append(f.cache, make([]byte, size-len(f.cache))...)
	}
}

func (m *machine) sync(t *rapid.T) {
	_, f, h := m.pick(t)
	require.NoError(t, h.SyncData())
	durable := make([]byte, 0, len(f.cache))
	for s := 0; s*SectorSize < len(f.cache); s++ {
		src := f.cache
		if f.lost[s] {
			src = f.durable
		}
		durable = append(durable, sector(src, s)...)
	}
	f.durable = durable[:len(f.cache)]
	f.touched, f.last = map[int]bool{}, nil // lost sectors stay lost until rewritten
}

func (m *machine) failSync(t *rapid.T) {
	_, f, h := m.pick(t)
	drop := rapid.Bool().Draw(t, "drop")
	m.fs.SetSyncFailureMode(map[bool]SyncFailureMode{false: SyncKeepDirty, true: SyncDropDirty}[drop])
	m.fs.Inject(OnIndex(m.fs.Ops(), ErrInjected))
	require.ErrorIs(t, h.SyncData(), ErrInjected)
	m.fs.Inject(nil)
	if drop {
		for s := range f.touched {
			f.lost[s] = true
		}
		f.touched, f.last = map[int]bool{}, nil
	}
}

func (m *machine) processCrash(t *rapid.T) {
	m.fs = m.fs.ProcessCrash()
	m.reopen(t)
}

// powerCut is a strict power loss, with or without a torn last write.
func (m *machine) powerCut(t *rapid.T) {
	tear := rapid.Bool().Draw(t, "tear")
	at := rapid.IntRange(0, 1300).Draw(t, "tearAt")
	var torn *mfile
	if tear {
		for _, f := range m.files {
			if f.last != nil && (torn == nil || f.last.seq > torn.last.seq) {
				torn = f
			}
		}
	}
	m.fs = m.fs.PowerCut(PowerCut{TearLastWrite: tear, TearAt: at})
	for name, f := range m.files {
		if !f.entryDurable {
			delete(m.files, name)
			continue
		}
		img := clone(f.durable)
		if f == torn && at > 0 {
			w := f.last
			at = min(at, len(w.data))
			if end := w.off + at; end > len(img) {
				img = append(img, make([]byte, end-len(img))...)
			}
			copy(img[w.off:], w.data[:at])
		}
		m.files[name] = &mfile{cache: img, durable: clone(img), entryDurable: true, touched: map[int]bool{}, lost: map[int]bool{}}
	}
	m.reopen(t)
}

// randomCut keeps random unsynced sectors, sizes and entries: each recovered sector is the
// durable or the cached one, and the size is the durable or the cached one.
func (m *machine) randomCut(t *rapid.T) {
	seed := rapid.Uint64().Draw(t, "seed")
	m.fs = m.fs.PowerCut(PowerCut{Rand: rand.New(rand.NewPCG(seed, 0)), KeepUnsynced: 0.5})
	for name, f := range m.files {
		got, err := m.fs.ReadFile("/d/" + name)
		if !f.entryDurable && err != nil {
			require.ErrorIs(t, err, fs.ErrNotExist)
			delete(m.files, name)
			continue
		}
		require.NoError(t, err)
		require.Contains(t, []int{len(f.durable), len(f.cache)}, len(got))
		for s := 0; s*SectorSize < len(got); s++ {
			g := sector(got, s)
			lo := s * SectorSize
			hi := min(lo+SectorSize, len(got))
			durable, cache := sector(f.durable, s)[:hi-lo], sector(f.cache, s)[:hi-lo]
			if !bytes.Equal(g[:hi-lo], durable) && !bytes.Equal(g[:hi-lo], cache) {
				t.Fatalf("%s: sector %d is neither the durable nor the cached one", name, s)
			}
		}
		m.files[name] = &mfile{cache: got, durable: clone(got), entryDurable: true, touched: map[int]bool{}, lost: map[int]bool{}}
	}
	m.reopen(t)
}

func (m *machine) check(t *rapid.T) {
	for _, name := range fileNames {
		f := m.files[name]
		got, err := m.fs.ReadFile("/d/" + name)
		if f == nil {
			require.ErrorIs(t, err, fs.ErrNotExist, name)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, nz(f.cache), nz(got), name)
		buf := make([]byte, len(f.cache)+1)
		n, err := m.handles[name].ReadAt(buf, 0)
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, nz(f.cache), nz(buf[:n]), name)
	}
}

// nz makes nil and empty compare equal.
func nz(b []byte) []byte { return append([]byte{}, b...) }

func TestModel(t *testing.T) { rapid.Check(t, modelRun) }

// FuzzModel runs the model test on inputs from the fuzzing engine (rapid.MakeFuzz): each input
// is a sequence of ops and crashes, checked against the model at every step.
func FuzzModel(f *testing.F) { f.Fuzz(rapid.MakeFuzz(modelRun)) }

// modelRun drives one run of ops and crashes against the model.
func modelRun(t *rapid.T) {
	m := &machine{fs: New(), files: map[string]*mfile{}}
	require.NoError(t, m.fs.MkdirAll("/d"))
	m.reopen(t)
	t.Repeat(map[string]func(*rapid.T){
		"create":       m.create,
		"setup":        m.setup,
		"syncDir":      m.syncDir,
		"write":        m.write,
		"truncate":     m.truncate,
		"sync":         m.sync,
		"failSync":     m.failSync,
		"processCrash": m.processCrash,
		"powerCut":     m.powerCut,
		"randomCut":    m.randomCut,
		"":             m.check,
	})
}

// TestNoPanic throws arbitrary arguments at every method.
func TestNoPanic(t *testing.T) { rapid.Check(t, noPanic) }

// FuzzNoPanic throws the fuzzing engine's arguments at every method (rapid.MakeFuzz).
func FuzzNoPanic(f *testing.F) { f.Fuzz(rapid.MakeFuzz(noPanic)) }

var (
	offsetsGen = rapid.SampledFrom([]int64{-1, 0, 1, 511, 512, 4097, MaxFileSize, MaxFileSize + 1, 1 << 62, math.MaxInt64, math.MinInt64})
	nameGen    = rapid.OneOf(rapid.SampledFrom([]string{"", ".", "..", "/", "a", "a/b", "../a", "/a", "a//b", "a/", "d/f", "\x00", "f"}), rapid.String())
	flagGen    = rapid.SampledFrom([]int{os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_RDWR, os.O_RDWR | os.O_CREATE, os.O_RDWR | os.O_CREATE | os.O_EXCL, os.O_RDWR | os.O_TRUNC, os.O_WRONLY | os.O_APPEND, -1})
)

func noPanic(t *rapid.T) {
	f := New()
	var roots []offsets.Root
	var files []offsets.File
	t.Repeat(map[string]func(*rapid.T){
		"mkdir":  func(t *rapid.T) { _ = f.MkdirAll(nameGen.Draw(t, "p")) },
		"write":  func(t *rapid.T) { _ = f.WriteFile(nameGen.Draw(t, "p"), []byte("x")) },
		"rename": func(t *rapid.T) { _ = f.Rename(nameGen.Draw(t, "old"), nameGen.Draw(t, "new")) },
		"remove": func(t *rapid.T) { _ = f.RemoveAll(nameGen.Draw(t, "p")) },
		"read":   func(t *rapid.T) { _, _ = f.ReadFile(nameGen.Draw(t, "p")) },
		"stat":   func(t *rapid.T) { _, _ = f.Stat(nameGen.Draw(t, "p")) },
		"openRoot": func(t *rapid.T) {
			if r, err := f.OpenRoot(nameGen.Draw(t, "p")); err == nil {
				roots = append(roots, r)
			}
		},
		// With none open yet these do nothing rather than skip: a fuzzing engine's input can
		// pick one over and over, and rapid gives up on a run whose every pick skips.
		"rootOps": func(t *rapid.T) {
			if len(roots) == 0 {
				return
			}
			r := rapid.SampledFrom(roots).Draw(t, "root")
			if h, err := r.OpenFile(nameGen.Draw(t, "name"), flagGen.Draw(t, "flag"), 0o644); err == nil {
				files = append(files, h)
			}
			_, _ = r.Stat(nameGen.Draw(t, "name"))
			_ = r.Sync()
			if rapid.Bool().Draw(t, "close") {
				_ = r.Close()
			}
		},
		"fileOps": func(t *rapid.T) {
			if len(files) == 0 {
				return
			}
			h := rapid.SampledFrom(files).Draw(t, "file")
			_, _ = h.WriteAt(make([]byte, rapid.IntRange(0, 600).Draw(t, "n")), offsetsGen.Draw(t, "off"))
			_, _ = h.ReadAt(make([]byte, 10), offsetsGen.Draw(t, "off"))
			_ = h.Truncate(offsetsGen.Draw(t, "size"))
			_ = h.SyncData()
			_ = h.(offsets.FullSyncer).FullSync()
			_, _ = h.Stat()
			if rapid.Bool().Draw(t, "close") {
				_ = h.Close()
			}
		},
		"crash": func(t *rapid.T) {
			opt := PowerCut{KeepUnsynced: rapid.Float64().Draw(t, "keep"), TearLastWrite: rapid.Bool().Draw(t, "tear"), TearAt: rapid.Int().Draw(t, "at")}
			if rapid.Bool().Draw(t, "rand") {
				opt.Rand = rand.New(rand.NewPCG(1, 1))
			}
			if rapid.Bool().Draw(t, "process") {
				f = f.ProcessCrash()
			} else {
				f = f.PowerCut(opt)
			}
		},
		"faults": func(t *rapid.T) {
			f.SetFreeBytes(rapid.Int64Range(-1, 5000).Draw(t, "free"))
			f.CrashAfter(rapid.IntRange(-1, 5).Draw(t, "after"))
			f.SetSyncFailureMode(SyncFailureMode(rapid.IntRange(0, 1).Draw(t, "mode")))
			f.Inject(Random(rand.New(rand.NewPCG(2, 2)), 0.3, OnKind(OpKind(rapid.IntRange(-1, 11).Draw(t, "kind")), ErrInjected)))
		},
	})
}
