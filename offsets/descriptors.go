package offsets

import (
	"errors"
	"io"
	"io/fs"
)

// The descriptor cap (see docs/protocol.md, "Descriptors"): at most maxOpen descriptors are open at once,
// counting every one the committer opens: consumer.ahead descriptors held between ticks,
// one-shot ones, those of primes and levellings, and directory roots. Held ones stay under
// maxHeld, which leaves a reserve for the others. Past maxHeld the committer closes the
// held descriptor written longest ago among partitions whose window is durable (nothing
// pending, nothing to rewrite, no writeout in flight), and when there is none it writes
// through a one-shot descriptor, closed right after the write. An open that finds no room
// under the cap is put off: a window write to the next tick, a prime to the next chunk.

// errNoDescriptor says an open was put off for want of room under the cap.
var errNoDescriptor = errors.New("offsets: descriptor cap reached")

// takeFD reserves room for one descriptor if fewer than limit are open.
func (c *Committer) takeFD(limit int64) bool {
	for {
		n := c.fds.Load()
		if n >= limit {
			return false
		}
		if c.fds.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// closeFD closes a descriptor taken with takeFD.
func (c *Committer) closeFD(f io.Closer) {
	_ = f.Close()
	c.fds.Add(-1)
}

// openRoot pins dir under the cap (limit).
func (c *Committer) openRoot(dir string, limit int64) (Root, error) {
	if !c.takeFD(limit) {
		return nil, errNoDescriptor
	}
	r, err := c.fs.OpenRoot(dir)
	if err != nil {
		c.fds.Add(-1)
		return nil, err
	}
	return r, nil
}

// openIn opens name inside root under the cap (limit).
func (c *Committer) openIn(root Root, name string, flag int, perm fs.FileMode, limit int64) (File, error) {
	if !c.takeFD(limit) {
		return nil, errNoDescriptor
	}
	f, err := root.OpenFile(name, flag, perm)
	if err != nil {
		c.fds.Add(-1)
		return nil, err
	}
	return f, nil
}

// descriptor returns a descriptor of the partition's consumer.ahead: the held one, the one its
// writeout batch opened, or one reopened by path (evicting a durable partition's to make room
// if needed). oneShot says the caller must close it (closeFD) once done. A path found gone or
// replaced strands the partition. Called with ioMu held.
func (c *Committer) descriptor(p *partition, limit int64) (f File, oneShot bool, err error) {
	if p.f != nil {
		return p.f, false, nil
	}
	if p.woFile != nil {
		return p.woFile, false, nil
	}
	for c.fds.Load()+2 > limit && c.evict(p) {
	}
	f, err = c.reopen(p, limit)
	if err == errStranded {
		c.strand(p)
	}
	if err != nil {
		return nil, false, err
	}
	if c.adopt(p, f) {
		return f, false, nil
	}
	c.stats.oneShots.Add(1)
	return f, true, nil
}

// adopt holds f for p if the held cap allows, evicting a durable partition's descriptor if
// needed, and reports whether it did.
func (c *Committer) adopt(p *partition, f File) bool {
	if c.held >= c.maxHeld && !c.evict(p) {
		return false
	}
	p.f = f
	c.held++
	c.stats.descriptors.Add(1)
	c.lru.pushBack(p)
	return true
}

// evict closes the least recently written descriptor whose window is durable. A partition
// whose writes wait for a writeout keeps its descriptor (its sync must see the writeback
// errors of its writes), and so does one whose writeout is in flight or whose prime just
// opened it for its first window. Called with ioMu held.
func (c *Committer) evict(except *partition) bool {
	if c.noneEvictable {
		return false
	}
	for q := c.lru.head; q != nil; q = q.lruNext {
		if q == except || !q.evictable() {
			continue
		}
		c.lru.remove(q)
		c.held--
		c.stats.descriptors.Add(-1)
		c.closeFD(q.f)
		q.f = nil
		c.stats.evictions.Add(1)
		return true
	}
	c.noneEvictable = except == nil || !except.evictable() // the one passed over may be later
	return false
}

// evictable says whether p's held descriptor may be closed: its window is durable (nothing
// pending or to rewrite), no writeout is using it, and its first window is written.
// Called with ioMu held.
func (p *partition) evictable() bool {
	return p.primed && !p.fresh && !p.pending && !p.needRewrite && !p.woBusy
}

// dropDescriptors gives up the partition's held descriptor. One a writeout batch is syncing
// or flushing through is closed when the batch ends; the batch closes its own (woFile).
// Called with ioMu held.
func (c *Committer) dropDescriptors(p *partition) {
	if p.f != nil {
		c.lru.remove(p)
		c.held--
		c.stats.descriptors.Add(-1)
		if p.woBusy {
			c.orphans = append(c.orphans, p.f)
		} else {
			c.closeFD(p.f)
		}
		p.f = nil
	}
}

// lruList orders the partitions holding a descriptor, least recently written first.
type lruList struct{ head, tail *partition }

func (l *lruList) pushBack(p *partition) {
	p.lruPrev, p.lruNext = l.tail, nil
	if l.tail != nil {
		l.tail.lruNext = p
	} else {
		l.head = p
	}
	l.tail = p
}

func (l *lruList) remove(p *partition) {
	if p.lruPrev != nil {
		p.lruPrev.lruNext = p.lruNext
	} else {
		l.head = p.lruNext
	}
	if p.lruNext != nil {
		p.lruNext.lruPrev = p.lruPrev
	} else {
		l.tail = p.lruPrev
	}
	p.lruPrev, p.lruNext = nil, nil
}

// touch moves a partition holding a descriptor to the most recently written end.
func (l *lruList) touch(p *partition) {
	if p.f == nil || l.tail == p {
		return
	}
	l.remove(p)
	l.pushBack(p)
}
