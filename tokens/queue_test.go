package tokens

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var epoch = time.Unix(1_700_000_000, 0)

// runQueue runs a script against a fresh queue, one step a line:
//
//	+1s / -1s        move the clock forward / back
//	hold 200ms       set Queue.Hold
//	reg A 5s         Register(A, 5s, now)
//	drop A           Drop(A)
//	fire 1 A         Fire(now, 1) must return a hold for A; "fire 1 -" must not fire
//	retire A true    Retire(A, now) must return true
//	abandon 2 true   Abandon(h, now) must return true, h the second hold Fire made
//	end 2 true       End(h, now) must return true, h the second hold Fire made
//	holds 1          Holds(now) must be 1; tokens 2 the same for Tokens
//	next +1s         NextChange(now) must be now+1s; "next -" must report none
//	idle true        Idle(now) must be true
func runQueue(t *testing.T, script string) {
	t.Helper()
	var q Queue
	var made []Hold // the holds Fire made, in order
	now := epoch
	for n, line := range strings.Split(strings.TrimSpace(script), "\n") {
		f := strings.Fields(line)
		where := "step " + strconv.Itoa(n+1) + ": " + strings.TrimSpace(line)
		switch {
		case f[0][0] == '+' || f[0][0] == '-':
			now = now.Add(duration(t, f[0]))
		case f[0] == "hold":
			q.Hold = duration(t, f[1])
		case f[0] == "reg":
			q.Register(f[1], duration(t, f[2]), now)
		case f[0] == "drop":
			q.Drop(f[1])
		case f[0] == "fire":
			available, err := strconv.Atoi(f[1])
			require.NoError(t, err, where)
			h, ok := q.Fire(now, available)
			if f[2] == "-" {
				require.False(t, ok, "%s: fired to %q", where, h.To)
			} else {
				require.True(t, ok, where)
				require.Equal(t, f[2], h.To, where)
				made = append(made, h)
			}
		case f[0] == "retire":
			require.Equal(t, f[2] == "true", q.Retire(f[1], now), where)
		case f[0] == "abandon":
			h := made[atoi(t, f[1])-1]
			require.Equal(t, f[2] == "true", q.Abandon(h, now), where)
		case f[0] == "end":
			h := made[atoi(t, f[1])-1]
			require.Equal(t, f[2] == "true", q.End(h, now), where)
		case f[0] == "holds":
			require.Equal(t, atoi(t, f[1]), q.Holds(now), where)
		case f[0] == "tokens":
			require.Equal(t, atoi(t, f[1]), q.Tokens(now), where)
		case f[0] == "next":
			at, ok := q.NextChange(now)
			if f[1] == "-" {
				require.False(t, ok, "%s: next change at %v", where, at)
			} else {
				require.True(t, ok, where)
				require.True(t, at.Equal(now.Add(duration(t, f[1]))), "%s: next change at %v", where, at.Sub(now))
			}
		case f[0] == "idle":
			require.Equal(t, f[1] == "true", q.Idle(now), where)
		default:
			t.Fatalf("%s: unknown step", where)
		}
		checkQueueBounds(t, &q)
	}
}

func duration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	require.NoError(t, err)
	return d
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// checkQueueBounds checks the memory bounds of a queue and its deadline heap: marked slots
// never outnumber the tokens, retired holds never outnumber the live ones, each ring is at
// most four entries long per entry it holds (or its minimum length), a power of two, and so
// is the heap's backing array (but for the power of two); the token map was rebuilt since it
// held four times its tokens; the heap holds exactly the queue's tokens, each at the index
// it records, in heap order.
func checkQueueBounds(t require.TestingT, q *Queue) {
	require.LessOrEqual(t, q.fifo.n-len(q.tokens), len(q.tokens), "marked slots outnumber tokens")
	require.LessOrEqual(t, q.retired, q.liveHolds, "retired holds outnumber live ones")
	checkRing(t, &q.fifo)
	checkRing(t, &q.holds)
	h := q.byDeadline
	require.LessOrEqual(t, cap(h), max(minRing, 4*len(h)), "heap array of %d for %d tokens", cap(h), len(h))
	require.True(t, q.tokensPeak <= minMap || len(q.tokens) > q.tokensPeak/4,
		"token map not rebuilt: %d tokens, %d at its peak", len(q.tokens), q.tokensPeak)
	require.Len(t, h, len(q.tokens), "heap and map disagree")
	for i, tok := range h {
		require.Equal(t, i, tok.index, "token of %s at %d records %d", tok.from, i, tok.index)
		require.Same(t, q.tokens[tok.from], tok, "heap token of %s is not its token", tok.from)
		if i > 0 {
			require.LessOrEqual(t, h[(i-1)/2].until, tok.until, "heap order broken at %d", i)
		}
	}
}

