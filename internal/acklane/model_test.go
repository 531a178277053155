package acklane

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"narad.dev/consume/internal/wire"
)

// A lane against a model of what it promises, under any interleaving of settles queued
// (Enqueue, and Admit past the window), slots handed on, background runs, callers giving
// up, the clock moving and AckBatch refused: no more than the window in flight; every batch
// of one topic, at most MaxBatch (one while AckBatch is refused), each member handed to Send
// once; a settle given up or swept unsent is never sent; every answer given
// at most once; and once everything ran and every budget ended, every settle answered
// exactly once and every slot free.
func TestLaneAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := rapid.IntRange(1, 3).Draw(t, "window")
		maxBatch := rapid.SampledFrom([]int{1, 3, wire.MaxBatch}).Draw(t, "maxBatch")
		h := newHarness(window, maxBatch)
		l := h.lanes.Lane("owner")

		type blocking struct {
			q      *Ack
			ctx    context.Context
			cancel context.CancelFunc
			gaveUp bool
			answer *wire.Answer
		}
		var (
			next     int64 // the next settle's offset
			held     int   // slots Admit gave to callers, not handed on yet
			waiting  []*blocking
			async    []int64
			sentOnce = map[int64]bool{}
			unsent   = map[int64]bool{} // given up, or swept before it left
			fail     error
		)
		h.reply = func(batch []*Ack, answers []wire.Answer) {
			now := h.clock.Now()
			limit := maxBatch
			if l.Refuses(AckBatch, now) {
				limit = 1
			}
			if len(batch) > limit && fail == nil {
				fail = fmt.Errorf("a batch of %d, at most %d", len(batch), limit)
			}
			for i, q := range batch {
				off := q.Record.Handle.Offset
				switch {
				case fail != nil:
				case q.Topic != batch[0].Topic:
					fail = fmt.Errorf("topics %s and %s in one batch", batch[0].Topic, q.Topic)
				case sentOnce[off] || unsent[off]:
					fail = fmt.Errorf("settle %d handed to Send twice", off)
				case !now.Before(q.Deadline):
					// Taken in time, its budget spent before the runner ran it: the
					// node's Send answers it unsent, as router's does.
					unsent[off] = true
					answers[i] = wire.Answer{Status: wire.StatusUnavailable, Message: "spent before it was sent"}
					continue
				}
				sentOnce[off] = true
				answers[i] = wire.Answer{Status: wire.StatusOK, Expiry: off}
			}
		}
		check := func() {
			if fail != nil {
				t.Fatal(fail)
			}
			l.mu.Lock()
			inFlight := l.inFlight
			l.mu.Unlock()
			if inFlight > window {
				t.Fatalf("%d in flight, window %d", inFlight, window)
			}
			for off, as := range h.answers {
				if len(as) > 1 {
					t.Fatalf("settle %d answered %d times", off, len(as))
				}
				if as[0].Status == wire.StatusUnavailable {
					unsent[off] = true
				}
			}
			for off := range unsent {
				if sentOnce[off] {
					t.Fatalf("settle %d was sent, yet answered unsent", off)
				}
			}
		}
		topic := func(t *rapid.T) string { return rapid.SampledFrom([]string{"a", "b"}).Draw(t, "topic") }

		t.Repeat(map[string]func(*rapid.T){
			"enqueue": func(t *rapid.T) {
				h.enqueue(l, topic(t), next)
				async = append(async, next)
				next++
				check()
			},
			"admit": func(t *rapid.T) {
				ctx, cancel := context.WithCancel(context.Background())
				q := l.Admit(ctx, topic(t), record(next), h.clock.Now().Add(budget))
				next++
				if q == nil {
					cancel()
					held++
				} else {
					waiting = append(waiting, &blocking{q: q, ctx: ctx, cancel: cancel})
				}
				check()
			},
			"hand on": func(t *rapid.T) {
				if held == 0 {
					t.Skip("no slot held")
				}
				held--
				l.HandOn()
				check()
			},
			"run": func(t *rapid.T) {
				if len(h.runs) == 0 {
					t.Skip("nothing to run")
				}
				f := h.runs[0]
				h.runs = h.runs[1:]
				f()
				check()
			},
			"give up": func(t *rapid.T) {
				if len(waiting) == 0 {
					t.Skip("nobody waits")
				}
				w := waiting[rapid.IntRange(0, len(waiting)-1).Draw(t, "waiter")]
				if w.gaveUp || w.answer != nil {
					t.Skip("done already")
				}
				if len(w.q.answer) == 0 && w.q.taken {
					t.Skip("it left: Wait would block for the reply")
				}
				w.cancel()
				a, err := l.Wait(w.ctx, w.q)
				switch {
				case errors.Is(err, context.Canceled):
					w.gaveUp = true
					unsent[w.q.Record.Handle.Offset] = true
				case err != nil:
					t.Fatalf("Wait: %v", err)
				default:
					w.answer = &a
				}
				check()
			},
			"advance": func(t *rapid.T) {
				h.clock.advance(time.Duration(rapid.IntRange(0, 1500).Draw(t, "ms")) * time.Millisecond)
				check()
			},
			"refuse AckBatch": func(t *rapid.T) {
				if len(h.runs) > 0 {
					// A batch taken before the refusal may be waiting to run: the node's
					// Send sends that one a settle at a time (as router's does).
					t.Skip("a batch may be taken")
				}
				l.Refuse(AckBatch, h.clock.Now().Add(time.Second))
			},
		})

		// Everything runs, and every budget ends.
		for ; held > 0; held-- {
			l.HandOn()
		}
		h.runAll()
		h.clock.advance(budget + time.Second)
		h.runAll()
		check()
		for _, off := range async {
			if len(h.answers[off]) != 1 {
				t.Fatalf("settle %d answered %d times", off, len(h.answers[off]))
			}
		}
		for _, w := range waiting {
			if w.gaveUp || w.answer != nil {
				continue
			}
			a, err := l.Wait(context.Background(), w.q)
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if a.Status == wire.StatusOK && !sentOnce[w.q.Record.Handle.Offset] {
				t.Fatalf("settle %d answered OK, never sent", w.q.Record.Handle.Offset)
			}
			w.cancel()
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.inFlight != 0 || len(l.queue) != 0 {
			t.Fatalf("%d in flight and %d queued once everything ran", l.inFlight, len(l.queue))
		}
	})
}
