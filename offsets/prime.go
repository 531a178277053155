package offsets

import (
	"errors"
	"io"
	"math"
	"os"
)

// primeResult is a prime waiting for its device flush; the partition takes it on only then.
type primeResult struct {
	p                *partition
	f                File
	dirDev, dirIno   uint64
	fileDev, fileIno uint64
	anchor           int
	hasAnchor        bool
	rec              Record // the anchor's record, when hasAnchor
	levelled         int64
	levelledOK       bool
	offsetPresent    bool
}

// prime pins the partition directory, opens (creating inside the pinned directory only)
// consumer.ahead, checks the path still names the pinned directory, extends a short file to
// 8 KiB, reads both slots, anchors on the newest valid one and writes it out, with the
// directory entry, before the tick writes any window (checklist items 53 to 56, 64, 65).
//
// The anchor's bytes are written again before the sync: they may sit only in the page cache,
// clean but never durable (a process that crashed before its writeout, or a failed sync that
// dropped them), and a sync with nothing dirty would persist nothing. consumer.offset, if it
// holds a valid frontier, is rewritten and synced for the same reason: what the host loaded
// must be durable before the first window overwrites the other slot (invariant I3). The
// directory is synced whether or not this prime created the file: a file created by a process
// that crashed before its directory sync looks like an old one.
//
// Called with ioMu held. A path that is gone or names another directory strands the
// partition (errStranded); any other error leaves it unprimed, retried next tick.
func (c *Committer) prime(p *partition) error {
	root, err := c.fs.OpenRoot(p.dir)
	if err != nil {
		return c.pathErr(p, err)
	}
	defer root.Close()
	di, err := root.Stat(".")
	if err != nil {
		return c.pathErr(p, err)
	}
	dirDev, dirIno := di.ID()
	f, err := root.OpenFile(AheadFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return c.pathErr(p, err)
	}
	pr := primeResult{p: p, f: f, dirDev: dirDev, dirIno: dirIno}
	if err := c.primeFile(p, root, &pr); err != nil {
		_ = f.Close()
		return err
	}
	c.t.primes = append(c.t.primes, pr)
	c.t.addDevice(pr.fileDev, f)
	return nil
}

func (c *Committer) primeFile(p *partition, root Root, pr *primeResult) error {
	c.opened(p.dir)
	if err := c.checkDir(p, pr.dirDev, pr.dirIno); err != nil {
		return err
	}
	fi, err := pr.f.Stat()
	if err != nil {
		return err
	}
	pr.fileDev, pr.fileIno = fi.ID()
	// Read what there is before changing anything: a newer release's record must stay as it is.
	buf := c.file[:]
	clear(buf)
	if err := readFull(pr.f, buf[:min(fi.Size(), AheadFileSize)]); err != nil {
		return err
	}
	if err := c.primeIncarnation(p, root); err != nil {
		return err
	}
	if err := chooseAnchor(buf, p.key, p.incarnation, pr); err != nil {
		return err
	}
	if fi.Size() < AheadFileSize {
		if err := pr.f.Truncate(AheadFileSize); err != nil {
			return err
		}
	}
	if pr.hasAnchor {
		at := int64(pr.anchor) * SlotSize
		if _, err := pr.f.WriteAt(buf[at:at+SlotSize], at); err != nil {
			return err
		}
	}
	if err := c.primeOffset(root, pr); err != nil {
		return err
	}
	if err := pr.f.SyncData(); err != nil {
		c.stats.syncFailures.Add(1)
		return err
	}
	if err := root.Sync(); err != nil {
		c.stats.syncFailures.Add(1)
		return err
	}
	return nil
}

