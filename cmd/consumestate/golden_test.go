package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/offsets"
)

var (
	update      = flag.Bool("update", false, "rewrite the golden outputs in testdata")
	updateState = flag.Bool("update-state", false, "rewrite testdata/healthy from a real node's run, then the golden outputs")
)

// healthyDir is a state directory a real node left at a graceful Close (buildState), kept in
// testdata so that the golden outputs over it do not change with each run's incarnations.
const healthyDir = "testdata/healthy"

// Issue 26: the output for one healthy state directory, as an operator sees it, is what the
// golden files hold (go test ./cmd/consumestate -update rewrites them; -update-state the
// state directory too, whose incarnations then change).
func TestGolden(t *testing.T) {
	if *updateState {
		*update = true
		c := newCluster(t.TempDir())
		buildState(t, c)
		require.NoError(t, os.RemoveAll(healthyDir))
		sd, err := scan(c.dir, nil)
		require.NoError(t, err)
		for _, p := range sd.partitions {
			copyPartition(t, p.path, filepath.Join(healthyDir, p.topicDir, filepath.Base(p.path)))
		}
	}
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"list.golden", []string{"list", healthyDir}},
		{"list.json.golden", []string{"list", "-json", healthyDir}},
		{"show.golden", []string{"show", healthyDir, topicOrders, "0"}},
		{"show.json.golden", []string{"show", "-json", healthyDir, topicOrders, "0"}},
		{"verify.golden", []string{"verify", healthyDir}},
		{"verify.json.golden", []string{"verify", "-json", healthyDir}},
		{"reset.golden", []string{"reset", healthyDir, topicBilling, "0"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			res := runTool(t, time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC), tt.args...)
			require.Equal(t, exitOK, res.code, res.stderr)
			require.Empty(t, res.stderr)
			path := filepath.Join("testdata", tt.golden)
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(res.stdout), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, string(want), res.stdout, "go test ./cmd/consumestate -update rewrites %s", path)
		})
	}
	// The golden directory is what buildState leaves, read as recovery reads it.
	st, err := offsets.ReadDir(nil, filepath.Join(healthyDir, topicOrders, "0"), topicOrders, 0)
	require.NoError(t, err)
	require.Equal(t, int64(9), st.Frontier)
	require.Equal(t, []offsets.Run{{First: 12, Last: 13}, {First: 15, Last: 15}}, st.Ahead)
	require.Equal(t, []int64{11}, st.Quarantine)
}
