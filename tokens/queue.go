package tokens

import "time"

// DefaultHold is how long a notified record is held back for its requester when neither a
// claim nor a pass comes from it: long enough for a notification and a claim to cross the
// network, short enough that a requester that went away keeps the record from the other
// peers only briefly.
const DefaultHold = time.Second

// A Queue holds one topic's delivery tokens on a node that owns partitions of the topic,
// in the order they were registered, and the holds of the records it told requesters about.
//
// A token reserves nothing: it only says that the requesting node has consumers parked on
// the topic and wants to hear when a record shows up. Each requesting node has at most one
// token in the queue; registering again replaces it. Fire spends the oldest live token for
// one record and holds that record back for the requester until its claim (or its pass)
// arrives and the caller calls Retire, until the notification fails and the caller calls
// Abandon, or until the hold's deadline, whichever comes first. The live holds count against
// the records the caller says are available, so the same record is never promised to two
// peers.
//
// Deadlines are kept as Unix nanoseconds: a token is live while now is before its deadline,
// and so is a hold. A token whose deadline has passed has lapsed, and a hold whose deadline
// has passed is over. Either ends for good at the first call that sees it so, even if a
// later call's now lies before it again: a lapsed token leaves the queue (and memory) then,
// and registering its requester again queues it afresh at the tail.
//
// The zero value is an empty queue ready to use. A Queue reads no clock and is not safe for
// concurrent use: the caller holds its topic's lock around every call.
type Queue struct {
	// Hold is how long a record Fire told a requester about stays held when no claim or pass
	// retires it. Zero or negative means DefaultHold.
	Hold time.Duration

	// tokens maps each requester with a live token (as last seen) to its token.
	tokens map[string]*token
	// tokensPeak is the most entries tokens held since the map was made: a Go map keeps the
	// room it once grew to, so the map is rebuilt once it holds a quarter of that.
	tokensPeak int
	// fifo holds the tokens in registration order. A slot is current when its token carries
	// the slot's sequence number; the others are marked (a token dropped, spent, or lapsed,
	// possibly queued again at the tail) and skipped. Every token has exactly one current
	// slot, so the marked slots number len(fifo) - len(tokens); they are swept out once they
	// outnumber the current ones.
	fifo ring[slot]
	seq  uint64 // sequence number of the latest slot pushed
	// byDeadline holds the same tokens as tokens, as a min-heap on their deadline, so that
	// the lapsed ones are found at its top.
	byDeadline tokenHeap
	// spare holds a few tokens dropped, spent or lapsed, for reuse: a requester that
	// registers again after each notification allocates nothing.
	spare []*token

	// holds are the records told about and not yet claimed, passed, abandoned or past their
	// deadline, sorted by deadline (ties in the order they were made). Every entry at the
	// head is live after expireHolds: retired ones are skipped and swept out once they
	// outnumber the live.
	holds     ring[hold]
	liveHolds int    // entries of holds neither retired nor, as last seen, past their deadline
	retired   int    // entries of holds retired and still in the ring
	holdSeq   uint64 // sequence number of the latest hold made
}

// A Hold is one record Fire told a requester about and holds back for its claim. Fire
// returns it so that the caller can end exactly that hold when the notification fails
// (Abandon); the zero Hold is never live.
type Hold struct {
	// To is the requester to notify.
	To  string
	seq uint64 // identifies the hold among all those the queue made
}

// token is a requester's registration: live while now < until.
type token struct {
	from  string
	until int64  // Unix nanoseconds
	seq   uint64 // sequence number of its current slot in the FIFO; 0 once released
	index int    // its position in the queue's byDeadline heap
}

// maxSpare is how many released tokens a queue keeps for reuse.
const maxSpare = 8

// slot is one place in the FIFO: current while tok.seq == seq.
type slot struct {
	tok *token
	seq uint64
}

func (s *slot) current() bool { return s.tok.seq == s.seq }

// hold is a record held back for from until its claim, pass or failed notification, or
// until.
type hold struct {
	from    string
	until   int64  // Unix nanoseconds
	seq     uint64 // identifies it, as the Hold Fire returned for it
	retired bool
}

// Register places from's token, living until now+ttl, as a registration from that node
// asks. A live token of from is updated in place: its deadline becomes now+ttl and it keeps
// its place in the FIFO, so a requester that registers again before its token is spent does
// not lose its turn, and one requester never holds two tokens. A spent or lapsed token is
// queued afresh at the tail. A ttl of zero or less drops from's token (see Drop).
//
// The ttl is a duration added to the owner's clock, never a deadline from the requester's:
// clock skew between the two nodes cannot shorten a token. Register costs O(log n) amortized
// in the n tokens queued, as does every call that takes now, lapsed tokens released
// included: a token lapses once, and its release is paid for by the registration that
// queued it.
func (q *Queue) Register(from string, ttl time.Duration, now time.Time) {
	at := now.UnixNano()
	q.expire(at)
	if ttl <= 0 {
		q.Drop(from)
		return
	}
	until := after(at, ttl)
	if t := q.tokens[from]; t != nil {
		// Live, since expire released the lapsed ones.
		t.until = until
		q.byDeadline.fix(t.index)
		return
	}
	t := q.newToken(from)
	q.seq++
	t.until, t.seq = until, q.seq
	q.fifo.pushBack(slot{tok: t, seq: q.seq})
	q.byDeadline.push(t)
	q.tidyTokens()
}