// primeIncarnation settles the incarnation the partition's records name, and makes
// consumer.id durable before any record naming it is written: the one consumer.id holds when
// it is valid, and otherwise the shard's (from Load), written into a new consumer.id. A valid
// consumer.id naming another incarnation than the live shard's means the directory was
// replaced or restored under it: the partition is stranded, so the shard never writes into
// state it did not load. The file is rewritten and synced even when valid, since a process
// that crashed before its sync may have left it in the page cache only.
func (c *Committer) primeIncarnation(p *partition, root Root) error {
	b, err := readPrefix(root, IDFile, IDFileSize+1)
	if err != nil {
		return err
	}
	if b != nil {
		if inc, derr := decodeID(b, p.key); derr == nil {
			if p.incarnation != 0 && inc != p.incarnation {
				c.strand(p)
				return errStranded
			}
			p.incarnation = inc
		}
	}
	if p.incarnation == 0 {
		p.incarnation = newIncarnation() // a Source that keeps none: the committer names it
	}
	f, err := root.OpenFile(IDFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return c.pathErr(p, err)
	}
	defer f.Close()
	var id [IDFileSize]byte
	encodeID(id[:], p.key, p.incarnation)
	if _, err := f.WriteAt(id[:], 0); err != nil {
		return err
	}
	if len(b) != IDFileSize {
		if err := f.Truncate(IDFileSize); err != nil {
			return err
		}
	}
	if err := f.SyncData(); err != nil {
		c.stats.syncFailures.Add(1)
		return err
	}
	return nil
}

// chooseAnchor decodes both slots and picks the newest valid one of this partition and
// incarnation (a record naming none, an older release's, counts). A record from a newer
// release stops the prime: this release must not overwrite what it cannot read.
func chooseAnchor(buf []byte, key uint32, incarnation uint64, pr *primeResult) error {
	var recs [2]Record
	var valid [2]bool
	for i := range recs {
		err := DecodeSlot(buf[i*SlotSize:(i+1)*SlotSize], &recs[i])
		if errors.Is(err, ErrNewerSlot) {
			return err
		}
		valid[i] = err == nil && recs[i].Key == key && sameIncarnation(recs[i].Incarnation, incarnation, nil)
	}
	n := newestSlot(valid, &recs)
	if n < 0 {
		// Nothing to anchor on: slot 1 plays the anchor (holding nothing), so the first
		// window goes to slot 0.
		pr.anchor, pr.rec = 1, Record{Frontier: -1}
		return nil
	}
	pr.anchor, pr.rec, pr.hasAnchor = n, recs[n], true
	return nil
}

// primeOffset reads consumer.offset, if present, and rewrites a valid frontier of the
// partition's incarnation (or of the legacy form) in place so the prime's sync makes it
// durable.
func (c *Committer) primeOffset(root Root, pr *primeResult) error {
	f, err := root.OpenFile(OffsetFile, os.O_RDWR, 0)
	if gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pr.offsetPresent = true
	fi, err := f.Stat()
	if err != nil || (fi.Size() != OffsetFileSize && fi.Size() != LegacyOffsetFileSize) {
		_ = f.Close()
		return err
	}
	b := c.offBuf[:fi.Size()]
	if err := readFull(f, b); err != nil {
		_ = f.Close()
		return err
	}
	o, err := decodeOffset(b, pr.p.key)
	if err != nil || (!o.legacy && o.incarnation != pr.p.incarnation) {
		_ = f.Close()
		return nil
	}
	v := o.frontier
	if _, err := f.WriteAt(b, 0); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.SyncData(); err != nil {
		_ = f.Close()
		c.stats.syncFailures.Add(1)
		return err
	}
	c.t.closeAfter = append(c.t.closeAfter, f)
	dev, _ := fi.ID()
	c.t.addDevice(dev, f)
	pr.levelled, pr.levelledOK = v, true
	return nil
}

