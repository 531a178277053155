package router_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/inflight"
	"narad.dev/consume/internal/handoff"
	"narad.dev/consume/internal/statedir"
	"narad.dev/consume/offsets"
	"narad.dev/consume/router"
)

// An ordered topic's key tails (its records parked in the acked-ahead runs, unsettled) go from
// the files to a move's bytes with the runs: ReadState carries them (offsets → inflight →
// handoff), so the next owner never takes a parked record for acked.
func TestReadStateCarriesKeyTails(t *testing.T) {
	dir := t.TempDir()
	part := statedir.PartitionPath(dir, "orders", 0)
	require.NoError(t, os.MkdirAll(part, 0o755))
	rec := offsets.Record{Seq: 1, Key: offsets.PartitionKey("orders", 0), Frontier: 10,
		Ahead:    []offsets.Run{{First: 12, Last: 14}, {First: 20, Last: 20}},
		KeyTails: []offsets.KeyTail{{Key: 0xfeed, From: 13}, {Key: 7, From: 20}}}
	slot := make([]byte, offsets.SlotSize)
	_, err := offsets.EncodeSlot(slot, &rec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(part, offsets.AheadFile), slot, 0o644))

	b, err := router.ReadState(nil, dir, "orders", 0)
	require.NoError(t, err)
	p, err := handoff.Decode(b, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(10), p.State.Frontier)
	require.Equal(t, []inflight.Run{{First: 12, Last: 14}, {First: 20, Last: 20}}, p.State.AckedAhead)
	require.Equal(t, []inflight.KeyTail{{Key: 0xfeed, From: 13}, {Key: 7, From: 20}}, p.State.KeyTails)
}
