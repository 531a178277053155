package latency

import (
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	if got := Of(nil); got != (Percentiles{}) {
		t.Fatalf("Of(nil) = %+v", got)
	}
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := Of(d)
	want := Percentiles{N: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if got != want {
		t.Fatalf("Of = %+v, want %+v", got, want)
	}
	if d[0] != 100*time.Millisecond {
		t.Fatal("Of sorted its argument")
	}
}

func TestRound(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{1234567 * time.Microsecond, 1230 * time.Millisecond},
		{1234567 * time.Nanosecond, 1230 * time.Microsecond},
		{1234 * time.Nanosecond, time.Microsecond},
	} {
		if got := Round(c.in); got != c.want {
			t.Errorf("Round(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
