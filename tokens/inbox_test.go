package tokens

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func wake(owner string, until time.Duration) Wake {
	return Wake{Owner: owner, Claim: true, Until: epoch.Add(until)}
}

func TestInboxZeroValue(t *testing.T) {
	var i Inbox
	_, ok := i.Pop(epoch)
	require.False(t, ok)
	_, ok = i.PopFrom("o", epoch)
	require.False(t, ok)
	i.Drain(epoch, func(Wake) { t.Fatal("drained a wake from an empty inbox") })
	require.Zero(t, i.Len())
}

func TestInboxTable(t *testing.T) {
	a, b, c := wake("a", time.Second), wake("b", 2*time.Second), wake("c", 3*time.Second)
	probe := Wake{Owner: "p", Until: epoch.Add(time.Minute)}
	tests := []struct {
		name    string
		push    []Wake
		front   []Wake // put back at the head after the pushes, in this order
		at      time.Duration
		from    string // PopFrom when set, Pop otherwise
		want    Wake
		wantOK  bool
		wantLen int
	}{
		{"oldest first", []Wake{a, b, c}, nil, 0, "", a, true, 2},
		{"put back goes first", []Wake{a, b}, []Wake{c}, 0, "", c, true, 2},
		{"put back twice: the last first", []Wake{a}, []Wake{b, c}, 0, "", c, true, 2},
		{"lapsed discarded", []Wake{a, b, c}, nil, 2 * time.Second, "", c, true, 0},
		{"all lapsed", []Wake{a, b}, nil, 2 * time.Second, "", Wake{}, false, 0},
		{"lapsed at the instant", []Wake{a}, nil, time.Second, "", Wake{}, false, 0},
		{"plain probe ticket", []Wake{probe}, nil, 0, "", probe, true, 0},
		// A consumer pinned to a partition of owner b takes b's wake and leaves the others.
		{"from an owner", []Wake{a, b, c}, nil, 0, "b", b, true, 2},
		{"from an owner: oldest of its", []Wake{b, a, wake("b", time.Minute)}, nil, 0, "b", b, true, 2},
		{"from an owner with none", []Wake{a, c}, nil, 0, "b", Wake{}, false, 2},
		{"from an owner: lapsed ones discarded", []Wake{a, b, c}, nil, 1500 * time.Millisecond, "c", c, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var i Inbox
			for _, w := range tc.push {
				i.Push(w)
			}
			for _, w := range tc.front {
				i.PushFront(w)
			}
			var w Wake
			var ok bool
			if tc.from != "" {
				w, ok = i.PopFrom(tc.from, epoch.Add(tc.at))
			} else {
				w, ok = i.Pop(epoch.Add(tc.at))
			}
			require.Equal(t, tc.wantOK, ok)
			require.Equal(t, tc.want, w)
			require.Equal(t, tc.wantLen, i.Len())
		})
	}
}

// checklist 115: a consumer woken by a wake it cannot use passes it to the next consumer
// parked on the node; when nobody is left, the wakes are drained to be passed.
func TestInboxPassOn(t *testing.T) {
	var i Inbox
	i.Push(wake("a", time.Second))
	i.Push(wake("b", time.Second))
	first, ok := i.Pop(epoch)
	require.True(t, ok)
	// The consumer was served locally at that instant: the wake goes back first.
	i.PushFront(first)
	next, ok := i.Pop(epoch.Add(time.Millisecond))
	require.True(t, ok)
	require.Equal(t, first, next, "the next consumer claims the record held for the first")
	// Nobody is left: every live wake is drained (to be passed), oldest first.
	i.PushFront(next)
	i.Push(wake("c", time.Millisecond))
	var drained []string
	i.Drain(epoch.Add(time.Millisecond), func(w Wake) { drained = append(drained, w.Owner) })
	require.Equal(t, []string{"a", "b"}, drained)
	require.Zero(t, i.Len())
}

// A drain's callback may use the inbox: a wake it pushes stays for later, and the drain
// takes only what was there when it began.
func TestInboxDrainReentrant(t *testing.T) {
	var i Inbox
	i.Push(wake("a", time.Second))
	i.Push(wake("b", time.Second))
	var drained []string
	i.Drain(epoch, func(w Wake) {
		drained = append(drained, w.Owner)
		if w.Owner == "a" {
			i.PushFront(wake("x", time.Second))
		}
	})
	require.Equal(t, []string{"a", "b"}, drained)
	require.Equal(t, 1, i.Len())
	w, ok := i.Pop(epoch)
	require.True(t, ok)
	require.Equal(t, "x", w.Owner)
}

