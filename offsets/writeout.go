package offsets

import (
	"cmp"
	"os"
	"path/filepath"
	"time"
)

// woJob is a writeout batch handed to the worker.
type woJob struct {
	batch []*partition
	now   time.Time
	turn  uint64
}

// writeOuts picks the pending partitions whose turn has come or whose writes waited a whole
// interval, or that a Durable call waits on, and writes them out: inline,
// or by handing them to the writeout worker when it is idle. While a batch is in flight the
// next one waits; a batch that outlives the tick interval is reported (slow writeouts), since
// durability against power loss then lags by its duration. A tick that comes sooner (a
// Durable wait wakes Run at once) finds the batch busy without its being slow.
func (c *Committer) writeOuts(closing, inline bool) {
	t := &c.t
	if !inline && c.woBusy.Load() {
		if took := t.now.Sub(c.woSince); !c.woLate && took >= c.period {
			c.woLate = true
			c.stats.slowWriteouts.Add(1)
			if ok, _ := c.warnOverrun.allow(t.now); ok {
				c.log.Warn(msgOverrun, "partitions", c.woCount, "flush_took", took, "interval", c.period)
			}
		}
		c.lateCheck()
		return
	}
	turn := c.tickNo % c.turns
	batch := c.selectWriteouts(closing)
	if !inline && len(batch) == 0 && !c.levelWanted(turn) {
		return // nothing for the worker: it stays idle, and Run may sleep
	}
	if inline {
		// A Tick without Run stays on its goroutine, as a simulator needs; Close after Run
		// has no cadence to keep and every partition to write out.
		workers := 1
		if closing && c.ranAsync {
			workers = c.writeoutWorkers()
		}
		c.runWriteouts(t, batch, t.now, turn, closing, workers)
		clear(batch)
		c.wobatch = batch[:0]
		return
	}
	c.woBusy.Store(true)
	c.woSince, c.woLate, c.woCount = t.now, false, len(batch)
	c.bg.Add(1)
	c.woCh <- woJob{batch: batch, now: t.now, turn: turn}
	c.wobatch, c.woSpare = c.woSpare[:0], batch
}

// lateCheck is the late-writeout warning alone, for a tick that hands no batch.
func (c *Committer) lateCheck() {
	t := &c.t
	late, oldest := 0, time.Duration(0)
	c.ioMu.Lock()
	for _, p := range c.pending {
		if p.pending && !p.forgotten && !p.stranded {
			if wait := t.now.Sub(p.pendingSince); wait > 2*c.interval {
				late++
				oldest = max(oldest, wait)
			}
		}
	}
	c.ioMu.Unlock()
	if late > 0 {
		c.warnLateWriteouts(late, oldest)
	}
}

// selectWriteouts compacts the pending list and returns the partitions to write out now,
// marked woBusy (their descriptors stay open until the batch ends).
func (c *Committer) selectWriteouts(closing bool) []*partition {
	t := &c.t
	turn := c.tickNo % c.turns
	late, oldest := 0, time.Duration(0)
	batch := c.wobatch[:0]
	c.ioMu.Lock()
	kept := c.pending[:0]
	for _, p := range c.pending {
		if !p.pending || p.stranded || p.forgotten {
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
		if (!due && !early) || !p.windowOK || p.needRewrite || p.woBusy {
			continue
		}
		if early {
			c.stats.earlyWriteouts.Add(1)
		}
		p.woBusy = true
		batch = append(batch, p)
	}
	c.ioMu.Unlock()
	clear(c.pending[len(kept):])
	c.pending = kept
	if late > 0 {
		c.warnLateWriteouts(late, oldest)
	}
	return batch
}

// writeoutWorker runs Run's writeout batches, one at a time, until stop is closed.
func (c *Committer) writeoutWorker(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case job := <-c.woCh:
			t := &c.wt
			t.reset(job.now)
			c.runWriteouts(t, job.batch, job.now, job.turn, false, c.writeoutWorkers())
			failed := len(t.errs) > 0
			c.addAsyncErr(t)
			t.release()
			clear(job.batch)
			c.woBusy.Store(false)
			if c.waiting.Load() > 0 && !failed {
				// Waits that came during this batch share the next writeout, at once. After a
				// failed one they wait for the next tick: retrying a failing disk at once
				// would spin, and never let a waiter's deadline come.
				c.kick(true)
			}
			c.bg.Done()
		}
	}
}

