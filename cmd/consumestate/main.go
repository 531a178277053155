package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Exit statuses, as diff and grep use them.
const (
	exitOK       = 0 // done; verify: every partition is ok
	exitFindings = 1 // verify: something is damaged, ignored or unreadable
	exitTrouble  = 2 // a usage error, or the command failed (nothing written)
)

func main() {
	t := &tool{stdout: os.Stdout, stderr: os.Stderr, now: time.Now}
	os.Exit(t.run(os.Args[1:]))
}

// tool is one run of the command: where its output goes and its clock (a reset names the
// set-aside directory after the time).
type tool struct {
	stdout, stderr io.Writer
	now            func() time.Time
}

// command is one subcommand: its synopsis, what it does, and its body, which gets the
// positional arguments once the flags are parsed.
type command struct {
	name, args, summary string
	flags               func(fs *flag.FlagSet)
	run                 func(t *tool, args []string) int
}

// errUsage marks a wrong invocation: the subcommand's usage follows the message.
var errUsage = errors.New("usage")

func (t *tool) commands() []command {
	var asJSON, confirm bool
	jsonFlag := func(fs *flag.FlagSet) { fs.BoolVar(&asJSON, "json", false, "print JSON for scripts instead of text") }
	return []command{
		{
			name: "list", args: "DIR [TOPIC...]",
			summary: "List the topics and partitions of the state directory DIR (all, or those of the TOPICs\n" +
				"named), each with a one-line summary: verdict, frontier, acked-ahead offsets and runs (and\n" +
				"the keys parked among them), quarantined offsets, incarnation and the state files present;\n" +
				"then the entries of DIR that are no partition's (the lock file, partitions set aside by\n" +
				"reset, anything else).",
			flags: jsonFlag,
			run: func(t *tool, args []string) int {
				if len(args) < 1 {
					return t.usageError("list", "list needs DIR")
				}
				return t.list(args[0], args[1:], asJSON)
			},
		},
		{
			name: "show", args: "DIR TOPIC PARTITION | PARTITION_DIR",
			summary: "Print every state file of one partition decoded: consumer.id (the incarnation, what an\n" +
				"upgrade adopted), the slots of consumer.ahead (status, sequence number, frontier, key,\n" +
				"incarnation, acked-ahead runs, key tails, attempts, quarantine, requeued, dropped) and\n" +
				"consumer.offset, then what recovery takes from them.",
			flags: jsonFlag,
			run: func(t *tool, args []string) int {
				switch len(args) {
				case 1, 3:
					return t.show(args, asJSON)
				}
				return t.usageError("show", "show needs DIR TOPIC PARTITION, or a partition's directory")
			},
		},
		{
			name: "verify", args: "DIR [TOPIC [PARTITION]]",
			summary: "Say, for each partition (all, a topic's, or one), what recovery would take and why, which\n" +
				"files or slots it would ignore and for what reason, and what the partition's next start\n" +
				"does. Exit status 1 when anything is damaged, ignored, refused or unreadable.",
			flags: jsonFlag,
			run: func(t *tool, args []string) int {
				if len(args) < 1 || len(args) > 3 {
					return t.usageError("verify", "verify needs DIR, and at most a TOPIC and a PARTITION")
				}
				return t.verify(args, asJSON)
			},
		},
		{
			name: "reset", args: "DIR TOPIC PARTITION -confirm",
			summary: "Set a partition's state aside so that its next start recovers it as new: at the log's\n" +
				"oldest retained offset, every retained record delivered again, the quarantine and attempt\n" +
				"counts forgotten, a fresh incarnation drawn. The partition's directory is renamed to\n" +
				"PARTITION.reset-TIME beside it, which the node never reads, and the topic's directory is\n" +
				"synced. Without -confirm it only says what it would do. With it, it takes the node's lock\n" +
				"on DIR first and refuses while a node holds it.",
			flags: func(fs *flag.FlagSet) {
				jsonFlag(fs)
				fs.BoolVar(&confirm, "confirm", false, "rename the partition's directory (without it nothing is written)")
			},
			run: func(t *tool, args []string) int {
				if len(args) != 3 {
					return t.usageError("reset", "reset needs DIR TOPIC PARTITION")
				}
				return t.reset(args, confirm, asJSON)
			},
		},
	}
}

func (t *tool) run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		t.usage(t.stdout)
		if len(args) == 0 {
			return exitTrouble
		}
		return exitOK
	}
	for _, c := range t.commands() {
		if c.name != args[0] {
			continue
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		fs.SetOutput(t.stderr)
		c.flags(fs)
		fs.Usage = func() {} // printed below, to stdout when asked for
		positional, err := parseInterleaved(fs, args[1:])
		switch {
		case errors.Is(err, flag.ErrHelp):
			t.commandUsage(t.stdout, c, fs)
			return exitOK
		case err != nil:
			t.commandUsage(t.stderr, c, fs) // after flag's own error line
			return exitTrouble
		}
		return c.run(t, positional)
	}
	fmt.Fprintf(t.stderr, "consumestate: unknown command %q\n\n", args[0])
	t.usage(t.stderr)
	return exitTrouble
}

// parseInterleaved parses flags wherever they stand among the positional arguments
// (reset DIR orders 0 -confirm), up to a "--", after which every argument is positional (a
// topic named "-x").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional, rest []string
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(positional, rest...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

func (t *tool) usage(w io.Writer) {
	fmt.Fprint(w, `consumestate reads, verifies and resets the consumer state of a narad.dev/consume node:
the state directory (router.Config.Dir) and its partitions' consumer.id, consumer.ahead and
consumer.offset files. Only reset -confirm writes.

Usage:
`)
	for _, c := range t.commands() {
		fmt.Fprintf(w, "  consumestate %s [-json] %s\n", c.name, c.args)
	}
	fmt.Fprint(w, `
"consumestate COMMAND -h" says what a command does. Flags may come anywhere; "--" ends them.
Exit status: 0 done, 1 verify found damage, 2 a usage error or a failure.
`)
}

func (t *tool) commandUsage(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: consumestate %s [flags] %s\n\n%s\n\nFlags:\n", c.name, c.args, c.summary)
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

func (t *tool) usageError(name, msg string) int {
	fmt.Fprintf(t.stderr, "consumestate: %s\n", msg)
	for _, c := range t.commands() {
		if c.name == name {
			fmt.Fprintf(t.stderr, "Usage: consumestate %s [-json] %s (consumestate %s -h says more)\n", c.name, c.args, c.name)
		}
	}
	return exitTrouble
}

// fail reports a failure on stderr and returns the trouble status.
func (t *tool) fail(format string, args ...any) int {
	fmt.Fprintf(t.stderr, "consumestate: "+format+"\n", args...)
	return exitTrouble
}

// parsePartition reads a partition number as the node names its directories.
func parsePartition(s string) (int32, error) {
	p, err := strconv.ParseInt(s, 10, 32)
	if err != nil || p < 0 || strconv.Itoa(int(p)) != s {
		return 0, fmt.Errorf("%q is not a partition number (0 to %d, in decimal)", s, int32(^uint32(0)>>1))
	}
	return int32(p), nil
}

// quote writes a topic name as the user would type it back when it holds anything unusual.
func quote(topic string) string {
	if topic != "" && strings.IndexFunc(topic, func(r rune) bool { return r <= ' ' || r == '"' || r > '~' }) < 0 {
		return topic
	}
	return strconv.Quote(topic)
}
