// Package acklane is a node's forwarding of settles to the owners of their partitions: one
// Lane per owner, which keeps at most a window of RPCs in flight to it, queues the settles
// that come past the window, hands them out in batches as slots come free, answers each by
// its own deadline, and remembers what the owner refused.
//
// # Usage
//
// A node builds one Lanes with New, giving it its clock, its window, the function that
// sends a batch and reads the owner's answers (the node's protocol step: encoding, the
// frame's refusals), and the runner its background RPCs go on. A blocking settle calls
// Lane.Admit: with a slot free it sends the settle from its own goroutine and then calls
// HandOn; otherwise Admit queued it, and Wait returns its answer. A settle that returns at
// once (AckAsync) calls Enqueue, whose answer goes to a function: a slot taken for what
// Enqueue queued is picked up by a goroutine of the runner, which takes what has queued by
// the time it runs. A frame the node sends the owner for something else may carry queued
// plain acks too (TakeRiders), which the node answers from that frame's reply (Answer).
//
// # Answers
//
// Each queued settle gets exactly one answer, the first of: the owner's, through the batch
// that carried it; 503 unapplied once its deadline passes while it waits for a slot (it never
// left, so it is never applied); the caller's context error, if the caller gives up before
// it left (Wait); and, once it left, the node's no-reply status at its deadline if the reply
// has not come (the owner may have applied it), the late reply then dropped. One timer per
// lane, armed for the earliest deadline among the queued settles, gives the answers their
// budget owes (the sweep): settles need no timer each.
//
// # Refusals
//
// An owner on an older release refuses a field or an op it does not read. Lane.Refuse
// remembers that until a time, and Lane.Refuses tells the node whether to leave the field or
// op out of what it sends that owner now; a refusal of AckBatch makes the lane hand out
// batches of one.
//
// # Implementation notes
//
// Queued settles come from blocks of a batch's worth, allocated together, each used once;
// the answer channels of blocking settles are pooled per lane (a channel made inside a
// testing/synctest bubble may not be used outside it). A slot whose RPC came back answers
// its settles and lets them run a few turns of the scheduler before it takes the queue
// again, so that settles that come straight back leave together.
package acklane
