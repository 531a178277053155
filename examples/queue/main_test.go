package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The crash test starts this test binary as the demo's child (the os.Args[0]
	// re-exec pattern): run the child and leave before the tests.
	if len(os.Args) > 1 && os.Args[1] == "-crash-child" {
		cfg, err := parseFlags(os.Args[1:], os.Stderr)
		if err == nil {
			err = run(context.Background(), cfg, os.Stdout)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestDemo runs the plain demo in-process with small counts.
func TestDemo(t *testing.T) {
	cfg := config{
		messages:   2000,
		partitions: 4,
		workers:    4,
		rate:       0,
		visibility: 300 * time.Millisecond, // short, so dropped messages come back soon
		dir:        t.TempDir(),
		progress:   50 * time.Millisecond,
		seed:       1,
	}
	var out bytes.Buffer
	sum, err := runDemo(t.Context(), cfg, &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)

	require.Equal(t, int64(2000), sum.produced)
	require.Equal(t, int64(2000), sum.acked)
	require.Zero(t, sum.ackedTwice, "a message acked twice")
	require.Zero(t, sum.neverAcked, "a message never acked")
	// Each delivery ends one way, and each message is delivered once more for each of its
	// deliveries that did not end in an ack.
	require.Equal(t, sum.delivered, sum.acked+sum.nacked+sum.dropped+sum.gone)
	require.Equal(t, sum.delivered, sum.acked+sum.redelivered)
	require.Positive(t, sum.nacked, "the seed nacks some")
	require.Positive(t, sum.dropped, "the seed drops some")
	require.Positive(t, sum.extended, "the seed extends some")
	require.Contains(t, out.String(), "every message exactly once")

	// The state is kept in cfg.dir, and a second run over it is refused.
	_, err = runDemo(t.Context(), cfg, &out)
	require.ErrorContains(t, err, "earlier run")
}

// TestCrash runs the crash demo end to end with a real child process: this test binary,
// started again with the child's flag (see TestMain), killed with SIGKILL.
func TestCrash(t *testing.T) {
	cfg := config{
		messages:   2000,
		partitions: 4,
		workers:    4,
		visibility: 30 * time.Second,
		dir:        t.TempDir(),
		killAfter:  1000,
		seed:       1,
	}
	var out bytes.Buffer
	rep, err := runCrash(t.Context(), cfg, &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)

	require.Equal(t, int64(2000), rep.produced)
	require.GreaterOrEqual(t, rep.confirmed, 1000, "killed after 1000 acks")
	require.Empty(t, rep.lost, "records acked neither before nor after the crash")
	require.Zero(t, rep.afterGraceful, "a graceful close persists every ack")
	require.LessOrEqual(t, rep.again, rep.confirmed)
	// Everything the journal does not confirm is delivered after the restart (or its ack
	// was in flight and the node took it).
	require.GreaterOrEqual(t, rep.delivered+rep.uncertain, 2000-rep.confirmed)
	require.Contains(t, out.String(), "nothing lost")
}

func TestFlags(t *testing.T) {
	var errOut bytes.Buffer
	cfg, err := parseFlags(nil, &errOut)
	require.NoError(t, err)
	require.Equal(t, 20_000, cfg.messages)
	require.Equal(t, 4, cfg.partitions)
	require.False(t, cfg.crash || cfg.child)

	cfg, err = parseFlags([]string{"-crash-child", "-dir", "x", "-messages", "5"}, &errOut)
	require.NoError(t, err)
	require.True(t, cfg.child)
	require.Equal(t, 5, cfg.messages)

	_, err = parseFlags([]string{"-h"}, &errOut)
	require.Error(t, err)
	require.Contains(t, errOut.String(), "-messages")
	require.NotContains(t, errOut.String(), "crash-child", "the child's flag is hidden")

	for _, bad := range [][]string{{"-messages", "0"}, {"-rate", "-1"}, {"extra"}, {"-visibility", "0s"}} {
		_, err = parseFlags(bad, &errOut)
		require.Error(t, err, strings.Join(bad, " "))
	}
}
