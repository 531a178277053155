package router_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"narad.dev/consume/internal/memfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// everyTopic is routes and logs in which every topic exists, with one partition, partition
// 0, on this node, its log empty: what a node's first touch of a topic costs, without a
// host's own tables growing in the measure.
type everyTopic struct{ log *routertest.MemLog }

func (everyTopic) Partitions(string) ([]int32, map[string][]int32, bool) {
	return []int32{0}, nil, true
}

func (e everyTopic) Get(string, int32) (router.Log, error) { return e.log, nil }

// BenchmarkFirstTouch is what the first consume of a topic costs a node that has touched
// topics=N others already: each op is the first consume (no wait, nothing there) of one more
// topic, timed once N topics are touched. A cost that grows with N is a table copied per new
// topic. Target: the first touch at 100,000 topics at most 1.5x that at 1,000. A partition
// only looked at has nothing to persist, so the committer writes nothing for it and the
// figure is the node's own.
func BenchmarkFirstTouch(b *testing.B) {
	for _, topics := range []int{1_000, 16_000, 100_000} {
		b.Run(fmt.Sprintf("topics=%d", topics), func(b *testing.B) {
			hosts := everyTopic{log: routertest.NewMemLog()}
			node, err := router.New(router.Config{Logs: hosts, Routes: hosts, Dir: "/state", FS: memfs.New(),
				Topic: func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: time.Minute} }})
			if err != nil {
				b.Fatal(err)
			}
			defer node.Close()
			ctx := context.Background()
			for i := range topics {
				if _, err := node.Consume(ctx, fmt.Sprintf("warm-%d", i), router.ConsumeOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			names := make([]string, b.N)
			for i := range names {
				names[i] = fmt.Sprintf("new-%d", i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := node.Consume(ctx, names[i], router.ConsumeOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
