package offsets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 26 (the state tool): Inspect says, slot by slot and file by file, what recovery makes
// of a partition's files, and its verdict agrees with Recover's and with what Load logs.
func TestInspectFiles(t *testing.T) {
	const topic, part = "orders", int32(3)
	k := PartitionKey(topic, part)
	const inc, otherInc = 7, 8
	id := idBytes(topic, part, inc)
	anchor := encode(t, Record{Seq: 4, Key: k, Incarnation: inc, Frontier: 5, Ahead: []Run{{7, 7}}})
	window := encode(t, Record{Seq: 5, Key: k, Incarnation: inc, Frontier: 6, Ahead: []Run{{7, 8}}})
	foreign := encode(t, Record{Seq: 9, Key: k + 1, Incarnation: inc, Frontier: 50})
	otherLife := encode(t, Record{Seq: 9, Key: k, Incarnation: otherInc, Frontier: 50})
	legacyNewer := encode(t, Record{Seq: 9, Key: k, Frontier: 40})
	legacyOlder := encode(t, Record{Seq: 1, Key: k, Frontier: 2})
	torn := append(slices.Clone(window[:1000]), make([]byte, SlotSize-1000)...)
	newer := slices.Clone(window)
	newer[offVersion] = SlotVersion + 1
	reseal(newer)
	adopted := encode(t, Record{Seq: 3, Key: k, Frontier: 10})
	tests := []struct {
		name       string
		id, ahead  []byte
		off        []byte
		wantSlots  [2]SlotStatus
		wantOffset OffsetUse
		wantErr    error
	}{
		{"a running partition", id, aheadFile(anchor, window), offsetOf(topic, part, inc, 5),
			[2]SlotStatus{SlotOlder, SlotTaken}, OffsetBehind, nil},
		{"consumer.offset ahead of the slot", id, aheadFile(anchor, nil), offsetOf(topic, part, inc, 6),
			[2]SlotStatus{SlotTaken, SlotBlank}, OffsetGivesFrontier, nil},
		{"a torn window", id, aheadFile(anchor, torn), nil,
			[2]SlotStatus{SlotTaken, SlotDamaged}, OffsetMissing, nil},
		{"a move's copy: slot 0 only", id, anchor, nil,
			[2]SlotStatus{SlotTaken, SlotMissing}, OffsetMissing, nil},
		{"a partial second slot", id, append(slices.Clone(anchor), window[:100]...), nil,
			[2]SlotStatus{SlotTaken, SlotDamaged}, OffsetMissing, nil},
		{"another partition's slot", id, aheadFile(anchor, foreign), offsetOf(topic, part+1, inc, 50),
			[2]SlotStatus{SlotTaken, SlotForeign}, OffsetDamaged, nil},
		{"another incarnation's files", id, aheadFile(otherLife, nil), offsetOf(topic, part, otherInc, 50),
			[2]SlotStatus{SlotOtherIncarnation, SlotBlank}, OffsetOtherIncarnation, nil},
		{"no consumer.id: this incarnation's records untrusted", nil, aheadFile(anchor, window), offsetOf(topic, part, inc, 5),
			[2]SlotStatus{SlotOtherIncarnation, SlotOtherIncarnation}, OffsetOtherIncarnation, nil},
		{"legacy records under a consumer.id that adopted nothing", id, aheadFile(legacyOlder, legacyNewer), offsetBytes(40),
			[2]SlotStatus{SlotLegacyIgnored, SlotLegacyIgnored}, OffsetLegacyIgnored, nil},
		{"an older legacy record beside this incarnation's", id, aheadFile(legacyOlder, anchor), offsetBytes(2),
			[2]SlotStatus{SlotLegacyPassed, SlotTaken}, OffsetLegacyBeside, nil},
		{"legacy records with no consumer.id", nil, aheadFile(legacyOlder, legacyNewer), offsetBytes(40),
			[2]SlotStatus{SlotOlder, SlotTaken}, OffsetLegacyBeside, nil},
		{"a legacy consumer.offset alone", nil, nil, offsetBytes(40),
			[2]SlotStatus{SlotMissing, SlotMissing}, OffsetLegacyGivesFrontier, nil},
		{"the adopted legacy record", adoptedIDBytes(topic, part, inc, 10, adopted), aheadFile(adopted, legacyNewer), nil,
			[2]SlotStatus{SlotTaken, SlotLegacyIgnored}, OffsetMissing, nil},
		{"both slots damaged", id, aheadFile(torn, torn), nil,
			[2]SlotStatus{SlotDamaged, SlotDamaged}, OffsetMissing, nil},
		{"a newer release's record", id, aheadFile(anchor, newer), offsetOf(topic, part, inc, 5),
			[2]SlotStatus{SlotOlder, SlotNewer}, OffsetMissing, ErrNewerSlot},
		{"consumer.id damaged", id[:20], aheadFile(anchor, window), nil,
			[2]SlotStatus{SlotOtherIncarnation, SlotOtherIncarnation}, OffsetMissing, nil},
		{"nothing at all", nil, nil, nil, [2]SlotStatus{SlotMissing, SlotMissing}, OffsetMissing, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := InspectFiles(topic, part, tt.id, tt.ahead, tt.off)
			require.Equal(t, tt.wantSlots, [2]SlotStatus{in.Ahead.Slots[0].Status, in.Ahead.Slots[1].Status})
			require.Equal(t, tt.wantOffset, in.Offset.Use)
			if tt.wantErr != nil {
				require.ErrorIs(t, in.Err, tt.wantErr)
			} else {
				require.NoError(t, in.Err)
			}
			requireInspectionAgrees(t, in, stateFiles{tt.id, tt.ahead, tt.off})
		})
	}
}

