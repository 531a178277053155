package inflight

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// ReserveKeyed: an ordered partition's one-record scan that reads before it reserves
// (checks 151-153: key exclusivity and order, whichever way a scan takes a record).

func TestReserveKeyed(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := Config{Ordered: true, VisibilityTimeout: 10 * time.Second}
	// unchanged asserts that a refusal changed nothing a reserve would see.
	unchanged := func(t *testing.T, s *Shard, before Stats, next int64) {
		t.Helper()
		require.Equal(t, before, s.Stats())
		require.Equal(t, next, s.NextFresh())
	}

	t.Run("reserves and binds the next fresh record", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		require.Equal(t, int64(0), s.NextFresh())
		l, err := s.ReserveKeyed(t0, 3, 0, 0, KeyOf([]byte("a")))
		require.NoError(t, err)
		require.Equal(t, int64(0), l.Offset)
		require.Equal(t, uint32(1), l.Attempt)
		require.Equal(t, t0.Add(10*time.Second), l.Expiry)
		require.Equal(t, int64(1), s.NextFresh())
		require.Equal(t, 1, s.Stats().Leased)
		require.Equal(t, uint64(1), s.counters.Load().Delivered)
		// Bound: the key's next record waits behind it, whichever way a scan takes it.
		_, err = s.ReserveKeyed(t0, 3, 0, 1, KeyOf([]byte("a")))
		require.ErrorIs(t, err, ErrBehindKey)
		require.Equal(t, 1, s.Stats().Keys.Deferred)
		require.Equal(t, int64(2), s.NextFresh(), "the cursor passed the deferred record")
		other, err := s.ReserveKeyed(t0, 3, 0, 2, KeyOf([]byte("b")))
		require.NoError(t, err, "another key flows")
		require.Equal(t, int64(2), other.Offset)
		// The holder's ack frees the key: its deferred record comes next, through the usual
		// reserve (it is due again, not fresh).
		require.NoError(t, s.Ack(t0, l.Handle))
		_, err = s.ReserveKeyed(t0, 3, 0, s.NextFresh(), KeyOf([]byte("a")))
		require.ErrorIs(t, err, ErrNotNext)
		again, err := s.ReserveNextFor(t0, 3, 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), again.Offset)
	})

	t.Run("the hint says when a record is due first", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		l := reserve(t, s, t0, 5)
		require.Equal(t, int64(1), s.NextFresh())
		require.NoError(t, s.Nack(t0, l.Handle, 0))
		require.Equal(t, int64(-1), s.NextFresh(), "released: due before any fresh record")
		again := reserve(t, s, t0, 5)
		require.Equal(t, int64(0), again.Offset)
		require.Equal(t, int64(-1), s.NextFresh(), "no fresh record reserved since")
		reserve(t, s, t0, 5)
		require.Equal(t, int64(2), s.NextFresh())
		require.NoError(t, s.Reject(t0, again.Handle))
		require.Equal(t, 1, s.RequeueAll(t0))
		require.Equal(t, int64(-1), s.NextFresh(), "requeued")
	})

	t.Run("a record without a key is reserved unbound", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		l, err := s.ReserveKeyed(t0, 2, time.Second, 0, 0)
		require.NoError(t, err)
		require.Equal(t, t0.Add(time.Second), l.Expiry, "the visibility asked for")
		l2, err := s.ReserveKeyed(t0, 2, 0, 1, 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), l2.Offset)
		require.Zero(t, s.Stats().Keys.Deferred)
	})

	t.Run("refusals change nothing", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			cfg   Config
			setup func(t *testing.T, s *Shard) (off int64, hwm int64, undo func())
		}{
			{"a stale offset", cfg, func(t *testing.T, s *Shard) (int64, int64, func()) {
				reserve(t, s, t0, 5)
				return 0, 5, nil
			}},
			{"an offset at the high watermark", cfg, func(t *testing.T, s *Shard) (int64, int64, func()) {
				return 0, 0, nil
			}},
			{"a released record due before it", cfg, func(t *testing.T, s *Shard) (int64, int64, func()) {
				l := reserve(t, s, t0, 5)
				require.NoError(t, s.Nack(t0, l.Handle, 0))
				return s.NextFresh(), 5, nil
			}},
			{"an expired lease due before it", cfg, func(t *testing.T, s *Shard) (int64, int64, func()) {
				l, err := s.ReserveNextFor(t0.Add(-time.Minute), 5, time.Second)
				require.NoError(t, err)
				require.Equal(t, int64(0), l.Offset)
				s.Purge(t0) // released: due again before any fresh record
				return s.NextFresh(), 5, nil
			}},
			{"another scan holds the scan lock", cfg, func(t *testing.T, s *Shard) (int64, int64, func()) {
				s.ScanLock().Lock()
				return 0, 5, s.ScanLock().Unlock
			}},
			{"the in-flight cap", Config{Ordered: true, MaxInFlight: 1}, func(t *testing.T, s *Shard) (int64, int64, func()) {
				reserve(t, s, t0, 5)
				return s.NextFresh(), 5, nil
			}},
			{"the deferred cap", Config{Ordered: true, MaxDeferred: 1}, func(t *testing.T, s *Shard) (int64, int64, func()) {
				_, err := s.ReserveKeyed(t0, 5, 0, 0, 7)
				require.NoError(t, err)
				_, err = s.ReserveKeyed(t0, 5, 0, 1, 7)
				require.ErrorIs(t, err, ErrBehindKey)
				return s.NextFresh(), 5, nil
			}},
			{"the acked-ahead cap", Config{Ordered: true, MaxAckedAheadRuns: 1}, func(t *testing.T, s *Shard) (int64, int64, func()) {
				reserve(t, s, t0, 5)
				l := reserve(t, s, t0, 5)
				require.NoError(t, s.Ack(t0, l.Handle)) // a run above the hole at 0
				return s.NextFresh(), 5, nil
			}},
			{"a shard that is not ordered", Config{}, func(t *testing.T, s *Shard) (int64, int64, func()) {
				return 0, 5, nil
			}},
			{"a shard handed off", cfg, func(t *testing.T, s *Shard) (int64, int64, func()) {
				var st State
				s.HandOff(t0, &st)
				return 0, 5, nil
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := newOrderedShard(t, tc.cfg)
				off, hwm, undo := tc.setup(t, s)
				before, next, delivered := s.Stats(), s.NextFresh(), s.counters.Load().Delivered
				_, err := s.ReserveKeyed(t0, hwm, 0, off, 9)
				require.ErrorIs(t, err, ErrNotNext)
				unchanged(t, s, before, next)
				require.Equal(t, delivered, s.counters.Load().Delivered)
				// A run from the same offset is refused alike.
				leases, taken, err := s.ReserveKeyedBatch(t0, hwm, 0, 3, off, []uint64{9, 9, 8}, nil)
				require.ErrorIs(t, err, ErrNotNext)
				require.Empty(t, leases)
				require.Zero(t, taken)
				unchanged(t, s, before, next)
				require.Equal(t, delivered, s.counters.Load().Delivered)
				if undo != nil {
					undo()
				}
			})
		}
	})

	t.Run("a run with no keys", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		_, taken, err := s.ReserveKeyedBatch(t0, 5, 0, 3, 0, nil, nil)
		require.ErrorIs(t, err, ErrNotNext)
		require.Zero(t, taken)
		unchanged(t, s, Stats{Frontier: -1}, 0)
	})

	t.Run("a run is leased and bound, and what waits behind a key is deferred unleased", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		held, err := s.ReserveKeyed(t0, 8, 0, 0, 7)
		require.NoError(t, err)
		fence := held.Fence
		// 1 and 3 are key 8's, consecutive in one batch: both go to it. 2 is key 7's, held.
		leases, taken, err := s.ReserveKeyedBatch(t0, 8, time.Second, 4, 1, []uint64{8, 7, 8, 0}, nil)
		require.NoError(t, err)
		require.Equal(t, 4, taken)
		require.Equal(t, []int64{1, 3, 4}, []int64{leases[0].Offset, leases[1].Offset, leases[2].Offset})
		for _, l := range leases {
			require.Equal(t, t0.Add(time.Second), l.Expiry, "the visibility asked for")
			require.Greater(t, l.Fence, fence, "fencing tokens grow with every lease")
			fence = l.Fence
		}
		require.Equal(t, int64(5), s.NextFresh())
		st := s.Stats()
		require.Equal(t, 4, st.Leased)
		require.Equal(t, 1, st.Keys.Deferred)
		require.Equal(t, 2, st.Keys.HeldKeys)
		c := s.counters.Load()
		require.Equal(t, uint64(5), c.Delivered, "every record taken, as ReserveBatch counts the leases Bind withdraws")
		require.Equal(t, uint64(1), c.Deferred)
		require.Equal(t, 4, s.deadlines.len(), "no expiry entry for the deferred record")
		// Key 7's holder acks: its deferred record comes next, due again.
		require.NoError(t, s.Ack(t0, held.Handle))
		require.Equal(t, int64(-1), s.NextFresh())
		again, err := s.ReserveNextFor(t0, 8, 0)
		require.NoError(t, err)
		require.Equal(t, int64(2), again.Offset)
		require.Equal(t, uint32(1), again.Attempt, "its first delivery")
	})

	t.Run("a run stops at the in-flight cap and the high watermark", func(t *testing.T) {
		s := newOrderedShard(t, Config{Ordered: true, MaxInFlight: 2})
		leases, taken, err := s.ReserveKeyedBatch(t0, 8, 0, 4, 0, []uint64{1, 2, 3, 4}, nil)
		require.NoError(t, err)
		require.Equal(t, 2, taken, "the in-flight room")
		require.Len(t, leases, 2)
		require.Equal(t, int64(2), s.NextFresh())
		s = newOrderedShard(t, cfg)
		_, taken, err = s.ReserveKeyedBatch(t0, 2, 0, 4, 0, []uint64{1, 2, 3, 4}, nil)
		require.NoError(t, err)
		require.Equal(t, 2, taken, "below the high watermark")
	})

	t.Run("a record taken ends a deferred stall", func(t *testing.T) {
		s := newOrderedShard(t, Config{Ordered: true, MaxDeferred: 1})
		held, err := s.ReserveKeyed(t0, 6, 0, 0, 7)
		require.NoError(t, err)
		_, err = s.ReserveKeyed(t0, 6, 0, 1, 7)
		require.ErrorIs(t, err, ErrBehindKey)
		_, err = s.ReserveNextFor(t0, 6, 0)
		require.ErrorIs(t, err, ErrDeferredCap)
		require.Equal(t, uint64(1), s.counters.Load().DeferredStalls)
		require.NoError(t, s.Ack(t0, held.Handle)) // the key frees: offset 1 is due
		next, err := s.ReserveNextFor(t0, 6, 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), next.Offset)
		// A fresh record reserved below the cap ends the episode (as ReserveNextFor's would):
		// the next one is counted.
		_, err = s.ReserveKeyed(t0, 6, 0, 2, 7)
		require.ErrorIs(t, err, ErrBehindKey)
		_, err = s.ReserveNextFor(t0, 6, 0)
		require.ErrorIs(t, err, ErrDeferredCap)
		require.Equal(t, uint64(2), s.counters.Load().DeferredStalls)
	})

	t.Run("a lapsed grant", func(t *testing.T) {
		s, _ := newTestShard(t, cfg, State{Frontier: -1, GrantUntil: t0})
		_, err := s.ReserveKeyed(t0, 5, 0, 0, 9)
		require.ErrorIs(t, err, ErrNotNext)
		_, _, err = s.ReserveKeyedBatch(t0, 5, 0, 2, 0, []uint64{9, 8}, nil)
		require.ErrorIs(t, err, ErrNotNext)
		unchanged(t, s, Stats{Frontier: -1}, 0)
		_, err = s.ReserveNextFor(t0, 5, 0)
		require.ErrorIs(t, err, ErrMoved, "the scan under the lock says why")
	})

	t.Run("a visibility out of range", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		_, err := s.ReserveKeyed(t0, 5, -time.Second, 0, 9)
		require.ErrorIs(t, err, ErrInvalidDuration)
		_, err = s.ReserveKeyed(t0, 5, MaxVisibility+1, 0, 9)
		require.ErrorIs(t, err, ErrInvalidDuration)
		_, _, err = s.ReserveKeyedBatch(t0, 5, -time.Second, 2, 0, []uint64{9, 8}, nil)
		require.ErrorIs(t, err, ErrInvalidDuration)
		unchanged(t, s, Stats{Frontier: -1}, 0)
	})

	t.Run("restored key tails are verified first", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		held, err := s.ReserveKeyed(t0, 4, 0, 0, 7)
		require.NoError(t, err)
		_, err = s.ReserveKeyed(t0, 4, 0, 1, 7)
		require.ErrorIs(t, err, ErrBehindKey)
		l2, err := s.ReserveKeyed(t0, 4, 0, 2, 8)
		require.NoError(t, err)
		require.NoError(t, s.Ack(t0, l2.Handle)) // a run above the holes: the deferred record parks in it
		_ = held
		var st State
		s.Snapshot(&st)
		require.NotEmpty(t, st.KeyTails)
		r := NewShard("orders", 3, Options{Config: cfg}, st)
		require.True(t, r.Verifying())
		_, err = r.ReserveKeyed(t0, 4, 0, r.NextFresh(), 9)
		require.ErrorIs(t, err, ErrNotNext)
		_, _, err = r.ReserveKeyedBatch(t0, 4, 0, 2, r.NextFresh(), []uint64{9}, nil)
		require.ErrorIs(t, err, ErrNotNext)
	})
}

