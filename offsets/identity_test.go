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
	// Bound to the host's incarnation of the topic: 8 more bytes before the checksum, in
	// either form, and the fields before them where they were.
	for _, tt := range []struct {
		name string
		id   identity
		size int
	}{
		{"plain, bound", identity{incarnation: 42, host: 0xfeedface}, IDFileSize + HostIncarnationSize},
		{"adopted, bound", identity{incarnation: 42, host: 1<<64 - 1,
			adopted: adoption{legacy: true, frontier: 10, slot: true, seq: 3, slotCRC: 0xdeadbeef}}, MaxIDFileSize},
		{"adopted a consumer.offset, bound", identity{incarnation: 42, host: 1,
			adopted: adoption{legacy: true, frontier: 99}}, MaxIDFileSize},
	} {
		b := make([]byte, MaxIDFileSize)
		require.Equal(t, tt.size, encodeID(b, key, tt.id), tt.name)
		b = b[:tt.size]
		got, err := decodeID(b, key)
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.id, got, tt.name)
		require.Equal(t, tt.id.host, binary.BigEndian.Uint64(b[tt.size-12:]), tt.name)
		unbound := tt.id
		unbound.host = 0
		plain := make([]byte, MaxIDFileSize)
		n := encodeID(plain, key, unbound)
		require.Equal(t, plain[idOffIncarn:n-4], b[idOffIncarn:n-4], "%s: the unbound fields in place", tt.name)
		_, err = decodeID(b[:n], key)
		require.ErrorIs(t, err, ErrDamagedStateFile, "%s: cut to the unbound size", tt.name)
		_, err = decodeID(b, key+1)
		require.ErrorIs(t, err, ErrDamagedStateFile, "%s: another partition's", tt.name)
	}
	// Flags that do not match the size, or that this release does not know, are damage even
	// under a good checksum; so is a binding to host incarnation 0 (0 is "unbound").
	for _, tt := range []struct {
		name  string
		size  int
		flags byte
	}{
		{"plain size, adopted flag", IDFileSize, idAdoptedLegacy},
		{"adopted size, no flag", AdoptedIDFileSize, 0},
		{"a slot named without the adopted flag", AdoptedIDFileSize, idAdoptedSlot},
		{"an unknown flag", AdoptedIDFileSize, idAdoptedLegacy | 1<<3},
		{"plain size, bound flag", IDFileSize, idBoundToHost},
		{"bound size, no flag", IDFileSize + HostIncarnationSize, 0},
		{"bound size, adopted flag", IDFileSize + HostIncarnationSize, idAdoptedLegacy},
		{"adopted and bound size, adopted flag only", MaxIDFileSize, idAdoptedLegacy},
		{"bound to host incarnation 0", IDFileSize + HostIncarnationSize, idBoundToHost},
		{"adopted, bound to host incarnation 0", MaxIDFileSize, idAdoptedLegacy | idBoundToHost},
	} {
		b := make([]byte, tt.size)
		encodeID(b, key, identity{incarnation: 42})
		clear(b[IDFileSize-4:]) // zero where a longer form's fields go
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
	bound := make([]byte, MaxIDFileSize)
	f.Add(bound[:encodeID(bound, key, identity{incarnation: 7, host: 0x0102030405060708})])
	boundAdopted := make([]byte, MaxIDFileSize)
	f.Add(boundAdopted[:encodeID(boundAdopted, key, identity{incarnation: 7, host: 9,
		adopted: adoption{legacy: true, frontier: 10, slot: true, seq: 3, slotCRC: 0x01020304}})])
	f.Add(off)
	f.Add(off[:8])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, err := decodeID(b, key); err == nil {
			again := make([]byte, MaxIDFileSize)
			n := encodeID(again, key, got)
			if !bytes.Equal(again[:n], b) || got.incarnation == 0 {
				t.Fatalf("consumer.id % x accepted as %+v", b, got)
			}
			if a := got.adopted; a.frontier < -1 || (!a.legacy && a != (adoption{})) || (a.legacy && len(b) < AdoptedIDFileSize) {
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
