package tokens

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The model of a Queue: the tokens as a slice in FIFO order and the holds as a slice in the
// order they were made, every rule written the obvious way (scan, remove, append), against
// which the queue's marked slots, sweeps, deadline heap and sorted hold ring are checked.

type modelToken struct {
	from  string
	until time.Time
}

type modelHold struct {
	from  string
	until time.Time
	id    int // the hold's number in the order made, from 1
}

type queueModel struct {
	tokens []modelToken // FIFO order, live as last seen
	holds  []modelHold  // in the order made
	hold   time.Duration
	made   int // holds made so far
}

// expire ends the holds whose deadline is at or before now and the tokens that lapsed:
// every call of the queue that takes now does it first, and what ended stays ended.
func (m *queueModel) expire(now time.Time) {
	m.holds = slices.DeleteFunc(m.holds, func(h modelHold) bool { return !h.until.After(now) })
	m.tokens = slices.DeleteFunc(m.tokens, func(t modelToken) bool { return !t.until.After(now) })
}

func (m *queueModel) find(from string) int {
	return slices.IndexFunc(m.tokens, func(t modelToken) bool { return t.from == from })
}

func (m *queueModel) register(from string, ttl time.Duration, now time.Time) {
	m.expire(now)
	if ttl <= 0 {
		m.drop(from)
		return
	}
	if i := m.find(from); i >= 0 {
		m.tokens[i].until = now.Add(ttl)
		return
	}
	m.tokens = append(m.tokens, modelToken{from, now.Add(ttl)})
}

func (m *queueModel) drop(from string) {
	if i := m.find(from); i >= 0 {
		m.tokens = slices.Delete(m.tokens, i, i+1)
	}
}

// fire returns the requester told and the number of the hold made.
func (m *queueModel) fire(now time.Time, available int) (string, int, bool) {
	m.expire(now)
	if available <= len(m.holds) || len(m.tokens) == 0 {
		return "", 0, false
	}
	t := m.tokens[0]
	m.tokens = m.tokens[1:]
	m.made++
	m.holds = append(m.holds, modelHold{t.from, now.Add(m.hold), m.made})
	return t.from, m.made, true
}

