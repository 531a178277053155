package inflight

import (
	"flag"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The state machine needs long runs to reach its corners (a delayed frontier hole at the
	// acked-ahead cap takes about a hundred steps), so raise rapid's default of 30 steps
	// and its default of 100 checks, unless the command line (-rapid.steps, -rapid.checks)
	// or the environment (RAPID_STEPS, RAPID_CHECKS) chose. RAPID_CHECKS=100000 makes a
	// long run.
	explicit := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	for name, value := range map[string]string{"steps": "200", "checks": "1000"} {
		_, env := os.LookupEnv("RAPID_" + strings.ToUpper(name))
		if !explicit["rapid."+name] && !env {
			flag.Set("rapid."+name, value)
		}
	}
	goleak.VerifyTestMain(m)
}
