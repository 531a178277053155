// Package router assembles the library into a Node: the member of a deployment that serves
// queue-style consumption over the partitions it owns.
//
// The host supplies its log (Logs, and optionally ManyGetter and TopicIncarnation), who owns
// what (Routes), a state directory, and optionally a Clock, a *slog.Logger and a file system
// (FS). The node wires the in-flight shards (package inflight), the pump that parks
// long-polls (package pump) and the committer that persists ack state (package offsets), and
// owns every goroutine it starts.
//
// The protocol the node implements (leases, receipt handles, the frontier, the state files,
// the node wire) and the invariants the packages cite by name are described in
// docs/protocol.md at the root of the module.
//
// # Usage
//
//	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/var/lib/app/consume"})
//	if err != nil {
//		return err
//	}
//	defer func() {
//		// Close persists every ack, so a restart redelivers nothing acked; an error says the
//		// final writeout or the release of Dir's lock failed.
//		if err := node.Close(); err != nil {
//			log.Printf("consume: close: %v", err)
//		}
//	}()
//
//	// The host's produce path, after each append:
//	node.Appended(topic, partition, highWatermark)
//
//	// A consumer's long-poll, then its ack:
//	msgs, err := node.Consume(ctx, topic, router.ConsumeOptions{Max: 10, Wait: 20 * time.Second})
//	for _, m := range msgs {
//		process(m.Value)
//		err = node.Ack(ctx, topic, m.Receipt) // ErrGone: the lease lapsed
//	}
//
// # Consume
//
// ConsumeAppend is Consume appending to a slice the caller passes back, batch after batch,
// so that the messages cost no allocation.
//
// A consume scans this node's partitions of the topic, starting at a partition that rotates
// per topic so partitions drain evenly. For each it reserves the lowest unresolved offset
// above the committed frontier, then reads it: a reservation precedes every read, so no
// offset is ever leased to two consumers at once. The first partition's log is resolved on
// its own; only if it is empty are the rest resolved, with one GetMany when the host offers
// it. A consume that finds nothing and may wait parks on the topic's waiter queue (or its
// partition's, when pinned) and costs nothing until a record arrives: Appended, a nack or a
// lease expiry wakes the pump, which reserves one record for the consumer at the head of the
// queue and hands the reservation over; the woken consumer reads the record itself, so no log
// read runs on the pump goroutine and one slow read delays no other topic's wakeups. A
// reserved record found below retention or unreadable is passed over as the scan does, and
// the consumer waits on for what is left of its wait.
//
// A partition whose persisted state cannot be loaded (a state file that is a directory or a
// symbolic link out of its directory, a partition directory that is a file) is set aside
// rather than failing its topic: logged once, counted in Stats (SetAsideNow, SetAsides) and
// listed by Health with its error, and retried with backoff from 100 ms doubling to 30 s on
// the node's clock, by the first scan that reaches it after its retry time (no timer runs
// for it). Meanwhile unpinned consumes serve and park on the topic's other partitions; a
// pinned consume, an ack or another call naming the partition answers a *SetAsideError.
// When a retry loads the state the partition rejoins, logged once. DropPartition forgets
// it, so the next touch retries at once. A host error resolving the partition's log is not
// a broken state and keeps failing the scan that reaches it.
//
// An answer of the host's seams that their contract rules out (a nil Log, a negative
// watermark, routes naming a partition twice, ...; see seams.go) is refused where it enters
// the node with an error wrapping ErrHostContract, which names the seam and the call, and
// changes nothing: a scan passes over the partition as over a set-aside one, counting it in
// Stats.HostContractViolations and logging it at most once a minute per partition, while a
// pinned consume, an ack or a replay of it answers the error. A panic of the host's code on
// the node's own goroutines (the pump, the keeper, offers to and probes of other nodes) is
// recovered, counted in Stats.HostPanics and logged, and so is a panic of
// Config.OnQuarantine or of the Transport's Call wherever they run (the Call's becomes its
// error); elsewhere, on the caller's goroutine, a panic propagates.
//
// Read failures (see docs/protocol.md, "Retention jumps, corrupt skips and closed logs"): an
// offset below retention jumps the frontier to the oldest retained offset in one step
// (logged at most once a minute per partition); a permanently unreadable record is skipped,
// counted and logged; a closed log is transient, and the reservation is given back.
//
// # Guarantees
//
//   - A record is leased to one consumer at a time; only the live lease's receipt handle
//     acks, extends or nacks it (ErrGone otherwise).
//   - A record not acked is delivered again: after its visibility timeout (within 10 ms) if
//     its consumer died, at once if it was nacked.
//   - Acks reach the page cache within a tick (100 ms) and the disk within the commit
//     interval (1 s by default). A process crash redelivers about one tick of acks, a power
//     loss about one interval plus a tick; Close persists everything.
//   - No recovery ever moves the frontier past a record that was not acked. The state files
//     are checksummed and name their partition and incarnation; a damaged or foreign one is
//     ignored (logged, counted), and the partition then delivers again rather than skips.
//   - A deleted topic stays deleted: a call that resolved it before DeleteTopic and ends
//     after creates and serves nothing of it, so the topic created again under the name
//     starts afresh (its first consume answers every record of the new log). A backup of the
//     deleted life's state restored afterwards is told apart only with TopicIncarnation (see
//     PartitionDir for the limit without it).
//
// # The state directory and Close
//
// New creates Config.Dir and locks it for the node's life (an flock on Dir/%LOCK, LockFileEx
// on Windows, the file system's TryLock for a custom Config.FS that offers DirLocker; no lock
// for one that does not): a second node on the directory, in this process or another, gets
// ErrDirLocked, and a Dir that cannot be created or locked fails New. The lock dies with its
// process, so a node killed without Close leaves the directory free for its successor.
//
// Close turns away every call that starts after it began (ErrClosed), wakes parked
// consumers with ErrClosed, waits for the calls in progress, then stops the goroutines,
// persists the ack state and releases the directory. Whatever an ack, extend or nack
// answered before Close returned is persisted. A call costs two atomic adds for this.
// Shutdown(ctx) is Close bounded by ctx: if ctx ends first it returns ctx's error while the
// close goes on in the background, and the next Close or Shutdown waits for it and returns
// its outcome; every other later call answers ErrClosed.
//
// # Forwarded acks
//
// With Config.Transport set, every settle (Ack, AckAsync, AckBatch, AckDurable, Extend, Nack,
// NackNow, Release, Reject) whose partition another node owns (as Routes says) goes to that node, whose host
// hands the frame to its Serve; the owner answers each record as the single op would have,
// a durable ack once it is on the owner's disk. The call carries the caller's context values
// but not its cancellation. A handle whose owner Routes does not name answers ErrUnavailable
// with no RPC made. No time crosses the wire: a lease's expiry comes back as the time it has
// left, counted here from when the request left.
//
// Each forwarded ack has its own budget, ForwardBudget (2 s), for the wait for a slot and the
// round trip; ctx bounds only the wait for a slot. While fewer than Config.AckWindow RPCs to
// an owner are in flight an ack goes at once, alone; past that acks queue, and each freed slot
// sends the queue as one AckBatch of up to 64 records of one topic, carrying each record's
// remaining budget so that the owner does not apply a record whose budget ran out (it answers
// it 503, unapplied). The requester answers each ack by its own deadline: as the owner
// answered if the reply came in time; ErrUnavailable (503) if the ack never left, which
// guarantees it was not applied; ErrTransport (502) if it left and no reply came back in
// time, since the owner may have applied it. A Transport that ignores its context is
// abandoned at the deadline: each call runs in a goroutine of its own, unless the Transport
// is a ContextTransport (it promises to return once its context ends), which is called from
// the goroutine that waits for the reply. A peer's refusal is recognised by its status in the reply alone:
// an owner that refuses AckBatch as an unknown op gets the batch again as single ops, and
// only single ops for the next two minutes; an owner on a release before the node wire's
// version 10 gets no Reject for two minutes, which answers ErrUnsupportedOp (501), unapplied:
// a reject has no older form, and no nack or ack stands in for it; one before version 14
// gets a NackNow as a Nack with no delay (counted too, but after the topic's Backoff there).
// Node.AckBatch sends a client's remote handles to
// their owners at once, one AckBatch per 1,024 handles (per 64 to an owner before the node
// wire's version 13), the owners in parallel. The frames are
// described in docs/protocol.md, "Forwarded acks and the node wire".
//
// AckAsync is an ack that does not wait: done gets what Ack would have answered, at once for
// an ack applied here or refused before it leaves, and from a goroutine of the node for a
// forwarded one. A forwarded AckAsync queues; while a slot is free, one goroutine picks up
// what queued by the time it runs and sends it as one RPC, so that a consumer acking one
// record at a time shares RPCs and wake-ups, and no caller parks per ack. Close waits until
// every done has returned.
//
// # Moving a partition
//
// A partition moves by hand-off: HandOff on the old owner fences it (from its first instant
// every settle of the partition there is in the state it returns or refused with ErrMoved,
// forwarded once the routes name another owner), makes the state durable and returns it,
// live leases included; Adopt on the new owner installs it, and the receipt handles of those
// leases settle there until their leases end. A graceful move thus delivers no acked record
// again and leaves no record with two holders. For an owner that died, ReadState reads its
// last durable state from its state directory for Adopt; what it had not made durable comes
// back within the crash windows (docs/protocol.md, "Moving a partition").
//
// # Consumption across nodes
//
// With a Transport, a cluster of nodes behaves as one queue: a consumer may land on any node
// and gets a record from whichever node owns one, in 0, 1 or 2 round trips, with no broadcast
// and no polling while idle. A consume scans this node's partitions first (no round trip),
// then probes remote owners (the first with records answers: one round trip; two owners at
// most when it has a wait, every owner when it has none), then parks on this node's queue and leaves a delivery token (package tokens) with each owner,
// shared by every consumer parked here on the topic. A token reserves nothing: an owner where
// records show up fires one token per record it can spare, tells that node, and holds the
// record back for its claim; the consumer at the head of the node's queue claims it (two
// round trips). A hold ends at once with the claim or a pass, or lapses after
// Config.HoldTimeout. The node's keeper keeps the tokens in place while consumers wait, and
// polls instead the owners that cannot take tokens (older releases, or Config.NoCallbacks).
// A record's headers (Record.Headers) travel with it to the consumer (Message.Headers) on
// every path, local or across nodes; across nodes only when both speak wire version 9 or
// later (an owner sends them only to a requester that asks, which an older one cannot, and
// an owner before 9 refuses the asking once per two minutes): an older node on the way
// drops them.
// Pinned consumes and replays of a partition another node owns go to its owner; a batch
// travels as Max and is answered by one owner's scan of up to 100 records; an owner
// gives back every record of a reply that never reached its consumer (the cancel race).
// Liveness, an optional capability of Routes, says a node is down; OwnerFinder, another, names
// a partition's owner in one lookup for each forwarded ack. Config.WireVersion pins
// the wire version during a rolling upgrade. See docs/protocol.md, "Consumption across
// nodes".
//
// # Reading ahead
//
// A node whose consumers take other nodes' records reads ahead for them: it reserves
// records at the owners before its consumers ask (one refill at a time per topic, sized to
// their rate over half a hold, at most the topic's ReadAhead, DefaultReadAhead by default)
// and hands them over from memory, so a busy consumer's next record or batch costs no round
// trip and one RPC carries many records (up to 4,096; a probe carries 100). A reservation is not a delivery: the owner counts the attempt
// once the node confirms that a consumer got the record (or the consumer's settle reaches
// it), and a record given back unused, or whose reservation lapses, is not an attempt. A
// record waits at most the hold, min(MaxReadAheadHold, visibility/10), and then goes back to
// its owner; the lease handed over is the owner's, at most the hold shorter, and one with
// less than half the visibility timeout left is given back instead. One reservation takes at
// most half a partition's free in-flight room. Close, Shutdown and DeleteTopic give back
// what is held; ReadAheadOff turns it off for a topic. Stats.Ahead counts it. A node whose
// own partitions a consume found all drained takes what is held before it scans them again,
// until something wakes one of them (Appended, a nack, a release, an expiry) or for 16
// consumes. See docs/protocol.md, "Reading ahead" and "Local first".
//
// # Beyond consume and ack
//
// Work runs a handler per record for in-process consumers (extending leases while handlers
// run, acking, nacking, releasing on shutdown); AckDurable returns once an ack is on disk,
// group-committed; TopicConfig bounds poison records (MaxDeliveries with a quarantine that
// Quarantined, Requeue, Discard and Config.OnQuarantine expose, Backoff, extension caps); Reject
// quarantines a record at once, on its consumer's word that it will never succeed; Stats
// returns the counters, which package router/metrics exports for Prometheus and expvar;
// PartitionStatus and TopicStatus say how far behind a partition is and whether it is
// drained, QueueStatus the same of a topic's every partition wherever it is owned; Purge
// settles the node's partitions of a topic and PurgeQueue every partition across the
// owners; HTTPStatus maps errors to HTTP statuses.
//
// # Errors
//
// Errors come back as sentinels to test with errors.Is: ErrUnknownTopic, ErrNotLocal,
// ErrInvalidArgument, ErrClosed, ErrLogClosed, ErrDirLocked (from New), ErrGone (410),
// ErrAlreadySettled (a repeated ack; it matches ErrGone: 410), ErrMalformedHandle (400),
// ErrUnsupportedOp (501 alone: a Reject whose owner runs a release before the node wire's
// version 10, not applied), ErrTopicDropped (with
// ErrUnknownTopic: a call whose topic was deleted while it ran), and from AckDurable and Persist ErrShardGone and
// ErrStranded. ErrHostContract (500) is an answer of the host's seams that their contract
// rules out. The names a host needs from the packages the node is built of (Handle,
// Reason, Backoff, the file-system seam) are declared here too, as aliases, so a host
// imports router alone. A call naming a set-aside partition gets a *SetAsideError (errors.As), which wraps
// why its state could not be loaded.
package router
