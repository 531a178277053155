package sim

import (
	"context"
	"errors"
	"time"

	"narad.dev/consume/router"
)

// nodeStore is one process's view of the run's shared state store (Config.Store): it passes
// every call to the store, and tells the model which process saved which partition when. A
// process that crashed saves nothing (its saves fail), and a node must not save a partition
// it handed off until it adopts it again: the check of the deposed owner's fence.
type nodeStore struct {
	s *sim
	e *epoch
}

var _ router.StateStore = (*nodeStore)(nil)

var errCrashed = errors.New("sim: the process crashed")

func (st *nodeStore) Load(ctx context.Context, t string, p int32) ([]byte, error) {
	st.s.mu.Lock()
	crashed := st.e.crashed
	st.s.mu.Unlock()
	if crashed {
		return nil, errCrashed
	}
	return st.s.store.Load(ctx, t, p)
}

// Save checks and records the batch and stores it, all under s.mu, so that a save and the
// driver's marking of a hand-off (after HandOff returned) come in one order.
func (st *nodeStore) Save(ctx context.Context, batch []router.PartitionState) error {
	s, e := st.s, st.e
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.crashed {
		return errCrashed
	}
	now := time.Now()
	s.lapsesLocked()
	for _, ps := range batch {
		if ps.Topic == topic && s.deposed[e.nd][ps.Partition] {
			s.failKind(KindDeposedSave, "%s#%d saved the state of partition %d to the store, after its HandOff of it returned", e.nd.id, e.n, ps.Partition)
		}
		// A node saves nothing under a grant that lapsed on its clock; only a paused node,
		// whose clock stands still, may still believe its grant valid (the store's fence
		// refuses it once the partition failed over).
		if s.ctl != nil && ps.Topic == topic && !e.nd.pausedNow(now) {
			if rec, ok := s.ctl.recOf(e.nd, ps.Partition, ps.Epoch); ok && rec.e == e && !rec.lapsed.IsZero() && now.After(rec.lapsed) {
				s.failKind(KindDeposedSave, "%s#%d saved the state of partition %d under epoch %d at %v, after that grant lapsed at %v",
					e.nd.id, e.n, ps.Partition, ps.Epoch, s.since(now), s.since(rec.lapsed))
			}
		}
	}
	if err := s.store.Save(ctx, batch); err != nil {
		return err
	}
	if e.saved == nil {
		e.saved = map[int32][]save{}
	}
	for _, ps := range batch {
		if ps.Topic == topic {
			e.saved[ps.Partition] = append(e.saved[ps.Partition], save{now, ps.Epoch})
		}
	}
	return nil
}

// save is a save of a partition's state to the store by a process: when, and under which
// ownership epoch (0 without grants).
type save struct {
	at    time.Time
	epoch uint64
}

func (st *nodeStore) Delete(ctx context.Context, t string) error { return st.s.store.Delete(ctx, t) }

// savedAfter reports whether process e saved partition p to the store under ownership
// epoch at an instant after t and before until: a save whose snapshot (taken at the instant
// of the call) holds every change applied by t under that epoch (a shard of the partition
// loaded again under a newer grant holds only what the store gave it).
func (e *epoch) savedAfter(p int32, t, until time.Time, epoch uint64) bool {
	for _, sv := range e.saved[p] {
		if sv.at.After(t) && sv.at.Before(until) && sv.epoch == epoch {
			return true
		}
	}
	return false
}

// explainStore is explain for a run whose nodes keep their ack state in the shared store,
// which outlives every crash and power cut: an ack is durable for good once a Save of its
// partition by the process that applied it, called after the ack was answered, returned. A
// crash (of the process or the machine) before such a save loses it; a graceful stop saves
// it (Close saves every dirty partition, and the store refuses nothing). Disk faults play no
// part: the nodes' disks hold no ack state.
func (s *sim) explainStore(owner *node, p int32, a ack, granted time.Time) (why string, documented bool) {
	if a.waited {
		return "", false // an AckDurable answered success: in the store when answered
	}
	// The processes that may have applied it: live at some instant of [a.s, a.r].
	var cands []*epoch
	for _, e := range owner.epochs {
		if !e.start.After(a.r) && (e.end.IsZero() || !e.end.Before(a.s)) {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		return "", false
	}
	for _, e := range cands[:len(cands)-1] {
		if e.kind != graceful {
			return e.kind.String() + " while the ack was under way, before a save", true
		}
	}
	e := cands[len(cands)-1]
	if e.savedAfter(p, a.r, granted, a.epoch) {
		return "", false // in the store
	}
	if why, documented, ok := s.explainLapse(owner, e, p, a, granted); ok {
		return why, documented // its grant lapsed before a save under it
	}
	switch {
	case e.end.IsZero() || !e.end.Before(granted):
		return "", false // the ack reached the process that leased the record again
	case e.kind == graceful:
		return "", false // its Close saved it
	}
	return e.kind.String() + " before a save of the partition", true
}
