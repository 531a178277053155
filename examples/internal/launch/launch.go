package launch

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// Main is a program's main function: it parses the command line's arguments with parse
// (its usage and errors go to standard error) and runs the config with run, printing to
// standard output, until run returns or an interrupt (Ctrl-C) or SIGTERM ends its context.
// A failure is printed after name, and exits non-zero: 2 for the arguments, 1 for the run.
func Main[C any](name string, parse func(args []string, errOut io.Writer) (C, error), run func(context.Context, C, io.Writer) error) {
	if code := mainCode(name, os.Args[1:], os.Stdout, os.Stderr, parse, run); code != 0 {
		os.Exit(code)
	}
}

func mainCode[C any](name string, args []string, out, errOut io.Writer, parse func([]string, io.Writer) (C, error), run func(context.Context, C, io.Writer) error) int {
	cfg, err := parse(args, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(errOut, "%s: %v\n", name, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, out); err != nil {
		fmt.Fprintf(errOut, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// Child is for a TestMain whose tests start the test binary as their node processes (the
// os.Args[0] re-exec pattern): if the binary's first argument is nodeFlag, it runs the node
// as Main would and exits, before the tests; else it returns.
func Child[C any](nodeFlag string, parse func(args []string, errOut io.Writer) (C, error), run func(context.Context, C, io.Writer) error) {
	if len(os.Args) > 1 && os.Args[1] == nodeFlag {
		os.Exit(childCode(os.Args[1:], os.Stdout, os.Stderr, parse, run))
	}
}

func childCode[C any](args []string, out, errOut io.Writer, parse func([]string, io.Writer) (C, error), run func(context.Context, C, io.Writer) error) int {
	cfg, err := parse(args, errOut)
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = run(ctx, cfg, out)
		stop()
	}
	if err != nil {
		fmt.Fprintln(errOut, "node:", err)
		return 1
	}
	return 0
}

// NodeOrParent returns the run function of a program (for Main and Child): node, with the
// process's standard input, when the config's hidden flags ask for a node process; parent,
// its report dropped, otherwise.
func NodeOrParent[C Config, R any](node func(context.Context, C, io.Writer, io.Reader) error, parent func(context.Context, C, io.Writer) (R, error)) func(context.Context, C, io.Writer) error {
	return func(ctx context.Context, cfg C, out io.Writer) error {
		if cfg.nodeFlags().Node {
			return node(ctx, cfg, out, os.Stdin)
		}
		_, err := parent(ctx, cfg, out)
		return err
	}
}

// RunDir returns the directory to keep a run in, and what to do with it at the end: dir
// itself (made if need be, and kept), or if dir is empty a new temporary one named after
// pattern (as os.MkdirTemp's), removed at the end.
func RunDir(dir, pattern string) (path string, cleanup func(), err error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	dir, err = os.MkdirTemp("", pattern)
	return dir, func() { os.RemoveAll(dir) }, err
}

// ConfigName is the file, in a run's directory, that the parent writes the run's config to
// and every node reads at start.
const ConfigName = "cluster.json"

// A Run is where a parent keeps a run, and what it starts as the nodes.
type Run struct {
	Dir        string // the run's directory (see RunDir)
	ConfigPath string // the config file, in Dir
	Exe        string // the program started as the nodes
	Temporary  bool   // Dir was made for the run, and its cleanup removes it
}

// DirNote says what becomes of the run's directory.
func (r Run) DirNote() string {
	if r.Temporary {
		return "a temporary directory, removed at the end"
	}
	return "kept"
}

// NewRun makes the run's directory, RunDir(dir, pattern), and in it the run's config with
// newConfig (given the directory), written as JSON to the file ConfigName. A directory that
// holds the file already is refused: it holds an earlier run (what names it in the error).
// The program started as the nodes is exe, or if empty this one. The run's cleanup is to be
// called at its end; on an error, NewRun has called it.
func NewRun[C any](dir, pattern, what, exe string, newConfig func(dir string) (C, error)) (_ Run, cfg C, _ func(), err error) {
	temporary := dir == ""
	dir, cleanup, err := RunDir(dir, pattern)
	if err != nil {
		return Run{}, cfg, nil, err
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	path := filepath.Join(dir, ConfigName)
	if _, err := os.Stat(path); err == nil {
		return Run{}, cfg, nil, fmt.Errorf("%s holds an earlier run: give -dir an empty or new directory", what)
	}
	if cfg, err = newConfig(dir); err != nil {
		return Run{}, cfg, nil, err
	}
	if err := WriteJSON(path, cfg); err != nil {
		return Run{}, cfg, nil, err
	}
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return Run{}, cfg, nil, err
		}
	}
	return Run{Dir: dir, ConfigPath: path, Exe: exe, Temporary: temporary}, cfg, cleanup, nil
}

// FreeAddrs returns n addresses on 127.0.0.1 with ports that were free a moment ago: the
// system picks them, all held at once so that they differ.
func FreeAddrs(n int) ([]string, error) {
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// WriteJSON writes v to path as indented JSON.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadJSON reads the JSON file at path into v.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Pause waits d, or until ctx ends.
func Pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