// runWriteouts writes out batch one partition at a time, levels consumer.offset
// where due, flushes each device once and then flips the
// partitions whose writeout held with no window write since its sync began.
func (c *Committer) runWriteouts(t *tickScratch, batch []*partition, now time.Time, turn uint64, closing bool, workers int) {
	c.payOwed(t, batch, workers)
	t.spread(len(batch), workers, func(s *tickScratch, i int) { c.writeOut(s, batch[i], closing) })
	c.levelQuiet(t, turn, closing, workers)
	c.flushDevices(t)
	c.completeWriteouts(t, batch)
	c.answerFlipped(t)
}

// writeoutWorkers is how many partitions a writeout batch syncs at once: four, where the
// descriptor cap leaves room for each worker's own (a window's one-shot descriptor and a
// levelling's two, beside the pool's and the tick's); one under a tight cap.
func (c *Committer) writeoutWorkers() int {
	if c.maxOpen >= 64 {
		return 4
	}
	return 1
}

// writeOut syncs p's window. The sync runs without ioMu, so the tick keeps writing windows,
// this partition's into its spare slot (partition.window), which leaves the synced slot as
// the sync found it.
func (c *Committer) writeOut(t *tickScratch, p *partition, closing bool) {
	c.ioMu.Lock()
	if p.forgotten || p.stranded || !p.windowOK || p.needRewrite || p.syncsOwed {
		c.ioMu.Unlock()
		return
	}
	f, oneShot, err := c.descriptor(p, c.maxOpen)
	if err != nil {
		c.ioMu.Unlock()
		if err != errStranded && (err != errNoDescriptor || closing) {
			t.fail(p, "write out", err)
		}
		return
	}
	if oneShot {
		p.woFile = f
	}
	fullSyncer, flush := f.(FullSyncer)
	p.syncStarted, p.syncSlot = true, p.win
	p.syncGen, p.syncFront, p.syncSnap = p.gen[p.win], p.windowFrontier, p.windowSnap
	c.ioMu.Unlock()

	err = f.SyncData()
	if err == nil && flush && oneShot {
		// A one-shot descriptor is not kept for the batch's device flush: flush now.
		if err = fullSyncer.FullSync(); err != nil {
			c.stats.syncFailures.Add(1)
		}
		flush = false
	}

	c.ioMu.Lock()
	if oneShot {
		c.closeFD(f)
		p.woFile = nil
	}
	if err != nil {
		if !p.forgotten {
			c.syncFailed(t, p, "write out", err)
		}
		c.ioMu.Unlock()
		return
	}
	clean := p.gen[p.syncSlot] == p.syncGen && !p.forgotten && !p.stranded
	switch {
	case clean && !flush:
		// Nothing more to wait for: flip now, so the partition's Durable waits and its
		// next writeout wait for this sync alone, not for the whole batch.
		c.flip(p)
		p.syncStarted = false
		if p.nwait.Load() > 0 {
			t.flipped = append(t.flipped, p)
		}
		c.trackLevel(p)
	case clean:
		t.synced = append(t.synced, p)
		t.addDevice(p.fileDev, f)
	}
	c.ioMu.Unlock()
	c.answerFlipped(t) // a Durable wait does not wait for the batch's other syncs
	if clean && c.levelDue(t, p, p.syncFront, closing) {
		c.level(t, p, p.syncFront)
	}
}

