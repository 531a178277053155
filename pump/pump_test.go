package pump

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

type outcome struct {
	r   rec
	err error
}

// goWait runs Wait in a goroutine and returns where its outcome arrives.
func goWait(ctx context.Context, p *Pump[rec], topic string, pinned int32) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		r, err := p.Wait(ctx, topic, pinned)
		ch <- outcome{r, err}
	}()
	return ch
}

// parkInOrder starts n waiters one after the other, each parked before the next starts, so the
// FIFO order is the start order. Call inside a bubble.
func parkInOrder(
	ctx context.Context, p *Pump[rec], topic string, pinned int32, n int,
) []<-chan outcome {
	chs := make([]<-chan outcome, n)
	for i := range chs {
		chs[i] = goWait(ctx, p, topic, pinned)
		synctest.Wait()
	}
	return chs
}

// ready returns the outcome if the waiter has returned.
func ready(ch <-chan outcome) (outcome, bool) {
	select {
	case o := <-ch:
		return o, true
	default:
		return outcome{}, false
	}
}

// mustGet fails unless the waiter returned the record id.
func mustGet(t *testing.T, ch <-chan outcome, id int) rec {
	t.Helper()
	o, ok := ready(ch)
	if !ok {
		t.Fatalf("waiter still parked, want record %d", id)
	}
	if o.err != nil || o.r.id != id {
		t.Fatalf("waiter got (%+v, %v), want record %d", o.r, o.err, id)
	}
	return o.r
}

func mustPark(t *testing.T, chs ...<-chan outcome) {
	t.Helper()
	for i, ch := range chs {
		if o, ok := ready(ch); ok {
			t.Fatalf("waiter %d returned (%+v, %v), want it parked", i, o.r, o.err)
		}
	}
}

// pumpTest is the body of a test run by withPump or withSteppedPump.
type pumpTest func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource)

// withPump runs f in a bubble with a pump over a fresh memSource, pumped by Run. On return it
// closes the pump (answering waiters left parked) and stops Run.
func withPump(t *testing.T, f pumpTest) {
	synctest.Test(t, func(t *testing.T) {
		src := newMemSource()
		p := New[rec](src)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()
		defer func() {
			p.Close()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		f(t, ctx, p, src)
	})
}

// withSteppedPump is withPump without Run: the test drives Step itself, as a simulator would.
func withSteppedPump(t *testing.T, f pumpTest) {
	synctest.Test(t, func(t *testing.T) {
		src := newMemSource()
		p := New[rec](src)
		defer p.Close()
		f(t, t.Context(), p, src)
	})
}

func stepAll(p *Pump[rec]) {
	for p.Step() {
	}
}

// TestWake: the pump wakes on both triggers, in both orders of waiter and data, and on nothing
// else (items 80, 81, 85, 90).
func TestWake(t *testing.T) {
	notify := func(p *Pump[rec], part int32) { p.Notify("t") }
	notifyPart := func(p *Pump[rec], part int32) { p.NotifyPartition("t", part) }
	none := func(p *Pump[rec], part int32) {}
	tests := []struct {
		name      string
		pinned    int32
		dataPart  int32
		dataFirst bool // record and wake before the waiter parks: the wake finds nobody and is dropped
		wake      func(p *Pump[rec], part int32)
		served    bool
	}{
		{"waiter then data, Notify", -1, 0, false, notify, true},
		{"waiter then data, NotifyPartition", -1, 3, false, notifyPart, true},
		{"data then waiter, Notify dropped", -1, 0, true, notify, true},
		{"data then waiter, no wake at all", -1, 2, true, none, true},
		{"pinned, waiter then data, NotifyPartition", 1, 1, false, notifyPart, true},
		{"pinned, waiter then data, Notify", 1, 1, false, notify, true},
		{"pinned, data then waiter", 1, 1, true, notifyPart, true},
		{"waiter then data, no wake: parked", -1, 0, false, none, false},
		{"pinned elsewhere, NotifyPartition: parked", 1, 0, false, notifyPart, false},
		{"pinned elsewhere, Notify: parked", 1, 0, false, notify, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
				src.setOwned("t", 0, 1, 2, 3)
				var ch <-chan outcome
				if !tc.dataFirst {
					ch = goWait(ctx, p, "t", tc.pinned)
					synctest.Wait()
					mustPark(t, ch)
				}
				src.add("t", tc.dataPart, 42)
				tc.wake(p, tc.dataPart)
				if tc.dataFirst {
					ch = goWait(ctx, p, "t", tc.pinned)
				}
				synctest.Wait()
				if !tc.served {
					mustPark(t, ch)
					return
				}
				r := mustGet(t, ch, 42)
				if r.part != tc.dataPart {
					t.Fatalf("record from partition %d, want %d", r.part, tc.dataPart)
				}
				if n := p.Parked("t"); n != 0 {
					t.Fatalf("Parked = %d after delivery", n)
				}
			})
		})
	}
}

