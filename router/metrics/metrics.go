package metrics

import (
	"bufio"
	"expvar"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"narad.dev/consume/router"
)

// Source is what the exporters read: a *router.Node, or anything else with the node's
// Stats (a wrapper that adds a host's own, say). Stats must be safe for concurrent use.
type Source interface {
	Stats() router.Stats
}

// StatusSource is a Source that also reports where a topic's partitions stand, as
// *router.Node does: what Options.Topics needs. TopicStatus must be safe for concurrent use.
type StatusSource interface {
	Source
	TopicStatus(topic string) ([]router.PartitionStatus, error)
}

// MaxTopics bounds Options.Topics: each topic listed adds three labelled series, and each
// scrape reads the status of every one of them.
const MaxTopics = 100

// Options say what an Exporter exports beside the node's counters and histograms. The zero
// value exports those alone, unlabelled.
type Options struct {
	// Topics lists the topics whose lag is exported, one series per topic labelled
	// topic="<name>": the age of the oldest unsettled record, the backlog, and the partitions
	// whose age is not known (see router.Summarize). At most MaxTopics, each named once, so
	// the number of series stays what the host chose. Each scrape calls TopicStatus for each
	// (one log Read per partition with a backlog); a topic it answers with an error (unknown,
	// the node closed) has no series in that scrape. The source must be a StatusSource.
	Topics []string
}

// Kind is what a family is, in Prometheus' terms.
type Kind uint8

// The kinds of families.
const (
	Counter   Kind = iota + 1 // only grows (it restarts from zero with the node)
	Gauge                     // a value now
	Histogram                 // observations in fixed buckets (router.HistogramBounds)
)

// String is the kind's name in the text format's TYPE line.
func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	}
	return "untyped"
}

// Family is one metric family, as each exporter presents it: a Prometheus family, or an
// OpenTelemetry instrument.
type Family struct {
	// Name is the family's name, with its unit and a counter's _total as Prometheus wants
	// them: narad_consume_delivered_total, narad_consume_consume_wait_seconds.
	Name string
	Help string // what it counts, and why one watches it
	Kind Kind
	// Unit is "seconds" for a family of durations (its name ends in _seconds), "" for one
	// that counts (records, calls, partitions: a count has no unit).
	Unit string
	// Labels names the family's labels; nil for a family of one unlabelled sample.
	Labels  []string
	Samples []Sample
}

// Sample is one series of a family: its label values, in the order of Family.Labels, and
// its value (Value, or Histogram for a histogram's).
type Sample struct {
	LabelValues []string
	Value       float64
	Histogram   router.Histogram
}

// An Exporter gathers a node's families (see the package doc for what they are). It is safe
// for concurrent use.
type Exporter struct {
	src    Source
	status StatusSource // nil without Options.Topics
	topics []string
}

// New returns an exporter of src's metrics. Options out of bounds (more than MaxTopics
// topics, a topic named twice or empty, topics for a source with no TopicStatus) are
// refused with an error wrapping router.ErrInvalidArgument.
func New(src Source, opts Options) (*Exporter, error) {
	e := &Exporter{src: src}
	if len(opts.Topics) == 0 {
		return e, nil
	}
	if len(opts.Topics) > MaxTopics {
		return nil, fmt.Errorf("%w: metrics.Options.Topics lists %d topics (at most %d)", router.ErrInvalidArgument, len(opts.Topics), MaxTopics)
	}
	for i, topic := range opts.Topics {
		if topic == "" || slices.Contains(opts.Topics[:i], topic) {
			return nil, fmt.Errorf("%w: metrics.Options.Topics names %q twice or empty", router.ErrInvalidArgument, topic)
		}
	}
	status, ok := src.(StatusSource)
	if !ok {
		return nil, fmt.Errorf("%w: metrics.Options.Topics needs a source with TopicStatus (a *router.Node), not a %T", router.ErrInvalidArgument, src)
	}
	e.status, e.topics = status, slices.Clone(opts.Topics)
	return e, nil
}

