package sim

import (
	"fmt"
	"strings"
	"time"
)

// Options shape a run. The zero value is a full run: every fault class the seed enables.
type Options struct {
	// Steps is how many workload steps run before the faults heal; zero means 150.
	Steps int
	// Nodes is how many nodes run, 2 to 5; zero draws it from the seed.
	Nodes int
	// Calm turns every fault off: no restarts, no network or disk faults, no corrupt
	// records or retention trims. The workload and the checks stay the same.
	Calm bool
	// NoMoves turns the partition moves off (the hand-off and failover steps, each on in
	// some runs).
	NoMoves bool
	// Moves turns the hand-off step on whatever the seed draws, in a calm run too, and twice
	// as often as a run drawing it.
	Moves bool
	// Store keeps every node's ack state in one shared state store (Config.Store) whatever
	// the seed draws; NoStore keeps it in files whatever the seed draws.
	Store, NoStore bool
	// Hangs, Skew and Liar turn on, whatever the seed draws and in a calm run too, the hung
	// nodes, the nodes' clock skew (in a run whose nodes all speak the newest wire version)
	// and the lying peer. MaxDeliveries, when positive, sets the topic's
	// TopicConfig.MaxDeliveries whatever the seed draws.
	Hangs, Skew, Liar bool
	MaxDeliveries     int
	// Rejects turns rejects on (reject.go), whatever the seed draws and in a calm run too.
	Rejects bool
	// Zombies and CutOffs turn on, whatever the seed draws and in a calm run too, the
	// paused owners and the owners cut off from their peers and the controller (zombie.go):
	// the run then keeps its ack state in the shared store (unless NoStore, which turns
	// them off) and grants ownership in time (ownership.go).
	Zombies, CutOffs bool
	// Ordered makes the topic ordered (TopicConfig.Ordered), whatever the seed draws and in
	// a calm run too, its records keyed from a small key set (ordered.go); NoOrdered keeps it
	// unordered whatever the seed draws.
	Ordered, NoOrdered bool
	// QuarantineKeys sets TopicConfig.QuarantineKeys (quarantinedkeys.go) in a run whose
	// topic is ordered and quarantines (MaxDeliveries, rejects), whatever the seed draws and
	// in a calm run too; NoQuarantineKeys leaves it unset whatever the seed draws.
	QuarantineKeys, NoQuarantineKeys bool
	// OldSchedule turns off the hung nodes, the clock skew, the lying peer, the drawn
	// MaxDeliveries, the rejects, the paused and the cut-off owners, the ordered topic and its
	// quarantined keys: a seed then runs the
	// course it ran before they were simulated (the schedules that found the library bugs
	// of the past).
	OldSchedule bool
	// Plant plants a bug in the network between the nodes, to show that the checker
	// catches it (a checker that cannot fail proves nothing).
	Plant Plant
	// Logf, when set, receives every event of the run as it happens.
	Logf func(format string, args ...any)
	// Tolerate lists kinds of violations (the Kind constants) that do not end the run: each
	// is counted in Report.Tolerated and the run goes on, checking everything else. It is
	// for library bugs already reported and not yet fixed.
	Tolerate []string
}

// Plant is a bug a run plants on purpose.
type Plant uint8

