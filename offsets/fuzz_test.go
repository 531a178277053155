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
	good := slot(t, offsets.Record{Seq: 5, Key: k, Frontier: 100, Ahead: offsets.RunsOf(102, 103, 104, 900)})
	full := slot(t, offsets.Record{Seq: 6, Key: k, Frontier: 0, Ahead: offsets.RunsOf(seqOf(2, 20_000, 2)...)})
	sets := slot(t, offsets.Record{Seq: 7, Key: k, Frontier: 9, Ahead: offsets.RunsOf(11),
		Attempts:   []offsets.Attempt{{Offset: 10, Count: 4}, {Offset: 12, Count: 1}},
		Quarantine: []int64{2, 3, 9, 13}, Requeued: []int64{0, 4, 5}})
	newer := slices.Clone(good)
	newer[4] = offsets.SlotVersion + 1
	torn := append(slices.Clone(full[:1024]), good[1024:]...)
	fullSets := slot(t, offsets.Record{Seq: 8, Key: k, Frontier: 50_000, Requeued: seqOf(0, 2000, 7),
		Ahead: offsets.RunsOf(seqOf(50_002, 60_000, 5)...), Quarantine: seqOf(1, 40_000, 3),
		Attempts: []offsets.Attempt{{Offset: 50_001, Count: 3}}})
	requeuedOnly := slot(t, offsets.Record{Seq: 9, Key: k, Frontier: 1 << 40, Requeued: []int64{7, 1 << 39, 1 << 40}})
	// Version 2: key tails (an ordered topic's parked records) beside the runs, and with the
	// runs cut for room.
	tails := slot(t, offsets.Record{Seq: 10, Key: k, Frontier: 100, Incarnation: 7, Ahead: offsets.RunsOf(102, 103, 104, 900),
		KeyTails: []offsets.KeyTail{{Key: 0xfeed, From: 103}, {Key: 1, From: 900}}, Attempts: []offsets.Attempt{{Offset: 101, Count: 2}}})
	tailsFull := slot(t, offsets.Record{Seq: 11, Key: k, Frontier: 0, Ahead: offsets.RunsOf(seqOf(2, 20_000, 2)...),
		KeyTails: []offsets.KeyTail{{Key: 1 << 63, From: 2}, {Key: 2, From: 4}, {Key: 3, From: 30_000}}})
	// Trimmed seeds (no padding, no checksum) keep the fuzzer's inputs small; the targets pad and
	// seal them. The raw whole slots exercise the checksum itself.
	return [][]byte{trim(good), trim(full), trim(sets), trim(newer), good, torn,
		make([]byte, offsets.SlotSize), []byte("NRCA"),
		[]byte("NRCA\x01\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x02\x80\x00"),
		trim(fullSets), trim(requeuedOnly), sets,
		// a requeued section (tag 4) above a frontier of 3: the decoder refuses it
		[]byte("NRCA\x01\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x02\x04\x00"),
		trim(tails), trim(tailsFull), tails,
		// a tails' section (tag 6) in a version 1 record: the decoder refuses it
		[]byte("NRCA\x01\x00\x00\x0c\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x06\x00\x09\x00\x00\x00\x00\x00\x00\x00\x00\x05")}
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
			if !maximalRunsAbove(r.Ahead, r.Frontier) {
				t.Fatalf("acked-ahead runs %v not maximal, ascending above the frontier %d", r.Ahead, r.Frontier)
			}
			if !ascendingAbove(r.Quarantine, -1) || !ascendingAbove(r.Requeued, -1) {
				t.Fatalf("quarantined or requeued offsets not ascending from 0")
			}
			if n := len(r.Requeued); n > 0 && r.Requeued[n-1] > r.Frontier {
				t.Fatalf("requeued offset %d above the frontier %d", r.Requeued[n-1], r.Frontier)
			}
			prev := r.Frontier
			for _, a := range r.Attempts {
				if a.Offset <= prev {
					t.Fatalf("attempts not ascending above the frontier %d", r.Frontier)
				}
				prev = a.Offset
			}
			if !validTails(r.KeyTails, r.Frontier) {
				t.Fatalf("key tails %v break their rules above the frontier %d", r.KeyTails, r.Frontier)
			}
			if wantV := byte(1 + min(len(r.KeyTails), 1)); b[4] != wantV {
				t.Fatalf("version %d with %d key tails", b[4], len(r.KeyTails))
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
			require.True(t, slices.Equal(r.Requeued, r2.Requeued))
			require.True(t, slices.Equal(r.KeyTails, r2.KeyTails))
		}
	})
}

