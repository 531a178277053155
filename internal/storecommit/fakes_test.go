package storecommit

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/internal/handoff"
	"narad.dev/consume/offsets"
)

// fakeSource is a Source over a map of states the test sets. It counts calls that overlap
// (the node's Source is called one at a time) and, as the node's does, fills the caller's
// buffers, so a committer that kept them past the call would see them change.
type fakeSource struct {
	mu       sync.Mutex
	states   map[key]offsets.State
	busy     atomic.Int32
	overlaps atomic.Int64
}

func newSource() *fakeSource { return &fakeSource{states: map[key]offsets.State{}} }

// set sets the partition's state; its incarnation is derived from the partition when unset.
func (s *fakeSource) set(topic string, p int32, st offsets.State) {
	if st.Incarnation == 0 {
		st.Incarnation = uint64(p) + 1000
	}
	s.mu.Lock()
	s.states[key{topic, p}] = st
	s.mu.Unlock()
}

// setFrontier sets a simple state at frontier f.
func (s *fakeSource) setFrontier(topic string, p int32, f int64) {
	s.set(topic, p, offsets.State{Frontier: f, Ahead: []offsets.Run{{First: f + 2, Last: f + 2}}})
}

// frontier returns the partition's frontier now.
func (s *fakeSource) frontier(topic string, p int32) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.states[key{topic, p}].Frontier
}

// bump advances the partition's frontier by one.
func (s *fakeSource) bump(topic string, p int32) {
	s.setFrontier(topic, p, s.frontier(topic, p)+1)
}

func (s *fakeSource) drop(topic string, p int32) {
	s.mu.Lock()
	delete(s.states, key{topic, p})
	s.mu.Unlock()
}

func (s *fakeSource) State(topic string, p int32, into *offsets.State) bool {
	if s.busy.Add(1) > 1 {
		s.overlaps.Add(1)
	}
	defer s.busy.Add(-1)
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[key{topic, p}]
	if !ok {
		return false
	}
	into.Frontier, into.Incarnation, into.HostIncarnation = st.Frontier, st.Incarnation, st.HostIncarnation
	into.Fence, into.Epoch = st.Fence, st.Epoch
	into.Ahead = append(into.Ahead[:0], st.Ahead...)
	into.Attempts = append(into.Attempts[:0], st.Attempts...)
	into.KeyTails = append(into.KeyTails[:0], st.KeyTails...)
	into.Quarantine = append(into.Quarantine[:0], st.Quarantine...)
	into.Requeued = append(into.Requeued[:0], st.Requeued...)
	return true
}

// saveCall is one Save the fake store took.
type saveCall struct {
	start, end time.Time
	entries    []Entry
	err        error // what it returned
	ctxErr     error // its context's error when it returned
	done       bool
}

func (c saveCall) partitions() []int32 {
	out := make([]int32, len(c.entries))
	for i, e := range c.entries {
		out[i] = e.Partition
	}
	return out
}

// fakeStore is a Store that records every Save and counts Saves that overlap. A Save waits
// delay, then (while gate is set) for a value on gate, each honouring its context, then
// fails with fail if set; otherwise it stores the batch.
type fakeStore struct {
	mu      sync.Mutex
	data    map[key][]byte
	calls   []saveCall
	fail    error
	delay   time.Duration
	gate    chan struct{}
	loadErr error
	onSave  func(batch []Entry)       // called inside Save, before it waits
	refuse  func(batch []Entry) error // called after the waits: a refusal of the batch, or nil

	busy     atomic.Int32
	overlaps atomic.Int64
}

func newStore() *fakeStore { return &fakeStore{data: map[key][]byte{}} }

// methods is the Store of s's methods, as router hands the committer a StateStore's.
func (s *fakeStore) methods() Store { return Store{Load: s.Load, Save: s.Save, Delete: s.Delete} }

func (s *fakeStore) Load(ctx context.Context, topic string, p int32) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loadErr != nil {
		return nil, s.loadErr
	}
	return slices.Clone(s.data[key{topic, p}]), nil
}

