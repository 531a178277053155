package sqsapi

import (
	"context"
	"slices"
	"time"

	"narad.dev/consume/router"
)

// A handler rebuilds a FIFO queue's deduplication window from the queue's log at the
// queue's first send after it started: the records of the last DeduplicationWindow carry
// their MessageDeduplicationId (deduplicationHeader) and the time of their send
// (router.Record.Timestamp, which sendFIFO stamps on the handler's clock), so that a send
// retried across a restart is deduplicated as one retried before it.

// A Replayer is a Node that reads a partition's records back without leasing them, found by
// type assertion: router.Node.Replay. A handler whose node is one rebuilds each FIFO queue's
// deduplication window from the log at the queue's first send; one whose node is not starts
// each window empty.
type Replayer interface {
	Replay(ctx context.Context, topic string, partition int32, offset int64, limit int) ([]router.Message, error)
}

var _ Replayer = (*router.Node)(nil)

// replayBatch is how many records one Replay of the rebuild asks for: the node's bound on a
// consume's batch, which the front ends keep to.
const replayBatch = router.MaxBatch

// recoveredID is a deduplication id the log holds.
type recoveredID struct {
	key       string
	at        time.Time
	partition int32
	offset    int64
}

// recoverWindow rebuilds queue's deduplication window from its log, once per handler (and
// again after DeleteQueue forgets the window): the first send of the queue reads, the others
// wait for it. A rebuild that failed is tried again by the next send, and fails this one, so
// that a send is never taken for new for want of the log's ids.
func (h *Handler) recoverWindow(ctx context.Context, queue string, ref *queueRef) error {
	replayer, ok := h.node.(Replayer)
	if !ok {
		return nil
	}
	for {
		done, mine := h.dedup.startRecovery(queue)
		switch {
		case done == nil:
			return nil
		case !mine:
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		now := h.now()
		since := now.Add(-DeduplicationWindow)
		if ref.rec.Created.After(since) { // what a queue of the name deleted before sent is its own
			since = ref.rec.Created
		}
		ids, err := readDeduplicationIDs(ctx, replayer, h.queueStatus, ref.topic, ref.rec.Attributes[attrDeduplicationScope] == "messageGroup", since)
		h.dedup.endRecovery(queue, done, ids, err, now)
		return err
	}
}

// readDeduplicationIDs reads the deduplication ids of topic's records sent since then,
// oldest first, keyed as sendFIFO keys them (with the group
// for a DeduplicationScope of messageGroup). Of each partition it reads at most
// MaxDeduplicationIDs records, the newest, from the first of the window on (found by a binary
// search over their timestamps, about 17 single-record reads), and keeps the newest
// MaxDeduplicationIDs; a record without a timestamp or a deduplication id, or that a redrive
// wrote, is passed over.
func readDeduplicationIDs(ctx context.Context, rp Replayer, status func(context.Context, string) ([]router.PartitionStatus, error), topic string, byGroup bool, since time.Time) ([]recoveredID, error) {
	parts, err := status(ctx, topic)
	if err != nil {
		return nil, err
	}
	var ids []recoveredID
	for _, st := range parts {
		if st.Err != nil {
			return nil, st.Err
		}
		hw := st.HighWatermark
		start, err := firstSince(ctx, rp, topic, st.Partition, max(0, hw-MaxDeduplicationIDs), hw, since)
		if err != nil {
			return nil, err
		}
		for off := start; off < hw; {
			msgs, err := rp.Replay(ctx, topic, st.Partition, off, replayBatch)
			if err != nil {
				return nil, err
			}
			if len(msgs) == 0 {
				break
			}
			for i := range msgs {
				m := &msgs[i]
				off = m.Offset + 1
				if m.Offset >= hw || m.Timestamp.Before(since) {
					continue
				}
				id, ok := deduplicationIDOf(m.Headers)
				if !ok || hasHeader(m.Headers, deadLetterSourceHeader) {
					continue
				}
				key := string(id)
				if byGroup {
					key = string(m.Key) + "\x00" + key
				}
				ids = append(ids, recoveredID{key: key, at: m.Timestamp, partition: m.Partition, offset: m.Offset})
			}
		}
		ids = newest(ids)
	}
	slices.SortStableFunc(ids, func(a, b recoveredID) int { return a.at.Compare(b.at) })
	return ids, nil
}

// newest keeps the newest MaxDeduplicationIDs of ids, all the window can hold: what the
// rebuild holds stays within twice that, whatever the queue's partitions.
func newest(ids []recoveredID) []recoveredID {
	if len(ids) <= MaxDeduplicationIDs {
		return ids
	}
	slices.SortStableFunc(ids, func(a, b recoveredID) int { return a.at.Compare(b.at) })
	return append(ids[:0], ids[len(ids)-MaxDeduplicationIDs:]...)
}

// firstSince is the lowest offset in [lo, hi) of partition whose record was sent at or after
// since, taking the records' timestamps to grow with their offsets (a host's clock stepping
// back may hide a few ids from the rebuild); hi when there is none.
func firstSince(ctx context.Context, rp Replayer, topic string, partition int32, lo, hi int64, since time.Time) (int64, error) {
	for lo < hi {
		mid := lo + (hi-lo)/2
		msgs, err := rp.Replay(ctx, topic, partition, mid, 1)
		if err != nil {
			return 0, err
		}
		if len(msgs) == 0 || msgs[0].Offset >= hi { // none retained from mid on, below hi
			hi = mid
			continue
		}
		if m := &msgs[0]; m.Timestamp.Before(since) {
			lo = m.Offset + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// hasHeader reports whether headers hold one of key.
func hasHeader(headers []router.Header, key string) bool {
	for i := range headers {
		if headers[i].Key == key {
			return true
		}
	}
	return false
}

// startRecovery answers whether queue's window is to be rebuilt: nil when it was, or a
// channel that closes once the rebuild in progress ends (mine: the caller's to do, and end
// with endRecovery).
func (d *dedupWindows) startRecovery(queue string) (done chan struct{}, mine bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.recovered == nil {
		d.recovered = map[string]chan struct{}{}
	}
	done, seen := d.recovered[queue]
	switch {
	case !seen:
		done = make(chan struct{})
		d.recovered[queue] = done
		return done, true
	case done == nil:
		return nil, false
	}
	return done, false
}

// endRecovery ends the rebuild startRecovery handed out: ids (oldest first) enter queue's
// window, unless it holds their keys already or they are DeduplicationWindow old by now; err
// leaves the window to be rebuilt by the next send.
func (d *dedupWindows) endRecovery(queue string, done chan struct{}, ids []recoveredID, err error, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer close(done)
	if d.recovered[queue] != done {
		return // the queue was deleted meanwhile
	}
	if err != nil {
		delete(d.recovered, queue)
		return
	}
	d.recovered[queue] = nil
	if len(ids) == 0 {
		return
	}
	w := d.window(queue, now)
	w.expire(now)
	live := w.order[w.head:]
	merged := make([]*dedupEntry, 0, len(ids)+len(live))
	for _, id := range ids {
		if _, dup := w.ids[id.key]; dup || !now.Before(id.at.Add(DeduplicationWindow)) {
			continue
		}
		done := make(chan struct{})
		close(done)
		e := &dedupEntry{key: id.key, at: id.at, done: done, partition: id.partition, offset: id.offset,
			messageID: string(appendMessageID(nil, id.partition, id.offset))}
		w.ids[id.key] = e
		merged = append(merged, e)
	}
	merged = append(merged, live...)
	slices.SortStableFunc(merged, func(a, b *dedupEntry) int { return a.at.Compare(b.at) })
	w.order, w.head = merged, 0
	for len(w.ids) > MaxDeduplicationIDs {
		w.forgetOldest()
	}
}