// TestWakeDuringTake forces the race of item 82: the record lands, and its wake fires, while the
// pump holds the popped waiter inside a Take that has already looked and found nothing. The
// topic must not look waiter-less to the notifier then, and the pump, having put the waiter back,
// must run again and serve it with no further wake (items 80-82).
func TestWakeDuringTake(t *testing.T) {
	for _, pinned := range []int32{-1, 0} {
		for _, wake := range []string{"Notify", "NotifyPartition"} {
			t.Run(fmt.Sprintf("pinned=%d/%s", pinned, wake), func(t *testing.T) {
				withSteppedPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
					src.setOwned("t", 0)
					parkedDuringTake := -1
					src.afterEmpty = func(topic string, _ int32) {
						if src.takeCount() != 1 {
							return
						}
						src.add("t", 0, 7) // lands after Take looked
						parkedDuringTake = p.Parked("t")
						if wake == "Notify" {
							p.Notify("t")
						} else {
							p.NotifyPartition("t", 0)
						}
					}
					ch := goWait(ctx, p, "t", pinned)
					synctest.Wait()
					if more := p.Step(); !more {
						t.Fatalf("Step after a wake during Take reported no work left")
					}
					if parkedDuringTake != 1 {
						t.Fatalf("during Take the topic showed %d waiters, want 1 (the held one)", parkedDuringTake)
					}
					mustPark(t, ch)
					stepAll(p)
					synctest.Wait()
					mustGet(t, ch, 7)
					if n := src.takeCount(); n != 2 {
						t.Fatalf("Take called %d times, want 2", n)
					}
				})
			})
		}
	}
	t.Run("Run", func(t *testing.T) {
		withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
			src.setOwned("t", 0)
			src.afterEmpty = func(string, int32) {
				if src.takeCount() == 1 {
					src.add("t", 0, 7)
					p.NotifyPartition("t", 0)
				}
			}
			ch := goWait(ctx, p, "t", -1)
			synctest.Wait()
			mustGet(t, ch, 7)
		})
	})
}

// TestOneTakePerDelivery: parked waiters are served in FIFO order, one Take per waiter popped,
// and a FIFO stops at the first waiter Take cannot serve; nothing is taken with nobody waiting
// (items 77, 78, 83, 91).
func TestOneTakePerDelivery(t *testing.T) {
	withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		src.setOwned("t", 0)
		src.beforeTake = func(topic string, _ int32) {
			if p.Parked(topic) == 0 {
				t.Errorf("Take with no waiter parked or held")
			}
		}
		p.Notify("t")
		p.NotifyPartition("t", 0)
		synctest.Wait()
		if n := src.takeCount(); n != 0 {
			t.Fatalf("Take called %d times with nobody waiting", n)
		}

		chs := parkInOrder(ctx, p, "t", -1, 5)
		if n := src.takeCount(); n != 1 {
			t.Fatalf("parking 5 waiters made %d Takes, want 1 (only the first joined an empty FIFO)", n)
		}

		src.add("t", 0, 100)
		p.NotifyPartition("t", 0)
		synctest.Wait()
		mustGet(t, chs[0], 100)
		mustPark(t, chs[1:]...)
		if n := src.takeCount(); n != 3 {
			t.Fatalf("Take called %d times, want 3 (one served, one that stopped the FIFO)", n)
		}

		src.add("t", 0, 101, 102, 103)
		p.Notify("t")
		synctest.Wait()
		for i, id := range []int{101, 102, 103} {
			mustGet(t, chs[i+1], id)
		}
		mustPark(t, chs[4])
		if n := src.takeCount(); n != 7 {
			t.Fatalf("Take called %d times, want 7", n)
		}
		if n := p.Parked("t"); n != 1 {
			t.Fatalf("Parked = %d, want 1", n)
		}
	})
}

