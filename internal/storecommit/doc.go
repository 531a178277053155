// Package storecommit is the node's committer over a host's own state store (router.Config.Store):
// it keeps the acked state of each partition where the host keeps its replicated data, as raft
// leaves storage to the application, instead of in files under the node's directory. It
// implements the same contract as package offsets' file committer (MarkDirty, Durable, Forget,
// Load, Run, Close), so the node assembles either.
//
// # Cadence
//
// A partition marked dirty is saved at most once per durability interval D: every D, the
// committer takes a snapshot of each partition marked since the last save, from its live
// shard through Source, encodes it (package internal/handoff: versioned, checksummed, naming
// topic, partition and incarnation, no leases) and hands the store the lot in batches of up to
// MaxBatch partitions, one Save at a time. A Durable wait makes its partition due at once: the
// next save starts without waiting for the interval, and every wait registered before its
// snapshot is answered once the Save returned. While nothing is marked, no timer is armed.
//
// # Failures
//
// Each Load and Save is bounded by Timeout. A Save that fails (or times out) saved nothing as
// far as the committer knows: its partitions stay marked, their waits keep waiting, and the
// next attempt comes one interval later; failures are counted and logged at most once a minute.
// A Save that takes longer than the interval delays the next one (one in flight at a time) and
// is counted as an overrun. Forget waits for a Save in flight that holds the partition, so no
// snapshot taken before it is saved after it returns.
//
// # Recovery
//
// Load trusts what it can verify, as the file committer does: bytes that fail their checksum,
// that name another partition, or that are of an unknown version are ignored, logged and counted
// (Stats.IgnoredFiles), and the partition starts again from its oldest retained record, so a
// store that answers damaged or foreign state costs redeliveries, never a skipped record. With
// the host's incarnation of the topic (LoadBound), a state bound to another one (a deleted
// topic's earlier life: a stale entry, or a backup of it restored) is ignored the same way; an
// unbound one, saved before the binding, is trusted and bound at its next save. Without it, the
// store is the only witness of a topic's lives: a state of an earlier life that the store
// answers for a topic created again under the name is taken as this life's. A
// store that answers an older state of the partition (stale) costs the acks since then, also
// delivered again. A failed Load is an error: the node sets the partition aside and retries.
//
// # Crash windows
//
// Nothing reaches the store between saves: a crash of the node (process or machine) delivers
// again the acks of about one durability interval plus the Save's duration. A Durable wait
// that returned survives both; a graceful Close saves every marked partition first.
package storecommit
