package metrics_test

import (
	"context"
	"encoding/json"
	"expvar"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/memfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/metrics"
	"narad.dev/consume/router/routertest"
)

// stats is a Source that is not a node: the exporters read any Stats.
type stats router.Stats

func (s stats) Stats() router.Stats { return router.Stats(s) }

func TestWriteNamesEveryField(t *testing.T) {
	src := stats{Delivered: 2, EmptyConsumes: 3, SetAsideNow: 1,
		Shards:    router.ShardCounters{Acked: 1, CorruptSkipped: 4},
		Committer: router.CommitterStats{Descriptors: 7, SyncFailures: 5}}
	var b strings.Builder
	require.NoError(t, metrics.Write(&b, src))
	body := b.String()
	for _, want := range []string{
		"# TYPE narad_consume_delivered_total counter\nnarad_consume_delivered_total 2\n",
		"narad_consume_empty_consumes_total 3\n",
		"# TYPE narad_consume_set_aside_now gauge\nnarad_consume_set_aside_now 1\n",
		"narad_consume_shards_acked_total 1\n",
		"narad_consume_shards_corrupt_skipped_total 4\n",
		"narad_consume_committer_sync_failures_total 5\n",
		"# TYPE narad_consume_committer_descriptors gauge\nnarad_consume_committer_descriptors 7\n",
	} {
		assert.Contains(t, body, want)
	}
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		if !strings.HasPrefix(l, "#") {
			assert.Regexp(t, `^narad_consume_[a-z_]+ -?\d+$`, l)
		}
	}
}

func TestHandlerAndExpvarOfANode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs, routes := &routertest.MemLogs{}, &routertest.Routes{}
		routes.Set("orders", 0)
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: memfs.New()})
		require.NoError(t, err)
		defer func() { require.NoError(t, node.Close()) }()
		for range 2 {
			off := logs.Log("orders", 0).Append(nil, []byte("v"), time.Now())
			node.Appended("orders", 0, off+1)
		}
		ctx := context.Background()
		msgs, err := node.Consume(ctx, "orders", router.ConsumeOptions{Max: 2})
		require.NoError(t, err)
		require.Len(t, msgs, 2)
		require.NoError(t, node.Ack(ctx, "orders", msgs[0].Receipt.String()))

		rec := httptest.NewRecorder()
		metrics.Handler(node).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		assert.Contains(t, rec.Header().Get("Content-Type"), "text/plain; version=0.0.4")
		assert.Contains(t, rec.Body.String(), "narad_consume_delivered_total 2\n")
		assert.Contains(t, rec.Body.String(), "narad_consume_shards_acked_total 1\n")

		var v expvar.Var = metrics.Expvar(node)
		var st router.Stats
		require.NoError(t, json.Unmarshal([]byte(v.String()), &st))
		assert.Equal(t, uint64(2), st.Delivered)
	})
}