// TestPinnedFirst: a record on a partition with a pinned waiter goes to it before an unpinned
// waiter that parked earlier (items 90, 92).
func TestPinnedFirst(t *testing.T) {
	for _, wake := range []string{"Notify", "NotifyPartition"} {
		t.Run(wake, func(t *testing.T) {
			withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
				src.setOwned("t", 0, 1)
				shared := goWait(ctx, p, "t", -1)
				synctest.Wait()
				pinned := goWait(ctx, p, "t", 0)
				synctest.Wait()
				src.add("t", 0, 5)
				if wake == "Notify" {
					p.Notify("t")
				} else {
					p.NotifyPartition("t", 0)
				}
				synctest.Wait()
				mustGet(t, pinned, 5)
				mustPark(t, shared)
			})
		})
	}
}

// TestPinnedHeadOfLine: a pinned waiter on an empty partition, parked first, never stalls the
// unpinned waiters behind it in time (item 91), and parks on its own FIFO (item 90).
func TestPinnedHeadOfLine(t *testing.T) {
	withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		src.setOwned("t", 0, 1)
		pinned := goWait(ctx, p, "t", 1)
		synctest.Wait()
		unpinned := parkInOrder(ctx, p, "t", -1, 3)
		q := p.queue("t")
		q.mu.Lock()
		sharedN, pinnedN := q.shared.live(), q.pinned[1].live()
		q.mu.Unlock()
		if sharedN != 3 || pinnedN != 1 {
			t.Fatalf("shared FIFO has %d, partition 1's FIFO has %d; want 3 and 1", sharedN, pinnedN)
		}
		for i := range 3 {
			src.add("t", 0, 10+i)
			p.NotifyPartition("t", 0)
			synctest.Wait()
			mustGet(t, unpinned[i], 10+i)
			mustPark(t, pinned)
		}
		src.add("t", 1, 20)
		p.NotifyPartition("t", 1)
		synctest.Wait()
		mustGet(t, pinned, 20)
	})
}

// TestPartitionsAfresh: every attempt asks the Source again, so a partition gained while the
// waiter parked is served to it, and one that moved away is not reopened (item 93; working the
// partitions out is the Source's job, the pump's is to call Take on every attempt).
func TestPartitionsAfresh(t *testing.T) {
	withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		src.setOwned("t", 0)
		ch := goWait(ctx, p, "t", -1)
		synctest.Wait()
		takes := src.takeCount()

		// Partition 1 arrives with a record, then moves away before the wake.
		src.add("t", 1, 1)
		src.setOwned("t", 0)
		p.Notify("t")
		synctest.Wait()
		mustPark(t, ch)
		if n := src.takeCount(); n != takes+1 {
			t.Fatalf("a wake made %d Takes, want 1", n-takes)
		}

		// Now this node gains it.
		src.setOwned("t", 0, 1)
		p.Notify("t")
		synctest.Wait()
		if r := mustGet(t, ch, 1); r.part != 1 {
			t.Fatalf("served from partition %d, want 1", r.part)
		}
		if n := src.takeCount(); n != takes+2 {
			t.Fatalf("two wakes made %d Takes, want 2", n-takes)
		}
	})
}

