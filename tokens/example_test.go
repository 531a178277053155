package tokens_test

import (
	"fmt"
	"time"

	"narad.dev/consume/tokens"
)

// The owner of a topic's partitions keeps one Queue per topic. Requesters register tokens;
// a record that commits fires one of them, and the claim that follows retires the hold.
func ExampleQueue() {
	now := time.Unix(1_700_000_000, 0)
	var q tokens.Queue // under the topic's lock

	// Two nodes have consumers parked on the topic. Their TTLs are durations, added to the
	// owner's clock.
	q.Register("node-b", 10*time.Second, now)
	q.Register("node-c", 10*time.Second, now)

	// A record commits: one record available, one peer told.
	h, ok := q.Fire(now, 1)
	fmt.Println("notify", h.To, ok)
	// The same record is not promised again while node-b's claim is on its way.
	_, ok = q.Fire(now, 1)
	fmt.Println("again:", ok, "holds", q.Holds(now))

	// node-b's claim arrives with the Claim flag: the hold ends at once, and the next record
	// fires at once too.
	now = now.Add(2 * time.Millisecond)
	q.Retire("node-b", now)
	h, ok = q.Fire(now, 1)
	fmt.Println("next record: notify", h.To, ok)

	// node-c never claims: its hold ends at its deadline.
	at, _ := q.NextChange(now)
	fmt.Println("hold ends in", at.Sub(now))
	fmt.Println("idle after it:", q.Idle(at))
	// Output:
	// notify node-b true
	// again: false holds 1
	// next record: notify node-c true
	// hold ends in 1s
	// idle after it: true
}

// A notification that fails ends its own hold at once, and the requester's token with it:
// the record goes to the next token, and the requester that could not be told comes back
// with its next registration.
func ExampleQueue_Abandon() {
	now := time.Unix(1_700_000_000, 0)
	var q tokens.Queue

	q.Register("node-b", 10*time.Second, now)
	q.Register("node-c", 10*time.Second, now)
	first, _ := q.Fire(now, 2)
	q.Register("node-b", 10*time.Second, now) // node-b is still parked: it registers again
	second, _ := q.Fire(now, 2)
	fmt.Println("notify", first.To, "and", second.To)

	// node-b cannot be reached: its hold ends, not node-c's, and its token goes.
	fmt.Println("abandoned:", q.Abandon(first, now), "holds", q.Holds(now), "tokens", q.Tokens(now))
	// Abandoning it again, or after its deadline, changes nothing.
	fmt.Println("again:", q.Abandon(first, now))
	// Output:
	// notify node-b and node-c
	// abandoned: true holds 1 tokens 0
	// again: false
}

// The requester keeps one Registrations for the node and one Inbox per topic with parked
// consumers.
func ExampleRegistrations() {
	now := time.Unix(1_700_000_000, 0)
	var regs tokens.Registrations
	var inbox tokens.Inbox

	// A consumer parks for 10 s after its probe of owner node-a found nothing: it registers,
	// with a TTL of its remaining wait plus the share window.
	deadline := now.Add(10 * time.Second)
	if regs.Due("orders", "node-a", now, tokens.Resend) {
		regs.Sent("orders", "node-a", now, deadline.Sub(now)+tokens.ShareWindow)
	}
	// A second consumer parks 100 ms later and shares that registration.
	later := now.Add(100 * time.Millisecond)
	fmt.Println("share:", regs.Share("orders", "node-a", later, later.Add(5*time.Second)))

	// node-a notifies: its token is spent, and the wake goes to a parked consumer.
	regs.Spent("orders", "node-a")
	inbox.Push(tokens.Wake{Owner: "node-a", Claim: true, Until: later.Add(900 * time.Millisecond)})
	fmt.Println("keeper must register again:", regs.Due("orders", "node-a", later, tokens.Resend))

	// The first consumer was served locally at that instant: it passes the wake on.
	w, _ := inbox.Pop(later)
	inbox.PushFront(w)
	w, _ = inbox.Pop(later)
	fmt.Println("claim from", w.Owner, "with the flag:", w.Claim)

	// Nobody is parked on the topic any more: forget, send nothing; the tokens lapse.
	regs.Forget("orders")
	fmt.Println("registrations:", regs.Len())
	// Output:
	// share: true
	// keeper must register again: true
	// claim from node-a with the flag: true
	// registrations: 0
}
