package router_test

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/inflight"
	"narad.dev/consume/offsets"
	"narad.dev/consume/pump"
	"narad.dev/consume/router"
)

// The router's names of the parts' errors are the same values: errors.Is holds both ways, so
// a host testing with router's names sees what the parts return, wrapped or not.
func TestExportedErrorsAreTheParts(t *testing.T) {
	for _, tc := range []struct {
		name         string
		router, part error
	}{
		{"ErrGone", router.ErrGone, inflight.ErrGone},
		{"ErrAlreadySettled", router.ErrAlreadySettled, inflight.ErrAlreadySettled},
		{"ErrMalformedHandle", router.ErrMalformedHandle, inflight.ErrMalformedHandle},
		{"ErrShardGone", router.ErrShardGone, offsets.ErrShardGone},
		{"ErrStranded", router.ErrStranded, offsets.ErrStranded},
		{"ErrTopicDropped", router.ErrTopicDropped, pump.ErrTopicDropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, fmt.Errorf("wrapped: %w", tc.part), tc.router)
			assert.ErrorIs(t, fmt.Errorf("wrapped: %w", tc.router), tc.part)
		})
	}
	h, err := router.ParseHandle("3:17:99")
	require.NoError(t, err)
	assert.Equal(t, inflight.Handle{Partition: 3, Offset: 17, Nonce: 99}, h)
	_, err = router.ParseHandle("3:17:0")
	assert.True(t, errors.Is(err, router.ErrMalformedHandle))
	assert.Equal(t, "nacked", router.ReasonNacked.String())
}

// goList runs the go command on the module's packages. The test is skipped where there is no
// go command (a test binary copied elsewhere).
func goList(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	return string(out)
}

// One import: the examples and the test kit a host copies import router, never the parts it
// is built of (their tests may).
func TestHostsImportRouterOnly(t *testing.T) {
	out := goList(t, "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "narad.dev/consume/examples/...", "narad.dev/consume/router/routertest")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pkg, imports, _ := strings.Cut(line, ": ")
		for _, imp := range strings.Fields(imports) {
			switch imp {
			case "narad.dev/consume/inflight", "narad.dev/consume/offsets", "narad.dev/consume/pump":
				t.Errorf("%s imports %s: a host's code imports router only", pkg, imp)
			}
		}
	}
}

// No side effects on import: nothing router depends on registers a handler on
// http.DefaultServeMux (expvar mounts /debug/vars in its init, net/http/pprof /debug/pprof).
// The exporters that need expvar live in router/metrics, which a host imports on purpose.
func TestRouterImportsNoExpvar(t *testing.T) {
	deps := strings.Fields(goList(t, "-deps", "narad.dev/consume/router"))
	require.Contains(t, deps, "narad.dev/consume/router", "go list answered the dependencies of router")
	for _, dep := range deps {
		switch dep {
		case "expvar", "net/http/pprof":
			t.Errorf("router depends on %s, whose init registers on http.DefaultServeMux", dep)
		}
	}
}
