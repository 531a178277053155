package tokens

import "time"

// A Wake tells a consumer parked on this node where a record waits for it on another node.
type Wake struct {
	// Owner is the node to claim the record from.
	Owner string
	// Claim is true for a wake that came from a notification: the owner holds a record for
	// this node, and the claim carries the Claim flag so that it retires the hold. False is a
	// plain probe ticket, whose consume must go out without the flag.
	Claim bool
	// Until is when the owner stops holding the record, on this node's clock; a wake is live
	// while now is before it. A wake past it is discarded: the record may have been promised
	// to another peer by then.
	Until time.Time
}

// An Inbox holds the wakes waiting for a consumer parked on one topic, oldest first. A
// consumer takes one (Pop, or PopFrom when it is pinned to a partition of one owner); one
// that cannot use the wake it took (it was served locally, or its wait ran out at that
// instant) puts it back at the head (PushFront) for the next consumer, and when nobody is
// left to take them, Drain hands every live wake over to be passed, so that each owner's
// hold is retired at once rather than at its deadline.
//
// Every method that takes now first discards the lapsed wakes. The wakes held are few (about
// one per notification in flight), and Pop, PopFrom and Drain are linear in them.
//
// The zero value is empty and ready to use. An Inbox reads no clock and is not safe for
// concurrent use.
type Inbox struct {
	wakes ring[Wake]
}

// Push adds w at the tail.
func (i *Inbox) Push(w Wake) { i.wakes.pushBack(w) }

// PushFront puts w back at the head: a consumer took it and could not use it, and the next
// consumer should have it before any later wake.
func (i *Inbox) PushFront(w Wake) { i.wakes.pushFront(w) }

// Pop removes and returns the oldest live wake. ok is false when there is none.
func (i *Inbox) Pop(now time.Time) (w Wake, ok bool) {
	i.discardLapsed(now)
	if i.wakes.n == 0 {
		return Wake{}, false
	}
	w = i.wakes.popFront()
	i.wakes.shrink()
	return w, true
}

// PopFrom removes and returns the oldest live wake from owner, for a consumer that can take
// records only from that owner (it is pinned to one of its partitions). ok is false when
// there is none; wakes from other owners stay in place.
func (i *Inbox) PopFrom(owner string, now time.Time) (w Wake, ok bool) {
	i.discardLapsed(now)
	for k := range i.wakes.n {
		if i.wakes.at(k).Owner == owner {
			w = i.wakes.remove(k)
			i.wakes.shrink()
			return w, true
		}
	}
	return Wake{}, false
}

// Drain takes every live wake out of the inbox and calls f with each, oldest first, and
// discards the lapsed ones. f may use the inbox: a wake it pushes back stays there.
func (i *Inbox) Drain(now time.Time, f func(Wake)) {
	i.discardLapsed(now)
	taken := i.wakes
	i.wakes = ring[Wake]{}
	for taken.n > 0 {
		f(taken.popFront())
	}
	if i.wakes.buf == nil {
		taken.shrink()
		i.wakes = taken // reuse the buffer, now empty
	}
}

// Len returns the number of wakes held, lapsed ones included until a call with a later now
// discards them.
func (i *Inbox) Len() int { return i.wakes.n }

func (i *Inbox) discardLapsed(now time.Time) {
	i.wakes.filter(func(w *Wake) bool { return now.Before(w.Until) })
	i.wakes.shrink()
}
