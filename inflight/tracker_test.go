package inflight

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/partitionmap"
)

func TestTrackerLazyCreateRestores(t *testing.T) {
	var loads []string
	tr := NewTracker(TrackerConfig{
		Load: func(topic string, p int32) (State, error) {
			loads = append(loads, fmt.Sprintf("%s/%d", topic, p))
			return State{Frontier: 41, AckedAhead: []Run{{43, 43}}}, nil
		},
		Topic: func(topic string) Config { return Config{MaxInFlight: 1} },
	})
	_, ok := tr.Lookup("orders", 2)
	assert.False(t, ok, "Lookup never creates")
	s, err := tr.Shard("orders", 2)
	require.NoError(t, err)
	again, err := tr.Shard("orders", 2)
	require.NoError(t, err)
	assert.Same(t, s, again)
	assert.Equal(t, []string{"orders/2"}, loads, "state is read once, at first touch")
	assert.Equal(t, Stats{Frontier: 41, AckedAhead: 1, AckedAheadRuns: 1}, s.Stats())
	l, err := s.ReserveNext(epoch, 100)
	require.NoError(t, err)
	assert.Equal(t, int64(42), l.Offset)
	_, err = s.ReserveNext(epoch, 100)
	assert.ErrorIs(t, err, ErrInFlightCap, "the topic's settings apply")
	assert.Equal(t, uint64(1), tr.Counters().Load().Delivered, "shards count into the tracker")
}

// A shard loaded from persisted state is reported dirty once it is stored, so the committer
// makes what it was loaded from durable.
func TestTrackerReportsLoadedShardDirty(t *testing.T) {
	var dirty []string
	var tr *Tracker
	tr = NewTracker(TrackerConfig{
		Load: func(string, int32) (State, error) { return State{Frontier: 3}, nil },
		Hooks: Hooks{Dirty: func(topic string, p int32) {
			_, stored := tr.Lookup(topic, p)
			require.True(t, stored, "reported after the shard is stored")
			dirty = append(dirty, fmt.Sprintf("%s/%d", topic, p))
		}},
	})
	_, err := tr.Shard("t", 1)
	require.NoError(t, err)
	_, err = tr.Shard("t", 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"t/1"}, dirty)
}

func TestTrackerLoadError(t *testing.T) {
	boom := errors.New("disk on fire")
	tr := NewTracker(TrackerConfig{Load: func(string, int32) (State, error) { return State{}, boom }})
	_, err := tr.Shard("t", 0)
	assert.ErrorIs(t, err, boom)
	assert.Zero(t, tr.Len(), "a failed create stores nothing")
}

func TestTrackerDefaultStateAndSeeds(t *testing.T) {
	seeds := bytes.NewReader(make([]byte, 64))
	tr := NewTracker(TrackerConfig{Seeds: seeds})
	s, err := tr.Shard("t", 0)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), s.Stats().Frontier)
	_, err = tr.Shard("t", 1)
	require.NoError(t, err)
	_, err = tr.Shard("t", 2)
	assert.ErrorContains(t, err, "seed", "an exhausted seed source fails the create")
}

// Checklist 36: every drop forgets, and a dropped shard settles nothing.
func TestTrackerDrop(t *testing.T) {
	var forgotten []string
	tr := NewTracker(TrackerConfig{Forget: func(topic string, p int32) {
		forgotten = append(forgotten, fmt.Sprintf("%s/%d", topic, p))
	}})
	a0, _ := tr.Shard("a", 0)
	_, _ = tr.Shard("a", 1)
	_, _ = tr.Shard("b", 0)
	l, err := a0.ReserveNext(epoch, 10)
	require.NoError(t, err)

	tr.Drop("a", 0)
	tr.Drop("z", 9) // not held: still forgotten, a move's reset may come first
	assert.ErrorIs(t, a0.Ack(epoch, l.Handle), ErrGone)
	tr.DropTopic("a")
	assert.ElementsMatch(t, []string{"a/0", "z/9", "a/1"}, forgotten)
	assert.Equal(t, 1, tr.Len())
	fresh, _ := tr.Shard("a", 0)
	assert.NotSame(t, a0, fresh, "a recreated topic gets its successor's shard (checklist 1)")
}

