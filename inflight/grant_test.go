package inflight

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// A shard whose grant lapsed is frozen from the instant it lapses, on the now of each call:
// no lease, no settle (ErrMoved, nothing changed), no requeue, no expiry; Renew thaws it, and
// what it held is as it was.
func TestLapsedGrantFreezesTheShard(t *testing.T) {
	start := time.Unix(1000, 0)
	until := start.Add(5 * time.Second)
	s := NewShard("t", 0, Options{Config: Config{VisibilityTimeout: time.Minute}},
		State{Frontier: -1, Epoch: 3, GrantUntil: until})
	require.Equal(t, uint64(3), s.Epoch())
	a, err := s.ReserveNext(start, 10)
	require.NoError(t, err)
	b, err := s.ReserveNext(start, 10)
	require.NoError(t, err)
	q, err := s.ReserveNext(start, 10)
	require.NoError(t, err)
	require.NoError(t, s.Reject(start, q.Handle))

	assert.False(t, s.Lapsed(until.Add(-1)))
	require.True(t, s.Lapsed(until))
	cases := map[string]func() error{
		"ack":    func() error { return s.Ack(until, a.Handle) },
		"extend": func() error { _, err := s.Extend(until, a.Handle, time.Minute); return err },
		"nack":   func() error { return s.Nack(until, a.Handle, 0) },
		"give back": func() error {
			return s.GiveBack(until, a.Handle)
		},
		"reject":  func() error { return s.Reject(until, a.Handle) },
		"reserve": func() error { _, err := s.ReserveNext(until, 10); return err },
		"ack many": func() error {
			errs := make([]error, 2)
			s.AckMany(until, []Handle{a.Handle, b.Handle}, errs)
			assert.Equal(t, errs[0], errs[1])
			return errs[0]
		},
	}
	for name, op := range cases {
		assert.ErrorIs(t, op(), ErrMoved, name)
	}
	assert.False(t, s.Requeue(until, q.Offset), "no requeue under a lapsed grant")
	assert.Zero(t, s.RequeueAll(until))
	assert.False(t, s.Discard(until, q.Offset), "no discard under a lapsed grant")
	assert.Equal(t, []int64{q.Offset}, s.Quarantined(), "still quarantined")
	assert.Zero(t, s.Purge(until.Add(time.Hour)), "nothing expires while frozen")
	st := s.Stats()
	assert.Equal(t, int64(-1), st.Frontier)
	assert.Equal(t, 2, st.Leased, "both leases as they were")

	s.Renew(until.Add(-time.Second))
	assert.True(t, s.Lapsed(until), "a renewal never shortens the grant")
	s.Renew(until.Add(time.Minute))
	require.False(t, s.Lapsed(until))
	require.NoError(t, s.Ack(until, a.Handle), "thawed: the live lease settles")
	assert.Equal(t, 1, s.Purge(until.Add(56*time.Second)), "b's lease expires, within the renewed grant")
}

// A shard with no grant in time never lapses, and Renew leaves it so. Snapshot reports the
// epoch and the fence, not the grant's end (memory only).
func TestNoGrantNeverLapses(t *testing.T) {
	s := NewShard("t", 0, Options{}, State{Frontier: -1, Epoch: 9, Fence: 100})
	s.Renew(time.Unix(1, 0))
	assert.False(t, s.Lapsed(time.Unix(1<<40, 0)))
	lease, err := s.ReserveNext(time.Unix(0, 50), 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(101), lease.Fence, "above the restored fence")
	var st State
	s.Snapshot(&st)
	assert.Equal(t, uint64(9), st.Epoch)
	assert.Equal(t, uint64(101), st.Fence)
	assert.True(t, st.GrantUntil.IsZero())
}

