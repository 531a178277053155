package cancelmemory

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"narad.dev/consume/internal/testflags"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// TestCancelMemoryAgainstModel ran at router's 500 checks (a fifth under the race
	// detector), enough to reach the index's wrap at 2^32 and the compactions after a burst.
	testflags.Rapid(500, 0)
	goleak.VerifyTestMain(m)
}
