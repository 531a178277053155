package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/acklane"
	"narad.dev/consume/internal/wire"
)

// A topic as one queue across the nodes that own its partitions: its status (QueueStatus)
// and its purge (PurgeQueue), each asking every other owner for its partitions with one
// frame of the node wire (version 12: Status, Purge), the owners in parallel, and the
// owner's side of those frames (serveStatus, servePurge).

const (
	// StatusBudget bounds QueueStatus's call to each owner (ctx bounds it further).
	StatusBudget = 2 * time.Second
	// PurgeBudget bounds PurgeQueue's call to each owner (ctx bounds it further): the
	// owner answers once its purges are on its disk.
	PurgeBudget = 10 * time.Second
)

// QueueStatus returns the PartitionStatus of every partition of topic, ascending by
// partition, wherever it is owned: this node's as TopicStatus reports them (Owner ""), and
// each other owner's as that owner reports it (Owner its name), asked with one frame per
// owner, the owners in parallel, each call bounded by StatusBudget and ctx. A partition not
// loaded counts what its persisted state says, on its owner as here: a node that has served
// nothing since it started counts its backlog all the same.
//
// A partition whose owner could not be asked, or did not answer, is reported uncounted
// (Frontier and HighWatermark -1, OldestUnsettledAge -1, the counts zero), with Err saying
// why: ErrUnsupportedOp for an owner on a release before node wire version 12 (or this node
// pinned below it), ErrTransport when no reply came back within the budget, ErrUnavailable
// for an owner the host says is down, ErrNotLocal without a Config.Transport, or the
// owner's refusal (a partition that moved, a node closing). Summarize counts them
// (TopicSummary.Uncounted). It answers ErrUnknownTopic for a topic Routes does not know,
// ErrInvalidArgument for a topic no frame can carry, and ErrClosed once Close has begun.
func (n *Node) QueueStatus(ctx context.Context, topic string) ([]PartitionStatus, error) {
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if !n.life.fence.enter() {
		return nil, ErrClosed
	}
	defer n.life.fence.leave()
	local, remote, ok, verdict := n.partitions(topic)
	if !ok {
		return nil, ErrUnknownTopic
	}
	asks, unasked := n.owners(topic, local, remote, verdict)
	answers := make([][]PartitionStatus, len(asks))
	var wg sync.WaitGroup
	for i, a := range asks {
		wg.Go(func() { answers[i] = n.remoteStatus(ctx, a.owner, topic, a.partitions) })
	}
	parked := n.pump.Parked(topic)
	out := make([]PartitionStatus, 0, len(local))
	for _, p := range sortedUnique(local) {
		out = append(out, n.partitionStatus(topic, p, parked, verdict))
	}
	for p, err := range unasked {
		out = append(out, uncounted(topic, p, "", err))
	}
	wg.Wait()
	for _, a := range answers {
		out = append(out, a...)
	}
	slices.SortFunc(out, func(a, b PartitionStatus) int { return cmp.Compare(a.Partition, b.Partition) })
	return out, nil
}

// PurgeQueue purges every partition of topic, wherever it is owned: this node's as
// PurgePartition does, and each other owner's by that owner, asked with one frame per owner,
// the owners in parallel, each call bounded by PurgeBudget and ctx. Each partition is purged
// below its log's high watermark as its owner reads it, and counts as purged once that is on
// its owner's disk (a crash or a power cut of the owner after it undoes nothing). It returns
// the offsets the frontiers moved over in all.
//
// It is not Purge, which purges this node's partitions alone: a host that calls Purge on
// each owner (as Purge's documentation says) would purge each partition once per node with
// PurgeQueue, and records appended meanwhile with it.
//
// A partition that could not be purged, or is not known to be (no reply came back in time:
// the owner may have purged it; or the owner's wait for its disk outlived the budget, and
// the purge stands in its memory, durable at its committer's pace), makes the error a *PurgeError naming each such partition
// and why (ErrUnsupportedOp for an owner on a release before node wire version 12,
// ErrTransport, ErrUnavailable, ErrNotLocal, the owner's refusal); the other partitions'
// purges stand, and the moved count is theirs. It answers ErrUnknownTopic for a topic Routes
// does not know, ErrInvalidArgument for a topic no frame can carry, and ErrClosed once Close
// has begun.
func (n *Node) PurgeQueue(ctx context.Context, topic string) (int64, error) {
	if err := checkTopic(topic); err != nil {
		return 0, err
	}
	if !n.life.fence.enter() {
		return 0, ErrClosed
	}
	defer n.life.fence.leave()
	local, remote, ok, verdict := n.partitions(topic)
	if !ok {
		return 0, ErrUnknownTopic
	}
	asks, failed := n.owners(topic, local, remote, verdict)
	type purged struct {
		moved  int64
		failed map[int32]error
	}
	answers := make([]purged, len(asks))
	var wg sync.WaitGroup
	for i, a := range asks {
		wg.Go(func() { answers[i].moved, answers[i].failed = n.remotePurge(ctx, a.owner, topic, a.partitions) })
	}
	moved, localFailed := n.purgeLocal(ctx, topic, sortedUnique(local))
	maps.Copy(failed, localFailed)
	wg.Wait()
	for _, a := range answers {
		moved += a.moved
		maps.Copy(failed, a.failed)
	}
	if len(failed) > 0 {
		return moved, &PurgeError{Topic: topic, Failed: failed}
	}
	return moved, nil
}

