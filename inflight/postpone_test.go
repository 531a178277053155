package inflight

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPostpone(t *testing.T) {
	t0 := time.Unix(1000, 0)
	t.Run("the record waits until its time, no attempt spent", func(t *testing.T) {
		s, _ := newTestShard(t, Config{VisibilityTimeout: 10 * time.Second, MaxDeliveries: 1}, State{Frontier: -1})
		l, err := s.ReserveNext(t0, 2)
		require.NoError(t, err)
		require.NoError(t, s.Postpone(t0, l.Handle, t0.Add(time.Minute), 0))
		require.ErrorIs(t, s.Ack(t0, l.Handle), ErrGone, "the lease was withdrawn")
		at, ok := s.NextDeadline()
		require.True(t, ok)
		require.Equal(t, t0.Add(time.Minute), at, "the purger is told when it is due")
		st := s.Stats()
		require.Equal(t, 0, st.Leased)
		require.Equal(t, 1, st.Delayed)
		next, err := s.ReserveNext(t0, 2)
		require.NoError(t, err)
		require.Equal(t, int64(1), next.Offset, "the others go on")
		_, err = s.ReserveNext(t0.Add(time.Minute-time.Nanosecond), 2)
		require.ErrorIs(t, err, ErrAllReserved)
		due, err := s.ReserveNext(t0.Add(time.Minute), 2)
		require.NoError(t, err)
		require.Equal(t, int64(0), due.Offset)
		require.Equal(t, uint32(1), due.Attempt, "postponing spent no attempt: not quarantined at MaxDeliveries 1")
		require.Equal(t, ReasonFirst, due.Reason)
		require.Equal(t, uint64(1), s.counters.Postponed.Load())
	})
	t.Run("refusals change nothing", func(t *testing.T) {
		s, _ := newTestShard(t, Config{}, State{Frontier: -1})
		l, err := s.ReserveNext(t0, 1)
		require.NoError(t, err)
		require.ErrorIs(t, s.Postpone(t0, l.Handle, t0, 0), ErrInvalidDuration)
		require.ErrorIs(t, s.Postpone(t0, l.Handle, t0.Add(MaxDelay+time.Second), 0), ErrInvalidDuration)
		require.ErrorIs(t, s.Postpone(t0, Handle{Offset: 0, Nonce: l.Nonce + 1}, t0.Add(time.Second), 0), ErrGone)
		require.Equal(t, 1, s.Stats().Leased)
		require.NoError(t, s.Ack(t0, l.Handle))
		require.ErrorIs(t, s.Postpone(t0, l.Handle, t0.Add(time.Second), 0), ErrAlreadySettled)
	})
	t.Run("on an ordered topic the key's later records wait for it", func(t *testing.T) {
		s, _ := newTestShard(t, Config{Ordered: true}, State{Frontier: -1})
		leases, err := s.ReserveBatch(t0, 3, 0, 3, nil)
		require.NoError(t, err)
		// 0 (key 7) is due later; 1 (key 7) and 2 (key 8) are read in the same scan.
		require.NoError(t, s.Postpone(t0, leases[0].Handle, t0.Add(time.Minute), 7))
		kept := bindAll(t, s, t0, leases[1:], []uint64{7, 8}, false)
		require.Equal(t, []int64{2}, offsetsOf(kept), "key 7's 1 waits behind its postponed 0")
		due, err := s.ReserveNext(t0.Add(time.Minute), 3)
		require.NoError(t, err)
		require.Equal(t, int64(0), due.Offset)
	})
}
