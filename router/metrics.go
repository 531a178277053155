package router

import (
	"bufio"
	"expvar"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode"
)

// Metrics export the node's counters (Stats) in the two forms a host plugs in without glue:
// the Prometheus text exposition format, and expvar.
//
// Each field of Stats becomes a metric named narad_consume_<group>_<field, snake_case>:
// unsigned fields are counters (suffixed _total), signed ones gauges. For example
// narad_consume_delivered_total (records delivered under a lease; replays are not counted),
// narad_consume_shards_acked_total, narad_consume_shards_corrupt_skipped_total (the audit
// trail of skipped records), narad_consume_set_aside_now (partitions whose state could not be
// loaded; Health lists them), narad_consume_committer_sync_failures_total and
// narad_consume_committer_descriptors.

const metricPrefix = "narad_consume"

// WriteMetrics writes the node's counters in the Prometheus text exposition format.
func (n *Node) WriteMetrics(w io.Writer) error {
	bw := bufio.NewWriter(w)
	eachMetric(reflect.ValueOf(n.Stats()), metricPrefix, func(name string, value int64, counter bool) {
		kind := "gauge"
		if counter {
			kind = "counter"
		}
		bw.WriteString("# TYPE " + name + " " + kind + "\n")
		bw.WriteString(name + " " + strconv.FormatInt(value, 10) + "\n")
	})
	return bw.Flush()
}

// MetricsHandler serves WriteMetrics over HTTP, for a Prometheus scrape.
func (n *Node) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		n.WriteMetrics(w)
	})
}

// Expvar returns the node's counters as an expvar.Var (a JSON object of Stats), to publish
// with expvar.Publish("consume", node.Expvar()).
func (n *Node) Expvar() expvar.Var {
	return expvar.Func(func() any { return n.Stats() })
}

// eachMetric walks the integer fields of a stats struct, nested structs included.
func eachMetric(v reflect.Value, prefix string, emit func(name string, value int64, counter bool)) {
	t := v.Type()
	for i := range t.NumField() {
		field, value := t.Field(i), v.Field(i)
		if !field.IsExported() {
			continue
		}
		name := prefix + "_" + snakeCase(field.Name)
		switch value.Kind() {
		case reflect.Struct:
			eachMetric(value, name, emit)
		case reflect.Uint64, reflect.Uint32, reflect.Uint:
			emit(name+"_total", int64(value.Uint()), true)
		case reflect.Int64, reflect.Int32, reflect.Int:
			emit(name, value.Int(), false)
		}
	}
}

// snakeCase turns a Go field name into a metric name part: EmptyConsumes → empty_consumes.
func snakeCase(s string) string {
	var b strings.Builder
	runes := []rune(s)
	for i, r := range runes {
		if unicode.IsUpper(r) {
			prevLower := i > 0 && unicode.IsLower(runes[i-1])
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1]) && i > 0 && unicode.IsUpper(runes[i-1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
