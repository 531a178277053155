package router_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The package graph keeps its arrows one way: router assembles the core packages, which do
// not import router or each other beyond what they share, and router links no HTTP stack (a
// host that serves no HTTP pays for none; httpapi, sqsapi and nodehttp bring it).
func TestImportGraph(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", "narad.dev/consume/"+pkg).Output()
		require.NoError(t, err, "go list -deps %s", pkg)
		return strings.Fields(string(out))
	}
	routerDeps := deps("router")
	for _, banned := range []string{"net/http", "crypto/tls"} {
		require.False(t, slices.Contains(routerDeps, banned), "router must not link %s", banned)
	}
	core := []string{"inflight", "offsets", "pump", "tokens"}
	// What each package may import of the core packages besides itself. The node's
	// mechanisms (internal/acklane, internal/budget, internal/cancelmemory, internal/statedir,
	// internal/workers) have contracts of their own: router uses them, and they know nothing
	// of it.
	mayImport := map[string][]string{
		"inflight": nil, "offsets": nil, "pump": nil, "tokens": nil,
		"internal/wire": nil, "internal/partitionmap": nil, "internal/workers": nil, "internal/budget": nil,
		"internal/acklane": nil, "internal/readmap": nil,
		"internal/handoff": {"inflight"}, "internal/cancelmemory": {"inflight"},
		"internal/storecommit": {"inflight", "offsets"}, "internal/statedir": {"offsets"},
		"internal/ackstate": {"inflight", "offsets"},
		"crashfs":           {"offsets"},
	}
	for pkg, allowed := range mayImport {
		d := deps(pkg)
		require.False(t, slices.Contains(d, "narad.dev/consume/router"), "%s imports router", pkg)
		for _, other := range core {
			if other != pkg && !slices.Contains(allowed, other) {
				require.False(t, slices.Contains(d, "narad.dev/consume/"+other), "%s imports %s", pkg, other)
			}
		}
	}
}
