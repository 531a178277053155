package offsets_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/offsets"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealed pads or cuts b to a slot and gives it a valid checksum, so the fuzzer's bytes reach
// the parser behind the checksum instead of stopping there.
func sealed(b []byte) []byte {
	s := make([]byte, offsets.SlotSize)
	copy(s, b)
	binary.BigEndian.PutUint32(s[offsets.SlotSize-4:], crc32.Checksum(s[:offsets.SlotSize-4], castagnoli))
	return s
}

func fuzzSeeds(t testing.TB) [][]byte {
	k := offsets.PartitionKey("f", 1)
	good := slot(t, offsets.Record{Seq: 5, Key: k, Frontier: 100, Ahead: []int64{102, 103, 104, 900}})
	full := slot(t, offsets.Record{Seq: 6, Key: k, Frontier: 0, Ahead: seqOf(2, 20_000, 2)})
	reserved := slot(t, offsets.Record{Seq: 7, Key: k, Frontier: 9, Ahead: []int64{11},
		Attempts: []offsets.Attempt{{Offset: 10, Count: 4}}, Quarantine: []int64{12, 13}})
	newer := slices.Clone(good)
	newer[4] = offsets.SlotVersion + 1
	torn := append(slices.Clone(full[:1024]), good[1024:]...)
	// Trimmed seeds (no padding, no checksum) keep the fuzzer's inputs small; the targets pad and
	// seal them. The raw whole slots exercise the checksum itself.
	return [][]byte{trim(good), trim(full), trim(reserved), trim(newer), good, torn,
		make([]byte, offsets.SlotSize), []byte("NRCA"),
		[]byte("NRCA\x01\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x02\x80\x00")}
}

// trim drops a slot's checksum and zero padding: sealed puts them back.
func trim(s []byte) []byte { return bytes.TrimRight(s[:offsets.SlotSize-4], "\x00") }

func seqOf(from, to, step int64) []int64 {
	var s []int64
	for o := from; o <= to; o += step {
		s = append(s, o)
	}
	return s
}

// FuzzDecodeSlot: the slot decoder never panics, answers only its two error classes, and
// every record it accepts keeps the record's rules and survives an encode/decode round trip
// (invariant 8, checklist item 74).
func FuzzDecodeSlot(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range [][]byte{data, sealed(data)} {
			if len(data) > offsets.SlotSize {
				t.Skip("longer than a slot")
			}
			var r offsets.Record
			err := offsets.DecodeSlot(b, &r)
			if err != nil {
				require.True(t, errors.Is(err, offsets.ErrCorruptSlot) || errors.Is(err, offsets.ErrNewerSlot), "%v", err)
				continue
			}
			require.GreaterOrEqual(t, r.Frontier, int64(-1))
			require.LessOrEqual(t, len(r.Ahead), offsets.MaxAheadOffsets)
			if !ascendingAbove(r.Ahead, r.Frontier) {
				t.Fatalf("acked-ahead offsets not ascending above the frontier %d", r.Frontier)
			}
			again := make([]byte, offsets.SlotSize)
			over, err := offsets.EncodeSlot(again, &r)
			require.NoError(t, err)
			require.Zero(t, over, "a decoded record fits its slot again")
			var r2 offsets.Record
			require.NoError(t, offsets.DecodeSlot(again, &r2))
			require.Equal(t, r.Seq, r2.Seq)
			require.Equal(t, r.Frontier, r2.Frontier)
			require.True(t, slices.Equal(r.Ahead, r2.Ahead))
			require.True(t, slices.Equal(r.Attempts, r2.Attempts))
			require.True(t, slices.Equal(r.Quarantine, r2.Quarantine))
		}
	})
}

// FuzzRecover: recovery from any bytes of the two files never panics, and returns only a
// frontier one of the files holds and acked-ahead offsets a valid slot of the partition holds
// (RELIABILITY row 17, invariants I1 and 8). An empty slot1 is a file that ends after slot 0
// (a move's copy); an empty offsetFile is a missing consumer.offset.
func FuzzRecover(f *testing.F) {
	seeds := fuzzSeeds(f)
	f.Add(seeds[0], seeds[1], []byte{0, 0, 0, 0, 0, 0, 0, 50})
	f.Add(seeds[1], seeds[0], []byte{})
	f.Add(seeds[0], []byte{}, []byte{0xff, 0, 0, 0, 0, 0, 0, 1})
	f.Add(seeds[4], seeds[5], []byte{0, 0, 0, 0, 0, 0, 0})
	f.Add(seeds[3], seeds[2], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{}, []byte{}, []byte{0, 0, 0, 0, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, slot0, slot1, offsetFile []byte) {
		for _, seal := range []bool{false, true} {
			s0, s1 := fit(slot0, seal), slot1
			if len(slot1) > 0 {
				s1 = fit(slot1, seal)
			}
			var off []byte
			if len(offsetFile) > 0 {
				off = offsetFile
			}
			st, err := offsets.Recover("f", 1, append(slices.Clone(s0), s1...), off)
			if err != nil {
				require.ErrorIs(t, err, offsets.ErrNewerSlot)
				continue
			}
			frontiers, valid := []int64{-1}, [][]int64{}
			for _, s := range [][]byte{s0, s1} {
				var r offsets.Record
				if offsets.DecodeSlot(s, &r) == nil && r.Key == offsets.PartitionKey("f", 1) {
					frontiers = append(frontiers, r.Frontier)
					valid = append(valid, r.Ahead)
				}
			}
			if v := int64(binary.BigEndian.Uint64(append(make([]byte, 8), off...)[len(off):])); len(off) == 8 && v >= -1 {
				frontiers = append(frontiers, v)
			}
			require.Contains(t, frontiers, st.Frontier, "a frontier the files hold")
			require.Equal(t, st.Found, st.Frontier != -1 || len(frontiers) > 1)
			if !ascendingAbove(st.Ahead, st.Frontier) {
				t.Fatalf("acked-ahead offsets not ascending above the frontier %d", st.Frontier)
			}
			for _, o := range st.Ahead {
				if !heldBy(valid, o) {
					t.Fatalf("acked-ahead offset %d is in no valid slot", o)
				}
			}
		}
	})
}

// fit makes b one slot: sealed (padded, checksummed) or cut/padded with zeros as it is.
func fit(b []byte, seal bool) []byte {
	if seal {
		return sealed(b)
	}
	s := make([]byte, offsets.SlotSize)
	copy(s, b)
	return s
}

func ascendingAbove(offs []int64, floor int64) bool {
	for _, o := range offs {
		if o <= floor {
			return false
		}
		floor = o
	}
	return true
}

// heldBy reports whether o is in one of the ascending sets.
func heldBy(sets [][]int64, o int64) bool {
	for _, s := range sets {
		if _, ok := slices.BinarySearch(s, o); ok {
			return true
		}
	}
	return false
}