func (s *fakeStore) Save(ctx context.Context, batch []Entry) error {
	if s.busy.Add(1) > 1 {
		s.overlaps.Add(1)
	}
	defer s.busy.Add(-1)
	entries := make([]Entry, len(batch))
	for i, e := range batch {
		entries[i] = Entry{Topic: e.Topic, Partition: e.Partition, State: slices.Clone(e.State), Epoch: e.Epoch}
	}
	s.mu.Lock()
	i := len(s.calls)
	s.calls = append(s.calls, saveCall{start: time.Now(), entries: entries})
	delay, gate, onSave, refuse := s.delay, s.gate, s.onSave, s.refuse
	s.mu.Unlock()
	if onSave != nil {
		onSave(batch)
	}
	err := func() error {
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if refuse != nil {
			if err := refuse(entries); err != nil {
				return err
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.fail
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.calls[i]
	c.end, c.err, c.ctxErr, c.done = time.Now(), err, ctx.Err(), true
	if err == nil {
		for _, e := range entries {
			s.data[key{e.Topic, e.Partition}] = e.State
		}
	}
	return err
}

func (s *fakeStore) Delete(ctx context.Context, topic string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.data {
		if k.topic == topic {
			delete(s.data, k)
		}
	}
	return s.fail
}

func (s *fakeStore) saves() []saveCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *fakeStore) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// setGate makes every Save from now on wait for a value on the returned channel.
func (s *fakeStore) setGate() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
	return s.gate
}

// openGate releases every Save waiting on the gate and stops gating.
func (s *fakeStore) openGate() {
	s.mu.Lock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
	s.mu.Unlock()
}

func (s *fakeStore) bytesOf(topic string, p int32) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data[key{topic, p}]
}

func (s *fakeStore) setBytes(topic string, p int32, b []byte) {
	s.mu.Lock()
	s.data[key{topic, p}] = b
	s.mu.Unlock()
}

// stored decodes what the store holds for the partition; ok is false when it holds nothing.
// fataler is what the helpers ask of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func (s *fakeStore) stored(t fataler, topic string, p int32) (frontier int64, ok bool) {
	t.Helper()
	b := s.bytesOf(topic, p)
	if b == nil {
		return 0, false
	}
	return decodeFrontier(t, b), true
}

func decodeFrontier(t fataler, b []byte) int64 {
	t.Helper()
	hp, err := handoff.Decode(b, time.Time{})
	if err != nil {
		t.Fatalf("the store holds bytes that do not decode: %v", err)
	}
	return hp.State.Frontier
}

// countingClock is the time package's clock (synctest's, in a bubble) counting the timers
// armed now and those that fired.
type countingClock struct{ live, fired atomic.Int64 }

func (c *countingClock) Now() time.Time { return time.Now() }

func (c *countingClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.live.Add(1)
	tm := time.AfterFunc(d, func() {
		c.live.Add(-1)
		c.fired.Add(1)
		f()
	})
	return func() bool {
		if tm.Stop() {
			c.live.Add(-1)
			return true
		}
		return false
	}
}

// harness is a committer over a fake store and source.
type harness struct {
	t     *testing.T
	src   *fakeSource
	store *fakeStore
	c     *Committer
}

func newHarness(t *testing.T, cfg Config) *harness {
	h := &harness{t: t, src: newSource(), store: newStore()}
	cfg.Store, cfg.Source = h.store.methods(), h.src
	h.c = New(cfg)
	t.Cleanup(func() {
		h.store.openGate()
		h.store.setFail(nil)
		h.c.Close()
		if n := h.store.overlaps.Load(); n > 0 {
			t.Errorf("%d Saves overlapped", n)
		}
		if n := h.src.overlaps.Load(); n > 0 {
			t.Errorf("%d Source calls overlapped", n)
		}
	})
	return h
}

// run starts Run on clk; it stops at the test's end, before the committer closes.
func (h *harness) run(clk offsets.Clock) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.c.Run(ctx, clk) }()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Run: %v", err)
		}
	})
}

// wait is a Durable call in its own goroutine.
type wait struct {
	ch     chan error
	err    error
	done   bool
	cancel context.CancelFunc
}

func goDurable(c *Committer, topic string, p int32) *wait {
	ctx, cancel := context.WithCancel(context.Background())
	w := &wait{ch: make(chan error, 1), cancel: cancel}
	go func() { w.ch <- c.Durable(ctx, topic, p) }()
	return w
}

// answered reports whether the wait returned, and what.
func (w *wait) answered() (bool, error) {
	if !w.done {
		select {
		case w.err = <-w.ch:
			w.done = true
			w.cancel()
		default:
		}
	}
	return w.done, w.err
}