// The decoded fields: each file's content, the adopted consumer.id's naming of its record.
func TestInspectFilesDecodes(t *testing.T) {
	const topic, part = "orders", int32(3)
	k := PartitionKey(topic, part)
	adopted := encode(t, Record{Seq: 3, Key: k, Frontier: 10, Ahead: []Run{{12, 12}}, Quarantine: []int64{4},
		Attempts: []Attempt{{Offset: 11, Count: 2}}, Requeued: []int64{1}})
	window := encode(t, Record{Seq: 4, Key: k, Incarnation: 9, Frontier: 11, Ahead: []Run{{12, 12}}})
	in := InspectFiles(topic, part, adoptedIDBytes(topic, part, 9, 10, adopted), aheadFile(adopted, window), offsetBytes(10))
	require.Equal(t, FileRead{Present: true, Size: AdoptedIDFileSize}, in.ID.FileRead)
	require.NoError(t, in.ID.Err)
	require.Equal(t, uint64(9), in.ID.Incarnation)
	require.True(t, in.ID.Adopted && in.ID.AdoptedSlot)
	require.Equal(t, int64(10), in.ID.AdoptedFrontier)
	require.Equal(t, uint64(3), in.ID.AdoptedSeq)
	require.Equal(t, in.Ahead.Slots[0].Checksum, in.ID.AdoptedChecksum, "consumer.id names slot 0 by its checksum")
	require.Equal(t, FileRead{Present: true, Size: 2 * SlotSize}, in.Ahead.FileRead, "an older release's two slots")
	require.Equal(t, SlotMissing, in.Ahead.Slots[2].Status)
	s0 := in.Ahead.Slots[0]
	require.Equal(t, SlotOlder, s0.Status, "the adopted record counts; the window is newer")
	require.Equal(t, []int64{4}, s0.Record.Quarantine)
	require.Equal(t, []int64{1}, s0.Record.Requeued)
	require.Equal(t, []Attempt{{Offset: 11, Count: 2}}, s0.Record.Attempts)
	require.Equal(t, SlotTaken, in.Ahead.Slots[1].Status)
	require.Equal(t, uint64(9), in.Ahead.Slots[1].Record.Incarnation)
	require.True(t, in.Offset.Legacy)
	require.Equal(t, int64(10), in.Offset.Frontier)
	require.Equal(t, OffsetLegacyBeside, in.Offset.Use)
	require.Equal(t, int64(11), in.State.Frontier)
	require.False(t, in.Ignored.Any())
	requireInspectionAgrees(t, in, stateFiles{adoptedIDBytes(topic, part, 9, 10, adopted), aheadFile(adopted, window), offsetBytes(10)})

	short := InspectFiles(topic, part, nil, window[:10], offsetOf(topic, part, 9, 3)[:31])
	require.Equal(t, SlotDamaged, short.Ahead.Slots[0].Status)
	require.ErrorIs(t, short.Ahead.Slots[0].Err, ErrCorruptSlot)
	require.Zero(t, short.Ahead.Slots[0].Checksum)
	require.ErrorIs(t, short.Offset.Err, ErrDamagedStateFile)
	require.True(t, short.Ignored.UnusableAhead)
	require.Equal(t, "missing", SlotMissing.String())
	require.Equal(t, "unknown", SlotStatus(200).String())
	require.Equal(t, "unknown", OffsetUse(200).String())
}