func checkRing[T any](t require.TestingT, r *ring[T]) {
	require.LessOrEqual(t, len(r.buf), max(minRing, 4*r.n), "ring of %d for %d entries", len(r.buf), r.n)
	require.Zero(t, len(r.buf)&(len(r.buf)-1), "ring length %d not a power of two", len(r.buf))
}

func TestQueueTable(t *testing.T) {
	tests := []struct {
		name   string
		script string
	}{
		{"empty queue fires nothing and is idle", `
			fire 5 -
			holds 0
			tokens 0
			next -
			idle true`},
		// checklist 94: a token reserves nothing; without a record nothing fires and the
		// token stays.
		{"a token without records fires nothing", `
			reg A 5s
			fire 0 -
			tokens 1
			holds 0
			idle false`},
		// checklist 96, 97: firing spends the token; one record, one peer told.
		{"fire spends the oldest token", `
			reg A 5s
			reg B 5s
			fire 5 A
			tokens 1
			fire 5 B
			tokens 0
			fire 5 -
			holds 2`},
		// checklist 95: one token per requester; registering again replaces it in place.
		{"register again keeps the place and does not stack", `
			reg A 5s
			reg B 5s
			+1s
			reg A 5s
			tokens 2
			fire 5 A
			fire 5 B
			fire 5 -`},
		{"register again moves the deadline", `
			reg A 5s
			+4s
			reg A 5s
			+4s
			tokens 1
			+1s
			tokens 0
			fire 1 -`},
		{"register again may shorten the token", `
			reg A 5s
			reg A 1s
			+1s
			tokens 0
			fire 1 -`},
		{"a lapsed token registered again goes to the tail", `
			reg A 1s
			reg B 5s
			+1s
			reg A 5s
			tokens 2
			fire 5 B
			fire 5 A`},
		{"a spent token registered again goes to the tail", `
			reg A 5s
			reg B 5s
			fire 5 A
			reg A 5s
			fire 5 B
			fire 5 A`},
		// checklist 105: an expired token is never notified; the TTL runs on the owner's clock.
		{"lapsed tokens are never fired", `
			reg A 1s
			reg B 2s
			reg C 3s
			+999ms
			tokens 3
			+1ms
			tokens 2
			+1s
			fire 1 C
			fire 1 -`},
		{"a token lapsing at the instant of fire is not fired", `
			reg A 1s
			+1s
			fire 1 -
			idle true`},
		// checklist 108: the drop frame of older peers.
		{"drop removes a token", `
			reg A 5s
			reg B 5s
			drop A
			drop Z
			tokens 1
			fire 5 B
			fire 5 -`},
		{"drop then register queues at the tail", `
			reg A 5s
			reg B 5s
			drop A
			reg A 5s
			fire 5 B
			fire 5 A`},
		{"register with no ttl drops", `
			reg A 5s
			reg A 0s
			tokens 0
			reg B 5s
			reg B -1s
			fire 5 -
			idle true`},
		{"drop leaves holds alone", `
			reg A 5s
			fire 1 A
			reg A 5s
			drop A
			holds 1
			retire A true`},
		// checklist 98, 100: holds count against the records available; the same record is
		// never promised to two peers.
		{"a hold counts against the records available", `
			reg A 5s
			reg B 5s
			reg C 5s
			fire 1 A
			fire 1 -
			holds 1
			tokens 2
			fire 2 B
			fire 2 -
			fire 3 C`},
		// checklist 102: a hold whose claim never comes ends at its deadline, and the record
		// goes to the next token at once.
		{"a hold ends at its deadline", `
			reg A 5s
			reg B 5s
			fire 1 A
			next +1s
			+999ms
			fire 1 -
			next +1ms
			+1ms
			holds 0
			next -
			fire 1 B`},
		{"hold length follows Queue.Hold", `
			hold 200ms
			reg A 5s
			reg B 5s
			fire 1 A
			next +200ms
			+200ms
			fire 1 B
			hold 0s
			next +200ms
			reg A 5s
			+200ms
			fire 1 A
			next +1s`},
		{"a negative Hold is the default", `
			hold -1s
			reg A 5s
			fire 1 A
			next +1s`},
		// checklist 101: a flagged claim retires the requester's own hold, and only its own.
		{"retire ends the requester's hold only", `
			reg A 5s
			reg B 5s
			fire 1 A
			retire B false
			holds 1
			retire A true
			holds 0
			retire A false
			next -`},
		{"retire ends the oldest hold of the requester", `
			reg A 5s
			reg B 5s
			fire 3 A
			+100ms
			reg A 5s
			fire 3 B
			+100ms
			fire 3 A
			holds 3
			next +800ms
			retire A true
			next +900ms
			retire B true
			next +1s
			holds 1
			retire A true
			idle true`},
		{"retire after the deadline finds nothing", `
			reg A 5s
			fire 1 A
			+1s
			retire A false`},
		// checklist 104: a pass retires the hold at once; the record goes to the next token a
		// round trip later, not after the deadline.
		{"a pass offers the record to the next token at once", `
			reg A 5s
			reg B 5s
			fire 1 A
			fire 1 -
			+2ms
			retire A true
			fire 1 B`},
		{"idle needs no live token and no live hold", `
			reg A 1s
			idle false
			fire 1 A
			idle false
			+1s
			idle true
			reg B 2s
			+1s
			idle false
			+1s
			idle true`},
		{"a hold over stays over when the clock goes back", `
			reg A 5s
			fire 1 A
			+1s
			holds 0
			-500ms
			holds 0
			reg B 5s
			fire 1 B`},
		{"a lapsed token stays lapsed when the clock goes back", `
			reg A 1s
			+1s
			tokens 0
			-1ms
			tokens 0
			fire 1 -
			reg A 5s
			reg B 5s
			+5s
			-1ms
			reg B 5s
			+2ms
			holds 0
			-2ms
			tokens 1
			fire 1 B
			fire 1 -`},
		{"a lapsed token leaves at the first call that sees it lapsed", `
			reg A 1s
			reg B 3s
			+1s
			holds 0
			-1ms
			idle false
			tokens 1
			fire 1 B`},
		{"abandon ends that hold and drops the requester's token", `
			reg A 5s
			reg B 5s
			fire 2 A
			reg A 5s
			tokens 2
			abandon 1 true
			holds 0
			tokens 1
			fire 1 B
			fire 1 -
			abandon 1 false
			holds 1`},
		{"abandon ends exactly its hold, not the requester's oldest", `
			reg A 5s
			fire 3 A
			+100ms
			reg A 5s
			fire 3 A
			holds 2
			abandon 2 true
			holds 1
			next +900ms
			retire A true
			idle true`},
		{"abandon after the deadline leaves a later hold and the token", `
			reg A 5s
			fire 3 A
			+100ms
			reg A 5s
			fire 3 A
			reg A 5s
			+900ms
			abandon 1 false
			holds 1
			tokens 1
			next +100ms`},
		{"abandon after a retire finds nothing", `
			reg A 5s
			fire 1 A
			reg A 5s
			retire A true
			abandon 1 false
			tokens 1
			retire A false`},
		{"abandon without a token ends the hold", `
			reg A 5s
			fire 1 A
			abandon 1 true
			idle true`},
		// checklist 104: a pass answering a notification ends that notification's hold; the
		// requester's token stays.
		{"end ends exactly its hold and keeps the token", `
			reg A 5s
			fire 2 A
			+100ms
			reg A 5s
			fire 2 A
			reg A 5s
			end 2 true
			next +900ms
			tokens 1
			end 2 false
			holds 1`},
		// A notification delivered twice draws a claim and a pass: the claim retires the
		// oldest hold, and the pass, finding its own hold gone, leaves the later one.
		{"end after a retire leaves the requester's later hold", `
			reg A 5s
			fire 2 A
			reg A 5s
			retire A true
			fire 2 A
			end 1 false
			holds 1
			reg A 5s
			fire 1 -`},
		{"end after the deadline finds nothing", `
			reg A 5s
			fire 1 A
			+1s
			end 1 false`},
		{"holds made on a clock that went back keep deadline order", `
			reg A 5s
			reg B 5s
			reg C 5s
			fire 3 A
			-500ms
			fire 3 B
			hold 100ms
			+200ms
			fire 3 C
			next +100ms
			+100ms
			next +700ms
			holds 2
			+700ms
			holds 1
			retire A true
			idle true`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runQueue(t, tc.script) })
	}
}

