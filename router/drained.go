package router

import (
	"hash/maphash"
	"sync/atomic"

	"narad.dev/consume/inflight"
)

// Passing over drained local partitions. A consume walks this node's partitions before it
// takes what was read ahead from other nodes; once they are all drained (a lone consumer
// whose local partitions ran dry, say) every consume would walk them for nothing, a log
// lookup and a reserve each. So a walk that finds every one of them with nothing to hand out
// until something wakes it (ErrEmpty or ErrAllReserved: nothing above the frontier below the
// high watermark is unleased) marks them drained, and while the mark holds, a consume takes
// what is held ahead before walking them again.
//
// A mark holds while nothing woke a partition of its topic since its walk began (the wake
// epoch below: an Appended, a nack, a release, a lease's expiry, a requeue, a partition
// adopted or handed off all wake, through Node.wake), the topic's generation and its routes'
// local partitions are the ones walked, and for at most drainedPasses consumes: a host that
// does not call Appended has its local records found within that many consumes served
// from what is held, and so has a record a scan gave back after its read failed.

// drainedPasses bounds the consumes one mark lets take what is held ahead without walking
// the local partitions.
const drainedPasses = 16

// drainedMark is what a walk that found every local partition drained leaves: the
// generation and the routes' local partitions it walked, the wake epoch it began at, and the
// consumes it may still let pass.
type drainedMark struct {
	gen    *inflight.Generation
	local  []int32
	began  wakeWatch
	passes int
}

// holds reports whether the mark lets a consume of gen over local pass the walk.
func (m *drainedMark) holds(gen *inflight.Generation, local []int32) bool {
	return m.passes > 0 && m.gen == gen && sameSlice(m.local, local) && m.began.slot.epoch.Load() == m.began.epoch
}

// wakeWatch is a topic's wake slot and its epoch when a walk began (zero: no walk watched).
type wakeWatch struct {
	slot  *wakeSlot
	epoch uint64
}

// wakeEpochs count the wakes of the topics a walk watches, so that a drained mark knows
// whether anything woke its topic since its walk began. A topic is counted in one of
// wakeSlots slots, by its name's hash: a wake of another topic of the slot ends a mark too,
// which only costs that walk again. A wake costs a hash and one load unless a walk watches
// its slot; the first wake after it moves the epoch on and stops the watch.
type wakeEpochs struct {
	seed  maphash.Seed
	slots [wakeSlots]wakeSlot
}

const wakeSlots = 64

type wakeSlot struct {
	watched atomic.Bool
	epoch   atomic.Uint64
	_       [48]byte // a cache line each: wakes of one slot do not slow another's
}

func newWakeEpochs() *wakeEpochs { return &wakeEpochs{seed: maphash.MakeSeed()} }

func (w *wakeEpochs) slot(topic string) *wakeSlot {
	return &w.slots[maphash.String(w.seed, topic)&(wakeSlots-1)]
}

// watch returns topic's slot and its epoch, read before the walk it marks begins: a wake
// that moves the epoch on after this read ends the mark, and one that does not moved it on
// before, or found the slot unwatched before this watch, so that what it woke for is there
// for the walk to see. (The epoch is read first: a watch set first could be stopped by a
// wake between the two reads, which the read of the epoch after it would not see.)
func (w *wakeEpochs) watch(topic string) wakeWatch {
	s := w.slot(topic)
	epoch := s.epoch.Load()
	if !s.watched.Load() {
		s.watched.Store(true)
	}
	return wakeWatch{slot: s, epoch: epoch}
}

// woke counts a wake of topic if a walk watches its slot.
func (w *wakeEpochs) woke(topic string) {
	if s := w.slot(topic); s.watched.Load() && s.watched.Swap(false) {
		s.epoch.Add(1)
	}
}
