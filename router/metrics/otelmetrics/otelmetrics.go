package otelmetrics

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"narad.dev/consume/router"
	"narad.dev/consume/router/metrics"
)

// ScopeName is the instrumentation scope of the instruments and of the histograms.
const ScopeName = "narad.dev/consume/router/metrics/otelmetrics"

// Register registers, on a meter of provider, an observable instrument for each counter and
// gauge family of exp (an Int64ObservableCounter per counter, an Int64ObservableGauge per
// gauge of a count, a Float64ObservableGauge in s per gauge of seconds), and one callback
// that observes them all from one exp.Gather. Unregister the registration to stop. It
// returns the first error of the meter's.
func Register(provider metric.MeterProvider, exp *metrics.Exporter) (metric.Registration, error) {
	meter := provider.Meter(ScopeName)
	families := exp.Describe()
	instruments := make([]metric.Observable, len(families)) // nil for a histogram
	var observed []metric.Observable
	for i, f := range families {
		name, unit := instrumentName(&f)
		opts := []metric.InstrumentOption{metric.WithDescription(f.Help), metric.WithUnit(unit)}
		var inst metric.Observable
		var err error
		switch {
		case f.Kind == metrics.Histogram:
			continue // see HistogramProducer
		case f.Kind == metrics.Counter:
			inst, err = meter.Int64ObservableCounter(name, int64CounterOptions(opts)...)
		case f.Unit == "seconds":
			inst, err = meter.Float64ObservableGauge(name, float64GaugeOptions(opts)...)
		default:
			inst, err = meter.Int64ObservableGauge(name, int64GaugeOptions(opts)...)
		}
		if err != nil {
			return nil, err
		}
		instruments[i] = inst
		observed = append(observed, inst)
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, f := range exp.Gather() {
			for _, s := range f.Samples {
				attrs := metric.WithAttributes(attributesOf(f.Labels, s.LabelValues)...)
				switch inst := instruments[i].(type) {
				case metric.Int64Observable:
					o.ObserveInt64(inst, int64(s.Value), attrs)
				case metric.Float64Observable:
					o.ObserveFloat64(inst, s.Value, attrs)
				}
			}
		}
		return nil
	}, observed...)
}

// instrumentName is a family's instrument name and unit (see the package doc).
func instrumentName(f *metrics.Family) (name, unit string) {
	name = f.Name
	if f.Kind == metrics.Counter {
		name = strings.TrimSuffix(name, "_total")
	}
	if f.Unit == "seconds" {
		return strings.TrimSuffix(name, "_seconds"), "s"
	}
	return name, ""
}

func attributesOf(labels, values []string) []attribute.KeyValue {
	if len(labels) == 0 {
		return nil
	}
	kv := make([]attribute.KeyValue, len(labels))
	for i := range labels {
		kv[i] = attribute.String(labels[i], values[i])
	}
	return kv
}

// The instrument options each constructor takes: the same description and unit.
func int64CounterOptions(opts []metric.InstrumentOption) []metric.Int64ObservableCounterOption {
	out := make([]metric.Int64ObservableCounterOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

func int64GaugeOptions(opts []metric.InstrumentOption) []metric.Int64ObservableGaugeOption {
	out := make([]metric.Int64ObservableGaugeOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

func float64GaugeOptions(opts []metric.InstrumentOption) []metric.Float64ObservableGaugeOption {
	out := make([]metric.Float64ObservableGaugeOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

// HistogramProducer produces an Exporter's histograms for an SDK reader
// (sdkmetric.WithProducer): cumulative, in s, with router.HistogramBounds' buckets, under
// ScopeName. It is safe for concurrent use.
type HistogramProducer struct {
	exp   *metrics.Exporter
	now   func() time.Time
	start time.Time // the start of every cumulative series: when the producer was made
}

// NewHistogramProducer returns a producer of exp's histograms, timestamped on the system
// clock (OpenTelemetry's points carry wall times).
func NewHistogramProducer(exp *metrics.Exporter) *HistogramProducer {
	return &HistogramProducer{exp: exp, now: time.Now, start: time.Now()}
}

// Produce returns the histograms now, one metric per histogram family.
func (p *HistogramProducer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	now := p.now()
	bounds := router.HistogramBounds()
	seconds := make([]float64, len(bounds))
	for i, b := range bounds {
		seconds[i] = b.Seconds()
	}
	var out []metricdata.Metrics
	for _, f := range p.exp.Gather() {
		if f.Kind != metrics.Histogram {
			continue
		}
		name, unit := instrumentName(&f)
		points := make([]metricdata.HistogramDataPoint[float64], len(f.Samples))
		for i, s := range f.Samples {
			points[i] = metricdata.HistogramDataPoint[float64]{
				Attributes:   attribute.NewSet(attributesOf(f.Labels, s.LabelValues)...),
				StartTime:    p.start,
				Time:         now,
				Count:        s.Histogram.Count(),
				Bounds:       seconds,
				BucketCounts: s.Histogram.Counts[:],
				Sum:          s.Histogram.Sum.Seconds(),
			}
		}
		out = append(out, metricdata.Metrics{Name: name, Description: f.Help, Unit: unit,
			Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: points}})
	}
	return []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: ScopeName}, Metrics: out}}, nil
}