// TestReserveKeyedMatchesReserveAndBind drives two ordered shards, seeded alike, through the
// same appends, settles, crashes and time, one taking records as a scan that reads first does
// (NextFresh, then ReserveKeyed for one record and ReserveKeyedBatch for a run, reserving,
// reading and binding under the lock as usual when refused), the other with ReserveNextFor
// or ReserveBatch and a Bind of the leases: the two must lease the same records (offsets,
// attempts, reasons, expiries), defer the same ones and keep the same state and counters,
// so a scan may take records either way.
//
// The shard that reads first grants no lease to a record it defers: it draws no nonce and
// no fencing token for it. So its later leases' nonces differ from the other's, and its
// fencing tokens lag: those two are compared for what they promise (a nonce is not zero;
// fencing tokens grow with every lease, and never past the other shard's, which took a
// token for every record it deferred), and each shard settles the handles it granted.
func TestReserveKeyedMatchesReserveAndBind(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		opts := Options{Config: drawOrderedConfig(t), Seed: [32]byte{3}}
		keyed := NewShard("t", 0, opts, State{Frontier: -1})
		plain := NewShard("t", 0, opts, State{Frontier: -1})
		now := time.Unix(1000, 0)
		var keyAt []uint64
		type held struct{ keyed, plain Handle }
		var live []held  // the leases both shards granted, in order
		var fence uint64 // the keyed shard's last fencing token
		keyCount := rapid.IntRange(1, 5).Draw(t, "keys")
		verify := func(s *Shard) { verifyAll(s, now, keyAt) }
		same := func(t *rapid.T, what string) {
			var a, b State
			keyed.Snapshot(&a)
			plain.Snapshot(&b)
			require.LessOrEqual(t, a.Fence, b.Fence, "fencing tokens after %s", what)
			a.Fence, b.Fence = 0, 0
			require.Equal(t, b, a, "state after %s", what)
			require.Equal(t, plain.Stats(), keyed.Stats(), "stats after %s", what)
			require.Equal(t, plain.counters.Load(), keyed.counters.Load(), "counters after %s", what)
		}
		// bindAll binds leases as a scan under the lock does, hands the kept ones over, and
		// returns them.
		bindAll := func(s *Shard, leases []Lease) []Lease {
			handles := make([]Handle, len(leases))
			keys := make([]uint64, len(leases))
			for i, l := range leases {
				handles[i], keys[i] = l.Handle, keyAt[l.Offset]
			}
			kept := make([]bool, len(leases))
			s.Bind(now, handles, keys, false, kept)
			var out []Lease
			for i, l := range leases {
				if kept[i] {
					out = append(out, l)
				}
			}
			s.Handed(out)
			return out
		}
		// underLock takes up to n records as a scan under the lock does.
		underLock := func(s *Shard, n int) ([]Lease, error) {
			verify(s)
			if n == 1 {
				l, err := s.ReserveNextFor(now, int64(len(keyAt)), 0)
				if err != nil {
					return nil, err
				}
				return bindAll(s, []Lease{l}), nil
			}
			leases, err := s.ReserveBatch(now, int64(len(keyAt)), 0, n, nil)
			if err != nil {
				return nil, err
			}
			return bindAll(s, leases), nil
		}
		t.Repeat(map[string]func(*rapid.T){
			"append": func(t *rapid.T) {
				for range rapid.IntRange(1, 6).Draw(t, "n") {
					keyAt = append(keyAt, uint64(rapid.IntRange(0, keyCount).Draw(t, "key")))
				}
			},
			"take": func(t *rapid.T) {
				// The keyed shard tries to take what it read before verifying restored key
				// tails (a scan verifies them under the lock, when refused). Both purge first:
				// a purge at now before or after a Verify is as legal as the other (the node's
				// sweeper purges at any time) but may lead to another choice.
				keyed.Purge(now)
				plain.Purge(now)
				n := rapid.IntRange(1, 4).Draw(t, "max")
				hwm := int64(len(keyAt))
				if rapid.Bool().Draw(t, "scan lock held") {
					keyed.ScanLock().Lock()
					_, err := keyed.ReserveKeyed(now, hwm, 0, keyed.NextFresh(), 1)
					require.ErrorIs(t, err, ErrNotNext)
					_, _, err = keyed.ReserveKeyedBatch(now, hwm, 0, n, keyed.NextFresh(), []uint64{1}, nil)
					require.ErrorIs(t, err, ErrNotNext)
					keyed.ScanLock().Unlock()
				}
				off := keyed.NextFresh()
				if rapid.Bool().Draw(t, "stale hint") {
					off += int64(rapid.IntRange(-2, 2).Draw(t, "by"))
				}
				var got []Lease
				err := ErrNotNext
				switch {
				case off < 0 || off >= hwm:
				case n == 1:
					var l Lease
					if l, err = keyed.ReserveKeyed(now, hwm, 0, off, keyAt[off]); err == nil {
						got = []Lease{l}
					} else if err == ErrBehindKey {
						err = nil
					}
				default:
					// What a read of n records from off found (as far as the log goes).
					keys := keyAt[off:min(off+int64(n), hwm)]
					var taken int
					got, taken, err = keyed.ReserveKeyedBatch(now, hwm, 0, n, off, keys, nil)
					if err == nil {
						require.GreaterOrEqual(t, taken, 1)
						require.LessOrEqual(t, taken, len(keys))
						require.Equal(t, off+int64(taken), keyed.NextFresh(), "the cursor passed the run")
						for _, l := range got {
							require.Less(t, l.Offset, off+int64(taken))
						}
					}
				}
				if err == ErrNotNext {
					got, err = underLock(keyed, n)
				}
				want, wantErr := underLock(plain, n)
				require.Equal(t, wantErr, err)
				require.Equal(t, len(want), len(got), "keyed %+v (from %d), plain %+v", got, off, want)
				for i := range want {
					require.NotZero(t, got[i].Nonce)
					require.Greater(t, got[i].Fence, fence, "fencing tokens grow")
					require.LessOrEqual(t, got[i].Fence, want[i].Fence)
					fence = got[i].Fence
					w, g := want[i], got[i]
					w.Nonce, w.Fence, g.Nonce, g.Fence = 0, 0, 0, 0
					require.Equal(t, w, g)
					live = append(live, held{got[i].Handle, want[i].Handle})
				}
				same(t, "take")
			},
			"settle": func(t *rapid.T) {
				if len(live) == 0 {
					t.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(live)-1).Draw(t, "lease")
				h := live[i]
				live = append(live[:i], live[i+1:]...)
				op := rapid.SampledFrom([]string{"ack", "nack", "giveBack", "reject", "extend"}).Draw(t, "op")
				for s, h := range map[*Shard]Handle{keyed: h.keyed, plain: h.plain} {
					switch op {
					case "ack":
						_ = s.Ack(now, h)
					case "nack":
						_ = s.Nack(now, h, time.Second)
					case "giveBack":
						_ = s.GiveBack(now, h)
					case "reject":
						_ = s.Reject(now, h)
					case "extend":
						_, _ = s.Extend(now, h, 30*time.Second)
					}
				}
				if op == "extend" {
					live = append(live, h) // still held
				}
				same(t, op)
			},
			"requeue": func(t *rapid.T) {
				keyed.RequeueAll(now)
				plain.RequeueAll(now)
				same(t, "requeue")
			},
			"time": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(1, 12).Draw(t, "seconds")) * time.Second)
			},
			"crash": func(t *rapid.T) {
				var a, b State
				keyed.Snapshot(&a)
				plain.Snapshot(&b)
				keyed, plain = NewShard("t", 0, opts, a), NewShard("t", 0, opts, b)
				live = live[:0]
				same(t, "crash")
			},
		})
	})
}