// Describe returns the exporter's families without their samples: the same set, in the
// same order, as every Gather.
func (e *Exporter) Describe() []Family {
	out := make([]Family, 0, len(statsFamilies)+len(topicFamilies))
	for _, f := range statsFamilies {
		out = append(out, f.Family)
	}
	if len(e.topics) > 0 {
		out = append(out, topicFamilies...)
	}
	return out
}

// Gather returns the families with their samples now: one Stats call, and, with
// Options.Topics, one TopicStatus per topic.
func (e *Exporter) Gather() []Family {
	stats := reflect.ValueOf(e.src.Stats())
	out := e.Describe()
	for i, f := range statsFamilies {
		v := stats.FieldByIndex(f.index)
		var s Sample
		switch f.Kind {
		case Histogram:
			s.Histogram = v.Interface().(router.Histogram)
		case Counter:
			s.Value = float64(v.Uint())
		default:
			s.Value = float64(v.Int())
		}
		out[i].Samples = []Sample{s}
	}
	if len(e.topics) == 0 {
		return out
	}
	age, backlog, unknown := &out[len(statsFamilies)], &out[len(statsFamilies)+1], &out[len(statsFamilies)+2]
	blocked, deferred, poisoned := &out[len(statsFamilies)+3], &out[len(statsFamilies)+4], &out[len(statsFamilies)+5]
	for _, topic := range e.topics {
		statuses, err := e.status.TopicStatus(topic)
		if err != nil {
			continue
		}
		sum := router.Summarize(statuses)
		labels := []string{topic}
		if sum.OldestUnsettledAge >= 0 {
			age.Samples = append(age.Samples, Sample{LabelValues: labels, Value: sum.OldestUnsettledAge.Seconds()})
		}
		backlog.Samples = append(backlog.Samples, Sample{LabelValues: labels, Value: float64(sum.Backlog)})
		unknown.Samples = append(unknown.Samples, Sample{LabelValues: labels, Value: float64(sum.AgeUnknown)})
		blocked.Samples = append(blocked.Samples, Sample{LabelValues: labels, Value: float64(sum.BlockedKeys)})
		deferred.Samples = append(deferred.Samples, Sample{LabelValues: labels, Value: float64(sum.Deferred)})
		poisoned.Samples = append(poisoned.Samples, Sample{LabelValues: labels, Value: float64(sum.QuarantinedKeys)})
	}
	return out
}

// Write writes the families in the Prometheus text exposition format (version 0.0.4): a
// HELP and a TYPE line for each, then its samples.
func (e *Exporter) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, f := range e.Gather() {
		writeFamily(bw, &f)
	}
	return bw.Flush()
}

// Handler serves Write over HTTP, for a Prometheus scrape.
func (e *Exporter) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		e.Write(w)
	})
}

// Write writes src's counters and histograms in the Prometheus text exposition format: New
// with no options, then Exporter.Write.
func Write(w io.Writer, src Source) error {
	e, _ := New(src, Options{}) // no options: nothing to refuse
	return e.Write(w)
}

// Handler serves Write over HTTP, for a Prometheus scrape.
func Handler(src Source) http.Handler {
	e, _ := New(src, Options{})
	return e.Handler()
}

// Expvar returns src's counters as an expvar.Var (a JSON object of router.Stats), to
// publish with expvar.Publish("consume", metrics.Expvar(node)).
func Expvar(src Source) expvar.Var {
	return expvar.Func(func() any { return src.Stats() })
}

const prefix = "narad_consume"

// statsFamily is a family drawn from a field of router.Stats.
type statsFamily struct {
	Family
	index []int // the field's index path in router.Stats
}

// statsFamilies are router.Stats' families, in the order of its fields.
var statsFamilies = familiesOf(reflect.TypeFor[router.Stats](), prefix, "", nil)