// Drop removes from's token, if the queue holds one; holds are left alone. Older peers send
// a frame that asks for it. Drop costs O(log n) amortized: the token's slot in the FIFO is
// marked where it stands, not searched for.
func (q *Queue) Drop(from string) {
	if t := q.tokens[from]; t != nil {
		q.byDeadline.remove(t.index)
		q.release(t)
		q.tidyTokens()
	}
}

// Fire tells one requester about one record, when there is a record left that no live hold
// accounts for: available is the caller's estimate of the records ready to be consumed,
// and Fire acts only when it exceeds Holds(now). It then spends the oldest live token,
// holds the record for the token's requester until now+Hold, and returns the hold: the
// caller notifies h.To, and abandons h if the notification fails.
//
// ok is false, and nothing changes but the lapsed tokens and the holds over released, when
// there is no live token or no record beyond those held. Fire costs O(log n) amortized in the
// n tokens queued; only a hold made on a clock that went back (or after Hold shrank) walks
// back past the later holds to its place.
func (q *Queue) Fire(now time.Time, available int) (h Hold, ok bool) {
	at := now.UnixNano()
	q.expire(at)
	if available <= q.liveHolds {
		return Hold{}, false
	}
	for q.fifo.n > 0 {
		s := q.fifo.popFront()
		if !s.current() {
			continue // a marked slot
		}
		// Live, since expire released the lapsed ones.
		t := s.tok
		from := t.from
		q.byDeadline.remove(t.index)
		q.release(t)
		q.tidyTokens()
		return q.addHold(from, after(at, q.holdFor())), true
	}
	return Hold{}, false
}

// Retire ends from's oldest live hold at once, because a claim carrying the Claim flag
// arrived from that requester, or it passed (it could not use the record). It reports
// whether from had a live hold. The record is then no longer held back: the next Fire may
// promise it to another peer at once, rather than after the hold's deadline.
//
// A plain probe must never call Retire: it is not a claim, and it could end a hold that was
// promised to another peer. Retire is linear in the live holds, which are few: at most one
// per record told about and not yet claimed.
func (q *Queue) Retire(from string, now time.Time) bool {
	q.expire(now.UnixNano())
	return q.retire(func(e *hold) bool { return e.from == from })
}

// End ends exactly the hold h at once, because h.To answered h's notification with a pass,
// and reports whether h was live; h.To's token is left alone. A hold already retired or past
// its deadline is left as it is.
//
// Unlike Retire, End cannot end another hold of the same requester. A notification the
// network delivered twice draws two answers: a claim from the copy that spent the token, and
// a pass from the other, which found none. The claim retires the requester's oldest hold;
// the pass, ending that same hold (gone by then) rather than the requester's oldest, leaves
// a later hold, whose notification is still on its way, counting against the records. It
// is linear in the live holds, as Retire is.
func (q *Queue) End(h Hold, now time.Time) bool {
	q.expire(now.UnixNano())
	return h.seq != 0 && q.retire(func(e *hold) bool { return e.seq == h.seq })
}

// Abandon ends exactly the hold h at once, because the notification of h.To failed, and
// drops h.To's token too if it has one: a requester that could not be told is presumed gone,
// and its next registration brings it back. It reports whether h was live; a hold already
// retired or past its deadline is left as it is, and so is h.To's token, which the requester
// may have registered again since.
//
// Like End, Abandon cannot end another hold of the same requester, one whose notification
// went through. It is linear in the live holds, as Retire is.
func (q *Queue) Abandon(h Hold, now time.Time) bool {
	if !q.End(h, now) {
		return false
	}
	q.Drop(h.To)
	return true
}

// Holds returns the number of live holds: records told about whose claim or pass has not
// come and whose deadline is after now.
func (q *Queue) Holds(now time.Time) int {
	q.expire(now.UnixNano())
	return q.liveHolds
}

// Tokens returns the number of live tokens (deadline after now). Beyond releasing the tokens
// that lapsed, which Register pays for, it costs O(1).
func (q *Queue) Tokens(now time.Time) int {
	q.expire(now.UnixNano())
	return len(q.tokens)
}

// NextChange returns the earliest deadline of a live hold: the moment Fire may answer
// differently for the same available count, since a hold then stops counting against it.
// ok is false when there is no live hold. A caller that could not fire for lack of records
// beyond the holds fires again then.
func (q *Queue) NextChange(now time.Time) (at time.Time, ok bool) {
	q.expire(now.UnixNano())
	if q.holds.n == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, q.holds.at(0).until), true
}

