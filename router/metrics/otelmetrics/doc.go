// Package otelmetrics exports a node's metrics through OpenTelemetry, for a host whose
// metrics go out through an OpenTelemetry MeterProvider. It is a module of its own, so that
// the library's module needs no OpenTelemetry.
//
// Register puts an observable instrument for each counter and gauge family of a
// metrics.Exporter on the host's MeterProvider, all observed by one callback (one Gather
// per collection). OpenTelemetry's API has no observable histogram, so the histograms come
// from HistogramProducer, a Producer of the SDK that the host gives its reader.
//
// An instrument is named as the family less the suffixes OpenTelemetry's own Prometheus
// exporter adds back: a counter without _total, a duration without _seconds (its unit is
// "s"). A count has no unit. So narad_consume_delivered_total is the counter
// narad_consume_delivered, and narad_consume_consume_wait_seconds the histogram
// narad_consume_consume_wait in s; through that exporter both come out under their
// router/metrics names. Labels become attributes of the same names.
//
// # Usage
//
//	exp, err := metrics.New(node, metrics.Options{Topics: []string{"orders"}})
//	if err != nil { ... }
//	reader := sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithProducer(otelmetrics.NewHistogramProducer(exp)))
//	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
//	registration, err := otelmetrics.Register(provider, exp) // registration.Unregister() to stop
package otelmetrics
