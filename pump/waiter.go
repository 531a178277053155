package pump

import (
	"context"
	"sync/atomic"
)

// A waiter's state moves once, from waiting to handed or to cancelled, by compare-and-swap. The
// side that moves it owns the outcome: the pump (or a drop) that wins sends the waiter its one
// result; the waiter that wins leaves the queue and returns its context's error. The side that
// loses with a record in hand releases it (see Wait and Pump.pumpFIFO).
const (
	waiting   int32 = iota // parked, or held by the pump while it takes a record for it
	handed                 // a result (a record or an error) is in the channel
	cancelled              // its context ended first; it returns ctx.Err()
)

// waiter is one parked Wait call.
type waiter[M any] struct {
	state atomic.Int32
	ch    chan result[M] // capacity 1; receives exactly one result, from whoever moved state to handed

	// Guarded by the topic's mutex, kept by the FIFO.
	fifo   *fifo[M] // the FIFO it joined
	queued bool     // in fifo's ring (false while the pump holds it, and once it left for good)
	marked bool     // marked gone in place; the FIFO skips and sweeps it
}

type result[M any] struct {
	m   M
	err error
}

// hand moves w from waiting to handed and sends it r. It reports false when w had already left
// (its context ended), in which case r was not sent.
func (w *waiter[M]) hand(r result[M]) bool {
	if !w.state.CompareAndSwap(waiting, handed) {
		return false
	}
	w.ch <- r // never blocks: the channel has room for the one result
	return true
}

// Wait parks the caller until the pump hands it a record of topic, and returns that record. With
// pinned >= 0 it parks on that partition's own FIFO and is served only from that partition;
// otherwise it parks on the topic's shared FIFO. Joining the queue kicks the pump, so a record
// that landed before the call (with its wake dropped, since nobody was waiting) is still found.
//
// Wait blocks on one buffered channel and on ctx; it starts no goroutine and no timer. When ctx
// ends first, Wait returns ctx.Err() and the caller owns nothing: if a record was handed over at
// that same instant, Wait gives it back to the Source (Release) before it returns. Otherwise the
// caller owns the record it returns. After DropTopic(topic) it returns ErrTopicDropped, and after
// Close, ErrClosed.
//
// Wait is safe for concurrent use; a Run loop (or a caller of Step) must be pumping for it to be
// served.
func (p *Pump[M]) Wait(ctx context.Context, topic string, pinned int32) (M, error) {
	return p.wait(ctx, topic, pinned, true)
}

// WaitQuiet is Wait, except that joining the queue does not kick the pump: the caller waits
// for the next wake. It is for a caller that was handed a record it could not use and gave
// it back (its log failed, say): like a waiter whose Take found nothing, it should not be
// served the same record again at once, over and over. A wake that came while it was away
// from the queue (between its hand-over and this call) with nobody else parked is not seen;
// the caller's own deadline bounds that.
func (p *Pump[M]) WaitQuiet(ctx context.Context, topic string, pinned int32) (M, error) {
	return p.wait(ctx, topic, pinned, false)
}

func (p *Pump[M]) wait(ctx context.Context, topic string, pinned int32, kick bool) (M, error) {
	var zero M
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	w := &waiter[M]{ch: make(chan result[M], 1)}
	t, err := p.join(topic, pinned, w, kick)
	if err != nil {
		return zero, err
	}
	select {
	case r := <-w.ch:
		return r.m, r.err
	case <-ctx.Done():
	}
	if w.state.CompareAndSwap(waiting, cancelled) {
		t.leave(w)
		return zero, ctx.Err()
	}
	// The pump (or a drop) won: a result is in the channel. The caller is gone, so a record in it
	// goes back at once rather than staying invisible until its lease runs out.
	if r := <-w.ch; r.err == nil {
		p.src.Release(topic, r.m)
		t.wakeAll(p)
	}
	return zero, ctx.Err()
}

// join puts w at the tail of its FIFO and, when kick is set, kicks the pump when w is the
// FIFO's only live entry. A join behind live entries does not kick: the head either is being
// served or failed its last Take with no wake since, and w, which scans the same partitions,
// could not be served either.
func (p *Pump[M]) join(name string, pinned int32, w *waiter[M], kick bool) (*topicQueue[M], error) {
	if pinned < 0 {
		pinned = -1
	}
	for {
		t := p.queue(name)
		t.mu.Lock()
		if t.dropped != nil { // dropped between the lookup and the lock: the name maps to a new topic now
			t.mu.Unlock()
			continue
		}
		if p.closed.Load() {
			t.mu.Unlock()
			return nil, ErrClosed
		}
		f := t.fifoFor(pinned)
		kick := kick && f.live() == 0
		f.push(w)
		t.live.Add(1)
		if kick && t.markDirty(f) {
			p.schedule(t)
		}
		t.mu.Unlock()
		return t, nil
	}
}

// leave takes w, whose state it moved to cancelled, out of the count of live waiters and marks its
// entry where it stands. When the pump holds w (not queued), the pump drops it instead.
func (t *topicQueue[M]) leave(w *waiter[M]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped != nil {
		return
	}
	t.live.Add(-1)
	if !w.queued {
		return
	}
	f := w.fifo
	f.mark(w)
	t.forgetIfIdle(f)
}
