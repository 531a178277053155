package offsets

import (
	"cmp"
	"errors"
	"io"
	"math"
	"os"
	"sync"
)

// primeResult is one prime of a chunk: what it read and opened, waiting for the chunk's
// directory syncs and device flush; the partition takes it on only then.
type primeResult struct {
	p                *partition
	err              error
	f                File
	root             Root // kept open for the chunk's directory sync
	offFile          File // consumer.offset, kept open for the chunk's device flush
	idFile           File // consumer.id, open until prime's sync
	offDev           uint64
	dirDev, dirIno   uint64
	fileDev, fileIno uint64
	anchor, window   int                // slot indexes
	seqs             [AheadSlots]uint64 // sequence number of each slot's record that counts, 0 for none
	hasAnchor        bool
	rec              Record // the anchor's record, when hasAnchor
	levelled         int64
	levelledOK       bool
	offsetPresent    bool
	idBlank          bool // consumer.id was missing or empty
	// blank says the directory held no state of the partition: consumer.ahead empty or
	// missing, no consumer.offset, consumer.id empty or missing. With no record to protect,
	// the prime owes its syncs to the partition's first writeout (see syncsOwed).
	blank bool
}

// primeBuf is one prime worker's memory.
type primeBuf struct {
	file   [AheadFileSize]byte
	offBuf [OffsetFileSize]byte
	idBuf  [MaxIDFileSize]byte
}

// prime pins the partition directory, opens (creating inside the pinned directory only)
// consumer.ahead, checks the path still names the pinned directory, extends a short file to
// 12 KiB, reads its slots, anchors on the newest valid one and writes it out, before the tick
// writes any window. The directory entry is synced by the
// chunk, once per directory (see primeChunk).
//
// The anchor's bytes are written again before the sync: they may sit only in the page cache,
// clean but never durable (a process that crashed before its writeout, or a failed sync that
// dropped them), and a sync with nothing dirty would persist nothing. consumer.offset, if it
// holds a valid frontier, is rewritten and synced for the same reason: what the host loaded
// must be durable before the first window overwrites another slot (invariant "monotone across restarts" in
// docs/protocol.md). The
// directory is synced whether or not this prime created the file: a file created by a process
// that crashed before its directory sync looks like an old one.
//
// It runs on the tick or in the pool. Its opens, reads and page-cache writes hold the
// partition's fileMu, so that nothing is created or written for a partition once Forget
// returned; its syncs do not.
// A path that is gone or names another directory returns errStranded for completePrime to
// strand the partition; any other error leaves it unprimed, retried next tick.
func (c *Committer) prime(p *partition, pr *primeResult, buf *primeBuf, limit int64) error {
	p.fileMu.Lock()
	err := c.primeOpen(p, pr, buf, limit)
	p.fileMu.Unlock()
	if err != nil {
		return err
	}
	if pr.blank {
		// Nothing durable to protect: the partition takes windows at once, and its first
		// writeout makes consumer.id and the directory entries durable before its flip.
		c.closeFD(pr.idFile)
		pr.idFile = nil
		return nil
	}
	// consumer.id is made durable before any record naming its incarnation is written,
	// beside the other syncs rather than after them: a slow disk then costs a prime one
	// sync's time, not two.
	var idErr error
	var idSync sync.WaitGroup
	if pr.idFile != nil {
		idSync.Go(func() { idErr = pr.idFile.SyncData() })
	}
	if pr.offFile != nil {
		err = pr.offFile.SyncData()
	}
	if err == nil {
		err = pr.f.SyncData()
	}
	idSync.Wait()
	if pr.idFile != nil {
		c.closeFD(pr.idFile)
		pr.idFile = nil
		err = cmp.Or(err, idErr)
	}
	if err != nil {
		c.stats.syncFailures.Add(1)
		c.closePrime(pr)
	}
	return err
}

// closePrime closes what a failed prime opened.
func (c *Committer) closePrime(pr *primeResult) {
	if pr.f != nil {
		c.closeFD(pr.f)
	}
	if pr.root != nil {
		c.closeFD(pr.root)
	}
	if pr.offFile != nil {
		c.closeFD(pr.offFile)
	}
	if pr.idFile != nil {
		c.closeFD(pr.idFile)
	}
	pr.f, pr.root, pr.offFile, pr.idFile = nil, nil, nil, nil
}

