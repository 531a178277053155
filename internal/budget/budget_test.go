package budget

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// manualClock is a Clock whose time moves only by advance, which runs the timers that come
// due synchronously, in deadline order, each with the clock reading its deadline.
type manualClock struct {
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	at      time.Time
	f       func()
	settled bool
}

func (c *manualClock) Now() time.Time { return c.now }

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	t := &manualTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		stopped := !t.settled
		t.settled = true
		return stopped
	}
}

// pending returns how many timers are neither stopped nor run.
func (c *manualClock) pending() int {
	n := 0
	for _, t := range c.timers {
		if !t.settled {
			n++
		}
	}
	return n
}

func (c *manualClock) advance(d time.Duration) {
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
			return
		}
		due.settled = true
		c.now = due.at
		due.f()
	}
}

// The budgets of a lane against a model: every budget ends exactly when its deadline is
// reached or when it is closed, whichever comes first, with the matching error (one opened
// with its deadline passed already ends when the clock next runs its timers); the heap
// holds exactly the open ones; the one timer is never armed later than the earliest open
// deadline; and at most one timer is pending.
func TestBudgetsAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := &manualClock{now: time.Unix(1000, 0)}
		var set Set
		type entry struct {
			b       *Context
			ended   error // how the model says it ended; nil: it runs
			watched bool  // Done was asked for
		}
		var all []*entry
		check := func() {
			open := 0
			for _, e := range all {
				if e.ended == nil {
					open++
				}
				require.Equal(t, e.ended, e.b.Err())
				if e.watched {
					select {
					case <-e.b.Done():
						require.Error(t, e.ended, "Done closed while the budget runs")
					default:
						require.NoError(t, e.ended, "Done open after the budget ended")
					}
				}
			}
			require.Len(t, set.heap, open)
			for i, b := range set.heap {
				require.Equal(t, i, b.index)
				if i > 0 {
					require.False(t, b.deadline.Before(set.heap[(i-1)/2].deadline), "heap order")
				}
			}
			if open > 0 {
				require.False(t, set.armedFor.IsZero(), "open budgets and no timer")
				require.False(t, set.armedFor.After(set.heap[0].deadline), "the timer is armed past the earliest deadline")
			}
			require.LessOrEqual(t, clock.pending(), 1)
		}
		t.Repeat(map[string]func(*rapid.T){
			"open": func(t *rapid.T) {
				d := time.Duration(rapid.IntRange(0, 5000).Draw(t, "budget ms")) * time.Millisecond
				all = append(all, &entry{b: set.Open(clock, clock.now.Add(d), nil)})
				check()
			},
			"close": func(t *rapid.T) {
				if len(all) == 0 {
					t.Skip("nothing opened")
				}
				e := all[rapid.IntRange(0, len(all)-1).Draw(t, "which")]
				set.Close(e.b)
				if e.ended == nil {
					e.ended = context.Canceled
				}
				check()
			},
			"watch": func(t *rapid.T) {
				if len(all) == 0 {
					t.Skip("nothing opened")
				}
				all[rapid.IntRange(0, len(all)-1).Draw(t, "which")].watched = true
				check()
			},
			"advance": func(t *rapid.T) {
				clock.advance(time.Duration(rapid.IntRange(0, 3000).Draw(t, "ms")) * time.Millisecond)
				for _, e := range all {
					if e.ended == nil && !clock.now.Before(e.b.deadline) {
						e.ended = context.DeadlineExceeded
					}
				}
				check()
			},
		})
	})
}

// A timer that fires after another replaced it (its stop came too late: it was already
// running) ends what is due but arms nothing: at most one timer stays pending.
func TestBudgetsStaleTimerArmsNothing(t *testing.T) {
	clock := &manualClock{now: time.Unix(1000, 0)}
	var set Set
	late := set.Open(clock, clock.now.Add(2*time.Second), nil)
	stale := set.armings
	early := set.Open(clock, clock.now.Add(time.Second), nil) // replaces the timer
	set.fire(clock, stale)                                    // the replaced timer, run anyway
	require.Equal(t, 1, clock.pending())
	require.NoError(t, early.Err())
	clock.advance(time.Second)
	require.ErrorIs(t, early.Err(), context.DeadlineExceeded)
	require.NoError(t, late.Err())
	clock.advance(time.Second)
	require.ErrorIs(t, late.Err(), context.DeadlineExceeded)
	require.Zero(t, clock.pending())
}