// TestCancelledSkipped: a waiter that leaves is skipped without a Take, and the waiters around it
// keep their order (item 88).
func TestCancelledSkipped(t *testing.T) {
	withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		src.setOwned("t", 0)
		a := goWait(ctx, p, "t", -1)
		synctest.Wait()
		bctx, cancelB := context.WithCancel(ctx)
		b := goWait(bctx, p, "t", -1)
		synctest.Wait()
		c := goWait(ctx, p, "t", -1)
		synctest.Wait()
		cancelB()
		synctest.Wait()
		if o, ok := ready(b); !ok || !errors.Is(o.err, context.Canceled) {
			t.Fatalf("cancelled waiter: (%+v, %v, returned=%v), want context.Canceled", o.r, o.err, ok)
		}
		if n := p.Parked("t"); n != 2 {
			t.Fatalf("Parked = %d, want 2", n)
		}
		takes := src.takeCount()
		src.add("t", 0, 1, 2)
		p.Notify("t")
		synctest.Wait()
		mustGet(t, a, 1)
		mustGet(t, c, 2)
		if n := src.takeCount() - takes; n != 2 {
			t.Fatalf("%d Takes for 2 live waiters and one that left, want 2", n)
		}
	})
}

// TestLeaveChurnBounded: waiters that park and leave around one that stays keep the shared FIFO
// bounded, and pinned FIFOs go once nobody waits on them (items 87, 88).
func TestLeaveChurnBounded(t *testing.T) {
	withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		src.setOwned("t", 0)
		stay := goWait(ctx, p, "t", -1)
		synctest.Wait()
		q := p.queue("t")
		for round := range 300 {
			cctx, cancel := context.WithCancel(ctx)
			var chs []<-chan outcome
			for i := range 20 {
				chs = append(chs, goWait(cctx, p, "t", -1), goWait(cctx, p, "t", int32(round*20+i)))
			}
			synctest.Wait()
			cancel()
			synctest.Wait()
			for _, ch := range chs {
				if o, ok := ready(ch); !ok || !errors.Is(o.err, context.Canceled) {
					t.Fatalf("round %d: (%v, returned=%v), want context.Canceled", round, o.err, ok)
				}
			}
			q.mu.Lock()
			f := &q.shared
			if f.dead > f.live() || len(f.buf) > max(minRing, 8*f.live()) {
				t.Fatalf("round %d: shared FIFO holds %d entries (%d marked) in a ring of %d for %d live",
					round, f.n, f.dead, len(f.buf), f.live())
			}
			if len(q.pinned) != 0 || len(q.pinnedList) != 0 {
				t.Fatalf("round %d: %d pinned FIFOs left with nobody pinned", round, len(q.pinned))
			}
			q.mu.Unlock()
		}
		if n := p.Parked("t"); n != 1 {
			t.Fatalf("Parked = %d, want 1", n)
		}
		src.add("t", 0, 1)
		p.Notify("t")
		synctest.Wait()
		mustGet(t, stay, 1)
	})
}

// TestCancelDuringTake: the waiter leaves while the pump takes a record for it. The pump loses
// the swap, releases the record at once, and it goes to the next waiter (item 84).
func TestCancelDuringTake(t *testing.T) {
	withSteppedPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		src.setOwned("t", 0)
		actx, cancelA := context.WithCancel(ctx)
		a := goWait(actx, p, "t", -1)
		synctest.Wait()
		b := goWait(ctx, p, "t", -1)
		synctest.Wait()
		src.afterTake = func(r rec) {
			if r.take == 1 {
				cancelA()
				synctest.Wait() // a has returned by now
			}
		}
		src.add("t", 0, 9)
		p.Notify("t")
		stepAll(p)
		synctest.Wait()
		if o, ok := ready(a); !ok || o.err == nil || o.r != (rec{}) {
			t.Fatalf("cancelled waiter: (%+v, %v, returned=%v), want ctx error and no record",
				o.r, o.err, ok)
		}
		rel := src.releasedRecs()
		if len(rel) != 1 || rel[0].id != 9 || rel[0].take != 1 {
			t.Fatalf("released %+v, want record 9 of the first Take", rel)
		}
		if r := mustGet(t, b, 9); r.take != 2 {
			t.Fatalf("b got lease %d, want the second Take's", r.take)
		}
	})
}

// handOverCtx is a context that ends exactly when Wait starts to block: its Done runs a pump
// step first, which hands the parked waiter a record, so the waiter's select finds both the
// record and the end of its context ready and picks one at random.
type handOverCtx struct {
	context.Context
	step  func()
	done  chan struct{}
	ended bool
}

