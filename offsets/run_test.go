package offsets

import (
	"context"
	"io/fs"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is a Clock whose Now advances by a scripted step per call, and whose AfterFunc
// timers fire only when the test says so. armed receives each new timer's duration.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	steps []time.Duration
	timer func()
	armed chan time.Duration
}

func newFakeClock(steps ...time.Duration) *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), steps: steps,
		armed: make(chan time.Duration, 16)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.steps) > 0 {
		c.now = c.now.Add(c.steps[0])
		c.steps = c.steps[1:]
	}
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.timer = f
	c.mu.Unlock()
	c.armed <- d
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		stopped := c.timer != nil
		c.timer = nil
		return stopped
	}
}

// fire advances to the armed timer and runs it.
func (c *fakeClock) fire(d time.Duration) {
	c.mu.Lock()
	f := c.timer
	c.timer = nil
	c.now = c.now.Add(d)
	c.mu.Unlock()
	f()
}

// Checklist items 69, 70: a tick that takes longer than T makes the next one start at once and
// is warned about, at most once a minute, with the spec's fields; a tick that primed does not
// count. Run returns nil when its context ends, and leaves nothing running.
func TestRunOverrun(t *testing.T) {
	gated := &syncGateFS{FS: OS(), gate: make(chan struct{})}
	h := newDiskHarness(t, func(c *Config) { c.FS = gated })
	h.create("t", 0)
	// Primed before Run, and the writeout under Run held at its sync until the end: a prime
	// or a writeout ending under Run would start a tick at once or leave none to arm a timer,
	// at moments the test does not control.
	h.ack("t", 0, 0)
	h.ticks(3)
	gated.hold.Store(true)
	release := sync.OnceFunc(func() { close(gated.gate) })
	defer release() // before the harness's Close, which waits for the writeout
	h.ack("t", 0, 1)
	ticked := h.c.Stats().Ticks
	const slow = 150 * time.Millisecond
	// Two Now calls per tick (start, end): ticks 1 to 3 take 150 ms, later ones nothing.
	clk := newFakeClock(0, slow, 0, slow, 0, slow)
	clk.now = h.now
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.c.Run(ctx, clk) }()

	require.Equal(t, 100*time.Millisecond, <-clk.armed, "the first timer comes after tick 4")
	s := h.c.Stats()
	require.Equal(t, ticked+4, s.Ticks, "ticks 2 to 4 started at once")
	require.Equal(t, uint64(3), s.Overruns)
	h.c.afterTick(clk.Now(), 2*slow, tickReport{primed: true}, nil)
	require.Equal(t, uint64(3), h.c.Stats().Overruns, "a tick that primed is not an overrun")
	lines := h.logs.Lines("consumer offset commits cannot keep to their interval: " +
		"persisted offsets lag acks by about the flush time")
	require.Len(t, lines, 1, "at most one warning a minute")
	require.Equal(t, slow, lines[0]["flush_took"].Duration())
	require.Equal(t, 100*time.Millisecond, lines[0]["interval"].Duration())
	require.Contains(t, lines[0], "partitions")

	clk.fire(100 * time.Millisecond)
	require.Equal(t, 100*time.Millisecond, <-clk.armed)
	require.Equal(t, ticked+5, h.c.Stats().Ticks)

	release()
	cancel()
	require.NoError(t, <-done)
}

// syncGateFS holds every SyncData, while hold is set, until gate is closed.
type syncGateFS struct {
	FS
	hold atomic.Bool
	gate chan struct{}
}

func (g *syncGateFS) OpenRoot(dir string) (Root, error) {
	r, err := g.FS.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return syncGateRoot{Root: r, g: g}, nil
}

type syncGateRoot struct {
	Root
	g *syncGateFS
}

func (r syncGateRoot) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := r.Root.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncGateFile{File: f, g: r.g}, nil
}

type syncGateFile struct {
	File
	g *syncGateFS
}

func (f syncGateFile) SyncData() error {
	if f.g.hold.Load() {
		<-f.g.gate
	}
	return f.File.SyncData()
}

// Run returns at once when the committer is closed under it.
func TestRunStopsOnClose(t *testing.T) {
	h := newDiskHarness(t, nil)
	h.create("t", 0)
	h.ack("t", 0, 0) // work, so that Run arms its timer (an idle one arms none)
	clk := newFakeClock()
	done := make(chan error, 1)
	go func() { done <- h.c.Run(context.Background(), clk) }()
	<-clk.armed
	require.NoError(t, h.c.Close())
	require.NoError(t, <-done)
}

