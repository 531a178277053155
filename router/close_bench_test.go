package router_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// BenchmarkCloseAfterAcks: a node on the real disk acks the one record of each of 4,000 new
// partitions and closes at once; the op is the Close, whose final writeouts sync every
// partition's window and consumer.offset.
func BenchmarkCloseAfterAcks(b *testing.B) {
	const partitions = 4000
	for range b.N {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "state")
		node, err := router.New(freshCrashConfig(dir, partitions))
		require.NoError(b, err)
		acked, err := drainFresh(context.Background(), node)
		require.NoError(b, err)
		require.Equal(b, partitions, acked)
		b.StartTimer()
		require.NoError(b, node.Close())
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*partitions), "µs/partition")
}
