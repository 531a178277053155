package main

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// The ledger applies the operations and checks what an ordered topic promises: each account's
// operations arrive in order, and one worker at a time holds an account. Past the poisoned
// operation, once quarantined, its account may go on (the order knowingly broken there), unless
// the topic quarantines keys (TopicConfig.QuarantineKeys): then there is no exception, its
// account's later operations must follow it into the quarantine, and they are applied, in
// order, only once the demo requeues them. (A handler may ack the key's records its batch
// holds behind the head; the worker does not, since it gives an account's later records of a
// batch back once one fails, so the ledger allows none.)
//
// Delivery is at least once, so the ledger also takes what a correct queue may do: a lease
// can lapse under a worker too slow to ack in time (a stall longer than the visibility
// timeout), and the operation comes back. The ledger then refuses the slow worker's write by
// its fencing token if the new holder applied it first (Message.Fence grows with every
// lease of the partition), and takes the redelivered operation as applied if the slow worker
// applied it first but its ack failed. Neither counts as a violation; an operation delivered
// again after an ack that succeeded does.
type ledger struct {
	maxDeliveries  uint32
	quarantineKeys bool               // the topic's QuarantineKeys: no exception to the order
	names          map[position]opRef // the plan's: what the records are, delivered or not

	mu                 sync.Mutex
	accounts           []account
	batches            uint64        // received
	applied, confirmed int           // operations applied, and of those acked
	target             int           // operations to settle (ack, or quarantine not requeued)
	done               chan struct{} // closed once they are
	quarantined        []quarantine
	requeued           int       // quarantined operations requeued
	lastChange         time.Time // of applied, confirmed, quarantined or requeued: the stall guard's

	orderViolations int // an operation applied that was not its account's next
	overlaps        int // a worker received an account another worker held
	ackedDelivered  int // an operation delivered again after its ack succeeded
	overdrafts      int // a withdrawal applied to a balance short of it
	lateDeliveries  int // an operation delivered after it reached maxDeliveries
	staleRefused    int // writes refused by their fencing token
	reapplied       int // deliveries of an operation applied already whose ack had failed
	examples        []string
}

// An account is one key's state in the ledger.
type account struct {
	balance int64
	next    int       // its lowest sequence number not applied yet
	ops     []opState // by sequence number
	holders []hold    // the workers holding it: one at most, unless the topic breaks its promise
}

type opState struct {
	applied, confirmed bool
	fence              uint64 // of the lease whose write applied it
	batch              uint64 // the last batch it was delivered in, by receive count; 0 if none
	failedAttempt      uint32 // the last delivery attempt that failed
}

// A hold is a worker's on an account: from the receive of a batch with records of the account
// until the worker settles or drops its last one.
type hold struct {
	worker int
	expiry time.Time // the latest lease expiry of its records: past it the hold is no hold
}

type position struct {
	partition int32
	offset    int64
}

// An opRef names an operation.
type opRef struct{ account, seq int }

func (r opRef) String() string { return fmt.Sprintf("%s op %d", accountName(r.account), r.seq) }

// A quarantine is what OnQuarantine told.
type quarantine struct {
	position
	attempts uint32
	op       opRef  // zero if the record is not one the plan produced
	batch    uint64 // the last batch its operation was delivered in, 0 if it never was
}

// clockSlack is how far a lease's expiry, on the node's clock (the wall clock read once, then
// the monotonic clock), may be from this process's time.Now(); it keeps a hold whose lease has
// lapsed from counting as held a moment too long.
const clockSlack = 10 * time.Millisecond

// maxExamples bounds the violations the summary quotes.
const maxExamples = 5

// newLedger returns the ledger of a plan's operations, for a topic with the given
// MaxDeliveries and QuarantineKeys.
func newLedger(p plan, maxDeliveries uint32, quarantineKeys bool) *ledger {
	l := &ledger{
		maxDeliveries: maxDeliveries, quarantineKeys: quarantineKeys, names: make(map[position]opRef, len(p.ops)),
		accounts: make([]account, len(p.counts)), target: len(p.ops), done: make(chan struct{}), lastChange: time.Now(),
	}
	for i, op := range p.ops {
		l.names[p.positions[i]] = opRef{op.account, op.seq}
	}
	for i := range l.accounts {
		l.accounts[i].next = 1
	}
	return l
}

func (l *ledger) violation(format string, args ...any) {
	if len(l.examples) < maxExamples {
		l.examples = append(l.examples, fmt.Sprintf(format, args...))
	}
}

// account returns an account, with room for its operation seq.
func (l *ledger) account(ref opRef) (*account, error) {
	if ref.account >= len(l.accounts) || ref.seq < 1 {
		return nil, fmt.Errorf("%v: not an operation this run produced", ref)
	}
	a := &l.accounts[ref.account]
	if ref.seq >= len(a.ops) {
		a.ops = slices.Grow(a.ops, ref.seq+1-len(a.ops))[:ref.seq+1]
	}
	return a, nil
}

