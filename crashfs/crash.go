package crashfs

import (
	"math/rand/v2"
	"slices"
)

// PowerCut says what survives a power cut besides the synced data and directory entries.
// The zero value is a strict power loss.
type PowerCut struct {
	// Rand draws which unsynced sectors, sizes and entries survive. With nil, KeepUnsynced
	// below 1 keeps nothing.
	Rand *rand.Rand
	// KeepUnsynced is the probability that each unsynced 512-byte sector, each unsynced size
	// change and each unsynced directory entry survives anyway; 1 keeps them all.
	KeepUnsynced float64
	// TearLastWrite tears the newest WriteAt not synced since, on whatever file: the first
	// TearAt bytes of it reach the disk, and its other bytes hold what the durable image held.
	// This applies after the KeepUnsynced draws, and only if the file itself survives.
	TearLastWrite bool
	// TearAt is where that write is cut, clamped to 0..len: a sector multiple or any byte.
	TearAt int
}

// ProcessCrash models a crash of the process: the page cache is the kernel's, so everything
// written survives, synced or not, and stays unsynced in the returned FS. Files that were
// removed while open are gone. f freezes: every later op on it, its roots and its files
// returns ErrCrashed. ProcessCrash and PowerCut may be called again on the frozen f, each
// time from the same state.
//
// The returned FS keeps the op counters, the disk budget and the sync failure mode; it has no
// injector and no CrashAfter limit.
func (f *FS) ProcessCrash() *FS {
	f.lock()
	defer f.mu.Unlock()
	f.frozen = true
	g := f.successor()
	memo := map[*inode]*inode{}
	g.root = g.adopt(f.root, memo)
	return g
}

func (f *FS) successor() *FS {
	return &FS{
		nextIno:  f.nextIno,
		ops:      f.ops,
		mutating: f.mutating,
		syncMode: f.syncMode,
		capacity: f.capacity,
		budgeted: f.budgeted,
		seq:      f.seq,
		pending:  map[*inode]struct{}{},
	}
}

// adopt deep-copies the live tree below n into f, unsynced state included.
func (f *FS) adopt(n *inode, memo map[*inode]*inode) *inode {
	if c := memo[n]; c != nil {
		return c
	}
	c := &inode{ino: n.ino, mode: n.mode}
	memo[n] = c
	if n.isDir() {
		c.entries = make(map[string]*inode, len(n.entries))
		c.durable = make(map[string]*inode, len(n.durable))
		for name, e := range n.entries {
			c.entries[name] = f.adopt(e, memo)
		}
		for name, e := range n.durable {
			c.durable[name] = f.adopt(e, memo)
		}
		return c
	}
	c.data, c.disk, c.sizeDirty, c.last = clone(n.data), clone(n.disk), n.sizeDirty, n.last
	if n.dirty != nil {
		c.dirty = make(map[int64]struct{}, len(n.dirty))
		for s := range n.dirty {
			c.dirty[s] = struct{}{}
		}
	}
	if c.last != nil {
		f.pending[c] = struct{}{}
	}
	f.used += int64(len(c.data))
	return c
}

// PowerCut models a power loss (or a kernel crash): the returned FS holds the durable image
// of each file and the durable entries of each directory, plus whatever opt lets through.
// Everything in it is synced. f freezes as with ProcessCrash, and the returned FS carries the
// same state over.
func (f *FS) PowerCut(opt PowerCut) *FS {
	f.lock()
	defer f.mu.Unlock()
	f.frozen = true
	g := f.successor()
	c := &cutter{opt: opt, g: g}
	if opt.TearLastWrite {
		for n := range f.pending {
			if c.torn == nil || n.last.seq > c.torn.last.seq {
				c.torn = n
			}
		}
	}
	g.root = c.dir(f.root)
	return g
}

type cutter struct {
	opt  PowerCut
	g    *FS
	torn *inode
}

func (c *cutter) keep() bool {
	p := c.opt.KeepUnsynced
	return p >= 1 || (c.opt.Rand != nil && p > 0 && c.opt.Rand.Float64() < p)
}

// dir recovers a directory, walking names in order so a seeded Rand replays.
func (c *cutter) dir(n *inode) *inode {
	d := &inode{ino: n.ino, mode: n.mode, entries: map[string]*inode{}, durable: map[string]*inode{}}
	names := make([]string, 0, len(n.entries))
	for name := range n.entries {
		names = append(names, name)
	}
	for name := range n.durable {
		if _, ok := n.entries[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		live, durable := n.entries[name], n.durable[name]
		e := durable
		if live != durable && c.keep() {
			e = live
		}
		if e == nil {
			continue
		}
		var r *inode
		if e.isDir() {
			r = c.dir(e)
		} else {
			r = c.file(e)
		}
		d.entries[name], d.durable[name] = r, r
	}
	return d
}

// file recovers a file: its durable image, plus the kept unsynced sectors and size, plus the
// torn write.
func (c *cutter) file(n *inode) *inode {
	size := int64(len(n.disk))
	if n.sizeDirty && c.keep() {
		size = int64(len(n.data))
	}
	img := make([]byte, size)
	copy(img, n.disk)
	sectors := make([]int64, 0, len(n.dirty))
	for s := range n.dirty {
		sectors = append(sectors, s)
	}
	slices.Sort(sectors)
	for _, s := range sectors {
		if !c.keep() {
			continue
		}
		lo, hi := s*SectorSize, min((s+1)*SectorSize, size)
		if lo >= hi {
			continue
		}
		clear(img[lo:hi])
		if lo < int64(len(n.data)) {
			copy(img[lo:hi], n.data[lo:])
		}
	}
	if n == c.torn {
		w := n.last
		at := int64(min(max(c.opt.TearAt, 0), len(w.data)))
		end := w.off + at
		if at > 0 && end > int64(len(img)) {
			img = append(img, make([]byte, end-int64(len(img)))...)
		}
		if at > 0 {
			copy(img[w.off:end], w.data[:at])
		}
		if rest := min(w.off+int64(len(w.data)), int64(len(img))); end < rest {
			clear(img[end:rest])
			if end < int64(len(n.disk)) {
				copy(img[end:rest], n.disk[end:])
			}
		}
	}
	c.g.used += int64(len(img))
	return &inode{ino: n.ino, mode: n.mode, data: img, disk: clone(img)}
}
