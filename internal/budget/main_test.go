package budget

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"narad.dev/consume/internal/testflags"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// TestBudgetsAgainstModel ran at router's 500 checks (a fifth under the race detector).
	testflags.Rapid(500, 0)
	goleak.VerifyTestMain(m)
}