func (c *handOverCtx) Done() <-chan struct{} {
	if !c.ended {
		c.step()
		c.ended = true
		close(c.done)
	}
	return c.done
}

func (c *handOverCtx) Err() error {
	if c.ended {
		return context.Canceled
	}
	return nil
}

// TestCancelAtHandOver: a record handed over at the instant the waiter's context ends is either
// returned to the caller or released, never both and never neither; Wait never returns ctx.Err()
// with the record kept (item 84). Both outcomes must occur over many rounds.
func TestCancelAtHandOver(t *testing.T) {
	src := newMemSource()
	src.setOwned("t", 0)
	p := New[rec](src)
	defer p.Close()
	var returned, released int
	for i := range 400 {
		src.add("t", 0, i)
		ctx := &handOverCtx{
			Context: context.Background(),
			step:    func() { stepAll(p) },
			done:    make(chan struct{}),
		}
		before := len(src.releasedRecs())
		r, err := p.Wait(ctx, "t", -1)
		rel := src.releasedRecs()[before:]
		switch {
		case err == nil && len(rel) == 0:
			returned++
			if r.id != i {
				t.Fatalf("round %d: got record %d", i, r.id)
			}
		case errors.Is(err, context.Canceled) && len(rel) == 1 && rel[0].id == i && r == (rec{}):
			released++
			// Take it back out so the next round starts clean.
			if got, ok := src.Take("t", -1); !ok || got.id != i {
				t.Fatalf("round %d: released record not visible again", i)
			}
		default:
			t.Fatalf("round %d: Wait = (%+v, %v) with %d releases", i, r, err, len(rel))
		}
		stepAll(p)
	}
	if returned == 0 || released == 0 {
		t.Fatalf("outcomes: %d returned, %d released; want both to occur", returned, released)
	}
	t.Logf("%d returned, %d released at the hand-over", returned, released)
}

// TestDropTopic: parked waiters of a dropped topic get ErrTopicDropped, including one the pump
// holds, whose record is released; nothing of the topic stays; the name starts afresh (item 87).
func TestDropTopic(t *testing.T) {
	withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		src.setOwned("t", 0)
		chs := []<-chan outcome{goWait(ctx, p, "t", -1), goWait(ctx, p, "t", 0), goWait(ctx, p, "t", 3)}
		synctest.Wait()
		p.DropTopic("t")
		synctest.Wait()
		for i, ch := range chs {
			if o, ok := ready(ch); !ok || !errors.Is(o.err, ErrTopicDropped) {
				t.Fatalf("waiter %d: (%v, returned=%v), want ErrTopicDropped", i, o.err, ok)
			}
		}
		if n := p.Parked("t"); n != 0 {
			t.Fatalf("Parked = %d", n)
		}
		if _, ok := p.topics.Load("t"); ok {
			t.Fatalf("dropped topic still in the map")
		}

		// Dropped while the pump holds the waiter, with a record taken for it.
		src.add("t", 0, 1)
		src.afterTake = func(r rec) { p.DropTopic(r.topic) }
		ch := goWait(ctx, p, "t", -1)
		synctest.Wait()
		if o, ok := ready(ch); !ok || !errors.Is(o.err, ErrTopicDropped) {
			t.Fatalf("held waiter: (%+v, %v, returned=%v), want ErrTopicDropped", o.r, o.err, ok)
		}
		if rel := src.releasedRecs(); len(rel) != 1 || rel[0].id != 1 {
			t.Fatalf("released %+v, want record 1", rel)
		}
		src.afterTake = nil

		// Dropped while the pump holds the waiter, with nothing taken for it.
		src.afterEmpty = func(topic string, _ int32) { p.DropTopic(topic) }
		ch = goWait(ctx, p, "empty", -1)
		synctest.Wait()
		if o, ok := ready(ch); !ok || !errors.Is(o.err, ErrTopicDropped) {
			t.Fatalf("held waiter, empty Take: (%v, returned=%v), want ErrTopicDropped", o.err, ok)
		}
		src.afterEmpty = nil

		// The name starts afresh.
		ch = goWait(ctx, p, "t", -1)
		synctest.Wait()
		mustGet(t, ch, 1)
	})
}

