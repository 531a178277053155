package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/offsets"
	"narad.dev/consume/router"
)

var resetTime = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)

// Issue 26: reset without -confirm writes nothing, not even the lock file.
func TestResetDryRunWritesNothing(t *testing.T) {
	c := newCluster(t.TempDir())
	buildState(t, c)
	require.NoError(t, os.Remove(filepath.Join(c.dir, router.LockName)))
	before := tree(t, c.dir)
	res := runTool(t, resetTime, "reset", c.dir, topicOrders, "0")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "Dry run, nothing written")
	require.Equal(t, before, tree(t, c.dir))
	for _, args := range [][]string{{"list", c.dir}, {"show", c.dir, topicOrders, "0"}, {"verify", c.dir}} {
		runTool(t, resetTime, args...)
	}
	require.Equal(t, before, tree(t, c.dir), "read-only commands")
}

// Issue 26: reset -confirm refuses while a node holds the state directory, in this process or
// another, and writes nothing.
func TestResetRefusedWhileANodeRuns(t *testing.T) {
	c := newCluster(t.TempDir())
	buildState(t, c)
	n := c.start(t)
	before := tree(t, filepath.Join(c.dir, topicOrders))
	res := runTool(t, resetTime, "reset", c.dir, topicOrders, "0", "-confirm")
	require.Equal(t, exitTrouble, res.code)
	require.Contains(t, res.stderr, "not reset: a node holds")
	require.Contains(t, res.stderr, router.ErrDirLocked.Error())
	require.Empty(t, res.stdout)
	require.Equal(t, before, tree(t, filepath.Join(c.dir, topicOrders)))
	require.NoError(t, n.Close())

	switch runtime.GOOS {
	case "windows", "solaris", "aix", "illumos":
		return // the cross-process lock is tested where flock is used
	}
	child := exec.Command(os.Args[0], "-test.run=^TestNodeHolderProcess$", "-test.count=1")
	child.Env = append(os.Environ(), nodeHolderEnv+"="+c.dir)
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "running\n", line)
	res = runTool(t, resetTime, "reset", c.dir, topicOrders, "0", "-confirm")
	require.Equal(t, exitTrouble, res.code)
	require.Contains(t, res.stderr, "held by another process")
	require.Equal(t, before, tree(t, filepath.Join(c.dir, topicOrders)))
	require.NoError(t, stdin.Close()) // the child closes its node and exits
	require.NoError(t, child.Wait())

	res = runTool(t, resetTime, "reset", c.dir, topicOrders, "0", "-confirm")
	require.Equal(t, exitOK, res.code, "the node is gone: %s", res.stderr)
}

const nodeHolderEnv = "CONSUMESTATE_TEST_NODE_DIR"

// TestNodeHolderProcess is the child of TestResetRefusedWhileANodeRuns: it runs a node on the
// directory, says so, and closes it when its stdin closes.
func TestNodeHolderProcess(t *testing.T) {
	dir := os.Getenv(nodeHolderEnv)
	if dir == "" {
		t.Skip("the child process of TestResetRefusedWhileANodeRuns")
	}
	n := newCluster(dir).start(t)
	fmt.Println("running")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	require.NoError(t, n.Close())
}

