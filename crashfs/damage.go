package crashfs

import (
	"syscall"
)

// FlipBit flips bit bit%8 of byte bit/8 of the file name, when that byte is within the file:
// bit rot, or a misdirected write. Truncate cuts the file name to size bytes, when it is longer:
// a lost tail, or a careless operator. Both are faults of the storage itself rather than of an
// operation: they change the page cache and the durable image alike, so no sync and no crash
// undoes them. They are setup methods, neither counted nor injected, and fail on a directory,
// a missing file or a negative argument.
func (f *FS) FlipBit(name string, bit int64) error {
	return f.damage("flip bit", name, bit, func(n *inode) {
		flip := func(data []byte) {
			if i := bit / 8; i < int64(len(data)) {
				data[i] ^= 1 << (bit % 8)
			}
		}
		flip(n.data)
		flip(n.disk)
	})
}

// Truncate cuts the file name to size bytes when it is longer (see FlipBit).
func (f *FS) Truncate(name string, size int64) error {
	return f.damage("truncate", name, size, func(n *inode) {
		if size < int64(len(n.data)) {
			f.used -= int64(len(n.data)) - size
			n.data = n.data[:size:size]
		}
		if size < int64(len(n.disk)) {
			n.disk = n.disk[:size:size]
		}
	})
}

// damage applies change to the file name under the file system's lock.
func (f *FS) damage(op, name string, arg int64, change func(*inode)) error {
	f.lock()
	defer f.mu.Unlock()
	p := clean(name)
	if f.frozen {
		return pathErr(op, p, ErrCrashed)
	}
	n, err := walk(f.root, split(p))
	switch {
	case err != nil:
	case n.isDir():
		err = syscall.EISDIR
	case arg < 0:
		err = syscall.EINVAL
	}
	if err != nil {
		return pathErr(op, p, err)
	}
	change(n)
	return nil
}
