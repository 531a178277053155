package sim

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"slices"
	"time"
)

// move is one partition moved from a node to another, as a host moves it (router.Node
// PartitionDir): the routes stop naming the old owner at start, the old owner's Persist
// returns, the state files are copied between two DropPartition calls at the new owner, the
// old owner drops the partition from dropStart to dropped, and the routes name the new owner
// from end on.
type move struct {
	p                         int32
	from, to                  *node
	start, dropStart, dropped time.Time
	end                       time.Time
}

// stateFiles are the files of a partition directory (docs/protocol.md, "State files").
var stateFiles = []string{"consumer.id", "consumer.ahead", "consumer.offset"}

// ownerAt returns the node that owned partition p at t (the new owner from a move's end).
func (s *sim) ownerAt(p int32, t time.Time) *node {
	o := s.firstOwner[p]
	for _, m := range s.moves {
		if m.p == p && !t.Before(m.end) {
			o = m.to
		}
	}
	return o
}

// movedLease ends lease l at the moves of its partition away from the node that granted it:
// the old owner's DropPartition drops its shard, leases with it. Called with s.mu held.
func (s *sim) movedLease(l *lease) {
	for _, m := range s.moves {
		if m.p == l.k.p && m.from == l.owner && l.granted.Before(m.end) {
			l.endMin = earliest(l.endMin, later(m.dropStart, l.granted))
			l.endMax = earliest(l.endMax, later(m.dropped, l.granted))
		}
	}
}

// setParts replaces the partitions nd owns, and every node's view of the others'.
func (s *sim) setParts(nd *node, parts []int32) {
	s.mu.Lock()
	s.routesMu.Lock()
	nd.parts = parts
	s.rebuildRemote()
	s.routesMu.Unlock()
	s.mu.Unlock()
}

// moveOut takes p out of the routes of its owner from.
func (s *sim) moveOut(from *node, p int32) {
	s.setParts(from, slices.DeleteFunc(slices.Clone(from.parts), func(q int32) bool { return q == p }))
}

// moveIn adds p to the routes of node to.
func (s *sim) moveIn(to *node, p int32) {
	parts := append(slices.Clone(to.parts), p)
	slices.Sort(parts)
	s.setParts(to, parts)
}

// moveStep moves a partition to another node, as a host does: the old owner stops serving it
// (the routes), Persist there makes its ack state durable, the destination drops the
// partition, the state files are copied from the old owner's disk to the same place on the
// destination's, the destination drops it again, the old owner drops it, and the routes name
// the destination, which loads the copy at its first touch. Only from a running owner whose
// Persist succeeds (otherwise the move is abandoned and the routes restored), to a running
// node (an owner, or a gateway that becomes one) that takes callbacks.
//
// The model: the leases the old owner granted end at its drop (their settles reach the new
// owner, which answers ErrGone or ErrAlreadySettled); every ack the old owner's crashes had
// not undone by the move is durable for good (Persist), so no acked record may come back.
func (s *sim) moveStep() {
	p := int32(s.rng.IntN(int(s.partitions())))
	from := s.ownerOf(p)
	var cands []*node
	for _, nd := range s.nodes {
		if nd != from && !nd.noCallbacks {
			cands = append(cands, nd)
		}
	}
	if len(cands) == 0 {
		return
	}
	to := cands[s.rng.IntN(len(cands))]
	if !from.up() || !to.up() {
		return
	}
	m := &move{p: p, from: from, to: to}
	// The shard is loaded before the routes change, so that Persist finds it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := from.rn.Persist(ctx, topic, p)
	m.start = time.Now()
	s.mu.Lock()
	from.cur().movedOut = append(from.cur().movedOut, p)
	s.mu.Unlock()
	s.moveOut(from, p)
	if err == nil {
		err = from.rn.Persist(ctx, topic, p)
	}
	if err != nil {
		s.moveIn(from, p)
		s.report.Faults.MovesSkipped++
		s.logf("move %d from %s to %s abandoned: Persist: %v", p, from.id, to.id, err)
		return
	}
	persisted := time.Now()
	src, dst := from.rn.PartitionDir(topic, p), to.rn.PartitionDir(topic, p)
	to.rn.DropPartition(topic, p)
	if err := to.fs.MkdirAll(dst); err != nil {
		s.fatalf("move %d: MkdirAll %s on %s: %v", p, dst, to.id, err)
	}
	for _, name := range stateFiles {
		data, err := from.fs.ReadFile(path.Join(src, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = to.fs.RemoveAll(path.Join(dst, name))
		case err == nil:
			err = to.fs.WriteFile(path.Join(dst, name), data)
		}
		if err != nil {
			s.fatalf("move %d: copying %s from %s to %s: %v", p, name, from.id, to.id, err)
		}
	}
	to.rn.DropPartition(topic, p)
	m.dropStart = time.Now()
	from.rn.DropPartition(topic, p)
	m.dropped = time.Now()
	s.mu.Lock()
	to.everOwned[p] = true
	if e := to.cur(); e.movedIn == nil {
		e.movedIn = map[int32]int{p: 1}
	} else {
		e.movedIn[p]++
	}
	for _, r := range s.records {
		if r.deletedAt.IsZero() {
			for i, a := range r.acks {
				if a.l.k.p == p && !a.s.After(persisted) {
					if why, _ := s.explain(a.owner, p, a, persisted); why == "" {
						r.acks[i].durable = true
					}
				}
			}
		}
	}
	s.mu.Unlock()
	time.Sleep(time.Microsecond) // the new owner's leases are granted after the move's end
	m.end = time.Now()
	s.mu.Lock()
	s.moves = append(s.moves, m)
	for _, l := range s.leases {
		s.movedLease(l)
	}
	s.mu.Unlock()
	s.moveIn(to, p)
	to.rn.Appended(topic, p, s.logs.Log(topic, p).HighWatermark())
	s.report.Faults.Moves++
	s.logf("move %d from %s to %s (persisted at %v, dropped at %v)", p, from.id, to.id, s.since(persisted), s.since(m.dropped))
}