// receive takes the holds of a batch a worker received, and checks that no other worker
// holds its accounts.
func (l *ledger) receive(worker int, batch []delivery, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches++
	for i := range batch {
		d := &batch[i]
		a, err := l.account(d.ref())
		if err != nil {
			return err
		}
		a.ops[d.op.seq].batch = l.batches
		if h := slices.IndexFunc(a.holders, func(h hold) bool { return h.worker == worker }); h >= 0 {
			// A later record of the account in the same batch: one hold.
			a.holders[h].expiry = later(a.holders[h].expiry, d.msg.Expiry)
			continue
		}
		for _, h := range a.holders {
			if now.Before(h.expiry.Add(-clockSlack)) {
				l.overlaps++
				l.violation("%s delivered to worker %d while worker %d held it", accountName(d.op.account), worker, h.worker)
				break
			}
		}
		a.holders = append(a.holders, hold{worker: worker, expiry: d.msg.Expiry})
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// release ends a worker's hold on an account. A worker calls it before it settles its last
// record of the account, since that settle frees the account for the others.
func (l *ledger) release(worker, account int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := &l.accounts[account]
	a.holders = slices.DeleteFunc(a.holders, func(h hold) bool { return h.worker == worker })
}

// An outcome is what the ledger did with an operation.
type outcome int

const (
	applied        outcome = iota
	appliedAlready         // applied before, under a lease that lapsed: ack it, apply nothing
	stale                  // refused: a later lease of the operation applied it
)

// apply applies an operation delivered under a lease with the given fencing token, checking
// that it is its account's next.
func (l *ledger) apply(op operation, fence uint64) (outcome, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ref := opRef{op.account, op.seq}
	a, err := l.account(ref)
	if err != nil {
		return 0, err
	}
	st := &a.ops[op.seq]
	if st.applied {
		switch {
		case fence < st.fence:
			l.staleRefused++
			return stale, nil
		case st.confirmed:
			l.ackedDelivered++
			l.violation("%v delivered again after its ack", ref)
		default:
			l.reapplied++
		}
		st.fence = fence
		return appliedAlready, nil
	}
	// Its account's next operation is the lowest one not applied, past any the topic gave up
	// on (the poisoned one, once quarantined: the order is knowingly broken there), unless
	// the topic quarantines keys.
	expected := a.next
	for expected < len(a.ops) && (a.ops[expected].applied || !l.quarantineKeys && a.ops[expected].failedAttempt >= l.maxDeliveries) {
		expected++
	}
	if op.seq != expected {
		l.orderViolations++
		l.violation("%v applied when op %d was the account's next", ref, expected)
	}
	if op.amount < 0 && a.balance+op.amount < 0 {
		l.overdrafts++
	}
	a.balance += op.amount
	*st = opState{applied: true, fence: fence}
	for a.next < len(a.ops) && a.ops[a.next].applied {
		a.next++
	}
	l.applied++
	l.lastChange = time.Now()
	return applied, nil
}

// confirm records an operation's successful ack.
func (l *ledger) confirm(ref opRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := &l.accounts[ref.account].ops[ref.seq]; !st.confirmed {
		st.confirmed = true
		l.confirmed++
		l.changed()
	}
}

// failed records that a delivery of an operation failed and is being nacked.
func (l *ledger) failed(ref opRef, attempt uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &l.accounts[ref.account].ops[ref.seq]
	if attempt > l.maxDeliveries {
		l.lateDeliveries++
		l.violation("%v delivered for the %dth time, past MaxDeliveries %d", ref, attempt, l.maxDeliveries)
	}
	st.failedAttempt = max(st.failedAttempt, attempt)
}

// quarantine is the node's OnQuarantine.
func (l *ledger) quarantine(partition int32, offset int64, attempts uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pos := position{partition, offset}
	q := quarantine{position: pos, attempts: attempts, op: l.names[pos]}
	if a, err := l.account(q.op); err == nil {
		q.batch = a.ops[q.op.seq].batch
	}
	l.quarantined = append(l.quarantined, q)
	l.changed()
}

// requeue notes that n quarantined operations were requeued: they are to be acked now.
func (l *ledger) requeue(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requeued += n
	l.done = make(chan struct{})
	l.changed()
}

// changed notes a settle, and says when the last one is in.
func (l *ledger) changed() {
	l.lastChange = time.Now()
	if l.confirmed+len(l.quarantined)-l.requeued == l.target {
		close(l.done)
	}
}

// settled returns a channel closed once every operation is acked or quarantined (and not
// requeued since).
func (l *ledger) settled() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// sinceChange is how long ago an operation was last applied, acked or quarantined.
func (l *ledger) sinceChange() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Since(l.lastChange)
}