const (
	// PlantNone plants nothing.
	PlantNone Plant = iota
	// PlantClaimAsProbe rewrites every claim (a Consume frame with the Claim byte) as a plain
	// probe on its way: the owner leases the record all the same, but its hold for the
	// claimant is never retired and lapses instead, so the next record of a sparse stream
	// waits for the lapse. The sparse-stream latency check catches it.
	PlantClaimAsProbe
	// PlantReplayReply answers a consume from another node with the last reply carrying
	// records that the owner sent to that node before: the same leases delivered twice. The
	// one-live-holder check catches it.
	PlantReplayReply
	// PlantUnfencedSettle answers with success, applying it nowhere, every settle frame that
	// reaches an old owner for a partition it handed off, as an owner that applied settles
	// after its fence would: the ack is lost with the state that left before it, so the
	// record is delivered again (or the lease it "extended" lapses under its consumer). The
	// redelivery-after-an-ack, one-live-holder and settle checks catch it.
	PlantUnfencedSettle
	// PlantLateReply holds every consume reply for a second in the transports that say they
	// honour their context (router.ContextTransport), whatever the context does: the node
	// waits for such a transport's Call, so a consume returns late. The consume-return
	// check catches it.
	PlantLateReply
	// PlantReleaseAsNack rewrites every release (wire.OpRelease, alone or in an AckBatch) as
	// a nack with no delay on its way to the owner: the owner counts an attempt for a
	// delivery its consumer gave back, or that never reached one, and MaxDeliveries
	// quarantines the record early. The early-quarantine check catches it.
	PlantReleaseAsNack
	// PlantRejectAsNack rewrites every reject (wire.OpReject, alone or in an AckBatch) as a
	// nack with no delay on its way to the owner: the reject is answered success, and the
	// record is delivered again. The check of a settled record's redelivery catches it.
	PlantRejectAsNack
	// PlantUnfencedZombie runs every node without its grant (Config.Ownership nil) in runs
	// with grants: a node that ignores the host's grant in time. A paused owner resuming
	// with stale routes (nobody calls RoutesChanged on it at first) serves the partitions
	// that failed over while it was paused, until its first save meets the store's fence:
	// it leases records the new owner serves, and answers settles of leases that are over
	// with success. The lease checks (a lease granted with no valid grant, two live
	// holders), the settle check and the redelivery-after-an-ack check catch it; so does
	// the check of a save after a lapse, for an owner cut off.
	PlantUnfencedZombie
	// PlantUnordered runs the nodes with the topic unordered (TopicConfig.Ordered false) in
	// runs whose model expects it ordered: any consumer takes any record of a key, whoever
	// holds its lower ones. The checks of one holder per key and of a key's records in
	// order catch it.
	PlantUnordered
	// PlantUnquarantinedKeys runs the nodes without TopicConfig.QuarantineKeys in runs whose
	// model expects it: a quarantined record's key goes on with its next record. The check
	// of a key's records in order, stricter under QuarantineKeys, catches a later record of
	// the key delivered while a lower one is surely in the quarantine.
	PlantUnquarantinedKeys
)

func (p Plant) String() string {
	switch p {
	case PlantNone:
		return "none"
	case PlantClaimAsProbe:
		return "claim-as-probe"
	case PlantReplayReply:
		return "replay-reply"
	case PlantUnfencedSettle:
		return "unfenced-settle"
	case PlantLateReply:
		return "late-reply"
	case PlantReleaseAsNack:
		return "release-as-nack"
	case PlantRejectAsNack:
		return "reject-as-nack"
	case PlantUnfencedZombie:
		return "unfenced-zombie"
	case PlantUnordered:
		return "unordered"
	case PlantUnquarantinedKeys:
		return "unquarantined-keys"
	}
	return fmt.Sprintf("Plant(%d)", uint8(p))
}

