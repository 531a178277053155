package pump

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"testing"
)

// TestCancelRaceStress: consumers park and have their contexts cancelled at random instants while
// records arrive, with the real scheduler (run it under -race, many times). Every Take's record is
// either returned by exactly one Wait or Released, never both and never neither, and every record
// produced is either received or back in the Source at the end (item 84).
func TestCancelRaceStress(t *testing.T) {
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	for range 3 {
		cancelRaceRound(t, rounds)
	}
}

func cancelRaceRound(t *testing.T, rounds int) {
	const consumers, parts = 8, 4
	src := newMemSource()
	src.setOwned("t", 0, 1, 2, 3)
	p := New[rec](src)
	ctx, stop := context.WithCancel(context.Background())
	runDone := make(chan error)
	go func() { runDone <- p.Run(ctx) }()

	produced := consumers * rounds / 2
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		for i := range produced {
			src.add("t", int32(i%parts), i)
			p.NotifyPartition("t", int32(i%parts))
			if i%8 == 0 {
				runtime.Gosched()
			}
		}
	}()

	var mu sync.Mutex
	received := map[int]rec{} // by lease (Take sequence number)
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Go(func() {
			for range rounds {
				wctx, cancel := context.WithCancel(ctx)
				spins := rand.N(64)
				var cg sync.WaitGroup
				cg.Go(func() {
					for range spins {
						runtime.Gosched()
					}
					cancel()
				})
				pinned := int32(-1)
				if c%3 == 0 {
					pinned = int32(c % parts)
				}
				r, err := p.Wait(wctx, "t", pinned)
				cg.Wait()
				switch {
				case err == nil:
					mu.Lock()
					if _, dup := received[r.take]; dup {
						t.Errorf("lease %d received twice", r.take)
					}
					received[r.take] = r
					mu.Unlock()
				case errors.Is(err, context.Canceled):
					if r != (rec{}) {
						t.Errorf("Wait returned ctx.Err() with record %+v", r)
					}
				default:
					t.Errorf("Wait: %v", err)
				}
			}
		})
	}
	wg.Wait()
	<-prodDone
	p.Close()
	stop()
	if err := <-runDone; err != nil {
		t.Fatalf("Run: %v", err)
	}

	src.mu.Lock()
	defer src.mu.Unlock()
	released := map[int]bool{}
	for _, r := range src.released {
		if released[r.take] {
			t.Fatalf("lease %d released twice", r.take)
		}
		if _, ok := received[r.take]; ok {
			t.Fatalf("lease %d both received and released", r.take)
		}
		released[r.take] = true
	}
	if len(received)+len(released) != src.leases {
		t.Fatalf("%d leases, %d received + %d released", src.leases, len(received), len(released))
	}
	var ids []int
	for _, r := range received {
		ids = append(ids, r.id)
	}
	for _, q := range src.parts["t"] {
		ids = append(ids, q...)
	}
	sort.Ints(ids)
	if len(ids) != produced {
		t.Fatalf("%d records accounted for, %d produced", len(ids), produced)
	}
	for i, id := range ids {
		if id != i {
			t.Fatalf("record %d lost or duplicated", i)
		}
	}
	t.Logf("%d leases: %d received, %d released", src.leases, len(received), len(released))
}
