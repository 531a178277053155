package router

import (
	"slices"
	"time"

	"narad.dev/consume/offsets"
)

// PartitionStatus is where one partition of this node stands: how far its consumers are
// behind, and what holds them back. It is a snapshot; each count is exact at its read, the
// set as a whole is not one instant.
type PartitionStatus struct {
	Topic     string
	Partition int32
	// Owner is the node that reported the status, as Routes names it, for a partition
	// another node owns (QueueStatus asks the owners); "" for this node's partitions, and
	// for a partition no owner was asked about (Err says why).
	Owner string
	// Loaded says the node holds the partition's in-flight state: it was touched since the
	// node started (or since DropPartition); the first consume, ack or other call naming the
	// partition loads it. Asking for the status loads nothing: of a partition not loaded,
	// Frontier, Backlog, OldestUnsettledAge, AckedAhead, Quarantined and Requeued are read
	// from its state files, or with a Config.Store from the store (one StateStore.Load per
	// such partition per status, within the store's timeout), as a restart would find them
	// (records an ordered topic parked behind their keys count as acked ahead there), and
	// Leased, Delayed and Keys are zero: nothing is in flight on this node. Frontier is -1
	// and the counts zero when the state cannot be read.
	Loaded bool
	// Frontier is the committed frontier: every offset at or below it is settled (acked,
	// skipped as corrupt or past retention, or quarantined).
	Frontier int64
	// HighWatermark is the log's next offset to be written, as Logs answers now (-1 if the
	// log could not be resolved; Err says why).
	HighWatermark int64
	// Backlog is how many offsets lie above the frontier and below the high watermark,
	// HighWatermark - 1 - Frontier: the records not yet settled, whether leased, acked
	// ahead of a gap, delayed or never delivered. Zero means drained.
	Backlog int64
	// OldestUnsettledAge is the age of the oldest record not yet settled, the one just above
	// Frontier (as SQS's ApproximateAgeOfOldestMessage is the age of a queue's oldest
	// message): the node's clock at the call less the record's Record.Timestamp, which one
	// Read of the log at the call fetches. It is worked out at each call, never kept. A
	// dashboard alerts on it: a consumer that stalls makes it grow with the clock, a backlog
	// that merely grows does not.
	//
	// It is zero when nothing is unsettled (Backlog zero), and zero too for a record stamped
	// after the node's now (the host's clock ahead of the node's). It is -1 when it is not
	// known: the partition's persisted state could not be read, the log keeps no
	// timestamps (a zero Record.Timestamp), the Read failed (the record is corrupt, retention
	// removed it meanwhile, the log closed), or the log could not be resolved (Err).
	OldestUnsettledAge time.Duration
	// Leased: records held under a live lease (in flight). Delayed: records a nack or a
	// backoff keeps invisible for now. AckedAhead: records acked above the frontier,
	// waiting for the gap below them to close. Quarantined: records set aside after
	// TopicConfig.MaxDeliveries, waiting for Requeue. Requeued: quarantined records brought
	// back and not yet delivered again.
	Leased, Delayed, AckedAhead, Quarantined, Requeued int
	// Keys counts an ordered topic's keys (TopicConfig.Ordered): held by a consumer, blocked
	// (records waiting behind a holder, a delay or a redelivery), the records deferred
	// behind them, and since when the key blocked longest has been blocked.
	Keys KeyStats
	// ParkedOnTopic counts the consumers parked on the topic, any of whose partitions
	// serves them; ParkedOnPartition those of them pinned to this partition.
	ParkedOnTopic, ParkedOnPartition int
	// SetAside is set when the partition's state could not be loaded (see Health): the
	// partition serves nothing until a retry loads it.
	SetAside *SetAsideError
	// Err is the host's error resolving the partition's log (Logs.Get), if it failed, or
	// what the host answered wrongly about it (ErrHostContract: a nil Log, watermarks that
	// break the Log's contract, routes that name the partition wrongly).
	Err error
}

// Drained reports whether every record the log holds is settled: the partition is loaded,
// healthy, and its frontier has reached the high watermark. A partition that is not loaded
// is not known to be drained (its state is on disk until a call loads it).
func (s PartitionStatus) Drained() bool {
	return s.Loaded && s.SetAside == nil && s.Err == nil && s.Backlog == 0
}

