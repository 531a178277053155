package offsets

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStateFilesRoundTrip(t *testing.T) {
	key := PartitionKey("t", 3)
	id := make([]byte, IDFileSize)
	encodeID(id, key, 42)
	inc, err := decodeID(id, key)
	require.NoError(t, err)
	require.Equal(t, uint64(42), inc)
	_, err = decodeID(id, key+1)
	require.ErrorIs(t, err, ErrDamagedStateFile, "another partition's")

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
	encodeID(id, key, 7)
	off := make([]byte, OffsetFileSize)
	encodeOffset(off, key, 7, 99)
	f.Add(id)
	f.Add(off)
	f.Add(off[:8])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if inc, err := decodeID(b, key); err == nil {
			again := make([]byte, IDFileSize)
			encodeID(again, key, inc)
			if !bytes.Equal(again, b) || inc == 0 {
				t.Fatalf("consumer.id % x accepted as incarnation %d", b, inc)
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