// Inspect reads by path, as Load does: a missing directory is nothing, a state file that is
// a directory an error.
func TestInspect(t *testing.T) {
	dir := t.TempDir()
	in, err := Inspect(nil, filepath.Join(dir, "missing"), "t", 0)
	require.NoError(t, err)
	require.False(t, in.ID.Present || in.Ahead.Present || in.Offset.Present)
	require.False(t, in.State.Found)

	k := PartitionKey("t", 0)
	require.NoError(t, os.WriteFile(filepath.Join(dir, IDFile), idBytes("t", 0, 5), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, AheadFile),
		aheadFile(encode(t, Record{Seq: 1, Key: k, Incarnation: 5, Frontier: 4}), nil), 0o644))
	in, err = Inspect(nil, dir, "t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(4), in.State.Frontier)
	require.Equal(t, uint64(5), in.State.Incarnation)
	require.Equal(t, SlotTaken, in.Ahead.Slots[0].Status)
	st, err := ReadDir(nil, dir, "t", 0)
	require.NoError(t, err)
	require.Equal(t, st, in.State)

	require.NoError(t, os.Mkdir(filepath.Join(dir, OffsetFile), 0o755))
	_, err = Inspect(nil, dir, "t", 0)
	var pe *PartitionError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "inspect", pe.Op)
}

// requireInspectionAgrees checks an inspection against recovery run on the same files: the
// same state and refusal, and statuses that add up to what recovery counted as ignored.
func requireInspectionAgrees(t testing.TB, in Inspection, files stateFiles) {
	t.Helper()
	st, notes, err := recoverState(PartitionKey("orders", 3), files)
	require.Equal(t, st, in.State)
	require.Equal(t, err, in.Err)
	require.Equal(t, notes.Ignored, in.Ignored)
	require.Equal(t, files.id != nil, in.ID.Present)
	require.Equal(t, files.ahead != nil, in.Ahead.Present)
	require.Equal(t, files.offset != nil, in.Offset.Present)
	require.Equal(t, in.ID.Err != nil, in.Ignored.ConsumerID != "")
	if err != nil {
		require.ErrorIs(t, err, ErrNewerSlot)
		for _, s := range in.Ahead.Slots {
			require.NotEqual(t, SlotTaken, s.Status, "recovery refused: nothing is taken")
		}
		return
	}
	count := func(want ...SlotStatus) int {
		n := 0
		for _, s := range in.Ahead.Slots {
			if slices.Contains(want, s.Status) {
				n++
			}
		}
		return n
	}
	require.Equal(t, in.Ignored.DamagedSlots, count(SlotDamaged))
	require.Equal(t, in.Ignored.ForeignSlots, count(SlotForeign, SlotOtherIncarnation))
	legacyOffset := 0
	if in.Offset.Use == OffsetLegacyIgnored {
		legacyOffset = 1
	}
	require.Equal(t, in.Ignored.LegacyUnderIncarnation, count(SlotLegacyIgnored)+legacyOffset)
	require.LessOrEqual(t, count(SlotTaken), 1)
	require.Equal(t, in.Offset.Present && in.Offset.Err != nil, in.Offset.Use == OffsetDamaged)
	switch {
	case in.Offset.Use == OffsetGivesFrontier || in.Offset.Use == OffsetLegacyGivesFrontier:
		require.True(t, in.State.Found)
		require.Equal(t, in.Offset.Frontier, in.State.Frontier)
	case count(SlotTaken) == 1:
		for _, s := range in.Ahead.Slots {
			if s.Status == SlotTaken {
				require.Equal(t, s.Record.Frontier, in.State.Frontier, "the slot taken gives the frontier")
			}
		}
	default:
		require.False(t, in.State.Found)
	}
	for _, s := range in.Ahead.Slots {
		require.Equal(t, s.Status == SlotMissing || s.Status >= SlotTaken, s.Err == nil, "status %v, err %v", s.Status, s.Err)
		if s.Status == SlotNewer {
			require.True(t, errors.Is(s.Err, ErrNewerSlot))
		}
	}
}

