package offsets

import (
	"errors"
	"time"
)

// tickScratch is one tick's working memory, reused from tick to tick so a steady tick does
// not allocate.
type tickScratch struct {
	now        time.Time
	errs       []error
	devices    []deviceFlush // devices to flush once at the end of the phase
	primes     []primeResult // primes waiting for their device flush
	synced     []*partition  // writeouts waiting for their device flush
	flipped    []*partition  // flipped partitions with Durable waiters to answer
	levels     []levelWrite  // consumer.offset writes waiting for their device flush
	oneShots   []*partition  // partitions holding a descriptor for this tick only
	closeAfter []File        // files to close once the tick's flushes are done
	wrote      int           // window records written
	primedAny  bool
}

type deviceFlush struct {
	dev uint64
	f   FullSyncer
	err error
}

type levelWrite struct {
	p   *partition
	v   int64
	dev uint64
}

func (t *tickScratch) reset(now time.Time) {
	t.now = now
	t.wrote, t.primedAny = 0, false
}

// release drops the references the tick took, keeping the capacity.
func (t *tickScratch) release() {
	clear(t.errs)
	clear(t.devices)
	clear(t.synced)
	clear(t.flipped)
	clear(t.levels)
	clear(t.oneShots)
	clear(t.closeAfter)
	t.errs, t.devices, t.synced, t.levels = t.errs[:0], t.devices[:0], t.synced[:0], t.levels[:0]
	t.flipped = t.flipped[:0]
	t.oneShots, t.closeAfter = t.oneShots[:0], t.closeAfter[:0]
}

func (t *tickScratch) fail(p *partition, op string, err error) {
	t.errs = append(t.errs, &PartitionError{Topic: p.topic, Partition: p.num, Op: op, Err: err})
}

func (t *tickScratch) err() error {
	if len(t.errs) == 0 {
		return nil
	}
	return errors.Join(t.errs...)
}

// addDevice notes that f's device needs its flush this phase, if f offers one (FullSyncer).
func (t *tickScratch) addDevice(dev uint64, f File) {
	fs, ok := f.(FullSyncer)
	if !ok {
		return
	}
	for i := range t.devices {
		if t.devices[i].dev == dev {
			t.devices[i].f = fs
			return
		}
	}
	t.devices = append(t.devices, deviceFlush{dev: dev, f: fs})
}

// deviceErr is the error of the device's flush this phase, nil when it held or had none.
func (t *tickScratch) deviceErr(dev uint64) error {
	for i := range t.devices {
		if t.devices[i].dev == dev {
			return t.devices[i].err
		}
	}
	return nil
}

func (c *Committer) tick(now time.Time, mode tickMode) (tickReport, error) {
	c.stats.ticks.Add(1)
	c.tickNo++
	c.lastNow = now
	t := &c.t
	t.reset(now)
	c.setInTick(true)

	c.collect()
	c.primeAll()
	c.writeWindows()
	if mode != modePageCache {
		c.writeOuts(mode == modeClose)
	}
	rep, err := tickReport{partitions: t.wrote, primed: t.primedAny}, t.err()
	c.finishTick()
	return rep, err
}

func (c *Committer) setInTick(v bool) {
	c.ioMu.Lock()
	c.inTick = v
	c.ioMu.Unlock()
}

// collect takes the marked partitions, plus those whose window a failure left to rewrite, as
// this tick's work.
func (c *Committer) collect() {
	c.markMu.Lock()
	drained := c.marked
	c.marked = c.spare[:0]
	for _, p := range drained {
		p.marked = false
	}
	c.markMu.Unlock()

	c.work = c.work[:0]
	for _, p := range drained {
		c.addWork(p)
	}
	clear(drained)
	c.spare = drained[:0]
	for _, p := range c.pending {
		if p.needRewrite {
			c.addWork(p)
		}
	}
}

func (c *Committer) addWork(p *partition) {
	if !p.inWork && !p.stranded {
		p.inWork = true
		c.work = append(c.work, p)
	}
}

// primeAll primes the partitions of this tick touched for the first time (checklist items
// 53 to 56), all before any window write, with one device flush for all of them.
func (c *Committer) primeAll() {
	t := &c.t
	for _, p := range c.work {
		if p.primed {
			continue
		}
		snap, ok := c.pull(p)
		if !ok {
			c.shardGone(p, snap)
			c.discardIfIdle(p)
			continue
		}
		if p.dir == "" {
			p.dir = c.dir(p.topic, p.num)
		}
		if p.incarnation == 0 {
			p.incarnation = c.st.Incarnation
		}
		c.ioMu.Lock()
		if !p.forgotten {
			if err := c.prime(p); err != nil && err != errStranded {
				t.fail(p, "prime", err)
				c.retryNextTick(p)
			}
		}
		c.ioMu.Unlock()
	}
	if len(t.primes) == 0 {
		return
	}
	c.flushDevices()
	c.ioMu.Lock()
	defer c.ioMu.Unlock()
	for i := range t.primes {
		c.completePrime(&t.primes[i])
	}
	clear(t.primes)
	t.primes = t.primes[:0]
	t.devices = t.devices[:0]
}