// familiesOf walks the fields of a stats struct, nested structs included: an unsigned
// integer is a counter (its name suffixed _total), a signed one a gauge, a router.Histogram
// a histogram of seconds (suffixed _seconds).
func familiesOf(t reflect.Type, name, path string, index []int) []statsFamily {
	var out []statsFamily
	for i := range t.NumField() {
		field := t.Field(i)
		if !field.IsExported() {
			continue
		}
		fname, fpath, findex := name+"_"+snakeCase(field.Name), path+field.Name, append(slices.Clip(index), i)
		f := Family{Help: help[fpath]}
		switch {
		case field.Type == reflect.TypeFor[router.Histogram]():
			f.Name, f.Kind, f.Unit = fname+"_seconds", Histogram, "seconds"
		case field.Type.Kind() == reflect.Struct:
			out = append(out, familiesOf(field.Type, fname, fpath+".", findex)...)
			continue
		case field.Type.Kind() == reflect.Uint64 || field.Type.Kind() == reflect.Uint32 || field.Type.Kind() == reflect.Uint:
			f.Name, f.Kind = fname+"_total", Counter
		case field.Type.Kind() == reflect.Int64 || field.Type.Kind() == reflect.Int32 || field.Type.Kind() == reflect.Int:
			f.Name, f.Kind = fname, Gauge
		default:
			continue
		}
		out = append(out, statsFamily{Family: f, index: findex})
	}
	return out
}

// topicFamilies are the families Options.Topics adds, in this order.
var topicFamilies = []Family{
	{Name: prefix + "_topic_oldest_unsettled_age_seconds", Help: topicAgeHelp, Kind: Gauge, Unit: "seconds", Labels: []string{"topic"}},
	{Name: prefix + "_topic_backlog", Help: topicBacklogHelp, Kind: Gauge, Labels: []string{"topic"}},
	{Name: prefix + "_topic_age_unknown_partitions", Help: topicUnknownHelp, Kind: Gauge, Labels: []string{"topic"}},
	{Name: prefix + "_topic_blocked_keys", Help: topicBlockedHelp, Kind: Gauge, Labels: []string{"topic"}},
	{Name: prefix + "_topic_deferred", Help: topicDeferredHelp, Kind: Gauge, Labels: []string{"topic"}},
	{Name: prefix + "_topic_quarantined_keys", Help: topicQuarantinedKeysHelp, Kind: Gauge, Labels: []string{"topic"}},
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

// writeFamily writes one family in the text format.
func writeFamily(w *bufio.Writer, f *Family) {
	w.WriteString("# HELP " + f.Name + " " + helpEscaper.Replace(f.Help) + "\n")
	w.WriteString("# TYPE " + f.Name + " " + f.Kind.String() + "\n")
	for _, s := range f.Samples {
		if f.Kind != Histogram {
			writeSample(w, f.Name, f.Labels, s.LabelValues, "", formatValue(s.Value))
			continue
		}
		bounds := router.HistogramBounds()
		var cumulative uint64
		for i, bound := range bounds {
			cumulative += s.Histogram.Counts[i]
			writeSample(w, f.Name+"_bucket", f.Labels, s.LabelValues, formatValue(bound.Seconds()), strconv.FormatUint(cumulative, 10))
		}
		cumulative += s.Histogram.Counts[router.HistogramBuckets]
		writeSample(w, f.Name+"_bucket", f.Labels, s.LabelValues, "+Inf", strconv.FormatUint(cumulative, 10))
		writeSample(w, f.Name+"_sum", f.Labels, s.LabelValues, "", formatValue(s.Histogram.Sum.Seconds()))
		writeSample(w, f.Name+"_count", f.Labels, s.LabelValues, "", strconv.FormatUint(cumulative, 10))
	}
}

// writeSample writes one line: name{labels, le} value (le only for a histogram's bucket).
func writeSample(w *bufio.Writer, name string, labels, values []string, le, value string) {
	w.WriteString(name)
	if len(labels) > 0 || le != "" {
		w.WriteByte('{')
		for i, label := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(label + `="` + labelEscaper.Replace(values[i]) + `"`)
		}
		if le != "" {
			if len(labels) > 0 {
				w.WriteByte(',')
			}
			w.WriteString(`le="` + le + `"`)
		}
		w.WriteByte('}')
	}
	w.WriteString(" " + value + "\n")
}

// formatValue writes integers as integers (a counter reads 1000000, not 1e+06) and the
// rest in the shortest form that reads back the same.
func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// The text format's escapes: a HELP line escapes backslash and newline, a label value
// double quotes too.
var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)