// TestQueueSparseStreamNotLate is the regression check of checklist 103: a remote consumer
// parked on a sparse stream must get every record at once. Before, holds ended only at their
// deadline, claims did not retire them, and each record's hold counted against the next
// one: every record after the first reached the parked consumer one hold late.
func TestQueueSparseStreamNotLate(t *testing.T) {
	var q Queue
	now := epoch
	q.Register("A", 5*time.Second, now)
	for record := range 10 {
		// A record commits; the estimate of available records is 1 (the previous one was
		// claimed and acked).
		h, ok := q.Fire(now, 1)
		require.True(t, ok, "record %d not fired at once: %d holds counted against it", record, q.Holds(now))
		require.Equal(t, "A", h.To)
		// A's claim, with the Claim flag, arrives a round trip later; then A registers again
		// for its consumer, which is still parked.
		now = now.Add(2 * time.Millisecond)
		require.True(t, q.Retire("A", now), "record %d: no hold to retire", record)
		require.Zero(t, q.Holds(now))
		q.Register("A", 5*time.Second, now)
		// The next record comes well within the hold.
		now = now.Add(100 * time.Millisecond)
	}
}

// TestQueueHoldRunOutNeverCountsAgain pins the other half of checklist 103: a hold whose
// claim never came ends at its deadline, and from then on never counts against a later
// record, which fires to the next token at once.
func TestQueueHoldRunOutNeverCountsAgain(t *testing.T) {
	var q Queue
	now := epoch
	q.Register("A", time.Minute, now)
	q.Register("B", time.Minute, now)
	q.Register("C", time.Minute, now)
	h, ok := q.Fire(now, 1)
	require.True(t, ok)
	require.Equal(t, "A", h.To)
	// A never claims. Until the deadline its hold gates the record.
	_, ok = q.Fire(now.Add(DefaultHold-time.Nanosecond), 1)
	require.False(t, ok)
	// At the deadline the record goes to the next token at once.
	now = now.Add(DefaultHold)
	h, ok = q.Fire(now, 1)
	require.True(t, ok)
	require.Equal(t, "B", h.To)
	require.True(t, q.Retire("B", now))
	// A's hold is over: a new record fires at once to C.
	h, ok = q.Fire(now, 1)
	require.True(t, ok)
	require.Equal(t, "C", h.To)
}

