package inflight

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"narad.dev/consume/internal/testflags"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The state machine needs long runs to reach its corners (a delayed frontier hole at the
	// acked-ahead cap takes about a hundred steps), so raise rapid's default of 30 steps
	// and its default of 100 checks (a fifth of them under the race detector).
	// RAPID_CHECKS=100000 makes a long run.
	testflags.Rapid(1000, 200)
	goleak.VerifyTestMain(m)
}
