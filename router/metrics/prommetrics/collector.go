package prommetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"narad.dev/consume/router"
	"narad.dev/consume/router/metrics"
)

// Collector is a prometheus.Collector of an Exporter's families: counters, gauges and
// histograms, under the Exporter's names, HELP and labels. It is safe for concurrent use.
type Collector struct {
	exp   *metrics.Exporter
	descs []*prometheus.Desc // one per family, in the order of exp.Describe (and of Gather)
}

// NewCollector returns a collector of exp's families, to register with a
// prometheus.Registerer.
func NewCollector(exp *metrics.Exporter) *Collector {
	families := exp.Describe()
	c := &Collector{exp: exp, descs: make([]*prometheus.Desc, len(families))}
	for i, f := range families {
		c.descs[i] = prometheus.NewDesc(f.Name, f.Help, f.Labels, nil)
	}
	return c
}

// Describe sends the description of every family the collector collects.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect gathers the families once and sends a metric per sample; a sample the client
// refuses is sent as an invalid metric, which the registry reports with the scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for i, f := range c.exp.Gather() {
		for _, s := range f.Samples {
			m, err := metricOf(c.descs[i], f.Kind, &s)
			if err != nil {
				m = prometheus.NewInvalidMetric(c.descs[i], err)
			}
			ch <- m
		}
	}
}

// metricOf is one sample as a constant metric of the client.
func metricOf(desc *prometheus.Desc, kind metrics.Kind, s *metrics.Sample) (prometheus.Metric, error) {
	switch kind {
	case metrics.Counter:
		return prometheus.NewConstMetric(desc, prometheus.CounterValue, s.Value, s.LabelValues...)
	case metrics.Histogram:
		bounds := router.HistogramBounds()
		buckets := make(map[float64]uint64, len(bounds))
		var cumulative uint64
		for i, bound := range bounds {
			cumulative += s.Histogram.Counts[i]
			buckets[bound.Seconds()] = cumulative
		}
		return prometheus.NewConstHistogram(desc, s.Histogram.Count(), s.Histogram.Sum.Seconds(), buckets, s.LabelValues...)
	}
	return prometheus.NewConstMetric(desc, prometheus.GaugeValue, s.Value, s.LabelValues...)
}
