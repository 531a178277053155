package offsets

import (
	"context"
	"errors"
	"math"
)

// waiter is one Durable call waiting for its partition's writeout.
type waiter struct {
	ch    chan error // capacity 1: the answer, sent once, under markMu
	after uint64     // snaps when it registered: a window of a later snapshot covers it
	idx   int        // index in its partition's waiters; -1 once answered
}

// Durable returns once every change to the partition's acked state reported (MarkDirty)
// before the call is durable: a window record written after the call has been written out
// (with the device flush on macOS) and become the anchor. It is a group commit: under Run the
// call starts its partition's writeout at once, whatever its turn, and the Durable waits of
// the partition that arrive while that sync runs share the next one; it never syncs anything
// itself. A lone wait costs one window write and one sync; one arriving while a writeout
// batch runs waits for that batch too.
//
// A failed writeout keeps the wait going until a later one holds, which takes a whole rewrite
// of the window followed by a successful sync (see "Anchor and window"). It returns ctx's
// error if ctx is done first (the wait is withdrawn), ErrClosed after Close, and a
// *PartitionError (Op "durable") matching ErrShardGone when the partition is forgotten or its
// shard found gone, or ErrStranded when it is or becomes stranded. A wait during Close is
// answered by Close's writeout: nil when it holds.
//
// Durable starts no goroutine and takes no lock across I/O; it needs a committer that ticks
// (Run, or Tick from a simulator).
func (c *Committer) Durable(ctx context.Context, topic string, partition int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A fresh waiter each call (two small allocations, next to a wait for a sync): pooled
	// channels would cross testing/synctest bubbles, which the runtime forbids.
	w := &waiter{ch: make(chan error, 1), idx: -1}
	c.markMu.Lock()
	if c.closed {
		c.markMu.Unlock()
		return ErrClosed
	}
	p := c.partLocked(key{topic, partition})
	if p.strandedW {
		c.markMu.Unlock()
		return &PartitionError{Topic: topic, Partition: partition, Op: "durable", Err: ErrStranded}
	}
	w.after = c.snaps.Load()
	w.idx = len(p.waiters)
	p.waiters = append(p.waiters, w)
	p.nwait.Add(1)
	c.waiting.Add(1)
	c.markLocked(p)
	c.markMu.Unlock()
	c.kick(true)

	select {
	case err := <-w.ch:
		return err
	case <-ctx.Done():
	}
	c.markMu.Lock()
	if w.idx >= 0 {
		c.removeWaiter(p, w)
		c.markMu.Unlock()
		return ctx.Err()
	}
	c.markMu.Unlock()
	return <-w.ch // answered meanwhile: the answer is in the channel already
}

// removeWaiter withdraws w from p's waiters. Called with markMu held.
func (c *Committer) removeWaiter(p *partition, w *waiter) {
	last := len(p.waiters) - 1
	moved := p.waiters[last]
	p.waiters[w.idx], moved.idx = moved, w.idx
	p.waiters[last] = nil
	p.waiters = p.waiters[:last]
	w.idx = -1
	p.nwait.Add(-1)
	c.waiting.Add(-1)
}

// answerWaiters answers, with err, p's waiters that registered before snapshot upTo (every one
// for math.MaxUint64). Called with markMu held.
func (c *Committer) answerWaiters(p *partition, upTo uint64, err error) int {
	kept, n := p.waiters[:0], 0
	for _, w := range p.waiters {
		if w.after >= upTo {
			w.idx = len(kept)
			kept = append(kept, w)
			continue
		}
		w.idx = -1
		w.ch <- err // never blocks: one answer per registration, capacity 1
		n++
	}
	clear(p.waiters[len(kept):])
	p.waiters = kept
	if n > 0 {
		p.nwait.Add(int32(-n))
		c.waiting.Add(int64(-n))
	}
	return n
}

// failWaiters answers p's waiters that registered before snapshot upTo with a PartitionError
// (Op "durable") wrapping cause. Called with markMu held.
func (c *Committer) failWaiters(p *partition, upTo uint64, cause error) {
	if len(p.waiters) == 0 {
		return
	}
	c.answerWaiters(p, upTo, &PartitionError{Topic: p.topic, Partition: p.num, Op: "durable", Err: cause})
}

// shardGone fails the waits that the Source's !ok for snapshot snap answers: those registered
// before it. Called without locks.
func (c *Committer) shardGone(p *partition, snap uint64) {
	if p.nwait.Load() == 0 {
		return
	}
	c.markMu.Lock()
	c.failWaiters(p, snap, ErrShardGone)
	c.markMu.Unlock()
}

// answerFlipped answers, after this tick's flips, the waits each flipped window covers.
func (c *Committer) answerFlipped(t *tickScratch) {
	if len(t.flipped) == 0 {
		return
	}
	c.markMu.Lock()
	for _, p := range t.flipped {
		if n := c.answerWaiters(p, p.syncSnap, nil); n > 0 { // the snapshot the synced window holds
			c.stats.durables.Add(uint64(n))
		}
	}
	c.markMu.Unlock()
	clear(t.flipped)
	t.flipped = t.flipped[:0]
}

// failAllWaiters answers the waits Close could not make durable.
func (c *Committer) failAllWaiters(closeErr error) {
	if c.waiting.Load() == 0 {
		return
	}
	err := ErrClosed
	if closeErr != nil {
		err = errors.Join(ErrClosed, closeErr)
	}
	c.markMu.Lock()
	defer c.markMu.Unlock()
	for _, v := range c.parts.Range {
		if p := v.(*partition); len(p.waiters) > 0 {
			c.answerWaiters(p, math.MaxUint64, err)
		}
	}
}
