package router

import (
	"context"

	"narad.dev/consume/internal/storecommit"
	"narad.dev/consume/offsets"
)

// StateStore keeps the node's ack state in the host's own storage (Config.Store) instead of
// files under Config.Dir: a broker that replicates its log keeps the frontier beside it, so a
// machine's loss loses no ack state, as raft leaves storage to the application. The node
// hands it each dirty partition's compact state at most once per commit interval, in
// batches, and loads a partition's state at its first touch. Implementations must be safe
// for concurrent use; routertest.TestStateStore checks one.
//
// The states are opaque bytes to the store: versioned, checksummed and naming their
// partition and incarnation, so that what a store answers is verified, never trusted. A
// state that is damaged or another partition's is ignored, loudly, and the partition is
// delivered again from its oldest retained record; an older state of the partition (a stale
// replica) costs the acks since, delivered again. No answer of the store makes the node skip
// a record that was not acked. The bytes a store holds are what Adopt takes: a host fails a
// dead owner's partition over by loading its state from the store and adopting it on another
// node.
//
// A store shared by the nodes of a cluster must refuse the saves of a node that no longer
// owns the partition (one failed over while it was paused or cut off, not dead): its saves
// would put an older state over the new owner's. Each entry carries the ownership epoch it
// was saved under (PartitionState.Epoch, from Config.Ownership): refuse an entry whose epoch
// is below the one the store holds for the partition (a transaction that compares a key the
// host's failover raises when it grants the partition anew, or that the newest save wrote),
// and answer an error wrapping ErrFenced. The node then saves the batch's entries one by one
// to learn which are refused, and deposes those partitions at once (see Ownership). A host
// without epochs compares a key of its own metadata the same way. The fence moves at the
// hand-off or failover, before Adopt (whose saves must pass) and before the routes: the old
// owner saves nothing once HandOff returned or its grant lapsed.
//
// Each Load and Save runs under a context that ends after 10 s (a store that hangs costs the
// partition's load a set-aside and its save a retry one interval later, never the node); a
// store that needs a shorter bound keeps its own.
type StateStore interface {
	// Load returns what Save last stored for the partition, or nil with no error when the
	// store holds nothing for it. An error sets the partition aside (retried with backoff).
	Load(ctx context.Context, topic string, partition int32) ([]byte, error)
	// Save stores each entry's state in place of what the store held for its partition and
	// returns once all are durable, or an error, after which the node treats none of them as
	// saved and saves them again one commit interval later. The slices are the store's to keep.
	Save(ctx context.Context, batch []PartitionState) error
	// Delete removes the states of every partition of topic (DeleteTopic), durably: the
	// states name the incarnation of their partition, but the store is the only witness of
	// it, so a store that answered a deleted topic's state after Delete returned would give
	// the topic created again under the name its old frontier (unless Logs offers
	// TopicIncarnation, which binds each state to the topic's life in the host's log).
	Delete(ctx context.Context, topic string) error
}

// PartitionState is one partition's state in a StateStore's Save.
type PartitionState = storecommit.Entry

// ackStore is what the node asks of the place its ack state lives: the file committer
// (package offsets, the default) or a host's StateStore (package internal/storecommit).
type ackStore interface {
	Load(topic string, partition int32) (offsets.State, error)
	LoadBound(topic string, partition int32, host uint64) (offsets.State, error)
	ClampToWatermark(topic string, partition int32, st offsets.State, hwm int64) offsets.State
	MarkDirty(topic string, partition int32)
	Durable(ctx context.Context, topic string, partition int32) error
	Forget(topic string, partition int32)
	Run(ctx context.Context, clk offsets.Clock) error
	Stats() offsets.Stats
	Close() error
}

var (
	_ ackStore = (*offsets.Committer)(nil)
	_ ackStore = (*storecommit.Committer)(nil)
)