// PurgeError is PurgeQueue's error when some partitions of a topic could not be purged, or
// are not known to be: Failed maps each to why. errors.Is reaches each partition's error.
type PurgeError struct {
	Topic  string
	Failed map[int32]error
}

func (e *PurgeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "router: purge of %s: not purged:", e.Topic)
	for i, p := range slices.Sorted(maps.Keys(e.Failed)) {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " partition %d (%v)", p, e.Failed[p])
	}
	return b.String()
}

// Unwrap returns the partitions' errors, in order of partition.
func (e *PurgeError) Unwrap() []error {
	errs := make([]error, 0, len(e.Failed))
	for _, p := range slices.Sorted(maps.Keys(e.Failed)) {
		errs = append(errs, e.Failed[p])
	}
	return errs
}

// purgeLocal purges partitions of topic, this node's (purgeHere): the offsets moved over, and
// the partitions not purged with why.
func (n *Node) purgeLocal(ctx context.Context, topic string, partitions []int32) (int64, map[int32]error) {
	var total int64
	failed := map[int32]error{}
	moved, errs := n.purgeHere(ctx, topic, partitions)
	for i, p := range partitions {
		total += moved[i]
		if errs[i] != nil {
			failed[p] = errs[i]
		}
	}
	return total, failed
}

// purgeHere purges partitions of topic, this node's, as PurgePartition does, and waits for
// the disk once all are settled, so that one writeout carries them: the offsets each
// partition's frontier moved over, and why each not purged was not (nil for the others;
// ctx's error for one settled whose writeout outlived ctx, the purge standing in memory and
// durable at the committer's pace). A partition whose shard was dropped meanwhile (ErrGone)
// counts as purged, with nothing moved, as Purge counts it.
func (n *Node) purgeHere(ctx context.Context, topic string, partitions []int32) (moved []int64, errs []error) {
	moved, errs = make([]int64, len(partitions)), make([]error, len(partitions))
	settled := make([]int, 0, len(partitions))
	for i, p := range partitions {
		m, err := n.settleBelowWatermark(topic, p)
		switch {
		case errors.Is(err, inflight.ErrGone):
		case err != nil:
			errs[i] = err
		default:
			moved[i] = m
			settled = append(settled, i)
		}
	}
	for _, i := range settled {
		errs[i] = n.committer.Durable(ctx, topic, partitions[i])
	}
	return moved, errs
}

// ownerAsk is the partitions of a topic one other owner is asked about.
type ownerAsk struct {
	owner      string
	partitions []int32 // ascending, unique
}

// owners sorts the remote partitions of a topic into the owners to ask and those that
// cannot be asked (unasked, with why): a partition this node owns too, or that the routes
// name wrongly, is not asked about (the routes' verdict says why; a local one is counted
// here); without a transport, with this node pinned below node wire version 12, or of an
// owner the host says is down, none is.
func (n *Node) owners(topic string, local []int32, remote map[string][]int32, verdict *routesVerdict) (asks []ownerAsk, unasked map[int32]error) {
	unasked = map[int32]error{}
	for _, owner := range slices.Sorted(maps.Keys(remote)) {
		var parts []int32
		for _, p := range sortedUnique(remote[owner]) {
			_, named := unasked[p]
			switch err := verdict.refuses(p); {
			case slices.Contains(local, p) || named:
			case err != nil:
				unasked[p] = err
			default:
				parts = append(parts, p)
			}
		}
		if len(parts) == 0 {
			continue
		}
		var why error
		switch {
		case n.transport == nil:
			why = fmt.Errorf("%w: %s owns it, and this node has no Config.Transport to ask it", ErrNotLocal, owner)
		case !n.wireVersion.Knows(wire.OpStatus):
			why = fmt.Errorf("%w: this node speaks node wire version %d, before 12: %s is not asked", ErrUnsupportedOp, n.wireVersion, owner)
		case n.down(owner):
			why = fmt.Errorf("%w: the host says %s, its owner, is down", ErrUnavailable, owner)
		}
		if why != nil {
			for _, p := range parts {
				unasked[p] = why
			}
			continue
		}
		asks = append(asks, ownerAsk{owner: owner, partitions: parts})
	}
	return asks, unasked
}

