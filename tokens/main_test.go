package tokens

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"narad.dev/consume/internal/testflags"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The state machines need runs longer than rapid's default of 30 steps to reach their
	// corners (a sweep of marked slots takes a few registrations and drops in a row, a lapsed
	// token queued again behind a live one a few clock moves), so raise the steps and the
	// checks (a fifth of them under the race detector). RAPID_CHECKS=100000 makes a long run.
	testflags.Rapid(500, 200)
	goleak.VerifyTestMain(m)
}