// Pushing and popping in steady state allocates nothing, and a burst leaves no memory behind.
func TestInboxMemory(t *testing.T) {
	var i Inbox
	i.Push(wake("a", time.Second))
	i.Pop(epoch)
	allocs := testing.AllocsPerRun(1000, func() {
		i.Push(wake("a", time.Second))
		i.PushFront(wake("b", time.Second))
		i.PopFrom("a", epoch)
		i.Drain(epoch, func(Wake) {})
	})
	require.Zero(t, allocs)
	for range 1000 {
		i.Push(wake("a", time.Second))
	}
	for range 999 {
		i.Pop(epoch)
		checkRing(t, &i.wakes)
	}
	require.LessOrEqual(t, len(i.wakes.buf), minRing)
}

// The model of an Inbox: a slice, filtered of lapsed wakes by every call that takes now.

type inboxMachine struct {
	i     Inbox
	model []Wake
	now   time.Time
	n     int // wakes made, to tell them apart
}

func (im *inboxMachine) discard() {
	im.model = slices.DeleteFunc(im.model, func(w Wake) bool { return !im.now.Before(w.Until) })
}

func (im *inboxMachine) wake(t *rapid.T) Wake {
	im.n++
	return Wake{
		Owner: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "owner"),
		Claim: im.n%2 == 0,
		Until: im.now.Add(rapid.SampledFrom([]time.Duration{-time.Second, 0, time.Nanosecond, 500 * time.Millisecond, time.Second}).Draw(t, "until")).Add(time.Duration(im.n) * time.Microsecond),
	}
}

func (im *inboxMachine) advance(t *rapid.T) {
	im.now = im.now.Add(rapid.SampledFrom([]time.Duration{time.Nanosecond, 100 * time.Millisecond, time.Second}).Draw(t, "step"))
}

func (im *inboxMachine) clockBack(t *rapid.T) {
	im.now = im.now.Add(-rapid.SampledFrom([]time.Duration{time.Nanosecond, 300 * time.Millisecond}).Draw(t, "back"))
}

func (im *inboxMachine) push(t *rapid.T) {
	w := im.wake(t)
	im.i.Push(w)
	im.model = append(im.model, w)
}

func (im *inboxMachine) pushFront(t *rapid.T) {
	w := im.wake(t)
	im.i.PushFront(w)
	im.model = slices.Insert(im.model, 0, w)
}

func (im *inboxMachine) pop(t *rapid.T) {
	w, ok := im.i.Pop(im.now)
	im.discard()
	var want Wake
	wantOK := len(im.model) > 0
	if wantOK {
		want, im.model = im.model[0], im.model[1:]
	}
	if ok != wantOK || w != want {
		t.Fatalf("Pop = %+v %v, model %+v %v", w, ok, want, wantOK)
	}
}

func (im *inboxMachine) popFrom(t *rapid.T) {
	owner := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "owner")
	w, ok := im.i.PopFrom(owner, im.now)
	im.discard()
	var want Wake
	k := slices.IndexFunc(im.model, func(w Wake) bool { return w.Owner == owner })
	if k >= 0 {
		want = im.model[k]
		im.model = slices.Delete(im.model, k, k+1)
	}
	if ok != (k >= 0) || w != want {
		t.Fatalf("PopFrom(%s) = %+v %v, model %+v %v", owner, w, ok, want, k >= 0)
	}
}

func (im *inboxMachine) drain(t *rapid.T) {
	var got []Wake
	im.i.Drain(im.now, func(w Wake) { got = append(got, w) })
	im.discard()
	if !slices.Equal(got, im.model) {
		t.Fatalf("Drain = %+v, model %+v", got, im.model)
	}
	im.model = nil
}

func (im *inboxMachine) check(t *rapid.T) {
	if got, want := im.i.Len(), len(im.model); got != want {
		t.Fatalf("Len = %d, model %d", got, want)
	}
	for k := range im.i.wakes.n {
		if *im.i.wakes.at(k) != im.model[k] {
			t.Fatalf("wake %d is %+v, model %+v", k, *im.i.wakes.at(k), im.model[k])
		}
	}
	checkRing(t, &im.i.wakes)
}

func TestInboxAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		im := &inboxMachine{now: epoch}
		t.Repeat(map[string]func(*rapid.T){
			"advance":   im.advance,
			"clockBack": im.clockBack,
			"push":      im.push,
			"pushFront": im.pushFront,
			"pop":       im.pop,
			"popFrom":   im.popFrom,
			"drain":     im.drain,
			"":          im.check,
		})
	})
}
