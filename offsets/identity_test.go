package offsets

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStateFilesRoundTrip(t *testing.T) {
	key := PartitionKey("t", 3)
	id := make([]byte, IDFileSize)
	require.Equal(t, IDFileSize, encodeID(id, key, identity{incarnation: 42}))
	got, err := decodeID(id, key)
	require.NoError(t, err)
	require.Equal(t, identity{incarnation: 42}, got)
	_, err = decodeID(id, key+1)
	require.ErrorIs(t, err, ErrDamagedStateFile, "another partition's")

	for _, a := range []adoption{
		{legacy: true, frontier: 99},
		{legacy: true, frontier: -1},
		{legacy: true, frontier: 10, slot: true, seq: 3, slotCRC: 0xdeadbeef},
		{legacy: true, frontier: 10, slot: true, seq: 0, slotCRC: 0},
	} {
		b := make([]byte, AdoptedIDFileSize)
		require.Equal(t, AdoptedIDFileSize, encodeID(b, key, identity{incarnation: 42, adopted: a}))
		got, err := decodeID(b, key)
		require.NoError(t, err)
		require.Equal(t, identity{incarnation: 42, adopted: a}, got)
		_, err = decodeID(b[:IDFileSize], key)
		require.ErrorIs(t, err, ErrDamagedStateFile, "an adopting consumer.id cut to the plain size")
		_, err = decodeID(b, key+1)
		require.ErrorIs(t, err, ErrDamagedStateFile, "another partition's")
	}
	// Flags that do not match the size, or that this release does not know, are damage even
	// under a good checksum.
	for _, tt := range []struct {
		name  string
		size  int
		flags byte
	}{
		{"plain size, adopted flag", IDFileSize, idAdoptedLegacy},
		{"adopted size, no flag", AdoptedIDFileSize, 0},
		{"a slot named without the adopted flag", AdoptedIDFileSize, idAdoptedSlot},
		{"an unknown flag", AdoptedIDFileSize, idAdoptedLegacy | 1<<2},
	} {
		b := make([]byte, tt.size)
		encodeID(b, key, identity{incarnation: 42})
		b[idOffFlags] = tt.flags
		binary.BigEndian.PutUint32(b[tt.size-4:], crc32.Checksum(b[:tt.size-4], castagnoli))
		_, err := decodeID(b, key)
		require.ErrorIs(t, err, ErrDamagedStateFile, tt.name)
	}

	off := make([]byte, OffsetFileSize)
	encodeOffset(off, key, 42, 1234)
	o, err := decodeOffset(off, key)
	require.NoError(t, err)
	require.Equal(t, offsetFile{frontier: 1234, incarnation: 42}, o)
	_, err = decodeOffset(off[:LegacyOffsetFileSize], key)
	require.ErrorIs(t, err, ErrDamagedStateFile, "a new file cut to 8 bytes is not a legacy frontier")
	o, err = decodeOffset([]byte{0, 0, 0, 0, 0, 0, 0, 9}, key)
	require.NoError(t, err)
	require.Equal(t, offsetFile{frontier: 9, legacy: true}, o)
}

// FuzzStateFiles: the consumer.id and consumer.offset decoders never panic, accept only what
// re-encodes to the very bytes read, and refuse any other partition's file.
func FuzzStateFiles(f *testing.F) {
	key := PartitionKey("f", 1)
	id := make([]byte, IDFileSize)
	encodeID(id, key, identity{incarnation: 7})
	adoptedSlot := make([]byte, AdoptedIDFileSize)
	encodeID(adoptedSlot, key, identity{incarnation: 7,
		adopted: adoption{legacy: true, frontier: 10, slot: true, seq: 3, slotCRC: 0x01020304}})
	adoptedOffset := make([]byte, AdoptedIDFileSize)
	encodeID(adoptedOffset, key, identity{incarnation: 7, adopted: adoption{legacy: true, frontier: 99}})
	off := make([]byte, OffsetFileSize)
	encodeOffset(off, key, 7, 99)
	f.Add(id)
	f.Add(adoptedSlot)
	f.Add(adoptedOffset)
	f.Add(adoptedSlot[:IDFileSize])
	f.Add(off)
	f.Add(off[:8])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, err := decodeID(b, key); err == nil {
			again := make([]byte, AdoptedIDFileSize)
			n := encodeID(again, key, got)
			if !bytes.Equal(again[:n], b) || got.incarnation == 0 {
				t.Fatalf("consumer.id % x accepted as %+v", b, got)
			}
			if a := got.adopted; a.frontier < -1 || (!a.legacy && a != (adoption{})) || (a.legacy && len(b) != AdoptedIDFileSize) {
				t.Fatalf("consumer.id % x accepted with adoption %+v", b, a)
			}
			if _, err := decodeID(b, key+1); err == nil {
				t.Fatal("consumer.id accepted for another partition")
			}
		}
		o, err := decodeOffset(b, key)
		switch {
		case err != nil:
		case o.legacy:
			if len(b) != LegacyOffsetFileSize || o.frontier < -1 {
				t.Fatalf("legacy consumer.offset % x read as %+v", b, o)
			}
		default:
			again := make([]byte, OffsetFileSize)
			encodeOffset(again, key, o.incarnation, o.frontier)
			if !bytes.Equal(again, b) || o.frontier < -1 || o.incarnation == 0 {
				t.Fatalf("consumer.offset % x accepted as %+v", b, o)
			}
			if _, err := decodeOffset(b, key+1); err == nil {
				t.Fatal("consumer.offset accepted for another partition")
			}
		}
	})
}
