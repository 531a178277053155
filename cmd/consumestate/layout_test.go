package main

import (
	"encoding/binary"
	"hash/crc32"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/offsets"
	"narad.dev/consume/router"
)

// Issue 26: each kind of partition an operator may find gets its verdict, findings that say
// why, and verify's exit status: damaged, foreign and stale files, a newer release's record,
// unreadable state, a handed-off partition, and nothing at all.
func TestVerdicts(t *testing.T) {
	base := newCluster(t.TempDir())
	buildState(t, base)
	other := newCluster(t.TempDir()) // another life of the same partitions
	buildState(t, other)
	orders0 := filepath.Join(base.dir, topicOrders, "0")
	orders1 := filepath.Join(base.dir, topicOrders, "1")
	healthy := readStateFiles(t, orders0)
	newer := clone(healthy)
	newer[1][offsets.SlotSize+4] = offsets.SlotVersion + 1 // slot 1's version, resealed
	binary.BigEndian.PutUint32(newer[1][2*offsets.SlotSize-4:],
		crc32.Checksum(newer[1][offsets.SlotSize:2*offsets.SlotSize-4], crc32.MakeTable(crc32.Castagnoli)))
	torn := clone(healthy)
	torn[1] = torn[1][:offsets.SlotSize+100]

	tests := []struct {
		name        string
		files       stateFiles
		prepare     func(t *testing.T, dir string) // after the files are written
		wantVerdict string
		wantCode    int
		wantFinding string // in the ignored findings, or the error
	}{
		{"healthy", healthy, nil, verdictOK, exitOK, ""},
		{"a torn window", torn, nil, verdictIgnored, exitFindings, "consumer.ahead slot 1: damaged: slot is not 4096 bytes"},
		{"another partition's files", readStateFiles(t, orders1), nil, verdictIgnored, exitFindings, "a record of another partition"},
		{"another life's consumer.id", stateFiles{readStateFiles(t, filepath.Join(other.dir, topicOrders, "0"))[0], healthy[1], healthy[2]},
			nil, verdictIgnored, exitFindings, "names incarnation"},
		{"no consumer.id", stateFiles{nil, healthy[1], healthy[2]}, nil, verdictIgnored, exitFindings, "there is no valid consumer.id"},
		{"a newer release's record", newer, nil, verdictRefused, exitFindings, ""},
		// Issue 34: damage recovery does not see, since it reads a missing slot as one an
		// older release never wrote, and no more than three slots.
		{"consumer.ahead emptied", stateFiles{healthy[0], []byte{}, healthy[2]}, nil, verdictDamaged, exitFindings,
			"consumer.ahead: damaged: emptied (0 bytes) beside consumer.offset"},
		{"consumer.ahead cut at a slot's bound", stateFiles{healthy[0], healthy[1][:offsets.SlotSize], healthy[2]}, nil,
			verdictDamaged, exitFindings, "consumer.ahead: damaged: 4096 bytes, cut short"},
		{"consumer.ahead grown", stateFiles{healthy[0], append(clone(healthy)[1], 1), healthy[2]}, nil, verdictDamaged, exitFindings,
			"consumer.ahead: damaged: 12289 bytes, longer than a node writes"},
		{"a torn window cut short", stateFiles{healthy[0], torn[1], healthy[2]}, nil, verdictIgnored, exitFindings,
			"consumer.ahead: damaged: 4196 bytes, cut short"},
		{"an empty consumer.ahead of a first prime", stateFiles{healthy[0], []byte{}, nil}, nil, verdictOK, exitOK, ""},
		{"an older release's two slots", stateFiles{healthy[0], healthy[1][:2*offsets.SlotSize], healthy[2]}, nil,
			verdictOK, exitOK, ""},
		{"nothing at all", stateFiles{}, nil, verdictOK, exitOK, ""},
		{"consumer.offset a directory", stateFiles{healthy[0], healthy[1], nil}, func(t *testing.T, dir string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, offsets.OffsetFile), 0o755))
		}, verdictUnreadable, exitFindings, "consumer.offset"},
		{"handed off", healthy, func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, router.MovedFile), nil, 0o644))
		}, verdictMoved, exitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeStateFiles(t, orders0, tt.files)
			defer func() {
				require.NoError(t, os.RemoveAll(orders0))
				writeStateFiles(t, orders0, healthy)
			}()
			if tt.prepare != nil {
				tt.prepare(t, orders0)
			}
			rep, res := verifyJSON(t, base.dir, topicOrders, "0")
			require.Equal(t, tt.wantCode, res.code)
			p := partitionOf(t, rep, topicOrders, 0)
			require.Equal(t, tt.wantVerdict, p.Verdict)
			require.NotEmpty(t, p.NextStart)
			if tt.wantFinding != "" {
				text := p.Error
				for _, f := range append(p.Ignored, p.Damaged...) {
					text += "\n" + f.File + ": " + f.Reason
				}
				require.Contains(t, text, tt.wantFinding)
			}
			if tt.wantVerdict == verdictRefused {
				require.Contains(t, p.Recovery.Refused, "newer than this release reads")
			}
			show := runTool(t, time.Time{}, "show", orders0)
			require.Equal(t, exitOK, show.code, show.stderr)
			require.Contains(t, show.stdout, "verdict    "+tt.wantVerdict+"\n")
			if tt.wantVerdict == verdictDamaged {
				require.Contains(t, show.stdout, "Damaged (recovery does not see it: what it held is delivered again)\n  - consumer.ahead: damaged: ")
			}
		})
	}
	// A partition's directory that is a file.
	require.NoError(t, os.RemoveAll(orders1))
	require.NoError(t, os.WriteFile(orders1, []byte("x"), 0o644))
	rep, res := verifyJSON(t, base.dir, topicOrders)
	require.Equal(t, exitFindings, res.code)
	require.Equal(t, verdictUnreadable, partitionOf(t, rep, topicOrders, 1).Verdict)
	require.Equal(t, verdictOK, partitionOf(t, rep, topicOrders, 0).Verdict)
}