// The purger asks the Lapsed hook about a lapsed shard and purges it only once renewed; a
// lapsed shard's deadlines do not count.
func TestPurgeAsksAboutLapsedShards(t *testing.T) {
	start := time.Unix(1000, 0)
	var asked []int32
	var tr *Tracker
	renew := true
	tr = NewTracker(TrackerConfig{
		Load: func(_ string, p int32) (State, error) {
			return State{Frontier: -1, GrantUntil: start.Add(time.Second)}, nil
		},
		Hooks: Hooks{Lapsed: func(topic string, p int32) {
			asked = append(asked, p)
			if s, ok := tr.Lookup(topic, p); ok && renew {
				s.Renew(start.Add(time.Hour))
			}
		}},
	})
	s, err := tr.Shard("t", 0)
	require.NoError(t, err)
	_, err = s.ReserveNextFor(start, 5, 2*time.Second)
	require.NoError(t, err)
	released, _ := tr.Purge(start.Add(3 * time.Second))
	assert.Equal(t, []int32{0}, asked)
	assert.Equal(t, 1, released, "renewed, then purged")

	renew = false
	s.Renew(start) // no-op: a renewal never shortens
	tr2 := NewTracker(TrackerConfig{Load: func(string, int32) (State, error) {
		return State{Frontier: -1, GrantUntil: start.Add(time.Second)}, nil
	}})
	s2, err := tr2.Shard("t", 1)
	require.NoError(t, err)
	_, err = s2.ReserveNextFor(start, 5, 2*time.Second)
	require.NoError(t, err)
	released, next := tr2.Purge(start.Add(3 * time.Second))
	assert.Zero(t, released, "frozen: nothing expires")
	assert.True(t, next.IsZero(), "a lapsed shard's deadline does not wake the purger")
}

// A property against a simple model: a shard under a grant behaves exactly as a twin with no
// grant while the grant holds; from its lapse to its renewal every op answers ErrMoved and its
// state stays as it was (the twin sits those ops out); once renewed the two go on alike.
func TestLapsedIsFrozenProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		start := time.Unix(1000, 0)
		now := start
		seed := [32]byte{1, byte(rapid.IntRange(0, 255).Draw(t, "seed"))} // never zero: a zero seed is crypto/rand's
		cfg := Config{VisibilityTimeout: 10 * time.Second, MaxInFlight: 4}
		granted := NewShard("g", 0, Options{Config: cfg, Seed: seed}, State{Frontier: -1, GrantUntil: start.Add(time.Minute)})
		twin := NewShard("g", 0, Options{Config: cfg, Seed: seed}, State{Frontier: -1})
		var leases []Lease
		hwm := int64(0)
		t.Repeat(map[string]func(*rapid.T){
			"produce": func(t *rapid.T) { hwm += int64(rapid.IntRange(1, 3).Draw(t, "n")) },
			"time": func(t *rapid.T) {
				now = now.Add(rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second, 11 * time.Second}).Draw(t, "step"))
			},
			// The host renews the grant now and then; time passing without it lapses the grant.
			"renew": func(t *rapid.T) {
				granted.Renew(now.Add(rapid.SampledFrom([]time.Duration{time.Second, 20 * time.Second}).Draw(t, "left")))
			},
			"reserve": func(t *rapid.T) {
				got, err := granted.ReserveNext(now, hwm)
				if granted.Lapsed(now) {
					if !errors.Is(err, ErrMoved) {
						t.Fatalf("reserve under a lapsed grant: %v", err)
					}
					return
				}
				want, werr := twin.ReserveNext(now, hwm)
				if !errors.Is(err, werr) || got != want {
					t.Fatalf("reserve: %+v %v, twin %+v %v", got, err, want, werr)
				}
				if err == nil {
					leases = append(leases, got)
				}
			},
			"settle": func(t *rapid.T) {
				if len(leases) == 0 {
					t.Skip("no lease")
				}
				h := leases[rapid.IntRange(0, len(leases)-1).Draw(t, "lease")].Handle
				op := rapid.IntRange(0, 2).Draw(t, "op")
				do := func(s *Shard) error {
					switch op {
					case 0:
						return s.Ack(now, h)
					case 1:
						return s.Nack(now, h, 0)
					}
					_, err := s.Extend(now, h, 0)
					return err
				}
				err := do(granted)
				if granted.Lapsed(now) {
					if !errors.Is(err, ErrMoved) {
						t.Fatalf("settle under a lapsed grant: %v", err)
					}
					return
				}
				if werr := do(twin); !errors.Is(err, werr) {
					t.Fatalf("settle: %v, twin %v", err, werr)
				}
			},
			"": func(t *rapid.T) {
				var a, b State
				granted.Snapshot(&a)
				twin.Snapshot(&b)
				if a.Frontier != b.Frontier || !slices.Equal(a.AckedAhead, b.AckedAhead) || granted.Stats() != twin.Stats() {
					t.Fatalf("granted %+v %+v, twin %+v %+v", a, granted.Stats(), b, twin.Stats())
				}
			},
		})
	})
}
