package router

import (
	"context"
	"errors"
	"time"

	"narad.dev/consume/inflight"
)

// Ack settles the delivery a receipt handle names. Only the live lease's handle settles:
// a handle whose lease expired (leased again or not), was nacked, or comes from before a
// restart gets inflight.ErrGone (the 410) and changes nothing; a handle of an offset already
// settled gets inflight.ErrAlreadySettled, which a host answers as success (a retried ack
// whose reply was lost); a malformed handle gets inflight.ErrMalformedHandle (a 400).
//
// The ack is in memory at once, in the page cache within about 100 ms and on disk within
// about the commit interval; a graceful Close persists it.
func (n *Node) Ack(ctx context.Context, topic, handle string) error {
	return n.settle(topic, handle, func(s *inflight.Shard, now time.Time, h inflight.Handle) error {
		return s.Ack(now, h)
	})
}

// AckDurable is Ack that returns only once the ack is on disk: after the committer's next
// writeout of the partition, which a durable ack makes due on the next tick. It is a group
// commit: every durable ack of the partition in that tick shares one sync, never one per
// ack. It costs about a tick (100 ms) plus the sync, for hosts that need Kafka-like
// durability for some acks; Ack stays asynchronous. A retried durable ack of a settled
// offset waits as well, then answers inflight.ErrAlreadySettled. If the partition's state
// cannot be made durable (the partition was dropped or its directory replaced) the error
// says so (offsets.ErrShardGone, offsets.ErrStranded): the ack is in memory only.
func (n *Node) AckDurable(ctx context.Context, topic, handle string) error {
	err := n.Ack(ctx, topic, handle)
	if err != nil && !errors.Is(err, inflight.ErrAlreadySettled) {
		return err
	}
	h, _ := inflight.ParseHandle(handle) // Ack parsed it already
	if werr := n.committer.Durable(ctx, topic, h.Partition); werr != nil {
		return werr
	}
	return err
}

// Extend re-arms the lease a handle names to expire d from now (the topic's visibility
// timeout when d is zero), within the topic's MaxExtension and MaxLeaseLifetime, and returns
// the new expiry. Errors as for Ack.
func (n *Node) Extend(ctx context.Context, topic, handle string, d time.Duration) (time.Time, error) {
	var expiry time.Time
	err := n.settle(topic, handle, func(s *inflight.Shard, now time.Time, h inflight.Handle) error {
		var err error
		expiry, err = s.Extend(now, h, d)
		return err
	})
	return expiry, err
}

// Nack releases the lease a handle names. With delay zero the record is visible again at
// once and a parked consumer gets it; otherwise it stays invisible for delay. Errors as for
// Ack.
func (n *Node) Nack(ctx context.Context, topic, handle string, delay time.Duration) error {
	return n.settle(topic, handle, func(s *inflight.Shard, now time.Time, h inflight.Handle) error {
		return s.Nack(now, h, delay)
	})
}

// Release gives the lease a handle names back unprocessed, as if it had never been granted:
// the record is visible again at once, a parked consumer gets it, and the delivery does not
// count as an attempt. A consumer that shuts down calls it for what it holds but has not
// begun to process. Errors as for Ack.
func (n *Node) Release(ctx context.Context, topic, handle string) error {
	return n.settle(topic, handle, func(s *inflight.Shard, now time.Time, h inflight.Handle) error {
		if err := s.GiveBack(now, h); err != nil {
			return err
		}
		n.pump.NotifyPartition(topic, h.Partition)
		return nil
	})
}

// AckBatch acks several handles of one topic and answers each on its own, in order, with
// what Ack would have answered.
func (n *Node) AckBatch(ctx context.Context, topic string, handles []string) []error {
	errs := make([]error, len(handles))
	for i, h := range handles {
		errs[i] = n.Ack(ctx, topic, h)
	}
	return errs
}

// settle parses a handle and applies op to the live shard of its partition. A partition
// this node owns but has not touched since it started is loaded, so that a handle of an
// offset settled before the restart answers ErrAlreadySettled rather than ErrGone.
func (n *Node) settle(topic, handle string, op func(*inflight.Shard, time.Time, inflight.Handle) error) error {
	h, err := inflight.ParseHandle(handle)
	if err != nil {
		return err
	}
	shard, err := n.localShard(topic, h.Partition)
	if err != nil {
		return err
	}
	return op(shard, n.clock.Now(), h)
}
