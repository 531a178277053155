package testflags

import (
	"flag"
	"os"
	"strconv"
	"strings"
)

// RaceShare divides the checks under the race detector.
const RaceShare = 5

// Rapid sets -rapid.checks to checks (divided by RaceShare under the race detector, at least
// one) and, if steps is above zero, -rapid.steps to steps, each unless the command line
// (-rapid.checks, -rapid.steps) or the environment (RAPID_CHECKS, RAPID_STEPS) chose. Call it
// from TestMain after flag.Parse; it reports what it set, by flag name.
func Rapid(checks, steps int) map[string]string {
	return setRapid(flag.CommandLine, os.LookupEnv, Race, checks, steps)
}

func setRapid(fs *flag.FlagSet, lookupEnv func(string) (string, bool), race bool, checks, steps int) map[string]string {
	if race {
		checks = max(checks/RaceShare, 1)
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	set := map[string]string{}
	for name, value := range map[string]int{"checks": checks, "steps": steps} {
		_, env := lookupEnv("RAPID_" + strings.ToUpper(name))
		if value <= 0 || explicit["rapid."+name] || env || fs.Lookup("rapid."+name) == nil {
			continue
		}
		v := strconv.Itoa(value)
		if fs.Set("rapid."+name, v) == nil {
			set["rapid."+name] = v
		}
	}
	return set
}
