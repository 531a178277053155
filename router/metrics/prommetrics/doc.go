// Package prommetrics is a prometheus.Collector over a node's metrics, for a host that
// serves its metrics with the Prometheus client (github.com/prometheus/client_golang)
// rather than with router/metrics' own text handler. It is a module of its own, so that the
// library's module needs no Prometheus client.
//
// The collector has the families of a metrics.Exporter, with their names, HELP and labels
// (see router/metrics): it describes them all, and each Collect gathers them once (one
// Stats call, and one TopicStatus per topic of metrics.Options.Topics).
//
// # Usage
//
//	exp, err := metrics.New(node, metrics.Options{Topics: []string{"orders"}})
//	if err != nil { ... }
//	prometheus.MustRegister(prommetrics.NewCollector(exp))
//	http.Handle("/metrics", promhttp.Handler())
package prommetrics
