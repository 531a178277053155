package inflight

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

var epoch = time.Unix(1_700_000_000, 0)

func benchShard(cfg Config) *Shard {
	return NewShard("bench", 0, Options{Config: cfg, Seed: [32]byte{1}}, State{Frontier: -1})
}

// BenchmarkReserveAck is one reserve then one ack on one shard, in steady state (the
// frontier advances by one each iteration). Target: 0 allocs/op, within 4x of
// BenchmarkPrimitives.
func BenchmarkReserveAck(b *testing.B) {
	s := benchShard(Config{})
	now := epoch
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		lease, err := s.ReserveNext(now, 1<<62)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Ack(now, lease.Handle); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 0 {
			now = now.Add(time.Millisecond)
		}
	}
}

// BenchmarkReserveAckCounted is BenchmarkReserveAck under MaxDeliveries, each record handed
// over (Handed) before its ack, as a scan hands its records over: what counting attempts
// costs the cycle. Compare it with BenchmarkReserveAck in one run (target: within 10%).
func BenchmarkReserveAckCounted(b *testing.B) {
	s := benchShard(Config{MaxDeliveries: 5})
	now := epoch
	b.ReportAllocs()
	var one [1]Lease
	for i := 0; b.Loop(); i++ {
		lease, err := s.ReserveNext(now, 1<<62)
		if err != nil {
			b.Fatal(err)
		}
		one[0] = lease
		s.Handed(one[:])
		if err := s.Ack(now, lease.Handle); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 0 {
			now = now.Add(time.Millisecond)
		}
	}
}

// BenchmarkPrimitives is the baseline of BenchmarkReserveAck: the primitive work a reserve →
// ack cycle must do, two map operations (insert, delete), one heap push and pop and one
// ChaCha8 draw, with no locking and no bookkeeping.
func BenchmarkPrimitives(b *testing.B) {
	leases := make(map[int64]pending)
	var h minHeap[deadline]
	rng := rand.NewChaCha8([32]byte{1})
	b.ReportAllocs()
	for i := int64(0); b.Loop(); i++ {
		n := rng.Uint64()
		leases[i] = pending{nonce: n, until: i}
		h.push(deadline{at: i, offset: i, nonce: n})
		delete(leases, i)
		h.pop()
	}
}

