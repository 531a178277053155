package acklane

import (
	"context"
	"sync"
	"time"

	"narad.dev/consume/internal/wire"
)

// manualClock is a Clock whose time moves only by advance, which runs the timers that come
// due synchronously, in deadline order, each with the clock reading its deadline.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	at      time.Time
	f       func()
	settled bool
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		stopped := !t.settled
		t.settled = true
		return stopped
	}
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		var due *manualTimer
		for _, t := range c.timers {
			if !t.settled && !t.at.After(end) && (due == nil || t.at.Before(due.at)) {
				due = t
			}
		}
		if due == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		due.settled = true
		c.now = due.at
		c.mu.Unlock()
		due.f()
		c.mu.Lock()
	}
}

const (
	budget  = 2 * time.Second
	noReply = 255 // the harness's no-reply status
)

// harness is a Lanes on a manual clock whose runner keeps what it is given until run, and
// whose Send answers every settle OK (or as reply says), noting the batches it got.
type harness struct {
	clock *manualClock
	lanes *Lanes[string]

	mu      sync.Mutex
	batches [][]*Ack
	runs    []func()
	// reply, when set, fills the answers of a batch instead of Send's OK.
	reply func(batch []*Ack, answers []wire.Answer)
	// answers are what the settles Enqueue queued were answered, by record offset.
	answers map[int64][]wire.Answer
}

func newHarness(window, maxBatch int) *harness {
	h := &harness{clock: &manualClock{now: time.Unix(1000, 0)}, answers: map[int64][]wire.Answer{}}
	h.lanes = New(Config[string]{
		Clock: h.clock, Window: window, MaxBatch: maxBatch,
		Send: h.send,
		Run: func(f func()) {
			h.mu.Lock()
			h.runs = append(h.runs, f)
			h.mu.Unlock()
		},
		Answered: func(done func(error), a wire.Answer) {
			// The harness's dones are its own: they note the answer (see enqueue).
			done(answerError{a})
		},
		NoReply: noReply,
		NewPeer: func(owner string) string { return "peer of " + owner },
	})
	return h
}

// answerError carries an answer through Answered's done.
type answerError struct{ a wire.Answer }

func (e answerError) Error() string { return e.a.Message }

func (h *harness) send(l *Lane[string], now time.Time, batch []*Ack, answers []wire.Answer) {
	h.mu.Lock()
	h.batches = append(h.batches, append([]*Ack(nil), batch...))
	reply := h.reply
	h.mu.Unlock()
	if reply != nil {
		reply(batch, answers)
		return
	}
	for i := range answers {
		answers[i] = wire.Answer{Status: wire.StatusOK}
	}
}

// enqueue queues a settle of offset off through Enqueue, noting its answer.
func (h *harness) enqueue(l *Lane[string], topic string, off int64) {
	l.Enqueue(topic, record(off), h.clock.Now().Add(budget), func(err error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.answers[off] = append(h.answers[off], err.(answerError).a)
	})
}

// runAll runs what the runner was given, and what that gave it, until nothing is left. A
// lane that keeps giving it work (a livelock) panics it.
func (h *harness) runAll() {
	for range 100_000 {
		h.mu.Lock()
		if len(h.runs) == 0 {
			h.mu.Unlock()
			return
		}
		f := h.runs[0]
		h.runs = h.runs[1:]
		h.mu.Unlock()
		f()
	}
	panic("the runner never runs out of work")
}

// sizes returns the sizes of the batches sent.
func (h *harness) sizes() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var sizes []int
	for _, b := range h.batches {
		sizes = append(sizes, len(b))
	}
	return sizes
}

func (h *harness) answerOf(off int64) []wire.Answer {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.answers[off]
}

func record(off int64) wire.Record {
	return wire.Record{Op: wire.OpAck, Handle: wire.Handle{Partition: 1, Offset: off, Nonce: 1}}
}

// hold takes every slot of l through Admit, as blocking settles sent by their callers.
func hold(l *Lane[string], n int) {
	for range n {
		if l.Admit(context.Background(), "t", record(-1), time.Time{}) != nil {
			panic("no slot free")
		}
	}
}

// atomicCount counts from several goroutines.
type atomicCount struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCount) add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *atomicCount) load() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
