package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Issue 26: -h says what each command does, on stdout; a wrong invocation says what is wrong
// on stderr, with the usage, and exits 2 having read nothing.
func TestUsage(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args       []string
		code       int
		wantStdout string
		wantStderr string
	}{
		{nil, exitTrouble, "Usage:", ""},
		{[]string{"-h"}, exitOK, "consumestate list [-json] DIR [TOPIC...]", ""},
		{[]string{"help"}, exitOK, "consumestate reset [-json] DIR TOPIC PARTITION -confirm", ""},
		{[]string{"list", "-h"}, exitOK, "List the topics and partitions", ""},
		{[]string{"show", "-h"}, exitOK, "Print every state file of one partition decoded", ""},
		{[]string{"verify", "-h"}, exitOK, "Exit status 1 when anything is damaged", ""},
		{[]string{"reset", "-h"}, exitOK, "-confirm", ""},
		{[]string{"frob"}, exitTrouble, "", `unknown command "frob"`},
		{[]string{"list"}, exitTrouble, "", "list needs DIR"},
		{[]string{"list", "-frob", dir}, exitTrouble, "", "flag provided but not defined: -frob"},
		{[]string{"show", dir, "orders"}, exitTrouble, "", "show needs DIR TOPIC PARTITION"},
		{[]string{"show", dir, "orders", "x"}, exitTrouble, "", `"x" is not a partition number`},
		{[]string{"show", dir, "orders", "-1"}, exitTrouble, "", "flag provided but not defined: -1"},
		{[]string{"show", dir, "orders", "--", "-1"}, exitTrouble, "", `"-1" is not a partition number`},
		{[]string{"show", dir, "orders", "007"}, exitTrouble, "", `"007" is not a partition number`},
		{[]string{"show", dir, "orders", "0"}, exitTrouble, "", "holds no directory for partition orders/0"},
		{[]string{"show", dir + "/orders/x"}, exitTrouble, "", "is not a partition's directory"},
		{[]string{"verify", dir + "/missing"}, exitTrouble, "", "read the state directory"},
		{[]string{"verify", dir, "orders"}, exitTrouble, "", "holds no partition of topic orders"},
		{[]string{"verify", dir, "a", "0", "extra"}, exitTrouble, "", "at most a TOPIC and a PARTITION"},
		{[]string{"reset", dir, "orders"}, exitTrouble, "", "reset needs DIR TOPIC PARTITION"},
		{[]string{"reset", dir, "orders", "0", "-confirm"}, exitTrouble, "", "nothing to reset"},
		{[]string{"list", dir}, exitOK, "No partitions.", ""},
		{[]string{"verify", dir}, exitOK, "\n0 partitions.\n", ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			res := runTool(t, time.Time{}, tt.args...)
			require.Equal(t, tt.code, res.code, "stdout %s\nstderr %s", res.stdout, res.stderr)
			require.Contains(t, res.stdout, tt.wantStdout)
			require.Contains(t, res.stderr, tt.wantStderr)
			if tt.code == exitTrouble && tt.args != nil {
				require.NotContains(t, res.stdout, "Partition", "nothing printed on stdout for a failure")
			}
		})
	}
}
