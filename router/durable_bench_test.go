package router_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// BenchmarkAckDurable is a durable ack on the real file system (b.TempDir): waiters
// goroutines each take one record of one partition and ack it durably, over and over. One op
// is one acked record (its consume included). syncs/ack is the committer's writeouts (one
// data sync each) per ack: one per ack with one waiter, a small fraction of one with many
// (group commit). Compare ns/op of waiters=1 with BenchmarkBareSync, one 4 KiB write and data
// sync in the same directory: the target is at most 2.5x, and at most 0.1 syncs/ack for
// waiters=64.
func BenchmarkAckDurable(b *testing.B) {
	for _, waiters := range []int{1, 64} {
		b.Run(fmt.Sprintf("waiters=%d", waiters), func(b *testing.B) { benchAckDurable(b, waiters) })
	}
}

func benchAckDurable(b *testing.B, waiters int) {
	logs := &routertest.MemLogs{}
	routes := &routertest.Routes{}
	routes.Set("t", 0)
	log := logs.Log("t", 0)
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	ctx := context.Background()
	ackOne := func() error {
		msgs, err := node.Consume(ctx, "t", router.ConsumeOptions{Max: 1, Wait: time.Second})
		if err != nil {
			return err
		}
		if len(msgs) != 1 {
			return fmt.Errorf("consumed %d records", len(msgs))
		}
		return node.AckDurable(ctx, "t", msgs[0].Receipt)
	}
	for range b.N + waiters + 1 {
		off := log.Append(nil, []byte("payload"), time.Time{})
		node.Appended("t", 0, off+1)
	}
	if err := ackOne(); err != nil { // the partition is loaded, primed and written out once
		b.Fatal(err)
	}
	before := node.Stats().Committer
	var acks atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range waiters {
		wg.Go(func() {
			for acks.Add(1) <= int64(b.N) {
				if err := ackOne(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	after := node.Stats().Committer
	b.ReportMetric(float64(after.Writeouts-before.Writeouts)/float64(b.N), "syncs/ack")
}

// BenchmarkBareSync is what a durable ack cannot beat: one 4 KiB write at alternating offsets
// of an 8 KiB file and its data sync (fdatasync on Linux), in a directory like
// BenchmarkAckDurable's.
func BenchmarkBareSync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "consumer.ahead"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(8 << 10); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4<<10)
	i := 0
	for b.Loop() {
		i++
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, int64(i%2)*int64(len(buf))); err != nil {
			b.Fatal(err)
		}
		if err := dataSync(f); err != nil {
			b.Fatal(err)
		}
	}
}
