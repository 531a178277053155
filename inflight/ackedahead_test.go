package inflight

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 25: the acked-ahead cap counts runs, not offsets: a long run acked above one hole
// costs one run, and the partition keeps serving; at as many runs as the cap, only the
// frontier hole is handed out (checklist 23, 24).
func TestAckedAheadRunCap(t *testing.T) {
	s := NewShard("orders", 3, Options{Config: Config{MaxInFlight: 4096, MaxAckedAheadRuns: 2}}, State{Frontier: -1})
	var leases []Lease
	for range 3000 {
		leases = append(leases, reserve(t, s, epoch, 1<<20))
	}
	for _, l := range leases[1:2000] {
		require.NoError(t, s.Ack(epoch, l.Handle))
	}
	assert.Equal(t, Stats{Frontier: -1, Leased: 1001, AckedAhead: 1999, AckedAheadRuns: 1}, s.Stats())
	assert.Equal(t, int64(3000), reserve(t, s, epoch, 1<<20).Offset, "one hole below 1,999 acks: not a stall")

	require.NoError(t, s.Ack(epoch, leases[2001].Handle)) // runs {1..1999} {2001}: the cap
	_, err := s.ReserveNext(epoch, 1<<20)
	assert.ErrorIs(t, err, ErrAckedAheadCap, "only the hole, and it is leased")
	require.NoError(t, s.Ack(epoch, leases[2002].Handle), "acks are accepted past the cap")
	require.NoError(t, s.Ack(epoch, leases[2004].Handle), "one more run: the cap plus the leases out")
	assert.Equal(t, 3, s.Stats().AckedAheadRuns)

	require.NoError(t, s.Nack(epoch, leases[0].Handle, 0))
	hole := reserve(t, s, epoch, 1<<20)
	assert.Equal(t, int64(0), hole.Offset, "only the frontier hole")
	require.NoError(t, s.Ack(epoch, hole.Handle))
	assert.Equal(t, int64(1999), s.Stats().Frontier, "the frontier passes the long run in one step")
	require.NoError(t, s.Ack(epoch, leases[2000].Handle))
	assert.Equal(t, Stats{Frontier: 2002, Leased: 997, AckedAhead: 1, AckedAheadRuns: 1}, s.Stats())
	assert.Equal(t, int64(3001), reserve(t, s, epoch, 1<<20).Offset, "below the cap again")
}

// MaxAckedAhead caps the offsets, whatever their runs, as before the run cap; a value above
// the ceiling, or none, is the ceiling: what a persisted record may hold.
func TestAckedAheadOffsetCeiling(t *testing.T) {
	for _, cfg := range []Config{{}, {MaxAckedAhead: 1 << 30}} {
		s, _ := newTestShard(t, cfg, State{Frontier: -1, AckedAhead: []Run{{1, MaxAckedAheadCeiling - 1}}})
		assert.Equal(t, Stats{Frontier: -1, AckedAhead: MaxAckedAheadCeiling - 1, AckedAheadRuns: 1}, s.Stats())
		assert.Equal(t, int64(0), reserve(t, s, epoch, 1<<40).Offset, "the hole")
		l := reserve(t, s, epoch, 1<<40)
		assert.Equal(t, int64(MaxAckedAheadCeiling), l.Offset, "below the ceiling: served past the run")
		require.NoError(t, s.Ack(epoch, l.Handle)) // the ceiling: one run of 2^20 - 1 and one of 1
		_, err := s.ReserveNext(epoch, 1<<40)
		assert.ErrorIs(t, err, ErrAckedAheadCap)
	}
	s, _ := newTestShard(t, Config{MaxAckedAhead: 2}, State{Frontier: -1, AckedAhead: []Run{{1, 2}}})
	assert.Equal(t, int64(0), reserve(t, s, epoch, 100).Offset)
	_, err := s.ReserveNext(epoch, 100)
	assert.ErrorIs(t, err, ErrAckedAheadCap, "a topic's own offset cap holds as before")
}

// A stall episode lasts while the set stays at its cap: it is counted and reported once,
// when a reserve first finds the cap, and ends when the set falls below it, by the frontier
// passing runs or by an ack joining two.
func TestAckedAheadStallEpisodes(t *testing.T) {
	var stalls []AckedAheadStall
	counters := new(Counters)
	s := NewShard("orders", 3, Options{Config: Config{MaxAckedAheadRuns: 2}, Counters: counters,
		Hooks: Hooks{AckedAheadStall: func(topic string, partition int32, st AckedAheadStall) {
			assert.Equal(t, "orders", topic)
			assert.Equal(t, int32(3), partition)
			stalls = append(stalls, st)
		}}}, State{Frontier: -1})
	var leases []Lease
	for range 8 {
		leases = append(leases, reserve(t, s, epoch, 100))
	}
	ack := func(i int) { t.Helper(); require.NoError(t, s.Ack(epoch, leases[i].Handle)) }
	refused := func() {
		t.Helper()
		_, err := s.ReserveNext(epoch, 100)
		require.ErrorIs(t, err, ErrAckedAheadCap)
	}
	ack(1)
	ack(3) // runs {1} {3}
	refused()
	refused()
	assert.Equal(t, []AckedAheadStall{{Hole: 0, Runs: 2, Offsets: 2}}, stalls, "one episode, reported once")
	ack(2) // {1..3}: below the cap
	ack(5) // {1..3} {5}: at the cap again, a new episode for the next reserve
	refused()
	ack(0) // the frontier passes 0 to 3: {5}
	ack(7) // {5} {7}
	refused()
	assert.Equal(t, []AckedAheadStall{{0, 2, 2}, {0, 2, 4}, {4, 2, 2}}, stalls)
	assert.Equal(t, uint64(3), counters.AckedAheadStalls.Load())

	s.SetConfig(Config{MaxAckedAheadRuns: 3}) // raised: the episode ends
	assert.Equal(t, int64(8), reserve(t, s, epoch, 100).Offset)
	s.SetConfig(Config{MaxAckedAheadRuns: 2})
	refused()
	assert.Len(t, stalls, 4, "lowered again: a new episode")
}

// A run acked up to the top of int64, past the log's high watermark (restored state above
// a log that lost its tail) is passed without wrapping: the cursor stops at the high
// watermark, and the frontier at the run's end.
func TestAckedAheadRunAtTheTopOfInt64(t *testing.T) {
	const top = math.MaxInt64
	s, _ := newTestShard(t, Config{}, State{Frontier: top - 10, AckedAhead: []Run{{top - 5, top - 1}}})
	var leases []Lease
	for range 4 {
		leases = append(leases, reserve(t, s, epoch, top-3))
	}
	assert.Equal(t, int64(top-6), leases[3].Offset)
	for _, hwm := range []int64{top - 3, top} {
		_, err := s.ReserveNext(epoch, hwm)
		assert.ErrorIs(t, err, ErrAllReserved)
	}
	for _, l := range leases {
		require.NoError(t, s.Ack(epoch, l.Handle))
	}
	assert.Equal(t, Stats{Frontier: top - 1}, s.Stats())
	_, err := s.ReserveNext(epoch, top)
	assert.ErrorIs(t, err, ErrEmpty)
}