// A Context is a context as the standard library's are: Deadline, Done closed and Err set
// once it ends, AfterFunc run once (in a goroutine) unless stopped first, and contexts
// derived from it cancelled with it.
func TestBudgetIsAContext(t *testing.T) {
	clock := &manualClock{now: time.Unix(1000, 0)}
	var set Set
	deadline := clock.now.Add(time.Second)
	b := set.Open(clock, deadline, nil)
	got, ok := b.Deadline()
	require.True(t, ok)
	require.Equal(t, deadline, got)
	require.Nil(t, b.Value("anything"))

	ran := make(chan struct{})
	var runs atomic.Int32
	b.AfterFunc(func() { runs.Add(1); close(ran) })
	stopped := b.AfterFunc(func() { t.Error("a stopped AfterFunc ran") })
	require.True(t, stopped())
	require.False(t, stopped(), "stopped twice")
	child, cancelChild := context.WithCancel(b)
	defer cancelChild()
	withValue := context.WithValue(b, budgetKey{}, 1)
	done := b.Done()

	select {
	case <-done:
		t.Fatal("done before its deadline")
	case <-child.Done():
		t.Fatal("child done before its parent")
	default:
	}
	clock.advance(time.Second)
	<-done
	<-child.Done()
	<-ran
	require.ErrorIs(t, b.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, child.Err(), context.DeadlineExceeded)
	require.ErrorIs(t, withValue.Err(), context.DeadlineExceeded)
	require.Equal(t, 1, withValue.Value(budgetKey{}))

	// Registered after the end: runs at once (in its own goroutine), and cannot be stopped.
	late := make(chan struct{})
	stopLate := b.AfterFunc(func() { close(late) })
	<-late
	require.False(t, stopLate())
	require.EqualValues(t, 1, runs.Load())

	// Closing after the deadline changes nothing.
	set.Close(b)
	require.ErrorIs(t, b.Err(), context.DeadlineExceeded)
}

type budgetKey struct{}

// A budget closed before its deadline ends as Canceled, and its Done, made after, is closed.
func TestBudgetClosed(t *testing.T) {
	clock := &manualClock{now: time.Unix(1000, 0)}
	var set Set
	b := set.Open(clock, clock.now.Add(time.Second), nil)
	ran := make(chan struct{})
	b.AfterFunc(func() { close(ran) })
	set.Close(b)
	<-ran
	<-b.Done()
	require.True(t, errors.Is(b.Err(), context.Canceled))
	clock.advance(time.Hour)
	require.True(t, errors.Is(b.Err(), context.Canceled), "the deadline does not overwrite how it ended")
	require.Empty(t, set.heap)
	require.Zero(t, slices.Index(set.heap, b)+1)
}

// A lane whose calls all returned arms nothing more once its timer has fired: the calls of a
// steady stream share one firing per budget's length, and an owner no longer called costs
// the node one wake-up at most, then none.
func TestBudgetsSleepWhenIdle(t *testing.T) {
	clock := &manualClock{now: time.Unix(1000, 0)}
	var set Set
	const ackBudget = 2 * time.Second // an ack's, router.ForwardBudget
	// A steady stream over one second.
	for range 1000 {
		set.Close(set.Open(clock, clock.now.Add(ackBudget), nil))
		clock.advance(time.Millisecond)
	}
	require.Equal(t, 1, len(clock.timers), "one timer armed for the stream")
	require.Equal(t, 1, clock.pending())
	clock.advance(time.Hour)
	require.Zero(t, clock.pending(), "nothing armed once idle")
	require.Equal(t, 1, len(clock.timers), "it fired once and armed nothing more")
}
