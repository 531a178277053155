package crashfs

import (
	"syscall"
)

// Damage is a fault of the storage itself rather than of an operation: what bit rot, a
// misdirected write, a lost tail or a careless operator leaves in a file. It changes the page
// cache and the durable image alike, so no sync and no crash undoes it. A setup method: not
// counted or injected.
type Damage struct {
	// FlipBit flips bit FlipBit%8 of byte FlipBit/8, when it is within the file (-1: none).
	FlipBit int64
	// TruncateTo cuts the file to this many bytes, when shorter than it (-1: none).
	TruncateTo int64
}

// Damage applies d to the file name. It fails on a directory or a missing file.
func (f *FS) Damage(name string, d Damage) error {
	f.lock()
	defer f.mu.Unlock()
	p := clean(name)
	if f.frozen {
		return pathErr("damage", p, ErrCrashed)
	}
	n, err := walk(f.root, split(p))
	if err == nil && n.isDir() {
		err = syscall.EISDIR
	}
	if err != nil {
		return pathErr("damage", p, err)
	}
	if d.FlipBit >= 0 {
		if i := d.FlipBit / 8; i < int64(len(n.data)) {
			n.data[i] ^= 1 << (d.FlipBit % 8)
		}
		if i := d.FlipBit / 8; i < int64(len(n.disk)) {
			n.disk[i] ^= 1 << (d.FlipBit % 8)
		}
	}
	if d.TruncateTo >= 0 {
		if d.TruncateTo < int64(len(n.data)) {
			f.used -= int64(len(n.data)) - d.TruncateTo
			n.data = n.data[:d.TruncateTo:d.TruncateTo]
		}
		if d.TruncateTo < int64(len(n.disk)) {
			n.disk = n.disk[:d.TruncateTo:d.TruncateTo]
		}
	}
	return nil
}
