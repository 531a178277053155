package acklane

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/wire"
)

// A lane is made once per owner, with the node's peer state.
func TestLaneIsMadeOncePerOwner(t *testing.T) {
	h := newHarness(4, wire.MaxBatch)
	a := h.lanes.Lane("a")
	assert.Same(t, a, h.lanes.Lane("a"))
	assert.NotSame(t, a, h.lanes.Lane("b"))
	assert.Equal(t, "a", a.Owner())
	assert.Equal(t, "peer of a", a.Peer)
}

// Below the window Admit takes a slot and queues nothing; past it, settles queue, and the
// slot's HandOn sends what queued as one batch from the runner.
func TestWindowThenQueue(t *testing.T) {
	h := newHarness(2, wire.MaxBatch)
	l := h.lanes.Lane("owner")
	ctx := context.Background()
	deadline := h.clock.Now().Add(budget)
	require.Nil(t, l.Admit(ctx, "t", record(1), deadline))
	require.Nil(t, l.Admit(ctx, "t", record(2), deadline))
	q3 := l.Admit(ctx, "t", record(3), deadline)
	q4 := l.Admit(ctx, "t", record(4), deadline)
	require.NotNil(t, q3)
	require.NotNil(t, q4)
	h.enqueue(l, "t", 5) // every slot is busy: no pickup
	assert.Empty(t, h.runs)

	l.HandOn() // the first slot comes back: it takes the queue
	h.runAll()
	assert.Equal(t, []int{3}, h.sizes())
	for _, q := range []*Ack{q3, q4} {
		a, err := l.Wait(ctx, q)
		require.NoError(t, err)
		assert.Equal(t, wire.StatusOK, a.Status)
	}
	assert.Equal(t, []wire.Answer{{Status: wire.StatusOK}}, h.answerOf(5))

	l.HandOn() // the second slot: nothing queued, freed
	h.runAll()
	hold(l, 2) // both slots are free again
}

// A batch carries up to MaxBatch settles of the head's topic; the rest leave in the next
// ones, on the same slot. An owner's refusal of AckBatch makes batches of one until it ends.
func TestBatches(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBatch int
		topics   string // one settle per letter, queued in order
		refuse   bool   // the owner refused AckBatch
		want     []int
	}{
		{"one topic past the cap", wire.MaxBatch, strings.Repeat("a", 150), false, []int{64, 64, 22}},
		{"the head's topic first", wire.MaxBatch, "aabab", false, []int{3, 2}},
		{"a node that speaks no AckBatch", 1, "aaa", false, []int{1, 1, 1}},
		{"an owner that refused AckBatch", wire.MaxBatch, "aaa", true, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(1, tc.maxBatch)
			l := h.lanes.Lane("owner")
			if tc.refuse {
				l.Refuse(AckBatch, h.clock.Now().Add(time.Minute))
			}
			hold(l, 1)
			for i, topic := range tc.topics {
				h.enqueue(l, string(topic), int64(i))
			}
			l.HandOn()
			h.runAll()
			assert.Equal(t, tc.want, h.sizes())
			for _, b := range h.batches {
				for _, q := range b {
					assert.Equal(t, b[0].Topic, q.Topic)
				}
			}
			for i := range tc.topics {
				assert.Len(t, h.answerOf(int64(i)), 1, "settle %d", i)
			}
		})
	}
}

// The sweep answers a settle that waited for a slot all its budget 503, unsent, at its
// deadline and not before; the slot that comes back later sends nothing.
func TestSweepAnswersAtTheDeadline(t *testing.T) {
	h := newHarness(1, wire.MaxBatch)
	l := h.lanes.Lane("owner")
	hold(l, 1)
	h.enqueue(l, "t", 1)
	h.clock.advance(time.Second)
	h.enqueue(l, "t", 2)
	h.clock.advance(budget - time.Second - time.Nanosecond)
	assert.Empty(t, h.answerOf(1), "before its deadline")
	h.clock.advance(time.Nanosecond)
	require.Len(t, h.answerOf(1), 1)
	assert.Equal(t, wire.StatusUnavailable, h.answerOf(1)[0].Status)
	assert.Contains(t, h.answerOf(1)[0].Message, "not applied")
	assert.Empty(t, h.answerOf(2))
	h.clock.advance(time.Second)
	require.Len(t, h.answerOf(2), 1)
	assert.Equal(t, wire.StatusUnavailable, h.answerOf(2)[0].Status)

	l.HandOn()
	h.runAll()
	assert.Empty(t, h.sizes(), "nothing left to send")
	hold(l, 1) // the slot was freed
}

