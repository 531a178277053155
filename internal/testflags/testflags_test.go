package testflags

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

// rapidFlags is a flag set with rapid's two flags, as a test binary that imports rapid has.
func rapidFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.Int("rapid.checks", 100, "")
	fs.Int("rapid.steps", 30, "")
	return fs
}

func TestSetRapid(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		name          string
		args          []string
		env           string // an environment variable set
		race          bool
		checks, steps int
		want          map[string]string
	}{
		{"defaults", nil, "", false, 500, 200, map[string]string{"rapid.checks": "500", "rapid.steps": "200"}},
		{"a fifth under race", nil, "", true, 500, 0, map[string]string{"rapid.checks": "100"}},
		{"at least one", nil, "", true, 3, 0, map[string]string{"rapid.checks": "1"}},
		{"the command line chose", []string{"-rapid.checks=3"}, "", false, 500, 200, map[string]string{"rapid.steps": "200"}},
		{"the environment chose", nil, "RAPID_STEPS", true, 500, 200, map[string]string{"rapid.checks": "100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := rapidFlags()
			require.NoError(t, fs.Parse(tc.args))
			env := noEnv
			if tc.env != "" {
				env = func(k string) (string, bool) { return "7", k == tc.env }
			}
			require.Equal(t, tc.want, setRapid(fs, env, tc.race, tc.checks, tc.steps))
			for name, v := range tc.want {
				require.Equal(t, v, fs.Lookup(name).Value.String())
			}
		})
	}
	// A binary without rapid: nothing to set.
	require.Empty(t, setRapid(flag.NewFlagSet("bare", flag.ContinueOnError), noEnv, false, 500, 200))
}
