package router_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/wire"
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
			node, err := router.New(router.Config{Logs: hosts, Routes: hosts, Dir: "/state", FS: crashfs.New(),
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

// dropTransport answers every call with an error: an owner's notifications go nowhere.
type dropTransport struct{}

func (dropTransport) Call(context.Context, string, []byte) ([]byte, error) {
	return nil, errors.New("bench: no peers")
}

// BenchmarkRegister50000 is a peer's Register frames for 50,000 topics the owner owns, as a
// gateway sends them when consumers park on every topic (1,024 registrations a frame, the
// most one carries). Each op is the whole set on a new owner; q1..q4 report the ns per
// registration of each quarter, and q4/q1 their ratio. A ratio above 1 is a cost that grows
// with the topics registered: before, each quarter took longer than the last (4.5 s to 57 s).
func BenchmarkRegister50000(b *testing.B) {
	const topics = 50_000
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("topic-%d", i)
	}
	var quarters [4]time.Duration
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		hosts := everyTopic{log: routertest.NewMemLog()}
		node, err := router.New(router.Config{Logs: hosts, Routes: hosts, Dir: "/state", FS: crashfs.New(),
			Transport: dropTransport{}})
		if err != nil {
			b.Fatal(err)
		}
		frames := make([][]byte, 0, topics/wire.MaxRegistrations+1)
		for from := 0; from < topics; from += wire.MaxRegistrations {
			regs := make([]wire.Registration, 0, wire.MaxRegistrations)
			for _, name := range names[from:min(from+wire.MaxRegistrations, topics)] {
				regs = append(regs, wire.Registration{Topic: name, TTL: time.Minute})
			}
			frame, err := wire.EncodeRequest(wire.Request{Op: wire.OpRegister, Registrations: regs})
			if err != nil {
				b.Fatal(err)
			}
			frames = append(frames, frame)
		}
		b.StartTimer()
		for i, frame := range frames {
			start := time.Now()
			if _, err := node.Serve(context.Background(), "gateway", frame); err != nil {
				b.Fatal(err)
			}
			quarters[min(4*i/len(frames), 3)] += time.Since(start)
		}
		b.StopTimer()
		node.Close()
		b.StartTimer()
	}
	per := float64(b.N) * topics / 4
	for q, d := range quarters {
		b.ReportMetric(float64(d)/per, fmt.Sprintf("q%d-ns/reg", q+1))
	}
	b.ReportMetric(float64(quarters[3])/float64(quarters[0]), "q4/q1")
}
