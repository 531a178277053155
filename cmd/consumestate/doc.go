// Command consumestate reads, verifies and resets the consumer state a narad.dev/consume node
// keeps on disk: its state directory (router.Config.Dir), one directory per topic (named by
// router.TopicDir) holding one directory per partition, each with consumer.id,
// consumer.ahead and consumer.offset (see package offsets for the layouts). It is for an
// operator: what a partition's files hold, what a start would recover from them and why,
// and, when a partition's state has to go, a reset.
//
// Usage:
//
//	consumestate list   [-json] DIR [TOPIC...]
//	consumestate show   [-json] DIR TOPIC PARTITION | PARTITION_DIR
//	consumestate verify [-json] DIR [TOPIC [PARTITION]]
//	consumestate reset  [-json] DIR TOPIC PARTITION -confirm
//
// list prints each partition of DIR with a one-line summary: its verdict (below), frontier,
// acked-ahead offsets and runs (and how many keys have records parked among them), quarantined
// offsets, incarnation and the state files present; then what else DIR holds (the lock file, partitions set aside by reset, entries
// the node does not read). show prints one partition's files decoded: consumer.id, the slots
// of consumer.ahead (status, sequence number, frontier, key, incarnation, acked-ahead runs,
// key tails, attempts, quarantine, requeued, dropped, checksum) and consumer.offset. Key tails
// are in the records of an ordered topic whose shard parked records behind a blocked key
// (version 2 records): every record of the key at or above From that the acked-ahead runs
// hold is not settled, and is delivered again; show and verify print them under "key tails"
// (with -json, key_tails: the key's 64-bit identity in hex and From). The quarantine is listed
// by offset only: which keys it holds under router.TopicConfig.QuarantineKeys is not in the
// files (a node learns it at a restore by reading each quarantined record's key from the log,
// which the tool does not open; a running node reports them in PartitionStatus.Keys). verify says what
// recovery would take from each partition, why, which files or slots it would ignore and for
// what reason, and what the partition's next start does.
//
// The verdicts: ok (recovery takes the files as they are, or there are none), ignored
// (recovery ignores a damaged or foreign file or slot: what it would have settled is
// delivered again), damaged (consumer.ahead has a size no node leaves: emptied beside
// consumer.offset, cut at a slot's bound or grown past its three slots; recovery reads such a
// file as it is and the node logs nothing, but what it held is delivered again), refused (a
// record of a newer release: the node sets the partition aside),
// unreadable (the state cannot be read: the node sets the partition aside too), moved (handed
// off from this node: it does not load the partition), shadowed (a topic directory of an
// earlier release's name beside the current one: never read), unknown-topic (a long topic's
// directory name is a hash: name the topic to read it). verify exits with status 1 when a
// partition is anything but ok or moved.
//
// What recovery takes comes from offsets.Inspect, which runs recovery's own code, so the tool
// and a node cannot disagree. list, show and verify only read, and take no lock: beside a
// running node what they print may be a moment old (a node writes each partition's window
// every tick, 100 ms), and a slot read while the node rewrites it can show as damaged: run
// verify again.
//
// reset renames a partition's directory to PARTITION.reset-TIME beside it (TIME in UTC),
// which the node never reads, and syncs the topic's directory. It writes only with -confirm,
// and then only under the node's own lock on DIR (router.LockDir): while a node holds it,
// reset refuses. It refuses a partition handed off from this node too (consumer.moved). The
// partition's next start then finds no state: it starts at the log's oldest retained offset,
// delivering every retained record again, with a fresh incarnation, attempts counted afresh
// and the quarantine forgotten. There is no reset to a chosen frontier: consumer.offset's and
// consumer.id's encoders, and the order in which a node writes and syncs the files (the anchor
// slot never overwritten), belong to the committer, and the tool cannot see the log's
// retention or high watermark to check a frontier against; a frontier set wrong skips records.
//
// DIR is the state directory itself. Pointed at a host's data directory whose consumer
// subdirectory is the state directory (as the examples lay it out), every command says so,
// names the directory to point at, and exits with status 2.
//
// Flags may come anywhere among the arguments; "--" ends them. -json prints the same report
// as JSON. Exit status: 0 done, 1 verify found a partition not ok, 2 a usage error or a
// failure (nothing written). Errors go to stderr. No file, however damaged, makes it panic.
package main
