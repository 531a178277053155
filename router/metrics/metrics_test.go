package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"expvar"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/metrics"
	"narad.dev/consume/router/routertest"
)

var update = flag.Bool("update", false, "rewrite testdata/metrics.golden from what Write writes")

// stats is a Source that is not a node: the exporters read any Stats.
type stats router.Stats

func (s stats) Stats() router.Stats { return router.Stats(s) }

// statuses is a StatusSource with fixed answers per topic; a topic it does not know
// answers ErrUnknownTopic.
type statuses struct {
	stats
	topics map[string][]router.PartitionStatus
}

func (s statuses) TopicStatus(topic string) ([]router.PartitionStatus, error) {
	st, ok := s.topics[topic]
	if !ok {
		return nil, router.ErrUnknownTopic
	}
	return st, nil
}

// goldenSource is the source of the golden text: a value in a field of each group, a
// histogram with observations in three buckets and above the last, and topics with a
// known age, with none known, and with a name that needs escaping.
func goldenSource() statuses {
	var wait router.Histogram
	wait.Counts[0], wait.Counts[3], wait.Counts[14], wait.Counts[router.HistogramBuckets] = 2, 1, 4, 1
	wait.Sum = 2*50*time.Microsecond + time.Millisecond + 4*time.Second + 2*time.Minute
	return statuses{
		stats: stats{Consumes: 12, EmptyConsumes: 3, Delivered: 1_000_000, SetAsideNow: 1,
			Shards:         router.ShardCounters{Acked: 9, CorruptSkipped: 4},
			Committer:      router.CommitterStats{Descriptors: 7, SyncFailures: 5},
			Remote:         router.RemoteStats{Probes: 6},
			ConsumeWait:    wait,
			RemoteDelivery: router.Histogram{Counts: [router.HistogramBuckets + 1]uint64{4: 1}, Sum: 2 * time.Millisecond},
		},
		topics: map[string][]router.PartitionStatus{
			"orders": {
				{Partition: 0, Backlog: 10, OldestUnsettledAge: 90 * time.Second},
				{Partition: 1, Backlog: 0, OldestUnsettledAge: 0},
				{Partition: 2, Backlog: 5, OldestUnsettledAge: -1},
			},
			"cold":       {{Partition: 0, OldestUnsettledAge: -1}},
			`we"ird\one`: {{Partition: 0, Backlog: 1, OldestUnsettledAge: 1500 * time.Millisecond}},
		},
	}
}

// The golden text of the metrics: each family's HELP, TYPE and unit suffix, the labels of
// the topic families, a histogram's buckets, and the names hosts already scrape (issue 26:
// metrics that explain themselves). go test -run TestGolden -update rewrites it.
func TestGolden(t *testing.T) {
	e, err := metrics.New(goldenSource(), metrics.Options{Topics: []string{"orders", "cold", "absent", `we"ird\one`}})
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, e.Write(&b))
	path := filepath.Join("testdata", "metrics.golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), b.String(), "go test -run TestGolden -update rewrites %s", path)
}

// Every family has a HELP sentence, a TYPE, a name in Prometheus' form with its unit, and
// its own name; every HELP entry belongs to a family (none is left behind by a renamed
// field).
func TestEveryFamilyExplainsItself(t *testing.T) {
	e, err := metrics.New(goldenSource(), metrics.Options{Topics: []string{"orders"}})
	require.NoError(t, err)
	families := e.Describe()
	seen := map[string]bool{}
	name := regexp.MustCompile(`^narad_consume_[a-z][a-z0-9_]*[a-z0-9]$`)
	for _, f := range families {
		assert.Regexp(t, name, f.Name)
		assert.False(t, seen[f.Name], "%s twice", f.Name)
		seen[f.Name] = true
		assert.Regexp(t, `^[A-Za-z].{20,}\.$`, f.Help, "%s: a sentence", f.Name)
		switch f.Kind {
		case metrics.Counter:
			assert.True(t, strings.HasSuffix(f.Name, "_total"), f.Name)
			assert.Empty(t, f.Unit, f.Name)
		case metrics.Histogram:
			assert.True(t, strings.HasSuffix(f.Name, "_seconds"), f.Name)
			assert.Equal(t, "seconds", f.Unit, f.Name)
		case metrics.Gauge:
			assert.Equal(t, strings.HasSuffix(f.Name, "_seconds"), f.Unit == "seconds", f.Name)
			assert.False(t, strings.HasSuffix(f.Name, "_total"), f.Name)
		default:
			t.Errorf("%s: kind %v", f.Name, f.Kind)
		}
		for _, l := range f.Labels {
			assert.Equal(t, "topic", l, "%s: the topic is the only label", f.Name)
		}
	}
	assert.Equal(t, metrics.HelpEntries(), len(families)-6, "a HELP entry that no field of router.Stats uses")
	// The histograms, and the six families of Options.Topics.
	for _, want := range []string{"narad_consume_consume_wait_seconds", "narad_consume_remote_delivery_seconds",
		"narad_consume_forwarded_ack_rpc_seconds", "narad_consume_topic_oldest_unsettled_age_seconds",
		"narad_consume_topic_backlog", "narad_consume_topic_age_unknown_partitions",
		"narad_consume_topic_blocked_keys", "narad_consume_topic_deferred", "narad_consume_topic_quarantined_keys"} {
		assert.True(t, seen[want], want)
	}
}

