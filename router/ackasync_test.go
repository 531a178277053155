package router_test

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/inflight"
	"narad.dev/consume/router"
)

// answer is one AckAsync's outcome: its error, whether done ran before AckAsync returned,
// and when done ran.
type answer struct {
	err    error
	inline bool
	at     time.Time
}

// ackAsync calls AckAsync through node and returns a channel that gets its answer.
func ackAsync(node *router.Node, handle router.Handle) <-chan answer {
	ch := make(chan answer, 1)
	returned := false
	var mu sync.Mutex
	node.AckAsync("orders", handle, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		ch <- answer{err: err, inline: !returned, at: time.Now()}
	})
	mu.Lock()
	returned = true
	mu.Unlock()
	return ch
}

// AckAsync answers what Ack would: applied here (or refused before anything leaves) on the
// caller's goroutine before it returns; forwarded, from the node once the owner answered,
// a round trip later, without the caller waiting for it.
func TestAckAsyncAnswersAsAckWould(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 10*time.Millisecond, 0)
		defer p.close()
		p.a.produce(0, 3)
		msgs := p.a.consume(router.ConsumeOptions{Max: 3})
		require.Len(t, msgs, 3)
		start := time.Now()

		local := <-ackAsync(p.a.node, msgs[0].Receipt)
		assert.Equal(t, answer{inline: true, at: start}, local, "applied on the owner itself, in the call")
		assert.ErrorIs(t, (<-ackAsync(p.a.node, msgs[0].Receipt)).err, inflight.ErrAlreadySettled)
		malformed := <-ackAsync(p.b.node, router.Handle{Partition: -1, Nonce: 1})
		assert.ErrorIs(t, malformed.err, inflight.ErrMalformedHandle)
		assert.True(t, malformed.inline, "refused in the call, no RPC")
		calls := p.net.Calls()
		unowned := <-ackAsync(p.b.node, router.Handle{Partition: 9, Nonce: 1})
		assert.ErrorIs(t, unowned.err, router.ErrUnavailable)
		assert.True(t, unowned.inline)
		assert.Equal(t, calls, p.net.Calls(), "no RPC for an owner nobody names")

		forwarded := ackAsync(p.b.node, msgs[1].Receipt)
		assert.Equal(t, start, time.Now(), "AckAsync returned without waiting for the owner")
		got := <-forwarded
		require.NoError(t, got.err)
		assert.False(t, got.inline, "answered from the node's goroutine")
		assert.Equal(t, start.Add(10*time.Millisecond), got.at, "after one round trip")
		assert.ErrorIs(t, p.a.ack(msgs[1]), inflight.ErrAlreadySettled, "applied on the owner")
		assert.ErrorIs(t, (<-ackAsync(p.b.node, msgs[1].Receipt)).err, inflight.ErrAlreadySettled, "the owner's answer")

		stale := msgs[2].Receipt
		stale.Nonce++
		gone := (<-ackAsync(p.b.node, stale)).err
		assert.ErrorIs(t, gone, inflight.ErrGone)
		assert.Equal(t, 410, router.HTTPStatus(gone))

		p.b.node.AckAsync("orders", msgs[2].Receipt, nil) // fire and forget
		synctest.Wait()
		time.Sleep(10 * time.Millisecond)
		assert.ErrorIs(t, p.a.ack(msgs[2]), inflight.ErrAlreadySettled, "a nil done acks all the same")
	})
}

