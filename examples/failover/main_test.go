package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"narad.dev/consume/examples/internal/launch"
)

func TestMain(m *testing.M) {
	// The scenario test starts this test binary as its node processes (the os.Args[0]
	// re-exec pattern): run the node and leave before the tests.
	launch.Child("-node", parseFlags, run)
	os.Exit(m.Run())
}

// TestFailover runs the whole scenario end to end in short: three node processes (this test
// binary, started again as each), each an etcd member; a few hundred records; one partition
// moved by hand-off; an owner stopped (SIGSTOP) past its lease and failed over, then
// continued; an owner cut off from its peers and etcd and failed over, then healed; the
// controller's node killed with SIGKILL and its partitions failed over. It asserts the
// ledger, not timings.
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes and a three-member etcd cluster")
	}
	cfg := config{
		ParentFlags:    launch.ParentFlags{Records: 600, Clients: 2, Visibility: 2 * time.Second, Dir: t.TempDir(), Timeout: 90 * time.Second, Seed: 2},
		duration:       4500 * time.Millisecond,
		partitions:     6,
		commitInterval: 200 * time.Millisecond,
		phases:         []phase{steady, moving, zombie, partitioned, failing},
	}
	var out bytes.Buffer
	rep, err := runCluster(t.Context(), cfg, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.produced != cfg.Records || !rep.drained || len(rep.lost) > 0 {
		t.Fatalf("produced %d, drained %v, lost %d", rep.produced, rep.drained, len(rep.lost))
	}
	if got := rep.acked + rep.unsure; got != rep.produced+rep.landed {
		t.Fatalf("%d records acked of %d", got, rep.produced+rep.landed)
	}
	for _, ph := range cfg.phases {
		c := rep.c[ph]
		if c.ackedAgainOut != 0 || c.twoHolders != 0 || c.mismatches != 0 || c.lost != 0 {
			t.Errorf("phase %s: acked again outside the window %d, two holders %d, mismatches %d, lost %d",
				phaseNames[ph], c.ackedAgainOut, c.twoHolders, c.mismatches, c.lost)
		}
		if c.produced == 0 || c.acked == 0 || rep.starts[ph].IsZero() {
			t.Errorf("phase %s: produced %d, acked %d: the phase did not happen", phaseNames[ph], c.produced, c.acked)
		}
	}
	scripted := 0
	for _, f := range rep.failovers {
		if !f.scripted {
			t.Logf("%s's grants lapsed at %v, no phase's doing: %d acked records came back within the window", f.victim, f.anchor, f.ackedAgainIn)
			continue
		}
		scripted++
		if f.windowOldest > rep.window {
			t.Errorf("phase %s: an acked record came back %v before %s, past the window %v", phaseNames[f.phase], f.windowOldest, f.how, rep.window)
		}
		if len(f.takeover) != len(f.parts) {
			t.Errorf("phase %s: %d of %s's %d partitions were granted anew", phaseNames[f.phase], len(f.takeover), f.victim, len(f.parts))
		}
	}
	if scripted != 3 {
		t.Fatalf("%d failovers, want 3 (zombie, partition, kill)", scripted)
	}
	if len(rep.stopErrs) > 0 {
		t.Fatalf("shutdown: %v", rep.stopErrs)
	}
	for _, want := range []string{"move orders/0:", "failover orders/", "stopped with SIGSTOP", "continued with SIGCONT",
		"cut off from its peers", "healed after", "is live again under a new lease", "every partition of", "ok: nothing lost"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %q", want)
		}
	}
	// The run's directory is kept, and a second run over it is refused.
	if _, err := runCluster(t.Context(), cfg, &out); err == nil || !strings.Contains(err.Error(), "earlier run") {
		t.Fatalf("a second run over the same directory: %v", err)
	}
}

func TestFlags(t *testing.T) {
	var errOut bytes.Buffer
	cfg, err := parseFlags(nil, &errOut)
	if err != nil || cfg.Records != 3000 || cfg.commitInterval != 200*time.Millisecond || cfg.Node || len(cfg.phases) != int(phases) {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	cfg, err = parseFlags([]string{"-phases", "kill,zombie"}, &errOut)
	if err != nil || !slices.Equal(cfg.phases, []phase{zombie, failing}) {
		t.Fatalf("-phases kill,zombie: %v, %v", cfg.phases, err)
	}
	cfg, err = parseFlags([]string{"-node", "-config", "x.json", "-id", "node-2"}, &errOut)
	if err != nil || !cfg.Node || cfg.ID != "node-2" {
		t.Fatalf("a node's flags: %+v, %v", cfg, err)
	}
	if _, err := parseFlags([]string{"-h"}, &errOut); err == nil {
		t.Fatal("-h: no error")
	}
	if s := errOut.String(); !strings.Contains(s, "-records") || !strings.Contains(s, "-duration") || strings.Contains(s, "-node") {
		t.Fatalf("-h lists:\n%s", s)
	}
	for _, bad := range [][]string{{"-records", "0"}, {"-partitions", "2"}, {"extra"}, {"-commit-interval", "1ms"}, {"-node"}, {"-duration", "0s"},
		{"-phases", "crash"}, {"-phases", "zombie,zombie"}, {"-phases", ""}} {
		if _, err := parseFlags(bad, &errOut); err == nil {
			t.Errorf("%s: no error", strings.Join(bad, " "))
		}
	}
}
