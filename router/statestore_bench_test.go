package router_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// countingStore is a StateStore that costs nothing and counts its Saves and the partitions
// they hold.
type countingStore struct{ saves, partitions atomic.Int64 }

func (s *countingStore) Load(context.Context, string, int32) ([]byte, error) { return nil, nil }
func (s *countingStore) Delete(context.Context, string) error                { return nil }

func (s *countingStore) Save(_ context.Context, batch []router.PartitionState) error {
	s.saves.Add(1)
	s.partitions.Add(int64(len(batch)))
	return nil
}

// BenchmarkStoreWrites16000 is the committer of a node with a state store (Config.Store, a
// store that costs nothing) saving 16,000 partitions of one topic, each acked once since the
// last save, at CommitInterval 1 s, on the real clock. Each op is one round: a record
// appended to every partition, consumed and acked, the last ack durable; the acks are made
// with the timer stopped, and the timer runs over the durable ack, which starts the save
// pass at once instead of at the interval and returns once every partition is saved.
// partitions/s is the partitions saved per second of that pass: what the committer can save
// in one interval; saves/interval is the Saves of a pass (one pass per interval), of up to
// storecommit.DefaultMaxBatch partitions each.
func BenchmarkStoreWrites16000(b *testing.B) {
	const n = 16000
	logs := &routertest.MemLogs{}
	routes := &routertest.Routes{}
	parts := make([]int32, n)
	for p := range parts {
		parts[p] = int32(p)
		logs.Log("orders", int32(p))
	}
	routes.Set("orders", parts...)
	store := &countingStore{}
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New(),
		Store: store, CommitInterval: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	ctx := context.Background()
	value := []byte("a payload of 32 bytes, or so...")
	var msgs []router.Message
	var saves, saved int64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for _, p := range parts {
			off := logs.Log("orders", p).Append(nil, value, time.Time{})
			node.Appended("orders", p, off+1)
		}
		var last router.Message
		for got := 0; got < n; {
			msgs, err = node.ConsumeAppend(ctx, msgs[:0], "orders", router.ConsumeOptions{Max: router.MaxBatch})
			if err != nil || len(msgs) == 0 {
				b.Fatalf("consumed %d of %d records: %v", got, n, err)
			}
			for i, m := range msgs {
				if got+i == n-1 {
					last = m
					continue
				}
				if err := node.Ack(ctx, "orders", m.Receipt); err != nil {
					b.Fatal(err)
				}
			}
			got += len(msgs)
		}
		s0, p0 := store.saves.Load(), store.partitions.Load()
		b.StartTimer()
		if err := node.AckDurable(ctx, "orders", last.Receipt); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		saves += store.saves.Load() - s0
		saved += store.partitions.Load() - p0
	}
	b.ReportMetric(float64(saved)/b.Elapsed().Seconds(), "partitions/s")
	b.ReportMetric(float64(saves)/float64(b.N), "saves/interval")
	b.ReportMetric(float64(saved)/float64(b.N), "partitions/interval")
}
