package router

import (
	"errors"
	"time"
)

// The host's side of the library: its log, its partition ownership and its clock. Each
// interface is small and uses only built-in and standard-library types, so one host value can
// satisfy the interfaces other packages declare for the same thing.
//
// What a seam answers is checked where it enters the node, as far as the node can tell it
// wrong: a nil Log with no error, a GetMany that leaves a Log nil, a watermark that is
// negative or below Oldest, a ReadRange of more records than asked, a retention miss at an
// offset Oldest says is retained, routes that name a partition negative, twice, or both here
// and on another node, an owner with no name. Such an answer is refused with an error
// wrapping ErrHostContract that names the seam and the call; it changes no state, and the
// node goes on serving everything else. The node relies on nothing more: a Record carries no
// offset, so a Read that returns another offset's record, or a ReadRange that returns them
// out of order, delivers that record under the lease's offset.
//
// A panic in the host's code is the host's bug. On the caller's goroutine (a consume's
// Logs.Get or Read, an ack's Routes.Partitions) it propagates to the caller as any panic
// does; the node's locks are released on the way, and a record reserved for the call lapses
// with its visibility timeout. On the node's own goroutines, where nothing of the host's
// could recover it and the process would end, it is recovered: the pump reserving for a
// parked consumer (the consumer answers an error wrapping ErrHostContract), the keeper, the
// probes of other owners (the consume answers the error), and the offer of records to other
// nodes' tokens, which also runs from the purger and timers.
// That offer, Config.OnQuarantine and Transport.Call are contained wherever they run, since
// the node cannot tell its goroutines from the caller's there; a Call that panicked is one
// that got no reply. Each recovered panic is counted (Stats.HostPanics) and logged with its
// stack, at most once a minute.

// ErrHostContract: a seam of the host answered what its contract rules out (see each
// seam), or panicked on a goroutine of the node. The error names the seam and the call.
// The node refuses the answer and changes nothing for it: a scan passes over the partition
// (a pinned consume, an ack or a replay of it answers the error), counts it in
// Stats.HostContractViolations and logs it at most once a minute per partition. HTTPStatus
// answers 500: the fault is the host's, not the client's.
var ErrHostContract = errors.New("router: the host broke a seam's contract")

// Errors a Log returns from Read. A Log may wrap them; the node tests with errors.Is.
var (
	// ErrNotFound: the offset is below the log's oldest retained offset (retention removed
	// it). The node jumps the frontier to the oldest retained offset in one step.
	ErrNotFound = errors.New("router: offset below retention")
	// ErrCorrupt: the record is permanently unreadable. The node skips it, counts it and
	// logs it loudly, so the frontier can move on: bounded, visible loss instead of a
	// partition blocked forever at its head.
	ErrCorrupt = errors.New("router: record unreadable")
	// ErrLogClosed: the log was closed (a delete and recreate retired it, a purge, a move
	// installing a copy). Transient: the node gives the reservation back and fails that
	// attempt; it never treats a closed log as a gap.
	ErrLogClosed = errors.New("router: log closed")
)

// A Record is what a Log reads at an offset.
type Record struct {
	Key       []byte
	Value     []byte
	Timestamp time.Time // when the record was produced, if the log keeps it
	// Headers are the record's headers (a Kafka record's headers, an SQS message's
	// attributes), if the log keeps them: in the order they were produced, a key perhaps
	// repeated. The node hands them to consumers as they are, and counts their keys and
	// values in its batch bound (PayloadBytes).
	Headers []Header
}

// A Header is one header of a record: a key and a value, as a Kafka record header is. A
// record's headers are ordered and may repeat a key; what they mean is the host's and its
// consumers' business.
type Header struct {
	Key   string
	Value []byte
}

// PayloadBytes is what the node's byte bounds count of r (BatchPayloadBytes, and
// RangeReader's maxBytes): its key and value, and each header's key and value.
func (r *Record) PayloadBytes() int { return payloadBytes(r.Key, r.Value, r.Headers) }

// payloadBytes is PayloadBytes of a record's parts.
func payloadBytes(key, value []byte, headers []Header) int {
	n := len(key) + len(value)
	for i := range headers {
		n += len(headers[i].Key) + len(headers[i].Value)
	}
	return n
}

