// Package sim is a deterministic simulation of a cluster of router.Node under faults, with
// a checker of what the library promises (docs/protocol.md, "Invariants").
//
// # A run
//
// Run(seed, opts) draws everything from seed (math/rand/v2 PCG): the cluster's shape (2 to
// 5 nodes: owners of the partitions of one topic, and gateways owning none; some nodes
// playing an older release through Config.WireVersion 2 to 5, some unable to take
// callbacks), the topic's visibility timeout and caps, the network's round trip and
// jitter, which fault classes the run uses and how hard (a swarm: each class is on in some
// runs and off in others), and the workload. Each node is the real router.Node, on a strict
// crashfs.FS of its own, its nonce streams seeded through Config.Seeds; all of them talk over
// one routertest.Network. The caller runs Run inside a testing/synctest bubble: time is the
// bubble's fake clock, which every node reads too (plus an offset of its own, in runs with
// clock skew), so a minute of cluster time takes milliseconds and every deadline is exact.
//
// The workload, one step at a time: producers append to the owners' logs
// (routertest.MemLogs, then Node.Appended); consumers on any node take records with and
// without waiting, one at a time and in batches, with their own visibility timeouts, and
// some give up mid-wait (their context cancelled); they ack, nack (with and without a
// delay), extend and release what they hold, through any node, singly and in AckBatches,
// settle handles that lapsed or were never issued (forged), or walk away; replays read
// history. The faults: retention trims; corrupt records; graceful restarts, process crashes
// (crashfs ProcessCrash) and power cuts (crashfs PowerCut, some keeping part of the unsynced
// data or tearing the last write), each node down for a while or back at once; nodes cut off
// the network (calls to them fail at once, the failure detector noticing or not); partitions
// between groups of nodes; frames lost on their way, replies lost, frames delivered twice;
// a full disk (ENOSPC) and failing fdatasync (EIO, the dirty pages kept or dropped) on an
// owner; the topic deleted and created again (every node drops it, the logs start afresh).
// In some runs partitions move between nodes by hand-off, as a host moves one: HandOff on
// the old owner, Adopt on another node (an owner, or a gateway that becomes one), then the
// routes name that node. The old owner's routes stop naming the partition before HandOff,
// or after Adopt as the new owner's name it, or after Adopt alone; between the changes
// consumers settle the partition's leases through any node, the old owner included, and a
// settle that meets no node holding the state for the routes it took is refused (ErrMoved,
// or 503 forwarded). HandOff and Adopt are retried now and then with the same bytes, time
// passes between them now and then, and the old owner drops the partition (DropPartition)
// once its routes no longer name it, or not. In some runs an owner that is down (crashed,
// cut or stopped and not started again, or killed for the purpose, until the faults heal
// or for a while) fails over: ReadState from its disk as it survived, Adopt on a running
// node, and the routes name that node; started again, the dead owner's routes name the
// partition no more. Moves and failovers are made only between nodes with no disk fault in
// force.
//
// In some runs (drawn from a stream of their own, as the moves' are, so that a run without
// it draws what it drew before) the nodes keep their ack state in one shared state store
// (Config.Store: a routertest.MemStore, which survives every crash and power cut of every
// node; the nodes' disks then hold no ack state) instead of files, and a failover adopts the
// state the store holds (Load, then Adopt; a partition never saved is not failed over). Each
// process reaches the store through a wrapper of its own, which tells the model which
// process saved which partition when, and fails the saves of a process that crashed (a dead
// process saves nothing, its Close included).
//
// The faults behind graceful degradation, each a class on in some runs and drawn from a
// stream of its own as well (Options.OldSchedule turns them all off, Options.Hangs, Skew,
// Liar, MaxDeliveries and Rejects on):
//
//   - hung nodes (hang.go): for a while every frame sent to a node is lost on its way
//     (routertest.DropRequest: its caller learns nothing until its budget ends), while the
//     node runs on and the failure detector does not report it down; an owner most often,
//     a gateway now and then, whose notifications go unanswered;
//   - clock skew (skew.go): each node's Config.Clock reads the bubble's clock plus an offset
//     of its own (-vt, -1 s, -1 ms, 0, 1 ms, 1 s or vt, vt being the visibility timeout),
//     its AfterFunc unchanged; only in runs whose nodes all speak the newest wire version,
//     since an older release sends a lease's expiry as a time on its own clock and a skewed
//     requester then really believes a lease longer than it is (that release's documented
//     limit). The model keeps every time in the bubble's true time and converts what a node
//     reports on its own clock by its offset;
//   - a lying peer (liar.go): a peer that is no router.Node, named by no node's routes,
//     sends the nodes notifications of records it never held, cancels naming request ids
//     (at random, or ids it saw other nodes send), passes of holds it was never given, and
//     registrations of tokens of its own, whose notifications it answers with yes (and never
//     claims), a pass or silence;
//   - MaxDeliveries (quarantine.go): the topic sets TopicConfig.MaxDeliveries to 1, 2 or 3,
//     each process reports its quarantines through Config.OnQuarantine, and consumers
//     release leases through any node (forwarded, a release must not count an attempt).
//   - rejects (reject.go): about one settle in six is a reject (Node.Reject) through any
//     node. The checker takes a reject answered success as a settle for good, as an ack:
//     the record is not lost, and is not delivered again unless a crash window or a disk
//     fault of its owner explains it; its quarantine, told through Config.OnQuarantine, is
//     not an early one under MaxDeliveries. A reject answered ErrUnsupportedOp must come
//     from a path with a node before the node wire's version 10 on it, and change nothing
//     (the lease stays live: a nack in its place breaks one live holder).
//
// They heal with the other faults (the lying peer passing every notification from then on
// and forging nothing more).
//
// Two classes take ownership from owners that live on (zombie.go), each on in 15 % of the
// runs, drawn from a stream of its own (Options.Zombies and CutOffs turn them on,
// OldSchedule and NoStore off). A run with either keeps its ack state in the shared store,
// and its nodes serve under grants in time (Config.Ownership, ownership.go): a controller
// grants each partition to one node at a time under an epoch larger than any before it
// (fencing the store at it, routertest.MemStore.Fence), and keeps the grant alive while the
// node's process keeps its session, a keep-alive every third of the TTL (2, 3 or 5 s); a
// session lost lapses the TTL after its last keep-alive, and one that comes back after
// that is granted anew, under new epochs. Every move and failover goes through the
// controller: a hand-off revokes the old owner's grant once HandOff returned and grants the
// new owner before its Adopt; a failover (from a dead owner too: the host cannot tell it
// from a paused one) waits out the old owner's grant, its lapse plus a margin, grants the
// new owner, loads the stored state and Adopts it; after every change of the routes the
// nodes whose routes are current hear RoutesChanged. Some acks are AckDurable.
//
//   - paused owners: an owner stops for a while, as a process stopped by the kernel or a
//     migrated machine does: no call goes into it (frames sent to it wait, and are served
//     when it resumes if their caller still waits), it sends nothing, its keep-alives stop,
//     its clock stands still (so it jumps forward by the pause's length when it resumes)
//     and its timers wait for the resume. A long pause outlives its grants, and its
//     partitions fail over while it is paused, all or all but one; it resumes with stale
//     routes (still naming local what it owned; no RoutesChanged), and the consumers that
//     held its leases settle them through it at once, new consumers consume through it,
//     until the host catches its routes up (and calls RoutesChanged) a while later. A short
//     pause ends before anything lapses.
//   - owners cut off: an owner loses its peers (every frame between them is lost) and the
//     controller (its keep-alives stop), while its clients and the store still reach it: it
//     serves and saves until its grants lapse on its own clock; a long cut outlives them and
//     its partitions fail over, its clients going on through its stale routes.
//
// In some runs (drawn from a stream of their own: ordered.go; Options.Ordered turns them on,
// OldSchedule and NoOrdered off) the topic is ordered (TopicConfig.Ordered): each record
// produced gets a key from a small key set drawn for the run (1, 2, 3 or 5 keys), one in six
// none, so that keys collide often, batches hold several records of one key and records wait
// behind their keys; on in 25 % of the runs, and in every run of TestOrderedSeeds. The sparse
// stream's records have no key. In about half the ordered runs that quarantine (MaxDeliveries
// set, or rejects planned), drawn from a stream of their own as well (quarantinedkeys.go;
// Options.QuarantineKeys turns them on in such runs, OldSchedule and NoQuarantineKeys off),
// the topic sets TopicConfig.QuarantineKeys: a record quarantined takes its key with it, the
// key's records waiting behind it and each later one following it into the quarantine in
// offset order (OnQuarantine told of each). The simulation never requeues nor discards, so a
// key that went there stays there for the rest of its partition's incarnation, but for one
// whose quarantined records a restore cannot read (made unreadable, removed by retention).
//
// Then every fault heals, and consumers on every node drain the topic: the liveness bound.
// A sparse stream follows (one record at a time to a consumer parked on a node that does
// not own it, timed), then a graceful restart of every node and a last sweep (nothing acked
// may come back).
//
// # The checks
//
// As each event comes in:
//
//   - one live holder (invariant 1): no two leases of an offset overlap, whichever nodes
//     they were consumed on, and no lease is delivered twice. A hand-off carries the leases
//     the old owner held at its fence to the new owner, each with the time it had left (the
//     model shifts its end by the time the state stood still between HandOff's reading of
//     it and Adopt's), so a graceful move leaves no record with two holders; from then on a
//     crash of the new owner ends them, one of the old owner does not. A failover carries
//     none: the dead owner's leases ended at its death;
//   - only the owner serves: each lease is granted by the node the routes named the
//     partition's owner at its grant (the owner whose consume reply carried it between
//     nodes, or the node consumed on): never by an old owner after its hand-off, nor by any
//     node while the partition is on its way, nor by a dead owner started again after its
//     partitions failed over;
//   - the nonce is the authority, one settle per ack (invariants 2, 8): an ack, nack,
//     extend or release succeeds only on a live lease, answers ErrAlreadySettled for a
//     settled record and ErrGone otherwise, never a transport error on a healthy path; a
//     settle refused while its partition moves (ErrMoved, 503) changed nothing;
//   - the documented redelivery window (invariant 6): an acked record is leased again only
//     if the owner lost the ack: a process crash within a tick of it, a power cut within the
//     durability interval and a tick, a disk fault meanwhile (which widens both), or a
//     graceful stop whose final writeout failed; each is counted by its explanation. A
//     hand-off leaves no window: each ack the old owner answered before its fence, unless
//     one of its crashes undid it before then, is in the state, and durable for good once
//     Adopt returns. A failover leaves the dead owner's window: its acks are resolved by its
//     crash windows at its death, as for a restart. With the state store, the window is the store's: an ack is durable for good once a
//     Save of its partition by the process that applied it, called after the ack was
//     answered, returned; a crash or a power cut before such a save loses it, a graceful
//     stop saves it, and disk faults play no part;
//   - a deposed owner saves nothing (with the state store): the store receives no Save of a
//     partition from a node whose HandOff of it returned, until that node adopts it again,
//     nor, with grants, a save under a grant after it lapsed from a node whose clock runs (a
//     paused node's stands still: only the store's fence stops it);
//   - with grants, a node acts on a partition only under its grant (ownership.go): no lease
//     is granted under a grant that is not valid then (the lease check, as for a node that
//     does not own the partition); a lapse ends every lease granted under the grant, so
//     its holder is live until then, no longer (a settle of it answered success after the
//     lapse fails the settle check, and the new owner's leases, granted after the lapse and
//     the margin, never overlap it); a settle through a node whose routes are stale, or of
//     a lease whose owner lost its grant, may be refused (ErrMoved, or 503 forwarded) and
//     changed nothing, an ack so refused counting as one answered 502 if it met the grant
//     still valid;
//   - the failover's window (ownership.go): an ack answered success by an owner whose grant
//     then lapsed and that did not save it under that grant afterwards is lost, and may be
//     delivered again, only if it was answered within a commit interval, a tick and a
//     margin of the owner's running time before the lapse (a paused owner's committer runs
//     no more than its other goroutines: for the acks, a pause that outlives the grant is a
//     crash at its start); one lost outside it breaks the promise, and so does any
//     AckDurable answered success that is delivered again;
//   - nothing unexpected: every delivery is a record produced, with its bytes, not made
//     unreadable, not removed by retention and not of a deleted incarnation of the topic
//     before it was leased;
//   - one record, one promise (invariant 16): each time an owner notifies a node, its
//     notifications not yet claimed, passed, abandoned (unanswered within the
//     notification's budget) or lapsed number no more than the records it could hand out;
//   - one refusal per upgrade (invariant 14): an older release refuses a requesting process
//     an op or field at most once every 2 minutes after it learned of a refusal;
//   - the nodes' counters agree with what the network saw (notifications sent; records
//     skipped as corrupt);
//   - a consume's wait is bounded (returns.go): a consume issued at t with a wait w returns
//     by t + w + router.ConsumeOverrun, whatever the owners do (hang, lose frames, answer
//     late), give or take a margin of two one-way trips and 10 ms for the ordering of
//     events within an instant (a consume spends no other fake time: local scans, log reads
//     and disk work take none); one whose context ended first is exempt from then on;
//   - a bounded hold (model.go): a record another node leased reaches its consumer within
//     router.MaxReadAheadHold and a round trip (two of the longest one-way trips, and 10 ms)
//     of its grant, whether a probe, a claim or a gateway's read-ahead brought it;
//   - no early quarantine (quarantine.go): a record is quarantined only after MaxDeliveries
//     deliveries that count (or rejected, or, under QuarantineKeys, following a lower record
//     of its key that may be in the quarantine: told quarantined and not leased since, at
//     MaxDeliveries deliveries that count, or rejected), the model counting every lease of it a consumer received or an
//     owner's consume reply carried to another node, less those given back with success (a
//     consumer's release on a path that speaks wire version 7 end to end, a Release a node
//     sent for a reply it never handed over), unless the process that applied the give-back
//     crashed since; a lease given back by a Cancel, or whose reply was lost, counts (the
//     count errs high);
//   - a node believes a peer only where its routes and tokens back it (liar.go): each of the
//     lying peer's notifications is passed and counted in Stats().Remote.Unbacked, and no
//     node sends the peer anything but the notifications its own tokens ask for (no
//     consume, cancel or settle); whatever else it forged, the other checks see that no
//     consumer received a record not produced, not leased by its owner, or leased twice;
//   - one holder per key (ordered.go, in runs whose topic is ordered): no two consume
//     responses hold leases of records of one key of a partition that are both surely live
//     at once (the leases' conservative windows, as for one live holder: a lease that may
//     have ended, been settled, or whose process died does not count, nor one of a record
//     made unreadable or removed by retention); one response may hold several;
//   - a key's records in order (ordered.go): a record is delivered only once every lower
//     record of its key may have been settled for good (an ack or a reject sent, answered
//     success, 502 or not at all, or a quarantine told, with no redelivery of it since) or
//     is in the same response; so a record nacked, released, expired or whose holder died
//     comes back before any later one of its key, and after a crash or a failover the first
//     delivered is the lowest unacked (as far as the model can tell which acks a crash
//     undid: it errs towards passing). Left out, as the promise states: records that may be
//     quarantined (MaxDeliveries, rejects), made unreadable, removed by retention, or of a
//     deleted incarnation; the simulation requeues nothing, and replays are no deliveries.
//     Under QuarantineKeys the quarantine is no exception: a record is not delivered while a
//     lower record of its key surely is in the quarantine (quarantinedkeys.go: its quarantine
//     told before the grant by the process of the node that owned the partition then, under
//     a grant valid then in runs with grants, no lease of it granted since, the record
//     neither made unreadable nor removed by retention by then), since the key followed it
//     there.
//
// At the end, a Jepsen-style history check: every record produced and neither made
// unreadable, removed by retention nor quarantined is acked within the liveness bound after
// the faults healed (lost otherwise; an ack answered 502 and never followed by a delivery
// counts as applied); deliveries are counted unexpected and duplicate; and the sparse
// stream reaches its consumer within a few one-way trips per record (a notification and a
// claim, and a round trip for each field of the claim an owner on an older release refuses
// the first time), never after a lapsed hold.
//
// What the model cannot know exactly (when an owner applied a settle that took a round
// trip, whether one answered 502 was applied, how far a duplicated extend pushed an expiry,
// whether a duplicated frame's copy was applied first, at which instant of HandOff the
// fence came) it keeps as a range, and a check fails only when every point of the range
// breaks the promise.
//
// # Replaying a seed
//
// A failing seed prints the command that runs it alone, with its events logged. The nodes'
// goroutines run concurrently, so where two of them act at the same instant of the fake
// clock their order is the Go scheduler's; a tie-break below a microsecond per frame, drawn
// from the seed and the link, makes such meetings rare. Most seeds replay event for event
// (TestSeedsReplay measures how many), more with one thread, which a single-seed run uses;
// the failing seeds found so far failed the same way on every replay.
//
// Options.Plant plants a bug in the network (a claim turned into a probe, a consume reply
// delivered twice, an old owner answering settles after its hand-off, a transport that
// holds consume replies though it says it honours its context, a release turned into a
// nack, a reject turned into a nack) or in the nodes (nodes that ignore their grants, the
// store not fenced: a zombie serves what failed over from it; nodes that run an ordered
// topic unordered, or an ordered topic without QuarantineKeys where the checks expect it), to
// show that the checker catches it; Options.Tolerate lets a run go on past the violations of library bugs
// already reported.
package sim
