package launch

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type testConfig struct {
	NodeFlags
	ParentFlags
}

func parseTest(args []string, errOut io.Writer) (testConfig, error) {
	var cfg testConfig
	visible := flag.NewFlagSet("prog", flag.ContinueOnError)
	cfg.Register(visible, ParentFlags{Records: 10, Clients: 1, Visibility: time.Second, Timeout: time.Minute})
	if err := cfg.NodeFlags.Parse(visible, args, errOut, "usage: prog\n\n"); err != nil {
		return cfg, err
	}
	return cfg, cfg.Check()
}

func TestNodeFlags(t *testing.T) {
	var errOut bytes.Buffer
	cfg, err := parseTest([]string{"-records", "3"}, &errOut)
	require.NoError(t, err)
	require.Equal(t, ParentFlags{Records: 3, Clients: 1, Visibility: time.Second, Timeout: time.Minute}, cfg.ParentFlags)

	cfg, err = parseTest([]string{"-node", "-config", "x.json", "-id", "node-2"}, &errOut)
	require.NoError(t, err)
	require.Equal(t, NodeFlags{Node: true, ConfigPath: "x.json", ID: "node-2"}, cfg.NodeFlags)

	_, err = parseTest([]string{"-h"}, &errOut)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.True(t, strings.HasPrefix(errOut.String(), "usage: prog\n\n"), errOut.String())
	require.Contains(t, errOut.String(), "-records")
	require.NotContains(t, errOut.String(), "-node", "the node's flags are hidden")

	for _, bad := range [][]string{{"extra"}, {"-node"}, {"-node", "-config", "x.json"}, {"-records", "x"},
		{"-records", "0"}, {"-clients", "0"}, {"-visibility", "0s"}, {"-timeout", "0s"}, {"-progress", "-1s"}} {
		_, err = parseTest(bad, io.Discard)
		require.Error(t, err, strings.Join(bad, " "))
	}
}

func TestNodeOrParent(t *testing.T) {
	var ran string
	run := NodeOrParent(
		func(_ context.Context, cfg testConfig, _ io.Writer, in io.Reader) error {
			ran = "node " + cfg.ID
			return nil
		},
		func(context.Context, testConfig, io.Writer) (int, error) {
			ran = "parent"
			return 1, errors.New("the run failed")
		})
	require.NoError(t, run(t.Context(), testConfig{NodeFlags: NodeFlags{Node: true, ID: "node-1"}}, io.Discard))
	require.Equal(t, "node node-1", ran)
	require.EqualError(t, run(t.Context(), testConfig{}, io.Discard), "the run failed")
	require.Equal(t, "parent", ran)
}
