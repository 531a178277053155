package launch

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// NodeFlags are the hidden flags the parent starts each node process with: -node, -config
// and -id. A program's config embeds them.
type NodeFlags struct {
	Node       bool   // run one node process, not the parent
	ConfigPath string // the config file the parent wrote
	ID         string // the node to run
}

func (f NodeFlags) nodeFlags() NodeFlags { return f }

// A Config is a program's config: a struct that embeds NodeFlags.
type Config interface{ nodeFlags() NodeFlags }

// Parse parses args into visible's flags and the hidden node flags into f. Its usage (-h) is
// usage, then visible's flags, never the hidden ones; both go to errOut. It refuses
// arguments that are not flags, and -node without -config and -id.
func (f *NodeFlags) Parse(visible *flag.FlagSet, args []string, errOut io.Writer, usage string) error {
	visible.SetOutput(errOut)
	all := flag.NewFlagSet(visible.Name(), flag.ContinueOnError)
	all.SetOutput(errOut)
	visible.VisitAll(func(fl *flag.Flag) { all.Var(fl.Value, fl.Name, fl.Usage) })
	all.BoolVar(&f.Node, "node", false, "")
	all.StringVar(&f.ConfigPath, "config", "", "")
	all.StringVar(&f.ID, "id", "", "")
	all.Usage = func() {
		fmt.Fprint(errOut, usage)
		visible.PrintDefaults()
	}
	if err := all.Parse(args); err != nil {
		return err
	}
	switch {
	case all.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %q", all.Args())
	case f.Node && (f.ConfigPath == "" || f.ID == ""):
		return errors.New("-node needs -config and -id")
	}
	return nil
}

// ParentFlags are the flags every example's parent takes. A program's config embeds them
// and registers them with Register.
type ParentFlags struct {
	Records    int           // confirmed produces to make
	Clients    int           // consumers per node
	Visibility time.Duration // the topic's visibility timeout, in every node
	Dir        string        // the run's directory; empty: a temporary one, removed at the end
	Progress   time.Duration // between progress lines; 0: none
	Timeout    time.Duration // the whole run's bound
	Seed       uint64        // of the clients' choices
	Exe        string        // the program started as the nodes; empty: this one (no flag)
}

// Register registers the flags on visible, with the values of defaults as their defaults.
func (f *ParentFlags) Register(visible *flag.FlagSet, defaults ParentFlags) {
	visible.IntVar(&f.Records, "records", defaults.Records, "records to produce")
	visible.IntVar(&f.Clients, "clients", defaults.Clients, "consumers on each node")
	visible.DurationVar(&f.Visibility, "visibility", defaults.Visibility, "visibility timeout of a lease")
	visible.StringVar(&f.Dir, "dir", defaults.Dir, "the run's directory, kept afterwards (default: a temporary directory, removed)")
	visible.DurationVar(&f.Progress, "progress", defaults.Progress, "interval between progress lines (0: none)")
	visible.DurationVar(&f.Timeout, "timeout", defaults.Timeout, "give up after this long")
	visible.Uint64Var(&f.Seed, "seed", defaults.Seed, "seed of the clients' random choices")
}

// Check refuses values out of range: -records, -clients, -visibility and -timeout must be
// positive, -progress not negative.
func (f *ParentFlags) Check() error {
	switch {
	case f.Records < 1 || f.Clients < 1 || f.Visibility <= 0 || f.Timeout <= 0:
		return errors.New("-records, -clients, -visibility and -timeout must be positive")
	case f.Progress < 0:
		return errors.New("-progress must not be negative")
	}
	return nil
}