// A depose drops the shard its caller found stale and no other: one that comes after
// another caller deposed that shard and the partition was loaded again leaves the new shard,
// its leases and its committer's state (Forget) alone.
func TestTrackerDeposeOnlyThatShard(t *testing.T) {
	var forgotten []string
	tr := NewTracker(TrackerConfig{Forget: func(topic string, p int32) {
		forgotten = append(forgotten, fmt.Sprintf("%s/%d", topic, p))
	}})
	stale, _ := tr.Shard("a", 0)
	staleLease, err := stale.ReserveNext(epoch, 10)
	require.NoError(t, err)
	require.True(t, tr.Depose(stale))
	assert.ErrorIs(t, stale.Ack(epoch, staleLease.Handle), ErrMoved, "a deposed shard's lease may live on at the owner")

	fresh, _ := tr.Shard("a", 0)
	l, err := fresh.ReserveNext(epoch, 10)
	require.NoError(t, err)
	assert.False(t, tr.Depose(stale), "the late caller's shard is gone already")
	held, ok := tr.Lookup("a", 0)
	assert.True(t, ok)
	assert.Same(t, fresh, held)
	assert.NoError(t, fresh.Ack(epoch, l.Handle), "the new shard and its lease live on")
	assert.Equal(t, []string{"a/0"}, forgotten, "forgotten once, for the stale shard")
}

// Checklist 35: a drop waits for a create that is already reading, and the create's shard is
// dropped with it.
func TestTrackerCreateFence(t *testing.T) {
	for range 20 {
		var loading atomic.Bool
		var violated atomic.Bool
		var wg sync.WaitGroup
		var tr *Tracker
		tr = NewTracker(TrackerConfig{
			Load: func(string, int32) (State, error) {
				loading.Store(true)
				wg.Add(1)
				go func() { defer wg.Done(); tr.Drop("t", 0) }()
				for range 1000 {
					runtime.Gosched() // give the drop every chance to overtake the create
				}
				loading.Store(false)
				return State{Frontier: -1}, nil
			},
			Forget: func(string, int32) { violated.CompareAndSwap(false, loading.Load()) },
		})
		_, err := tr.Shard("t", 0)
		require.NoError(t, err)
		wg.Wait()
		require.False(t, violated.Load(), "the drop ran while a create was reading")
		_, ok := tr.Lookup("t", 0)
		require.False(t, ok, "the create stored before the drop and was dropped with it")
	}
}

func TestTrackerPurge(t *testing.T) {
	var wakes atomic.Int32
	tr := NewTracker(TrackerConfig{Hooks: Hooks{Wake: func(string, int32) { wakes.Add(1) }}})
	for p := range int32(3) {
		s, _ := tr.Shard("t", p)
		_, err := s.ReserveNext(epoch, 10)
		require.NoError(t, err)
	}
	n, next := tr.Purge(epoch)
	assert.Zero(t, n)
	assert.Equal(t, epoch.Add(DefaultVisibilityTimeout), next, "the earliest deadline left")
	n, next = tr.Purge(epoch.Add(DefaultVisibilityTimeout))
	assert.Equal(t, 3, n)
	assert.True(t, next.IsZero())
	assert.Equal(t, int32(3), wakes.Load(), "each shard reports its own wake")
}

// Concurrent consumers on shared shards, under -race: every lease is settled exactly once.
func TestTrackerConcurrentUse(t *testing.T) {
	tr := NewTracker(TrackerConfig{})
	const workers, perWorker = 4, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				s, err := tr.Shard("t", int32(i%2))
				if err != nil {
					t.Error(err)
					return
				}
				l, err := s.ReserveNext(epoch, 1<<20)
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.Ack(epoch, l.Handle); err != nil {
					t.Errorf("worker %d: %v", w, err)
				}
			}
		}()
	}
	wg.Wait()
	c := tr.Counters().Load()
	assert.Equal(t, uint64(workers*perWorker), c.Acked)
	s0, _ := tr.Lookup("t", 0)
	s1, _ := tr.Lookup("t", 1)
	assert.Equal(t, int64(workers*perWorker-2), s0.Stats().Frontier+s1.Stats().Frontier)
}