// BenchmarkExtend re-arms one lease (a fresh heap entry each time, the stale ones
// compacted away).
func BenchmarkExtend(b *testing.B) {
	s := benchShard(Config{})
	lease, err := s.ReserveNext(epoch, 1)
	if err != nil {
		b.Fatal(err)
	}
	now := epoch
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		if _, err := s.Extend(now, lease.Handle, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNackReserve nacks a lease and leases the record again.
func BenchmarkNackReserve(b *testing.B) {
	s := benchShard(Config{})
	lease, err := s.ReserveNext(epoch, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Nack(epoch, lease.Handle, 0); err != nil {
			b.Fatal(err)
		}
		if lease, err = s.ReserveNext(epoch, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPurge10000 is the 1 s sweeper's pass over a shard with 10,000 live leases, none
// due: the cost of a sweep that finds nothing.
func BenchmarkPurge10000(b *testing.B) {
	s := benchShard(Config{MaxInFlight: 10_000})
	for range 10_000 {
		if _, err := s.ReserveNext(epoch, 1<<40); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := s.Purge(epoch); n != 0 {
			b.Fatal(n)
		}
	}
}

// BenchmarkPurgeExpire10000 expires 10,000 leases in one sweep (reported per lease).
func BenchmarkPurgeExpire10000(b *testing.B) {
	s := benchShard(Config{MaxInFlight: 10_000})
	now := epoch
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for range 10_000 {
			if _, err := s.ReserveNext(now, 10_000); err != nil {
				b.Fatal(err)
			}
		}
		now = now.Add(DefaultVisibilityTimeout)
		b.StartTimer()
		if n := s.Purge(now); n != 10_000 {
			b.Fatal(n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/lease")
}

// BenchmarkReserveAfterAckedAheadRun leases the frontier hole below a long run of offsets
// acked ahead, and the offset after the run, as a restored shard does: the run is passed
// once, not scanned per reserve.
func BenchmarkReserveAfterAckedAheadRun(b *testing.B) {
	s := benchShard(Config{MaxAckedAhead: 1 << 20})
	s.Restore(State{Frontier: -1, AckedAhead: []Run{{1, 1000}}})
	b.ReportAllocs()
	for b.Loop() {
		lease, err := s.ReserveNext(epoch, 1<<40)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Nack(epoch, lease.Handle, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReserveBatchAck is BenchmarkReserveAck in batches of 100: one ReserveBatch, then
// one AckMany of its leases, reported per record.
func BenchmarkReserveBatchAck(b *testing.B) {
	benchBatches(b, benchShard(Config{}), nil)
}

// BenchmarkReserveBatchBindAck is BenchmarkReserveBatchAck on an ordered shard, records keyed
// round robin over 10,000 keys: each batch of 100 is bound to its keys (Bind) before it is
// acked, as a router's scan does; ordered=false binds as on any topic (a no-op), the
// baseline in the same run.
func BenchmarkReserveBatchBindAck(b *testing.B) {
	const keys = 10_000
	for _, ordered := range []bool{false, true} {
		b.Run(fmt.Sprintf("ordered=%t", ordered), func(b *testing.B) {
			s := benchShard(Config{Ordered: ordered})
			keyOf := make([]uint64, 100)
			kept := make([]bool, 100)
			benchBatches(b, s, func(now time.Time, handles []Handle) {
				for j, h := range handles {
					keyOf[j] = uint64(h.Offset%keys) + 1
				}
				s.Bind(now, handles, keyOf[:len(handles)], false, kept)
			})
		})
	}
}

// benchBatches reserves batches of 100 from s and acks each with one AckMany, bind (if not
// nil) called on each batch's handles between the two, and reports the time per record.
func benchBatches(b *testing.B, s *Shard, bind func(now time.Time, handles []Handle)) {
	now := epoch
	leases := make([]Lease, 0, 100)
	handles := make([]Handle, 100)
	errs := make([]error, 100)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var err error
		if leases, err = s.ReserveBatch(now, 1<<62, 0, 100, leases[:0]); err != nil {
			b.Fatal(err)
		}
		for j, l := range leases {
			handles[j] = l.Handle
		}
		if bind != nil {
			bind(now, handles[:len(leases)])
		}
		s.AckMany(now, handles[:len(leases)], errs)
		if i%10 == 0 {
			now = now.Add(time.Millisecond)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/record")
}

// BenchmarkReserveAhead is a gateway's read-ahead on the owner: one ReserveAhead of 32
// reservations, a Confirm of each as a consumer gets it, and one AckMany of them, reported
// per record. Target: 0 allocs/op, close to BenchmarkReserveBatchAck per record.
func BenchmarkReserveAhead(b *testing.B) {
	s := benchShard(Config{})
	now := epoch
	leases := make([]Lease, 0, 32)
	handles := make([]Handle, 32)
	errs := make([]error, 32)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var err error
		if leases, err = s.ReserveAhead(now, 1<<62, 0, 32, leases[:0]); err != nil {
			b.Fatal(err)
		}
		if len(leases) != 32 {
			b.Fatalf("reserved %d ahead, want 32", len(leases))
		}
		for j, l := range leases {
			if err := s.Confirm(now, l.Handle); err != nil {
				b.Fatal(err)
			}
			handles[j] = l.Handle
		}
		s.AckMany(now, handles, errs)
		if i%32 == 0 {
			now = now.Add(time.Millisecond)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/32, "ns/record")
}

// benchHandles are handles as a shard hands them out: small partitions and offsets, and
// nonces drawn over the whole uint64 range (mostly 19 and 20 digits).
func benchHandles() []Handle {
	rng := rand.New(rand.NewPCG(1, 2))
	hs := make([]Handle, 256)
	for i := range hs {
		hs[i] = Handle{Partition: rng.Int32N(64), Offset: rng.Int64N(1 << 40), Nonce: rng.Uint64() | 1}
	}
	return hs
}

// BenchmarkHandleString formats a receipt handle as a consumer receives it.
func BenchmarkHandleString(b *testing.B) {
	hs := benchHandles()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = hs[i%len(hs)].String()
	}
}

// BenchmarkParseHandle parses a receipt handle as an ack does.
func BenchmarkParseHandle(b *testing.B) {
	hs := benchHandles()
	texts := make([]string, len(hs))
	for i, h := range hs {
		texts[i] = h.String()
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := ParseHandle(texts[i%len(texts)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAckOldestOfHeld is a shard that holds N leases, granted one at a time at
// increasing times (a consumer or a forwarding owner with N in hand): each op grants one
// more and acks the oldest, so the expiry queue's earliest entry goes stale every time.
func BenchmarkAckOldestOfHeld(b *testing.B) {
	for _, held := range []int{16, 1024, 16384} {
		b.Run(fmt.Sprint(held), func(b *testing.B) {
			s := benchShard(Config{MaxInFlight: 1 << 20})
			now := epoch
			var window []Handle
			for range held {
				now = now.Add(time.Microsecond)
				lease, err := s.ReserveNext(now, 1<<62)
				if err != nil {
					b.Fatal(err)
				}
				window = append(window, lease.Handle)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				now = now.Add(time.Microsecond)
				lease, err := s.ReserveNext(now, 1<<62)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Ack(now, window[i%held]); err != nil {
					b.Fatal(err)
				}
				window[i%held] = lease.Handle
			}
		})
	}
}

// BenchmarkAckAboveHole acks leases above a held frontier hole, then the hole, in cycles
// of 1,024 leases, reported per record (a reserve and an ack): the acked-ahead set's
// bookkeeping on the ack path and the frontier's advance over what it parked. run acks in grant order, so every ack above
// the hole extends one run; scattered acks the odd offsets first (512 runs of one) and then
// the even ones, each joining two runs.
func BenchmarkAckAboveHole(b *testing.B) {
	const window = 1024
	for _, order := range []string{"run", "scattered"} {
		b.Run(order, func(b *testing.B) {
			s := benchShard(Config{})
			now := epoch
			leases := make([]Handle, window)
			acks := make([]int, 0, window)
			for i := 1; i < window; i += 2 {
				acks = append(acks, i)
			}
			for i := 2; i < window; i += 2 {
				acks = append(acks, i)
			}
			if order == "run" {
				acks = acks[:0]
				for i := 1; i < window; i++ {
					acks = append(acks, i)
				}
			}
			acks = append(acks, 0) // the hole last: the frontier advances over the window
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Millisecond)
				for i := range leases {
					lease, err := s.ReserveNext(now, 1<<62)
					if err != nil {
						b.Fatal(err)
					}
					leases[i] = lease.Handle
				}
				for _, i := range acks {
					if err := s.Ack(now, leases[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/window, "ns/record")
		})
	}
}

// BenchmarkSnapshotAboveHole is the committer's snapshot of a shard whose frontier hole is
// held while n offsets are acked above it, each leased and acked in turn (one run): what a
// tick pays while a hole lasts (up to a visibility timeout). It also reports the heap the
// acked-ahead set took (B/set: the heap's growth over the n acks, measured once;
// indicative).
func BenchmarkSnapshotAboveHole(b *testing.B) {
	for _, n := range []int{1024, 65536} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := benchShard(Config{MaxAckedAhead: 1 << 20})
			if _, err := s.ReserveNext(epoch, 1<<62); err != nil { // the hole, held
				b.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range n {
				lease, err := s.ReserveNext(epoch, 1<<62)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Ack(epoch, lease.Handle); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			if s.Stats().AckedAhead != n {
				b.Fatalf("acked ahead %d, want %d", s.Stats().AckedAhead, n)
			}
			var st State
			b.ReportAllocs()
			for b.Loop() {
				s.Snapshot(&st)
			}
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)), "B/set")
		})
	}
}

// BenchmarkDrainRequeued drains a requeued dead-letter backlog: n records quarantined, all
// requeued, then each reserved and acked, lowest first. ns/rec should not grow with n: a
// reserve finds the lowest requeued record due from a heap (requeuedDue), where a scan of
// the quarantine made the drain quadratic (16,000 records: 92 µs a record).
func BenchmarkDrainRequeued(b *testing.B) {
	for _, n := range []int{1_000, 16_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				s := benchShard(Config{MaxInFlight: n})
				hwm := int64(n)
				for range n {
					lease, err := s.ReserveNext(epoch, hwm)
					if err != nil {
						b.Fatal(err)
					}
					if err := s.Reject(epoch, lease.Handle); err != nil {
						b.Fatal(err)
					}
				}
				for off := range hwm {
					if !s.Requeue(epoch, off) {
						b.Fatalf("offset %d not requeued", off)
					}
				}
				b.StartTimer()
				for want := range hwm {
					lease, err := s.ReserveNext(epoch, hwm)
					if err != nil {
						b.Fatal(err)
					}
					if lease.Offset != want {
						b.Fatalf("reserved %d, want %d: lowest first", lease.Offset, want)
					}
					if err := s.Ack(epoch, lease.Handle); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/rec")
		})
	}
}
