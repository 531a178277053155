package storecommit

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/offsets"
)

const machineParts = 4

// machine drives a committer step by step (saveAll called by the test, no Run) against a
// model of what it must do. The source's frontier of a partition is its version: it only
// grows, across a Forget and a re-creation too. A save pass may run further actions while
// its first Save is in flight (after the snapshots of that batch, before those of the next):
// changes, marks, Durable waits and Forgets.
//
// Checked: every Save holds only partitions marked when its pass began, each once per pass,
// and every one of those that the source had (and no Forget dropped first); a Save never
// holds a state older than one the store holds, nor a partition forgotten and not marked
// since; a batch's states are the source's as of its snapshot; a wait is answered nil only by
// a Save that succeeded with a snapshot taken after it registered (the store then holds its
// change), ErrShardGone for a Forget or a gone source, ctx.Err() when cancelled, and not at
// all otherwise; a Forget waits for the Save in flight that holds its partition; the
// committer's marks are the model's after every step; Close answers every wait.
type machine struct {
	t     *rapid.T
	c     *Committer
	src   *fakeSource
	store *fakeStore

	ver       [machineParts]int64
	present   [machineParts]bool
	marked    [machineParts]bool
	forgotten [machineParts]bool // forgotten and not marked since
	failing   bool
	waits     []*mwait // not answered yet

	// The pass in progress.
	inPass     bool
	hookRan    bool
	batch0     map[int32]bool // the partitions of the pass's first Save
	hookForgot [machineParts]bool
	hookMarked [machineParts]bool
	forgets    []chan struct{}
}

type mwait struct {
	p      int32
	reg    int64 // the source's version when it registered
	w      *wait
	inHook bool // registered while the pass's first Save was in flight
	// forgotLater: a Forget of p in the same hook followed it.
	forgotLater bool
}