func TestTrackerReconfigure(t *testing.T) {
	caps := map[string]int{"t": 1}
	tr := NewTracker(TrackerConfig{Topic: func(topic string) Config { return Config{MaxInFlight: caps[topic]} }})
	s, err := tr.Shard("t", 0)
	require.NoError(t, err)
	_, err = s.ReserveNext(epoch, 10)
	require.NoError(t, err)
	_, err = s.ReserveNext(epoch, 10)
	assert.ErrorIs(t, err, ErrInFlightCap)
	caps["t"] = 2
	tr.Reconfigure("t")
	_, err = s.ReserveNext(epoch, 10)
	assert.NoError(t, err, "the new cap applies to the live shard")
}

// Shards of any partition number, dense from zero or not, are found, counted, purged,
// dropped one at a time and with their topic, and never found under another topic.
func TestTrackerPartitionNumbers(t *testing.T) {
	tr := NewTracker(TrackerConfig{})
	partitions := []int32{0, 7, partitionmap.DenseLimit - 1, partitionmap.DenseLimit, 1 << 30, -1}
	shards := map[int32]*Shard{}
	for _, p := range partitions {
		s, err := tr.Shard("a", p)
		require.NoError(t, err)
		shards[p] = s
		_, err = tr.Shard("b", p)
		require.NoError(t, err)
	}
	assert.Equal(t, 2*len(partitions), tr.Len())
	for _, p := range partitions {
		s, ok := tr.Lookup("a", p)
		require.True(t, ok, "partition %d", p)
		assert.Same(t, shards[p], s)
		other, _ := tr.Lookup("b", p)
		assert.NotSame(t, s, other)
	}
	for _, p := range []int32{1, 6, 8, partitionmap.DenseLimit + 1, math.MaxInt32, math.MinInt32} {
		_, ok := tr.Lookup("a", p)
		assert.False(t, ok, "partition %d", p)
	}
	for _, p := range partitions {
		_, err := shards[p].ReserveNext(epoch, 1)
		require.NoError(t, err)
	}
	released, _ := tr.Purge(epoch.Add(DefaultVisibilityTimeout))
	assert.Equal(t, len(partitions), released, "the purge visits every shard")

	tr.Drop("a", 7)
	tr.Drop("a", 1<<30)
	tr.Drop("a", 7) // dropped already
	_, ok := tr.Lookup("a", 7)
	assert.False(t, ok)
	_, ok = tr.Lookup("a", 1<<30)
	assert.False(t, ok)
	assert.Equal(t, 2*len(partitions)-2, tr.Len())
	assert.ErrorIs(t, shards[7].Ack(epoch, Handle{Partition: 7, Nonce: 1}), ErrGone, "a dropped shard settles nothing")

	require.NoError(t, tr.DropTopic("a"))
	assert.Equal(t, len(partitions), tr.Len())
	for _, p := range partitions {
		_, ok := tr.Lookup("a", p)
		assert.False(t, ok, "partition %d", p)
		_, ok = tr.Lookup("b", p)
		assert.True(t, ok, "partition %d", p)
	}
	again, err := tr.Shard("a", 0)
	require.NoError(t, err)
	assert.NotSame(t, shards[0], again, "a dropped topic's partition gets a new shard")
}