// TestDropTopicChurn: many uniquely named topics, each with waiters and wakes, leave nothing
// behind once dropped (item 87).
func TestDropTopicChurn(t *testing.T) {
	withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		const topics = 2000
		for round := range 5 {
			chs := make([]<-chan outcome, 0, 2*topics)
			for i := range topics {
				name := fmt.Sprintf("t-%d-%d", round, i)
				chs = append(chs, goWait(ctx, p, name, -1), goWait(ctx, p, name, int32(i%4)))
			}
			synctest.Wait()
			for i := range topics {
				name := fmt.Sprintf("t-%d-%d", round, i)
				p.Notify(name)
				p.DropTopic(name)
			}
			synctest.Wait()
			for _, ch := range chs {
				if o, ok := ready(ch); !ok || !errors.Is(o.err, ErrTopicDropped) {
					t.Fatalf("(%v, returned=%v), want ErrTopicDropped", o.err, ok)
				}
			}
		}
		n := 0
		p.topics.Range(func(any, any) bool { n++; return true })
		p.mu.Lock()
		pending := len(p.pending)
		p.mu.Unlock()
		if n != 0 || pending != 0 {
			t.Fatalf("after dropping every topic: %d topics, %d pending", n, pending)
		}
	})
}

// TestClose: Close answers parked waiters and later Waits with ErrClosed.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New[rec](newMemSource())
		chs := []<-chan outcome{goWait(t.Context(), p, "a", -1), goWait(t.Context(), p, "b", 2)}
		synctest.Wait()
		p.Close()
		synctest.Wait()
		for i, ch := range chs {
			if o, ok := ready(ch); !ok || !errors.Is(o.err, ErrClosed) {
				t.Fatalf("waiter %d: (%v, returned=%v), want ErrClosed", i, o.err, ok)
			}
		}
		if _, err := p.Wait(t.Context(), "a", -1); !errors.Is(err, ErrClosed) {
			t.Fatalf("Wait after Close: %v, want ErrClosed", err)
		}
	})
}

// TestWaitContextDone: a Wait whose context has ended returns at once, parking nothing.
func TestWaitContextDone(t *testing.T) {
	src := newMemSource()
	src.add("t", 0, 1)
	p := New[rec](src)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Wait(ctx, "t", -1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if p.Step() || src.takeCount() != 0 || p.Parked("t") != 0 {
		t.Fatalf("a Wait with an ended context parked or took something")
	}
}

// TestIdle: parked waiters and an idle pump do nothing however long the wait: no timer, no
// polling (item 85). time.Sleep here waits for nothing: inside the bubble it moves the fake clock
// an hour ahead, which would fire any timer the pump had set.
func TestIdle(t *testing.T) {
	withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		for i := range 10 {
			name := fmt.Sprintf("t%d", i)
			src.setOwned(name, 0, 1)
			for range 10 {
				goWait(ctx, p, name, int32(i%3)-1)
			}
		}
		synctest.Wait()
		takes := src.takeCount()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := src.takeCount(); n != takes {
			t.Fatalf("%d Takes while idle", n-takes)
		}
	})
}

// TestNotifyNoWaiterAllocs: with no waiter, the wake notifier allocates nothing and schedules
// nothing, whether the topic was never seen or has had waiters that left (item 86).
func TestNotifyNoWaiterAllocs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newMemSource()
		p := New[rec](src)
		defer p.Close()
		ctx, cancel := context.WithCancel(t.Context())
		ch := goWait(ctx, p, "known", 2)
		synctest.Wait()
		cancel()
		synctest.Wait()
		<-ch
		stepAll(p)
		for _, name := range []string{"known", "unknown"} {
			if n := testing.AllocsPerRun(1000, func() {
				p.Notify(name)
				p.NotifyPartition(name, 2)
			}); n != 0 {
				t.Fatalf("%s: %v allocs per wake with no waiter", name, n)
			}
		}
		if p.Step() {
			t.Fatalf("a wake with no waiter scheduled a pass")
		}
		if n := src.takeCount(); n != 0 { // the waiter left before the pump ran its join's kick
			t.Fatalf("%d Takes, want 0", n)
		}
	})
}

