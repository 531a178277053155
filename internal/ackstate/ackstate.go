package ackstate

import (
	"narad.dev/consume/inflight"
	"narad.dev/consume/offsets"
)

// ToInflight returns the shard's form of st, a state a committer loaded, for a shard to be
// restored from. Its acked-ahead runs, key tails and attempts are new slices, nil when st has
// none; Quarantined and Requeued are st's slices.
func ToInflight(st *offsets.State) inflight.State {
	out := inflight.State{Frontier: st.Frontier, Quarantined: st.Quarantine, Requeued: st.Requeued,
		Incarnation: st.Incarnation, HostIncarnation: st.HostIncarnation, Fence: st.Fence, Epoch: st.Epoch}
	if len(st.Ahead) > 0 {
		out.AckedAhead = make([]inflight.Run, len(st.Ahead))
		for i, r := range st.Ahead {
			out.AckedAhead[i] = inflight.Run(r)
		}
	}
	if len(st.KeyTails) > 0 {
		out.KeyTails = make([]inflight.KeyTail, len(st.KeyTails))
		for i, k := range st.KeyTails {
			out.KeyTails[i] = inflight.KeyTail(k)
		}
	}
	if len(st.Attempts) > 0 {
		out.Attempts = make([]inflight.Attempt, len(st.Attempts))
		for i, a := range st.Attempts {
			out.Attempts[i] = inflight.Attempt(a)
		}
	}
	return out
}

// ToOffsets fills dst, a committer's form, with st, a shard's snapshot. The acked-ahead
// runs, the key tails and the attempts are appended to dst's own slices, truncated first, so that a dst
// reused from call to call allocates nothing once its slices are large enough (they stay
// nil when dst's were nil and st has none); Quarantine and Requeued become st's slices.
// Found, OmittedAttempts and Unverified are left as they were.
func ToOffsets(dst *offsets.State, st *inflight.State) {
	dst.Frontier = st.Frontier
	dst.Quarantine, dst.Requeued = st.Quarantined, st.Requeued
	dst.Incarnation, dst.HostIncarnation = st.Incarnation, st.HostIncarnation
	dst.Fence, dst.Epoch = st.Fence, st.Epoch
	dst.Ahead = dst.Ahead[:0]
	for _, r := range st.AckedAhead {
		dst.Ahead = append(dst.Ahead, offsets.Run(r))
	}
	dst.KeyTails = dst.KeyTails[:0]
	for _, k := range st.KeyTails {
		dst.KeyTails = append(dst.KeyTails, offsets.KeyTail(k))
	}
	dst.Attempts = dst.Attempts[:0]
	for _, a := range st.Attempts {
		dst.Attempts = append(dst.Attempts, offsets.Attempt(a))
	}
}