// Without Options.Topics nothing is labelled: the node's families alone, one sample each.
func TestNoTopicsNoLabels(t *testing.T) {
	e, err := metrics.New(goldenSource(), metrics.Options{})
	require.NoError(t, err)
	for _, f := range e.Gather() {
		assert.Nil(t, f.Labels, f.Name)
		assert.Len(t, f.Samples, 1, f.Name)
		assert.False(t, strings.HasPrefix(f.Name, "narad_consume_topic_"), f.Name)
	}
	var b strings.Builder
	require.NoError(t, metrics.Write(&b, goldenSource().stats))
	assert.NotContains(t, b.String(), "topic=")
}

func TestNewRefusesOptionsOutOfBounds(t *testing.T) {
	many := make([]string, metrics.MaxTopics+1)
	for i := range many {
		many[i] = "t" + strings.Repeat("x", i)
	}
	for _, tc := range []struct {
		name   string
		src    metrics.Source
		topics []string
	}{
		{"more than MaxTopics", goldenSource(), many},
		{"a topic twice", goldenSource(), []string{"orders", "cold", "orders"}},
		{"an empty topic", goldenSource(), []string{""}},
		{"a source with no TopicStatus", goldenSource().stats, []string{"orders"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := metrics.New(tc.src, metrics.Options{Topics: tc.topics})
			assert.ErrorIs(t, err, router.ErrInvalidArgument)
			assert.Nil(t, e)
		})
	}
	_, err := metrics.New(goldenSource(), metrics.Options{Topics: many[:metrics.MaxTopics]})
	assert.NoError(t, err, "MaxTopics itself is allowed")
}

func TestHandlerAndExpvarOfANode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs, routes := &routertest.MemLogs{}, &routertest.Routes{}
		routes.Set("orders", 0)
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New()})
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
		require.NoError(t, node.Ack(ctx, "orders", msgs[0].Receipt))
		time.Sleep(45 * time.Second)

		e, err := metrics.New(node, metrics.Options{Topics: []string{"orders", "unknown"}})
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		e.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		assert.Contains(t, rec.Header().Get("Content-Type"), "text/plain; version=0.0.4")
		body := rec.Body.String()
		assert.Contains(t, body, "narad_consume_delivered_total 2\n")
		assert.Contains(t, body, "narad_consume_shards_acked_total 1\n")
		assert.Contains(t, body, `narad_consume_topic_oldest_unsettled_age_seconds{topic="orders"} 45`+"\n")
		assert.Contains(t, body, `narad_consume_topic_backlog{topic="orders"} 1`+"\n")
		assert.NotContains(t, body, `topic="unknown"`, "a topic the node does not know has no series")

		rec = httptest.NewRecorder()
		metrics.Handler(node).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		assert.Contains(t, rec.Body.String(), "narad_consume_delivered_total 2\n")

		var v expvar.Var = metrics.Expvar(node)
		var st router.Stats
		require.NoError(t, json.Unmarshal([]byte(v.String()), &st))
		assert.Equal(t, uint64(2), st.Delivered)
	})
}

// A writer that fails: Write says so.
type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteReportsTheWritersError(t *testing.T) {
	assert.Error(t, metrics.Write(failing{}, goldenSource().stats))
}

func BenchmarkWrite(b *testing.B) {
	e, err := metrics.New(goldenSource(), metrics.Options{Topics: []string{"orders", "cold"}})
	require.NoError(b, err)
	var buf strings.Builder
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		e.Write(&buf)
	}
}