// sortedUnique returns partitions ascending, each once, those the routes name negative left
// out (the routes' verdict reports them); a copy, never partitions itself.
func sortedUnique(partitions []int32) []int32 {
	out := slices.DeleteFunc(slices.Clone(partitions), func(p int32) bool { return p < 0 })
	slices.Sort(out)
	return slices.Compact(out)
}

// chunks splits partitions into the runs a frame carries, wire.MaxPartitions at most each.
func chunks(partitions []int32) [][]int32 {
	var out [][]int32
	for len(partitions) > 0 {
		k := min(len(partitions), wire.MaxPartitions)
		out = append(out, partitions[:k])
		partitions = partitions[k:]
	}
	return out
}

// uncounted is the status of a partition whose owner (named owner; "" for this node) did
// not report it, err saying why.
func uncounted(topic string, partition int32, owner string, err error) PartitionStatus {
	return PartitionStatus{Topic: topic, Partition: partition, Owner: owner, Frontier: -1, HighWatermark: -1, OldestUnsettledAge: -1, Err: err}
}

// remoteStatus asks owner where partitions of topic stand (one Status frame per
// wire.MaxPartitions of them), within StatusBudget and ctx, and returns a status per
// partition: the owner's, or uncounted with why.
func (n *Node) remoteStatus(ctx context.Context, owner, topic string, partitions []int32) []PartitionStatus {
	out := make([]PartitionStatus, 0, len(partitions))
	deadline := n.clock.Now().Add(StatusBudget)
	for _, chunk := range chunks(partitions) {
		sent := n.clock.Now()
		entries, err := n.askStatus(ctx, owner, topic, chunk, deadline)
		for i, p := range chunk {
			switch {
			case err != nil:
				out = append(out, uncounted(topic, p, owner, err))
			case entries[i].Status != wire.StatusOK:
				out = append(out, uncounted(topic, p, owner, errorOf(wire.Answer{Status: entries[i].Status, Message: entries[i].Message})))
			default:
				out = append(out, statusOf(topic, owner, &entries[i], sent))
			}
		}
	}
	return out
}

// askStatus makes one Status RPC to owner for partitions and returns its entries, one per
// partition in order, or the error that stands for each of them. It asks for the spilled
// keys and records unless the owner refused that within olderFieldMemory: an owner before
// version 15 refuses the frame as malformed, and is asked again at once without them (its
// entries' spilled counts are zero).
func (n *Node) askStatus(ctx context.Context, owner, topic string, partitions []int32, deadline time.Time) ([]wire.PartitionStatus, error) {
	l := n.lane(owner)
	spilled := n.wireVersion >= wire.V15 && !l.Refuses(acklane.StatusSpilled, n.clock.Now())
	raw, err := n.askPartitions(ctx, owner, wire.Request{Op: wire.OpStatus, Topic: topic, Partitions: partitions, StatusSpilled: spilled}, deadline)
	if err != nil {
		return nil, err
	}
	reply, err := wire.DecodeStatusReply(raw, len(partitions), spilled)
	if err != nil {
		return nil, fmt.Errorf("%w: %s's status reply: %w", ErrTransport, owner, err)
	}
	if reply.Partitions == nil && spilled && reply.Refusal.Status == wire.StatusBadRequest {
		l.Refuse(acklane.StatusSpilled, n.clock.Now().Add(olderFieldMemory))
		return n.askStatus(ctx, owner, topic, partitions, deadline)
	}
	if reply.Partitions == nil {
		return nil, refusedWhole(owner, reply.Refusal)
	}
	for i := range reply.Partitions {
		if got := reply.Partitions[i].Partition; got != partitions[i] {
			return nil, fmt.Errorf("%w: %s answered partition %d for %d", ErrTransport, owner, got, partitions[i])
		}
	}
	return reply.Partitions, nil
}

