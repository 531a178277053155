package realclock

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClock(t *testing.T) {
	var c Clock
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
