package offsets

import "os"

// level brings consumer.offset to v: it pins the partition directory,
// checks it is the one primed, opens (or creates, inside the pinned directory only) the file,
// checks the path still names that directory and writes the 32 bytes in place, all with ioMu
// held (Forget's promise covers this write); then, without ioMu, syncs them and, if the file
// may be new, the directory. The value counts as levelled once the pass's device flush holds.
func (c *Committer) level(t *tickScratch, p *partition, v int64) {
	c.ioMu.Lock()
	if p.forgotten || p.stranded {
		c.ioMu.Unlock()
		return
	}
	root, f, dev, err := c.writeOffset(p, v)
	if err == errStranded {
		c.strand(p)
	}
	entryOK := p.offsetEntryOK
	c.ioMu.Unlock()
	if err == nil {
		err = c.syncOffset(root, f, entryOK)
		c.closeFD(root)
		if err != nil {
			c.closeFD(f)
		}
	}
	if err != nil {
		if err != errStranded && err != errNoDescriptor {
			t.fail(p, "level", err)
		}
		return
	}
	t.levels = append(t.levels, levelWrite{p: p, v: v, dev: dev})
	fs, ok := f.(FullSyncer)
	switch {
	case !ok: // no device flush to wait for: the descriptor goes now
		c.closeFD(f)
	case c.fds.Load() < c.maxOpen-4: // kept for the pass's one device flush
		t.closeAfter = append(t.closeAfter, f)
		t.addDevice(dev, f)
	default: // no room to keep it: flush its device now
		err := fs.FullSync()
		c.closeFD(f)
		if err != nil {
			c.stats.syncFailures.Add(1)
			t.levels = t.levels[:len(t.levels)-1]
			t.fail(p, "level", err)
		}
	}
}

// syncOffset makes a levelling's write durable, with the file's directory entry when it may
// have just been created.
func (c *Committer) syncOffset(root Root, f File, entryOK bool) error {
	if err := f.SyncData(); err != nil {
		c.stats.syncFailures.Add(1)
		return err
	}
	if !entryOK {
		if err := root.Sync(); err != nil {
			c.stats.syncFailures.Add(1)
			return err
		}
	}
	return nil
}

// writeOffset opens consumer.offset and writes v into its page cache. It returns the pinned
// root and the file, both open, for syncOffset. Called with ioMu held.
func (c *Committer) writeOffset(p *partition, v int64) (Root, File, uint64, error) {
	root, err := c.openRoot(p.dir, c.maxOpen)
	if err != nil {
		return nil, nil, 0, c.pathErr(p, err)
	}
	if err := c.checkPinned(p, root); err != nil {
		c.closeFD(root)
		return nil, nil, 0, err
	}
	f, err := c.openIn(root, OffsetFile, os.O_RDWR|os.O_CREATE, 0o644, c.maxOpen)
	if err != nil {
		c.closeFD(root)
		return nil, nil, 0, c.pathErr(p, err)
	}
	dev, err := c.writeOffsetFile(p, root, f, v)
	if err != nil {
		c.closeFD(f)
		c.closeFD(root)
		return nil, nil, 0, err
	}
	return root, f, dev, nil
}

func (c *Committer) writeOffsetFile(p *partition, _ Root, f File, v int64) (uint64, error) {
	c.opened(p.dir)
	if err := c.checkDir(p, p.dirDev, p.dirIno); err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	b := c.offBuf[:]
	encodeOffset(b, p.key, p.incarnation, v)
	if _, err := f.WriteAt(b, 0); err != nil {
		return 0, err
	}
	if fi.Size() != OffsetFileSize {
		if err := f.Truncate(OffsetFileSize); err != nil {
			return 0, err
		}
	}
	dev, _ := fi.ID()
	return dev, nil
}