// ReserveDueKeyed: what is due again before the fresh records, its keys known, reserved and
// bound before it is read (checks 151-153).
func TestReserveDueKeyed(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := Config{Ordered: true, VisibilityTimeout: 10 * time.Second}
	// deferBehind leases offset 0 (key 7) to a consume of up to five records, then reads 1..3
	// (keys 7, 8, 7) for another, which leases 2 and defers 1 and 3 behind 0.
	deferBehind := func(t *testing.T, s *Shard) (held, other Lease) {
		t.Helper()
		leases, _, err := s.ReserveKeyedBatch(t0, 4, 0, 5, 0, []uint64{7}, nil)
		require.NoError(t, err)
		held = leases[0]
		leases, taken, err := s.ReserveKeyedBatch(t0, 4, 0, 5, 1, []uint64{7, 8, 7}, nil)
		require.NoError(t, err)
		require.Equal(t, 3, taken)
		require.Len(t, leases, 1)
		require.Equal(t, 2, s.Stats().Keys.Deferred)
		return held, leases[0]
	}

	t.Run("a freed key's deferred records are leased and bound, in order", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		held, _ := deferBehind(t, s)
		require.NoError(t, s.Ack(t0, held.Handle)) // key 7 frees: 1 and 3 are due
		require.Equal(t, int64(-1), s.NextFresh())
		leases, taken, err := s.ReserveDueKeyed(t0, 4, time.Second, 5, nil)
		require.NoError(t, err)
		require.Equal(t, 2, taken)
		require.Equal(t, []int64{1, 3}, []int64{leases[0].Offset, leases[1].Offset}, "one holder takes both, lowest first")
		require.Equal(t, t0.Add(time.Second), leases[0].Expiry)
		require.Equal(t, uint32(1), leases[0].Attempt, "a deferred record's first delivery")
		require.Equal(t, int64(4), s.NextFresh(), "nothing due first: the cursor again")
		st := s.Stats()
		require.Equal(t, 3, st.Leased)
		require.Zero(t, st.Keys.Deferred)
		// Bound: the key's next fresh record waits behind them.
		_, err = s.ReserveKeyed(t0, 5, 0, 4, 7)
		require.ErrorIs(t, err, ErrBehindKey)
	})

	t.Run("a nacked record is due again before the later records of its key", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		held, other := deferBehind(t, s)
		require.NoError(t, s.Nack(t0, other.Handle, 0)) // 2 (key 8) is due again
		leases, taken, err := s.ReserveDueKeyed(t0, 4, 0, 5, nil)
		require.NoError(t, err)
		require.Equal(t, 1, taken)
		require.Equal(t, int64(2), leases[0].Offset)
		require.Equal(t, uint32(2), leases[0].Attempt)
		require.Equal(t, ReasonNacked, leases[0].Reason)
		// Key 7's holder nacks after a delay: 0 waits, and 1 and 3 with it, behind it.
		require.NoError(t, s.Nack(t0, held.Handle, time.Second))
		leases, taken, err = s.ReserveDueKeyed(t0, 4, 0, 5, nil)
		require.NoError(t, err, "nothing due: no lease, no error")
		require.Zero(t, taken, "none of them made visible, to be deferred again")
		require.Empty(t, leases)
		leases, taken, err = s.ReserveDueKeyed(t0.Add(time.Second), 4, 0, 5, nil)
		require.NoError(t, err)
		require.Equal(t, 1, taken, "the delay over, 0 is due, and the key's run behind it with the free")
		require.Equal(t, int64(0), leases[0].Offset)
	})

	t.Run("a record due behind its key's holder is deferred again", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		held, err := s.ReserveKeyed(t0, 3, 0, 0, 7)
		require.NoError(t, err)
		second, err := s.ReserveKeyed(t0, 3, 0, 1, 9)
		require.NoError(t, err)
		require.NoError(t, s.Nack(t0, held.Handle, 0)) // 0 (key 7) due, 1 holds key 9
		// 2 (key 9) read, deferred behind 1; 1's holder nacks: 1 is due, then 0.
		_, err = s.ReserveKeyed(t0, 3, 0, 2, 9)
		require.ErrorIs(t, err, ErrNotNext, "0 is due first")
		leases, taken, err := s.ReserveDueKeyed(t0, 3, 0, 1, nil)
		require.NoError(t, err)
		require.Equal(t, 1, taken)
		require.Equal(t, int64(0), leases[0].Offset)
		require.NoError(t, s.Ack(t0, leases[0].Handle))
		require.NoError(t, s.Ack(t0, second.Handle))
		require.Equal(t, Stats{Frontier: 1}, s.Stats())
	})

	t.Run("refuses what the locked scan takes", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		held, _ := deferBehind(t, s)
		require.NoError(t, s.Ack(t0, held.Handle))
		before := s.Stats()
		s.ScanLock().Lock() // another scan between its reserve and its bind
		_, taken, err := s.ReserveDueKeyed(t0, 4, 0, 5, nil)
		s.ScanLock().Unlock()
		require.ErrorIs(t, err, ErrNotNext)
		require.Zero(t, taken)
		require.Equal(t, before, s.Stats())
		_, _, err = s.ReserveDueKeyed(t0, 4, -time.Second, 5, nil)
		require.ErrorIs(t, err, ErrInvalidDuration)

		// A record given back before a read bound it: its key is not known.
		s = newOrderedShard(t, cfg)
		unbound, err := s.ReserveNextFor(t0, 2, 0)
		require.NoError(t, err)
		require.NoError(t, s.GiveBack(t0, unbound.Handle))
		before = s.Stats()
		_, taken, err = s.ReserveDueKeyed(t0, 2, 0, 5, nil)
		require.ErrorIs(t, err, ErrNotNext)
		require.Zero(t, taken)
		require.Equal(t, before, s.Stats())
		require.Equal(t, int64(-1), s.NextFresh())

		// Not ordered.
		s, _ = newTestShard(t, Config{}, State{Frontier: -1})
		_, _, err = s.ReserveDueKeyed(t0, 2, 0, 5, nil)
		require.ErrorIs(t, err, ErrNotNext)
	})

	t.Run("stops at what was asked and at the in-flight cap", func(t *testing.T) {
		s := newOrderedShard(t, cfg)
		held, _ := deferBehind(t, s)
		require.NoError(t, s.Ack(t0, held.Handle))
		leases, taken, err := s.ReserveDueKeyed(t0, 4, 0, 1, nil)
		require.NoError(t, err)
		require.Equal(t, 1, taken, "asked for one")
		require.Equal(t, int64(1), leases[0].Offset)
		require.Equal(t, int64(-1), s.NextFresh(), "3 is due still")

		// At the cap: 0 (key 7) held by a consume of five, 1 and 2 deferred behind it, 3
		// (key 8) leased.
		s = newOrderedShard(t, Config{Ordered: true, MaxInFlight: 2})
		leases, _, err = s.ReserveKeyedBatch(t0, 4, 0, 5, 0, []uint64{7}, nil)
		require.NoError(t, err)
		held = leases[0]
		for off := int64(1); off <= 2; off++ {
			_, err = s.ReserveKeyed(t0, 4, 0, off, 7)
			require.ErrorIs(t, err, ErrBehindKey)
		}
		_, err = s.ReserveKeyed(t0, 4, 0, 3, 8)
		require.NoError(t, err)
		require.NoError(t, s.Ack(t0, held.Handle)) // 1 and 2 are due
		leases, taken, err = s.ReserveDueKeyed(t0, 4, 0, 5, nil)
		require.NoError(t, err)
		require.Equal(t, 1, taken, "the in-flight room")
		require.Equal(t, int64(1), leases[0].Offset)
		_, _, err = s.ReserveDueKeyed(t0, 4, 0, 5, nil)
		require.ErrorIs(t, err, ErrNotNext, "at the cap, for the locked scan to say so")
	})
}

// newOrderedShard is a fresh shard of cfg, for the tests of an ordered partition's scans.
func newOrderedShard(t *testing.T, cfg Config) *Shard {
	s, _ := newTestShard(t, cfg, State{Frontier: -1})
	return s
}