// A forwarded AckAsync keeps Ack's budget: one that waited for a slot past its 2 s is
// answered 503 and never applied; one that left and got no reply by then, 502.
func TestAckAsyncBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 0, 1) // one slot
		defer p.close()
		p.record(func(call int) {
			if call == 0 {
				time.Sleep(3 * time.Second) // the slot is held past both budgets
			}
		})
		p.a.produce(0, 2)
		msgs := p.a.consume(router.ConsumeOptions{Max: 2})
		start := time.Now()
		inFlight := ackAsync(p.b.node, msgs[0].Receipt)
		synctest.Wait()
		queued := ackAsync(p.b.node, msgs[1].Receipt)

		got := <-inFlight
		assert.ErrorIs(t, got.err, router.ErrTransport, "no reply within its budget")
		assert.Equal(t, start.Add(router.ForwardBudget), got.at)
		got = <-queued
		assert.ErrorIs(t, got.err, router.ErrUnavailable)
		assert.Equal(t, 503, router.HTTPStatus(got.err))
		assert.Equal(t, start.Add(router.ForwardBudget), got.at)
		require.NoError(t, p.a.ack(msgs[1]), "the 503 ack was not applied: its lease is still live")
		time.Sleep(time.Second) // the slow owner's Call, abandoned at 2 s, ends at 3 s
	})
}

// done may ack again through the same node and lane, whichever goroutine gives the answer:
// the slot that got the owner's reply, or the lane's timer that found the budget spent.
func TestAckAsyncDoneMayAckAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, time.Millisecond, 1)
		defer p.close()
		const chain = 20
		p.a.produce(0, chain)
		msgs := p.a.consume(router.ConsumeOptions{Max: chain})
		require.Len(t, msgs, chain)
		errs := make(chan error, chain)
		var next func(i int)
		next = func(i int) {
			p.b.node.AckAsync("orders", msgs[i].Receipt, func(err error) {
				errs <- err
				if i+1 < chain {
					next(i + 1)
				}
			})
		}
		next(0)
		for range chain {
			require.NoError(t, <-errs)
		}

		// From the lane's timer: the owner holds the only slot past the budget, so the
		// queued ack is answered 503 by the timer, and its done acks again.
		hold := make(chan struct{})
		p.record(func(call int) {
			if call == 0 {
				<-hold
			}
		})
		p.a.produce(0, 3)
		more := p.a.consume(router.ConsumeOptions{Max: 3})
		require.Len(t, more, 3)
		first := ackAsync(p.b.node, more[0].Receipt)
		synctest.Wait()
		again := make(chan error, 1)
		p.b.node.AckAsync("orders", more[1].Receipt, func(err error) {
			assert.ErrorIs(t, err, router.ErrUnavailable, "it waited for the slot past its budget")
			p.b.node.AckAsync("orders", more[2].Receipt, func(err error) { again <- err })
		})
		time.Sleep(router.ForwardBudget)
		synctest.Wait()
		close(hold)
		assert.ErrorIs(t, (<-first).err, router.ErrTransport)
		require.NoError(t, <-again, "acked from inside the timer's done")
	})
}

// Close waits until every AckAsync made before it has been answered and its done returned;
// after Close begins, AckAsync answers ErrClosed at once.
func TestCloseWaitsForAckAsync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 100*time.Millisecond, 0)
		defer p.a.close()
		p.a.produce(0, 2)
		msgs := p.a.consume(router.ConsumeOptions{Max: 2})
		var doneReturned atomic.Bool
		p.b.node.AckAsync("orders", msgs[0].Receipt, func(err error) {
			assert.NoError(t, err)
			time.Sleep(time.Millisecond) // done is still running when the reply is in
			doneReturned.Store(true)
		})
		start := time.Now()
		require.NoError(t, p.b.node.Close())
		assert.True(t, doneReturned.Load(), "Close returned before done did")
		assert.Equal(t, start.Add(101*time.Millisecond), time.Now())
		assert.ErrorIs(t, p.a.ack(msgs[0]), inflight.ErrAlreadySettled)

		closed := <-ackAsync(p.b.node, msgs[1].Receipt)
		assert.ErrorIs(t, closed.err, router.ErrClosed)
		assert.True(t, closed.inline)
	})
}

