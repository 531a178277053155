package offsets

// The descriptor cap (checklist items 61, 62): at most maxHeld consumer.ahead descriptors stay
// open. Past that the committer closes the one written longest ago among partitions whose
// window is durable (nothing pending, nothing to rewrite), and when there is none it writes
// through a descriptor opened for this tick alone. All of it runs with ioMu held.

// descriptor returns the partition's open consumer.ahead, reopening it by path if it was
// evicted.
func (c *Committer) descriptor(p *partition) (File, error) {
	if p.f != nil {
		return p.f, nil
	}
	if p.oneShot != nil {
		return p.oneShot, nil
	}
	f, err := c.reopen(p)
	if err != nil {
		return nil, err
	}
	c.adopt(p, f)
	return f, nil
}

// adopt holds f for p if the cap allows, evicting a durable partition's descriptor if needed,
// and otherwise keeps it for this tick only.
func (c *Committer) adopt(p *partition, f File) {
	if c.held >= c.maxHeld && !c.evict(p) {
		p.oneShot = f
		c.t.oneShots = append(c.t.oneShots, p)
		c.stats.oneShots.Add(1)
		return
	}
	p.f = f
	c.held++
	c.stats.descriptors.Add(1)
	c.lru.pushBack(p)
}

// evict closes the least recently written descriptor whose window is durable. A partition
// whose writes wait for a writeout keeps its descriptor, and so does one this tick is about
// to write (its prime just opened it).
func (c *Committer) evict(except *partition) bool {
	for q := c.lru.head; q != nil; q = q.lruNext {
		if q == except || !q.primed || q.pending || q.needRewrite || q.inWork {
			continue
		}
		c.lru.remove(q)
		c.held--
		c.stats.descriptors.Add(-1)
		_ = q.f.Close()
		q.f = nil
		c.stats.evictions.Add(1)
		return true
	}
	return false
}

// dropDescriptors gives up the partition's descriptors. During a tick they are closed when
// the tick ends, since the tick may still flush the device through them.
func (c *Committer) dropDescriptors(p *partition) {
	if p.f != nil {
		c.lru.remove(p)
		c.held--
		c.stats.descriptors.Add(-1)
		c.closeOrOrphan(p.f)
		p.f = nil
	}
	if p.oneShot != nil {
		c.closeOrOrphan(p.oneShot)
		p.oneShot = nil
	}
}

func (c *Committer) closeOrOrphan(f File) {
	if c.inTick {
		c.orphans = append(c.orphans, f)
		return
	}
	_ = f.Close()
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
