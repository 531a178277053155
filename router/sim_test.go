package router_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/inflight"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// The node under random schedules of produce, consume, ack, nack, time passing, process
// crashes, power cuts and graceful restarts, on the strict in-memory file system, checked
// against what the library promises (DESIGN invariants, RELIABILITY I1, I4 to I8):
//
//   - a record is never leased to two live holders (I5);
//   - an ack takes effect only with the live lease's handle; a handle whose lease lapsed, was
//     nacked or died with its process gets ErrGone, a settled one ErrAlreadySettled (I6, I8);
//   - a record acked is delivered again only after a crash, and only if it was acked within
//     the window the library documents before it: about a tick (100 ms) for a process crash,
//     the durability interval plus a tick for a power cut, nothing for a graceful restart (I4);
//   - nothing is lost: at the end every record produced has been acked, but for those made
//     unreadable and those retention removed first, and corrupt ones are never delivered
//     (I7; RELIABILITY rows 14, 15).
//
// The whole node runs in a synctest bubble, so time is exact and schedules replay.

const (
	simVisibility = 10 * time.Second
	// Acks older than these before a crash must survive it. The tick is 100 ms; a tick's
	// work and the writeout take no fake time, so the margins are for ordering within an
	// instant only.
	processCrashWindow = 100*time.Millisecond + time.Millisecond
	powerCutWindow     = time.Second + 2*100*time.Millisecond + time.Millisecond
)

type simKey struct {
	partition int32
	offset    int64
}

type simLease struct {
	msg      router.Message
	deadline time.Time // the lease is live before this instant
}

type nodeSim struct {
	h         *harness
	rt        *rapid.T
	produced  map[int32]int64          // records produced per partition
	held      []simLease               // deliveries whose handles a consumer still has
	live      map[simKey]simLease      // offset → the one live lease on it
	ackedAt   map[simKey]time.Time     // offset → when its ack succeeded (and still counts)
	mayReturn map[simKey]bool          // acked offsets a crash allowed to come back
	deadAfter map[inflight.Handle]bool // handles whose lease died with a process
	corrupt   map[simKey]bool          // records made permanently unreadable
	oldest    map[int32]int64          // the oldest retained offset per partition
}

func (s *nodeSim) now() time.Time { return time.Now() }

func (s *nodeSim) produce(rt *rapid.T) {
	p := int32(rapid.IntRange(0, 1).Draw(rt, "partition"))
	n := rapid.IntRange(1, 4).Draw(rt, "records")
	s.h.produce(p, n)
	s.produced[p] += int64(n)
}

func (s *nodeSim) consume(rt *rapid.T) {
	msgs, err := s.h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: rapid.IntRange(1, 5).Draw(rt, "max")})
	if err != nil {
		rt.Fatalf("Consume: %v", err)
	}
	for _, m := range msgs {
		s.delivered(m)
	}
}

// delivered checks a delivery against the promises and records its lease.
func (s *nodeSim) delivered(m router.Message) {
	k := simKey{m.Partition, m.Offset}
	if m.Offset >= s.produced[m.Partition] {
		s.rt.Fatalf("delivered %v, never produced", k)
	}
	if s.corrupt[k] || m.Offset < s.oldest[m.Partition] {
		s.rt.Fatalf("delivered %v, which is corrupt or below retention", k)
	}
	if l, ok := s.live[k]; ok && s.now().Before(l.deadline) && !s.deadAfter[l.msg.Receipt] {
		s.rt.Fatalf("%v leased to a second holder while its lease runs to %v (I5)", k, l.deadline)
	}
	if _, acked := s.ackedAt[k]; acked {
		if !s.mayReturn[k] {
			s.rt.Fatalf("%v delivered again after its ack at %v, with no crash window to explain it (I4)", k, s.ackedAt[k])
		}
		delete(s.ackedAt, k) // unsettled again: it must be acked again
	}
	delete(s.mayReturn, k)
	l := simLease{msg: m, deadline: m.Expiry}
	s.live[k] = l
	s.held = append(s.held, l)
}

// pick draws a handle a consumer holds (maybe stale by now).
func (s *nodeSim) pick(rt *rapid.T) (int, simLease) {
	if len(s.held) == 0 {
		rt.Skip("nothing held")
	}
	i := rapid.IntRange(0, len(s.held)-1).Draw(rt, "held")
	return i, s.held[i]
}