// askPartitions sends owner req, a Status or Purge naming partitions of a topic, and
// returns its reply, or the error that stands for each partition.
func (n *Node) askPartitions(ctx context.Context, owner string, req wire.Request, deadline time.Time) ([]byte, error) {
	frame, err := wire.EncodeRequest(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	raw, err := n.exchange(ctx, owner, frame, deadline)
	if err != nil {
		return nil, n.noReply(ctx, owner, err)
	}
	return raw, nil
}

// noReply is the error of an RPC to owner that brought no reply: ctx's when it ended,
// ErrTransport otherwise (the owner may have applied the frame).
func (n *Node) noReply(ctx context.Context, owner string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: no reply from %s: %w", ErrTransport, owner, ctx.Err())
	}
	return fmt.Errorf("%w: no reply from %s: %v", ErrTransport, owner, err)
}

// refusedWhole is the error of owner's refusal of a whole Status or Purge frame:
// ErrUnsupportedOp from a release before node wire version 12.
func refusedWhole(owner string, a wire.Answer) error {
	if a.Status == wire.StatusUnsupported {
		return fmt.Errorf("%w: %s runs a release before node wire version 12: %s", ErrUnsupportedOp, owner, a.Message)
	}
	return errorOf(a)
}

// statusOf is the PartitionStatus an owner's entry reports, its ages counted back from sent
// (when the request left) on this node's clock.
func statusOf(topic, owner string, e *wire.PartitionStatus, sent time.Time) PartitionStatus {
	st := PartitionStatus{
		Topic: topic, Partition: e.Partition, Owner: owner, Loaded: e.Loaded,
		Frontier: e.Frontier, HighWatermark: e.HighWatermark, Backlog: e.Backlog, OldestUnsettledAge: e.OldestUnsettledAge,
		Leased: int(e.Leased), Delayed: int(e.Delayed), AckedAhead: int(e.AckedAhead),
		Quarantined: int(e.Quarantined), Requeued: int(e.Requeued),
		Keys: KeyStats{HeldKeys: int(e.HeldKeys), BlockedKeys: int(e.BlockedKeys), Deferred: int(e.Deferred),
			ParkedKeys: int(e.ParkedKeys), Parked: int(e.Parked), QuarantinedKeys: int(e.QuarantinedKeys),
			SpilledKeys: int(e.SpilledKeys), Spilled: int(e.Spilled)},
		ParkedOnTopic: int(e.ParkedOnTopic), ParkedOnPartition: int(e.ParkedOnPartition),
	}
	if e.BlockedFor > 0 {
		st.Keys.OldestBlockedSince = sent.Add(-e.BlockedFor)
	}
	if e.ErrStatus != wire.StatusOK {
		st.Err = errorOf(wire.Answer{Status: e.ErrStatus, Message: e.ErrMessage})
	}
	if e.SetAside != "" {
		st.SetAside = &SetAsideError{Topic: topic, Partition: e.Partition, RetryAt: sent.Add(e.SetAsideRetryIn),
			Err: fmt.Errorf("%w: %s", ErrRemote, e.SetAside)}
	}
	return st
}

// wireStatus is st as a status reply carries it, its times made ages at now.
func wireStatus(st *PartitionStatus, now time.Time) wire.PartitionStatus {
	e := wire.PartitionStatus{
		Partition: st.Partition, Status: wire.StatusOK, Loaded: st.Loaded,
		Frontier: st.Frontier, HighWatermark: st.HighWatermark, Backlog: st.Backlog, OldestUnsettledAge: st.OldestUnsettledAge,
		Leased: count32(st.Leased), Delayed: count32(st.Delayed), AckedAhead: count32(st.AckedAhead),
		Quarantined: count32(st.Quarantined), Requeued: count32(st.Requeued),
		HeldKeys: count32(st.Keys.HeldKeys), BlockedKeys: count32(st.Keys.BlockedKeys), Deferred: count32(st.Keys.Deferred),
		ParkedKeys: count32(st.Keys.ParkedKeys), Parked: count32(st.Keys.Parked), QuarantinedKeys: count32(st.Keys.QuarantinedKeys),
		SpilledKeys: count32(st.Keys.SpilledKeys), Spilled: count32(st.Keys.Spilled),
		ParkedOnTopic: count32(st.ParkedOnTopic), ParkedOnPartition: count32(st.ParkedOnPartition),
	}
	if since := st.Keys.OldestBlockedSince; !since.IsZero() {
		e.BlockedFor = max(now.Sub(since), 1) // blocked: never "none"
	}
	if st.Err != nil {
		a := answerOf(st.Err, time.Time{})
		e.ErrStatus, e.ErrMessage = a.Status, a.Message
	}
	if sa := st.SetAside; sa != nil {
		e.SetAside = "set aside"
		if sa.Err != nil && sa.Err.Error() != "" {
			e.SetAside = sa.Err.Error()
		}
		e.SetAsideRetryIn = max(sa.RetryAt.Sub(now), 0)
	}
	return e
}