// Report is what a run did: its shape, its workload, the faults it injected and what the
// history check counted.
type Report struct {
	Seed     uint64
	Nodes    int     // nodes in all
	Owners   int     // nodes owning partitions of the topic
	Gateways int     // nodes owning none
	Parts    int     // partitions of the topic
	Versions []uint8 // each node's Config.WireVersion (0: the newest)
	Liveness bool    // the routes told the nodes which nodes were down
	Store    bool    // the nodes kept their ack state in one shared state store, not in files
	Steps    int     // workload steps run
	SimTime  time.Duration
	// Skew is each node's clock offset from the bubble's (nil: every node reads the
	// bubble's clock).
	Skew []time.Duration
	// MaxDeliveries is the topic's TopicConfig.MaxDeliveries (0: unlimited), and Quarantined
	// how many records it set aside (Config.OnQuarantine).
	MaxDeliveries, Quarantined int
	// ForwardedReleases counts the releases answered success through a node that does not
	// hold the lease's partition, end to end on the node wire's version 7: each must not
	// count an attempt at the owner.
	ForwardedReleases int
	// Rejected counts the rejects answered success, ForwardedRejects those of them through a
	// node that does not hold the lease's partition, and RejectsRefused the rejects answered
	// ErrUnsupportedOp by a path with a node before the node wire's version 10 on it.
	Rejected, ForwardedRejects, RejectsRefused int
	// Grants says the nodes served under grants in time (Config.Ownership: runs with paused
	// or cut-off owners), with GrantTTL as the grants' time to live after a keep-alive.
	// StaleSettles and StaleConsumes count the settles and the consumes made through a node
	// whose routes were stale (a resumed zombie, a node cut off), DeposedRefusals the
	// settles refused (ErrMoved, 503) by an owner whose grant lapsed or through stale
	// routes, and DurableAcks the AckDurable calls answered success.
	Grants                                                    bool
	GrantTTL                                                  time.Duration
	StaleSettles, StaleConsumes, DeposedRefusals, DurableAcks int
	// Ordered says the topic was ordered (ordered.go), its records keyed from a set of Keys
	// keys. KeyedDeliveries counts the deliveries of keyed records the order check judged,
	// KeyBatches the consume responses holding several records of one key, and Deferred the
	// records the owners deferred behind their keys (Stats().Shards.Deferred, summed over
	// the processes); Spilled and Refilled the records spilled past the topic's
	// MaxDeferredPerKey and read back (the same).
	Ordered                     bool
	Keys                        int
	KeyedDeliveries, KeyBatches int
	Deferred, Spilled, Refilled uint64
	// QuarantineKeys says the topic set TopicConfig.QuarantineKeys (quarantinedkeys.go), and
	// KeyFollowers counts the quarantines before MaxDeliveries deliveries that count that
	// only a lower record of the key in the quarantine justified (followers of their key).
	QuarantineKeys bool
	KeyFollowers   int

	Produced   int // records appended
	Deliveries int // leases handed to consumers
	Remote     int // of them, through a node that does not own the record
	Acked      int // acks answered success
	AckedMaybe int // acks answered 502: applied or not
	Settles    int // acks, nacks, extends, releases and rejects sent
	Replays    int // records read by Replay
	Polls      int // long-polls started
	Refusals   int // frames an older release refused
	// MoveRefusals counts the settles refused (ErrMoved, or 503 forwarded) while their
	// partition moved, and CarriedSettles those that succeeded on a lease a hand-off carried
	// to a new owner.
	MoveRefusals, CarriedSettles int

	// The history check. Lost: produced, retained, readable, never acked. Unexpected:
	// delivered but never produced, or corrupt, or below retention when leased, or with
	// another record's bytes. Duplicates: deliveries of a record already delivered (allowed,
	// after an expiry, a nack, a give-back or a restart). AckedRedelivered: deliveries of an
	// acked record, each explained by a crash window or a disk fault.
	Lost, Unexpected, Duplicates int
	AckedRedelivered             int
	AckedRedeliveredBy           map[string]int // by the explanation

	// Liveness: how long after the faults healed the last record was acked, and the bound
	// it was held to.
	Drain, DrainBound time.Duration
	// Sparse is how many records the sparse-stream latency check timed (0: not eligible),
	// and SparseMax the slowest, against SparseBound.
	Sparse                 int
	SparseMax, SparseBound time.Duration
	// Overrun is the latest any consume returned past the end of its wait, against
	// OverrunBound (router.ConsumeOverrun and a margin).
	Overrun, OverrunBound time.Duration
	// HeldMax is the longest a record another node leased took from its grant to its
	// consumer (a round trip, and the read-ahead hold for one a gateway read ahead), against
	// HeldBound; AheadHandedOver is how many records gateways handed over from what they
	// read ahead (router.AheadStats.HandedOver, summed over the processes).
	HeldMax, HeldBound time.Duration
	AheadHandedOver    uint64

	Faults Faults
	Frames map[byte]int // frames sent between nodes, by op

	// Tolerated counts the violations of the kinds Options.Tolerate lists, by kind, and
	// FirstTolerated describes the first of each.
	Tolerated      map[string]int
	FirstTolerated map[string]string

	// Fingerprint hashes the run's events as the driver saw them: two runs of a seed with
	// the same fingerprint took the same course.
	Fingerprint uint64
}

// Faults counts the faults a run injected.
type Faults struct {
	GracefulRestarts int
	ProcessCrashes   int
	PowerCuts        int
	DroppedRequests  int // frames lost on their way
	DroppedReplies   int // frames served, their reply lost
	Duplicated       int // frames delivered twice
	Partitions       int // network partitions begun
	Isolations       int // nodes taken off the network (their links cut) for a while
	DiskFull         int // periods of ENOSPC on a node's disk
	SyncErrors       int // periods of failing fdatasync (EIO)
	Corrupted        int // records made unreadable
	Trims            int // retention trims
	ContextCancels   int // long-polls that ended with their context, cancelled mid-wait
	TopicDeletes     int // the topic deleted and created again
	Moves            int // partitions handed off to another node
	MovesSkipped     int // moves abandoned: the old owner's shard could not be loaded
	Failovers        int // partitions of a dead owner adopted from its disk by another node
	Hangs            int // nodes hung for a while: every frame sent to them lost, unnoticed
	HungFrames       int // frames lost on their way to a hung node
	SkewedNodes      int // nodes whose clock is off the bubble's
	Forged           int // frames the lying peer sent
	ForgedNotifies   int // of them, notifications of records it never held
	Pauses           int // owners paused (zombie.go)
	CutOffs          int // owners cut off from their peers and the controller
	LiveFailovers    int // partitions failed over from a live owner (paused or cut off) once its grant lapsed
}

