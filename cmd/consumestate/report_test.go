package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/offsets"
)

// runsOf against the simplest model: the runs expand back to the offsets, each run is
// maximal, and they ascend.
func TestRunsOf(t *testing.T) {
	require.Equal(t, []run{}, runsOf(nil))
	require.Equal(t, []run{{-1, 0}, {2, 2}, {9223372036854775806, 9223372036854775807}},
		runsOf([]int64{-1, 0, 2, 9223372036854775806, 9223372036854775807}))
	rapid.Check(t, func(t *rapid.T) {
		set := rapid.SliceOfDistinct(rapid.Int64Range(-1, 200), rapid.ID[int64]).Draw(t, "offsets")
		slices.Sort(set)
		runs := runsOf(set)
		var back []int64
		for i, r := range runs {
			if r[0] > r[1] || (i > 0 && r[0] <= runs[i-1][1]+1) {
				t.Fatalf("runs %v are not maximal and ascending", runs)
			}
			for o := r[0]; o <= r[1]; o++ {
				back = append(back, o)
			}
		}
		if !slices.Equal(back, set) {
			t.Fatalf("runs %v of %v expand to %v", runs, set, back)
		}
	})
}

// FuzzShow: no bytes in a partition's files make show or verify panic, and the report says
// what recovery does with them (checkVariant). The slots come trimmed (no padding, no
// checksum), as recovery's own fuzz target takes them: sealed, each is padded and given its
// checksum; unsealed, slot0 is consumer.ahead as it is.
func FuzzShow(f *testing.F) {
	dir := filepath.Join(healthyDir, topicOrders, "0")
	var seed stateFiles
	for i, name := range stateFileOrder {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(f, err)
		seed[i] = b
	}
	trim := func(s []byte) []byte { return bytes.TrimRight(s[:offsets.SlotSize-4], "\x00") }
	slot0, slot1 := trim(seed[1][:offsets.SlotSize]), trim(seed[1][offsets.SlotSize:])
	f.Add(seed[0], slot0, slot1, seed[2], true)
	f.Add(seed[0], slot1, slot0, seed[2][:8], true)
	f.Add(seed[0][:20], slot0[:40], []byte{}, []byte{}, false)
	f.Add([]byte{}, slot1, []byte{}, binary.BigEndian.AppendUint64(nil, 3), true)
	// consumer.id bound to a host incarnation of the topic (flag 0x04, 8 bytes before the
	// checksum), as a node whose host names one writes it.
	bound := append(slices.Clone(seed[0][:20]), 0, 0, 0, 0, 0, 0, 0x0b, 0x0b)
	bound[5] |= 0x04
	bound = binary.BigEndian.AppendUint32(bound, crc32.Checksum(bound, crc32.MakeTable(crc32.Castagnoli)))
	f.Add(bound, slot0, slot1, seed[2], true)
	// A version 2 record: key tails, an ordered topic's records parked in the acked-ahead runs.
	var rec offsets.Record
	require.NoError(f, offsets.DecodeSlot(seed[1][offsets.SlotSize:2*offsets.SlotSize], &rec))
	rec.Seq++
	rec.KeyTails = []offsets.KeyTail{{Key: 0xfeed, From: 13}, {Key: 7, From: 15}}
	v2 := make([]byte, offsets.SlotSize)
	_, err := offsets.EncodeSlot(v2, &rec)
	require.NoError(f, err)
	f.Add(seed[0], trim(v2), slot1, seed[2], true)
	ref := partitionRef{topic: topicOrders, topicKnown: true, topicDir: topicOrders, partition: 0, path: dir}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, id, s0, s1, off []byte, seal bool) {
		if len(s0) > offsets.SlotSize-4 || len(s1) > offsets.SlotSize-4 {
			t.Skip("longer than a slot")
		}
		ahead := s0
		if seal {
			ahead = nil
			for i, s := range [][]byte{s0, s1} {
				if i == 1 && len(s) == 0 {
					break
				}
				b := make([]byte, offsets.SlotSize)
				copy(b, s)
				binary.BigEndian.PutUint32(b[offsets.SlotSize-4:], crc32.Checksum(b[:offsets.SlotSize-4], castagnoli))
				ahead = append(ahead, b...)
			}
		}
		files := stateFiles{id, ahead, off}
		for i := range files {
			if len(files[i]) == 0 && i != 1 {
				files[i] = nil // missing, not empty
			}
		}
		checkVariant(t, variant{"fuzzed", files}, ref)
	})
}
