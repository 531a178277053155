package main

import (
	"testing"
	"time"

	"narad.dev/consume/examples/internal/delivery"
	"narad.dev/consume/examples/internal/queueclient"
)

// A lease a gateway read ahead began before its consume (up to the hold) and says so in its
// expiry: a later delivery of the record after that expiry is not a second holder, one
// before it is.
func TestLedgerTakesALeaseAtItsExpiry(t *testing.T) {
	const visibility = 2 * time.Second
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		again time.Duration // when the record is delivered again, after the first consume began
		want  int           // two holders counted
	}{
		{"after the expiry", visibility - 30*time.Millisecond, 0},
		{"before the expiry", visibility - 50*time.Millisecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(visibility, 200*time.Millisecond, []phase{steady})
			pos := delivery.Position{Partition: 1, Offset: 17}
			l.Produced(pos, "v", t0.Add(-time.Second))
			// Read ahead 40 ms before the consume that took it began: its lease ends 40 ms
			// before the consume's start plus the visibility timeout.
			first := queueclient.Message{Partition: 1, Offset: 17, Value: "v", Expiry: t0.Add(visibility - 40*time.Millisecond)}
			l.Delivered("node-2", &first, 0, t0, t0.Add(time.Millisecond))
			again := queueclient.Message{Partition: 1, Offset: 17, Value: "v", Expiry: t0.Add(tc.again + visibility)}
			l.Delivered("node-1", &again, 0, t0.Add(tc.again-time.Millisecond), t0.Add(tc.again))
			if got := l.c[steady].twoHolders; got != tc.want {
				t.Errorf("two holders %d, want %d", got, tc.want)
			}
		})
	}
}