func TestQueueZeroValue(t *testing.T) {
	var q Queue
	require.False(t, q.Retire("A", epoch))
	require.False(t, q.Abandon(Hold{}, epoch))
	require.False(t, q.Abandon(Hold{To: "A"}, epoch))
	q.Drop("A")
	_, ok := q.Fire(epoch, math.MaxInt)
	require.False(t, ok)
	require.True(t, q.Idle(epoch))
}

func TestQueueHugeTTLSaturates(t *testing.T) {
	var q Queue
	q.Register("A", math.MaxInt64, epoch)
	require.Equal(t, 1, q.Tokens(time.Unix(0, math.MaxInt64-1)))
	q.Hold = math.MaxInt64
	h, ok := q.Fire(epoch, 1)
	require.True(t, ok)
	require.Equal(t, "A", h.To)
	at, ok := q.NextChange(epoch)
	require.True(t, ok)
	require.Equal(t, int64(math.MaxInt64), at.UnixNano())
}

// TestQueueChurnStaysSmall checks that registering and dropping many requesters leaves a
// ring the size of what is held: the marked slots are swept and the ring shrinks.
func TestQueueChurnStaysSmall(t *testing.T) {
	var q Queue
	names := make([]string, 1000)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i)
		q.Register(names[i], time.Minute, epoch)
	}
	require.Equal(t, 1000, q.fifo.n)
	for _, name := range names[:999] {
		q.Drop(name)
		checkQueueBounds(t, &q)
	}
	require.Equal(t, 1, q.Tokens(epoch))
	require.LessOrEqual(t, len(q.fifo.buf), minRing)
	// Lapsed tokens registered again leave a marked slot each, swept as they pile up.
	for i := range 100 {
		now := epoch.Add(time.Duration(i+1) * time.Minute)
		q.Register(names[999], time.Minute, now)
		checkQueueBounds(t, &q)
	}
	require.LessOrEqual(t, q.fifo.n, 2)
	h, ok := q.Fire(epoch.Add(100*time.Minute), 1)
	require.True(t, ok)
	require.Equal(t, names[999], h.To)
	require.Zero(t, q.fifo.n)
}