// Log is one (topic, partition) of the host's log. It must be safe for concurrent use.
//
// The contract the node relies on (the conformance suite in routertest checks it):
//   - Read(off) for Oldest() <= off < HighWatermark() returns the record, or ErrCorrupt if
//     it is permanently unreadable (every later Read of it answers the same);
//   - Read(off) for off < Oldest() returns ErrNotFound;
//   - once closed, every Read returns ErrLogClosed and nothing else, while Oldest and
//     HighWatermark still answer;
//   - HighWatermark (the next offset to be written) and Oldest never decrease, and
//     Oldest() <= HighWatermark().
//
// The node reads only offsets it has reserved, or on an ordered topic the next fresh offsets
// it is about to reserve, below the high watermark it read before.
// The returned Record's slices (its headers and their values too) belong to the caller. Oldest or HighWatermark negative, or
// HighWatermark below Oldest (where the node reads both: when a partition loads, at a
// retention jump, in Replay and PartitionStatus), and a Read answering ErrNotFound at or
// above Oldest, or with Oldest past HighWatermark, are ErrHostContract: the record is given
// back, and no frontier moves on the strength of them.
//
// Whether HighWatermark covers records not yet durable in the host's log is the host's
// choice: the node delivers whatever lies below it, so consumers may receive, and ack,
// records a crash of the host then loses. If the log comes back shorter than it was, a
// persisted frontier at or above its new high watermark is clamped below it when the
// partition loads, and records written again at those offsets are delivered; the records
// lost were delivered all the same. A host that wants no consumer to see a record it could
// lose reports only what it made durable.
type Log interface {
	Read(offset int64) (Record, error)
	HighWatermark() int64
	Oldest() int64
}

// Logs resolves the log of a partition. It must be safe for concurrent use.
//
// Get returns an error for a partition the host does not have (or cannot open now). The node
// never sets a partition aside for that error, and never caches it: a consume whose scan
// reaches the partition fails with it, unless the scan already took records from the
// partitions before it (the next scan starts at another partition); an ack, extend or nack of
// a partition whose state is not loaded yet answers it (HTTPStatus: 500); PartitionStatus
// reports it in Err. The next call resolves the partition again. A nil Log with a nil error
// is ErrHostContract, which a scan passes over rather than fails on.
type Logs interface {
	Get(topic string, partition int32) (Log, error)
}

// ManyGetter is an optional capability of Logs, found by type assertion: resolve several
// partitions of one topic at once (one lock, one version read), filling into[i] with the log
// of partitions[i]. An error means none of into is to be used; the node then resolves each
// partition on its own as its scan reaches it. An entry left nil with a nil error (into not
// filled to its end, say) is ErrHostContract for that partition, which the scan passes over.
type ManyGetter interface {
	GetMany(topic string, partitions []int32, into []Log) error
}

// TopicIncarnation is an optional capability of Logs, found by type assertion: the host's name
// for the life of a topic in its own log, such as a Kafka topic ID, a table's row version or a
// generation number its metadata keeps.
//
// Incarnation returns the topic's incarnation now; ok is false (or id "") when the host's log
// keeps none for the topic. The id must change whenever the topic is deleted and created
// again under the name, and stay the same for the whole of one life of the topic: across
// restarts of the host and of the node, on every node, for every partition of the topic. Any
// string does: the node keeps 64 bits of its SHA-256. It must be safe for concurrent use; the
// node asks it at a partition's first touch and at Adopt, never on the consume path.
//
// With it, the state the node persists for a partition (consumer.id in the partition's
// directory, or the bytes a StateStore keeps and Adopt takes) is bound to the incarnation it
// was loaded under, and a state bound to another is not trusted: a backup of a deleted
// topic's earlier life restored into the directory of the topic created again, stale files,
// or a stale store entry. Such a state is ignored as a damaged file is: logged, counted
// (Stats.Committer.IgnoredFiles), and the partition starts at its oldest retained record, so
// it is delivered again, never skipped; Adopt refuses it with ErrOtherIncarnation. A state
// written before the binding existed (or while the host named none) is trusted once, as
// before, and bound to the host's incarnation at its next write. A host that names none for a
// topic whose state is bound breaks the contract: the partition does not load
// (ErrHostContract) until it names one.
//
// It is a capability of Logs rather than of each Log because an incarnation belongs to the
// topic, which all its partitions share, and because the node needs it where it resolves no
// log (Adopt, a StateStore's state). The node asks it before it resolves the partition's
// log: a topic created again between the two leaves the state bound to the earlier life,
// which costs a redelivery, never a skip. A bound state's bytes (HandOff, ReadState, a
// StateStore's) are refused as damaged by a release before the binding, which changes
// nothing: a host that gives incarnations upgrades every node before it moves partitions.
//
// Without it the node has only its own witness of a topic's lives, consumer.id, which a new
// life writes at its first ack: a backup of the earlier life restored into the directory of a
// new life that has acked nothing yet (or a store answering the earlier life's state) is taken
// as this life's, and the new life's records up to the old frontier are never delivered.
type TopicIncarnation interface {
	Incarnation(topic string) (id string, ok bool)
}