func clone(f stateFiles) stateFiles {
	var c stateFiles
	for i := range f {
		c[i] = append([]byte(nil), f[i]...)
	}
	return c
}

// Issue 26: what a state directory holds besides partitions is listed as such, never taken
// for a partition: the lock file, partitions set aside by reset, a topic directory of an
// earlier release's name (read, and renamed by the node, when it is alone; never read beside
// the current one), and entries the node does not read.
func TestLayout(t *testing.T) {
	c := newCluster(t.TempDir())
	buildState(t, c)
	current := filepath.Join(c.dir, router.TopicDir(topicBilling))
	legacy := filepath.Join(c.dir, url.PathEscape(topicBilling))
	require.NotEqual(t, current, legacy)
	require.NoError(t, os.Rename(current, legacy))
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "notes.txt"), nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(c.dir, "%backup"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(c.dir, topicOrders, "007"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(c.dir, topicOrders, "1.reset-20300102T030405.000000006Z"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, topicOrders, "0", "consumer.ahead.bak"), nil, 0o644))

	rep, res := verifyJSON(t, c.dir)
	require.Equal(t, exitOK, res.code, "a legacy directory alone is read")
	p := partitionOf(t, rep, topicBilling, 0)
	require.True(t, p.LegacyTopicDir)
	require.Equal(t, verdictOK, p.Verdict)
	require.Contains(t, p.NextStart, "renames the topic's directory to "+router.TopicDir(topicBilling))
	require.Equal(t, []string{"consumer.ahead.bak"}, partitionOf(t, rep, topicOrders, 0).OtherEntries)
	require.Len(t, rep.Partitions, 3)
	whats := map[string]string{}
	for _, o := range rep.Other {
		whats[filepath.Base(o.Path)] = o.What
	}
	require.Equal(t, map[string]string{
		router.LockName:                      "the node's lock file",
		"notes.txt":                          "not the node's: a file where topic directories are",
		"%backup":                            "not a topic directory: the node does not read it",
		"007":                                "not a partition directory: the node does not read it",
		"1.reset-20300102T030405.000000006Z": "a partition's state set aside by consumestate reset: the node does not read it",
	}, whats)

	copyPartition(t, filepath.Join(legacy, "0"), filepath.Join(current, "0"))
	rep, res = verifyJSON(t, c.dir)
	require.Equal(t, exitFindings, res.code, "a shadowed legacy directory is never read")
	var verdicts []string
	for _, p := range rep.Partitions {
		if p.Topic == topicBilling {
			verdicts = append(verdicts, p.Verdict)
		}
	}
	require.ElementsMatch(t, []string{verdictOK, verdictShadowed}, verdicts)
	show := runTool(t, time.Time{}, "show", c.dir, topicBilling, "0")
	require.Equal(t, exitOK, show.code)
	require.Contains(t, show.stdout, "directory  "+filepath.Join(current, "0")+"\n", "the directory the node reads")
	show = runTool(t, time.Time{}, "show", filepath.Join(legacy, "0"))
	require.Contains(t, show.stdout, "verdict    "+verdictShadowed+"\n")
}

