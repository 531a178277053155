package acklane

import (
	"context"
	"testing"
	"time"

	"narad.dev/consume/internal/wire"
)

// benchLane is a lane whose Send answers at once and whose runner runs in place: what is
// measured is the lane's own work per settle, with no network and no goroutine hand-off.
func benchLane(window int) (*Lane[string], *manualClock) {
	clock := &manualClock{now: time.Unix(1000, 0)}
	lanes := New(Config[string]{
		Clock: clock, Window: window, MaxBatch: wire.MaxBatch,
		Send: func(l *Lane[string], now time.Time, batch []*Ack, answers []wire.Answer) {
			for i := range answers {
				answers[i] = wire.Answer{Status: wire.StatusOK}
			}
		},
		Run:      func(f func()) { f() },
		Answered: func(done func(error), a wire.Answer) { done(nil) },
		NoReply:  noReply, NewPeer: func(string) string { return "" },
	})
	return lanes.Lane("owner"), clock
}

// An Enqueue answered: queued, picked up on a free slot, sent as a batch of one, answered
// through Answered.
func BenchmarkEnqueueAnswer(b *testing.B) {
	l, clock := benchLane(128)
	done := func(error) {}
	b.ReportAllocs()
	for b.Loop() {
		l.Enqueue("t", record(1), clock.Now().Add(budget), done)
	}
}

// A blocking settle past the window: queued by Admit, taken by the slot that comes back
// (HandOn), answered, and received by Wait; then the slot is taken again.
func BenchmarkAdmitQueuedWait(b *testing.B) {
	l, clock := benchLane(1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if l.Admit(ctx, "t", record(1), time.Time{}) != nil {
			b.Fatal("no slot")
		}
		q := l.Admit(ctx, "t", record(2), clock.Now().Add(budget))
		l.HandOn()
		if a, err := l.Wait(ctx, q); err != nil || a.Status != wire.StatusOK {
			b.Fatal(a, err)
		}
	}
}

// A blocking settle below the window: a slot taken and handed on with nothing queued.
func BenchmarkAdmitSlot(b *testing.B) {
	l, _ := benchLane(128)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if l.Admit(ctx, "t", record(1), time.Time{}) != nil {
			b.Fatal("no slot")
		}
		l.HandOn()
	}
}
