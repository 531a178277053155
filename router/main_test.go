package router_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The node simulation needs more schedules than rapid's default 100 to reach crashes at
	// the edges of the documented windows; RAPID_CHECKS or -rapid.checks override this.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if _, env := os.LookupEnv("RAPID_CHECKS"); !explicit && !env {
		flag.Set("rapid.checks", "500")
	}
	goleak.VerifyTestMain(m)
}
