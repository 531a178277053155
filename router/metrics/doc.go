// Package metrics exports a node's counters (router.Stats) in the two forms a host plugs in
// without glue: the Prometheus text exposition format (Write, Handler) and expvar (Expvar).
//
// It is a package of its own so that importing router has no side effect: package expvar
// mounts GET /debug/vars on http.DefaultServeMux when it is first imported, and only a host
// that imports this package on purpose gets that.
//
// # Usage
//
//	http.Handle("/metrics", metrics.Handler(node)) // a Prometheus scrape
//	expvar.Publish("consume", metrics.Expvar(node)) // /debug/vars
//
// # Names
//
// Each field of router.Stats becomes a metric named narad_consume_<group>_<field,
// snake_case>: unsigned fields are counters (suffixed _total), signed ones gauges. For
// example narad_consume_delivered_total (records delivered under a lease; replays are not
// counted), narad_consume_shards_acked_total, narad_consume_shards_corrupt_skipped_total
// (the audit trail of skipped records), narad_consume_set_aside_now (partitions whose state
// could not be loaded; Node.Health lists them), narad_consume_committer_sync_failures_total
// and narad_consume_committer_descriptors.
package metrics
