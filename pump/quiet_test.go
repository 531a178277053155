package pump

import (
	"context"
	"testing"
	"testing/synctest"
)

// TestWaitQuiet: a quiet join does not kick a pass, so a record already there (given back by
// a caller that could not use it) is not handed over again until the next wake.
func TestWaitQuiet(t *testing.T) {
	withPump(t, func(t *testing.T, ctx context.Context, p *Pump[rec], src *memSource) {
		src.add("t", 0, 7)
		ch := make(chan outcome, 1)
		go func() {
			r, err := p.WaitQuiet(ctx, "t", -1)
			ch <- outcome{r, err}
		}()
		synctest.Wait()
		mustPark(t, ch)
		if n := src.takeCount(); n != 0 {
			t.Fatalf("%d Take calls for a quiet join, want none", n)
		}
		if n := p.Parked("t"); n != 1 {
			t.Fatalf("Parked = %d, want 1", n)
		}
		p.NotifyPartition("t", 0)
		synctest.Wait()
		mustGet(t, ch, 7)
	})
}