// Issue 26: a long topic's directory name is a hash that gives no topic back: list and verify
// say so (and verify exits 1), and name the topic to read it.
func TestLongTopic(t *testing.T) {
	long := strings.Repeat("Long", 60) // 240 bytes, 360 once escaped: hashed
	c := newCluster(t.TempDir())
	c.routes.Set(long, 0)
	n := c.start(t)
	c.append(n, long, 0, 3)
	settle(t, n, consume(t, n, long, 0, 3), []int64{0, 1}, nil)
	require.NoError(t, n.Close())

	rep, res := verifyJSON(t, c.dir)
	require.Equal(t, exitFindings, res.code)
	require.Len(t, rep.Partitions, 1)
	require.False(t, rep.Partitions[0].TopicKnown)
	require.Equal(t, verdictUnknownTopic, rep.Partitions[0].Verdict)
	require.Equal(t, router.TopicDir(long), rep.Partitions[0].TopicDir)

	rep, res = verifyJSON(t, c.dir, long)
	require.Equal(t, exitOK, res.code)
	p := partitionOf(t, rep, long, 0)
	require.Equal(t, verdictOK, p.Verdict)
	require.Equal(t, int64(1), p.Recovery.Frontier)

	res = runTool(t, time.Time{}, "show", filepath.Join(c.dir, router.TopicDir(long), "0"))
	require.Equal(t, exitTrouble, res.code)
	require.Contains(t, res.stderr, "gives no topic")
	res = runTool(t, time.Time{}, "show", c.dir, long, "0")
	require.Equal(t, exitOK, res.code, res.stderr)
	res = runTool(t, time.Time{}, "list", c.dir)
	require.Equal(t, exitOK, res.code)
	require.Contains(t, res.stdout, "? ("+router.TopicDir(long)+")")
}

// Issue 34: pointed at the host's data directory instead of the state directory inside it
// (DATA/consumer, as the examples lay it out), every command says so and where to point,
// and exits 2, rather than finding no partitions and exiting 0.
func TestDataDirectory(t *testing.T) {
	data := t.TempDir()
	c := newCluster(filepath.Join(data, dataDirChild))
	buildState(t, c)
	require.NoError(t, os.Mkdir(filepath.Join(data, "log"), 0o755)) // the host's own
	want := data + " looks like the host's data directory, not the node's state directory (router.Config.Dir): " +
		"it holds no partition, and " + c.dir + " holds the node's: point at " + c.dir
	for _, args := range [][]string{
		{"list", data},
		{"list", "-json", data},
		{"verify", data},
		{"verify", data, topicOrders},
		{"verify", data, topicOrders, "0"},
		{"show", data, topicOrders, "0"},
		{"reset", data, topicOrders, "0", "-confirm"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			res := runTool(t, time.Time{}, args...)
			require.Equal(t, exitTrouble, res.code, res.stdout)
			require.Empty(t, res.stdout)
			require.Contains(t, res.stderr, want)
		})
	}
	// The lock file alone is enough to tell: a node ran there, with no partition yet.
	empty := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(empty, dataDirChild), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(empty, dataDirChild, router.LockName), nil, 0o644))
	res := runTool(t, time.Time{}, "verify", empty)
	require.Equal(t, exitTrouble, res.code, res.stdout)
	require.Contains(t, res.stderr, "point at "+filepath.Join(empty, dataDirChild))
	// A directory named consumer that holds no state of a node is no reason to refuse.
	other := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(other, dataDirChild), 0o755))
	res = runTool(t, time.Time{}, "verify", other)
	require.Equal(t, exitOK, res.code, res.stderr)
	// The state directory itself reads as before.
	res = runTool(t, time.Time{}, "verify", c.dir)
	require.Equal(t, exitOK, res.code, res.stderr)
}