// primeOpen is prime's part under the partition's fileMu: everything but the syncs.
func (c *Committer) primeOpen(p *partition, pr *primeResult, buf *primeBuf, limit int64) error {
	if p.forgotten {
		return errForgotten
	}
	root, err := c.openRoot(p.dir, limit)
	if err != nil {
		return c.pathErr(p, err)
	}
	di, err := root.Stat(".")
	if err != nil {
		c.closeFD(root)
		return c.pathErr(p, err)
	}
	pr.dirDev, pr.dirIno = di.ID()
	f, err := c.openIn(root, AheadFile, os.O_RDWR|os.O_CREATE, 0o644, limit)
	if err != nil {
		c.closeFD(root)
		return c.pathErr(p, err)
	}
	pr.f, pr.root = f, root
	if err := c.primeFile(p, root, pr, buf, limit); err != nil {
		c.closePrime(pr)
		return err
	}
	return nil
}

func (c *Committer) primeFile(p *partition, root Root, pr *primeResult, pb *primeBuf, limit int64) error {
	c.opened(p.dir)
	if err := c.checkDir(p, pr.dirDev, pr.dirIno); err != nil {
		return err
	}
	fi, err := pr.f.Stat()
	if err != nil {
		return err
	}
	pr.fileDev, pr.fileIno = fi.ID()
	// Read what there is before changing anything: a newer release's record must stay as it
	// is, and so must the consumer.id beside it.
	buf := pb.file[:]
	clear(buf)
	if err := readFull(pr.f, buf[:min(fi.Size(), AheadFileSize)]); err != nil {
		return err
	}
	var slots [AheadSlots]decodedSlot
	for i := range slots {
		slots[i].decode(buf[i*SlotSize : (i+1)*SlotSize])
		if errors.Is(slots[i].err, ErrNewerSlot) {
			return slots[i].err
		}
	}
	off, err := c.primeReadOffset(root, pr, pb, limit)
	if err != nil {
		return err
	}
	pr.offFile = off.f // closed by closePrime if the prime fails before primeOffset decides
	id, err := c.primeIncarnation(p, root, pr, pb, limit, &slots, off)
	if err != nil {
		return err
	}
	chooseAnchor(&slots, p.key, id, pr)
	pr.blank = fi.Size() == 0 && !pr.offsetPresent && pr.idBlank
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
	return c.primeOffset(pr, pb, id, off)
}

// primeIncarnation settles the identity the partition's records go by: the one consumer.id
// holds when it is valid, and otherwise the shard's incarnation (from Load). It writes
// consumer.id and leaves it in pr.idFile for prime to sync before any record naming the
// incarnation is written. A valid file is written again too: it may sit only in the page
// cache, clean but never durable (a process that crashed before its sync, or a failed sync),
// as the anchor may. A valid consumer.id naming another incarnation than the live shard's
// means the directory was replaced or restored under it: errStranded, so the shard never
// writes into state it did not load. Called with the partition's fileMu held.
//
// Without a valid consumer.id, the state the shard loaded came from the legacy records of a
// release before consumer.id, if any (the upgrade; see adoptLegacy): the consumer.id written
// then names the record and frontier adopted, so that they still count under it after a
// crash before this incarnation's first record is durable, and no other legacy record ever
// does.
//
// The host's incarnation of the topic the shard was loaded under (p.host, 0 when the host
// names none) binds consumer.id: an unbound one is bound to it here, its records kept (the
// upgrade LoadBound trusted), and one bound to another is an earlier life's, which LoadBound
// ignored: it is replaced, adopting nothing, rather than stranding the partition, since the
// shard's state is this life's and that file never will be.
func (c *Committer) primeIncarnation(p *partition, root Root, pr *primeResult, pb *primeBuf, limit int64,
	slots *[AheadSlots]decodedSlot, off primeOffsetFile) (identity, error) {
	f, err := c.openIn(root, IDFile, os.O_RDWR|os.O_CREATE, 0o644, limit)
	if err != nil {
		return identity{}, c.pathErr(p, err)
	}
	pr.idFile = f // closed by prime, or by closePrime on failure
	fi, err := f.Stat()
	if err != nil {
		return identity{}, err
	}
	pr.idBlank = fi.Size() == 0
	b := pb.idBuf[:]
	var id identity
	otherLife := false
	if size := fi.Size(); size >= IDFileSize && size <= MaxIDFileSize {
		if err := readFull(f, b[:size]); err != nil {
			return identity{}, err
		}
		if got, derr := decodeID(b[:size], p.key); derr == nil {
			otherLife = p.host != 0 && got.host != 0 && got.host != p.host
			switch {
			case otherLife && got.incarnation != p.incarnation:
				// Replaced below, as a damaged file is.
			case otherLife || (p.incarnation != 0 && got.incarnation != p.incarnation):
				return identity{}, errStranded
			default:
				id = got
				p.incarnation = got.incarnation
				if id.host == 0 {
					id.host = p.host
				}
			}
		}
	}
	if id.incarnation == 0 {
		if p.incarnation == 0 {
			p.incarnation = newIncarnation() // a Source that keeps none: the committer names it
		}
		id = identity{incarnation: p.incarnation, host: p.host}
		if !otherLife {
			// An earlier life's legacy records are not what the shard loaded.
			id.adopted = adoptLegacy(slots, p.key, off)
		}
	}
	n := encodeID(b, p.key, id)
	if _, err := f.WriteAt(b[:n], 0); err != nil {
		return identity{}, err
	}
	if fi.Size() != int64(n) {
		if err := f.Truncate(int64(n)); err != nil {
			return identity{}, err
		}
	}
	return id, nil
}

