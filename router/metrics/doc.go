// Package metrics exports a node's counters and latency histograms (router.Stats), and the
// lag of the topics a host names, in the forms a host plugs in without glue: the Prometheus
// text exposition format (Exporter.Write, Exporter.Handler) and expvar (Expvar); the
// modules router/metrics/prommetrics (a prometheus.Collector) and
// router/metrics/otelmetrics (OpenTelemetry instruments) are built on its Exporter, so every
// form has the same families, names and help.
//
// It is a package of its own so that importing router has no side effect: package expvar
// mounts GET /debug/vars on http.DefaultServeMux when it is first imported, and only a host
// that imports this package on purpose gets that.
//
// # Usage
//
//	http.Handle("/metrics", metrics.Handler(node))  // a Prometheus scrape, unlabelled
//	expvar.Publish("consume", metrics.Expvar(node)) // /debug/vars
//
//	// With the lag of two topics, labelled by topic:
//	e, err := metrics.New(node, metrics.Options{Topics: []string{"orders", "payments"}})
//	http.Handle("/metrics", e.Handler())
//
// # Families
//
// Every family has a HELP line saying what it counts and why one watches it, a TYPE line,
// and its unit in its name as Prometheus' conventions have it: a counter ends in _total, a
// duration in _seconds; a gauge of a count (partitions, descriptors) has no unit. Each field
// of router.Stats is a family named narad_consume_<group>_<field, snake_case>: an unsigned
// field is a counter (suffixed _total), a signed one a gauge, a router.Histogram a histogram
// of seconds (suffixed _seconds). For example narad_consume_delivered_total,
// narad_consume_shards_corrupt_skipped_total (the audit trail of skipped records),
// narad_consume_set_aside_now (partitions whose state could not be loaded; Node.Health lists
// them), narad_consume_committer_sync_failures_total and narad_consume_remote_probes_total.
// These names are those of the releases before HELP lines were written, kept so that the
// dashboards and alerts of hosts that scrape them go on working.
//
// The three histograms share the buckets of router.HistogramBounds, 100 µs to a minute:
//
//   - narad_consume_consume_wait_seconds: consumes that waited for a record, from the call to
//     the return (a long-poll that ran out of its wait included; consumes served at once are
//     not in it);
//   - narad_consume_remote_delivery_seconds: consumes served with another node's records,
//     from the call to the records' arrival;
//   - narad_consume_forwarded_ack_rpc_seconds: each RPC carrying forwarded acks, extends or
//     nacks to their owner, from its send to its reply (or the end of its budget).
//
// # Labels
//
// What is labelled, and why. The node's own families carry no label: each is one series per
// node, and the host's scrape adds the node's identity (its instance or job label), so the
// number of series is fixed whatever the node serves. They are not labelled by topic because
// the node counts per node, not per topic (a per-topic count on the consume path would cost
// a map lookup per call), and not by peer, for the cross-node families, because the node
// count is the host's, unbounded as far as the library knows, and a slow peer already shows
// in narad_consume_remote_slow_owners_total and in the histograms of the node that calls it.
//
// The lag of a topic is labelled by topic, and only for the topics the host lists in
// Options.Topics, at most MaxTopics: the host decides which topics are worth a series, and
// their number is bounded by what it listed. Each listed topic has five series:
//
//   - narad_consume_topic_oldest_unsettled_age_seconds{topic}: the age of its oldest unsettled
//     record on this node's partitions (router.Summarize's OldestUnsettledAge, the greatest
//     known of its partitions'), absent while none is known; SQS calls this the
//     ApproximateAgeOfOldestMessage, and it is what to alert on when consumers stall;
//   - narad_consume_topic_backlog{topic}: the records above its partitions' frontiers;
//   - narad_consume_topic_age_unknown_partitions{topic}: its partitions whose age is not known
//     (not loaded since the node started, a log that keeps no timestamps, a failed read);
//   - narad_consume_topic_blocked_keys{topic} and narad_consume_topic_deferred{topic}: on an
//     ordered topic, the keys with records waiting behind a holder, a delay or a redelivery,
//     and the records waiting so (router.Summarize's BlockedKeys and Deferred); zero
//     otherwise. How long the oldest has waited is TopicSummary.OldestBlockedSince;
//   - narad_consume_topic_quarantined_keys{topic}: on an ordered topic with QuarantineKeys,
//     the keys quarantined with a record of theirs (router.Summarize's QuarantinedKeys).
//
// Each scrape reads the status of each listed topic: one log Read per partition with a
// backlog, none on the consume path.
package metrics