// RangeReader is an optional capability of a Log, found by type assertion: read consecutive
// records in one call rather than one Read each (a file log reads a range with one pread).
//
// ReadRange appends to dst the records at offset, offset+1, ... and returns it: at most max
// of them (max >= 1), stopping at the high watermark, and after the record whose keys and
// values (and headers: Record.PayloadBytes) bring the total to maxBytes or more (that
// record is kept, so at least one comes back). The first record's errors are Read's: ErrNotFound below the oldest retained
// offset, ErrCorrupt for a permanently unreadable record, ErrLogClosed once closed, and
// nothing appended. A later record that would fail ends the range before it, with a nil
// error: the caller reads it on its own next. The node calls it only for offsets it may
// read (see Log), below the high watermark it read before. The records' keys, values and headers
// are the caller's, as Read's are: the node hands them to consumers, who may change them. More than
// max records is ErrHostContract: the range is given back unread.
type RangeReader interface {
	ReadRange(offset int64, max, maxBytes int, dst []Record) ([]Record, error)
}

// Routes says who owns the partitions of a topic: local ones, and remote ones by node ID.
// The host's metadata answers it (its own consensus, a static map, an external store). ok is
// false for a topic that does not exist. It must be safe for concurrent use, and what it
// returns must not be modified by either side afterwards.
//
// remote names the owner of each partition other nodes own. With Config.Transport set, a
// consume that finds nothing local probes those owners and parks on tokens left with them
// (see docs/protocol.md, "Consumption across nodes"), a pinned consume or a replay of such a
// partition goes to its owner, and an ack, extend or nack of one is forwarded to its owner
// (a partition no owner names answers ErrUnavailable). A topic whose partitions are neither
// local nor remote counts as not assigned yet, so a long-poll on it waits (its routes asked
// again every 50 ms). Routes may also implement Liveness, to say a node is down.
//
// A partition is never negative, and one answer names it once: as local, or as one owner's.
// A partition an answer names otherwise (negative, twice, here and on another node, on two
// other nodes, or under an owner named "") is ErrHostContract: the node neither serves nor
// forwards it until the routes answer otherwise, since it cannot tell which owner is right,
// and serves the topic's other partitions meanwhile. The node judges each answer once: an
// answer with the same local slice and remote map as the one before is the same answer.
type Routes interface {
	Partitions(topic string) (local []int32, remote map[string][]int32, ok bool)
}

// OwnerFinder is an optional capability of Routes, found by type assertion: the node that
// owns one partition, in one lookup. It must agree with the remote map Partitions returns.
// Without it the node finds the owner of a forwarded ack's partition by searching that map,
// owner by owner, on every ack: a cost that grows with the cluster.
type OwnerFinder interface {
	// Owner returns the other node that owns partition of topic; ok is false when no other
	// node does. An owner named "" is ErrHostContract, and the ack is not forwarded. The node
	// has no name of its own to compare with: an Owner naming this node costs one round trip
	// to itself, which answers ErrNotLocal (Serve never forwards).
	Owner(topic string, partition int32) (owner string, ok bool)
}

// Clock is the node's time: its goroutines and the calls of its API read it (a consume's
// deadline, a lease's expiry, an ack's budget); the data structures take now as an argument.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, as time.AfterFunc does; stop
	// cancels it, reporting whether it did.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}
