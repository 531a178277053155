package tokens

import (
	"flag"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The state machines need runs longer than rapid's default of 30 steps to reach their
	// corners (a sweep of marked slots takes a few registrations and drops in a row, a lapsed
	// token queued again behind a live one a few clock moves), so raise the steps and the
	// checks, unless the command line (-rapid.steps, -rapid.checks) or the environment
	// (RAPID_STEPS, RAPID_CHECKS) chose. RAPID_CHECKS=100000 makes a long run.
	explicit := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	for name, value := range map[string]string{"steps": "200", "checks": "500"} {
		_, env := os.LookupEnv("RAPID_" + strings.ToUpper(name))
		if !explicit["rapid."+name] && !env {
			flag.Set("rapid."+name, value)
		}
	}
	goleak.VerifyTestMain(m)
}