// A settle that left and whose reply has not come by its deadline is answered the no-reply
// status then; the late reply is dropped: the first answer wins, and there is one.
func TestFirstAnswerWins(t *testing.T) {
	h := newHarness(1, wire.MaxBatch)
	h.reply = func(batch []*Ack, answers []wire.Answer) {
		h.clock.advance(budget) // the reply comes after the budget
		for i := range answers {
			answers[i] = wire.Answer{Status: wire.StatusOK}
		}
	}
	l := h.lanes.Lane("owner")
	hold(l, 1)
	q := l.Admit(context.Background(), "t", record(1), h.clock.Now().Add(budget))
	h.enqueue(l, "t", 2)
	l.HandOn()
	h.runAll()
	assert.Equal(t, []int{2}, h.sizes())
	a, err := l.Wait(context.Background(), q)
	require.NoError(t, err)
	assert.Equal(t, byte(noReply), a.Status)
	require.Len(t, h.answerOf(2), 1)
	assert.Equal(t, byte(noReply), h.answerOf(2)[0].Status)
}

// A caller that gives up before its settle left gets its context's error, and the settle is
// never sent; one that gives up after it left gets the owner's answer.
func TestWaitGivingUp(t *testing.T) {
	h := newHarness(1, wire.MaxBatch)
	l := h.lanes.Lane("owner")
	hold(l, 1)
	ctx, cancel := context.WithCancel(context.Background())
	q := l.Admit(ctx, "t", record(1), h.clock.Now().Add(budget))
	cancel()
	_, err := l.Wait(ctx, q)
	assert.True(t, errors.Is(err, context.Canceled))
	l.HandOn()
	h.runAll()
	assert.Empty(t, h.sizes(), "given up before it left: never sent")

	hold(l, 1)
	ctx, cancel = context.WithCancel(context.Background())
	q = l.Admit(ctx, "t", record(2), h.clock.Now().Add(budget))
	l.HandOn()
	h.runAll() // it left and was answered
	cancel()
	a, err := l.Wait(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, wire.StatusOK, a.Status)
}

// With a slot free, Enqueue claims it for one pickup, which takes everything queued by the
// time it runs; a pickup on its way takes the settles queued after it, with no second one.
func TestPickup(t *testing.T) {
	h := newHarness(4, wire.MaxBatch)
	l := h.lanes.Lane("owner")
	for i := range 3 {
		h.enqueue(l, "t", int64(i))
	}
	assert.Len(t, h.runs, 1, "one pickup")
	h.runAll()
	assert.Equal(t, []int{3}, h.sizes())
	for i := range 3 {
		assert.Len(t, h.answerOf(int64(i)), 1)
	}
	hold(l, 4) // every slot was freed
}

// What the owner refused holds until its time, and then no longer; each refusal is its own.
func TestRefusalMemoryExpires(t *testing.T) {
	h := newHarness(1, wire.MaxBatch)
	l := h.lanes.Lane("owner")
	now := h.clock.Now()
	for r := range refusals {
		assert.False(t, l.Refuses(r, now), "refusal %d before any", r)
	}
	l.Refuse(Headers, now.Add(2*time.Minute))
	assert.True(t, l.Refuses(Headers, now))
	assert.True(t, l.Refuses(Headers, now.Add(2*time.Minute-1)))
	assert.False(t, l.Refuses(Headers, now.Add(2*time.Minute)))
	assert.False(t, l.Refuses(ConsumeMax, now))
	assert.False(t, l.Singles(now))
	l.Refuse(AckBatch, now.Add(time.Minute))
	assert.True(t, l.Singles(now))
	assert.False(t, l.Singles(now.Add(time.Minute)))
	assert.False(t, h.lanes.Lane("other").Refuses(Headers, now), "another owner's lane")
}

// Many callers settling through one lane at once, each from its own goroutine, on a window
// of two and an owner 10 ms away: every one is answered the owner's answer, and the settles
// past the window share batches.
func TestConcurrentSettlesShareBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rpcs atomicCount
		var lanes *Lanes[string]
		send := func(l *Lane[string], now time.Time, batch []*Ack, answers []wire.Answer) {
			rpcs.add()
			time.Sleep(10 * time.Millisecond)
			for i := range answers {
				answers[i] = wire.Answer{Status: wire.StatusOK}
			}
		}
		lanes = New(Config[string]{
			Clock: bubbleClock{}, Window: 2, MaxBatch: wire.MaxBatch, Send: send,
			Run:      func(f func()) { go f() },
			Answered: func(done func(error), a wire.Answer) { done(nil) },
			NoReply:  noReply, NewPeer: func(string) string { return "" },
		})
		l := lanes.Lane("owner")
		const callers = 50
		errs := make(chan error, 2*callers)
		for i := range callers {
			go func() {
				deadline := time.Now().Add(budget)
				if q := l.Admit(context.Background(), "t", record(int64(i)), deadline); q != nil {
					a, err := l.Wait(context.Background(), q)
					if err == nil && a.Status != wire.StatusOK {
						err = errors.New(a.Message)
					}
					errs <- err
					return
				}
				one := Ack{Topic: "t", Record: record(int64(i)), Deadline: deadline}
				var answer [1]wire.Answer
				send(l, time.Now(), []*Ack{&one}, answer[:])
				l.HandOn()
				errs <- nil
			}()
			l.Enqueue("t", record(int64(callers+i)), time.Now().Add(budget), func(err error) { errs <- err })
		}
		for range 2 * callers {
			require.NoError(t, <-errs)
		}
		assert.Less(t, rpcs.load(), callers, "settles past the window share batches")
		synctest.Wait()
	})
}

