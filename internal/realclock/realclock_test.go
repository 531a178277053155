package realclock

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClock(t *testing.T) {
	for _, c := range []Clock{{}, New()} {
		before := time.Now()
		if now := c.Now(); now.Before(before) {
			t.Fatalf("Now went back: %v before %v", now, before)
		}
		stop := c.AfterFunc(time.Hour, func() { t.Error("a stopped timer fired") })
		if !stop() {
			t.Fatal("stopping a pending timer reports true")
		}
		done := make(chan struct{})
		c.AfterFunc(0, func() { close(done) })
		<-done
	}
}

// An anchored clock moves on with the monotonic clock, and agrees with time.Now while the
// wall clock is not stepped (here, in a bubble, where time is fake and never stepped).
func TestAnchoredClockMovesWithTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		for _, d := range []time.Duration{0, time.Nanosecond, time.Second, 90 * time.Minute} {
			time.Sleep(d)
			if now, want := c.Now(), time.Now(); !now.Equal(want) {
				t.Fatalf("Now() = %v, time.Now() = %v", now, want)
			}
		}
	})
}

func BenchmarkNow(b *testing.B) {
	for _, clock := range []struct {
		name string
		c    Clock
	}{{"wall", Clock{}}, {"anchored", New()}} {
		b.Run(clock.name, func(b *testing.B) {
			b.ReportAllocs()
			var sum int64
			for b.Loop() {
				sum += clock.c.Now().UnixNano()
			}
			_ = sum
		})
	}
}