// answers reports whether err is what settling l may answer now: nil for the live lease;
// ErrAlreadySettled for an acked record; ErrGone otherwise. An ack a crash may have taken
// back allows both of the last two.
func (s *nodeSim) answers(l simLease, err error) bool {
	k := simKey{l.msg.Partition, l.msg.Offset}
	if k.offset < s.oldest[k.partition] {
		// Retention took it: its lease holds until a read finds the gap and the frontier
		// jumps over it, after which it counts as settled.
		return err == nil || errors.Is(err, inflight.ErrGone) || errors.Is(err, inflight.ErrAlreadySettled)
	}
	if live, ok := s.live[k]; ok && live.msg.Receipt == l.msg.Receipt && s.now().Before(live.deadline) && !s.deadAfter[l.msg.Receipt] {
		return err == nil
	}
	_, acked := s.ackedAt[k]
	if s.corrupt[k] && !acked {
		// Made unreadable after this delivery: settled once a read skips it, gone before.
		return errors.Is(err, inflight.ErrGone) || errors.Is(err, inflight.ErrAlreadySettled)
	}
	switch {
	case acked && s.mayReturn[k]:
		return errors.Is(err, inflight.ErrAlreadySettled) || errors.Is(err, inflight.ErrGone)
	case acked:
		return errors.Is(err, inflight.ErrAlreadySettled)
	}
	return errors.Is(err, inflight.ErrGone)
}

func (s *nodeSim) ack(rt *rapid.T) {
	i, l := s.pick(rt)
	err := s.h.node.Ack(context.Background(), "orders", l.msg.Receipt)
	if !s.answers(l, err) {
		rt.Fatalf("Ack of %d/%d answered %v (I6, I8)", l.msg.Partition, l.msg.Offset, err)
	}
	if err == nil {
		k := simKey{l.msg.Partition, l.msg.Offset}
		s.ackedAt[k] = s.now()
		delete(s.live, k)
	}
	s.held = slices.Delete(s.held, i, i+1)
}

func (s *nodeSim) nack(rt *rapid.T) {
	i, l := s.pick(rt)
	err := s.h.node.Nack(context.Background(), "orders", l.msg.Receipt, 0)
	if !s.answers(l, err) {
		rt.Fatalf("Nack of %d/%d answered %v (I6)", l.msg.Partition, l.msg.Offset, err)
	}
	if err == nil {
		delete(s.live, simKey{l.msg.Partition, l.msg.Offset})
	}
	s.held = slices.Delete(s.held, i, i+1)
}

// corruptRecord makes a record no consumer has acked permanently unreadable.
func (s *nodeSim) corruptRecord(rt *rapid.T) {
	p := int32(rapid.IntRange(0, 1).Draw(rt, "partition"))
	if s.produced[p] == 0 {
		rt.Skip("nothing produced")
	}
	k := simKey{p, rapid.Int64Range(0, s.produced[p]-1).Draw(rt, "offset")}
	if _, acked := s.ackedAt[k]; acked {
		rt.Skip("acked already")
	}
	s.h.logs.Log("orders", p).Corrupt(k.offset)
	s.corrupt[k] = true
}

// retention drops the oldest records of a partition.
func (s *nodeSim) retention(rt *rapid.T) {
	p := int32(rapid.IntRange(0, 1).Draw(rt, "partition"))
	oldest := min(s.oldest[p]+int64(rapid.IntRange(1, 3).Draw(rt, "records")), s.produced[p])
	s.h.logs.Log("orders", p).Trim(oldest)
	s.oldest[p] = oldest
}

func (s *nodeSim) sleep(rt *rapid.T) {
	d := rapid.SampledFrom([]time.Duration{50 * time.Millisecond, 100 * time.Millisecond, time.Second, simVisibility}).Draw(rt, "sleep")
	time.Sleep(d)
	synctest.Wait()
}

// restart replaces the node, with the file system fsys as the crash left it; acks within
// window before now may come back.
func (s *nodeSim) restart(fsys *crashfs.FS, window time.Duration) {
	now := s.now()
	for k, at := range s.ackedAt {
		if window > 0 && now.Sub(at) < window {
			s.mayReturn[k] = true
		}
	}
	s.h.node.Close() // after a crash its writes land on the frozen file system and are lost
	s.h.fs = fsys
	s.h.start()
	for _, l := range s.held {
		s.deadAfter[l.msg.Receipt] = true // leases live in memory only
	}
	clear(s.live)
}

func (s *nodeSim) processCrash(rt *rapid.T) { s.restart(s.h.fs.ProcessCrash(), processCrashWindow) }

func (s *nodeSim) powerCut(rt *rapid.T) {
	s.restart(s.h.fs.PowerCut(crashfs.PowerCut{}), powerCutWindow)
}