// Checklist item 51: an acked-ahead set too large for a slot keeps its lowest offsets; the
// dropped ones are counted and logged (at most once a minute), and recovery returns a subset
// of what was acked.
func TestDroppedAheadIsCountedAndLogged(t *testing.T) {
	h := newDiskHarness(t, nil)
	h.create("t", 0)
	for o := int64(2); o < 20_000; o += 2 {
		h.ack("t", 0, o)
	}
	h.ticks(3)
	h.ack("t", 0, 20_002)
	h.ticks(3)
	require.NoError(t, h.c.Close())
	s := h.c.Stats()
	require.NotZero(t, s.DroppedAhead)
	lines := h.logs.Lines(msgDropped)
	require.Len(t, lines, 1)
	require.Equal(t, "t", lines[0]["topic"].String())
	require.NotZero(t, lines[0]["dropped"].Int64())

	st := h.load("t", 0)
	require.Equal(t, int64(-1), st.Frontier)
	require.Greater(t, len(st.Ahead), 1000)
	for i, o := range offsetsOf(st.Ahead) {
		require.Equal(t, int64(2+2*i), o, "the lowest offsets, in order")
	}
}

// Issue 5 and checklist item 51: when the sets do not fit, requeued offsets keep the room
// first; what is dropped from each set is counted and logged, requeued losses as an error.
func TestDroppedSetsAreCountedAndLogged(t *testing.T) {
	h := newDiskHarness(t, nil)
	h.create("t", 0)
	for o := int64(0); o < 12_000; o += 2 {
		h.shards.Deliver("t", 0, o)
		h.shards.Quarantine("t", 0, o)
		h.shards.Ack("t", 0, o+1) // the frontier passes over quarantined and acked offsets
	}
	for o := int64(12_000); o < 18_000; o += 2 {
		h.shards.Deliver("t", 0, o) // attempts of scattered unresolved offsets
	}
	st := h.shards.Snapshot("t", 0)
	require.Equal(t, int64(11_999), st.Frontier)
	for _, o := range st.Quarantine[:2500] {
		require.True(t, h.shards.Requeue("t", 0, o))
	}
	h.c.MarkDirty("t", 0)
	st = h.shards.Snapshot("t", 0)
	require.Len(t, st.Requeued, 2500, "more requeued offsets than a slot holds")
	require.Len(t, st.Quarantine, 3500)
	require.Len(t, st.Attempts, 3000)
	h.ticks(2)
	s := h.c.Stats()
	require.NotZero(t, s.DroppedRequeued)
	require.NotZero(t, s.DroppedQuarantine)
	require.NotZero(t, s.DroppedAttempts)
	require.Zero(t, s.DroppedAhead, "nothing acked ahead")
	lines := h.logs.Lines(msgDroppedRequeued)
	require.Len(t, lines, 1)
	require.NotZero(t, lines[0]["dropped"].Int64())
	require.Len(t, h.logs.Lines(msgDroppedSets), 1)
	h.ticks(2)
	require.Len(t, h.logs.Lines(msgDroppedRequeued), 1, "at most once a minute")

	require.NoError(t, h.c.Close())
	got := h.load("t", 0)
	require.Equal(t, st.Frontier, got.Frontier)
	require.Greater(t, len(got.Requeued), 1500)
	require.Equal(t, st.Requeued[:len(got.Requeued)], got.Requeued, "the lowest requeued offsets")
	require.Empty(t, got.Attempts, "no room left for attempts")
}

// cappedSource hands over at most MaxSlotAttempts attempts and counts the rest as omitted,
// as a Source with many leases held does.
type cappedSource struct{ *Shards }

func (s cappedSource) State(topic string, p int32, into *State) bool {
	ok := s.Shards.State(topic, p, into)
	if n := len(into.Attempts); n > MaxSlotAttempts {
		into.Attempts, into.OmittedAttempts = into.Attempts[:MaxSlotAttempts], n-MaxSlotAttempts
	}
	return ok
}

// A Source that leaves out the attempts no slot could hold (State.OmittedAttempts) gets the
// same record on disk, and the same count of dropped attempts, as one that hands them all.
func TestOmittedAttemptsAreCountedAsDropped(t *testing.T) {
	run := func(capped bool) (Stats, State, []map[string]slog.Value) {
		var h *diskHarness
		h = newDiskHarness(t, func(c *Config) {
			if capped {
				c.Source = cappedSource{c.Source.(*Shards)}
			}
		})
		h.create("t", 0)
		for o := int64(0); o < 3*MaxSlotAttempts; o++ {
			h.shards.Deliver("t", 0, o) // every offset held: more attempts than any slot holds
		}
		h.c.MarkDirty("t", 0)
		h.ticks(1)
		require.NoError(t, h.c.Close())
		return h.c.Stats(), h.load("t", 0), h.logs.Lines(msgDroppedSets)
	}
	allStats, allState, allLines := run(false)
	cappedStats, cappedState, cappedLines := run(true)
	require.Equal(t, uint64(3*MaxSlotAttempts-len(allState.Attempts)), allStats.DroppedAttempts)
	require.Equal(t, allStats.DroppedAttempts, cappedStats.DroppedAttempts)
	allState.Incarnation, cappedState.Incarnation = 0, 0 // each run's own
	require.True(t, reflect.DeepEqual(allState, cappedState), "the same record on disk")
	require.Len(t, cappedLines, 1)
	require.Equal(t, allLines[0]["attempts_kept"].Int64(), cappedLines[0]["attempts_kept"].Int64())
	require.Equal(t, int64(len(allState.Attempts)), cappedLines[0]["attempts_kept"].Int64())
}
