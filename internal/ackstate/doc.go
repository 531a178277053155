// Package ackstate converts a partition's ack state between its two forms: the shard's
// (inflight.State, what a shard is restored from and snapshots) and the committers'
// (offsets.State, what the file committer and the state-store committer load and take from
// their Source). Packages inflight and offsets import neither each other nor a package that
// would declare it for both, so each declares its own; router and internal/storecommit, which
// assemble them, convert here and nowhere else.
//
// The two forms carry the same persisted state. What one of them has and the other lacks
// stays behind:
//   - inflight.State's NothingPersisted, Held, Corrupt and GrantUntil are the shard's memory
//     (ToOffsets drops them, ToInflight leaves them zero);
//   - offsets.State's Found, OmittedAttempts and Unverified are what recovery and the Source
//     report of the files (ToInflight drops them, ToOffsets leaves them as they were in dst).
//
// The quarantined and requeued offsets are shared, never copied: the converted state holds
// the same slices (a nil one stays nil, an empty one empty). The acked-ahead runs, the key
// tails and the attempts are copied, their element types being twins. The key tails must
// never stay behind: without them an ordered topic's parked records, which the acked-ahead
// runs hold, would read as acked.
package ackstate
