package storecommit

import (
	"context"
	"testing"

	"narad.dev/consume/offsets"
)

// nopStore is a Store that costs nothing.
var nopStore = Store{
	Load:   func(context.Context, string, int32) ([]byte, error) { return nil, nil },
	Save:   func(context.Context, []Entry) error { return nil },
	Delete: func(context.Context, string) error { return nil },
}

// benchSource gives every partition a small state, as a live shard's is between acks: a
// frontier, two offsets acked ahead and one delivery attempt counted.
type benchSource struct{}

func (benchSource) State(topic string, p int32, into *offsets.State) bool {
	f := int64(p) * 1000
	into.Frontier, into.Incarnation = f, uint64(p)+1
	into.Ahead = append(into.Ahead[:0], offsets.Run{First: f + 2, Last: f + 2}, offsets.Run{First: f + 5, Last: f + 5})
	into.Attempts = append(into.Attempts[:0], offsets.Attempt{Offset: f + 1, Count: 2})
	into.Quarantine, into.Requeued = into.Quarantine[:0], into.Requeued[:0]
	return true
}

// BenchmarkSaveAll16000 is one save pass of 16,000 dirty partitions into a store that costs
// nothing: their snapshots, encodings and 16 Saves of 1,024 (the marks are made with the
// timer stopped). One op is one pass; partitions/s is the committer's own rate.
func BenchmarkSaveAll16000(b *testing.B) {
	const n = 16000
	c := New(Config{Store: nopStore, Source: benchSource{}})
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for p := range int32(n) {
			c.MarkDirty("orders", p)
		}
		b.StartTimer()
		if err := c.saveAll(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if got := c.Stats().Windows; got != uint64(n*b.N) {
		b.Fatalf("saved %d partitions, want %d", got, n*b.N)
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "partitions/s")
}
