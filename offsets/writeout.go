package offsets

import "time"

// writeOuts writes out, one partition at a time (checklist item 45), each pending partition
// whose turn has come or whose writes waited a whole interval (item 44), levels
// consumer.offset where due (item 58), flushes each device once (item 43) and then flips the
// partitions whose writeout held (item 49).
func (c *Committer) writeOuts(closing bool) {
	t := &c.t
	turn := c.tickNo % c.turns
	late, oldest := 0, time.Duration(0)
	kept := c.pending[:0]
	for _, p := range c.pending {
		if !p.pending || p.stranded || c.isForgotten(p) {
			p.inPend = false
			continue
		}
		kept = append(kept, p)
		if wait := t.now.Sub(p.pendingSince); wait > 2*c.interval {
			late++
			oldest = max(oldest, wait)
		}
		due := closing || p.turn == turn || t.now.Sub(p.pendingSince) >= c.interval
		early := !due && p.nwait.Load() > 0 // a Durable wait: due now, whatever its turn
		if (!due && !early) || !p.windowOK || p.needRewrite {
			continue
		}
		if early {
			c.stats.earlyWriteouts.Add(1)
		}
		c.ioMu.Lock()
		if !p.forgotten && !p.stranded {
			c.writeOut(p, closing)
		}
		c.ioMu.Unlock()
	}
	clear(c.pending[len(kept):])
	c.pending = kept
	c.levelQuiet(turn, closing)
	c.flushDevices()
	c.completeWriteouts()
	c.answerFlipped()
	if late > 0 {
		c.warnLateWriteouts(late, oldest)
	}
}

func (c *Committer) isForgotten(p *partition) bool {
	c.ioMu.Lock()
	defer c.ioMu.Unlock()
	return p.forgotten
}

func (c *Committer) writeOut(p *partition, closing bool) {
	t := &c.t
	f, err := c.descriptor(p)
	if err != nil {
		if err != errStranded {
			t.fail(p, "write out", err)
		}
		return
	}
	if err := f.SyncData(); err != nil {
		c.syncFailed(p, "write out", err)
		return
	}
	t.synced = append(t.synced, p)
	t.addDevice(p.fileDev, f)
	if c.levelDue(p, p.windowFrontier, closing) {
		c.level(p, p.windowFrontier)
	}
}

// syncFailed leaves the anchor alone and has the next tick rewrite the window in full: after a
// failed sync the page cache is not trusted (the kernel may have dropped the dirty pages and
// will report the error only once), so only a whole rewrite followed by a successful sync may
// flip (checklist item 50, invariant I9, gap G4).
func (c *Committer) syncFailed(p *partition, op string, err error) {
	p.windowOK, p.needRewrite = false, true
	c.stats.syncFailures.Add(1)
	c.t.fail(p, op, err)
}

// levelQuiet levels consumer.offset of partitions with nothing to write out, on their turn.
func (c *Committer) levelQuiet(turn uint64, closing bool) {
	kept := c.unlevel[:0]
	for _, p := range c.unlevel {
		if p.stranded || c.isForgotten(p) || !levelNeeded(p, p.anchorFrontier) {
			p.inUnlev = false
			continue
		}
		kept = append(kept, p)
		if p.pending || (!closing && p.turn != turn) || !c.levelDue(p, p.anchorFrontier, closing) {
			continue
		}
		c.ioMu.Lock()
		if !p.forgotten && !p.stranded {
			c.level(p, p.anchorFrontier)
		}
		c.ioMu.Unlock()
	}
	clear(c.unlevel[len(kept):])
	c.unlevel = kept
}

// levelDue says whether consumer.offset should be brought to v now: it differs (or is not
// known to be durable) and the last levelling is 30 s old, or the committer is closing.
func (c *Committer) levelDue(p *partition, v int64, closing bool) bool {
	if !levelNeeded(p, v) {
		return false
	}
	return closing || p.levelledAt.IsZero() || c.t.now.Sub(p.levelledAt) >= c.levelEvery
}

// levelNeeded says whether consumer.offset should be brought to v: it does not durably hold v
// already, and v is not a frontier of -1 headed for a file that does not durably hold a
// frontier yet. Writing one there would create or extend the file, and a power loss can keep
// a file's new size without its bytes: eight zeros, which read as frontier 0, past an offset
// never acked. A missing consumer.offset says as much as -1 (recovery takes consumer.ahead's
// frontier), and an in-place write of a file that holds a frontier stays within one sector.
func levelNeeded(p *partition, v int64) bool {
	if p.levelledOK && p.levelled == v {
		return false
	}
	return v >= 0 || p.levelledOK
}

// completeWriteouts flips every partition whose sync and device flush held, and records the
// levellings that held.
func (c *Committer) completeWriteouts() {
	t := &c.t
	c.ioMu.Lock()
	defer c.ioMu.Unlock()
	for _, p := range t.synced {
		if p.forgotten || p.stranded {
			continue
		}
		if err := t.deviceErr(p.fileDev); err != nil {
			c.syncFailed(p, "device flush", err)
			continue
		}
		c.flip(p)
		if p.nwait.Load() > 0 {
			t.flipped = append(t.flipped, p)
		}
	}
	for _, l := range t.levels {
		p := l.p
		if p.forgotten || p.stranded {
			continue
		}
		if err := t.deviceErr(l.dev); err != nil {
			p.levelledOK = false
			t.fail(p, "level", err)
			continue
		}
		p.levelled, p.levelledOK, p.levelledAt = l.v, true, t.now
		p.offsetEntryOK = true
		c.stats.levels.Add(1)
	}
	for _, p := range t.synced {
		c.trackLevel(p)
	}
}

// flip makes the window, now durable, the anchor (checklist item 49).
func (c *Committer) flip(p *partition) {
	p.anchor = p.window()
	p.anchorSeq++
	p.anchorFrontier = p.windowFrontier
	p.hasAnchor, p.anchorOurs = true, true
	p.pending, p.windowOK = false, false
	c.stats.writeouts.Add(1)
}

// trackLevel puts a partition whose consumer.offset trails its anchor on the levelling list.
func (c *Committer) trackLevel(p *partition) {
	if p.forgotten || p.stranded || !p.anchorOurs || p.inUnlev {
		return
	}
	if levelNeeded(p, p.anchorFrontier) {
		p.inUnlev = true
		c.unlevel = append(c.unlevel, p)
	}
}

// flushDevices issues one device flush per device this phase synced on (macOS F_FULLFSYNC;
// nothing where files offer no FullSyncer). A failure is reported through every partition
// that depended on it.
func (c *Committer) flushDevices() {
	for i := range c.t.devices {
		d := &c.t.devices[i]
		if err := d.f.FullSync(); err != nil {
			d.err = err
			c.stats.syncFailures.Add(1)
		}
	}
}
