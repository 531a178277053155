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
	for _, banned := range []string{"net/http", "crypto/tls"} {
		require.False(t, slices.Contains(deps("router"), banned), "router must not link %s", banned)
	}
	core := []string{"inflight", "offsets", "pump", "tokens"}
	// The node's mechanisms (internal/cancelmemory and those after it) have contracts of their
	// own: router uses them, and they know nothing of it.
	for _, pkg := range append(core, "internal/wire", "internal/partitionmap", "internal/handoff", "internal/storecommit",
		"internal/cancelmemory", "internal/workers", "internal/budget") {
		d := deps(pkg)
		require.False(t, slices.Contains(d, "narad.dev/consume/router"), "%s imports router", pkg)
		for _, other := range core {
			if other == pkg || (slices.Contains([]string{"internal/handoff", "internal/cancelmemory"}, pkg) && other == "inflight") ||
				(pkg == "internal/storecommit" && slices.Contains([]string{"inflight", "offsets"}, other)) {
				continue
			}
			require.False(t, slices.Contains(d, "narad.dev/consume/"+other), "%s imports %s", pkg, other)
		}
	}
}
