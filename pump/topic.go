package pump

import (
	"sync"
	"sync/atomic"
)

// topicQueue is the queue state of one topic: its shared FIFO, one FIFO per pinned partition
// that has waiters, and the flags the notifier reads.
type topicQueue[M any] struct {
	name string

	// live counts the topic's waiters that have not been handed a result nor left, the one the
	// pump holds included. It is the notifier's flag: zero means nobody to wake. Keeping the held
	// waiter in it means the notifier never sees the topic empty while the pump takes a record for
	// someone (see notifier.go).
	live atomic.Int64
	// all asks the next pass to pump every FIFO of the topic (set by Notify).
	all atomic.Bool

	scheduled bool // on Pump.pending; guarded by Pump.mu, not by mu

	mu         sync.Mutex
	dropped    error // ErrTopicDropped or ErrClosed once DropTopic or Close took it out of the map
	shared     fifo[M]
	pinned     map[int32]*fifo[M] // partition → its FIFO, only while the FIFO is in use
	pinnedList []*fifo[M]         // the same FIFOs, for a whole-topic wake
	dirty      []*fifo[M]         // pinned FIFOs due a pass (each has dirty set)
	spare      []*fifo[M]         // the other dirty buffer, swapped in by each pass
}

func newTopicQueue[M any](name string) *topicQueue[M] {
	t := &topicQueue[M]{name: name}
	t.shared.partition = -1
	return t
}

// fifoFor returns the FIFO a waiter pinned to partition (or -1) joins, creating a pinned one.
func (t *topicQueue[M]) fifoFor(partition int32) *fifo[M] {
	if partition < 0 {
		return &t.shared
	}
	if f := t.pinned[partition]; f != nil {
		return f
	}
	if t.pinned == nil {
		t.pinned = make(map[int32]*fifo[M])
	}
	f := &fifo[M]{partition: partition, index: len(t.pinnedList)}
	t.pinned[partition] = f
	t.pinnedList = append(t.pinnedList, f)
	return f
}

// forgetIfIdle removes a pinned FIFO that holds nothing and is due nothing, so pinned FIFOs cost
// memory only while someone waits on them.
func (t *topicQueue[M]) forgetIfIdle(f *fifo[M]) {
	if t.dropped != nil || f.partition < 0 || t.pinned[f.partition] != f {
		return
	}
	if f.n > 0 || f.held || f.dirty {
		return
	}
	delete(t.pinned, f.partition)
	last := len(t.pinnedList) - 1
	moved := t.pinnedList[last]
	t.pinnedList[f.index] = moved
	moved.index = f.index
	t.pinnedList[last] = nil
	t.pinnedList = t.pinnedList[:last]
	if len(t.pinnedList) == 0 {
		t.pinnedList, t.pinned = nil, nil
	}
}

// markDirty makes a pass over f due and reports whether it was not due already (the caller then
// schedules the topic).
func (t *topicQueue[M]) markDirty(f *fifo[M]) bool {
	if f.dirty {
		return false
	}
	f.dirty = true
	if f.partition >= 0 {
		t.dirty = append(t.dirty, f)
	}
	return true
}

// markAll makes a pass due over every FIFO that has an entry.
func (t *topicQueue[M]) markAll() {
	for _, f := range t.pinnedList {
		if f.n > 0 {
			t.markDirty(f)
		}
	}
	if t.shared.n > 0 {
		t.markDirty(&t.shared)
	}
}

// drop takes the topic out of service: every queued waiter is handed err, and the FIFOs go. A
// waiter the pump holds is handed err by the pump when it comes back (see Pump.pumpFIFO).
func (t *topicQueue[M]) drop(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped != nil {
		return
	}
	t.dropped = err
	hand := func(w *waiter[M]) {
		if !w.marked {
			w.hand(result[M]{err: err})
		}
	}
	for _, f := range t.pinnedList {
		f.drain(hand)
	}
	t.shared.drain(hand)
	t.pinned, t.pinnedList, t.dirty, t.spare = nil, nil, nil, nil
	t.live.Store(0)
}