// PartitionStatus returns where a partition of this node stands: its frontier, its log's high
// watermark, its backlog, and what is in flight, delayed, acked ahead or quarantined. It is
// read-only: a partition the node has not loaded is reported as not loaded, and nothing is
// created for it. It answers ErrUnknownTopic for a topic Routes does not know, ErrNotLocal
// for a partition another node owns, ErrInvalidArgument for a negative one or a topic name
// out of bounds (empty, or longer than MaxTopicLength), and ErrClosed once Close has begun.
func (n *Node) PartitionStatus(topic string, partition int32) (PartitionStatus, error) {
	if !n.life.fence.enter() {
		return PartitionStatus{}, ErrClosed
	}
	defer n.life.fence.leave()
	if err := checkTopic(topic); err != nil {
		return PartitionStatus{}, err
	}
	if err := checkPartition(partition); err != nil {
		return PartitionStatus{}, err
	}
	local, _, ok, verdict := n.partitions(topic)
	switch {
	case !ok:
		return PartitionStatus{}, ErrUnknownTopic
	case !slices.Contains(local, partition):
		return PartitionStatus{}, ErrNotLocal
	}
	return n.partitionStatus(topic, partition, n.pump.Parked(topic), verdict), nil
}

// TopicStatus returns the PartitionStatus of each of the topic's partitions this node owns,
// ascending by partition (QueueStatus: every partition, the other owners' too). It answers
// ErrUnknownTopic for a topic Routes does not know, and ErrInvalidArgument for a topic name
// out of bounds.
func (n *Node) TopicStatus(topic string) ([]PartitionStatus, error) {
	if !n.life.fence.enter() {
		return nil, ErrClosed
	}
	defer n.life.fence.leave()
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	local, _, ok, verdict := n.partitions(topic)
	if !ok {
		return nil, ErrUnknownTopic
	}
	partitions := slices.Clone(local)
	slices.Sort(partitions)
	parked := n.pump.Parked(topic)
	out := make([]PartitionStatus, 0, len(partitions))
	for _, p := range slices.Compact(partitions) {
		out = append(out, n.partitionStatus(topic, p, parked, verdict))
	}
	return out, nil
}

func (n *Node) partitionStatus(topic string, partition int32, parked int, verdict *routesVerdict) PartitionStatus {
	st := PartitionStatus{
		Topic: topic, Partition: partition, Frontier: -1, HighWatermark: -1, OldestUnsettledAge: -1,
		ParkedOnTopic: parked, ParkedOnPartition: n.pump.ParkedOn(topic, partition),
	}
	log, err := n.resolveLog(topic, partition, verdict)
	var oldest int64
	if err == nil {
		var hwm int64
		oldest, hwm = log.Oldest(), log.HighWatermark() // in this order: see checkWatermarks
		if err = n.checkWatermarks(topic, partition, oldest, hwm); err == nil {
			st.HighWatermark = hwm
		}
	}
	st.Err = err
	if shard, ok := n.tracker.Lookup(topic, partition); ok {
		s := shard.Stats()
		st.Loaded = true
		st.Frontier = s.Frontier
		st.Leased, st.Delayed, st.AckedAhead = s.Leased, s.Delayed, s.AckedAhead
		st.Quarantined, st.Requeued = s.Quarantined-s.Requeued, s.Requeued
		st.Keys = s.Keys
		if st.HighWatermark >= 0 {
			st.Backlog = max(0, st.HighWatermark-1-st.Frontier)
			st.OldestUnsettledAge = n.oldestUnsettledAge(log, max(st.Frontier+1, oldest), st.Backlog)
		}
	} else if st.HighWatermark >= 0 && !n.moves.isFenced(topic, partition) {
		n.persistedStatus(&st, log, oldest)
	}
	st.SetAside = n.setAside.lookup(shardKey{topic, partition})
	return st
}

// statePeeker is what both committers offer (offsets.Committer.Peek, the state store's):
// a partition's persisted state read for a look, with nothing logged or counted.
type statePeeker interface {
	Peek(topic string, partition int32) (offsets.State, error)
}