// count32 is a count as a status reply carries it.
func count32(c int) uint32 { return uint32(min(max(c, 0), math.MaxUint32)) }

// serveStatus answers a Status frame: an entry per partition named, where it stands, or why
// this node does not say (a partition it does not own, a topic it does not know); with the
// spilled keys and records when the frame asked for them (spilled).
func (n *Node) serveStatus(topic string, partitions []int32, spilled bool) []byte {
	local, _, ok, verdict := n.partitions(topic)
	owned := sortedUnique(local)
	parked := n.pump.Parked(topic)
	now := n.clock.Now()
	entries := make([]wire.PartitionStatus, len(partitions))
	for i, p := range partitions {
		var refused error
		switch _, mine := slices.BinarySearch(owned, p); {
		case !ok:
			refused = ErrUnknownTopic
		case !mine:
			refused = ErrNotLocal
		}
		if refused != nil {
			a := answerOf(refused, time.Time{})
			entries[i] = wire.PartitionStatus{Partition: p, Status: a.Status, Message: a.Message}
			continue
		}
		st := n.partitionStatus(topic, p, parked, verdict)
		entries[i] = wireStatus(&st, now)
	}
	return wire.AppendStatusReply(nil, entries, spilled)
}

// servePurge answers a Purge frame: each partition named purged (purgeHere, ctx the
// requester's budget) and answered once every purge is on the disk, its answer's i64 the
// offsets its frontier moved over.
func (n *Node) servePurge(ctx context.Context, topic string, partitions []int32) []byte {
	moved, errs := n.purgeHere(ctx, topic, partitions)
	answers := make([]wire.Answer, len(partitions))
	for i, err := range errs {
		answers[i] = answerOf(err, time.Time{})
		if err == nil {
			answers[i].Expiry = moved[i]
		}
	}
	return wire.EncodeReply(answers)
}

// remotePurge asks owner to purge partitions of topic (one Purge frame per
// wire.MaxPartitions of them), within PurgeBudget and ctx: the offsets moved over, and the
// partitions not known to be purged, with why.
func (n *Node) remotePurge(ctx context.Context, owner, topic string, partitions []int32) (int64, map[int32]error) {
	var moved int64
	failed := map[int32]error{}
	deadline := n.clock.Now().Add(PurgeBudget)
	for _, chunk := range chunks(partitions) {
		answers, err := n.askPurge(ctx, owner, topic, chunk, deadline)
		for i, p := range chunk {
			switch {
			case err != nil:
				failed[p] = err
			case answers[i].Status != wire.StatusOK:
				failed[p] = errorOf(answers[i])
			default:
				moved += max(answers[i].Expiry, 0)
			}
		}
	}
	return moved, failed
}

// askPurge makes one Purge RPC to owner for partitions and returns its answers, one per
// partition in order, or the error that stands for each of them.
func (n *Node) askPurge(ctx context.Context, owner, topic string, partitions []int32, deadline time.Time) ([]wire.Answer, error) {
	raw, err := n.askPartitions(ctx, owner, wire.Request{Op: wire.OpPurge, Topic: topic, Partitions: partitions}, deadline)
	if err != nil {
		return nil, err
	}
	answers, err := wire.DecodeReply(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %s's purge reply: %w", ErrTransport, owner, err)
	case len(answers) == 1 && answers[0].Status == wire.StatusUnsupported:
		// A partition's answer is never "op unknown": the whole frame was refused.
		return nil, refusedWhole(owner, answers[0])
	case len(answers) != len(partitions):
		if len(answers) == 1 && answers[0].Status != wire.StatusOK {
			return nil, refusedWhole(owner, answers[0])
		}
		return nil, fmt.Errorf("%w: %s answered %d partitions of %d", ErrTransport, owner, len(answers), len(partitions))
	}
	return answers, nil
}
