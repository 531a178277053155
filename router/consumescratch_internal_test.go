package router

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/wire"
)

// A served consume's scratch keeps no reference to the log's records once released, though
// it clears only what its consumes wrote: a batch's records dropped by the scan (a
// reservation takes one record of a key) were cleared where they were dropped, and a later
// consume that wrote less does not hide what an earlier one left.
func TestConsumeScratchReleaseDropsEveryRecord(t *testing.T) {
	ctx := context.Background()
	var keys [][]byte
	for _, k := range "aaabbc" {
		keys = append(keys, []byte{byte(k)})
	}
	log := &probedLog{keys: keys}
	n := newProbedNode(t, log)
	s := &consumeScratch{}
	reserve := wire.Consume{Pinned: -1, Max: 6, Reserve: true}
	reply := n.consumeReply(ctx, s, "g", "t", reserve, 1<<20)
	require.Equal(t, wire.StatusOK, reply.Status, reply.Message)
	require.Len(t, reply.Deliveries, 3, "one record of a, b and c: the second and third of a, and b's, wait behind their keys")
	one := wire.Consume{Pinned: -1, Max: 1}
	reply = n.consumeReply(ctx, s, "g", "t", one, 1<<20)
	require.Empty(t, reply.Deliveries, "every record left waits behind its key")
	require.Equal(t, 3, s.written)

	s.release()
	for i, m := range s.msgs[:cap(s.msgs)] {
		require.Zero(t, m, "message %d", i)
	}
	for i, d := range s.deliveries[:cap(s.deliveries)] {
		require.Zero(t, d, "delivery %d", i)
	}
}