// LookupIn finds, through a generation, what Lookup finds by name: shards created through
// it or by name, none once dropped, and after a delete and recreate the old generation
// reports it ended whatever the lookup found, while the new one finds the new shards.
func TestTrackerLookupIn(t *testing.T) {
	tr := NewTracker(TrackerConfig{})
	gen := tr.Generation("a")
	_, ok := tr.LookupIn(gen, 0)
	assert.False(t, ok, "nothing created yet")

	viaGen, err := tr.ShardIn(gen, 0)
	require.NoError(t, err)
	byName, err := tr.Shard("a", 5000) // past the slice: in the map
	require.NoError(t, err)
	for p, want := range map[int32]*Shard{0: viaGen, 5000: byName} {
		got, ok := tr.LookupIn(gen, p)
		require.True(t, ok, "partition %d", p)
		assert.Same(t, want, got, "partition %d", p)
	}
	_, ok = tr.LookupIn(gen, 1)
	assert.False(t, ok)

	tr.Drop("a", 0)
	_, ok = tr.LookupIn(gen, 0)
	assert.False(t, ok, "a dropped partition is not found through the generation")
	assert.False(t, gen.Ended(), "dropping a partition does not end the topic")

	require.NoError(t, tr.DropTopic("a"))
	assert.True(t, gen.Ended())
	_, ok = tr.LookupIn(gen, 5000)
	assert.False(t, ok, "a dropped topic's shards are not found through its generation")
	_, err = tr.ShardIn(gen, 0)
	assert.ErrorIs(t, err, ErrTopicDropped)

	next := tr.Generation("a")
	require.NotSame(t, gen, next)
	recreated, err := tr.ShardIn(next, 0)
	require.NoError(t, err)
	got, ok := tr.LookupIn(next, 0)
	require.True(t, ok)
	assert.Same(t, recreated, got)
	assert.True(t, gen.Ended(), "the old generation stays ended, whatever a lookup through it finds")
}

// Install replaces a partition's shard with one restored from a given state: the old shard
// is dropped (its handles ErrGone) and forgotten, reset runs inside the create fence (no
// create reads meanwhile), the new shard is stored and reported dirty; after DropTopic it
// answers ErrTopicDropped and stores nothing.
func TestTrackerInstall(t *testing.T) {
	var forgot, dirty []int32
	var tr *Tracker
	loads := 0
	tr = NewTracker(TrackerConfig{
		Load:   func(string, int32) (State, error) { loads++; return State{Frontier: 1}, nil },
		Forget: func(_ string, p int32) { forgot = append(forgot, p) },
		Hooks:  Hooks{Dirty: func(_ string, p int32) { dirty = append(dirty, p) }},
	})
	old, err := tr.Shard("t", 0)
	require.NoError(t, err)
	lease, err := old.ReserveNext(epoch, 10)
	require.NoError(t, err)
	dirty = nil

	g := tr.Generation("t")
	created := make(chan *Shard)
	fresh, err := tr.Install(g, 0, State{Frontier: 5, Incarnation: 9}, func() error {
		go func() { s, _ := tr.Shard("t", 0); created <- s }() // waits for the fence
		return nil
	})
	require.NoError(t, err)
	assert.Same(t, fresh, <-created, "a create racing the install finds the installed shard")
	assert.Equal(t, 1, loads, "nothing read the files between the reset and the install")
	assert.Equal(t, []int32{0}, forgot)
	assert.Equal(t, []int32{0}, dirty)
	assert.Equal(t, uint64(9), fresh.Incarnation())
	assert.Equal(t, int64(5), fresh.Stats().Frontier)
	assert.ErrorIs(t, old.Ack(epoch, lease.Handle), ErrGone, "the old shard was dropped")

	failed := errors.New("reset failed")
	_, err = tr.Install(g, 1, State{Frontier: 5}, func() error { return failed })
	assert.ErrorIs(t, err, failed)
	_, ok := tr.Lookup("t", 1)
	assert.False(t, ok, "nothing stored")

	require.NoError(t, tr.DropTopic("t"))
	_, err = tr.Install(g, 0, State{Frontier: 5}, nil)
	assert.ErrorIs(t, err, ErrTopicDropped)
	_, ok = tr.Lookup("t", 0)
	assert.False(t, ok)
}