// TestPassBudget: a pass stops a FIFO after passBudget Takes, so a topic with a deep backlog and
// many waiters does not hold the pump from another topic; the rest follows on the next Step.
func TestPassBudget(t *testing.T) {
	withSteppedPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		const n = passBudget + 36
		deep := make([]<-chan outcome, n)
		for i := range deep {
			deep[i] = goWait(ctx, p, "deep", -1)
		}
		other := goWait(ctx, p, "other", -1)
		synctest.Wait()
		stepAll(p) // the joins' kicks: nothing to take yet
		for i := range n {
			src.add("deep", 0, i)
		}
		src.add("other", 0, 1)
		p.Notify("deep")
		p.Notify("other")
		if !p.Step() {
			t.Fatalf("Step with a spent budget reported no work left")
		}
		synctest.Wait()
		mustGet(t, other, 1)
		if got := p.Parked("deep"); got != n-passBudget {
			t.Fatalf("after one Step %d deep waiters parked, want %d", got, n-passBudget)
		}
		stepAll(p)
		synctest.Wait()
		if got := p.Parked("deep"); got != 0 {
			t.Fatalf("%d deep waiters left parked", got)
		}
	})
}

// TestStepReentry: a second goroutine pumping (here, Step called from inside Take) is a bug the
// pump reports by panicking rather than by corrupting its queues.
func TestStepReentry(t *testing.T) {
	withSteppedPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		var recovered any
		src.beforeTake = func(string, int32) {
			defer func() { recovered = recover() }()
			p.Step()
		}
		ch := goWait(ctx, p, "t", -1)
		synctest.Wait()
		stepAll(p)
		if recovered == nil {
			t.Fatalf("Step inside Step did not panic")
		}
		mustPark(t, ch)
	})
}

// TestParkedOn counts the waiters pinned to one partition, apart from the topic's others, and
// forgets one that left.
func TestParkedOn(t *testing.T) {
	withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		src.setOwned("t", 0, 1)
		if n := p.ParkedOn("none", 0); n != 0 {
			t.Fatalf("ParkedOn of an unknown topic = %d", n)
		}
		goWait(ctx, p, "t", -1)
		goWait(ctx, p, "t", 1)
		leaving, leave := context.WithCancel(ctx)
		goWait(leaving, p, "t", 1)
		synctest.Wait()
		for _, c := range []struct {
			partition int32
			want      int
		}{{-1, 1}, {0, 0}, {1, 2}, {2, 0}} {
			if n := p.ParkedOn("t", c.partition); n != c.want {
				t.Fatalf("ParkedOn(t, %d) = %d, want %d", c.partition, n, c.want)
			}
		}
		leave()
		synctest.Wait()
		if n := p.ParkedOn("t", 1); n != 1 {
			t.Fatalf("ParkedOn after one left = %d, want 1", n)
		}
		if n := p.Parked("t"); n != 2 {
			t.Fatalf("Parked = %d, want 2", n)
		}
	})
}

// TestTakePanics: a Source whose Take panics makes Step panic with that value, not with the
// runtime's fatal "unlock of unlocked mutex" (which no recover catches), and leaves the pump
// as it was: the waiter keeps its place, and the next Step serves it.
func TestTakePanics(t *testing.T) {
	withSteppedPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		ch := goWait(ctx, p, "t", -1)
		synctest.Wait()
		src.add("t", 0, 7)
		armed := true
		src.beforeTake = func(string, int32) {
			if armed {
				armed = false
				panic("the host's bug")
			}
		}
		p.Notify("t")
		func() {
			defer func() {
				if r := recover(); r != "the host's bug" {
					t.Fatalf("Step recovered %v, want the Take's own panic", r)
				}
			}()
			p.Step()
		}()
		synctest.Wait()
		if _, ok := ready(ch); ok {
			t.Fatal("the waiter returned though its Take panicked")
		}
		if got := p.Parked("t"); got != 1 {
			t.Fatalf("Parked = %d after the panic, want 1", got)
		}
		p.Notify("t")
		stepAll(p)
		synctest.Wait()
		mustGet(t, ch, 7)
	})
}