// FuzzInspectFiles: the inspection never panics and always agrees with recovery. The slots
// come trimmed (no padding, no checksum; minimizing whole slots takes the fuzzer minutes):
// sealed, each is padded to a slot and given its checksum; unsealed, slot0 is consumer.ahead
// as it is, any length.
func FuzzInspectFiles(f *testing.F) {
	const topic, part = "orders", int32(3)
	k := PartitionKey(topic, part)
	id := idBytes(topic, part, 7)
	trim := func(s []byte) []byte { return bytes.TrimRight(s[:offCRC], "\x00") }
	good := trim(encode(f, Record{Seq: 4, Key: k, Incarnation: 7, Frontier: 5, Ahead: []Run{{7, 7}}, Quarantine: []int64{1}}))
	legacy := encode(f, Record{Seq: 5, Key: k, Frontier: 9})
	f.Add(id, good, trim(legacy), offsetOf(topic, part, 7, 5), true)
	f.Add(adoptedIDBytes(topic, part, 7, 9, legacy), trim(legacy), good, offsetBytes(9), true)
	f.Add([]byte{}, good[:20], []byte{}, []byte{1, 2, 3}, false)
	f.Add(id[:23], []byte{}, good, offsetBytes(-1), true)
	bound := make([]byte, MaxIDFileSize)
	bound = bound[:encodeID(bound, k, identity{incarnation: 7, host: 0xb0b})]
	f.Add(bound, good, []byte{}, offsetOf(topic, part, 7, 5), true)
	boundAdopted := make([]byte, MaxIDFileSize)
	boundAdopted = boundAdopted[:encodeID(boundAdopted, k, identity{incarnation: 7, host: 0xb0b, adopted: adoptionOf(9, legacy)})]
	f.Add(boundAdopted, trim(legacy), good, offsetBytes(9), true)
	f.Fuzz(func(t *testing.T, idFile, slot0, slot1, off []byte, seal bool) {
		if len(slot0) > offCRC || len(slot1) > offCRC || len(idFile) > MaxIDFileSize+1 || len(off) > OffsetFileSize+1 {
			t.Skip("longer than recovery reads")
		}
		ahead := slot0
		if seal {
			ahead = nil
			for i, s := range [][]byte{slot0, slot1} {
				if i == 1 && len(s) == 0 {
					break
				}
				b := make([]byte, SlotSize)
				copy(b, s)
				ahead = append(ahead, reseal(b)...)
			}
		}
		files := stateFiles{idFile, ahead, off}
		if len(files.id) == 0 {
			files.id = nil // missing, not empty
		}
		if len(files.offset) == 0 {
			files.offset = nil
		}
		in := InspectFiles(topic, part, files.id, files.ahead, files.offset)
		requireInspectionAgrees(t, in, files)
	})
}
