package offsets

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func offsetBytes(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

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
	older := encode(t, Record{Seq: 4, Key: k, Frontier: 10, Ahead: []int64{12, 15}})
	newer := encode(t, Record{Seq: 5, Key: k, Frontier: 20, Ahead: []int64{22, 30}})
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
		{"larger frontier: consumer.offset", aheadFile(older, newer), offsetBytes(25), true, 25, []int64{30}},
		{"larger frontier: slot", aheadFile(older, newer), offsetBytes(12), true, 20, []int64{22, 30}},
		{"slot of another partition ignored", aheadFile(older, foreign), nil, true, 10, []int64{12, 15}},
		{"only another partition's slot", aheadFile(foreign, nil), offsetBytes(1), true, 1, nil},
		{"consumer.offset short", aheadFile(older, nil), []byte{0, 0, 0, 99}, true, 10, []int64{12, 15}},
		{"consumer.offset long", aheadFile(older, nil), append(offsetBytes(50), 0), true, 10, []int64{12, 15}},
		{"consumer.offset below -1", aheadFile(older, nil), offsetBytes(-5), true, 10, []int64{12, 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := Recover(topic, part, tt.ahead, tt.off)
			require.NoError(t, err)
			require.Equal(t, tt.wantFound, st.Found)
			require.Equal(t, tt.wantFrontier, st.Frontier)
			require.Equal(t, len(tt.wantAhead), len(st.Ahead))
			require.True(t, slices.Equal(tt.wantAhead, st.Ahead))
		})
	}
}

func TestRecoverRefusesNewerRecord(t *testing.T) {
	k := PartitionKey("t", 0)
	newerVersion := encode(t, Record{Seq: 1, Key: k, Frontier: 3})
	newerVersion[offVersion] = SlotVersion + 1
	reseal(newerVersion)
	good := encode(t, Record{Seq: 2, Key: k, Frontier: 8})
	_, err := Recover("t", 0, aheadFile(good, newerVersion), nil)
	require.ErrorIs(t, err, ErrNewerSlot)
}

// Gap G1: a frontier at or above the high watermark is clamped to hwm-1, acked-ahead offsets
// at or above it dropped.
func TestClampToWatermark(t *testing.T) {
	tests := []struct {
		name    string
		st      State
		hwm     int64
		want    State
		dropped int
	}{
		{"no state", State{Frontier: -1}, 10, State{Frontier: -1}, 0},
		{"below", State{Found: true, Frontier: 5, Ahead: []int64{7}}, 10, State{Found: true, Frontier: 5, Ahead: []int64{7}}, 0},
		{"at hwm-1", State{Found: true, Frontier: 9}, 10, State{Found: true, Frontier: 9}, 0},
		{"at hwm", State{Found: true, Frontier: 10}, 10, State{Found: true, Frontier: 9}, 0},
		{"bit flip far above", State{Found: true, Frontier: 1 << 60, Ahead: []int64{1<<60 + 2}}, 10, State{Found: true, Frontier: 9, Ahead: []int64{}}, 1},
		{"ahead above hwm", State{Found: true, Frontier: 3, Ahead: []int64{5, 10, 11}}, 10, State{Found: true, Frontier: 3, Ahead: []int64{5}}, 2},
		{"empty log", State{Found: true, Frontier: 4}, 0, State{Found: true, Frontier: -1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped := clampState(tt.st, tt.hwm)
			require.Equal(t, tt.want.Found, got.Found)
			require.Equal(t, tt.want.Frontier, got.Frontier)
			require.True(t, slices.Equal(tt.want.Ahead, got.Ahead))
			require.Equal(t, tt.dropped, dropped)
		})
	}
}