// validTails reports whether key tails keep their rules above frontier: at most
// MaxKeyTails, keys nonzero and distinct, From ascending above frontier.
func validTails(tails []offsets.KeyTail, frontier int64) bool {
	if len(tails) > offsets.MaxKeyTails {
		return false
	}
	seen := map[uint64]bool{}
	for _, k := range tails {
		if k.Key == 0 || seen[k.Key] || k.From <= frontier {
			return false
		}
		seen[k.Key], frontier = true, k.From
	}
	return true
}

// FuzzRecover: recovery from any bytes of the two files never panics, and returns only a
// frontier one of the files holds, and acked-ahead offsets, attempts, quarantined and requeued
// offsets that one valid slot of the partition holds, all from the same slot; attempts only
// above the frontier and not acked ahead, requeued offsets only at or below it (RELIABILITY
// row 17, invariants I1 and 8), under no consumer.id, one that adopted nothing, and ones
// whose incarnation adopted legacy state at its upgrade. An empty slot1 is a file that ends
// after slot 0 (a move's copy); an empty offsetFile is a missing consumer.offset. A whole
// slot1 is also tried in the third slot, and both in the last two (a file of three slots).
func FuzzRecover(f *testing.F) {
	fuzzID := make([]byte, offsets.IDFileSize)
	offsets.EncodeIDForTest(fuzzID, offsets.PartitionKey("f", 1), 7)
	seeds := fuzzSeeds(f)
	// A consumer.id whose incarnation adopted, at its upgrade, the legacy record of seeds[4]
	// (which seeds[0] seals back into), and one that adopted a legacy consumer.offset alone.
	adoptedSlotID := make([]byte, offsets.AdoptedIDFileSize)
	offsets.EncodeAdoptedIDForTest(adoptedSlotID, offsets.PartitionKey("f", 1), 7, 100, seeds[4])
	adoptedOffsetID := make([]byte, offsets.AdoptedIDFileSize)
	offsets.EncodeAdoptedIDForTest(adoptedOffsetID, offsets.PartitionKey("f", 1), 7, 50, nil)
	// The same three bound to a host incarnation of the topic: recovery reads them alike
	// (the binding is LoadBound's to compare).
	boundID := make([]byte, offsets.MaxIDFileSize)
	boundID = boundID[:offsets.EncodeBoundIDForTest(boundID, offsets.PartitionKey("f", 1), 7, 0xb0b, false, 0, nil)]
	boundSlotID := make([]byte, offsets.MaxIDFileSize)
	boundSlotID = boundSlotID[:offsets.EncodeBoundIDForTest(boundSlotID, offsets.PartitionKey("f", 1), 7, 0xb0b, true, 100, seeds[4])]
	boundOffsetID := make([]byte, offsets.MaxIDFileSize)
	boundOffsetID = boundOffsetID[:offsets.EncodeBoundIDForTest(boundOffsetID, offsets.PartitionKey("f", 1), 7, 0xb0b, true, 50, nil)]
	f.Add(seeds[0], seeds[1], []byte{0, 0, 0, 0, 0, 0, 0, 50})
	f.Add(seeds[1], seeds[0], []byte{})
	f.Add(seeds[0], []byte{}, []byte{0xff, 0, 0, 0, 0, 0, 0, 1})
	f.Add(seeds[4], seeds[5], []byte{0, 0, 0, 0, 0, 0, 0})
	f.Add(seeds[3], seeds[2], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{}, []byte{}, []byte{0, 0, 0, 0, 0, 0, 1, 0, 0})
	f.Add(seeds[2], seeds[9], []byte{0, 0, 0, 0, 0, 0, 0, 11})
	f.Add(seeds[9], seeds[10], []byte{0, 0, 0, 0, 0, 0, 0x9c, 0x40})
	f.Add(seeds[11], seeds[12], []byte{})
	f.Add(seeds[4], seeds[0], []byte{0, 0, 0, 0, 0, 0, 0, 100})
	f.Add(seeds[1], seeds[4], []byte{0, 0, 0, 0, 0, 0, 0, 101})
	f.Add(seeds[13], seeds[0], []byte{})
	f.Add(seeds[14], seeds[13], []byte{0, 0, 0, 0, 0, 0, 0, 5})
	f.Add(seeds[15], seeds[16], []byte{})
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
			layouts := [][]byte{slices.Concat(s0, s1)}
			if len(s1) == offsets.SlotSize {
				blank := make([]byte, offsets.SlotSize)
				layouts = append(layouts, slices.Concat(s0, blank, s1), slices.Concat(blank, s1, s0))
			}
			type input struct{ id, ahead []byte }
			var inputs []input
			for _, ahead := range layouts {
				for _, id := range [][]byte{nil, fuzzID, adoptedSlotID, adoptedOffsetID, boundID, boundSlotID, boundOffsetID} {
					inputs = append(inputs, input{id, ahead})
				}
			}
			for _, in := range inputs {
				st, err := offsets.Recover("f", 1, in.id, in.ahead, off)
				if err != nil {
					require.ErrorIs(t, err, offsets.ErrNewerSlot)
					continue
				}
				wantHost := uint64(0)
				if len(in.id) == offsets.IDFileSize+offsets.HostIncarnationSize || len(in.id) == offsets.MaxIDFileSize {
					wantHost = 0xb0b
				}
				require.Equal(t, wantHost, st.HostIncarnation, "the binding is consumer.id's")
				frontiers, valid := []int64{-1}, []offsets.Record{}
				for _, s := range [][]byte{s0, s1} {
					var r offsets.Record
					if offsets.DecodeSlot(s, &r) == nil && r.Key == offsets.PartitionKey("f", 1) {
						frontiers = append(frontiers, r.Frontier)
						valid = append(valid, r)
					}
				}
				if v := int64(binary.BigEndian.Uint64(append(make([]byte, 8), off...)[len(off):])); len(off) == 8 && v >= -1 {
					frontiers = append(frontiers, v)
				}
				if len(off) == offsets.OffsetFileSize {
					frontiers = append(frontiers, int64(binary.BigEndian.Uint64(off[8:16])))
				}
				require.Contains(t, frontiers, st.Frontier, "a frontier the files hold")
				// A file it cannot trust (a legacy frontier beside a slot, an 8-byte file
				// that is a torn new one, a 32-byte one without its consumer.id) may leave
				// nothing found; what is found is one of the files' frontiers.
				if !st.Found {
					require.Equal(t, int64(-1), st.Frontier)
				}
				if !maximalRunsAbove(st.Ahead, st.Frontier) {
					t.Fatalf("acked-ahead runs %v not maximal, ascending above the frontier %d", st.Ahead, st.Frontier)
				}
				for _, a := range st.Attempts {
					if a.Offset <= st.Frontier || offsets.RunsContain(st.Ahead, a.Offset) {
						t.Fatalf("attempts of offset %d, settled", a.Offset)
					}
				}
				for _, o := range st.Requeued {
					require.LessOrEqual(t, o, st.Frontier, "requeued only at or below the frontier")
				}
				if !validTails(st.KeyTails, st.Frontier) {
					t.Fatalf("key tails %v break their rules above the frontier %d", st.KeyTails, st.Frontier)
				}
				if !fromOneSlot(valid, st) {
					t.Fatalf("recovered sets are in no one valid slot: %+v", st)
				}
			}
		}
	})
}