// adoptLegacy is what an incarnation named at the upgrade takes over: the legacy state that
// recovery reads when there is no consumer.id to go by, which is what the shard loaded (the
// newest legacy slot of the partition, or else a legacy consumer.offset); the zero adoption
// when there is none.
func adoptLegacy(slots *[AheadSlots]decodedSlot, key uint32, off primeOffsetFile) adoption {
	if n, _, _ := chooseSlot(slots, key, identity{}); n >= 0 {
		s := &slots[n]
		return adoption{legacy: true, frontier: s.rec.Frontier, slot: true, seq: s.rec.Seq, slotCRC: s.crc}
	}
	if off.f != nil && off.o.legacy {
		return adoption{legacy: true, frontier: off.o.frontier}
	}
	return adoption{}
}

// chooseAnchor picks the newest valid slot of the partition that counts under id, the way
// recovery does (see chooseSlot), and the window: the other one of slots 0 and 1 (as in a
// file of two slots), or slot 0 when the anchor is slot 2. It notes the sequence numbers of
// the slots that count, which the records written next must exceed (see writeWindow).
func chooseAnchor(slots *[AheadSlots]decodedSlot, key uint32, id identity, pr *primeResult) {
	n, status := classifySlots(slots, key, id)
	for i := range status {
		if status[i] == SlotTaken || status[i] == SlotOlder {
			pr.seqs[i] = slots[i].rec.Seq
		}
	}
	if n < 0 {
		// Nothing to anchor on: slot 1 plays the anchor (holding nothing), so the first
		// window goes to slot 0.
		pr.anchor, pr.window, pr.rec = 1, 0, Record{Frontier: -1}
		return
	}
	pr.anchor, pr.rec, pr.hasAnchor = n, Record{Seq: slots[n].rec.Seq, Frontier: slots[n].rec.Frontier}, true
	pr.window = 0
	if n == 0 {
		pr.window = 1
	}
}

// primeOffsetFile is consumer.offset as the prime read it: open, with its bytes and what
// they decode to, when it is a valid file of the partition (of either form); f is nil
// otherwise.
type primeOffsetFile struct {
	f    File
	dev  uint64
	size int64
	o    offsetFile
}

// primeReadOffset reads consumer.offset, if present, and keeps it open when it decodes.
func (c *Committer) primeReadOffset(root Root, pr *primeResult, pb *primeBuf, limit int64) (primeOffsetFile, error) {
	f, err := c.openIn(root, OffsetFile, os.O_RDWR, 0, limit)
	if gone(err) {
		return primeOffsetFile{}, nil
	}
	if err != nil {
		return primeOffsetFile{}, err
	}
	pr.offsetPresent = true
	fi, err := f.Stat()
	if err != nil || (fi.Size() != OffsetFileSize && fi.Size() != LegacyOffsetFileSize) {
		c.closeFD(f)
		return primeOffsetFile{}, err
	}
	b := pb.offBuf[:fi.Size()]
	if err := readFull(f, b); err != nil {
		c.closeFD(f)
		return primeOffsetFile{}, err
	}
	o, err := decodeOffset(b, pr.p.key)
	if err != nil {
		c.closeFD(f)
		return primeOffsetFile{}, nil
	}
	dev, _ := fi.ID()
	return primeOffsetFile{f: f, dev: dev, size: fi.Size(), o: o}, nil
}