// retire ends from's hold with the earliest deadline (the first made among equal ones).
func (m *queueModel) retire(from string, now time.Time) bool {
	m.expire(now)
	best := -1
	for i, h := range m.holds {
		if h.from == from && (best < 0 || h.until.Before(m.holds[best].until)) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	m.holds = slices.Delete(m.holds, best, best+1)
	return true
}

// end ends the hold numbered id, if it is live.
func (m *queueModel) end(id int, now time.Time) bool {
	m.expire(now)
	i := slices.IndexFunc(m.holds, func(h modelHold) bool { return h.id == id })
	if i < 0 {
		return false
	}
	m.holds = slices.Delete(m.holds, i, i+1)
	return true
}

// abandon ends the hold numbered id, if it is live, and drops its requester's token.
func (m *queueModel) abandon(id int, from string, now time.Time) bool {
	if !m.end(id, now) {
		return false
	}
	m.drop(from)
	return true
}

func (m *queueModel) nextChange(now time.Time) (time.Time, bool) {
	m.expire(now)
	if len(m.holds) == 0 {
		return time.Time{}, false
	}
	at := m.holds[0].until
	for _, h := range m.holds {
		if h.until.Before(at) {
			at = h.until
		}
	}
	return at, true
}

type queueMachine struct {
	q    Queue
	m    queueModel
	now  time.Time
	made []Hold // the holds the queue made, the i-th the model's number i+1
}

var requesters = []string{"A", "B", "C", "D", "E", "F"}

func (qm *queueMachine) from(t *rapid.T) string {
	return rapid.SampledFrom(requesters).Draw(t, "from")
}

func (qm *queueMachine) advance(t *rapid.T) {
	step := rapid.SampledFrom([]time.Duration{
		time.Nanosecond, 100 * time.Millisecond, 200*time.Millisecond - time.Nanosecond,
		time.Second, 3 * time.Second,
	}).Draw(t, "step")
	qm.now = qm.now.Add(step)
}

// clockBack moves the clock back: holds already over stay over, and so do lapsed tokens.
func (qm *queueMachine) clockBack(t *rapid.T) {
	qm.now = qm.now.Add(-rapid.SampledFrom([]time.Duration{time.Nanosecond, 150 * time.Millisecond, 2 * time.Second}).Draw(t, "back"))
}

func (qm *queueMachine) setHold(t *rapid.T) {
	h := rapid.SampledFrom([]time.Duration{0, -time.Second, 200 * time.Millisecond, time.Second, 3 * time.Second}).Draw(t, "hold")
	qm.q.Hold = h
	if h <= 0 {
		h = DefaultHold
	}
	qm.m.hold = h
}

// skip moves the clock forward, often by nothing, before a call: the call itself, rather
// than the check after the last step, then meets the tokens and holds that ended.
func (qm *queueMachine) skip(t *rapid.T) {
	qm.now = qm.now.Add(rapid.SampledFrom([]time.Duration{0, 0, 0, time.Nanosecond, 300 * time.Millisecond, time.Second}).Draw(t, "skip"))
}

func (qm *queueMachine) register(t *rapid.T) {
	qm.skip(t)
	from := qm.from(t)
	ttl := rapid.SampledFrom([]time.Duration{-time.Second, 0, time.Nanosecond, 300 * time.Millisecond, time.Second, 5 * time.Second}).Draw(t, "ttl")
	qm.q.Register(from, ttl, qm.now)
	qm.m.register(from, ttl, qm.now)
}

func (qm *queueMachine) drop(t *rapid.T) {
	from := qm.from(t)
	qm.q.Drop(from)
	qm.m.drop(from)
}

func (qm *queueMachine) fire(t *rapid.T) {
	qm.skip(t)
	available := rapid.IntRange(0, 4).Draw(t, "available")
	h, ok := qm.q.Fire(qm.now, available)
	wantTo, id, wantOK := qm.m.fire(qm.now, available)
	if h.To != wantTo || ok != wantOK {
		t.Fatalf("Fire(%d) = %q %v, model %q %v", available, h.To, ok, wantTo, wantOK)
	}
	if ok {
		if id != len(qm.made)+1 {
			t.Fatalf("model made hold %d after %d", id, len(qm.made))
		}
		qm.made = append(qm.made, h)
	}
}

// drawHold draws one of the holds made so far, live or not, or the zero Hold, and its number
// in the model (0 for the zero Hold).
func (qm *queueMachine) drawHold(t *rapid.T) (Hold, int) {
	i := rapid.IntRange(-1, len(qm.made)-1).Draw(t, "hold")
	if i < 0 {
		return Hold{}, 0
	}
	return qm.made[i], i + 1
}

func (qm *queueMachine) abandon(t *rapid.T) {
	qm.skip(t)
	h, id := qm.drawHold(t)
	if got, want := qm.q.Abandon(h, qm.now), qm.m.abandon(id, h.To, qm.now); got != want {
		t.Fatalf("Abandon(hold %d of %s) = %v, model %v", id, h.To, got, want)
	}
}

func (qm *queueMachine) end(t *rapid.T) {
	qm.skip(t)
	h, id := qm.drawHold(t)
	if got, want := qm.q.End(h, qm.now), qm.m.end(id, qm.now); got != want {
		t.Fatalf("End(hold %d of %s) = %v, model %v", id, h.To, got, want)
	}
}

func (qm *queueMachine) retire(t *rapid.T) {
	qm.skip(t)
	from := qm.from(t)
	if got, want := qm.q.Retire(from, qm.now), qm.m.retire(from, qm.now); got != want {
		t.Fatalf("Retire(%s) = %v, model %v", from, got, want)
	}
}

// check runs after every step and asks every query of the queue.
func (qm *queueMachine) check(t *rapid.T) {
	qm.m.expire(qm.now)
	if got, want := qm.q.Tokens(qm.now), len(qm.m.tokens); got != want {
		t.Fatalf("Tokens = %d, model %d", got, want)
	}
	if got, want := qm.q.Holds(qm.now), len(qm.m.holds); got != want {
		t.Fatalf("Holds = %d, model %d", got, want)
	}
	at, ok := qm.q.NextChange(qm.now)
	wantAt, wantOK := qm.m.nextChange(qm.now)
	if ok != wantOK || !at.Equal(wantAt) {
		t.Fatalf("NextChange = %v %v, model %v %v", at, ok, wantAt, wantOK)
	}
	if got, want := qm.q.Idle(qm.now), len(qm.m.tokens) == 0 && len(qm.m.holds) == 0; got != want {
		t.Fatalf("Idle = %v, model %v", got, want)
	}
	// Every token of the model is queued, in the model's order, and no other: a lapsed token
	// has left the queue.
	var queued []string
	for i := range qm.q.fifo.n {
		s := qm.q.fifo.at(i)
		if s.current() {
			queued = append(queued, s.tok.from)
			if qm.q.tokens[s.tok.from] != s.tok {
				t.Fatalf("queued token of %s is not its token", s.tok.from)
			}
		}
	}
	var want []string
	for _, tok := range qm.m.tokens {
		want = append(want, tok.from)
	}
	if !slices.Equal(queued, want) {
		t.Fatalf("FIFO %v, model %v", queued, want)
	}
	checkQueueBounds(t, &qm.q)
}

func TestQueueAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		qm := &queueMachine{now: epoch, m: queueModel{hold: DefaultHold}}
		t.Repeat(map[string]func(*rapid.T){
			"advance":   qm.advance,
			"clockBack": qm.clockBack,
			"setHold":   qm.setHold,
			"register":  qm.register,
			"drop":      qm.drop,
			"fire":      qm.fire,
			"retire":    qm.retire,
			"abandon":   qm.abandon,
			"end":       qm.end,
			"":          qm.check,
		})
	})
}
