// Package pump parks consumers that found nothing to consume and hands each record that becomes
// available to exactly one of them (see docs/protocol.md at the root of the module, "The pump
// and long-polls").
//
// A consume that finds nothing calls [Pump.Wait]. The waiter joins its topic's FIFO, or, when it
// is pinned to a partition, that partition's own FIFO, and blocks on one buffered channel. A single
// pump goroutine per node ([Pump.Run]) pops the waiter at the head of a FIFO, and only then asks
// the [Source] for a record for it ([Source.Take]), and hands the record to exactly that
// waiter. The router's Take only reserves: the woken consumer reads the record from the log on
// its own goroutine, so a slow read holds up no other waiter. No other waiter wakes, and
// nobody scans: the cost of a delivery does not
// depend on how many consumers wait. Nothing is reserved before a waiter is popped, so there is
// no give-back path, except the one below for cancellation.
//
// # Wake-ups
//
// The pump sleeps on one kick channel, and two things kick it:
//
//   - a waiter joining a FIFO that has no live waiter in it;
//   - the wake notifier, [Pump.Notify] (or the finer [Pump.NotifyPartition]), which the host
//     calls when records may have become available: a high-watermark advance, a nack, a lease
//     expiry, a close, a partition gained.
//
// Waking on only one of them loses records: a consumer that arrives after its record landed
// would wait for the next one. The waiter's own kick covers a wake that arrived before it.
//
// There is a race inside this: while the pump holds a waiter it popped, the topic can look
// waiter-less to the notifier, which drops a wake arriving then; the pump puts the waiter back
// and it waits for a record that has already landed. Here the notifier's flag is a count of live
// waiters that keeps the held waiter in it, so no wake is dropped while the pump holds one; and
// the pump clears a FIFO's "due" mark before it calls Take, so a wake arriving during Take marks
// the FIFO again, and a pump that puts its waiter back runs the FIFO again.
//
// Pass order and stopping: a pass over a topic pumps its pinned FIFOs first (a pinned waiter
// can take only from its own partition), then the shared one. A FIFO stops at its first waiter
// Take cannot serve: that waiter goes back at the head, since every waiter behind it scans the
// same partitions. A pinned waiter on an empty partition therefore never stalls unpinned ones.
// Take is asked afresh on every attempt, so the partitions a waiter is served from follow the
// node's ownership while it waits.
//
// # Cancellation
//
// A waiter whose context ends is marked where it stands and skipped when popped: no search and
// no copy. Marked entries are swept out once they outnumber the live ones, so leaving costs O(1)
// amortized and a FIFO holds at most twice as many entries as live waiters; its ring shrinks as
// waiters leave, so churn leaves no memory behind.
//
// The waiter's state moves once, by compare-and-swap, from waiting to handed (by the pump) or to
// cancelled (by the waiter). A record handed over at the instant its waiter is cancelled goes
// back to the Source at once ([Source.Release]), whichever side lost the swap: Wait never returns
// ctx.Err() with a record given to it, and never drops one.
//
// # Idle cost
//
// No timer, no polling, no goroutine per waiter: a parked waiter is a channel and a FIFO slot,
// and the pump sleeps until kicked. The pump reads no clock. When a topic has no waiter,
// Notify returns after one lock-free map read and one atomic load, allocating nothing, so the
// produce path pays nothing for it. [Pump.DropTopic] drops a deleted topic's queue state, and a
// pinned FIFO goes as soon as nobody waits on it.
//
// # Usage
//
// The router implements Source over its in-flight shards and the host's logs, creates one Pump
// per node with [New], runs [Pump.Run] in a goroutine it owns (cancelled on close, after
// [Pump.Close] has answered the parked waiters), and wires the host's watermark advances and its
// own nacks, lease expiries and partition gains to Notify or NotifyPartition:
//
//	p := pump.New[Delivery](src)
//	g.Go(func() error { return p.Run(ctx) })
//	...
//	// in a consume whose scan found nothing:
//	d, err := p.Wait(reqCtx, topic, pinned) // pinned is -1 for an unpinned consume
//	...
//	// in Node.Appended(topic, partition, hwm):
//	p.NotifyPartition(topic, partition)
//
// A simulator drives [Pump.Step] from one goroutine instead of Run.
package pump
