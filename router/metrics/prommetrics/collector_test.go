package prommetrics_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/metrics"
	"narad.dev/consume/router/metrics/prommetrics"
	"narad.dev/consume/router/routertest"
)

// stats is a Source with fixed counters and a histogram with observations.
type stats router.Stats

func (s stats) Stats() router.Stats { return router.Stats(s) }

func fixedStats() stats {
	var wait router.Histogram
	wait.Counts[0], wait.Counts[5], wait.Counts[router.HistogramBuckets] = 3, 1, 2
	wait.Sum = 3*time.Millisecond + 2*time.Minute
	return stats{Delivered: 42, SetAsideNow: 2, Shards: router.ShardCounters{Acked: 40},
		Committer: router.CommitterStats{OpenDescriptors: 9}, ConsumeWait: wait}
}

// The collector emits what the Exporter's text says, family for family: names, HELP, TYPE,
// values, a histogram's buckets, sum and count (issue 26: a prometheus.Collector).
func TestCollectorMatchesTheText(t *testing.T) {
	exp, err := metrics.New(fixedStats(), metrics.Options{})
	require.NoError(t, err)
	var text strings.Builder
	require.NoError(t, exp.Write(&text))
	c := prommetrics.NewCollector(exp)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(text.String())))
	assert.Equal(t, len(exp.Describe()), testutil.CollectAndCount(c), "one series per unlabelled family")
	assert.Contains(t, text.String(), `narad_consume_consume_wait_seconds_bucket{le="+Inf"} 6`)
}

// The registry's own checks: a pedantic registry refuses a metric its collector did not
// describe, or described inconsistently; the linter flags names and HELP against
// Prometheus' conventions.
func TestCollectorPassesTheRegistrysChecks(t *testing.T) {
	exp, err := metrics.New(fixedStats(), metrics.Options{})
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(prommetrics.NewCollector(exp)))
	families, err := reg.Gather()
	require.NoError(t, err)
	assert.Len(t, families, len(exp.Describe()))
	problems, err := testutil.CollectAndLint(prommetrics.NewCollector(exp))
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// Over a node, with the lag of a topic labelled by topic.
func TestCollectorOfANode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs, routes := &routertest.MemLogs{}, &routertest.Routes{}
		routes.Set("orders", 0)
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New()})
		require.NoError(t, err)
		defer func() { require.NoError(t, node.Close()) }()
		off := logs.Log("orders", 0).Append(nil, []byte("v"), time.Now())
		node.Appended("orders", 0, off+1)
		msgs, err := node.Consume(context.Background(), "orders", router.ConsumeOptions{})
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		time.Sleep(30 * time.Second)

		exp, err := metrics.New(node, metrics.Options{Topics: []string{"orders"}})
		require.NoError(t, err)
		c := prommetrics.NewCollector(exp)
		want := `
# HELP narad_consume_delivered_total Records delivered to consumers under a lease (replays are not counted); the consume throughput.
# TYPE narad_consume_delivered_total counter
narad_consume_delivered_total 1
# HELP narad_consume_topic_oldest_unsettled_age_seconds Age of the oldest unsettled record of the topic on this node's partitions, by its log timestamp against the node's clock (the greatest known; absent when none is known); alert when consumers stall.
# TYPE narad_consume_topic_oldest_unsettled_age_seconds gauge
narad_consume_topic_oldest_unsettled_age_seconds{topic="orders"} 30
`
		require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
			"narad_consume_delivered_total", "narad_consume_topic_oldest_unsettled_age_seconds"))
	})
}
