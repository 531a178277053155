package router_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/testflags"
	"narad.dev/consume/offsets"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// startChild runs this test binary again as a child process running only test run (which
// skips itself unless env names what it is to do), and waits for the first line it prints,
// which must be ready. The child waits on its standard input, closed when the test ends.
func startChild(t *testing.T, run, ready string, env ...string) *exec.Cmd {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1")
	child.Env = append(os.Environ(), env...)
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	t.Cleanup(func() { stdin.Close() })
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, ready+"\n", line)
	return child
}

// freshCrashEnv names the state directory of the child of TestFreshPartitionsCrashWindow, and
// freshCrashPartitionsEnv how many partitions it acks.
const (
	freshCrashEnv           = "ROUTER_TEST_FRESH_CRASH_DIR"
	freshCrashPartitionsEnv = "ROUTER_TEST_FRESH_CRASH_PARTITIONS"
)

// freshCrashConfig is the node of the fresh-partition crash test: one topic of n local
// partitions, each with one record, over the real file system in dir.
func freshCrashConfig(dir string, n int) router.Config {
	routes := &routertest.Routes{}
	parts := make([]int32, n)
	logs := &routertest.MemLogs{}
	for p := range parts {
		parts[p] = int32(p)
		logs.Log("fresh", int32(p)).Append(nil, []byte("record"), time.Unix(0, 0))
	}
	routes.Set("fresh", parts...)
	return router.Config{Logs: logs, Routes: routes, Dir: dir}
}

// drainFresh consumes and acks every record the node has for the topic, a batch at a time,
// and returns how many it took.
func drainFresh(ctx context.Context, node *router.Node) (int, error) {
	taken := 0
	for {
		msgs, err := node.Consume(ctx, "fresh", router.ConsumeOptions{Max: router.MaxBatch})
		if err != nil {
			return taken, err
		}
		if len(msgs) == 0 {
			return taken, nil
		}
		handles := make([]router.Handle, len(msgs))
		for i, m := range msgs {
			handles[i] = m.Receipt
		}
		for i, err := range node.AckBatch(ctx, "fresh", handles) {
			if err != nil {
				return taken, fmt.Errorf("ack %s: %w", handles[i], err)
			}
		}
		taken += len(msgs)
	}
}

// TestFreshCrashChild is the child of TestFreshPartitionsCrashWindow: it acks the one record
// of each fresh partition, says so, and waits to be killed.
func TestFreshCrashChild(t *testing.T) {
	dir := os.Getenv(freshCrashEnv)
	if dir == "" {
		t.Skip("the child process of TestFreshPartitionsCrashWindow")
	}
	n, err := strconv.Atoi(os.Getenv(freshCrashPartitionsEnv))
	require.NoError(t, err)
	node, err := router.New(freshCrashConfig(dir, n))
	if err != nil {
		fmt.Println("error", err)
		return
	}
	acked, err := drainFresh(context.Background(), node)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	fmt.Println("acked", acked)
	bufio.NewReader(os.Stdin).ReadString('\n') // until the parent kills this process
}

// Issue 25 item 2: a process that acks one record on each of 16,000 fresh partitions (no
// state files yet) and is killed 1 s later, with no Close, delivers again at most 5 % of those
// records after a restart. A partition with no state has no durable record for its prime to
// protect, so its first window goes to the page cache within a tick, as a primed
// partition's does; before, each waited for its prime's syncs (9 to 14 s for 16,000), and 57 %
// came back. By default the child acks 2,000 and only the recovery is checked (killed 5 s
// after its last ack under the race detector); ROUTER_FRESH_CRASH_PARTITIONS sets the count and
// asserts the bound, and CI runs 16,000 so, in a step of its own, on the real build, alone.
func TestFreshPartitionsCrashWindow(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "plan9":
		t.Skip("SIGKILL of a child process")
	}
	n := 2_000
	// The bound is a claim about a process that has the machine: asserted when the test is
	// run alone for it (ROUTER_FRESH_CRASH_PARTITIONS set, as CI's step does). Beside the
	// other packages' tests the child's file work waits for the processors (11.6 % came back
	// at 2,000 with offsets and the simulation running; under the race detector, 37 % after
	// 5 s at a load of 6), so there the test checks that what the kill left recovers, and
	// reports the share.
	alone := false
	if v, err := strconv.Atoi(os.Getenv("ROUTER_FRESH_CRASH_PARTITIONS")); err == nil && v > 0 {
		n, alone = v, true
	}
	grace := time.Second // the scenario: the process dies a second after its last ack
	if testflags.Race {
		grace = 5 * time.Second // the race detector makes the child's file work 5 to 10 times slower
	}
	dir := filepath.Join(t.TempDir(), "state")
	child := startChild(t, "TestFreshCrashChild", fmt.Sprintf("acked %d", n),
		freshCrashEnv+"="+dir, freshCrashPartitionsEnv+"="+strconv.Itoa(n))

	time.Sleep(grace)
	require.NoError(t, child.Process.Kill())
	var exit *exec.ExitError
	require.True(t, errors.As(child.Wait(), &exit), "killed")

	// What a restart would take, read from the files the killed process left: a partition
	// whose recovered frontier is below its one record delivers it again.
	node, err := router.New(freshCrashConfig(dir, n))
	require.NoError(t, err)
	again := 0
	for p := range int32(n) {
		read := func(name string) []byte {
			b, err := os.ReadFile(filepath.Join(node.PartitionDir("fresh", p), name))
			if !errors.Is(err, os.ErrNotExist) {
				require.NoError(t, err)
			}
			return b
		}
		st, err := offsets.Recover("fresh", p, read(offsets.IDFile), read(offsets.AheadFile), read(offsets.OffsetFile))
		require.NoError(t, err)
		if st.Frontier < 0 {
			again++
		}
	}
	require.NoError(t, node.Close())
	t.Logf("%d of %d acked records delivered again after the kill (%.1f %%)", again, n, 100*float64(again)/float64(n))
	if alone {
		require.LessOrEqual(t, again, n/20, "at most 5 %% delivered again")
	}
}