// primeOffset rewrites consumer.offset in place, when it holds a frontier that counts under
// id (of the partition's incarnation, or a legacy one the incarnation adopted), so the
// prime's sync makes it durable; it closes it otherwise.
func (c *Committer) primeOffset(pr *primeResult, pb *primeBuf, id identity, off primeOffsetFile) error {
	if off.f == nil {
		return nil
	}
	o := off.o
	if (o.legacy && !id.countsLegacyOffset(o.frontier)) || (!o.legacy && o.incarnation != id.incarnation) {
		c.closeFD(off.f)
		pr.offFile = nil
		return nil
	}
	if _, err := off.f.WriteAt(pb.offBuf[:off.size], 0); err != nil {
		return err // closed by closePrime
	}
	pr.offDev = off.dev // pr.offFile is synced by prime, with consumer.ahead
	pr.levelled, pr.levelledOK = o.frontier, true
	return nil
}

// completePrime takes a prime on once the chunk's directory syncs and device flush held, or
// reports why not. pool says the prime ran in the pool, whose partitions the next tick
// writes. It reports whether the prime was put off for want of a descriptor. Called with ioMu
// held.
func (c *Committer) completePrime(t *tickScratch, pr *primeResult, pool bool) (deferred bool) {
	p := pr.p
	p.priming = false
	retry := c.retryNextTick
	if pool {
		retry = c.markPrimed
	}
	switch {
	case pr.err == errNoDescriptor:
		return true
	case pr.err == errForgotten:
		return false
	case pr.err == errStranded:
		if !p.forgotten {
			c.strand(p)
		}
		return false
	case pr.err != nil:
		if !p.forgotten && !p.stranded {
			t.fail(p, "prime", pr.err)
			retry(p)
		}
		return false
	}
	if p.forgotten || p.stranded {
		c.closeFD(pr.f)
		return false
	}
	if err := t.deviceErr(pr.fileDev); err != nil {
		c.closeFD(pr.f)
		t.fail(p, "prime", err)
		retry(p)
		return false
	}
	p.dirDev, p.dirIno, p.fileDev, p.fileIno = pr.dirDev, pr.dirIno, pr.fileDev, pr.fileIno
	p.anchor, p.win, p.seqs, p.anchorFrontier = pr.anchor, pr.window, pr.seqs, pr.rec.Frontier
	p.hasAnchor, p.anchorOurs, p.windowFrontier = pr.hasAnchor, false, -1
	p.levelled, p.levelledOK, p.offsetEntryOK = pr.levelled, pr.levelledOK, pr.offsetPresent
	p.windowOK, p.needRewrite, p.pending = false, false, false
	p.primed, p.fresh = true, true
	p.syncsOwed = pr.blank
	if pr.blank {
		c.stats.blankPrimes.Add(1)
	}
	if !c.adopt(p, pr.f) {
		c.closeFD(pr.f) // reopened as a one-shot at its window write
	}
	c.stats.primes.Add(1)
	t.primedAny = true
	if pool {
		c.markPrimed(p)
	}
	return false
}

// reopen opens an evicted consumer.ahead again, by path and without creating it, and keeps it
// only if it is the file, in the directory, that the prime opened.
// Called with ioMu held; errStranded says the caller must strand the partition.
func (c *Committer) reopen(p *partition, limit int64) (File, error) {
	root, err := c.openRoot(p.dir, limit)
	if err != nil {
		return nil, c.pathErr(p, err)
	}
	defer c.closeFD(root)
	if err := c.checkPinned(p, root); err != nil {
		return nil, err
	}
	f, err := c.openIn(root, AheadFile, os.O_RDWR, 0, limit)
	if err != nil {
		return nil, c.pathErr(p, err)
	}
	c.opened(p.dir)
	if err := c.checkReopened(p, f); err != nil {
		c.closeFD(f)
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
		return errStranded
	}
	return nil
}

// checkDir strands the partition unless its path still names the directory (dev, ino): the
// check after an open, which keeps a file opened in a directory replaced meanwhile from being
// used as the partition's.
func (c *Committer) checkDir(p *partition, dev, ino uint64) error {
	fi, err := c.fs.Stat(p.dir)
	if err != nil {
		return c.pathErr(p, err)
	}
	if d, i := fi.ID(); d != dev || i != ino {
		return errStranded
	}
	return nil
}

// pathErr returns errStranded when err says the partition's path is gone, for the caller to
// strand it under ioMu, and otherwise err as an ordinary error (EIO, ESTALE, EACCES), retried
// next tick. The checks below answer errStranded the same way.
func (c *Committer) pathErr(_ *partition, err error) error {
	if gone(err) {
		return errStranded
	}
	return err
}

// strand stops all writes for the partition until its next Forget.
// Called with ioMu held.
func (c *Committer) strand(p *partition) {
	if p.stranded {
		return
	}
	p.stranded = true
	p.priming = false
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