func (m *machine) part(t *rapid.T, label string, onlyPresent bool) (int32, bool) {
	var ps []int32
	for p := range int32(machineParts) {
		if (!onlyPresent || m.present[p]) && !m.hookForgot[p] {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return 0, false
	}
	return rapid.SampledFrom(ps).Draw(t, label), true
}

func newMachine(t *rapid.T) *machine {
	m := &machine{t: t, src: newSource(), store: newStore()}
	m.c = New(Config{Store: m.store.methods(), Source: m.src, MaxBatch: rapid.SampledFrom([]int{1, 2, 3, 1000}).Draw(t, "MaxBatch")})
	for p := range int32(machineParts) {
		m.present[p] = true
		m.src.setFrontier("m", p, 0)
	}
	m.store.onSave = m.onSave
	return m
}

// onSave checks a Save as it starts, then, in a pass's first Save, runs the hook's actions.
func (m *machine) onSave(batch []Entry) {
	t := m.t
	for _, e := range batch {
		require.False(t, m.forgotten[e.Partition], "Save of m/%d, forgotten and not marked since", e.Partition)
		f := decodeFrontier(t, e.State)
		if old, ok := m.store.stored(t, "m", e.Partition); ok {
			require.GreaterOrEqual(t, f, old, "Save of m/%d older than what the store holds", e.Partition)
		}
	}
	if !m.inPass || m.hookRan {
		return
	}
	m.hookRan = true
	m.batch0 = map[int32]bool{}
	for _, e := range batch {
		m.batch0[e.Partition] = true
	}
	for i := range rapid.IntRange(0, 3).Draw(t, "hook actions") {
		p, ok := m.part(t, fmt.Sprint("hook partition ", i), true)
		if !ok {
			return
		}
		switch rapid.SampledFrom([]string{"change", "mark", "durable", "forget"}).Draw(t, "hook action") {
		case "change":
			m.change(p)
		case "mark":
			m.mark(p)
			m.hookMarked[p] = true
		case "durable":
			m.durable(p, true)
			m.hookMarked[p] = true
		case "forget":
			drop := rapid.Bool().Draw(t, "drop")
			if drop {
				m.src.drop("m", p)
				m.present[p] = false
			}
			forgot := make(chan struct{})
			go func() {
				m.c.Forget("m", p)
				close(forgot)
			}()
			synctest.Wait()
			returned := isClosed(forgot)
			if m.batch0[p] {
				require.False(t, returned, "Forget of m/%d returned while a Save holding it was in flight", p)
			} else {
				require.True(t, returned, "Forget of m/%d, held by no Save, did not return", p)
			}
			m.forgets = append(m.forgets, forgot)
			m.hookForgot[p], m.hookMarked[p] = true, false
			for _, w := range m.waits {
				if w.p == p && w.inHook {
					w.forgotLater = true
				}
			}
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (m *machine) mark(p int32) {
	m.c.MarkDirty("m", p)
	m.marked[p], m.forgotten[p] = true, false
}

func (m *machine) change(p int32) {
	m.ver[p]++
	m.src.setFrontier("m", p, m.ver[p])
}

func (m *machine) durable(p int32, inHook bool) {
	w := &mwait{p: p, reg: m.ver[p], w: goDurable(m.c, "m", p), inHook: inHook}
	synctest.Wait() // registered
	m.waits = append(m.waits, w)
	m.marked[p], m.forgotten[p] = true, false
}

// settle checks the answers of the waits against what the model expects of them (nil: still
// waiting) and drops the answered ones.
func (m *machine) settle(expect func(w *mwait) (answered bool, check func(err error))) {
	synctest.Wait()
	var left []*mwait
	for _, w := range m.waits {
		want, check := expect(w)
		got, err := w.w.answered()
		require.Equal(m.t, want, got, "wait of m/%d (registered at version %d): answered %v, err %v", w.p, w.reg, got, err)
		if got {
			check(err)
		} else {
			left = append(left, w)
		}
	}
	m.waits = left
}

func (m *machine) answeredNil(w *mwait) func(error) {
	return func(err error) {
		require.NoError(m.t, err, "wait of m/%d", w.p)
		f, ok := m.store.stored(m.t, "m", w.p)
		require.True(m.t, ok)
		require.GreaterOrEqual(m.t, f, w.reg, "wait of m/%d answered, its change not in the store", w.p)
	}
}

func (m *machine) answeredGone(w *mwait) func(error) {
	return func(err error) { require.ErrorIs(m.t, err, offsets.ErrShardGone, "wait of m/%d", w.p) }
}

func pendingOnly(*mwait) (bool, func(error)) { return false, nil }

func (m *machine) actMark(t *rapid.T) {
	p, _ := m.part(t, "partition", false)
	m.mark(p)
}

func (m *machine) actChange(t *rapid.T) {
	if p, ok := m.part(t, "partition", true); ok {
		m.change(p)
	}
}

func (m *machine) actCreate(t *rapid.T) {
	p, _ := m.part(t, "partition", false)
	if !m.present[p] {
		m.present[p] = true
		m.change(p)
	}
}

func (m *machine) actDurable(t *rapid.T) {
	p, _ := m.part(t, "partition", false)
	m.durable(p, false)
	m.settle(pendingOnly)
}

func (m *machine) actCancel(t *rapid.T) {
	if len(m.waits) == 0 {
		t.Skip("no wait")
	}
	w := rapid.SampledFrom(m.waits).Draw(t, "wait")
	w.w.cancel()
	m.settle(func(x *mwait) (bool, func(error)) {
		if x != w {
			return false, nil
		}
		return true, func(err error) { require.ErrorIs(t, err, context.Canceled) }
	})
}

func (m *machine) actForget(t *rapid.T) {
	p, _ := m.part(t, "partition", false)
	if rapid.Bool().Draw(t, "drop") {
		m.src.drop("m", p)
		m.present[p] = false
	}
	m.c.Forget("m", p)
	m.marked[p], m.forgotten[p] = false, true
	m.settle(func(w *mwait) (bool, func(error)) {
		if w.p != p {
			return false, nil
		}
		return true, m.answeredGone(w)
	})
}

func (m *machine) actToggleFailure(t *rapid.T) {
	m.failing = !m.failing
	if m.failing {
		m.store.setFail(errStore)
	} else {
		m.store.setFail(nil)
	}
}

func (m *machine) actSave(t *rapid.T) {
	t.Helper()
	marked0, present0, ver0 := m.marked, m.present, m.ver
	waits0 := map[*mwait]bool{}
	for _, w := range m.waits {
		require.True(t, m.marked[w.p], "model: a wait of m/%d whose partition is not marked", w.p)
		waits0[w] = true
	}
	before := len(m.store.saves())
	m.inPass, m.hookRan, m.batch0, m.forgets = true, false, nil, nil
	err := m.c.saveAll(context.Background())
	m.inPass = false
	synctest.Wait()
	for _, f := range m.forgets {
		require.True(t, isClosed(f), "a Forget did not return after the pass")
	}
	calls := m.store.saves()[before:]

	batchOf := map[int32]int{}
	for b, c := range calls {
		require.Equal(t, m.failing, c.err != nil, "Save %d: failed %v", b, c.err)
		for _, e := range c.entries {
			p := e.Partition
			_, twice := batchOf[p]
			require.False(t, twice, "m/%d twice in one pass", p)
			batchOf[p] = b
			require.True(t, marked0[p] && present0[p], "m/%d saved, not marked with its source present at the pass's start", p)
			f := decodeFrontier(t, e.State)
			if b == 0 {
				require.Equal(t, ver0[p], f, "m/%d: the first batch's snapshot precedes the hook", p)
			} else {
				require.True(t, f >= ver0[p] && f <= m.ver[p], "m/%d: version %d, not in [%d, %d]", p, f, ver0[p], m.ver[p])
			}
		}
	}
	if m.failing && len(calls) > 0 {
		require.ErrorIs(t, err, errStore)
	} else {
		require.NoError(t, err)
	}
	for p := range int32(machineParts) {
		if marked0[p] && present0[p] && !m.hookForgot[p] {
			_, ok := batchOf[p]
			require.True(t, ok, "m/%d, marked and present, not saved", p)
		}
	}

	ok := !m.failing
	m.settle(func(w *mwait) (bool, func(error)) {
		b, appeared := batchOf[w.p]
		switch {
		case waits0[w]: // registered before the pass
			switch {
			case appeared && ok:
				return true, m.answeredNil(w)
			case m.hookForgot[w.p] || !appeared && !present0[w.p]:
				return true, m.answeredGone(w)
			default:
				return false, nil
			}
		case w.forgotLater:
			return true, m.answeredGone(w)
		case appeared && b > 0 && ok:
			return true, m.answeredNil(w)
		default: // its snapshot came before it (the first batch), or none was taken
			return false, nil
		}
	})
	for _, w := range m.waits {
		w.inHook = false
	}

	for p := range int32(machineParts) {
		b, appeared := batchOf[p]
		switch {
		case m.hookForgot[p]:
			m.marked[p], m.forgotten[p] = false, true
		case m.hookMarked[p]:
			m.marked[p] = !(appeared && b > 0 && ok)
		case marked0[p]:
			m.marked[p] = appeared && !ok
		}
	}
	m.hookForgot, m.hookMarked = [machineParts]bool{}, [machineParts]bool{}
}

// check compares the committer's marks with the model's and checks no wait was answered
// that the model does not expect.
func (m *machine) check(t *rapid.T) {
	var got [machineParts]bool
	m.c.mu.Lock()
	for p := range int32(machineParts) {
		pt := m.c.parts[key{"m", p}]
		got[p] = pt != nil && pt.marked
	}
	nmarked := m.c.nmarked
	m.c.mu.Unlock()
	n := 0
	for p := range int32(machineParts) {
		require.Equal(t, m.marked[p], got[p], "m/%d marked", p)
		if got[p] {
			n++
		}
	}
	require.Equal(t, n, nmarked)
	for _, w := range m.waits {
		got, err := w.w.answered()
		require.False(t, got, "wait of m/%d answered unexpectedly: %v", w.p, err)
	}
	require.Zero(t, m.store.overlaps.Load())
	require.Zero(t, m.src.overlaps.Load())
}

// close closes the committer: every wait is answered, nil when its partition was saved,
// ErrShardGone when its source is gone, ErrClosed joined with the store's error otherwise.
func (m *machine) close(t *rapid.T) {
	err := m.c.Close()
	anySaved := false
	for p := range int32(machineParts) {
		anySaved = anySaved || m.marked[p] && m.present[p]
	}
	if m.failing && anySaved {
		require.ErrorIs(t, err, errStore)
	} else {
		require.NoError(t, err)
	}
	m.settle(func(w *mwait) (bool, func(error)) {
		switch {
		case !m.present[w.p]:
			return true, m.answeredGone(w)
		case m.failing:
			return true, func(err error) {
				require.ErrorIs(t, err, offsets.ErrClosed)
				require.ErrorIs(t, err, errStore)
			}
		default:
			return true, m.answeredNil(w)
		}
	})
	for p := range int32(machineParts) {
		if m.present[p] && m.marked[p] && !m.failing {
			f, ok := m.store.stored(t, "m", p)
			require.True(t, ok)
			require.Equal(t, m.ver[p], f, "m/%d: Close saved the source's state", p)
			st, err := m.c.Load("m", p)
			require.NoError(t, err)
			require.True(t, st.Found)
			require.Equal(t, m.ver[p], st.Frontier)
		}
	}
	require.ErrorIs(t, m.c.Durable(context.Background(), "m", 0), offsets.ErrClosed)
}

func TestCommitterModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rapid.SyncTest(t, func(t *rapid.T) {
			m := newMachine(t)
			closed := false
			defer func() {
				if !closed { // a failed step: answer the waits, so the bubble can end
					m.store.onSave = nil
					m.c.Close()
				}
			}()
			t.Repeat(map[string]func(*rapid.T){
				"mark":           m.actMark,
				"change":         m.actChange,
				"create":         m.actCreate,
				"durable":        m.actDurable,
				"cancel":         m.actCancel,
				"forget":         m.actForget,
				"toggle failure": m.actToggleFailure,
				"save":           m.actSave,
				"":               m.check,
			})
			closed = true
			m.close(t)
		})
	})
}