// completePrime takes a prime on once its device flush held. Called with ioMu held.
func (c *Committer) completePrime(pr *primeResult) {
	p := pr.p
	if p.forgotten || p.stranded {
		_ = pr.f.Close()
		return
	}
	if err := c.t.deviceErr(pr.fileDev); err != nil {
		_ = pr.f.Close()
		c.t.fail(p, "prime", err)
		c.retryNextTick(p)
		return
	}
	p.dirDev, p.dirIno, p.fileDev, p.fileIno = pr.dirDev, pr.dirIno, pr.fileDev, pr.fileIno
	p.anchor, p.anchorSeq, p.anchorFrontier = pr.anchor, pr.rec.Seq, pr.rec.Frontier
	p.hasAnchor, p.anchorOurs, p.windowFrontier = pr.hasAnchor, false, -1
	p.levelled, p.levelledOK, p.offsetEntryOK = pr.levelled, pr.levelledOK, pr.offsetPresent
	p.windowOK, p.needRewrite, p.pending = false, false, false
	p.primed = true
	c.adopt(p, pr.f)
	c.stats.primes.Add(1)
	c.t.primedAny = true
}

// reopen opens an evicted consumer.ahead again, by path and without creating it, and keeps it
// only if it is the file, in the directory, that the prime opened (checklist item 66).
// Called with ioMu held.
func (c *Committer) reopen(p *partition) (File, error) {
	root, err := c.fs.OpenRoot(p.dir)
	if err != nil {
		return nil, c.pathErr(p, err)
	}
	defer root.Close()
	if err := c.checkPinned(p, root); err != nil {
		return nil, err
	}
	f, err := root.OpenFile(AheadFile, os.O_RDWR, 0)
	if err != nil {
		return nil, c.pathErr(p, err)
	}
	c.opened(p.dir)
	if err := c.checkReopened(p, f); err != nil {
		_ = f.Close()
		return nil, err
	}
	c.stats.reopens.Add(1)
	return f, nil
}

func (c *Committer) checkReopened(p *partition, f File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if dev, ino := fi.ID(); dev != p.fileDev || ino != p.fileIno {
		c.strand(p)
		return errStranded
	}
	return c.checkDir(p, p.dirDev, p.dirIno)
}

// checkPinned strands the partition unless the directory root pinned is the one it primed.
func (c *Committer) checkPinned(p *partition, root Root) error {
	di, err := root.Stat(".")
	if err != nil {
		return c.pathErr(p, err)
	}
	if dev, ino := di.ID(); dev != p.dirDev || ino != p.dirIno {
		c.strand(p)
		return errStranded
	}
	return nil
}

// checkDir strands the partition unless its path still names the directory (dev, ino): the
// check after an open, which keeps a file opened in a directory replaced meanwhile from being
// used as the partition's (checklist item 64).
func (c *Committer) checkDir(p *partition, dev, ino uint64) error {
	fi, err := c.fs.Stat(p.dir)
	if err != nil {
		return c.pathErr(p, err)
	}
	if d, i := fi.ID(); d != dev || i != ino {
		c.strand(p)
		return errStranded
	}
	return nil
}

// pathErr strands the partition when err says its path is gone, and otherwise returns err as
// an ordinary error (EIO, ESTALE, EACCES), retried next tick (checklist item 68).
func (c *Committer) pathErr(p *partition, err error) error {
	if gone(err) {
		c.strand(p)
		return errStranded
	}
	return err
}

// strand stops all writes for the partition until its next Forget (checklist item 67).
// Called with ioMu held.
func (c *Committer) strand(p *partition) {
	if p.stranded {
		return
	}
	p.stranded = true
	c.dropDescriptors(p)
	c.markMu.Lock()
	p.strandedW = true
	c.failWaiters(p, math.MaxUint64, ErrStranded)
	c.markMu.Unlock()
	c.stats.stranded.Add(1)
	c.stats.strandedNow.Add(1)
	c.log.Warn(msgStranded, "topic", p.topic, "partition", p.num)
}

func (c *Committer) opened(dir string) {
	if c.hookOpened != nil {
		c.hookOpened(dir)
	}
}

// readFull reads len(b) bytes at offset 0.
func readFull(f File, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	n, err := f.ReadAt(b, 0)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