// Register, Drop and Fire allocate nothing once the queue has held its requesters.
func TestQueueSteadyStateAllocatesNothing(t *testing.T) {
	var q Queue
	names := []string{"A", "B", "C", "D"}
	for _, name := range names {
		q.Register(name, time.Minute, epoch)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		name := names[i%len(names)]
		i++
		q.Register(name, time.Minute, epoch)
		h, ok := q.Fire(epoch, 1)
		if !ok {
			t.Fatal("no fire")
		}
		q.Retire(h.To, epoch)
		q.Register(h.To, time.Minute, epoch)
		q.Drop(h.To)
		q.Register(h.To, time.Minute, epoch)
		// A notification that fails: its hold ends and the requester's token goes.
		h, ok = q.Fire(epoch, 1)
		if !ok || !q.Abandon(h, epoch) {
			t.Fatal("no hold to abandon")
		}
		q.Register(h.To, time.Minute, epoch)
	})
	require.Zero(t, allocs)
}

// TestQueueLapsedTokensLeave checks that tokens that lapse leave the queue, and its memory,
// with no Fire to meet them: on a topic with no record, one registration a millisecond from
// a new requester each time, each living 10 ms, as an owner sees many short waits from many
// nodes. Tokens and Idle after each registration, as the owner's router asks, see only the
// live ones. Then a burst of as many tokens lapsing at once leaves nothing behind either.
func TestQueueLapsedTokensLeave(t *testing.T) {
	const n = 100_000
	names := make([]string, n)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i)
	}
	var q Queue
	now := epoch
	for i, name := range names {
		q.Register(name, 10*time.Millisecond, now)
		require.Equal(t, min(i+1, 10), q.Tokens(now))
		require.False(t, q.Idle(now))
		if len(q.tokens) > 10 || q.fifo.n > 20 {
			t.Fatalf("after %d registrations the queue holds %d tokens in %d slots", i+1, len(q.tokens), q.fifo.n)
		}
		now = now.Add(time.Millisecond)
	}
	now = now.Add(9 * time.Millisecond)
	require.True(t, q.Idle(now))
	requireEmpty(t, &q)

	for _, name := range names {
		q.Register(name, 10*time.Millisecond, now)
	}
	require.Equal(t, n, q.Tokens(now))
	require.Equal(t, n, q.fifo.n)
	require.Zero(t, q.Tokens(now.Add(10*time.Millisecond)))
	requireEmpty(t, &q)
}

// requireEmpty checks that q keeps no token and no room for one beyond its minimum.
func requireEmpty(t *testing.T, q *Queue) {
	t.Helper()
	require.Empty(t, q.tokens)
	require.LessOrEqual(t, q.tokensPeak, minMap, "the token map keeps the room of its peak")
	require.Zero(t, q.fifo.n)
	require.LessOrEqual(t, len(q.fifo.buf), minRing)
	require.Empty(t, q.byDeadline)
	require.LessOrEqual(t, cap(q.byDeadline), minRing)
	require.LessOrEqual(t, len(q.spare), maxSpare)
	checkQueueBounds(t, q)
}