// pull asks the Source for p's live state into c.st and numbers the snapshot (see snaps).
func (c *Committer) pull(p *partition) (snap uint64, ok bool) {
	snap = c.snaps.Add(1)
	st := &c.st
	st.Found, st.Frontier, st.Incarnation = false, -1, 0
	st.Ahead, st.Attempts = st.Ahead[:0], st.Attempts[:0]
	st.Quarantine, st.Requeued = st.Quarantine[:0], st.Requeued[:0]
	return snap, c.src.State(p.topic, p.num, st)
}

// retryNextTick marks p again, so the next tick retries what failed for it.
func (c *Committer) retryNextTick(p *partition) {
	c.markMu.Lock()
	defer c.markMu.Unlock()
	if c.closed || p.marked || c.parts[key{p.topic, p.num}] != p {
		return
	}
	p.marked = true
	c.marked = append(c.marked, p)
}

// discardIfIdle forgets a partition that was never primed and whose shard is gone, so churned
// partitions leave nothing behind.
func (c *Committer) discardIfIdle(p *partition) {
	if p.primed {
		return
	}
	c.markMu.Lock()
	defer c.markMu.Unlock()
	k := key{p.topic, p.num}
	if c.parts[k] == p && !p.marked && len(p.waiters) == 0 {
		delete(c.parts, k)
	}
}

// writeWindows writes a fresh record into the window slot of each primed partition of this
// tick, from the live shard's state (checklist items 39, 40, 48).
func (c *Committer) writeWindows() {
	t := &c.t
	for _, p := range c.work {
		p.inWork = false
		if !p.primed || p.stranded {
			continue
		}
		snap, ok := c.pull(p)
		if !ok {
			c.shardGone(p, snap)
			continue
		}
		c.ioMu.Lock()
		if !p.forgotten && !p.stranded {
			if err := c.writeWindow(p, snap); err != nil && err != errStranded {
				t.fail(p, "write window", err)
			}
		}
		c.ioMu.Unlock()
	}
	c.work = c.work[:0]
}

// writeWindow writes the state c.pull left in c.st, snapshot snap, into p's window.
func (c *Committer) writeWindow(p *partition, snap uint64) error {
	t := &c.t
	st := &c.st
	c.rec = Record{Seq: p.anchorSeq + 1, Key: p.key, Incarnation: p.incarnation, Frontier: st.Frontier, Ahead: st.Ahead,
		Attempts: st.Attempts, Quarantine: st.Quarantine, Requeued: st.Requeued}
	over, err := EncodeSlot(c.slot[:], &c.rec)
	c.rec = Record{}
	if err != nil {
		c.retryNextTick(p) // the shard's state broke the record's rules: ask it again
		return err
	}
	if over != (Overflow{}) {
		c.noteDropped(p, st, over)
	}
	// From here on the window is in play: whatever fails, it is rewritten whole by the next
	// tick before any writeout may flip it (the slot may now hold part of a record).
	c.setPending(p)
	p.windowOK, p.needRewrite = false, true
	f, err := c.descriptor(p)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(c.slot[:], int64(p.window())*SlotSize); err != nil {
		c.stats.writeFailures.Add(1)
		return err
	}
	p.windowOK, p.needRewrite = true, false
	p.windowFrontier, p.windowSnap = st.Frontier, snap
	c.lru.touch(p)
	c.stats.windows.Add(1)
	t.wrote++
	return nil
}

func (c *Committer) setPending(p *partition) {
	if !p.pending {
		p.pending, p.pendingSince = true, c.t.now
	}
	if !p.inPend {
		p.inPend = true
		c.pending = append(c.pending, p)
	}
}

// finishTick closes the descriptors that lived for this tick only, and those Forget handed
// over while the tick ran.
func (c *Committer) finishTick() {
	t := &c.t
	c.ioMu.Lock()
	defer c.ioMu.Unlock()
	for _, p := range t.oneShots {
		if p.oneShot != nil {
			_ = p.oneShot.Close()
			p.oneShot = nil
		}
	}
	for _, f := range t.closeAfter {
		_ = f.Close()
	}
	for _, f := range c.orphans {
		_ = f.Close()
	}
	clear(c.orphans)
	c.orphans = c.orphans[:0]
	c.inTick = false
	t.release()
}
