package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/offsets"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// incarnatedLogs is a host's log that names each topic's incarnation (router.TopicIncarnation).
type incarnatedLogs struct{ *routertest.MemLogs }

func (incarnatedLogs) Incarnation(string) (string, bool) { return "topic-id-1", true }

// A state bound to the host's incarnation of its topic: show says so, and verify finds it
// healthy (the binding is the node's to compare, with what its host names).
func TestShowBoundState(t *testing.T) {
	c := newCluster(t.TempDir())
	n, err := router.New(router.Config{Logs: incarnatedLogs{c.logs}, Routes: c.routes, Dir: c.dir})
	require.NoError(t, err)
	c.append(n, topicOrders, 0, 3)
	settle(t, n, consume(t, n, topicOrders, 0, 2), []int64{0, 1}, nil)
	require.NoError(t, n.Close())
	id, err := os.ReadFile(filepath.Join(c.dir, topicOrders, "0", offsets.IDFile))
	require.NoError(t, err)
	require.Len(t, id, offsets.IDFileSize+offsets.HostIncarnationSize)

	res := runTool(t, time.Time{}, "show", c.dir, topicOrders, "0")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "bound to       host incarnation ")
	rep, _ := verifyJSON(t, c.dir, topicOrders, "0")
	require.Equal(t, "ok", partitionOf(t, rep, topicOrders, 0).Verdict)
}
