package tokens

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The model of a Queue: the tokens as a slice in FIFO order and the holds as a slice in the
// order they were made, every rule written the obvious way (scan, remove, append), against
// which the queue's marked slots, sweeps and sorted hold ring are checked.

type modelToken struct {
	from  string
	until time.Time
}

type modelHold struct {
	from  string
	until time.Time
}

type queueModel struct {
	tokens []modelToken // FIFO order, lapsed ones included until Fire discards them
	holds  []modelHold  // in the order made
	hold   time.Duration
}

// expire ends the holds whose deadline is at or before now: every call of the queue that
// takes now does it first, and an ended hold stays ended.
func (m *queueModel) expire(now time.Time) {
	m.holds = slices.DeleteFunc(m.holds, func(h modelHold) bool { return !h.until.After(now) })
}

func (m *queueModel) find(from string) int {
	return slices.IndexFunc(m.tokens, func(t modelToken) bool { return t.from == from })
}

func (m *queueModel) register(from string, ttl time.Duration, now time.Time) {
	i := m.find(from)
	if ttl <= 0 {
		m.drop(from)
		return
	}
	if i >= 0 && now.Before(m.tokens[i].until) {
		m.tokens[i].until = now.Add(ttl)
		return
	}
	if i >= 0 {
		m.tokens = slices.Delete(m.tokens, i, i+1)
	}
	m.tokens = append(m.tokens, modelToken{from, now.Add(ttl)})
}

func (m *queueModel) drop(from string) {
	if i := m.find(from); i >= 0 {
		m.tokens = slices.Delete(m.tokens, i, i+1)
	}
}

func (m *queueModel) fire(now time.Time, available int) (string, bool) {
	m.expire(now)
	if available <= len(m.holds) {
		return "", false
	}
	for len(m.tokens) > 0 {
		t := m.tokens[0]
		m.tokens = m.tokens[1:]
		if now.Before(t.until) {
			m.holds = append(m.holds, modelHold{t.from, now.Add(m.hold)})
			return t.from, true
		}
	}
	return "", false
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

func (m *queueModel) liveTokens(now time.Time) int {
	n := 0
	for _, t := range m.tokens {
		if now.Before(t.until) {
			n++
		}
	}
	return n
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
	q   Queue
	m   queueModel
	now time.Time
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

// clockBack moves the clock back: holds already over stay over, lapsed tokens not yet
// discarded come back, and nothing else changes.
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

func (qm *queueMachine) register(t *rapid.T) {
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
	available := rapid.IntRange(0, 4).Draw(t, "available")
	to, ok := qm.q.Fire(qm.now, available)
	wantTo, wantOK := qm.m.fire(qm.now, available)
	if to != wantTo || ok != wantOK {
		t.Fatalf("Fire(%d) = %q %v, model %q %v", available, to, ok, wantTo, wantOK)
	}
}

func (qm *queueMachine) retire(t *rapid.T) {
	from := qm.from(t)
	if got, want := qm.q.Retire(from, qm.now), qm.m.retire(from, qm.now); got != want {
		t.Fatalf("Retire(%s) = %v, model %v", from, got, want)
	}
}

// check runs after every step and asks every query of the queue.
func (qm *queueMachine) check(t *rapid.T) {
	if got, want := qm.q.Tokens(qm.now), qm.m.liveTokens(qm.now); got != want {
		t.Fatalf("Tokens = %d, model %d", got, want)
	}
	qm.m.expire(qm.now)
	if got, want := qm.q.Holds(qm.now), len(qm.m.holds); got != want {
		t.Fatalf("Holds = %d, model %d", got, want)
	}
	at, ok := qm.q.NextChange(qm.now)
	wantAt, wantOK := qm.m.nextChange(qm.now)
	if ok != wantOK || !at.Equal(wantAt) {
		t.Fatalf("NextChange = %v %v, model %v %v", at, ok, wantAt, wantOK)
	}
	if got, want := qm.q.Idle(qm.now), qm.m.liveTokens(qm.now) == 0 && len(qm.m.holds) == 0; got != want {
		t.Fatalf("Idle = %v, model %v", got, want)
	}
	// Every token of the model, live or lapsed, is queued, in the model's order.
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
			"":          qm.check,
		})
	})
}