// Add adds o to f.
func (f *Faults) Add(o Faults) {
	f.GracefulRestarts += o.GracefulRestarts
	f.ProcessCrashes += o.ProcessCrashes
	f.PowerCuts += o.PowerCuts
	f.DroppedRequests += o.DroppedRequests
	f.DroppedReplies += o.DroppedReplies
	f.Duplicated += o.Duplicated
	f.Partitions += o.Partitions
	f.Isolations += o.Isolations
	f.DiskFull += o.DiskFull
	f.SyncErrors += o.SyncErrors
	f.Corrupted += o.Corrupted
	f.Trims += o.Trims
	f.ContextCancels += o.ContextCancels
	f.TopicDeletes += o.TopicDeletes
	f.Moves += o.Moves
	f.MovesSkipped += o.MovesSkipped
	f.Failovers += o.Failovers
	f.Hangs += o.Hangs
	f.HungFrames += o.HungFrames
	f.SkewedNodes += o.SkewedNodes
	f.Forged += o.Forged
	f.ForgedNotifies += o.ForgedNotifies
	f.Pauses += o.Pauses
	f.CutOffs += o.CutOffs
	f.LiveFailovers += o.LiveFailovers
}

func (f Faults) String() string {
	return fmt.Sprintf("graceful restarts %d, process crashes %d, power cuts %d, frames dropped %d (request) + %d (reply), "+
		"frames duplicated %d, partitions %d, isolations %d, disk full %d, sync errors %d, corrupt records %d, trims %d, "+
		"context cancels %d, topic deletes %d, moves %d (%d skipped), failovers %d, hangs %d (%d frames lost to them), skewed clocks %d, "+
		"forged frames %d (%d notifications), pauses %d, cut-offs %d, live failovers %d", f.GracefulRestarts, f.ProcessCrashes, f.PowerCuts, f.DroppedRequests, f.DroppedReplies,
		f.Duplicated, f.Partitions, f.Isolations, f.DiskFull, f.SyncErrors, f.Corrupted, f.Trims, f.ContextCancels, f.TopicDeletes, f.Moves, f.MovesSkipped, f.Failovers,
		f.Hangs, f.HungFrames, f.SkewedNodes, f.Forged, f.ForgedNotifies, f.Pauses, f.CutOffs, f.LiveFailovers)
}

// A Violation is a promise the run caught broken: what, when (simulated time since the
// run began), and the run's last events.
type Violation struct {
	Kind  string // which promise (the Kind constants)
	Seed  uint64
	At    time.Duration
	What  string
	Trace []string
}

func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, at %v: %s: %s", v.Seed, v.At, v.Kind, v.What)
	if len(v.Trace) > 0 {
		b.WriteString("\nlast events:\n")
		for _, l := range v.Trace {
			b.WriteString("  ")
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// The kinds of violations.
const (
	KindOneHolder         = "one live holder"                // an offset leased to two live holders, or one lease delivered twice
	KindAckUndone         = "redelivered after an ack"       // an acked record leased again with nothing to explain it
	KindCrashThenPowerCut = "crash then power cut"           // an ack undone by a process crash, then a power cut before the restarted process primed
	KindSettleAnswer      = "settle answer"                  // an ack, nack, extend or release answered what the lease's state forbids
	KindConsumeError      = "consume error"                  // a consume answered an error it documents for no such case
	KindOldOwner400       = "old owner: consume answers 400" // a consume whose owners all run a release before the consume op answered ErrInvalidArgument
	KindRefusals          = "one refusal per upgrade"        // an older release refused the same op twice within 2 minutes
	KindFieldRefusals     = "one refusal per field"          // an older release refused the same field of a consume frame twice within 2 minutes
	KindLost              = "lost"                           // a record never acked by the liveness bound after the faults healed
	KindUnexpected        = "unexpected delivery"            // a record delivered that was never produced, corrupt, trimmed, or with other bytes
	KindPromise           = "one record, one promise"        // an owner promised more records than it could hand out
	KindSparseLatency     = "sparse-stream latency"          // a record of a sparse stream reached a parked consumer late
	KindCounters          = "counters"                       // a node's counters disagree with what was seen
	KindReplay            = "replay"                         // a replay read the wrong records
	KindNotOwner          = "served by a non-owner"          // a lease granted by a node that did not own the partition then
	KindDeposedSave       = "deposed owner saved"            // the state store received a save of a partition from a node that handed it off, or under a grant that had lapsed
	KindLateReturn        = "consume returned late"          // a consume returned later than its wait plus router.ConsumeOverrun (and a margin)
	KindEarlyQuarantine   = "quarantined early"              // a record quarantined before MaxDeliveries deliveries that count
	KindBelievedLiar      = "believed a lying peer"          // a node took a forged frame's word, or did not count it unbacked
	KindHeldTooLong       = "held past the hold"             // a record reached its consumer later than the read-ahead hold and a round trip after its grant
	KindKeyHolders        = "one holder per key"             // two consume responses held records of one key of an ordered topic, both leases surely live at once
	KindKeyOrder          = "a key's records in order"       // a record of an ordered topic delivered while a lower record of its key was surely unsettled and not in its response
	KindOther             = "other"
)