// payOwed pays the syncs the blank primes among batch owe, before their first flip: each
// one's directory (the entries of consumer.ahead and consumer.id), consumer.id's bytes, and
// the directory's own entry in its parent and grandparent, as the prime does for the others;
// the batch's device flush comes after. Their window's sync follows in writeOut. A partition
// whose syncs did not all hold keeps owing them and is not written out this batch; its
// writes wait for the next one.
func (c *Committer) payOwed(t *tickScratch, batch []*partition, workers int) {
	var owed []*partition
	c.ioMu.Lock()
	for _, p := range batch {
		if p.syncsOwed && !p.forgotten && !p.stranded {
			owed = append(owed, p)
		}
	}
	c.ioMu.Unlock()
	if len(owed) == 0 {
		return
	}
	errs := make([]error, len(owed))
	each(len(owed), workers, func(i int, _ *primeBuf) { errs[i] = c.syncBlank(owed[i]) })
	var dirs []string
	for i, p := range owed {
		if errs[i] == nil {
			dirs = append(dirs, p.dir)
		}
	}
	parentErr := c.syncParents(dirs, c.maxOpen)
	c.ioMu.Lock()
	defer c.ioMu.Unlock()
	for i, p := range owed {
		err := cmp.Or(errs[i], parentErr[filepath.Dir(p.dir)])
		switch {
		case p.forgotten || err == errForgotten || err == errNoDescriptor:
			// Forgotten meanwhile, or no room under the cap: the next batch tries again.
		case err == errStranded:
			c.strand(p)
		case err != nil:
			if !p.stranded {
				t.fail(p, "sync entries", err)
			}
		default:
			p.syncsOwed = false
		}
	}
}

// syncBlank makes a blank prime's directory entries and consumer.id durable. The opens go
// by path, never create, and hold the partition's fileMu, as does consumer.id's write; the
// directory must be the one the prime pinned.
//
// consumer.id is written again before its sync: a sync that failed may have dropped the
// bytes the prime wrote from the page cache without reaching the disk (fsyncgate), and the
// next sync would then succeed having made nothing durable. A blank prime's incarnation
// adopted nothing, so its bytes follow from the incarnation and the host's binding alone.
func (c *Committer) syncBlank(p *partition) error {
	p.fileMu.Lock()
	if p.forgotten {
		p.fileMu.Unlock()
		return errForgotten
	}
	root, err := c.openRoot(p.dir, c.maxOpen)
	if err != nil {
		p.fileMu.Unlock()
		return c.pathErr(p, err)
	}
	defer c.closeFD(root)
	if err := c.checkPinned(p, root); err != nil {
		p.fileMu.Unlock()
		return err
	}
	id, err := c.openIn(root, IDFile, os.O_RDWR, 0, c.maxOpen)
	if err != nil {
		p.fileMu.Unlock()
		return c.pathErr(p, err)
	}
	var b [MaxIDFileSize]byte
	_, err = id.WriteAt(b[:encodeID(b[:], p.key, identity{incarnation: p.incarnation, host: p.host})], 0)
	p.fileMu.Unlock()
	if err != nil {
		c.closeFD(id)
		return err
	}
	err = id.SyncData()
	c.closeFD(id)
	if err == nil {
		err = root.Sync()
	}
	if err != nil {
		c.stats.syncFailures.Add(1)
	}
	return err
}

// syncFailed leaves the anchor alone and has the next tick rewrite the window in full: after a
// failed sync the page cache is not trusted (the kernel may have dropped the dirty pages and
// will report the error only once), so only a whole rewrite followed by a successful sync may
// flip (invariant "slot discipline" in docs/protocol.md). Called with ioMu held.
func (c *Committer) syncFailed(t *tickScratch, p *partition, op string, err error) {
	p.windowOK, p.needRewrite = false, true
	c.stats.syncFailures.Add(1)
	t.fail(p, op, err)
}