// persistedStatus fills the counts of a partition not loaded from its persisted files, read
// and not kept (no shard is made): the frontier (or the log's oldest retained offset less one,
// where nothing is persisted), the backlog above it, the offsets acked ahead and quarantined,
// and the age of its oldest unsettled record. A state that cannot be read leaves them as they
// are (Frontier -1, counts zero).
func (n *Node) persistedStatus(st *PartitionStatus, log Log, oldest int64) {
	peek, ok := n.committer.(statePeeker)
	if !ok {
		return
	}
	files, err := peek.Peek(st.Topic, st.Partition)
	if err != nil {
		return
	}
	st.Frontier = oldest - 1
	if files.Found {
		st.Frontier = max(files.Frontier, oldest-1)
	}
	for _, r := range files.Ahead {
		if first, last := max(r.First, st.Frontier+1), min(r.Last, st.HighWatermark-1); first <= last {
			st.AckedAhead += int(last - first + 1)
		}
	}
	st.Quarantined, st.Requeued = len(files.Quarantine), len(files.Requeued)
	st.Backlog = max(0, st.HighWatermark-1-st.Frontier)
	st.OldestUnsettledAge = n.oldestUnsettledAge(log, st.Frontier+1, st.Backlog)
}

// oldestUnsettledAge is PartitionStatus.OldestUnsettledAge of a partition whose oldest
// unsettled offset is off, with backlog records unsettled: one Read of log, none when
// nothing is unsettled.
func (n *Node) oldestUnsettledAge(log Log, off, backlog int64) time.Duration {
	if backlog == 0 {
		return 0
	}
	rec, err := log.Read(off)
	if err != nil || rec.Timestamp.IsZero() {
		return -1
	}
	return max(n.clock.Now().Sub(rec.Timestamp), 0)
}

// TopicSummary is what a topic's PartitionStatus add up to (see Summarize), for a dashboard
// that watches topics rather than partitions.
type TopicSummary struct {
	Partitions int   // the statuses summed
	Backlog    int64 // the sum of their Backlog
	// OldestUnsettledAge is the greatest OldestUnsettledAge of those known: the age of the
	// topic's oldest unsettled record, as far as it is known; -1 when none is known.
	OldestUnsettledAge time.Duration
	// AgeUnknown counts the partitions whose OldestUnsettledAge is not known (not loaded, no
	// timestamps, a failed read): the age above is a lower bound while it is not zero.
	AgeUnknown int
	// Uncounted counts the partitions whose backlog is not known (HighWatermark -1: the log
	// could not be resolved, or its owner did not answer QueueStatus): Backlog is a lower
	// bound while it is not zero.
	Uncounted int
	// BlockedKeys and Deferred are the sums of an ordered topic's Keys.BlockedKeys and
	// Keys.Deferred; OldestBlockedSince the earliest Keys.OldestBlockedSince (zero: none).
	BlockedKeys, Deferred int
	OldestBlockedSince    time.Time
	// QuarantinedKeys is the sum of Keys.QuarantinedKeys (TopicConfig.QuarantineKeys).
	QuarantinedKeys int
}

// Summarize sums statuses (a topic's, as TopicStatus or QueueStatus returns them): the backlogs add up, and
// the age of the oldest unsettled record is the greatest known.
func Summarize(statuses []PartitionStatus) TopicSummary {
	sum := TopicSummary{Partitions: len(statuses), OldestUnsettledAge: -1}
	for i := range statuses {
		s := &statuses[i]
		sum.Backlog += s.Backlog
		if s.HighWatermark < 0 {
			sum.Uncounted++
		}
		sum.BlockedKeys += s.Keys.BlockedKeys
		sum.Deferred += s.Keys.Deferred
		sum.QuarantinedKeys += s.Keys.QuarantinedKeys
		if since := s.Keys.OldestBlockedSince; !since.IsZero() && (sum.OldestBlockedSince.IsZero() || since.Before(sum.OldestBlockedSince)) {
			sum.OldestBlockedSince = since
		}
		if s.OldestUnsettledAge < 0 {
			sum.AgeUnknown++
			continue
		}
		sum.OldestUnsettledAge = max(sum.OldestUnsettledAge, s.OldestUnsettledAge)
	}
	return sum
}

// lookup returns the error a call naming a set-aside partition answers, or nil.
func (t *setAsideTable) lookup(key shardKey) *SetAsideError {
	if t.count.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.parts[key]; ok {
		return e.errorOf().(*SetAsideError)
	}
	return nil
}
