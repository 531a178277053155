package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"narad.dev/consume/examples/internal/launch"
)

func TestMain(m *testing.M) {
	// The cluster test starts this test binary as its node processes (the os.Args[0]
	// re-exec pattern): run the node and leave before the tests.
	launch.Child("-node", parseFlags, run)
	goleak.VerifyTestMain(m)
}

// TestCluster runs the whole example end to end in short: three node processes (this test
// binary, started again as each node), a few hundred records, the owner node-1 killed with
// SIGKILL midway and started again over its directory.
func TestCluster(t *testing.T) {
	cfg := config{
		ParentFlags: launch.ParentFlags{Records: 400, Clients: 2, Visibility: 2 * time.Second, Dir: t.TempDir(),
			Progress: time.Second, Timeout: 45 * time.Second, Seed: 1},
		rate:     250,
		downtime: 300 * time.Millisecond,
	}
	var out bytes.Buffer
	rep, err := runCluster(t.Context(), cfg, &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)

	require.Equal(t, 400, rep.produced)
	require.Empty(t, rep.lost, "records produced and never acked")
	require.Empty(t, rep.violations, "acked records delivered again outside the crash window")
	require.Empty(t, rep.mismatches)
	require.True(t, rep.drained, "every partition drained")
	require.Equal(t, rep.produced+rep.landed, rep.acked+rep.ackedUnsure, "every record acked")
	require.LessOrEqual(t, rep.windowOldest, crashWindow)
	require.False(t, rep.killAt.IsZero(), "node-1 was killed")
	require.False(t, rep.restartAt.IsZero(), "and started again")
	require.Positive(t, rep.nacks, "the seed nacks some")
	require.Positive(t, rep.abandoned, "the seed abandons some")
	require.Positive(t, rep.reasons[againAbandoned], "abandoned records came back after their visibility timeout")
	require.Positive(t, rep.latency[local].N, "local deliveries")
	require.Positive(t, rep.latency[probe].N+rep.latency[claim].N, "deliveries across nodes")
	require.Empty(t, rep.stopErrs, "every node shut down cleanly on SIGTERM")
	require.Contains(t, out.String(), "ok: nothing lost")

	// The state is kept in cfg.Dir, and a second run over it is refused.
	_, err = runCluster(t.Context(), cfg, &out)
	require.ErrorContains(t, err, "earlier run")
}

func TestFlags(t *testing.T) {
	var errOut bytes.Buffer
	cfg, err := parseFlags(nil, &errOut)
	require.NoError(t, err)
	require.Equal(t, 6000, cfg.Records)
	require.Equal(t, 2*time.Second, cfg.Visibility)
	require.False(t, cfg.Node)

	cfg, err = parseFlags([]string{"-node", "-config", "x.json", "-id", "node-2"}, &errOut)
	require.NoError(t, err)
	require.True(t, cfg.Node)
	require.Equal(t, "node-2", cfg.ID)

	_, err = parseFlags([]string{"-h"}, &errOut)
	require.Error(t, err)
	require.Contains(t, errOut.String(), "-records")
	require.NotContains(t, errOut.String(), "-node", "the node's flags are hidden")

	for _, bad := range [][]string{{"-records", "0"}, {"-rate", "-1"}, {"extra"}, {"-visibility", "0s"}, {"-node"}} {
		_, err = parseFlags(bad, &errOut)
		require.Error(t, err, strings.Join(bad, " "))
	}
}

// The routes each node reads from the config: its own partitions local, every other
// owner's remote, the gateway named nowhere.
func TestRoutes(t *testing.T) {
	cc, err := newClusterConfig(t.TempDir(), 2*time.Second)
	require.NoError(t, err)
	path := t.TempDir() + "/" + launch.ConfigName
	require.NoError(t, launch.WriteJSON(path, cc))
	cc, self, err := readConfig(path, "node-2")
	require.NoError(t, err)
	require.Equal(t, []int32{2, 3}, self.Partitions)
	require.Equal(t, 2*time.Second, time.Duration(cc.Visibility))
	_, _, err = readConfig(path, "node-4")
	require.Error(t, err)

	local, remote, ok := cc.routes("node-1").Partitions(topic)
	require.True(t, ok)
	require.Equal(t, []int32{0, 1}, local)
	require.Equal(t, map[string][]int32{"node-2": {2, 3}}, remote)

	local, remote, ok = cc.routes("node-3").Partitions(topic)
	require.True(t, ok)
	require.Empty(t, local)
	require.Equal(t, map[string][]int32{"node-1": {0, 1}, "node-2": {2, 3}}, remote)

	_, _, ok = cc.routes("node-3").Partitions("payments")
	require.False(t, ok)
	require.Equal(t, "node-2", cc.owners()[3])
}