// damageState stops the node and damages one of a partition's state files the way storage
// and operators do (a bit flipped, a lost tail, the other partition's file copied in, the file
// removed), then starts it again. The partition's acks may come back; nothing may be lost
// (issue 9: when in doubt, redeliver, never skip).
func (s *nodeSim) damageState(rt *rapid.T) {
	p := int32(rapid.IntRange(0, 1).Draw(rt, "partition"))
	name := rapid.SampledFrom([]string{"consumer.id", "consumer.ahead", "consumer.offset"}).Draw(rt, "file")
	s.h.close()
	path := s.h.node.PartitionDir("orders", p) + "/" + name
	if b, err := s.h.fs.ReadFile(path); err == nil {
		switch rapid.IntRange(0, 3).Draw(rt, "damage") {
		case 0:
			bit := rapid.Int64Range(0, int64(len(b))*8).Draw(rt, "bit")
			require.NoError(rt, s.h.fs.FlipBit(path, bit))
		case 1:
			size := rapid.Int64Range(0, int64(len(b))).Draw(rt, "size")
			require.NoError(rt, s.h.fs.Truncate(path, size))
		case 2:
			other, err := s.h.fs.ReadFile(s.h.node.PartitionDir("orders", 1-p) + "/" + name)
			if err == nil {
				require.NoError(rt, s.h.fs.WriteFile(path, other))
			}
		case 3:
			require.NoError(rt, s.h.fs.RemoveAll(path))
		}
	}
	for k := range s.ackedAt {
		if k.partition == p {
			s.mayReturn[k] = true
		}
	}
	s.h.start()
	for _, l := range s.held {
		s.deadAfter[l.msg.Receipt] = true
	}
	clear(s.live)
}

// deleteRecreate deletes the topic and creates it again under the name with empty logs: the
// new incarnation starts afresh, and nothing of the old one (frontier, acked-ahead offsets,
// handles) applies to it.
func (s *nodeSim) deleteRecreate(rt *rapid.T) {
	s.h.routes.Delete("orders")
	require.NoError(rt, s.h.node.DeleteTopic("orders"))
	for _, p := range []int32{0, 1} {
		s.h.logs.Replace("orders", p, routertest.NewMemLog())
	}
	s.h.routes.Set("orders", 0, 1)
	clear(s.produced)
	clear(s.live)
	clear(s.ackedAt)
	clear(s.mayReturn)
	clear(s.corrupt)
	clear(s.oldest)
	s.held = nil
}

func (s *nodeSim) gracefulRestart(rt *rapid.T) {
	s.h.close()
	s.h.start()
	for _, l := range s.held {
		s.deadAfter[l.msg.Receipt] = true
	}
	clear(s.live)
}

// drain ends a schedule: a graceful restart, then everything consumed and acked. Every
// record produced must end acked (I7).
func (s *nodeSim) drain() {
	s.gracefulRestart(s.rt)
	s.held = nil
	for round := 0; ; round++ {
		msgs, err := s.h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 100})
		if err != nil {
			s.rt.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			s.delivered(m)
			if err := s.h.ack(m); err != nil {
				s.rt.Fatalf("drain ack: %v", err)
			}
			s.ackedAt[simKey{m.Partition, m.Offset}] = s.now()
		}
		if round > 1000 {
			s.rt.Fatal("the drain does not end")
		}
	}
	for p, n := range s.produced {
		for off := range n {
			k := simKey{p, off}
			if _, ok := s.ackedAt[k]; !ok && !s.corrupt[k] && off >= s.oldest[p] {
				s.rt.Fatalf("record %d/%d lost: produced, retained, readable, never acked (I7)", p, off)
			}
		}
	}
	st := s.h.node.Stats().Shards
	if st.CorruptSkipped > uint64(len(s.corrupt)) {
		s.rt.Fatalf("%d records skipped as corrupt, %d made corrupt", st.CorruptSkipped, len(s.corrupt))
	}
}

// inBubble hands rapid a *testing.T it does not recognise, so it does not ask for the test's
// deadline, which testing forbids inside a synctest bubble.
type inBubble struct{ *testing.T }

func TestNodeUnderRandomSchedules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rapid.Check(inBubble{t}, func(rt *rapid.T) {
			h := newHarness(t, 0, 1)
			h.cfg.Topic = func(string) router.TopicConfig {
				return router.TopicConfig{VisibilityTimeout: simVisibility, MaxInFlight: 8, MaxAckedAhead: 8}
			}
			h.close()
			h.start()
			s := &nodeSim{
				h: h, rt: rt,
				produced:  map[int32]int64{},
				live:      map[simKey]simLease{},
				ackedAt:   map[simKey]time.Time{},
				mayReturn: map[simKey]bool{},
				deadAfter: map[inflight.Handle]bool{},
				corrupt:   map[simKey]bool{},
				oldest:    map[int32]int64{},
			}
			defer func() {
				if h.node != nil {
					h.node.Close()
				}
			}()
			rt.Repeat(map[string]func(*rapid.T){
				"produce":         s.produce,
				"consume":         s.consume,
				"ack":             s.ack,
				"ack2":            s.ack,
				"nack":            s.nack,
				"sleep":           s.sleep,
				"processCrash":    s.processCrash,
				"powerCut":        s.powerCut,
				"gracefulRestart": s.gracefulRestart,
				"corrupt":         s.corruptRecord,
				"retention":       s.retention,
				"damageState":     s.damageState,
				"deleteRecreate":  s.deleteRecreate,
			})
			s.drain()
		})
	})
}
