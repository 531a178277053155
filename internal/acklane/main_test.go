package acklane

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"narad.dev/consume/internal/testflags"
)

func TestMain(m *testing.M) {
	flag.Parse()
	testflags.Rapid(300, 0)
	goleak.VerifyTestMain(m)
}