// Many AckAsyncs from several goroutines, through a narrow window and a network whose trips
// overtake each other, some handles with a wrong nonce: every done runs exactly once, with
// the answer of its own ack, within a few round trips (none is left queued with nobody to
// take it), and the right acks share RPCs.
func TestAckAsyncAnswersEachOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, time.Millisecond, 4)
		p.net.Jitter = 3 * time.Millisecond
		defer p.close()
		const acks, clients = 600, 6
		p.a.produce(0, acks)
		msgs := make([]router.Message, 0, acks)
		for len(msgs) < acks {
			msgs = append(msgs, p.a.consume(router.ConsumeOptions{Max: 100})...)
		}
		rng := rand.New(rand.NewPCG(3, 5))
		wrong := make([]bool, acks)
		handles := make([]router.Handle, acks)
		for i, m := range msgs {
			h := m.Receipt
			if wrong[i] = rng.IntN(4) == 0; wrong[i] {
				h.Nonce++
			}
			handles[i] = h
		}
		answers := make([]atomic.Int32, acks)
		errs := make([]error, acks)
		waited := make([]time.Duration, acks)
		var answered sync.WaitGroup
		answered.Add(acks)
		calls := p.net.Calls()
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				for i := c; i < acks; i += clients {
					sent := time.Now()
					p.b.node.AckAsync("orders", handles[i], func(err error) {
						errs[i] = err
						waited[i] = time.Since(sent)
						answers[i].Add(1)
						answered.Done()
					})
					if i%50 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		answered.Wait()
		synctest.Wait()
		for i, m := range msgs {
			require.Equal(t, int32(1), answers[i].Load(), "ack %d: done ran once", i)
			// Nothing is left queued with a slot free: every ack is answered in a few round
			// trips, far inside its budget.
			assert.Less(t, waited[i], 50*time.Millisecond, "ack %d", i)
			if wrong[i] {
				assert.True(t, errors.Is(errs[i], inflight.ErrGone), "ack %d, a wrong nonce: %v", i, errs[i])
				continue
			}
			require.NoError(t, errs[i], "ack %d", i)
			assert.ErrorIs(t, p.a.ack(m), inflight.ErrAlreadySettled, "ack %d: applied", i)
		}
		assert.Less(t, p.net.Calls()-calls, int64(acks/4), "the acks shared RPCs")
	})
}

// Acks queued while a slot answers its RPC's acks (here, from one of their dones) are taken
// by that slot, 64 to a batch, and what it leaves goes out at once on other free slots: all
// of them are answered one round trip after they queued, none waits for a batch ahead of it.
func TestAckAsyncLeftoversTakeFreeSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt, burst = 10 * time.Millisecond, 200
		p := newPair(t, rtt, 0)
		defer p.close()
		p.a.produce(0, burst+1)
		msgs := make([]router.Message, 0, burst+1)
		for len(msgs) < burst+1 {
			msgs = append(msgs, p.a.consume(router.ConsumeOptions{Max: 100})...)
		}
		var mu sync.Mutex
		var queuedAt time.Time
		var waited []time.Duration
		var all sync.WaitGroup
		all.Add(burst)
		calls := p.net.Calls()
		p.b.node.AckAsync("orders", msgs[0].Receipt, func(err error) {
			require.NoError(t, err)
			queuedAt = time.Now()
			for _, m := range msgs[1:] {
				p.b.node.AckAsync("orders", m.Receipt, func(err error) {
					assert.NoError(t, err)
					mu.Lock()
					waited = append(waited, time.Since(queuedAt))
					mu.Unlock()
					all.Done()
				})
			}
		})
		all.Wait()
		for i, w := range waited {
			assert.Equal(t, rtt, w, "ack %d of the burst", i)
		}
		assert.Equal(t, int64(1+(burst+63)/64), p.net.Calls()-calls, "the burst left in full batches")
	})
}

// A done that panics on the caller's goroutine (an ack applied here) panics there, and the
// call has left the node all the same: Close does not wait for it.
func TestAckAsyncDonePanicHereLeavesTheNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.produce(0, 1)
		m := h.one()
		assert.PanicsWithValue(t, "from done", func() {
			h.node.AckAsync("orders", m.Receipt, func(error) { panic("from done") })
		})
		require.NoError(t, h.node.Close())
	})
}

