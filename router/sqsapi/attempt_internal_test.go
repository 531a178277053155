package sqsapi

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// TestReceiveAttemptsBounds: the answers remembered stay within MaxReceiveAttempts and
// MaxReceiveAttemptBytes, the oldest forgotten first; one above the byte bound alone is not
// remembered; a delivery changed forgets the answer that holds it, and only its handle's.
func TestReceiveAttemptsBounds(t *testing.T) {
	now := time.Unix(1767000000, 0)
	msg := func(offset int64, size int) []router.Message {
		return []router.Message{{Partition: 0, Offset: offset, Value: bytes.Repeat([]byte("x"), size),
			Receipt: router.Handle{Partition: 0, Offset: offset, Nonce: uint64(offset) + 1}}}
	}
	key := func(i int) attemptKey { return attemptKey{queue: "q.fifo", id: itoaTest(i)} }
	var r receiveAttempts
	for i := range MaxReceiveAttempts + 1 {
		r.remember(key(i), "t", 0, msg(int64(i), 1), []int64{1}, now)
	}
	require.Nil(t, r.find(key(0), now), "the oldest forgotten")
	require.NotNil(t, r.find(key(1), now))
	require.NotNil(t, r.find(key(MaxReceiveAttempts), now))
	require.Len(t, r.byKey, MaxReceiveAttempts)
	require.LessOrEqual(t, len(r.order)-r.head, 2*MaxReceiveAttempts+64)

	var b receiveAttempts
	b.remember(key(0), "t", 0, msg(0, MaxReceiveAttemptBytes+1), []int64{1}, now)
	require.Nil(t, b.find(key(0), now), "too large alone")
	b.remember(key(1), "t", 0, msg(1, MaxReceiveAttemptBytes/2), []int64{1}, now)
	b.remember(key(2), "t", 0, msg(2, MaxReceiveAttemptBytes/2), []int64{1}, now)
	b.remember(key(3), "t", 0, msg(3, 1), []int64{1}, now)
	require.Nil(t, b.find(key(1), now), "forgotten for the bytes")
	require.NotNil(t, b.find(key(2), now))
	require.LessOrEqual(t, b.bytes, MaxReceiveAttemptBytes)

	b.changed("t", router.Handle{Partition: 0, Offset: 2, Nonce: 99}) // another delivery of the record
	require.NotNil(t, b.find(key(2), now))
	b.changed("t", router.Handle{Partition: 0, Offset: 2, Nonce: 3})
	require.Nil(t, b.find(key(2), now))
	require.Equal(t, 1, b.bytes, "key 3's alone")
	require.Nil(t, b.find(key(3), now.Add(ReceiveAttemptWindow)))
}

func itoaTest(i int) string { return strconv.Itoa(i) }
