package router_test

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"narad.dev/consume/internal/testflags"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The node simulation needs more schedules than rapid's default 100 to reach crashes at
	// the edges of the documented windows (a fifth of them under the race detector).
	testflags.Rapid(500, 0)
	goleak.VerifyTestMain(m)
}
