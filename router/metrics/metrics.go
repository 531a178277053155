package metrics

import (
	"bufio"
	"expvar"
	"io"
	"net/http"
	"reflect"
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

const prefix = "narad_consume"

// Write writes src's counters in the Prometheus text exposition format.
func Write(w io.Writer, src Source) error {
	bw := bufio.NewWriter(w)
	each(reflect.ValueOf(src.Stats()), prefix, func(name string, value int64, counter bool) {
		kind := "gauge"
		if counter {
			kind = "counter"
		}
		bw.WriteString("# TYPE " + name + " " + kind + "\n")
		bw.WriteString(name + " " + strconv.FormatInt(value, 10) + "\n")
	})
	return bw.Flush()
}

// Handler serves Write over HTTP, for a Prometheus scrape.
func Handler(src Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		Write(w, src)
	})
}

// Expvar returns src's counters as an expvar.Var (a JSON object of router.Stats), to
// publish with expvar.Publish("consume", metrics.Expvar(node)).
func Expvar(src Source) expvar.Var {
	return expvar.Func(func() any { return src.Stats() })
}

// each walks the integer fields of a stats struct, nested structs included.
func each(v reflect.Value, prefix string, emit func(name string, value int64, counter bool)) {
	t := v.Type()
	for i := range t.NumField() {
		field, value := t.Field(i), v.Field(i)
		if !field.IsExported() {
			continue
		}
		name := prefix + "_" + snakeCase(field.Name)
		switch value.Kind() {
		case reflect.Struct:
			each(value, name, emit)
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