// levelQuiet levels consumer.offset of partitions with nothing to write out, on their turn.
func (c *Committer) levelQuiet(t *tickScratch, turn uint64, closing bool, workers int) {
	var due []levelWrite
	kept := c.unlevel[:0]
	for _, p := range c.unlevel {
		c.ioMu.Lock()
		drop := p.stranded || p.forgotten || !levelNeeded(p, p.anchorFrontier)
		busy := p.pending || p.woBusy
		v := p.anchorFrontier
		c.ioMu.Unlock()
		if drop {
			p.inUnlev = false
			continue
		}
		kept = append(kept, p)
		if busy || (!closing && p.turn != turn) || !c.levelDue(t, p, v, closing) {
			continue
		}
		due = append(due, levelWrite{p: p, v: v})
	}
	clear(c.unlevel[len(kept):])
	c.unlevel = kept
	t.spread(len(due), workers, func(s *tickScratch, i int) { c.level(s, due[i].p, due[i].v) })
}

// levelWanted says whether levelQuiet would level a partition on this turn. The writeout
// worker must be idle (it owns the levelling list).
func (c *Committer) levelWanted(turn uint64) bool {
	for _, p := range c.unlevel {
		if p.turn != turn {
			continue
		}
		c.ioMu.Lock()
		skip := p.stranded || p.forgotten || p.pending || p.woBusy
		v := p.anchorFrontier
		c.ioMu.Unlock()
		if !skip && c.levelDue(&c.t, p, v, false) {
			return true
		}
	}
	return false
}

// levelDue says whether consumer.offset should be brought to v now: it differs (or is not
// known to be durable) and the last levelling is 30 s old, or the committer is closing.
func (c *Committer) levelDue(t *tickScratch, p *partition, v int64, closing bool) bool {
	if !levelNeeded(p, v) {
		return false
	}
	return closing || p.levelledAt.IsZero() || t.now.Sub(p.levelledAt) >= c.levelEvery
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

// completeWriteouts flips every partition whose sync and device flush held with no window
// write since the sync began, records the levellings that held, and ends the batch: its
// one-shot descriptors and those Forget dropped meanwhile are closed.
func (c *Committer) completeWriteouts(t *tickScratch, batch []*partition) {
	c.ioMu.Lock()
	defer c.ioMu.Unlock()
	for _, p := range t.synced {
		if p.forgotten || p.stranded {
			continue
		}
		if err := t.deviceErr(p.fileDev); err != nil {
			c.syncFailed(t, p, "device flush", err)
			continue
		}
		if p.gen[p.syncSlot] != p.syncGen {
			// Written again after the sync began, which ticks never do (a flip needs the
			// slot untouched until now: an unsynced write over the new anchor could be torn
			// by a power loss).
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
	for _, f := range t.closeAfter {
		c.closeFD(f)
	}
	clear(t.closeAfter)
	t.closeAfter = t.closeAfter[:0]
	c.noneEvictable = false // the batch's partitions are out of it
	for _, p := range batch {
		p.woBusy, p.syncStarted = false, false
		if p.woFile != nil {
			c.closeFD(p.woFile)
			p.woFile = nil
		}
	}
	for _, f := range c.orphans {
		c.closeFD(f)
	}
	clear(c.orphans)
	c.orphans = c.orphans[:0]
}

// flip makes the synced slot, now durable, the anchor. The old anchor becomes the window,
// unless ticks went on in the spare slot during the sync: that one stays the window, its
// writes waiting for the next writeout. Called with ioMu held.
func (c *Committer) flip(p *partition) {
	c.noneEvictable = false
	old := p.anchor
	p.anchor = p.syncSlot
	p.anchorFrontier = p.syncFront
	p.hasAnchor, p.anchorOurs = true, true
	if p.win == p.syncSlot {
		p.win = old
		p.pending, p.windowOK = false, false
	} else {
		p.pendingSince = p.spareSince
	}
	c.stats.writeouts.Add(1)
}

// trackLevel puts a partition whose consumer.offset trails its anchor on the levelling list.
// Called with ioMu held.
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
func (c *Committer) flushDevices(t *tickScratch) {
	for i := range t.devices {
		d := &t.devices[i]
		if err := d.f.FullSync(); err != nil {
			d.err = err
			c.stats.syncFailures.Add(1)
		}
	}
}
