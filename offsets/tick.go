package offsets

import (
	"errors"
	"time"
)

// tickScratch is the working memory of one executor (the tick, the writeout worker, the prime
// pool), reused from pass to pass so a steady tick does not allocate.
type tickScratch struct {
	now        time.Time
	errs       []error
	devices    []deviceFlush // devices to flush once at the end of the phase
	synced     []*partition  // writeouts waiting for their device flush
	flipped    []*partition  // flipped partitions with Durable waiters to answer
	levels     []levelWrite  // consumer.offset writes waiting for their device flush
	closeAfter []File        // files to close once the phase's flushes are done
	wrote      int           // window records written
	late       int           // partitions whose first window waited more than a tick for its prime
	lateOldest time.Duration // the longest one of them waited
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
	t.late, t.lateOldest = 0, 0
}

// release drops the references the pass took, keeping the capacity.
func (t *tickScratch) release() {
	clear(t.errs)
	clear(t.devices)
	clear(t.synced)
	clear(t.flipped)
	clear(t.levels)
	clear(t.closeAfter)
	t.errs, t.devices, t.synced, t.levels = t.errs[:0], t.devices[:0], t.synced[:0], t.levels[:0]
	t.flipped, t.closeAfter = t.flipped[:0], t.closeAfter[:0]
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

// spread calls f(s, i) for i in [0, n): with s = t, on this goroutine, for one worker or one
// item; otherwise on up to workers goroutines, each with a scratch of its own merged into t
// once all are done. For a phase's file work on distinct partitions (writeouts,
// levellings): concurrent syncs of different files cost a journaling file system about one
// commit together (ext4 here: 2,000 fdatasyncs took 2.1 s one after another, 0.11 s four at
// a time), so a batch of many partitions takes a few syncs' time rather than the sum of its
// syncs, which was the power-loss window of a node with thousands of partitions and the
// length of its Close. f must touch only its own partition outside ioMu.
func (t *tickScratch) spread(n, workers int, f func(s *tickScratch, i int)) {
	if workers <= 1 || n <= 1 {
		for i := range n {
			f(t, i)
		}
		return
	}
	for _, sub := range each(n, workers, func(i int, sub *tickScratch) {
		sub.now = t.now
		f(sub, i)
	}) {
		t.merge(&sub)
	}
}

// merge takes what another scratch of the same phase collected (a writeout worker's).
func (t *tickScratch) merge(s *tickScratch) {
	t.errs = append(t.errs, s.errs...)
	for _, d := range s.devices {
		t.addFlush(d.dev, d.f)
	}
	t.synced = append(t.synced, s.synced...)
	t.flipped = append(t.flipped, s.flipped...)
	t.levels = append(t.levels, s.levels...)
	t.closeAfter = append(t.closeAfter, s.closeAfter...)
}

// addDevice notes that f's device needs its flush this phase, if f offers one (FullSyncer).
func (t *tickScratch) addDevice(dev uint64, f File) {
	if fs, ok := f.(FullSyncer); ok {
		t.addFlush(dev, fs)
	}
}

// addFlush notes that device dev needs its flush this phase, through fs.
func (t *tickScratch) addFlush(dev uint64, fs FullSyncer) {
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

// tick is one step. Synchronously (no Run) it primes, writes windows and writes out, all on
// this goroutine, as a simulator needs. Under Run it only writes windows into the page cache,
// and hands primes to the pool and writeouts to the worker, never waiting for either: the
// page cache keeps its cadence whatever the disk does.
func (c *Committer) tick(now time.Time, mode tickMode) (tickReport, error) {
	c.stats.ticks.Add(1)
	c.tickNo++
	c.lastNow = now
	t := &c.t
	t.reset(now)
	inline := !c.async || mode != modeNormal

	c.collect()
	c.primeAll(inline)
	c.writeWindows()
	if t.late > 0 {
		c.warnPrimeLate(t.late, t.lateOldest)
	}
	if mode != modePageCache {
		c.writeOuts(mode == modeClose, inline)
	}
	rep := tickReport{partitions: t.wrote, primed: t.primedAny}
	rep.busy, rep.wakeAt = c.workLeft(now)
	err := errors.Join(t.err(), c.takeAsyncErr())
	t.release()
	return rep, err
}

// workLeft says what Run must wake for once this tick is done. busy: something waits for the
// next tick of the cadence (a partition marked, written and not yet written out, to be
// primed, or a Durable wait, or a writeout batch running). Otherwise wakeAt is when the
// earliest levelling of a quiet partition falls due, zero if none is left: with nothing
// else to do the committer sleeps until then, or until MarkDirty or Durable wakes it.
func (c *Committer) workLeft(now time.Time) (busy bool, wakeAt time.Time) {
	if c.waiting.Load() > 0 || c.woBusy.Load() {
		return true, time.Time{}
	}
	c.markMu.Lock()
	busy = len(c.marked) > 0
	c.markMu.Unlock()
	if busy {
		return true, time.Time{}
	}
	c.primeMu.Lock()
	busy = len(c.primeQA) > 0 || c.priming.Load() > 0
	c.primeMu.Unlock()
	if busy {
		return true, time.Time{}
	}
	c.ioMu.Lock()
	defer c.ioMu.Unlock()
	for _, p := range c.pending {
		if p.pending && !p.forgotten && !p.stranded {
			return true, time.Time{}
		}
	}
	for _, p := range c.unlevel {
		if p.forgotten || p.stranded || !levelNeeded(p, p.anchorFrontier) {
			continue
		}
		at := p.levelledAt.Add(c.levelEvery)
		if p.levelledAt.IsZero() || !at.After(now) {
			return true, time.Time{} // due: on its turn, within an interval
		}
		if wakeAt.IsZero() || at.Before(wakeAt) {
			wakeAt = at
		}
	}
	return false, wakeAt
}

// collect takes the marked partitions, plus those whose window a failure left to rewrite, as
// this tick's work.
func (c *Committer) collect() {
	c.markMu.Lock()
	drained := c.marked
	c.marked = c.spare[:0]
	for _, p := range drained {
		p.marked.Store(false)
	}
	c.markMu.Unlock()

	c.work = c.work[:0]
	c.ioMu.Lock()
	for _, p := range drained {
		c.addWork(p)
	}
	for _, p := range c.pending {
		if p.needRewrite {
			c.addWork(p)
		}
	}
	c.ioMu.Unlock()
	clear(drained)
	c.spare = drained[:0]
}

// addWork puts p on this tick's list. Called with ioMu held.
func (c *Committer) addWork(p *partition) {
	if !p.inWork && !p.stranded && !p.priming {
		p.inWork = true
		c.work = append(c.work, p)
	}
}

// primeAll primes the partitions of this tick touched for the first time (see
// docs/protocol.md, "Priming"). Inline, it primes them before any window write, with one device flush per chunk;
// under Run it queues them for the pool, whose completed chunk wakes Run for a tick at once
// that writes their first windows.
func (c *Committer) primeAll(inline bool) {
	queued := false
	for _, p := range c.work {
		c.ioMu.Lock()
		skip := p.primed || p.priming || p.forgotten || p.stranded
		c.ioMu.Unlock()
		if skip {
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
			p.incarnation = c.st.Incarnation // the shard's, from Load; settled at the prime
			p.host = c.st.HostIncarnation
		}
		if p.queuedAt.IsZero() {
			p.queuedAt = c.t.now
		}
		c.ioMu.Lock()
		forgotten := p.forgotten // by a Forget during the Source call
		p.priming = !forgotten
		c.ioMu.Unlock()
		if forgotten {
			continue
		}
		if inline {
			c.primeQ = append(c.primeQ, p)
		} else {
			c.primeMu.Lock()
			c.primeQA = append(c.primeQA, p)
			c.primeMu.Unlock()
			queued = true
		}
	}
	if inline {
		c.primeInline()
		return
	}
	c.primeMu.Lock()
	waiting := len(c.primeQA) > 0
	c.primeMu.Unlock()
	if queued || waiting { // the pool may have stopped for want of descriptors: wake it each tick
		select {
		case c.primeC <- struct{}{}:
		default:
		}
	}
}

// primeInline primes the queue on this goroutine, one partition at a time, in chunks that fit
// the descriptor cap; what does not fit waits for the next tick.
func (c *Committer) primeInline() {
	t := &c.t
	for len(c.primeQ) > 0 {
		n, deferred := c.primeChunkInline(t, c.primeQ)
		kept := deferred + copy(c.primeQ[deferred:], c.primeQ[n:])
		clear(c.primeQ[kept:])
		c.primeQ = c.primeQ[:kept]
		if deferred == n {
			break // no room under the cap: the rest waits for the next tick
		}
	}
	if len(c.primeQ) > 0 {
		c.ioMu.Lock()
		for _, p := range c.primeQ {
			p.priming = false
			c.retryNextTick(p)
		}
		c.ioMu.Unlock()
		clear(c.primeQ)
		c.primeQ = c.primeQ[:0]
	}
}

// pull asks the Source for p's live state into c.st and numbers the snapshot (see snaps).
func (c *Committer) pull(p *partition) (snap uint64, ok bool) {
	snap = c.snaps.Add(1)
	st := &c.st
	st.Found, st.Frontier, st.Incarnation, st.HostIncarnation = false, -1, 0, 0
	st.Ahead, st.Attempts, st.OmittedAttempts = st.Ahead[:0], st.Attempts[:0], 0
	st.Quarantine, st.Requeued, st.KeyTails = st.Quarantine[:0], st.Requeued[:0], st.KeyTails[:0]
	return snap, c.src.State(p.topic, p.num, st)
}

// retryNextTick marks p again, so the next tick retries what failed for it.
func (c *Committer) retryNextTick(p *partition) {
	c.markMu.Lock()
	defer c.markMu.Unlock()
	if c.closed || c.lookup(key{p.topic, p.num}) != p {
		return
	}
	c.markLocked(p)
}

// markPrimed marks a partition the pool primed (or failed to), so the next tick writes its
// window or queues it again; unlike retryNextTick it does so after Close began too, since
// Close's pass writes what is marked.
func (c *Committer) markPrimed(p *partition) {
	c.markMu.Lock()
	defer c.markMu.Unlock()
	if c.lookup(key{p.topic, p.num}) != p {
		return
	}
	c.markLocked(p)
}

// discardIfIdle forgets a partition that was never primed and whose shard is gone, so churned
// partitions leave nothing behind.
func (c *Committer) discardIfIdle(p *partition) {
	c.ioMu.Lock()
	primed := p.primed || p.priming
	c.ioMu.Unlock()
	if primed {
		return
	}
	c.markMu.Lock()
	defer c.markMu.Unlock()
	k := key{p.topic, p.num}
	if c.lookup(k) == p && !p.marked.Load() && len(p.waiters) == 0 {
		c.parts.Delete(k)
	}
}

// writeWindows writes a fresh record into the window slot of each primed partition of this
// tick, from the live shard's state. It waits for no sync: a partition whose window is being
// synced has its record written into the spare slot (see partition.window).
func (c *Committer) writeWindows() {
	t := &c.t
	for _, p := range c.work {
		p.inWork = false
		c.ioMu.Lock()
		ready := p.primed && !p.stranded && !p.forgotten
		c.ioMu.Unlock()
		if !ready {
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
		if !p.queuedAt.IsZero() {
			if waited := t.now.Sub(p.queuedAt); waited > c.period {
				t.late++
				t.lateOldest = max(t.lateOldest, waited)
				c.stats.slowPrimes.Add(1)
			}
			p.queuedAt = time.Time{}
		}
	}
	c.work = c.work[:0]
}

// writeWindow writes the state c.pull left in c.st, snapshot snap, into p's window. Called
// with ioMu held.
func (c *Committer) writeWindow(p *partition, snap uint64) error {
	t := &c.t
	st := &c.st
	slot := p.window(t.now)
	seq := p.nextSeq(slot)
	c.rec = Record{Seq: seq, Key: p.key, Incarnation: p.incarnation, Frontier: st.Frontier, Ahead: st.Ahead,
		Attempts: st.Attempts, Quarantine: st.Quarantine, Requeued: st.Requeued, KeyTails: st.KeyTails}
	over, err := EncodeSlot(c.slot[:], &c.rec)
	c.rec = Record{}
	if err != nil {
		c.retryNextTick(p) // the shard's state broke the record's rules: ask it again
		return err
	}
	over.Attempts += st.OmittedAttempts
	if over != (Overflow{}) {
		c.noteDropped(p, st, over)
	}
	f, oneShot, err := c.descriptor(p, c.maxOpen)
	if err == errNoDescriptor {
		c.stats.deferred.Add(1)
		c.retryNextTick(p)
		return nil
	}
	if err != nil {
		return err
	}
	// From here on the window is in play: whatever fails, it is rewritten whole by the next
	// tick before any writeout may flip it (the slot may now hold part of a record).
	c.setPending(p)
	p.windowOK, p.needRewrite = false, true
	p.gen[slot]++
	if p.syncStarted {
		c.stats.writtenToSpare.Add(1)
	}
	p.seqs[slot] = max(p.seqs[slot], seq) // what the slot may hold, whether or not the write holds
	_, err = f.WriteAt(c.slot[:], int64(slot)*SlotSize)
	if oneShot {
		c.closeFD(f) // a one-shot descriptor lives for its write only
	}
	if err != nil {
		c.stats.writeFailures.Add(1)
		return err
	}
	p.windowOK, p.needRewrite, p.fresh = true, false, false
	p.windowFrontier, p.windowSnap = st.Frontier, snap
	c.lru.touch(p)
	c.stats.windows.Add(1)
	t.wrote++
	return nil
}

// setPending notes that p has a write waiting for its writeout. Called with ioMu held.
func (c *Committer) setPending(p *partition) {
	if !p.pending {
		p.pending, p.pendingSince = true, c.t.now
	}
	if !p.inPend {
		p.inPend = true
		c.pending = append(c.pending, p)
	}
}

// takeAsyncErr returns, joined, the errors the background work met since the last call.
func (c *Committer) takeAsyncErr() error {
	c.asyncMu.Lock()
	defer c.asyncMu.Unlock()
	if len(c.asyncErr) == 0 {
		return nil
	}
	err := errors.Join(c.asyncErr...)
	clear(c.asyncErr)
	c.asyncErr = c.asyncErr[:0]
	return err
}

func (c *Committer) addAsyncErr(t *tickScratch) {
	if len(t.errs) == 0 {
		return
	}
	c.asyncMu.Lock()
	c.asyncErr = append(c.asyncErr, t.errs...)
	c.asyncMu.Unlock()
}