// Idle reports that the queue holds no live token and no live hold, so the caller may
// forget it: a new queue would behave the same. Beyond ending the holds and releasing the
// tokens that are over, it costs O(1).
func (q *Queue) Idle(now time.Time) bool {
	q.expire(now.UnixNano())
	return q.liveHolds == 0 && len(q.tokens) == 0
}

func (q *Queue) holdFor() time.Duration {
	if q.Hold <= 0 {
		return DefaultHold
	}
	return q.Hold
}

// expire ends what now finds over: the holds whose deadline is at or before now, and the
// tokens that lapsed, which leave the queue. The lapsed tokens are at the top of the
// deadline heap, so each costs O(log n) once.
func (q *Queue) expire(now int64) {
	q.expireHolds(now)
	released := false
	for len(q.byDeadline) > 0 && q.byDeadline[0].until <= now {
		q.release(q.byDeadline.pop())
		released = true
	}
	if released {
		q.tidyTokens()
	}
}

// tidyTokens sweeps the marked slots out of the FIFO once they outnumber the current ones,
// and shrinks its ring, the deadline heap and the token map. A slot is marked once and swept
// once, and a map or heap is rebuilt only after it lost three quarters of its entries, so
// tidying costs O(1) amortized per token released, and the FIFO never holds more than twice
// as many slots as tokens.
func (q *Queue) tidyTokens() {
	if q.fifo.n-len(q.tokens) > len(q.tokens) {
		q.fifo.filter((*slot).current)
	}
	q.fifo.shrink()
	q.byDeadline.shrink()
	if q.tokensPeak > minMap && len(q.tokens) <= q.tokensPeak/4 {
		m := make(map[string]*token, len(q.tokens))
		for from, t := range q.tokens {
			m[from] = t
		}
		q.tokens, q.tokensPeak = m, len(m)
	}
}

// minMap is the largest token map never rebuilt to shrink it.
const minMap = 64

// newToken enters a token for from, a spare one if there is one.
func (q *Queue) newToken(from string) *token {
	if q.tokens == nil {
		q.tokens = make(map[string]*token)
	}
	var t *token
	if n := len(q.spare); n > 0 {
		t, q.spare = q.spare[n-1], q.spare[:n-1]
	} else {
		t = new(token)
	}
	t.from = from
	q.tokens[from] = t
	q.tokensPeak = max(q.tokensPeak, len(q.tokens))
	return t
}

// release takes t, already out of the deadline heap, out of the queue (its slot is left
// marked) and keeps it as a spare.
func (q *Queue) release(t *token) {
	delete(q.tokens, t.from)
	*t = token{}
	if len(q.spare) < maxSpare {
		q.spare = append(q.spare, t)
	}
}

// addHold records a hold for from until the given deadline, keeping the holds sorted by
// deadline, and returns it. Made at now+Hold on a clock that does not go back, a hold goes
// at the tail in O(1); one made earlier than the last (the clock went back, Hold shrank)
// walks back to its place.
func (q *Queue) addHold(from string, until int64) Hold {
	i := q.holds.n
	for i > 0 && q.holds.at(i-1).until > until {
		i--
	}
	q.holdSeq++
	q.holds.insert(i, hold{from: from, until: until, seq: q.holdSeq})
	q.liveHolds++
	return Hold{To: from, seq: q.holdSeq}
}

// retire ends the oldest live hold that match accepts, and reports whether there was one.
func (q *Queue) retire(match func(*hold) bool) bool {
	for i := range q.holds.n {
		h := q.holds.at(i)
		if h.retired || !match(h) {
			continue
		}
		h.retired = true
		q.retired++
		q.liveHolds--
		q.tidyHolds()
		return true
	}
	return false
}

// expireHolds ends the holds whose deadline is at or before now. They are at the head,
// since the holds are sorted by deadline.
func (q *Queue) expireHolds(now int64) {
	for q.holds.n > 0 {
		h := q.holds.at(0)
		if !h.retired && h.until > now {
			break
		}
		if !h.retired {
			q.liveHolds--
		} else {
			q.retired--
		}
		q.holds.popFront()
	}
	q.tidyHolds()
}

// tidyHolds drops the retired holds at the head, sweeps out the others once they outnumber
// the live ones, and shrinks the ring. A hold is retired once and swept once, so the sweep
// costs O(1) amortized per Retire.
func (q *Queue) tidyHolds() {
	for q.holds.n > 0 && q.holds.at(0).retired {
		q.holds.popFront()
		q.retired--
	}
	if q.retired > q.liveHolds {
		q.holds.filter(func(h *hold) bool { return !h.retired })
		q.retired = 0
	}
	q.holds.shrink()
}