// Issue 26: after reset -confirm the partition's state is set aside where the node does not
// read it, and the next start recovers the partition as new: from the log's oldest retained
// offset, everything delivered again, under a fresh incarnation. The other partitions keep
// their state.
func TestResetThenNodeStartsAsNew(t *testing.T) {
	c := newCluster(t.TempDir())
	buildState(t, c)
	orders0 := filepath.Join(c.dir, topicOrders, "0")
	before := readStateFiles(t, orders0)
	old, err := offsets.ReadDir(nil, orders0, topicOrders, 0)
	require.NoError(t, err)
	require.Equal(t, int64(9), old.Frontier)

	res := runTool(t, resetTime, "reset", "-json", c.dir, topicOrders, "0", "-confirm")
	require.Equal(t, exitOK, res.code, res.stderr)
	var out resetResult
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	require.True(t, out.Done)
	aside := filepath.Join(c.dir, topicOrders, "0.reset-20300102T030405.000000006Z")
	require.Equal(t, aside, out.SetAsideTo)
	require.Equal(t, int64(9), out.Partition.Recovery.Frontier, "what was set aside")
	_, err = os.Stat(orders0)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, before, readStateFiles(t, aside), "set aside as it was")

	rep, res := verifyJSON(t, c.dir)
	require.Equal(t, exitOK, res.code)
	require.Len(t, rep.Partitions, 2, "the set-aside directory is no partition")
	require.Contains(t, strings.Join(otherPaths(rep), "\n"), aside)

	n := c.start(t)
	msgs := consume(t, n, topicOrders, 0, 20)
	require.Len(t, msgs, 20, "every retained record delivered again")
	require.Equal(t, int64(0), msgs[0].Offset)
	require.Equal(t, uint32(1), msgs[0].Attempt, "attempts counted afresh")
	settle(t, n, msgs, []int64{0, 1}, nil)
	again := consume(t, n, topicOrders, 1, 3)
	require.Empty(t, again, "orders/1 kept its state")
	require.NoError(t, n.Close())

	rep, res = verifyJSON(t, c.dir, topicOrders, "0")
	require.Equal(t, exitOK, res.code)
	p := partitionOf(t, rep, topicOrders, 0)
	require.Equal(t, int64(1), p.Recovery.Frontier)
	require.Empty(t, p.Recovery.Quarantine, "the quarantine is forgotten")
	require.NotEqual(t, fmt.Sprintf("%016x", old.Incarnation), p.Recovery.Incarnation, "a fresh incarnation")
	require.Equal(t, before, readStateFiles(t, aside), "the node never touched the set-aside state")
}

func otherPaths(rep report) []string {
	var paths []string
	for _, o := range rep.Other {
		paths = append(paths, o.Path)
	}
	return paths
}

// Issue 26: reset refuses what it must not set aside, writing nothing: a partition handed off
// from this node, and one that has no directory.
func TestResetRefuses(t *testing.T) {
	c := newCluster(t.TempDir())
	buildState(t, c)
	orders0 := filepath.Join(c.dir, topicOrders, "0")
	require.NoError(t, os.WriteFile(filepath.Join(orders0, router.MovedFile), nil, 0o644))
	before := tree(t, c.dir)
	res := runTool(t, resetTime, "reset", c.dir, topicOrders, "0", "-confirm")
	require.Equal(t, exitTrouble, res.code)
	require.Contains(t, res.stderr, "was handed off from this node")
	res = runTool(t, resetTime, "reset", c.dir, topicOrders, "5", "-confirm")
	require.Equal(t, exitTrouble, res.code)
	require.Contains(t, res.stderr, "nothing to reset")
	require.Equal(t, before, tree(t, c.dir))

	// A set-aside name already taken (two resets within the clock's resolution).
	require.NoError(t, os.Remove(filepath.Join(orders0, router.MovedFile)))
	require.NoError(t, os.Mkdir(filepath.Join(c.dir, topicOrders, "0.reset-20300102T030405.000000006Z"), 0o755))
	res = runTool(t, resetTime, "reset", c.dir, topicOrders, "0", "-confirm")
	require.Equal(t, exitTrouble, res.code)
	require.Contains(t, res.stderr, "exists already")
	_, err := os.Stat(orders0)
	require.NoError(t, err)
}

// Issue 26: a file where a partition's directory should be (the node sets the partition aside
// for good) is set aside by reset like a directory, and the partition starts as new.
func TestResetAFileInAPartitionsPlace(t *testing.T) {
	c := newCluster(t.TempDir())
	buildState(t, c)
	orders1 := filepath.Join(c.dir, topicOrders, "1")
	require.NoError(t, os.RemoveAll(orders1))
	require.NoError(t, os.WriteFile(orders1, []byte("not a directory"), 0o644))
	res := runTool(t, resetTime, "reset", c.dir, topicOrders, "1", "-confirm")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "orders/1: unreadable")
	data, err := os.ReadFile(filepath.Join(c.dir, topicOrders, "1.reset-20300102T030405.000000006Z"))
	require.NoError(t, err)
	require.Equal(t, "not a directory", string(data))

	n := c.start(t)
	msgs := consume(t, n, topicOrders, 1, 3)
	require.Len(t, msgs, 3, "the partition starts as new")
	require.NoError(t, n.Close())
}
