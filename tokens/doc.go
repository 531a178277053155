// Package tokens holds the delivery tokens with which a consumer parked on one node hears of
// records that arrive on partitions other nodes own: the owner's side (Queue) and the
// requester's side (Registrations, Inbox).
//
// A consume can land on any node, and the record it waits for usually commits on a partition
// some other node owns. Rather than poll every owner, the node holding the parked consumer
// (the requester) leaves a token with each remote owner of the topic, and an owner that sees
// a record arrive tells exactly one requester, which then claims the record: a consume aimed
// at that owner, carrying the Claim flag.
//
// # Owner side
//
// A token reserves nothing. It says only "consumers are parked on this topic at node R: tell
// R when a record shows up". An owner that never hears back from R has therefore taken no
// record out of circulation; only the claim reserves, and it is aimed at one owner.
//
// A Queue holds one topic's tokens, at most one per requesting node: a node with many
// consumers parked on the topic registers once for all of them, and registering again
// replaces its token in place (keeping its turn) rather than stacking a second one.
//
// Tokens lapse at their TTL, and a lapsed token leaves the queue, and memory, at the first
// call that sees it lapsed, on a quiet topic as on a busy one: a heap on the tokens'
// deadlines finds them. Every call of a Queue costs O(log n) amortized in the n tokens
// queued: a token's place in the registration order is marked where it stands when it
// leaves, skipped rather than searched for, and marked places are swept out once they
// outnumber the live ones.
//
// Firing a token spends it: one record, one token, one peer told, never a broadcast. A stale
// token thus costs one notification, not one per record for the rest of its life. Between
// the notification and the requester's claim, the owner holds the record back so that it is
// not promised to a second peer: Fire fires only while the caller's estimate of available
// records exceeds the live holds. Fire returns the hold it made (a Hold), which names the
// requester to notify. A hold ends in one of four ways:
//
//   - the requester's claim arrives carrying the Claim flag, and the caller retires the hold
//     at once (Retire). A plain probe is not a claim and never retires a hold: it could end a
//     hold promised to another peer;
//   - the requester passes (the consumer the wake was for was served meanwhile, or left, and
//     nobody else parked there could use it), and the caller ends the hold at once, so the
//     record goes to the next token a round trip later. A pass answering the notification
//     ends that very hold (End), since a notification delivered twice may have drawn a
//     claim as well, which retired one already; a pass sent later, in a frame of its own,
//     names no notification and retires the requester's oldest hold (Retire);
//   - the notification fails, and the caller abandons that very hold at once (Abandon), not
//     the requester's oldest one, which may be a later hold it already answered. The
//     requester's token goes with it: a node that could not be told is presumed gone, and its
//     next registration brings it back;
//   - none of these comes (the requester went away, or its claim was refused and sent again
//     as a plain probe, which takes the record without the flag), and the hold ends at its
//     deadline, Queue.Hold after the notification (DefaultHold, 1 s).
//
// A hold that ends, however it ends, no longer counts against later records. Holds that
// lingered to their deadline after their record was claimed would each count against the next
// record, and a parked remote consumer of a sparse stream would get every record one hold
// late.
//
// Crash recovery is nothing: an owner that restarts holds no tokens and no holds, and the
// requesters put their tokens back by registering again.
//
// # Requester side
//
// Registrations are the tokens this node left with owners, per (topic, owner). A requester
// registers with an owner only once its opening probe of that owner found nothing, in a frame
// of its own. A notification spends that owner's token, so the requester forgets its
// registration there at once (Spent). A keeper checks every KeepInterval (500 ms) that each
// owner of a topic with consumers parked here holds a live token from this node, and
// registers again where it does not (Due), and sends every registration again at least every
// Resend (5 s) whatever it believes, so a token an owner lost comes back.
//
// Consumers that park within ShareWindow (250 ms) of a registration share it rather than send
// their own, unless its TTL ends before their deadline (Share). The window is short because an
// owner's reply says only that the registration arrived, not that the token is still unspent.
//
// A TTL travels as a duration, never as a deadline: the sender sizes it on its own clock (the
// consumer's remaining wait plus the share window) and the owner adds it to its own, so clock
// skew between nodes cannot expire a live token early.
//
// Tokens lapse at their TTL, and nothing retires them. When nobody is parked on a topic any
// more, the requester forgets its registrations (Forget) and sends nothing: a stale token
// costs at most one notification, answered with a pass, where retiring tokens would cost a
// frame to every owner each time the parked count touched zero. Owners still accept the drop
// frame some peers send (Queue.Drop).
//
// A registration is outstanding from its send until a notification spends it or the topic is
// forgotten, whether or not it lapsed here meanwhile (the owner's clock decides that). A
// notification from an owner with no outstanding registration for its topic answers no token
// this node left there (Outstanding).
//
// An owner that refuses a registration (it runs a release that does not know the frame) is
// remembered for RefusalMemory (2 min), and consumers poll it meanwhile (Refused, Refusing).
//
// An Inbox holds a topic's wakes: the notifications received, each naming the owner holding a
// record for this node and until when, and the plain probe tickets. A consumer woken by a wake
// it cannot use (it was served locally, or its wait ran out at that instant) puts the wake
// back at the head for the next consumer parked here, which claims the held record; when
// nobody is left, the wakes are drained and passed, so the owners retire their holds at once.
//
// # Time and concurrency
//
// The package reads no clock and starts no goroutine: every method that depends on time takes
// now, so it is deterministic under test. Deadlines are kept as Unix nanoseconds. Nothing in
// it is safe for concurrent use: the caller holds a lock per topic (or per node, for
// Registrations) around every call. Zero values are ready to use.
package tokens
