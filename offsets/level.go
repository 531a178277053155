package offsets

import "os"

// level brings consumer.offset to v (checklist items 57, 58): it pins the partition directory,
// checks it is the one primed, opens (or creates, inside the pinned directory only) the file,
// checks the path still names that directory, writes the 32 bytes in place and syncs them. The
// value counts as levelled once the tick's device flush holds. Called with ioMu held.
func (c *Committer) level(p *partition, v int64) {
	if err := c.writeOffset(p, v); err != nil && err != errStranded {
		c.t.fail(p, "level", err)
	}
}

func (c *Committer) writeOffset(p *partition, v int64) error {
	root, err := c.fs.OpenRoot(p.dir)
	if err != nil {
		return c.pathErr(p, err)
	}
	defer root.Close()
	if err := c.checkPinned(p, root); err != nil {
		return err
	}
	f, err := root.OpenFile(OffsetFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return c.pathErr(p, err)
	}
	dev, err := c.writeOffsetFile(p, root, f, v)
	if err != nil {
		_ = f.Close()
		return err
	}
	c.t.closeAfter = append(c.t.closeAfter, f)
	c.t.addDevice(dev, f)
	c.t.levels = append(c.t.levels, levelWrite{p: p, v: v, dev: dev})
	return nil
}

func (c *Committer) writeOffsetFile(p *partition, root Root, f File, v int64) (uint64, error) {
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
	if err := f.SyncData(); err != nil {
		c.stats.syncFailures.Add(1)
		return 0, err
	}
	if !p.offsetEntryOK {
		// The file may have just been created: its directory entry must be durable too.
		if err := root.Sync(); err != nil {
			c.stats.syncFailures.Add(1)
			return 0, err
		}
	}
	dev, _ := fi.ID()
	return dev, nil
}
