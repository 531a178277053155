package routertest_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// A MemLog gives back what was appended, byte for byte: nil and empty keys and values stay
// apart, timestamps come back as given (zero or not), records bigger than an arena chunk
// too, across trims; Read and ReadRange agree, and ReadOffsets lists every offset read, in
// order. The model is a plain slice of records.
func TestMemLogKeepsWhatWasAppended(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		log := routertest.NewMemLog()
		var model []router.Record
		oldest := int64(0)
		var read []int64
		bytesOrNil := func(label string) []byte {
			switch rapid.IntRange(0, 5).Draw(t, label+"Kind") {
			case 0:
				return nil
			case 1:
				return []byte{}
			case 2:
				return bytes.Repeat([]byte{'b'}, 1<<20+rapid.IntRange(0, 10).Draw(t, label+"Big"))
			}
			return rapid.SliceOfN(rapid.Byte(), 1, 40).Draw(t, label)
		}
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				var at time.Time
				if rapid.Bool().Draw(t, "stamped") {
					at = time.Unix(rapid.Int64Range(1, 1<<40).Draw(t, "sec"), 0).UTC()
				}
				key, value := bytesOrNil("key"), bytesOrNil("value")
				off := log.Append(key, value, at)
				require.Equal(t, oldest+int64(len(model)), off)
				model = append(model, router.Record{Key: key, Value: value, Timestamp: at})
			case 2:
				drop := rapid.IntRange(0, len(model)).Draw(t, "drop")
				log.Trim(oldest + int64(drop))
				model, oldest = model[drop:], oldest+int64(drop)
			case 3:
				if len(model) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(model)-1).Draw(t, "at")
				one, err := log.Read(oldest + int64(i))
				require.NoError(t, err)
				require.Equal(t, model[i], one)
				n := rapid.IntRange(1, len(model)-i).Draw(t, "n")
				got, err := log.ReadRange(oldest+int64(i), n, 1<<30, nil)
				require.NoError(t, err)
				require.Equal(t, model[i:i+n], got)
				read = append(read, oldest+int64(i))
				for j := range n {
					read = append(read, oldest+int64(i+j))
				}
			}
		}
		require.Equal(t, oldest, log.Oldest())
		require.Equal(t, oldest+int64(len(model)), log.HighWatermark())
		require.Equal(t, read, log.ReadOffsets())
		require.Equal(t, len(read), log.Reads())
	})
}