// fromOneSlot reports whether every set of st is what one of the records holds, cut as
// recovery cuts it (nothing recovered from nothing).
func fromOneSlot(recs []offsets.Record, st offsets.State) bool {
	empty := len(st.Ahead) == 0 && len(st.Attempts) == 0 && len(st.Quarantine) == 0 && len(st.Requeued) == 0 &&
		len(st.KeyTails) == 0
	if empty {
		return true
	}
	for _, r := range recs {
		if st.Frontier < r.Frontier {
			continue
		}
		// The record's key tails come with its runs, or neither does: runs without their
		// tails would take parked records for acked.
		tails := slices.Equal(st.KeyTails, r.KeyTails) || (len(st.KeyTails) == 0 && len(st.Ahead) == 0)
		ok := tails && runsWithin(st.Ahead, r.Ahead) && subset(st.Quarantine, r.Quarantine) && slices.Equal(st.Quarantine, r.Quarantine) &&
			slices.Equal(st.Requeued, r.Requeued)
		for _, a := range st.Attempts {
			ok = ok && slices.Contains(r.Attempts, a)
		}
		if ok {
			return true
		}
	}
	return false
}

// subset reports whether every offset of a is in the ascending b.
func subset(a, b []int64) bool {
	for _, o := range a {
		if _, ok := slices.BinarySearch(b, o); !ok {
			return false
		}
	}
	return true
}

// runsWithin reports whether every offset of the ascending runs a is in the ascending runs b.
func runsWithin(a, b []offsets.Run) bool {
	j := 0
	for _, r := range a {
		for j < len(b) && b[j].Last < r.First {
			j++
		}
		if j == len(b) || b[j].First > r.First || b[j].Last < r.Last {
			return false
		}
	}
	return true
}

// maximalRunsAbove reports whether runs are as a decoder gives them: nonempty, ascending,
// none touching the next, the first above floor, and at most MaxAheadOffsets offsets.
func maximalRunsAbove(runs []offsets.Run, floor int64) bool {
	var total int64
	for i, r := range runs {
		if r.Last < r.First || r.First <= floor || (i > 0 && r.First == floor+1) {
			return false
		}
		total += r.Len()
		floor = r.Last
	}
	return total <= offsets.MaxAheadOffsets
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
