package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/offsets"
)

// withKeyTails copies the healthy orders/0 into a new state directory and gives the record
// recovery takes key tails (a version 2 record, as an ordered topic's shard writes it when it
// parks records behind blocked keys); it returns the directory.
func withKeyTails(t *testing.T, tails []offsets.KeyTail) string {
	dir := t.TempDir()
	part := filepath.Join(dir, topicOrders, "0")
	copyPartition(t, filepath.Join(healthyDir, topicOrders, "0"), part)
	files := readStateFiles(t, part)
	in := offsets.InspectFiles(topicOrders, 0, files[0], files[1], files[2])
	for i, s := range in.Ahead.Slots {
		if s.Status != offsets.SlotTaken {
			continue
		}
		rec := s.Record
		rec.KeyTails = tails
		slot := files[1][i*offsets.SlotSize : (i+1)*offsets.SlotSize]
		_, err := offsets.EncodeSlot(slot, &rec)
		require.NoError(t, err)
		require.Equal(t, byte(2), slot[4], "a record with key tails is version 2")
	}
	writeStateFiles(t, part, files)
	return dir
}

// The tool shows the key tails wherever it shows the acked-ahead runs: the slot decoded
// (show), what recovery takes (show, verify), the summary (list), in text and JSON, and says
// that the parked records they name are delivered again.
func TestKeyTailsShown(t *testing.T) {
	tails := []offsets.KeyTail{{Key: 0xfeed, From: 13}, {Key: 7, From: 15}}
	dir := withKeyTails(t, tails)
	want := []keyTail{{"000000000000feed", 13}, {"0000000000000007", 15}}
	const wantText = "key tails    key 000000000000feed from 13, key 0000000000000007 from 15 (parked, not settled: delivered again)"

	rep, res := verifyJSON(t, dir)
	require.Equal(t, exitOK, res.code, res.stdout)
	p := partitionOf(t, rep, topicOrders, 0)
	require.Equal(t, verdictOK, p.Verdict)
	require.Equal(t, want, p.Recovery.KeyTails)
	require.Contains(t, p.NextStart, "skipping the 3 offsets acked ahead, but for those of 2 keys from their key tails on")

	show := runTool(t, time.Time{}, "show", "-json", dir, topicOrders, "0")
	require.Equal(t, exitOK, show.code, show.stderr)
	var shown report
	require.NoError(t, json.Unmarshal([]byte(show.stdout), &shown))
	sp := partitionOf(t, shown, topicOrders, 0)
	taken := 0
	for _, s := range sp.Decoded.Ahead.Slots {
		if s.Status == offsets.SlotTaken.String() {
			taken++
			require.Equal(t, want, s.KeyTails)
		} else {
			require.Empty(t, s.KeyTails)
		}
	}
	require.Equal(t, 1, taken)
	require.Equal(t, want, sp.Recovery.KeyTails)

	text := runTool(t, time.Time{}, "show", dir, topicOrders, "0")
	require.Equal(t, exitOK, text.code, text.stderr)
	require.Contains(t, text.stdout, "    "+wantText+"\n", "in the slot decoded")
	require.Contains(t, text.stdout, "\n  "+wantText+"\n", "in what recovery takes")
	verify := runTool(t, time.Time{}, "verify", dir)
	require.Contains(t, verify.stdout, "\n    "+wantText+"\n")
	list := runTool(t, time.Time{}, "list", dir)
	require.Contains(t, list.stdout, "3 in 2 runs, 2 keys parked")

	// Without tails nothing of them is printed (the golden outputs hold that).
	plain := runTool(t, time.Time{}, "show", healthyDir, topicOrders, "0")
	require.NotContains(t, plain.stdout, "key tails")
	require.NotContains(t, plain.stdout, "parked")
}
