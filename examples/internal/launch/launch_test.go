package launch

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func parse(args []string, errOut io.Writer) (string, error) {
	switch {
	case len(args) == 0:
		return "", nil
	case args[0] == "-h":
		io.WriteString(errOut, "usage\n")
		return "", flag.ErrHelp
	case args[0] == "bad":
		return "", errors.New("bad flag")
	}
	return args[0], nil
}

func run(ctx context.Context, cfg string, out io.Writer) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if cfg == "fail" {
		return errors.New("it failed")
	}
	io.WriteString(out, "ran "+cfg+"\n")
	return nil
}

func TestMainCode(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		code      int
		out, errs string
	}{
		{nil, 0, "ran \n", ""},
		{[]string{"x"}, 0, "ran x\n", ""},
		{[]string{"-h"}, 0, "", "usage\n"},
		{[]string{"bad"}, 2, "", "prog: bad flag\n"},
		{[]string{"fail"}, 1, "", "prog: it failed\n"},
	} {
		var out, errs bytes.Buffer
		require.Equal(t, tc.code, mainCode("prog", tc.args, &out, &errs, parse, run), tc.args)
		require.Equal(t, tc.out, out.String(), tc.args)
		require.Equal(t, tc.errs, errs.String(), tc.args)
	}
}

func TestChildCode(t *testing.T) {
	var out, errs bytes.Buffer
	require.Equal(t, 0, childCode([]string{"x"}, &out, &errs, parse, run))
	require.Equal(t, "ran x\n", out.String())
	require.Equal(t, 1, childCode([]string{"bad"}, &out, &errs, parse, run))
	require.Equal(t, 1, childCode([]string{"fail"}, &out, &errs, parse, run))
	require.Equal(t, "node: bad flag\nnode: it failed\n", errs.String())

	Child("-not-this-binary's-flag", parse, run) // returns: the binary is no node
}

func TestRunDir(t *testing.T) {
	kept := filepath.Join(t.TempDir(), "a", "b")
	dir, cleanup, err := RunDir(kept, "launch-")
	require.NoError(t, err)
	require.Equal(t, kept, dir)
	cleanup()
	require.DirExists(t, kept)

	dir, cleanup, err = RunDir("", "launch-")
	require.NoError(t, err)
	require.Contains(t, filepath.Base(dir), "launch-")
	require.DirExists(t, dir)
	cleanup()
	require.NoDirExists(t, dir)
}

func TestNewRun(t *testing.T) {
	kept := t.TempDir()
	newConfig := func(dir string) (string, error) { return dir, nil }
	run, cfg, cleanup, err := NewRun(kept, "launch-", "the dir", "/bin/node", newConfig)
	require.NoError(t, err)
	require.Equal(t, Run{Dir: kept, ConfigPath: filepath.Join(kept, ConfigName), Exe: "/bin/node"}, run)
	require.Equal(t, kept, cfg)
	require.Equal(t, "kept", run.DirNote())
	cleanup()
	var written string
	require.NoError(t, ReadJSON(run.ConfigPath, &written))
	require.Equal(t, kept, written, "the config, written")

	_, _, _, err = NewRun(kept, "launch-", "the dir", "", newConfig)
	require.EqualError(t, err, "the dir holds an earlier run: give -dir an empty or new directory")

	var made string
	run, _, cleanup, err = NewRun("", "launch-", "the dir", "", func(dir string) (int, error) {
		made = dir
		return 1, nil
	})
	require.NoError(t, err)
	exe, _ := os.Executable()
	require.Equal(t, exe, run.Exe, "this program")
	require.True(t, run.Temporary)
	require.Equal(t, "a temporary directory, removed at the end", run.DirNote())
	cleanup()
	require.NoDirExists(t, made)

	_, _, _, err = NewRun("", "launch-", "the dir", "", func(dir string) (int, error) {
		made = dir
		return 0, errors.New("no room")
	})
	require.EqualError(t, err, "no room")
	require.NoDirExists(t, made, "removed on the error")
}

func TestFreeAddrs(t *testing.T) {
	addrs, err := FreeAddrs(3)
	require.NoError(t, err)
	require.Len(t, addrs, 3)
	seen := map[string]bool{}
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1", host)
		seen[a] = true
		ln, err := net.Listen("tcp", a)
		require.NoError(t, err, "free again")
		ln.Close()
	}
	require.Len(t, seen, 3)
}

func TestJSON(t *testing.T) {
	type conf struct {
		Name  string `json:"name"`
		Ports []int  `json:"ports"`
	}
	path := filepath.Join(t.TempDir(), "c.json")
	require.NoError(t, WriteJSON(path, conf{Name: "n", Ports: []int{1, 2}}))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "{\n  \"name\": \"n\",\n  \"ports\": [\n    1,\n    2\n  ]\n}\n", string(b))
	var c conf
	require.NoError(t, ReadJSON(path, &c))
	require.Equal(t, conf{Name: "n", Ports: []int{1, 2}}, c)

	require.ErrorIs(t, ReadJSON(filepath.Join(t.TempDir(), "none"), &c), os.ErrNotExist)
	require.NoError(t, os.WriteFile(path, []byte("{"), 0o644))
	require.ErrorContains(t, ReadJSON(path, &c), path)
	require.Error(t, WriteJSON(path, func() {}))
}

func TestPause(t *testing.T) {
	start := time.Now()
	Pause(t.Context(), 20*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start = time.Now()
	Pause(ctx, time.Minute)
	require.Less(t, time.Since(start), time.Second)
}
