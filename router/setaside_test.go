package router_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	routermetrics "narad.dev/consume/router/metrics"
	"narad.dev/consume/router/routertest"
)

// logLines is a slog handler's output, safe to read while the node logs.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// Issue 9 item 3 (checklist row 21): with one partition's state unreadable, the topic's other
// partition serves every unpinned consume and parks long-polls; the broken one is set aside
// (logged once, counted, listed by Health), retried with backoff on the node's clock by the
// scans that reach it, and rejoins once its state loads, logged once as recovered.
func TestBrokenPartitionIsSetAside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		logs := &logLines{}
		h.cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		h.close()
		require.NoError(t, h.fs.MkdirAll("/state/orders/1/consumer.ahead")) // a state file that is a directory
		h.start()
		defer h.close()
		h.produce(0, 40)
		h.produce(1, 5)

		for i := range 40 {
			msgs, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{})
			require.NoError(t, err, "consume %d", i)
			require.Len(t, msgs, 1, "consume %d", i)
			assert.Equal(t, int32(0), msgs[0].Partition)
		}
		st := h.node.Stats()
		assert.Equal(t, int64(1), st.SetAsideNow)
		assert.Equal(t, uint64(1), st.SetAsides)
		health := h.node.Health()
		require.Len(t, health.SetAside, 1)
		aside := health.SetAside[0]
		assert.Equal(t, "orders", aside.Topic)
		assert.Equal(t, int32(1), aside.Partition)
		assert.Error(t, aside.Err)
		assert.Equal(t, aside.Since.Add(100*time.Millisecond), aside.RetryAt, "first retry after 100 ms")
		assert.Equal(t, 1, logs.count("set aside"), "logged once")

		_, err := h.node.Consume(context.Background(), "orders", router.ConsumeOptions{Pinned: true, Partition: 1})
		var setAside *router.SetAsideError
		require.ErrorAs(t, err, &setAside, "a pinned consume asked for that partition")
		assert.Equal(t, int32(1), setAside.Partition)

		// A long-poll parks rather than answering the error, and is served from partition 0.
		got := h.async(router.ConsumeOptions{Wait: time.Millisecond})
		synctest.Wait()
		assert.Empty(t, <-got, "parked for its wait and answered empty")
		got = h.async(router.ConsumeOptions{Wait: time.Minute})
		synctest.Wait()
		assert.Equal(t, 1, h.node.Parked("orders"))
		h.produce(0, 1)
		msgs := <-got
		require.Len(t, msgs, 1)
		assert.Equal(t, int32(0), msgs[0].Partition)

		// Past the retry time, the next scan retries; still broken, the backoff doubles.
		time.Sleep(100 * time.Millisecond)
		assert.Empty(t, h.consume(router.ConsumeOptions{}))
		aside = h.node.Health().SetAside[0]
		assert.Equal(t, 2, aside.Failures)
		assert.Equal(t, time.Now().Add(200*time.Millisecond), aside.RetryAt)
		time.Sleep(200 * time.Millisecond)
		assert.Empty(t, h.consume(router.ConsumeOptions{}))
		assert.Equal(t, time.Now().Add(400*time.Millisecond), h.node.Health().SetAside[0].RetryAt)
		assert.Equal(t, 1, logs.count("set aside"), "failed retries are not logged again")

		// Repaired: skipped until its retry time, then it rejoins and serves.
		require.NoError(t, h.fs.RemoveAll("/state/orders/1/consumer.ahead"))
		assert.Empty(t, h.consume(router.ConsumeOptions{}), "not retried before its time")
		time.Sleep(400 * time.Millisecond)
		msgs = h.consume(router.ConsumeOptions{Max: 10})
		assert.Equal(t, []int64{0, 1, 2, 3, 4}, offsetsOf(msgs))
		st = h.node.Stats()
		assert.Equal(t, int64(0), st.SetAsideNow)
		assert.Equal(t, uint64(1), st.SetAsideRecovered)
		assert.Empty(t, h.node.Health().SetAside)
		assert.Equal(t, 1, logs.count("rejoins"), "logged once as recovered")
	})
}

// The backoff stops doubling at 30 s.
func TestSetAsideBackoffIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0, 1)
		h.close()
		require.NoError(t, h.fs.MkdirAll("/state/orders"))
		require.NoError(t, h.fs.WriteFile("/state/orders/1", []byte("x"))) // a partition directory that is a file
		h.start()
		defer h.close()
		assert.Empty(t, h.consume(router.ConsumeOptions{}))
		assert.Empty(t, h.consume(router.ConsumeOptions{}))
		for range 12 {
			time.Sleep(h.node.Health().SetAside[0].RetryAt.Sub(time.Now()))
			assert.Empty(t, h.consume(router.ConsumeOptions{}))
			assert.Empty(t, h.consume(router.ConsumeOptions{}))
		}
		aside := h.node.Health().SetAside[0]
		assert.Equal(t, 13, aside.Failures)
		assert.Equal(t, time.Now().Add(30*time.Second), aside.RetryAt)
		h.node.DropPartition("orders", 1)
		assert.Empty(t, h.node.Health().SetAside, "a dropped partition loads afresh at its next touch")
	})
}

// The three shapes of broken state on a real directory, including a symbolic link out of it:
// every unpinned consume is served by the healthy partition, and metrics count the broken one.
func TestBrokenStateShapesOnDisk(t *testing.T) {
	shapes := map[string]func(t *testing.T, dir string){
		"state file is a directory": func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "orders", "1", "consumer.ahead"), 0o755))
		},
		"state file is a symlink out of its directory": func(t *testing.T, dir string) {
			outside := filepath.Join(t.TempDir(), "elsewhere")
			require.NoError(t, os.WriteFile(outside, make([]byte, 8), 0o644))
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "orders", "1"), 0o755))
			require.NoError(t, os.Symlink(outside, filepath.Join(dir, "orders", "1", "consumer.offset")))
		},
		"partition directory is a file": func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "orders"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "orders", "1"), nil, 0o644))
		},
	}
	for name, breakIt := range shapes {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			breakIt(t, dir)
			routes := &routertest.Routes{}
			routes.Set("orders", 0, 1)
			logs := &routertest.MemLogs{}
			for p := range int32(2) {
				log := logs.Log("orders", p)
				for range 20 {
					log.Append(nil, []byte("v"), time.Time{})
				}
			}
			node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: dir, Clock: routertest.NewClock(time.Unix(1, 0))})
			require.NoError(t, err)
			defer func() { require.NoError(t, node.Close()) }()
			for i := range 20 {
				msgs, err := node.Consume(context.Background(), "orders", router.ConsumeOptions{})
				require.NoError(t, err, "consume %d", i)
				require.Len(t, msgs, 1, "consume %d", i)
				assert.Equal(t, int32(0), msgs[0].Partition)
			}
			var metrics bytes.Buffer
			require.NoError(t, routermetrics.Write(&metrics, node))
			assert.Contains(t, metrics.String(), "narad_consume_set_aside_now 1\n")
			assert.Contains(t, metrics.String(), "narad_consume_set_asides_total 1\n")
			require.Len(t, node.Health().SetAside, 1)
		})
	}
}
