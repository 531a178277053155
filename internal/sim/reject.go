package sim

import "narad.dev/consume/internal/wire"

// Rejects. In some runs (drawn from a stream of their own, so that a run without them draws
// what it drew before they were simulated) a few of the consumers' settles are rejects
// (router.Node.Reject), through any node. The model takes a reject answered success as a
// settle for good, as an ack is: the record is not lost (the verdict counts it settled), it
// is not delivered again unless a crash window or a disk fault of its owner explains it (the
// check of an acked record's redelivery), and its lease ends. Every process reports its
// quarantines through Config.OnQuarantine in such runs; a quarantine of a record a reject
// may have set aside (one in flight, or one answered success or 502) is exempt from the
// early-quarantine check of MaxDeliveries. A reject answered ErrUnsupportedOp is one the
// path cannot carry (the node it was made on, or the owner, speaks a version before 10): it
// must change nothing, so the lease stays live in the model (a nack in its place would
// break one live holder, an ack the verdict), and on a path that speaks version 10 end to
// end it breaks the promise.

// planRejects turns rejects on in some runs, or as Options.Rejects says.
func (s *sim) planRejects() {
	rr, on := s.degradeClass(0x72656a6563742e73, s.opts.Rejects) // "reject.s"
	if on {
		s.rejects = rr
	}
}

// maybeReject turns a settle the driver drew into a reject now and then, in runs with
// rejects: about one in six.
func (s *sim) maybeReject(op settleOp) settleOp {
	if s.rejects == nil || s.rejects.IntN(6) != 0 {
		return op
	}
	return opReject
}

// rejecting counts a reject of record k in flight (d is 1 as it leaves, -1 once answered),
// so that the quarantine it causes, told before it is answered, is not taken for an early
// one.
func (s *sim) rejecting(k key, d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.records[k]; r != nil {
		r.rejecting += d
	}
}

// rejectRefusedLocked checks a reject answered ErrUnsupportedOp through via, for partition p
// whose state owner holds: only a path with a node before version 10 on it may refuse it (the
// owner via's routes name included: stale routes may name an older node than owner).
// Called with s.mu held.
func (s *sim) rejectRefusedLocked(what string, via, owner *node, p int32) {
	if routed := s.routedOwner(via, p); routed != nil && !routed.knows(wire.V10) {
		s.report.RejectsRefused++
		return
	}
	if owner == nil || via.knows(wire.V10) && owner.knows(wire.V10) {
		s.failKind(KindSettleAnswer, "%s answered ErrUnsupportedOp on a path that speaks version 10 end to end", what)
		return
	}
	s.report.RejectsRefused++
}

// rewriteOp rewrites every record of op from (alone or in an AckBatch) of a settle frame
// as a nack with no delay (the planted bugs PlantReleaseAsNack and PlantRejectAsNack).
func rewriteOp(frame []byte, from byte) []byte {
	if len(frame) == 0 || frame[0] != from && frame[0] != wire.OpAckBatch {
		return frame
	}
	req, err := wire.DecodeRequest(frame, wire.Newest)
	if err != nil {
		return frame
	}
	if req.Op == from {
		req.Op = wire.OpNack
	}
	for i := range req.Records {
		if req.Records[i].Op == from {
			req.Records[i].Op, req.Records[i].Arg = wire.OpNack, 0
		}
	}
	if out, err := wire.EncodeRequest(req); err == nil {
		return out
	}
	return frame
}

// rejectState is what a record's model keeps of its rejects.
type rejectState struct {
	// rejecting counts the rejects of the record in flight; maybeRejected says one was
	// answered success or 502, so an owner may have set the record aside for it.
	rejecting     int
	maybeRejected bool
}

// rejectExempt reports whether a quarantine of r told now may be a reject's. Called with
// s.mu held.
func (r *record) rejectExempt() bool { return r.rejecting > 0 || r.maybeRejected }