// bubbleClock is the time package's clock, fake inside a synctest bubble.
type bubbleClock struct{}

func (bubbleClock) Now() time.Time { return time.Now() }

func (bubbleClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// TakeRiders takes the queued plain acks of one topic whose budget is left, up to its max,
// oldest first, blocking ones and Enqueue's alike; what it leaves (another topic, another
// op, past the max) still leaves on the next slot. Each taken one gets the answer the frame
// that carried it gives, once: the sweep at its deadline gives the no-reply status to one
// still unanswered, and a late answer then is dropped.
func TestTakeRiders(t *testing.T) {
	h := newHarness(1, wire.MaxBatch)
	l := h.lanes.Lane("owner")
	ctx := context.Background()
	hold(l, 1)
	deadline := h.clock.Now().Add(budget)
	blocking := l.Admit(ctx, "t", record(1), deadline)
	require.NotNil(t, blocking)
	h.enqueue(l, "t", 2)
	h.enqueue(l, "other", 3)
	extend := record(4)
	extend.Op = wire.OpExtend
	l.Enqueue("t", extend, deadline, func(error) {})
	h.enqueue(l, "t", 5)
	h.enqueue(l, "t", 6)

	riders := l.TakeRiders("t", h.clock.Now(), 3)
	offsets := func(qs []*Ack) []int64 {
		var offs []int64
		for _, q := range qs {
			offs = append(offs, q.Record.Handle.Offset)
		}
		return offs
	}
	require.Equal(t, []int64{1, 2, 5}, offsets(riders), "plain acks of the topic, oldest first, up to max")
	assert.Empty(t, l.TakeRiders("t", h.clock.Now(), 0), "max 0 takes nothing")

	l.Answer(riders[0], wire.Answer{Status: wire.StatusOK})
	a, err := l.Wait(ctx, blocking)
	require.NoError(t, err)
	assert.Equal(t, wire.StatusOK, a.Status)
	l.Answer(riders[1], wire.Answer{Status: wire.StatusGone})
	assert.Equal(t, []wire.Answer{{Status: wire.StatusGone}}, h.answerOf(2))

	// The third's frame never answers: the sweep does at its deadline, and the late answer
	// after it is dropped.
	h.clock.advance(budget)
	require.Len(t, h.answerOf(5), 1)
	assert.Equal(t, byte(noReply), h.answerOf(5)[0].Status)
	l.Answer(riders[2], wire.Answer{Status: wire.StatusOK})
	assert.Len(t, h.answerOf(5), 1, "answered once")

	// What was left queued was answered by the sweep too (503, never sent); a slot that comes
	// back sends nothing taken.
	assert.Equal(t, wire.StatusUnavailable, h.answerOf(3)[0].Status)
	assert.Equal(t, wire.StatusUnavailable, h.answerOf(6)[0].Status)
	l.HandOn()
	h.runAll()
	assert.Empty(t, h.sizes())
}

// What TakeRiders leaves queued leaves on the next slot, and what it took does not.
func TestTakeRidersLeavesTheRestToSlots(t *testing.T) {
	h := newHarness(1, wire.MaxBatch)
	l := h.lanes.Lane("owner")
	hold(l, 1)
	for off := range int64(5) {
		h.enqueue(l, "t", off)
	}
	riders := l.TakeRiders("t", h.clock.Now(), 2)
	require.Len(t, riders, 2)
	l.HandOn()
	h.runAll()
	require.Equal(t, []int{3}, h.sizes())
	for _, q := range h.batches[0] {
		assert.GreaterOrEqual(t, q.Record.Handle.Offset, int64(2), "a rider never leaves again")
	}
	for _, q := range riders {
		l.Answer(q, wire.Answer{Status: wire.StatusOK})
	}
	for off := range int64(5) {
		assert.Len(t, h.answerOf(off), 1, "settle %d answered once", off)
	}
}
