// Package router assembles the library into a Node: the member of a deployment that serves
// queue-style consumption over the partitions it owns.
//
// The host supplies its log (Logs, and optionally ManyGetter), who owns what (Routes), a
// state directory, and optionally a Clock, a *slog.Logger and a file system. The node wires
// the in-flight shards (package inflight), the pump that parks long-polls (package pump)
// and the committer that persists ack state (package offsets), and owns every goroutine it
// starts.
//
// # Usage
//
//	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/var/lib/app/consume"})
//	defer node.Close() // persists every ack: a restart redelivers nothing acked
//
//	// The host's produce path, after each append:
//	node.Appended(topic, partition, highWatermark)
//
//	// A consumer's long-poll, then its ack:
//	msgs, err := node.Consume(ctx, topic, router.ConsumeOptions{Max: 10, Wait: 20 * time.Second})
//	for _, m := range msgs {
//		process(m.Value)
//		err = node.Ack(ctx, topic, m.Receipt.String()) // inflight.ErrGone: the lease lapsed
//	}
//
// # Consume
//
// A consume scans this node's partitions of the topic, starting at a partition that rotates
// per topic so partitions drain evenly. For each it reserves the lowest unresolved offset
// above the committed frontier, then reads it: a reservation precedes every read, so no
// offset is ever leased to two consumers at once. The first partition's log is resolved on
// its own; only if it is empty are the rest resolved, with one GetMany when the host offers
// it. A consume that finds nothing and may wait parks on the topic's waiter queue (or its
// partition's, when pinned) and costs nothing until a record arrives: Appended, a nack or a
// lease expiry wakes the pump, which reserves one record for the consumer at the head of the
// queue and hands it over.
//
// Read failures follow the spec: an offset below retention jumps the frontier to the oldest
// retained offset in one step (logged at most once a minute per partition); a permanently
// unreadable record is skipped, counted and logged; a closed log is transient, and the
// reservation is given back.
//
// # Guarantees
//
//   - A record is leased to one consumer at a time; only the live lease's receipt handle
//     acks, extends or nacks it (inflight.ErrGone otherwise).
//   - A record not acked is delivered again: after its visibility timeout (plus at most the
//     1 s purger cadence) if its consumer died, at once if it was nacked.
//   - Acks reach the page cache within a tick (100 ms) and the disk within the commit
//     interval (1 s by default). A process crash redelivers about one tick of acks, a power
//     loss about one interval plus a tick; Close persists everything.
//   - No recovery ever moves the frontier past a record that was not acked. The state files
//     are checksummed and name their partition and incarnation; a damaged or foreign one is
//     ignored (logged, counted), and the partition then delivers again rather than skips.
//   - A deleted topic stays deleted: a call that resolved it before DeleteTopic and ends
//     after creates and serves nothing of it, so the topic created again under the name
//     starts afresh (its first consume answers every record of the new log).
//
// # Forwarded acks
//
// With Config.Transport set, an ack, extend or nack whose partition another node owns (as
// Routes says) goes to that node, which applies it through Serve and answers each record as
// the single op would have. While fewer than Config.AckWindow RPCs to an owner are in flight
// each ack goes alone; past that they queue and leave as AckBatch frames of up to 64, one per
// freed slot, all within a 2 s budget. An owner that refuses AckBatch gets single ops for two
// minutes. Consuming from partitions other nodes own is not built yet.
//
// # Beyond the spec
//
// Work runs a handler per record for in-process consumers (extending leases while handlers
// run, acking, nacking, releasing on shutdown); AckDurable returns once an ack is on disk,
// group-committed; TopicConfig bounds poison records (MaxDeliveries with a quarantine that
// Quarantined, Requeue and Config.OnQuarantine expose, Backoff, extension caps); Stats,
// WriteMetrics, MetricsHandler and Expvar export the counters; HTTPStatus maps errors to the
// statuses the spec answers with.
//
// # Errors
//
// Errors come back as sentinels to test with errors.Is: ErrUnknownTopic, ErrNotLocal,
// ErrInvalidArgument, ErrClosed, ErrLogClosed, and from package inflight ErrGone (410),
// ErrAlreadySettled (a repeated ack: success) and ErrMalformedHandle (400).
package router
