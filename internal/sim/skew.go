package sim

import (
	"time"

	"narad.dev/consume/router"
)

// Clock skew. In some runs each node reads a clock of its own (Config.Clock): the bubble's
// plus an offset of its own, up to a visibility timeout either way, for the node's whole
// life, its restarts included (the machine's clock). A constant offset changes no
// duration, so AfterFunc counts as the bubble's clock does. Nothing a node does may depend
// on another node's clock: lease times cross the node wire as durations (wire version 7:
// a Consume's relative expiry, an Extend answered as ExtendLeft), tokens and holds carry
// times to live, and every window and budget is a duration on one node's clock.
//
// The model keeps every time in the bubble's true time. What a node reports on its own
// clock (a locally consumed record's Expiry, a local or forwarded Extend's new expiry, a
// record relayed from another owner, its expiry counted on the requester's clock from
// when its request left) it converts by the node's offset; an owner's consume reply
// carrying a lease's time left is read on the bubble's clock as it leaves the owner. The
// checks that compare times (a lease's grant and end, an ack's window, a crash's window,
// the durability interval) then compare true times.
//
// An older release (wire version below 7) sends a lease's expiry as a time on its own
// clock, and its requester believes it: across skewed clocks a lease can really look
// longer to the consumer than it is, the older release's documented limit. So skew is
// drawn only in runs whose nodes all speak the newest wire version.

// skewClock is a node's clock, off the bubble's by offset.
type skewClock struct{ offset time.Duration }

func (c skewClock) Now() time.Time { return time.Now().Add(c.offset) }

func (c skewClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	return time.AfterFunc(d, f).Stop
}

// drawSkew gives each node its clock's offset, in runs that draw skew (from a stream of
// their own, so that a run without skew draws what it drew before skew was simulated) and
// whose nodes all speak the newest wire version: one of -vt, -1 s, -1 ms, 0, 1 ms, 1 s
// and vt, vt being the topic's visibility timeout.
func (s *sim) drawSkew() {
	sk, on := s.degradeClass(0x736b65772e73696d, s.opts.Skew) // "skew.sim"
	if !on {
		return
	}
	for _, nd := range s.nodes {
		if nd.version != 0 {
			return
		}
	}
	offsets := []time.Duration{-s.vt, -time.Second, -time.Millisecond, 0, time.Millisecond, time.Second, s.vt}
	s.report.Skew = make([]time.Duration, len(s.nodes))
	for i, nd := range s.nodes {
		nd.skew = offsets[sk.IntN(len(offsets))]
		s.report.Skew[i] = nd.skew
		if nd.skew != 0 {
			s.report.Faults.SkewedNodes++
		}
	}
}

// clock returns the clock nd's processes read: nil (the node's default, the bubble's
// clock) unless nd's is skewed.
func (nd *node) clock() router.Clock {
	if nd.skew == 0 {
		return nil
	}
	return skewClock{nd.skew}
}

// trueTime converts t, read on nd's clock, to the bubble's. The zero time stays zero.
func (nd *node) trueTime(t time.Time) time.Time {
	if t.IsZero() || nd == nil {
		return t
	}
	return t.Add(-nd.skew)
}
