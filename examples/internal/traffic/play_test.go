package traffic_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/examples/internal/delivery"
	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/examples/internal/nodeproc"
	"narad.dev/consume/examples/internal/queueclient"
	"narad.dev/consume/examples/internal/traffic"
	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
	"narad.dev/consume/router/routertest"
)

// testLedger keeps what the clients tell of each record.
type testLedger struct {
	mu        sync.Mutex
	produced  map[delivery.Position]string
	delivered map[delivery.Position]int
	settled   map[delivery.Position]delivery.Outcome
	outcomes  map[delivery.Outcome]int
}

func newTestLedger() *testLedger {
	return &testLedger{produced: map[delivery.Position]string{}, delivered: map[delivery.Position]int{},
		settled: map[delivery.Position]delivery.Outcome{}, outcomes: map[delivery.Outcome]int{}}
}

func (l *testLedger) Produced(pos delivery.Position, value string, _ time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.produced[pos] = value
}

func (l *testLedger) ProduceFailed() {}
func (l *testLedger) ConsumeFailed() {}

func (l *testLedger) Delivered(_ string, m *queueclient.Message, _ int, _, _ time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pos := delivery.Position{Partition: m.Partition, Offset: m.Offset}
	l.delivered[pos]++
	return l.delivered[pos] - 1, l.delivered[pos] > 1
}

func (l *testLedger) Settled(pos delivery.Position, _ int, o delivery.Outcome, _, _ time.Time, _ bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outcomes[o]++
	if o == delivery.Acked || o == delivery.AckSettled {
		l.settled[pos] = o
	}
}

func (l *testLedger) allAcked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for pos := range l.produced {
		if _, ok := l.settled[pos]; !ok {
			return false
		}
	}
	return true
}

// A run's clients against one node in this process: its produce endpoint (nodeproc.Produce)
// over an in-memory log, its consume API (httpapi), on a nodeproc.Server. Every record is
// produced once, delivered, and acked, some after a nack; none is lost.
func TestPlayAgainstANode(t *testing.T) {
	for _, batchAcks := range []bool{false, true} {
		t.Run(map[bool]string{false: "one ack at a time", true: "batch acks"}[batchAcks], func(t *testing.T) {
			logs, routes := &routertest.MemLogs{}, &routertest.Routes{}
			routes.Set("orders", 0, 1)
			var node *router.Node
			node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: t.TempDir(),
				Topic: func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: time.Second} }})
			require.NoError(t, err)
			defer node.Close()
			api, err := httpapi.New(node, httpapi.Options{})
			require.NoError(t, err)
			mux := http.NewServeMux()
			mux.Handle("/queue/", http.StripPrefix("/queue", api))
			mux.Handle("POST /produce", nodeproc.Produce(func(p int32, value []byte) (int64, error) {
				off := logs.Log("orders", p).Append(nil, value, time.Now())
				node.Appended("orders", p, off+1)
				return off, nil
			}))
			addrs, err := launch.FreeAddrs(1)
			require.NoError(t, err)
			srv, err := nodeproc.Serve(addrs[0], mux)
			require.NoError(t, err)
			defer func() { require.NoError(t, srv.Shutdown()) }()

			led := newTestLedger()
			client := queueclient.NewLocal("orders")
			defer client.HTTP.CloseIdleConnections()
			var progress, scripted int
			var mu sync.Mutex
			pl := &traffic.Play{
				API: client, Ledger: led, Records: 300, Seed: 7,
				Nodes: []launch.Node{{ID: "node-1", Addr: addrs[0]}}, PerNode: 3, BatchAcks: batchAcks,
				Partitions: []int32{0, 1},
				Owner:      func(int32) string { return "http://" + addrs[0] },
				Pace:       func(time.Time) float64 { return math.Inf(1) },
				Script:     func(context.Context) error { mu.Lock(); defer mu.Unlock(); scripted++; return nil },
				Progress:   10 * time.Millisecond,
				ProgressLine: func() {
					mu.Lock()
					defer mu.Unlock()
					progress++
				},
				Timeout: 30 * time.Second,
				Check:   func() error { return nil },
				Done:    func(context.Context) bool { return led.allAcked() },
			}
			require.NoError(t, pl.Run(t.Context()))
			led.mu.Lock()
			defer led.mu.Unlock()
			require.Len(t, led.produced, 300)
			require.Len(t, led.settled, 300, "every record acked")
			require.Positive(t, led.outcomes[delivery.Nacked], "the seed nacks some")
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, 1, scripted)
		})
	}
}

// A script's error ends the run with it; so does a check's, and the timeout.
func TestPlayEnds(t *testing.T) {
	boom := errors.New("boom")
	base := func() *traffic.Play {
		return &traffic.Play{
			API: queueclient.NewLocal("orders"), Ledger: newTestLedger(), Records: 1,
			Pace:    func(time.Time) float64 { return 0 }, // produces nothing: the run never ends by itself
			Owner:   func(int32) string { return "http://127.0.0.1:1" },
			Timeout: time.Minute,
			Check:   func() error { return nil },
			Done:    func(context.Context) bool { return false },
		}
	}
	pl := base()
	pl.Script = func(context.Context) error { return boom }
	require.ErrorIs(t, pl.Run(t.Context()), boom)

	pl = base()
	pl.Check = func() error { return boom }
	require.ErrorIs(t, pl.Run(t.Context()), boom)

	pl = base()
	pl.Timeout = 50 * time.Millisecond
	require.EqualError(t, pl.Run(t.Context()), "not done after 50ms")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, base().Run(ctx), context.Canceled)
}

func TestLines(t *testing.T) {
	var out bytes.Buffer
	l := traffic.NewLines(&out)
	start := time.Now().Add(-1500 * time.Millisecond)
	l.SetStart(start)
	require.Equal(t, start, l.Start())
	require.InDelta(t, 2.0, l.Since(start.Add(2*time.Second)), 1e-9)
	l.Say("node-%d killed", 1)
	l.Print("summary: %d", 3)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^  1\.[5-9]s  node-1 killed$`, lines[0])
	require.Equal(t, "summary: 3", lines[1])
}
