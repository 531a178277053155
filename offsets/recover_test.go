package offsets

import (
	"encoding/binary"
	"log/slog"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// offsetBytes is a consumer.offset of the legacy 8-byte form.
func offsetBytes(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// idBytes is a consumer.id of the partition naming incarnation inc.
func idBytes(topic string, part int32, inc uint64) []byte {
	b := make([]byte, IDFileSize)
	encodeID(b, PartitionKey(topic, part), identity{incarnation: inc})
	return b
}

// adoptionOf is the adoption of a legacy slot (nil: consumer.offset alone) with frontier.
func adoptionOf(frontier int64, slot []byte) adoption {
	a := adoption{legacy: true, frontier: frontier}
	if slot != nil {
		var r Record
		if DecodeSlot(slot, &r) == nil {
			a.slot, a.seq, a.slotCRC = true, r.Seq, binary.BigEndian.Uint32(slot[offCRC:])
		}
	}
	return a
}

// adoptedIDBytes is a consumer.id of the partition naming incarnation inc, which adopted the
// legacy slot (nil: consumer.offset alone) and frontier at its upgrade.
func adoptedIDBytes(topic string, part int32, inc uint64, frontier int64, slot []byte) []byte {
	b := make([]byte, AdoptedIDFileSize)
	encodeID(b, PartitionKey(topic, part), identity{incarnation: inc, adopted: adoptionOf(frontier, slot)})
	return b
}

// offsetOf is a consumer.offset of the current form.
func offsetOf(topic string, part int32, inc uint64, v int64) []byte {
	b := make([]byte, OffsetFileSize)
	encodeOffset(b, PartitionKey(topic, part), inc, v)
	return b
}

// aheadFile lays out slots as they sit in consumer.ahead; a nil slot is blank.
func aheadFile(slots ...[]byte) []byte {
	var b []byte
	for _, s := range slots {
		if s == nil {
			s = make([]byte, SlotSize)
		}
		b = append(b, s...)
	}
	return b
}

// Checklist items 73 to 75 and RELIABILITY row 17: recovery takes the newest valid slot of this
// partition and the larger frontier of the two files, with a defined fallback order, and never
// returns more than the files hold.
func TestRecover(t *testing.T) {
	const topic, part = "orders", int32(3)
	k := PartitionKey(topic, part)
	older := encode(t, Record{Seq: 4, Key: k, Frontier: 10, Ahead: runsOf(12, 15)})
	newer := encode(t, Record{Seq: 5, Key: k, Frontier: 20, Ahead: runsOf(22, 30)})
	foreign := encode(t, Record{Seq: 9, Key: k + 1, Frontier: 500})
	torn := append(slices.Clone(newer[:1024]), older[1024:]...)
	tests := []struct {
		name         string
		ahead, off   []byte
		wantFound    bool
		wantFrontier int64
		wantAhead    []int64
	}{
		{"nothing", nil, nil, false, -1, nil},
		{"empty files", []byte{}, []byte{}, false, -1, nil},
		{"consumer.offset only (upgrade)", nil, offsetBytes(99), true, 99, nil},
		{"consumer.offset -1", nil, offsetBytes(-1), true, -1, nil},
		{"newest of two slots", aheadFile(older, newer), nil, true, 20, []int64{22, 30}},
		{"newest in slot 0", aheadFile(newer, older), nil, true, 20, []int64{22, 30}},
		{"torn window falls back to the anchor", aheadFile(older, torn), nil, true, 10, []int64{12, 15}},
		{"both slots blank: consumer.offset", aheadFile(nil, nil), offsetBytes(7), true, 7, nil},
		{"move copy: slot 0 only", older, nil, true, 10, []int64{12, 15}},
		{"half a slot", older[:2000], offsetBytes(3), true, 3, nil},
		{"a legacy consumer.offset is not taken over a slot", aheadFile(older, newer), offsetBytes(25), true, 20, []int64{22, 30}},
		{"larger frontier: slot", aheadFile(older, newer), offsetBytes(12), true, 20, []int64{22, 30}},
		{"slot of another partition ignored", aheadFile(older, foreign), nil, true, 10, []int64{12, 15}},
		{"only another partition's slot", aheadFile(foreign, nil), offsetBytes(1), true, 1, nil},
		{"consumer.offset short", aheadFile(older, nil), []byte{0, 0, 0, 99}, true, 10, []int64{12, 15}},
		{"consumer.offset long", aheadFile(older, nil), append(offsetBytes(50), 0), true, 10, []int64{12, 15}},
		{"consumer.offset below -1", aheadFile(older, nil), offsetBytes(-5), true, 10, []int64{12, 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := Recover(topic, part, nil, tt.ahead, tt.off)
			require.NoError(t, err)
			require.Equal(t, tt.wantFound, st.Found)
			require.Equal(t, tt.wantFrontier, st.Frontier)
			require.Equal(t, len(tt.wantAhead), int(runsLen(st.Ahead)))
			require.True(t, slices.Equal(tt.wantAhead, offsetsOf(st.Ahead)))
		})
	}
}

// Issue 5: recovery returns the chosen slot's attempts only above the recovered frontier and
// not acked ahead, its quarantine as written (either side of the frontier), and its requeued
// offsets at or below the frontier; every set comes from that one slot.
func TestRecoverSets(t *testing.T) {
	const topic, part = "orders", int32(4)
	k := PartitionKey(topic, part)
	older := encode(t, Record{Seq: 4, Key: k, Incarnation: 7, Frontier: 10, Ahead: runsOf(13),
		Attempts: []Attempt{{11, 2}, {12, 1}}, Quarantine: []int64{3, 14}, Requeued: []int64{1}})
	newer := encode(t, Record{Seq: 5, Key: k, Incarnation: 7, Frontier: 20, Ahead: runsOf(22, 30),
		Attempts: []Attempt{{21, 3}, {22, 1}, {25, 7}, {31, 1}}, Quarantine: []int64{3, 14, 24}, Requeued: []int64{5, 18}})
	torn := append(slices.Clone(newer[:1024]), older[1024:]...)
	foreign := encode(t, Record{Seq: 9, Key: k + 1, Incarnation: 7, Frontier: 50, Quarantine: []int64{40}, Requeued: []int64{41}})
	type want struct {
		frontier   int64
		ahead      []int64
		attempts   []Attempt
		quarantine []int64
		requeued   []int64
	}
	tests := []struct {
		name       string
		ahead, off []byte
		want       want
	}{
		{"newest slot, attempts of acked-ahead offsets dropped", aheadFile(older, newer), nil,
			want{20, []int64{22, 30}, []Attempt{{21, 3}, {25, 7}, {31, 1}}, []int64{3, 14, 24}, []int64{5, 18}}},
		{"newest in slot 0", aheadFile(newer, older), nil,
			want{20, []int64{22, 30}, []Attempt{{21, 3}, {25, 7}, {31, 1}}, []int64{3, 14, 24}, []int64{5, 18}}},
		{"larger consumer.offset settles attempts; quarantine and requeued as written", aheadFile(older, newer), offsetOf(topic, part, 7, 25),
			want{25, []int64{30}, []Attempt{{31, 1}}, []int64{3, 14, 24}, []int64{5, 18}}},
		{"torn window: the anchor's sets, not a mix", aheadFile(older, torn), nil,
			want{10, []int64{13}, []Attempt{{11, 2}, {12, 1}}, []int64{3, 14}, []int64{1}}},
		{"move copy: slot 0 only", older, offsetOf(topic, part, 7, 11),
			want{11, []int64{13}, []Attempt{{12, 1}}, []int64{3, 14}, []int64{1}}},
		{"consumer.offset only: no sets", nil, offsetOf(topic, part, 7, 7), want{7, nil, nil, nil, nil}},
		{"another partition's sets ignored", aheadFile(foreign, older), nil,
			want{10, []int64{13}, []Attempt{{11, 2}, {12, 1}}, []int64{3, 14}, []int64{1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := Recover(topic, part, idBytes(topic, part, 7), tt.ahead, tt.off)
			require.NoError(t, err)
			require.True(t, st.Found)
			require.Equal(t, tt.want.frontier, st.Frontier)
			require.True(t, slices.Equal(tt.want.ahead, offsetsOf(st.Ahead)), "ahead %v", st.Ahead)
			require.True(t, slices.Equal(tt.want.attempts, st.Attempts), "attempts %v", st.Attempts)
			require.True(t, slices.Equal(tt.want.quarantine, st.Quarantine), "quarantine %v", st.Quarantine)
			require.True(t, slices.Equal(tt.want.requeued, st.Requeued), "requeued %v", st.Requeued)
			for _, o := range st.Requeued {
				require.LessOrEqual(t, o, st.Frontier)
			}
		})
	}
}

func TestUnresolvedAndAtOrBelow(t *testing.T) {
	as := []Attempt{{3, 1}, {5, 2}, {6, 1}, {9, 4}, {12, 1}}
	require.Equal(t, []Attempt{{6, 1}, {12, 1}}, unresolved(slices.Clone(as), 5, []Run{{7, 9}}))
	require.Empty(t, unresolved(slices.Clone(as), 12, nil))
	require.Equal(t, as, unresolved(slices.Clone(as), -1, nil))
	require.Equal(t, []int64{1, 4}, atOrBelow([]int64{1, 4, 5, 9}, 4))
	require.Empty(t, atOrBelow([]int64{1}, -1))
}

func TestRecoverRefusesNewerRecord(t *testing.T) {
	k := PartitionKey("t", 0)
	newerVersion := encode(t, Record{Seq: 1, Key: k, Frontier: 3})
	newerVersion[offVersion] = SlotVersion + 1
	reseal(newerVersion)
	good := encode(t, Record{Seq: 2, Key: k, Frontier: 8})
	_, err := Recover("t", 0, nil, aheadFile(good, newerVersion), nil)
	require.ErrorIs(t, err, ErrNewerSlot)
}

// Gap G1: a frontier at or above the high watermark is clamped to hwm-1, and offsets at or
// above it are dropped from every set.
func TestClampToWatermark(t *testing.T) {
	tests := []struct {
		name    string
		st      State
		hwm     int64
		want    State
		dropped clampDrops
	}{
		{"no state", State{Frontier: -1}, 10, State{Frontier: -1}, clampDrops{}},
		{"below", State{Found: true, Frontier: 5, Ahead: runsOf(7)}, 10, State{Found: true, Frontier: 5, Ahead: runsOf(7)}, clampDrops{}},
		{"at hwm-1", State{Found: true, Frontier: 9}, 10, State{Found: true, Frontier: 9}, clampDrops{}},
		{"at hwm", State{Found: true, Frontier: 10}, 10, State{Found: true, Frontier: 9}, clampDrops{}},
		{"bit flip far above", State{Found: true, Frontier: 1 << 60, Ahead: runsOf(1<<60 + 2)}, 10, State{Found: true, Frontier: 9, Ahead: []Run{}}, clampDrops{ahead: 1}},
		{"ahead above hwm", State{Found: true, Frontier: 3, Ahead: runsOf(5, 10, 11)}, 10, State{Found: true, Frontier: 3, Ahead: runsOf(5)}, clampDrops{ahead: 2}},
		{"empty log", State{Found: true, Frontier: 4}, 0, State{Found: true, Frontier: -1}, clampDrops{}},
		{"every set", State{Found: true, Frontier: 20, Ahead: runsOf(22),
			Attempts: []Attempt{{21, 2}, {23, 1}}, Quarantine: []int64{2, 9, 10, 15}, Requeued: []int64{3, 8, 12}},
			10, State{Found: true, Frontier: 9, Ahead: []Run{}, Attempts: []Attempt{},
				Quarantine: []int64{2, 9}, Requeued: []int64{3, 8}},
			clampDrops{ahead: 1, attempts: 2, quarantine: 2, requeued: 1}},
		{"sets below hwm kept", State{Found: true, Frontier: 5, Ahead: runsOf(7),
			Attempts: []Attempt{{6, 3}}, Quarantine: []int64{1, 8}, Requeued: []int64{4}},
			10, State{Found: true, Frontier: 5, Ahead: runsOf(7),
				Attempts: []Attempt{{6, 3}}, Quarantine: []int64{1, 8}, Requeued: []int64{4}}, clampDrops{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := clampState(tt.st, tt.hwm)
			require.Equal(t, tt.want.Found, got.Found)
			require.Equal(t, tt.want.Frontier, got.Frontier)
			require.True(t, slices.Equal(tt.want.Ahead, got.Ahead))
			require.True(t, slices.Equal(tt.want.Attempts, got.Attempts))
			require.True(t, slices.Equal(tt.want.Quarantine, got.Quarantine))
			require.True(t, slices.Equal(tt.want.Requeued, got.Requeued))
			require.Equal(t, tt.dropped, dropped)
		})
	}
}

// ClampToWatermark logs what it dropped from every set, and counts the clamp.
func TestClampToWatermarkLogs(t *testing.T) {
	logs := &LogRecorder{}
	c, err := New(Config{Dir: func(string, int32) string { return "" }, Source: NewShards(), Logger: slog.New(logs)})
	require.NoError(t, err)
	defer c.Close()
	st := State{Found: true, Frontier: 12, Attempts: []Attempt{{13, 1}}, Quarantine: []int64{11}, Requeued: []int64{10, 11}}
	got := c.ClampToWatermark("t", 2, st, 11)
	require.Equal(t, int64(10), got.Frontier)
	require.Equal(t, []int64{10}, got.Requeued)
	lines := logs.Lines(msgClamped)
	require.Len(t, lines, 1)
	require.Equal(t, int64(1), lines[0]["dropped_attempts"].Int64())
	require.Equal(t, int64(1), lines[0]["dropped_quarantine"].Int64())
	require.Equal(t, int64(1), lines[0]["dropped_requeued"].Int64())
	require.Equal(t, uint64(1), c.Stats().Clamps)
}

// A legacy record (a slot naming no incarnation, an 8-byte consumer.offset) beside a valid
// consumer.id whose incarnation did not adopt it is not this incarnation's: a backup of a
// deleted topic's earlier life restored under the topic created again. It must not count,
// whatever frontier it holds; the partition delivers again rather than skip.
func TestRecoverIgnoresLegacyUnderAnotherIncarnation(t *testing.T) {
	const topic, part = "orders", int32(5)
	k := PartitionKey(topic, part)
	const inc = 7
	id := idBytes(topic, part, inc)
	ours := encode(t, Record{Seq: 4, Key: k, Incarnation: inc, Frontier: 5, Ahead: runsOf(7)})
	legacyNewer := encode(t, Record{Seq: 9, Key: k, Frontier: 40, Ahead: runsOf(45),
		Quarantine: []int64{41}, Attempts: []Attempt{{42, 3}}})
	legacyOlder := encode(t, Record{Seq: 8, Key: k, Frontier: 30, Ahead: runsOf(33)})
	tests := []struct {
		name         string
		ahead, off   []byte
		wantFound    bool
		wantFrontier int64
		wantAhead    []int64
		wantIgnored  int
	}{
		{"legacy slots only", aheadFile(legacyOlder, legacyNewer), nil, false, -1, nil, 2},
		{"a newer legacy slot beside this incarnation's", aheadFile(ours, legacyNewer), nil, true, 5, []int64{7}, 1},
		{"legacy consumer.offset only", nil, offsetBytes(40), false, -1, nil, 1},
		{"legacy slots and consumer.offset", aheadFile(legacyNewer, legacyOlder), offsetBytes(40), false, -1, nil, 3},
		{"legacy consumer.offset beside this incarnation's slot", aheadFile(ours, nil), offsetBytes(40), true, 5, []int64{7}, 0},
		{"this incarnation's consumer.offset beside legacy slots", aheadFile(legacyNewer, nil), offsetOf(topic, part, inc, 6), true, 6, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, notes, err := recoverState(k, stateFiles{id, tt.ahead, tt.off})
			require.NoError(t, err)
			require.Equal(t, tt.wantFound, st.Found)
			require.Equal(t, tt.wantFrontier, st.Frontier)
			require.True(t, slices.Equal(tt.wantAhead, offsetsOf(st.Ahead)), "ahead %v", st.Ahead)
			require.Empty(t, st.Quarantine)
			require.Empty(t, st.Attempts)
			require.Equal(t, uint64(inc), st.Incarnation)
			require.Equal(t, tt.wantIgnored, notes.LegacyUnderIncarnation)
			require.Equal(t, tt.wantIgnored > 0, notes.Any())
			require.False(t, notes.UnusableAhead, "an ignored legacy slot is not damage")
		})
	}
}

// Under a consumer.id whose incarnation began by adopting legacy state (the upgrade from a
// release before consumer.id), the legacy record it adopted still counts, and a legacy
// consumer.offset no newer than the frontier adopted; no other legacy record does, whatever
// it holds.
func TestRecoverAdoptedLegacy(t *testing.T) {
	const topic, part = "orders", int32(6)
	k := PartitionKey(topic, part)
	const inc = 9
	adopted := encode(t, Record{Seq: 3, Key: k, Frontier: 10, Ahead: runsOf(12, 14), Quarantine: []int64{4}})
	olderLegacy := encode(t, Record{Seq: 2, Key: k, Frontier: 8, Ahead: runsOf(10)})
	sameSeqOtherLife := encode(t, Record{Seq: 3, Key: k, Frontier: 10, Ahead: runsOf(11, 12, 13, 14)})
	newerLegacy := encode(t, Record{Seq: 4, Key: k, Frontier: 30})
	window := encode(t, Record{Seq: 4, Key: k, Incarnation: inc, Frontier: 12, Ahead: runsOf(14)})
	tornWindow := append(slices.Clone(window[:1000]), make([]byte, SlotSize-1000)...)
	bySlot := adoptedIDBytes(topic, part, inc, 10, adopted)
	byOffset := adoptedIDBytes(topic, part, inc, 20, nil)
	tests := []struct {
		name         string
		id, ahead    []byte
		off          []byte
		wantFound    bool
		wantFrontier int64
		wantAhead    []int64
		wantIgnored  int
		unverified   bool
	}{
		{"the adopted record", bySlot, aheadFile(adopted, nil), offsetBytes(7), true, 10, []int64{12, 14}, 0, false},
		{"this incarnation's window over it", bySlot, aheadFile(adopted, window), offsetBytes(7), true, 12, []int64{14}, 0, false},
		{"a torn window: the adopted record", bySlot, aheadFile(adopted, tornWindow), nil, true, 10, []int64{12, 14}, 0, false},
		{"an older legacy record beside the adopted one, silently", bySlot, aheadFile(olderLegacy, adopted), nil, true, 10, []int64{12, 14}, 0, false},
		{"an older legacy record alone", bySlot, aheadFile(olderLegacy, nil), nil, false, -1, nil, 1, false},
		{"a legacy record of the same number but other bytes", bySlot, aheadFile(sameSeqOtherLife, nil), nil, false, -1, nil, 1, false},
		{"a newer legacy record beside the adopted one", bySlot, aheadFile(adopted, newerLegacy), nil, true, 10, []int64{12, 14}, 1, false},
		{"the adopted slot lost: a legacy consumer.offset within the adopted frontier", bySlot, nil, offsetBytes(7), true, 7, nil, 0, true},
		{"the adopted slot lost: a legacy consumer.offset past it", bySlot, nil, offsetBytes(11), false, -1, nil, 1, false},
		{"adopted consumer.offset: legacy consumer.offset within it", byOffset, nil, offsetBytes(20), true, 20, nil, 0, true},
		{"adopted consumer.offset: legacy consumer.offset past it", byOffset, nil, offsetBytes(21), false, -1, nil, 1, false},
		{"adopted consumer.offset: a legacy slot", byOffset, aheadFile(adopted, nil), offsetBytes(20), true, 20, nil, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, notes, err := recoverState(k, stateFiles{tt.id, tt.ahead, tt.off})
			require.NoError(t, err)
			require.Equal(t, tt.wantFound, st.Found)
			require.Equal(t, tt.wantFrontier, st.Frontier)
			require.True(t, slices.Equal(tt.wantAhead, offsetsOf(st.Ahead)), "ahead %v", st.Ahead)
			require.Equal(t, tt.unverified, st.Unverified)
			require.Equal(t, uint64(inc), st.Incarnation)
			require.Equal(t, tt.wantIgnored, notes.LegacyUnderIncarnation)
			require.Empty(t, notes.ConsumerID)
		})
	}
}
