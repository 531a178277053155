package otelmetrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"narad.dev/consume/router"
	"narad.dev/consume/router/metrics"
	"narad.dev/consume/router/metrics/otelmetrics"
)

// source is a StatusSource with fixed answers: counters, a histogram, and one topic.
type source struct{ stats router.Stats }

func (s source) Stats() router.Stats { return s.stats }

func (s source) TopicStatus(topic string) ([]router.PartitionStatus, error) {
	if topic != "orders" {
		return nil, router.ErrUnknownTopic
	}
	return []router.PartitionStatus{{Backlog: 4, OldestUnsettledAge: 1500 * time.Millisecond}, {Backlog: 1, OldestUnsettledAge: -1}}, nil
}

func fixed() source {
	var rpc router.Histogram
	rpc.Counts[2], rpc.Counts[router.HistogramBuckets] = 3, 1
	rpc.Sum = 3*400*time.Microsecond + 2*time.Minute
	return source{router.Stats{Delivered: 42, SetAsideNow: 2, Remote: router.RemoteStats{Probes: 7}, ForwardedAckRPC: rpc}}
}

// collect registers exp's instruments and its histogram producer on a provider read by a
// manual reader, and collects once.
func collect(t *testing.T, exp *metrics.Exporter) (metricdata.ResourceMetrics, func() metricdata.ResourceMetrics) {
	t.Helper()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(otelmetrics.NewHistogramProducer(exp)))
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(context.Background())) })
	registration, err := otelmetrics.Register(provider, exp)
	require.NoError(t, err)
	again := func() metricdata.ResourceMetrics {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		return rm
	}
	rm := again()
	require.NoError(t, registration.Unregister())
	return rm, again
}

// byName is every metric collected, by name.
func byName(t *testing.T, rm metricdata.ResourceMetrics) map[string]metricdata.Metrics {
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, otelmetrics.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// Every family of the Exporter arrives, named as the package doc says, with its HELP as
// the description and its unit; counters and gauges from the observable instruments, the
// histograms from the producer (issue 26: an OpenTelemetry adapter).
func TestEveryFamilyArrives(t *testing.T) {
	exp, err := metrics.New(fixed(), metrics.Options{Topics: []string{"orders"}})
	require.NoError(t, err)
	rm, _ := collect(t, exp)
	got := byName(t, rm)
	assert.Len(t, got, len(exp.Describe()))

	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp()}
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "narad_consume_delivered", Description: "Records delivered to consumers under a lease (replays are not counted); the consume throughput.",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{{Value: 42}}},
	}, got["narad_consume_delivered"], opts...)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "narad_consume_set_aside_now", Description: got["narad_consume_set_aside_now"].Description,
		Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Value: 2}}},
	}, got["narad_consume_set_aside_now"], opts...)
	orders := attribute.NewSet(attribute.String("topic", "orders"))
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "narad_consume_topic_oldest_unsettled_age", Description: got["narad_consume_topic_oldest_unsettled_age"].Description, Unit: "s",
		Data: metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{{Attributes: orders, Value: 1.5}}},
	}, got["narad_consume_topic_oldest_unsettled_age"], opts...)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "narad_consume_topic_backlog", Description: got["narad_consume_topic_backlog"].Description,
		Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Attributes: orders, Value: 5}}},
	}, got["narad_consume_topic_backlog"], opts...)

	bounds := router.HistogramBounds()
	seconds := make([]float64, len(bounds))
	for i, b := range bounds {
		seconds[i] = b.Seconds()
	}
	counts := make([]uint64, router.HistogramBuckets+1)
	counts[2], counts[router.HistogramBuckets] = 3, 1
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "narad_consume_forwarded_ack_rpc", Description: got["narad_consume_forwarded_ack_rpc"].Description, Unit: "s",
		Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[float64]{{
			Attributes: *attribute.EmptySet(), Count: 4, Bounds: seconds, BucketCounts: counts, Sum: (1200*time.Microsecond + 2*time.Minute).Seconds(),
		}}},
	}, got["narad_consume_forwarded_ack_rpc"], opts...)

	described := map[string]string{}
	for _, f := range exp.Describe() {
		described[f.Help] = f.Name
	}
	for name, m := range got {
		assert.NotEmpty(t, described[m.Description], "%s: its description is a family's HELP", name)
	}
}

// Unregister stops the instruments' observations; the histograms are the reader's producer's.
func TestUnregisterStopsTheInstruments(t *testing.T) {
	exp, err := metrics.New(fixed(), metrics.Options{})
	require.NoError(t, err)
	_, again := collect(t, exp)
	got := byName(t, again())
	_, delivered := got["narad_consume_delivered"]
	assert.False(t, delivered, "observed after Unregister")
	assert.Contains(t, got, "narad_consume_consume_wait")
}