// An answered AckAsync keeps nothing of its done: the caller's state that done holds can go,
// though the queued ack it rode in is still referenced (a block of them is allocated
// together, and the lane keeps the rest for the next acks).
func TestAckAsyncKeepsNoDoneAfterItsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, time.Millisecond, 0)
		defer p.close()
		p.a.produce(0, 1)
		m := p.a.one()
		state := new([1 << 16]byte)
		kept := weak.Make(state)
		answered := make(chan error, 1)
		p.b.node.AckAsync("orders", m.Receipt, func(err error) {
			state[0]++
			answered <- err
		})
		require.NoError(t, <-answered)
		synctest.Wait()
		runtime.GC()
		runtime.GC()
		assert.True(t, kept.Value() == nil, "the caller's state outlived its answered done")
	})
}

// Hostile input is refused in the call, with a typed error, no RPC and nothing applied: an
// empty or overlong topic, handles that are malformed, negative or out of range.
func TestAckAsyncRefusesHostileInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, time.Millisecond, 0)
		defer p.close()
		p.a.produce(0, 1)
		m := p.a.one()
		good := m.Receipt
		calls := p.net.Calls()
		for _, c := range []struct {
			topic  string
			handle router.Handle
			want   error
		}{
			{"", good, router.ErrInvalidArgument},
			{strings.Repeat("t", router.MaxTopicLength+1), good, router.ErrInvalidArgument},
			{"orders", router.Handle{}, inflight.ErrMalformedHandle},
			{"orders", router.Handle{Partition: -1, Nonce: 1}, inflight.ErrMalformedHandle},
			{"orders", router.Handle{Offset: -5, Nonce: 1}, inflight.ErrMalformedHandle},
			{"orders", router.Handle{Partition: good.Partition, Offset: good.Offset}, inflight.ErrMalformedHandle},
		} {
			var got error
			answered := false
			p.b.node.AckAsync(c.topic, c.handle, func(err error) { got, answered = err, true })
			assert.True(t, answered, "refused in the call: topic of %d bytes, handle %v", len(c.topic), c.handle)
			assert.ErrorIs(t, got, c.want, "topic of %d bytes, handle %v", len(c.topic), c.handle)
		}
		assert.Equal(t, calls, p.net.Calls(), "no RPC for any of them")
		require.NoError(t, p.a.ack(m), "nothing was applied: the lease is still live")
	})
}

// A topic deleted on its owner while AckAsyncs for it are on their way: each done runs once,
// none answers success for an ack the deleted topic could not apply, and both nodes close.
func TestAckAsyncRacingADeleteOnTheOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, 2*time.Millisecond, 4)
		const acks = 200
		p.a.produce(0, acks)
		msgs := make([]router.Message, 0, acks)
		for len(msgs) < acks {
			msgs = append(msgs, p.a.consume(router.ConsumeOptions{Max: 100})...)
		}
		answers := make([]atomic.Int32, acks)
		var succeeded atomic.Int32
		var answered sync.WaitGroup
		answered.Add(acks)
		var sent sync.WaitGroup
		sent.Go(func() {
			for i, m := range msgs {
				p.b.node.AckAsync("orders", m.Receipt, func(err error) {
					if err == nil {
						succeeded.Add(1)
					}
					answers[i].Add(1)
					answered.Done()
				})
				if i%20 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
		time.Sleep(3 * time.Millisecond) // some acks applied, some on their way, some not sent
		require.NoError(t, p.a.node.DeleteTopic("orders"))
		applied := p.a.node.Stats().Shards.Acked
		sent.Wait()
		answered.Wait()
		for i := range answers {
			require.Equal(t, int32(1), answers[i].Load(), "ack %d: done ran once", i)
		}
		assert.LessOrEqual(t, uint64(succeeded.Load()), applied, "no success beyond what the owner applied before the delete")
		assert.Positive(t, succeeded.Load(), "some acks landed before the delete")
		assert.Less(t, int(succeeded.Load()), acks, "some acks came after it")
		p.close()
	})
}
